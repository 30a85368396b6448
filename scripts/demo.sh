#!/usr/bin/env bash
# The main job of the README: the example PySpark pipeline on embedded defaults (a local Hive
# Metastore from the pyspark wheel, local storage under ./.lance-metastore, Spark local[2]).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python examples/pipeline.py "$@"
