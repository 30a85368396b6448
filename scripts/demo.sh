#!/usr/bin/env bash
# The main job of the README: the example PySpark pipeline (--sql: the Spark SQL pipeline,
# examples/sql_pipeline.py) on embedded defaults (a local Hive
# Metastore from the pyspark wheel with its state in ./.lance-metastore/hms, the CLI's default,
# tables under ./.lance-metastore/lake, Spark local[2]). It ends by printing the commands that
# show what it made.
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
