"""Table commands: ``declare``, ``register``, ``register-many``, ``deregister``,
``drop-table``, ``versions`` and ``sync-columns``."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...rules.identifiers import join_identifier
from ...rules.locations import DATA_KEPT_KEY
from ...rules.redaction import scrub
from ..app import CliFailure, JsonFlag, PropList, code_name, running, spec_exit
from ..config import parse_assignments

if TYPE_CHECKING:
    from collections.abc import Callable

    from lance_namespace import DeclareTableResponse, LanceNamespace, RegisterTableResponse

    from ...rules.bulk import BulkRegistration


def register(app: typer.Typer) -> None:
    app.command("declare")(declare_command)
    app.command("register")(register_command)
    app.command("register-many")(register_many_command)
    app.command("deregister")(deregister_command)
    app.command("drop-table")(drop_table_command)
    app.command("versions")(versions_command)
    app.command("sync-columns")(sync_columns_command)


def absolute_location(location: str) -> str:
    """URIs are kept; a local path becomes absolute (the catalog must not depend on a cwd)."""
    if "://" in location:
        return location
    return os.path.abspath(os.path.expanduser(location))


def _put_entry(
    ctx: typer.Context,
    json_flag: bool,
    identifier: str,
    verb: str,
    put: Callable[[LanceNamespace, list[str]], DeclareTableResponse | RegisterTableResponse],
) -> None:
    """Declare or register: ``put`` writes the entry; report its id, location and properties."""
    with running(ctx, json_flag) as state:
        parts = state.identify(identifier)
        response = put(state.namespace(), parts)
        document = {
            "id": parts,
            "location": response.location,
            "properties": dict(response.properties or {}),
        }
        state.output.done(document, f"{verb} {join_identifier(parts)} at {response.location}")


def declare_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    location: Annotated[
        str | None,
        typer.Option(
            "--location",
            "-l",
            metavar="LOCATION",
            help="Table root (default: under the namespace's location, else under root).",
        ),
    ] = None,
    prop: PropList = None,
    json_flag: JsonFlag = False,
) -> None:
    """Declare a table: a catalog entry whose data Lance writes later."""
    from lance_namespace import DeclareTableRequest

    def put(ns: LanceNamespace, parts: list[str]) -> DeclareTableResponse:
        where = absolute_location(location) if location else None
        properties = parse_assignments(prop or []) or None
        return ns.declare_table(
            DeclareTableRequest(id=parts, location=where, properties=properties)
        )

    _put_entry(ctx, json_flag, identifier, "declared", put)


class RegisterMode(str, Enum):
    create = "create"
    overwrite = "overwrite"


def register_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    location: Annotated[str, typer.Argument(metavar="LOCATION")],
    prop: PropList = None,
    mode: Annotated[
        RegisterMode,
        typer.Option("--mode", case_sensitive=False, help="overwrite re-points an entry."),
    ] = RegisterMode.create,
    json_flag: JsonFlag = False,
) -> None:
    """Register an existing Lance dataset as a table."""
    from lance_namespace import RegisterTableRequest

    def put(ns: LanceNamespace, parts: list[str]) -> RegisterTableResponse:
        request = RegisterTableRequest(
            id=parts,
            location=absolute_location(location),
            mode="Overwrite" if mode is RegisterMode.overwrite else "Create",
            properties=parse_assignments(prop or []) or None,
        )
        return ns.register_table(request)

    _put_entry(ctx, json_flag, identifier, "registered", put)


def registrations_document(result: BulkRegistration, secrets: list[str]) -> dict[str, Any]:
    from ...rules.bulk import FAILED, PLANNED, REGISTERED, SKIPPED

    def entries(status: str) -> list[dict[str, Any]]:
        found = []
        for outcome in result.with_status(status):
            entry: dict[str, Any] = {
                "table": outcome.table,
                "id": list(outcome.id),
                "location": outcome.location,
            }
            if outcome.error is not None:
                code = int(outcome.error.code)
                entry.update(
                    code=code,
                    name=code_name(code),
                    error=scrub(str(outcome.error), secrets),
                )
            found.append(entry)
        return found

    document: dict[str, Any] = {
        "namespace": list(result.namespace),
        "directory": str(result.directory),
        "found": len(result.outcomes),
        "dry_run": result.dry_run,
        "registered": entries(REGISTERED),
        "skipped": entries(SKIPPED),
        "failed": entries(FAILED),
    }
    if result.dry_run:
        document["would_register"] = entries(PLANNED)
    return document


def register_many_command(
    ctx: typer.Context,
    namespace: Annotated[str, typer.Argument(metavar="NAMESPACE")],
    directory: Annotated[
        Path,
        typer.Argument(
            metavar="DIR", exists=True, file_okay=False, dir_okay=True, resolve_path=True
        ),
    ],
    prop: PropList = None,
    skip_existing: Annotated[
        bool,
        typer.Option("--skip-existing", help="Leave tables that are already registered."),
    ] = False,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", metavar="N", min=1, help="Parallel registrations.")
    ] = 4,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only show what would be registered.")
    ] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Register every Lance dataset found under DIR (table name: directory minus .lance)."""
    from ...rules.bulk import register_many  # pyarrow and Lance: not for --help

    with running(ctx, json_flag) as state:
        parts = state.identify(namespace)
        ns = state.namespace()
        with state.output.progress("registering") as update:
            result = register_many(
                ns,
                parts,
                directory,
                properties=parse_assignments(prop or []) or None,
                skip_existing=skip_existing,
                jobs=jobs,
                dry_run=dry_run,
                on_done=update,
            )
        state.output.registrations(registrations_document(result, state.secrets()))
        first = result.first_error
        if first is not None:
            failed = len(result.failed)
            summary = f"{failed} of {len(result.outcomes)} registration(s) failed; first: {first}"
            raise spec_exit(state, first, summary, document=False)


