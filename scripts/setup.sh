#!/usr/bin/env bash
# Everything a fresh machine needs: Java 17 and Maven (for the local Hive Metastores and
# Spark), a virtualenv in .venv with the project and its test dependencies, the Hive
# Metastore 3.1 and 4.0 releases the tests run (fetched once per machine into the user cache),
# and .venv-sql with the project and Spark 3.5 for SQL through lance-spark (its jars fetched
# once per machine into the Ivy cache of lance_metastore.spark.sql). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { echo "[setup $(date +%H:%M:%S)] $*"; }

step "checking Java 17 and the Kerberos tools ..."
bash .ci/install-java.sh
bash .ci/install-kerberos.sh

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  step "creating the virtualenv .venv ..."
  "$PYTHON" -m venv .venv
fi
step "installing the project and its test dependencies into .venv" \
  "(about 2 minutes the first time, seconds after) ..."
.venv/bin/python -m pip install --quiet --upgrade pip
# The [kerberos] extra (in [test]) builds C extensions against the system's Kerberos library:
# it needs krb5-config (libkrb5-dev), a C compiler and the interpreter's headers.
can_build_kerberos() {
  command -v krb5-config >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1 &&
    .venv/bin/python -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'
}
if can_build_kerberos; then
  .venv/bin/python -m pip install --quiet -e ".[test]"
else
  # Install everything else of [test]; the Kerberos tests then skip.
  echo "setup: cannot build the [kerberos] extra (libkrb5-dev, gcc, Python headers);" \
    "installing [test] without it" >&2
  .venv/bin/python -m pip install --quiet -e .
  .venv/bin/python - <<'PY' | xargs .venv/bin/python -m pip install --quiet
import re
try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
kerberos = {re.split(r"[<>=\[ ;]", r)[0] for r in project["optional-dependencies"]["kerberos"]}
for requirement in project["optional-dependencies"]["test"]:
    if re.split(r"[<>=\[ ;]", requirement)[0] not in kerberos:
        print(repr(requirement))
PY
fi

# The standalone metastores the tests start (LANCE_METASTORE_SKIP_HMS_FETCH=1 skips this).
if [ -z "${LANCE_METASTORE_SKIP_HMS_FETCH:-}" ]; then
  step "checking the Hive Metastore 3.1 and 4.0 releases (fetched once per machine) ..."
  .venv/bin/python -m lance_metastore.hive.distributions 3.1 4
fi

# Spark SQL through lance-spark 0.4.0 (docs/spark.md): its builds served here need Spark 3.5.
step "installing the project and Spark 3.5 into .venv-sql (seconds once installed) ..."
if [ ! -x .venv-sql/bin/python ]; then
  "$PYTHON" -m venv .venv-sql
fi
.venv-sql/bin/python -m pip install --quiet --upgrade pip
.venv-sql/bin/python -m pip install --quiet -e ".[sql]"
if ! .venv-sql/bin/python -c "import sys; from lance_metastore.spark.sql import jars_fetched; sys.exit(not jars_fetched())"; then
  step "fetching lance-spark 0.4.0's jars into the machine's Ivy cache (about 200 MB, once) ..."
fi
if ! .venv-sql/bin/python -c "from lance_metastore.spark.sql import fetch_jars; fetch_jars()" \
  > .venv-sql/fetch-jars.log 2>&1; then
  cat .venv-sql/fetch-jars.log >&2
  echo "setup: fetching lance-spark's jars from Maven Central failed (log above)" >&2
  exit 1
fi
step "ready: source .venv/bin/activate for the lance-metastore command"
