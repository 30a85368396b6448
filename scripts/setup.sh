#!/usr/bin/env bash
# Sets up what one command needs, and nothing more. Safe to run again (seconds once done).
#
#   bash scripts/setup.sh main   the main job (scripts/demo.sh): Java 17 and .venv with the
#                                project's hive and spark extras (Spark 4, whose wheel carries
#                                the Hive Metastore 2.3 jars)
#   bash scripts/setup.sh sql    the SQL demo (scripts/demo.sh --sql): .venv-sql with Spark 3.5
#                                and the hive, server and sql extras, and lance-spark's jars
#   bash scripts/setup.sh test   the test command (scripts/test.sh; the default): .venv with
#                                every extra and the test dependencies, the Kerberos tools, the
#                                Hive Metastore 3.1 and 4.0 releases, and everything of `sql`
#   bash scripts/setup.sh fast   the fast tier (scripts/test.sh --fast): `test` without the Hive
#                                Metastore 3.1 and 4.0 releases and `sql` (the tier starts no
#                                Spark and no metastore but the pyspark wheel's 2.3)
#
# The Hive Metastore releases are fetched once per machine into the user cache and lance-spark's
# jars into the Ivy cache of lance_metastore.spark.sql (LANCE_METASTORE_SKIP_HMS_FETCH=1 skips
# the releases).
set -euo pipefail
cd "$(dirname "$0")/.."

target="${1:-test}"
case "$target" in
  main | sql | test | fast) ;;
  *)
    echo "usage: bash scripts/setup.sh [main|sql|test|fast]" >&2
    exit 2
    ;;
esac

PYTHON="${PYTHON:-python3}"
step() { echo "[setup $(date +%H:%M:%S)] $*"; }

# pip install into a virtualenv, skipped when the same requirements went in before (a stamp of
# the arguments and pyproject.toml): the project is installed editable, so code changes need
# no reinstall. Quiet (pip -q: no line per package, no progress bars; errors still show), then
# one line: what was installed and how long it took, or that it already was.
#   pip_install VENV "what, for the reader" PIP-ARGS...
pip_install() {
  local venv="$1" what="$2"
  shift 2
  local stamp="$venv/.lance-metastore-installed"
  local wanted
  wanted="$(printf '%s\n' "$*" | cat - pyproject.toml | cksum)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    step "$what: already installed in $venv"
    return 0
  fi
  step "installing $what into $venv ..."
  local started before after
  started=$(date +%s)
  before=$("$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null | wc -l)
  if [ -x "$venv/bin/uv" ]; then
    "$venv/bin/uv" pip install -q --python "$venv/bin/python" "$@"
  else
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@"
  fi
  after=$("$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null | wc -l)
  step "installed $what: $((after - before)) new packages in $(($(date +%s) - started)) s"
  echo "$wanted" >"$stamp"
}

make_venv() {
  if [ ! -x "$1/bin/python" ]; then
    step "creating the virtualenv $1 ..."
    "$PYTHON" -m venv "$1"
  fi
}

# uv installs into the virtualenv what pip would, several times faster from an empty cache:
# pyspark 4 is an sdist only (a 456 MB wheel built on the first install), and uv builds,
# unpacks and links it in parallel (scripts/demo.sh's first run: docs/benchmarks.md). Where
# no uv wheel installs, pip does the work.
get_uv() {
  if [ ! -x "$1/bin/uv" ]; then
    "$1/bin/python" -m pip install -q --disable-pip-version-check 'uv>=0.4,<1' 2>/dev/null ||
      echo "setup: no uv for this platform; installing with pip" >&2
  fi
}

setup_main() {
  step "checking Java 17 ..."
  bash .ci/install-java.sh
  make_venv .venv
  get_uv .venv
  pip_install .venv "the project with its hive and spark extras (pyspark: 491 MB installed)" \
    -e ".[hive,spark]"
}

# The [kerberos] extra builds C extensions against the system's Kerberos library: it needs
# krb5-config (libkrb5-dev), a C compiler and the interpreter's headers.
can_build_kerberos() {
  command -v krb5-config >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1 &&
    .venv/bin/python -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'
}

setup_test() {
  step "checking Java 17 and the Kerberos tools ..."
  bash .ci/install-java.sh
  bash .ci/install-kerberos.sh
  make_venv .venv
  if can_build_kerberos; then
    pip_install .venv "the project with every extra and the test dependencies" -e ".[test]"
  else
    # Everything of [test] but Kerberos; the Kerberos tests then skip.
    echo "setup: cannot build the [kerberos] extra (libkrb5-dev, gcc, Python headers);" \
      "installing [test] without it" >&2
    local requirements
    requirements="$(
      .venv/bin/python - <<'PY'
import re
try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
for requirement in extras["test"]:
    if not requirement.startswith("lance-metastore["):
        print(requirement)
PY
    )"
    # shellcheck disable=SC2086 # one requirement per word
    pip_install .venv "the project with every extra but kerberos and the test dependencies" \
      -e ".[all,docs]" $requirements
  fi
  if [ "$target" = test ] && [ -z "${LANCE_METASTORE_SKIP_HMS_FETCH:-}" ]; then
    step "checking the Hive Metastore 3.1 and 4.0 releases (fetched once per machine) ..."
    .venv/bin/python -m lance_metastore.hive.distributions 3.1 3.1+s3 4
  fi
}

# Spark SQL through lance-spark 0.4.0 (docs/spark.md): its builds served here need Spark 3.5,
# so it has its own virtualenv.
setup_sql() {
  step "checking Java 17 ..."
  bash .ci/install-java.sh
  make_venv .venv-sql
  pip_install .venv-sql "the project with Spark 3.5 (the sql extra)" -e ".[sql,glue,hive,server]"
  if ! .venv-sql/bin/python -c "import sys; from lance_metastore.spark.sql import jars_fetched; sys.exit(not jars_fetched())"; then
    step "fetching lance-spark 0.4.0's jars into the machine's Ivy cache (515 MB, once) ..."
    if ! .venv-sql/bin/python -c "from lance_metastore.spark.sql import fetch_jars; fetch_jars()" \
      >.venv-sql/fetch-jars.log 2>&1; then
      cat .venv-sql/fetch-jars.log >&2
      echo "setup: fetching lance-spark's jars from Maven Central failed (log above)" >&2
      exit 1
    fi
  fi
}

case "$target" in
  main) setup_main ;;
  sql) setup_sql ;;
  test)
    setup_test
    setup_sql
    ;;
  fast) setup_test ;;
esac
if [ "$target" = sql ]; then
  step "ready (sql): .venv-sql"
else
  step "ready ($target): source .venv/bin/activate for the lance-metastore command"
fi