def deregister_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    json_flag: JsonFlag = False,
) -> None:
    """Remove a table's catalog entry; its data stays where it is."""
    from lance_namespace import DeregisterTableRequest

    with running(ctx, json_flag) as state:
        parts = state.identify(identifier)
        response = state.namespace().deregister_table(DeregisterTableRequest(id=parts))
        document = {"id": list(response.id or parts), "location": response.location}
        message = f"deregistered {join_identifier(parts)} (data kept at {response.location})"
        state.output.done(document, message)


def drop_table_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Drop a table: its catalog entry AND its data (asks first unless --yes)."""
    from lance_namespace import DescribeTableRequest, DropTableRequest

    with running(ctx, json_flag) as state:
        parts = state.identify(identifier)
        ns = state.namespace()
        if not yes:
            described = ns.describe_table(DescribeTableRequest(id=parts))
            confirmed = typer.confirm(
                f"Drop table {join_identifier(parts)} and DELETE its data at {described.location}?",
                default=False,
                err=True,
            )
            if not confirmed:
                raise CliFailure("aborted: nothing was dropped")
        response = ns.drop_table(DropTableRequest(id=parts))
        document = {"id": list(response.id or parts), "location": response.location}
        kept = (response.properties or {}).get(DATA_KEPT_KEY)
        if kept:
            document["data_kept"] = kept
            message = f"dropped {join_identifier(parts)}; data kept at {response.location}: {kept}"
        else:
            message = f"dropped {join_identifier(parts)} and its data"
        state.output.done(document, message)


def versions_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    json_flag: JsonFlag = False,
) -> None:
    """List the versions of a table's Lance dataset (opened through the namespace)."""
    from lance_namespace import DescribeTableRequest

    with running(ctx, json_flag) as state:
        parts = state.identify(identifier)
        ns = state.namespace()
        # Describing first gives the catalog's own errors (codes) and finds declared tables.
        described = ns.describe_table(DescribeTableRequest(id=parts, check_declared=True))
        versions: list[dict[str, Any]] = []
        if not described.is_only_declared:
            import lance

            dataset = lance.dataset(namespace_client=ns, table_id=list(parts))
            versions = [
                {
                    "version": int(item["version"]),
                    "timestamp": item.get("timestamp"),
                    "metadata": dict(item.get("metadata") or {}),
                }
                for item in dataset.versions()
            ]
        state.output.versions({"id": parts, "location": described.location, "versions": versions})


def sync_columns_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    json_flag: JsonFlag = False,
) -> None:
    """Set a table's catalog columns from its dataset's schema (after another writer, such as
    pylance or lancedb, changed it; reads never write the catalog)."""
    with running(ctx, json_flag) as state:
        parts = state.identify(identifier)
        ns = state.namespace()
        sync = getattr(ns, "sync_table_columns", None)
        if sync is None:
            raise CliFailure(f"{type(ns).__name__} keeps no catalog columns")
        columns = sync(parts)
        document = {
            "id": parts,
            "columns": [{"name": c.name, "type": c.type, "comment": c.comment} for c in columns],
        }
        state.output.columns(document)
