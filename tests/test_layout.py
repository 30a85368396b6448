"""The package layout shows the architecture: no import circle, and each layer imports only down.

Every import of a ``lance_metastore`` module counts, at the top of a module, inside a function
or under ``TYPE_CHECKING``: each ties two modules together for a reader. Read with :mod:`ast`,
so nothing is imported and the test needs no server.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import lance_metastore

PACKAGE = "lance_metastore"
SOURCE = Path(lance_metastore.__file__).parent
COMPOSER = f"{PACKAGE}.operations.catalog"


def _module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(SOURCE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(path): path for path in SOURCE.rglob("*.py")}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _known(candidate: str) -> str | None:
    """The most specific module of ours a dotted name points at (``a.mod.Name`` -> ``a.mod``)."""
    while candidate and candidate not in MODULES:
        candidate = candidate.rpartition(".")[0]
    return candidate or None


def _imports(module: str) -> set[str]:
    """The modules of ours that ``module`` imports, anywhere in its text."""
    tree = ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))
    package = module if _is_package(module) else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            # "from pkg import name" names a submodule or something defined in pkg
            targets = [f"{source}.{alias.name}" for alias in node.names] + [source]
            if any(_known(target) not in (None, source) for target in targets[:-1]):
                targets = targets[:-1]  # the names are submodules: the package is not the point
        else:
            continue
        for target in targets:
            if target == PACKAGE or target.startswith(f"{PACKAGE}."):
                known = _known(target)
                if known and known != module:
                    found.add(known)
    return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Each module of ours -> the modules of ours it imports. Built when a test first asks, not
    at import: parsing every module takes about a second, which each test process would pay at
    collection."""
    return {module: _imports(module) for module in MODULES}


def _cycle() -> list[str] | None:
    """One import circle as a list of modules (first repeated last), or None."""
    graph = import_graph()
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        stack.append(module)
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                return [*stack[stack.index(imported) :], imported]
            if imported not in state and (found := visit(imported)):
                return found
        stack.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_the_graph_sees_every_module_and_its_imports() -> None:
    graph = import_graph()
    assert f"{PACKAGE}.operations.core" in graph
    assert f"{PACKAGE}.operations.core" in graph[COMPOSER]
    assert f"{PACKAGE}.rules.redaction" in graph[f"{PACKAGE}.rules.errors"]
    # a function-level import counts (glue's AWS session is imported where it is used)
    assert f"{PACKAGE}.glue.aws" in graph[f"{PACKAGE}.glue.namespace"]
    # a TYPE_CHECKING import counts
    assert f"{PACKAGE}.operations.core" in graph[f"{PACKAGE}.operations.data"]


def test_no_import_circle() -> None:
    cycle = _cycle()
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_no_operation_module_imports_the_class_that_composes_them() -> None:
    offenders = sorted(
        module
        for module, imported in import_graph().items()
        if module.startswith(f"{PACKAGE}.operations.") and COMPOSER in imported
    )
    assert offenders == [], f"import {COMPOSER}'s CatalogCore from .core instead: {offenders}"


def test_rules_import_nothing_above_them() -> None:
    rules = f"{PACKAGE}.rules"
    above = {
        module: sorted(target for target in imported if not target.startswith(rules))
        for module, imported in import_graph().items()
        if module == rules or module.startswith(f"{rules}.")
    }
    assert {module: targets for module, targets in above.items() if targets} == {}


def test_backends_and_operations_do_not_import_the_apps() -> None:
    apps = tuple(f"{PACKAGE}.{app}" for app in ("cli", "rest", "spark"))
    lower = tuple(f"{PACKAGE}.{group}" for group in ("rules", "operations", "glue", "hive"))
    offenders = {
        module: sorted(target for target in imported if target.startswith(apps))
        for module, imported in import_graph().items()
        if module.startswith(lower)
    }
    assert {module: targets for module, targets in offenders.items() if targets} == {}


def test_the_hive_backend_ships_its_ddl_as_package_data() -> None:
    from lance_metastore.hive import local

    assert local.HMS4_TXN_TABLES.lstrip().startswith('CREATE TABLE "TXNS"')
    assert (SOURCE / "hive" / "resources" / "hms4_txn_tables.sql").is_file()
