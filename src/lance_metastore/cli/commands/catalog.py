"""Looking around: ``config``, ``ls`` and ``describe``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...rules.identifiers import join_identifier
from ...rules.redaction import masked
from ..app import JsonFlag, running
from ..config import ConfigError

if TYPE_CHECKING:
    from lance_namespace import LanceNamespace, ListNamespacesResponse, ListTablesResponse

DEFAULT_PAGE_SIZE = 100


def register(app: typer.Typer) -> None:
    app.command("config")(config_command)
    app.command("ls")(ls_command)
    app.command("describe")(describe_command)


def config_command(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Show the effective impl and properties and where each comes from (secrets masked)."""
    with running(ctx, json_flag) as state:
        resolved = state.resolved()
        state.output.config(
            {
                "impl": resolved.impl,
                "impl_source": resolved.impl_source,
                "profile": resolved.profile,
                "config_file": str(resolved.config_path) if resolved.config_path else None,
                "properties": {
                    key: {"value": value, "source": resolved.sources.get(key)}
                    for key, value in resolved.public_properties().items()
                },
            }
        )


# --------------------------------------------------------------------------------------------
# ls
# --------------------------------------------------------------------------------------------


@dataclass
class Node:
    path: list[str]
    namespaces: list[Node] | None = None
    tables: list[str] | None = None

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"name": self.path[-1] if self.path else "", "id": self.path}
        if self.namespaces is not None:
            document["namespaces"] = [child.to_json() for child in self.namespaces]
        if self.tables is not None:
            document["tables"] = list(self.tables)
        return document


def list_all(
    ns: LanceNamespace, kind: str, path: list[str], page_size: int, on_page: Callable[[int], None]
) -> list[str]:
    """Every name of a listing, page by page (``limit`` and ``page_token``)."""
    from lance_namespace import ListNamespacesRequest, ListTablesRequest

    names: list[str] = []
    token: str | None = None
    seen: set[str] = set()
    while True:
        response: ListNamespacesResponse | ListTablesResponse
        if kind == "namespaces":
            response = ns.list_namespaces(
                ListNamespacesRequest(id=list(path), limit=page_size, page_token=token)
            )
            page = response.namespaces
        else:
            response = ns.list_tables(
                ListTablesRequest(id=list(path), limit=page_size, page_token=token)
            )
            page = response.tables
        names.extend(page or [])
        on_page(len(names))
        token = response.page_token
        if not token or token in seen:
            return names
        seen.add(token)


def build_tree(
    ns: LanceNamespace,
    describe: Callable[[str], None],
    path: list[str],
    recursive: bool,
    page_size: int,
) -> Node:
    from lance_namespace.errors import (
        InvalidInputError,
        NamespaceNotFoundError,
        UnsupportedOperationError,
    )

    def progress(kind: str, where: list[str]) -> Callable[[int], None]:
        label = join_identifier(where) or "(root)"
        return lambda n: describe(f"listing {kind} of {label}: {n}")

    def expand(node: Node, top: bool) -> None:
        try:
            children = list_all(
                ns, "namespaces", node.path, page_size, progress("namespaces", node.path)
            )
        except (InvalidInputError, UnsupportedOperationError):
            if top and not node.path:
                raise
            children = []  # e.g. a database, which holds no namespaces
        node.namespaces = [Node([*node.path, name]) for name in children]
        if node.path:
            try:
                node.tables = list_all(
                    ns, "tables", node.path, page_size, progress("tables", node.path)
                )
            except (InvalidInputError, UnsupportedOperationError):
                if top and not node.namespaces:
                    raise
                node.tables = []  # e.g. a catalog, which holds no tables
        if recursive:
            for child in node.namespaces:
                try:
                    expand(child, top=False)
                except NamespaceNotFoundError:
                    # Dropped while we were listing: show it as it was, unexpanded.
                    child.namespaces = child.tables = None

    root = Node(list(path))
    expand(root, top=True)
    return root


def ls_command(
    ctx: typer.Context,
    namespace: Annotated[
        str | None,
        typer.Argument(metavar="NAMESPACE", help="Namespace to list (default: the root)"),
    ] = None,
    recursive: Annotated[
        bool, typer.Option("--recursive", "-r", help="Descend into every namespace.")
    ] = False,
    page_size: Annotated[
        int, typer.Option("--page-size", metavar="N", min=1, help="Names fetched per call.")
    ] = DEFAULT_PAGE_SIZE,
    json_flag: JsonFlag = False,
) -> None:
    """List namespaces and Lance tables as a tree."""
    with running(ctx, json_flag) as state:
        ns = state.namespace()
        path = state.identify(namespace)
        with state.output.spinner("listing") as describe:
            tree = build_tree(ns, describe, path, recursive, page_size)
        label = join_identifier(path) or f"(root) {ns.namespace_id()}"
        state.output.tree(tree.to_json(), label)


