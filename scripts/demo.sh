#!/usr/bin/env bash
# The main job of the README: the example PySpark pipeline (--sql: the Spark SQL pipeline) on embedded defaults (a local Hive
# Metastore from the pyspark wheel, local storage under ./.lance-metastore, Spark local[2]).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
if [ "${1:-}" = "--sql" ]; then
  # The SQL pipeline: lance-spark's catalog (Spark 3.5, in .venv-sql) over our REST server.
  shift
  export PYSPARK_PYTHON="$PWD/.venv-sql/bin/python"
  export PYSPARK_DRIVER_PYTHON="$PWD/.venv-sql/bin/python"
  exec .venv-sql/bin/python examples/sql_pipeline.py "$@"
fi
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python examples/pipeline.py "$@"
