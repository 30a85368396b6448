"""``create-namespace`` and ``drop-namespace``."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from ...rules.identifiers import join_identifier
from ..app import JsonFlag, PropList, running
from ..config import parse_assignments


def register(app: typer.Typer) -> None:
    app.command("create-namespace")(create_namespace_command)
    app.command("drop-namespace")(drop_namespace_command)


class CreateMode(str, Enum):
    create = "create"
    exist_ok = "exist_ok"
    overwrite = "overwrite"


_SPEC_CREATE_MODE = {"create": "Create", "exist_ok": "ExistOk", "overwrite": "Overwrite"}


def create_namespace_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="ID")],
    prop: PropList = None,
    mode: Annotated[
        CreateMode, typer.Option("--mode", case_sensitive=False, help="What if it exists.")
    ] = CreateMode.create,
    json_flag: JsonFlag = False,
) -> None:
    """Create a namespace (a Glue database or catalog, a Hive database or catalog)."""
    from lance_namespace import CreateNamespaceRequest

    with running(ctx, json_flag) as state:
        properties = parse_assignments(prop or [])
        parts = state.identify(identifier)
        request = CreateNamespaceRequest(
            id=parts, mode=_SPEC_CREATE_MODE[mode.value], properties=properties or None
        )
        response = state.namespace().create_namespace(request)
        document = {"id": parts, "mode": mode.value, "properties": dict(response.properties or {})}
        state.output.namespace_ready(document)


def drop_namespace_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="ID")],
    cascade: Annotated[
        bool,
        typer.Option("--cascade", help="Deregister its tables first (Hive; data stays)."),
    ] = False,
    skip_missing: Annotated[
        bool, typer.Option("--skip-missing", help="Succeed if it does not exist.")
    ] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Drop a namespace (it must be empty unless --cascade)."""
    from lance_namespace import DropNamespaceRequest, NamespaceExistsRequest
    from lance_namespace.errors import NamespaceNotFoundError

    with running(ctx, json_flag) as state:
        parts = state.identify(identifier)
        ns = state.namespace()
        existed = True
        if skip_missing:
            try:
                ns.namespace_exists(NamespaceExistsRequest(id=parts))
            except NamespaceNotFoundError:
                existed = False
        ns.drop_namespace(
            DropNamespaceRequest(
                id=parts,
                mode="Skip" if skip_missing else "Fail",
                behavior="Cascade" if cascade else "Restrict",
            )
        )
        # "dropped": the namespace is gone now; "existed": whether this call removed it.
        document = {"id": parts, "dropped": True, "existed": existed}
        name = join_identifier(parts)
        message = f"namespace {name} dropped" if existed else f"no namespace {name}: none dropped"
        state.output.done(document, message)
