"""Each optional part answers one line naming its extra when that extra is not installed.

Every check runs in a child interpreter of this environment where the extra's modules are made
unimportable (``sys.modules[name] = None``, which is how Python itself marks a module that may
not be imported), so the test environment's full install still tests the core-only case. A
real core-only install in a fresh venv: tests/test_quickstart.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lance_metastore.rules.extras import EXTRA_MODULES, install_hint

# What a user touches first for each extra, and the extra whose hint it must print.
ENTRANCES = [
    ("glue", "import lance_metastore; lance_metastore.GlueNamespace"),
    ("glue", "import lance_metastore; lance_metastore.connect('glue', {})"),
    ("hive", "import lance_metastore; lance_metastore.Hive3Namespace"),
    ("hive", "import lance_metastore; lance_metastore.connect('hive2', {'uri': 'thrift://h:1'})"),
    ("server", "import lance_metastore.rest"),
    ("spark", "import lance_metastore.spark as s; s.register(None)"),
    ("spark", "import lance_metastore.spark as s; s.LanceTable"),
    # A Hive namespace that vends S3 credentials needs boto3 for STS: the `aws` extra alone.
    (
        "aws",
        "import lance_metastore; lance_metastore.connect('hive2', {'uri': 'thrift://h:1', "
        "'credential_vendor.enabled': 'true', 'credential_vendor.aws_role_arn': "
        "'arn:aws:iam::123456789012:role/r'})._vendor._sts_client()",
    ),
]

CHILD = """
import json, sys
for name in json.loads(sys.argv[1]):
    sys.modules[name] = None  # unimportable, as if not installed
try:
    exec(sys.argv[2])
except ImportError as error:
    print(json.dumps({"type": type(error).__name__, "message": str(error)}))
else:
    print(json.dumps({"type": None}))
"""


def run_without(modules: frozenset[str], code: str) -> dict[str, str | None]:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(sorted(modules)), code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("extra", "code"), ENTRANCES)
def test_missing_extra_is_one_line_naming_it(extra: str, code: str) -> None:
    outcome = run_without(EXTRA_MODULES[extra], code)
    assert outcome["type"] == "MissingExtraError"
    message = outcome["message"]
    assert "\n" not in message
    assert message.endswith(install_hint(extra))


def test_the_core_imports_no_optional_part() -> None:
    every_optional = frozenset().union(*EXTRA_MODULES.values())
    code = (
        "import lance_metastore, lance_namespace, lance_metastore.cli.app\n"
        "assert 'lance_metastore.glue' not in sys.modules\n"
        "assert 'lance_metastore.hive' not in sys.modules\n"
        # the aliases are registered as class path strings, not imported classes
        "assert lance_metastore.ALIASES['glue'] == 'lance_metastore.GlueNamespace'\n"
    )
    assert run_without(every_optional, code) == {"type": None}


def test_other_import_errors_pass_through() -> None:
    """A missing module that no extra provides is a real fault, not a missing extra."""
    code = (
        "from lance_metastore.rules.extras import requires_extra\n"
        "with requires_extra('glue'):\n"
        "    import a_module_nobody_ships\n"
    )
    assert run_without(frozenset(), code)["type"] == "ModuleNotFoundError"


def test_all_installs_without_system_libraries() -> None:
    """``pip install '.[all]'`` needs no C library: Kerberos (which builds against libkrb5)
    is its own extra, and the test extra takes it besides."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]

    def closure(names: set[str]) -> set[str]:
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                for requirement in extras[name]:
                    if requirement.startswith("lance-metastore["):
                        todo += requirement.split("[", 1)[1].rstrip("]").split(",")
        return seen

    everything_in_all = closure({"all"})
    assert "kerberos" not in everything_in_all
    built_against_krb5 = {"kerberos", "gssapi"}
    requirements = {r.split(">")[0].split("[")[0] for e in everything_in_all for r in extras[e]}
    assert not requirements & built_against_krb5
    assert {"glue", "hive", "server", "spark", "lancedb"} <= everything_in_all
    assert {"kerberos", "docs"} <= closure({"test"})
