#!/usr/bin/env bash
# The test command of the README (and of CI): set up, lint, run the whole suite: everything
# but the `slow` tier first, then the `slow` tier (minutes-long endurance runs such as five
# 2M-row CTAS in a row). Both must pass; a tier that selects no test (pytest's exit 5, e.g.
# when arguments narrow the run to other tests) counts as passed.
#
#   bash scripts/test.sh            the full suite, every backend (what CI runs)
#   bash scripts/test.sh --fast     lint, types, and every test once on one backend per
#                                   family (hive2 on HMS 2.3, glue on the emulator; the REST
#                                   suites over glue), without Spark, other JVM servers or the
#                                   `slow` tier
#
# The full suite runs test files in parallel (pytest-xdist, `--dist loadfile`: a file's tests
# stay in one worker, each worker starts the session servers its files need);
# LANCE_METASTORE_TEST_WORKERS sets the number of workers (default 2, 0 runs in this process).
# --fast runs on 3 workers by default with `--dist worksteal` (an idle worker takes tests from a
# busy one): its tests wait on servers part of the time, so 3 workers beat 2 on 2 cores, where
# the full suite's JVMs and Spark sessions want one worker per core; 4 lost to 3 (204-216 s
# against 222-250 s, alternated), each extra worker starting one more metastore. Each worker starts
# the session servers its tests need (its own HMS 2.3 and Glue emulator). Further arguments go
# to pytest.
# Starts every server it needs itself (Hive Metastore, Glue/STS/S3 endpoint, Spark) on
# 127.0.0.1 with ports chosen by the OS.
set -euo pipefail
cd "$(dirname "$0")/.."

fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi

if [ "$fast" -eq 1 ]; then
  bash scripts/setup.sh fast
else
  bash scripts/setup.sh
fi
# Every test process and the CLI, REST and writer processes it starts import the project's
# code: let Python keep the compiled modules (and pytest its rewritten test modules) in
# __pycache__ (ignored by git) instead of compiling them again in each process.
unset PYTHONDONTWRITEBYTECODE
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"

lint_paths=()
for path in src tests benchmarks examples; do [ -e "$path" ] && lint_paths+=("$path"); done
.venv/bin/ruff check "${lint_paths[@]}"
.venv/bin/ruff format --check "${lint_paths[@]}"
.venv/bin/mypy

default_workers=2
[ "$fast" -eq 1 ] && default_workers=3
workers="${LANCE_METASTORE_TEST_WORKERS:-$default_workers}"
parallel=()
if [ "$workers" != "0" ]; then
  if [ "$fast" -eq 1 ]; then
    parallel=(-n "$workers" --dist worksteal)
  else
    parallel=(-n "$workers" --dist loadfile)
  fi
fi

run_tier() {
  local status=0
  .venv/bin/python -m pytest -q -p no:cacheprovider "${parallel[@]}" -m "$1" "${@:2}" || status=$?
  if [ "$status" -eq 5 ]; then
    echo "test.sh: no test in the tier -m '$1'" >&2
    status=0
  fi
  return "$status"
}
if [ "$fast" -eq 1 ]; then
  run_tier "not slow" --fast "$@"
  exit 0
fi
run_tier "not slow" "$@"
run_tier "slow" "$@"
