#!/usr/bin/env bash
# Everything a fresh machine needs: Java 17 (for the local Hive Metastore and Spark) and a
# virtualenv in .venv with the project and its test dependencies. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

bash .ci/install-java.sh

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"
