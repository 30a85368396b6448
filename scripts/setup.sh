#!/usr/bin/env bash
# Everything a fresh machine needs: Java 17 (for the local Hive Metastore and Spark) and a
# virtualenv in .venv with the project and its test dependencies. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { echo "[setup $(date +%H:%M:%S)] $*"; }

step "checking Java 17 ..."
bash .ci/install-java.sh

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  step "creating the virtualenv .venv ..."
  "$PYTHON" -m venv .venv
fi
step "installing the project and its test dependencies into .venv" \
  "(about 2 minutes the first time, seconds after) ..."
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"
step "ready: source .venv/bin/activate for the lance-metastore command"
