#!/usr/bin/env bash
# The test command of the README (and of CI): set up, lint, run the whole suite: everything
# but the `slow` tier first, then the `slow` tier (minutes-long endurance runs such as five
# 2M-row CTAS in a row). Both must pass; a tier that selects no test (pytest's exit 5, e.g.
# when arguments narrow the run to other tests) counts as passed.
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
.venv/bin/mypy

run_tier() {
  local status=0
  .venv/bin/python -m pytest -q -p no:cacheprovider -m "$1" "${@:2}" || status=$?
  if [ "$status" -eq 5 ]; then
    echo "test.sh: no test in the tier -m '$1'" >&2
    status=0
  fi
  return "$status"
}
run_tier "not slow" "$@"
run_tier "slow" "$@"