# --------------------------------------------------------------------------------------------
# describe
# --------------------------------------------------------------------------------------------


def id_forms(ns: LanceNamespace, parts: list[str]) -> tuple[bool, bool]:
    """Whether ``parts`` is well-formed as (a table id, a namespace id) for this catalog."""
    is_table, is_namespace = getattr(ns, "is_table_id", None), getattr(ns, "is_namespace_id", None)
    if is_table is None or is_namespace is None:  # another implementation: guess by depth
        return len(parts) >= 2, True
    return is_table(parts), is_namespace(parts)


def describe_table_doc(ns: LanceNamespace, parts: list[str]) -> dict[str, Any]:
    from lance_namespace import DescribeTableRequest

    response = ns.describe_table(DescribeTableRequest(id=list(parts), check_declared=True))
    namespace = list(response.namespace or parts[:-1])
    table = response.table or parts[-1]
    properties = dict(response.properties or {})
    document: dict[str, Any] = {
        "kind": "table",
        "id": [*namespace, table],
        "namespace": namespace,
        "table": table,
        "location": response.location,
        "format": (properties.get("table_type") or "lance").lower(),
        "declared_only": bool(response.is_only_declared),
        "managed_versioning": bool(response.managed_versioning),
        "managed_by": properties.get("managed_by", "storage"),
        "version": None,
        "rows": None,
        "schema": None,
        "properties": properties,
        "storage_options": masked(response.storage_options),
    }
    if not response.is_only_declared:
        document.update(dataset_facts(ns, [*namespace, table]))
    return document


def dataset_facts(ns: LanceNamespace, table_id: list[str]) -> dict[str, Any]:
    """The current version, row count and schema of a table's dataset (opened through the
    namespace, as every Lance client opens it)."""
    import lance

    dataset = lance.dataset(namespace_client=ns, table_id=list(table_id))
    return {
        "version": int(dataset.version),
        "rows": int(dataset.count_rows()),
        "schema": [
            {"name": field.name, "type": str(field.type), "nullable": bool(field.nullable)}
            for field in dataset.schema
        ],
    }


def describe_namespace_doc(ns: LanceNamespace, parts: list[str]) -> dict[str, Any]:
    from lance_namespace import DescribeNamespaceRequest

    response = ns.describe_namespace(DescribeNamespaceRequest(id=list(parts)))
    return {"kind": "namespace", "id": list(parts), "properties": dict(response.properties or {})}


def describe_either(ns: LanceNamespace, parts: list[str]) -> dict[str, Any]:
    """A table if the id can only name one, a namespace likewise; else a table first."""
    from lance_namespace.errors import NamespaceNotFoundError, TableNotFoundError

    as_table, as_namespace = id_forms(ns, parts)
    if as_namespace and not as_table:
        return describe_namespace_doc(ns, parts)
    if as_table and not as_namespace:
        return describe_table_doc(ns, parts)
    if not as_table:  # malformed either way: let the likelier reading say why
        describe = describe_table_doc if len(parts) >= 2 else describe_namespace_doc
        return describe(ns, parts)
    try:
        return describe_table_doc(ns, parts)
    except (TableNotFoundError, NamespaceNotFoundError) as table_error:
        try:
            return describe_namespace_doc(ns, parts)
        except NamespaceNotFoundError:
            raise table_error from None


def describe_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="NAMESPACE|TABLE")],
    table: Annotated[bool, typer.Option("--table", "-t", help="Describe a table.")] = False,
    namespace: Annotated[bool, typer.Option("--namespace", "-n", help="A namespace.")] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Describe a namespace or a table (tried as a table first when it could be either)."""
    with running(ctx, json_flag) as state:
        if table and namespace:
            raise ConfigError("--table and --namespace exclude each other")
        ns = state.namespace()
        parts = state.identify(identifier)
        if table:
            document = describe_table_doc(ns, parts)
        elif namespace or not parts:
            document = describe_namespace_doc(ns, parts)
        else:
            document = describe_either(ns, parts)
        if document["kind"] == "table":
            state.output.table_description(document)
        else:
            state.output.namespace_description(document)
