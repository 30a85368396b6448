"""``lance_namespace_urllib3_client``'s ``__init__`` (every generated REST API class) runs on
first use, not at import (:mod:`lance_metastore.rules.client_models`), and the package is whole
for whoever uses it then. Each check runs in a child interpreter, as a process starts."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import json, sys
exec(sys.argv[1])
api_loaded_after_import = "lance_namespace_urllib3_client.api" in sys.modules
import lance_namespace_urllib3_client as client
from lance_namespace_urllib3_client import ApiClient, TableApi
import lance_namespace_urllib3_client.api as api
from lance_namespace_urllib3_client.models.json_arrow_schema import JsonArrowSchema  # as lancedb
try:
    client.no_such_name
    missing = None
except AttributeError as error:
    missing = str(error)
print(json.dumps({
    "api_loaded_after_import": api_loaded_after_import,
    "version": client.__version__,
    "api_client": ApiClient.__module__,
    "table_api_is_the_submodules": TableApi is api.TableApi,
    "missing": missing,
}))
"""


def run_child(first: str) -> dict[str, object]:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, first], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr[-2000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


def test_importing_us_leaves_the_generated_client_api_unimported_until_used() -> None:
    from importlib.metadata import version

    found = run_child("import lance_metastore, lance_namespace, lance_metastore.cli.app")
    assert found == {
        "api_loaded_after_import": False,
        "version": version("lance-namespace-urllib3-client"),
        "api_client": "lance_namespace_urllib3_client.api_client",
        "table_api_is_the_submodules": True,
        "missing": "module 'lance_namespace_urllib3_client' has no attribute 'no_such_name'",
    }


def test_a_client_package_imported_before_us_is_left_as_it_is() -> None:
    found = run_child("import lance_namespace_urllib3_client; import lance_metastore")
    assert found["api_loaded_after_import"] is True
    assert found["api_client"] == "lance_namespace_urllib3_client.api_client"
    assert found["table_api_is_the_submodules"] is True


def test_version_imports_neither_lance_namespace_nor_the_cli() -> None:
    """``lance-metastore --version`` (the console script's entry point) answers before typer,
    rich, pyarrow or lance_namespace are imported; importing the package imports none of them
    either, and lance_namespace gets our aliases whenever it is imported later."""
    code = (
        "import sys\n"
        "from lance_metastore.launch import main\n"
        "main(['--version'])\n"
        "heavy = {'typer', 'rich', 'pyarrow', 'lance', 'lance_namespace_urllib3_client.models'}\n"
        "assert not heavy & set(sys.modules), heavy & set(sys.modules)\n"
        "# lance_namespace is registered, its __init__ (the models) not run yet\n"
        "assert 'LanceNamespace' not in vars(sys.modules.get('lance_namespace', sys))\n"
        "import lance_namespace\n"
        "assert lance_namespace._REGISTERED_IMPLS['hive3'] == 'lance_metastore.Hive3Namespace'\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "lance-metastore 0.1.0"
