#!/usr/bin/env bash
# The test command of the README (and of CI): set up, lint, run the whole suite.
# Starts every server it needs itself (Hive Metastore, Glue/STS/S3 endpoint, Spark) on
# 127.0.0.1 with ports chosen by the OS.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"

lint_paths=()
for path in src tests benchmarks examples; do [ -e "$path" ] && lint_paths+=("$path"); done
.venv/bin/ruff check "${lint_paths[@]}"
.venv/bin/ruff format --check "${lint_paths[@]}"
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
