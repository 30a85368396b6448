#!/usr/bin/env bash
# The main job of the README: the example PySpark pipeline (--sql: the Spark SQL pipeline,
# examples/sql_pipeline.py) on embedded defaults (a local Hive
# Metastore from the pyspark wheel with its state in ./.lance-metastore/hms, the CLI's default,
# tables under ./.lance-metastore/lake, Spark local[2]). It ends by printing the commands that
# show what it made. Each sets up only what it needs (scripts/setup.sh main, or sql).
set -euo pipefail
cd "$(dirname "$0")/.."

installing=$(date +%s%N)
if [ "${1:-}" = "--sql" ]; then
  bash scripts/setup.sh sql
else
  bash scripts/setup.sh main
fi
install_seconds=$(( ($(date +%s%N) - installing) / 1000000 ))e-3  # for the time breakdown
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"  # Spark local[2] stays on loopback
# The JVM's and Spark's start-up banners mean nothing to the reader of the demo (and no log
# setting reaches pyspark's driver JVM before it prints them): leave them out of its output.
banners='^(WARNING: Using incubator modules|Using Spark.s default log4j profile|Setting default log level to|To adjust logging level use|.* WARN NativeCodeLoader: )'
if [ "${1:-}" = "--sql" ]; then
  # The SQL pipeline: lance-spark's catalog (Spark 3.5, in .venv-sql) over our REST server.
  shift
  export PYSPARK_PYTHON="$PWD/.venv-sql/bin/python"
  export PYSPARK_DRIVER_PYTHON="$PWD/.venv-sql/bin/python"
  exec .venv-sql/bin/python examples/sql_pipeline.py "$@" 2> >(
    grep --line-buffered -v -E "$banners" >&2
  )
fi
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python examples/pipeline.py --install-seconds "$install_seconds" "$@" \
  2> >(grep --line-buffered -v -E "$banners" >&2)
