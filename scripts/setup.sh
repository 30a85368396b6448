#!/usr/bin/env bash
# Everything a fresh machine needs: Java 17 (for the local Hive Metastore and Spark), a
# virtualenv in .venv with the project and its test dependencies, and .venv-sql with the
# project and Spark 3.5 for SQL through lance-spark (its jars fetched once per machine into
# the Ivy cache of lance_metastore.spark.sql). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

bash .ci/install-java.sh

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"

# Spark SQL through lance-spark (docs/spark.md): its builds served here need Spark 3.5.
if [ ! -x .venv-sql/bin/python ]; then
  "$PYTHON" -m venv .venv-sql
fi
.venv-sql/bin/python -m pip install --quiet --upgrade pip
.venv-sql/bin/python -m pip install --quiet -e ".[sql]"
if ! .venv-sql/bin/python -c "from lance_metastore.spark.sql import fetch_jars; fetch_jars()" \
  > .venv-sql/fetch-jars.log 2>&1; then
  cat .venv-sql/fetch-jars.log >&2
  echo "setup: fetching lance-spark's jars from Maven Central failed (log above)" >&2
  exit 1
fi
