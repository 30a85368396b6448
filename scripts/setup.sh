#!/usr/bin/env bash
# Everything a fresh machine needs: Java 17 and Maven (for the local Hive Metastores and
# Spark), a virtualenv in .venv with the project and its test dependencies, and the Hive
# Metastore 3.1 and 4.0 releases the tests run (fetched once per machine into the user cache;
# later runs find them there). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

bash .ci/install-java.sh

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"

# The standalone metastores the tests start (LANCE_METASTORE_SKIP_HMS_FETCH=1 skips this).
if [ -z "${LANCE_METASTORE_SKIP_HMS_FETCH:-}" ]; then
  .venv/bin/python -m lance_metastore.hms_dist 3.1 4
fi
