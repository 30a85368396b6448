"""Table changes Spark SQL's connector refuses (lance-spark answers "Table alteration is not
supported"): ``add-columns``, ``drop-columns``, ``alter-column`` and ``rename-table``.

Each is one call of the namespace interface (``alter_table_add_columns``,
``alter_table_drop_columns``, ``alter_table_alter_columns``, ``rename_table``), so the rules
and error codes are the library's: a column change commits a new Lance version and then sets
the catalog's columns from the new schema; a rename changes only the catalog entry.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ...rules.identifiers import join_identifier
from ..app import CliFailure, JsonFlag, running


def register(app: typer.Typer) -> None:
    app.command("add-columns")(add_columns_command)
    app.command("drop-columns")(drop_columns_command)
    app.command("alter-column")(alter_column_command)
    app.command("rename-table")(rename_table_command)


def _show_columns(state: Any, parts: list[str], version: int) -> None:
    """The table's new version (a note for people) and its columns as the catalog now has
    them (the command's result)."""
    import lance

    from ...rules.schema import catalog_columns  # pyarrow: not for --help

    ns = state.namespace()
    dataset = lance.dataset(namespace_client=ns, table_id=list(parts), version=version)
    state.output.note(f"{join_identifier(parts)} is now at version {version}")
    document = {
        "id": parts,
        "version": version,
        "columns": [
            {"name": c.name, "type": c.type, "comment": c.comment}
            for c in catalog_columns(dataset.schema)
        ],
    }
    state.output.columns(document)


def _split_definition(definition: str) -> tuple[str, str]:
    name, sep, expression = definition.partition("=")
    if not sep or not name.strip() or not expression.strip():
        raise typer.BadParameter(
            f"{definition!r} is not NAME=SQL_EXPRESSION", param_hint="COLUMN=EXPR"
        )
    return name.strip(), expression.strip()


def add_columns_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    definitions: Annotated[
        list[str],
        typer.Argument(
            metavar="COLUMN=EXPR...",
            help="New column and the SQL expression over existing columns that fills it "
            "(e.g. 'total=price * qty', \"note=CAST(NULL AS STRING)\").",
        ),
    ],
    json_flag: JsonFlag = False,
) -> None:
    """Add columns, each filled by a SQL expression (Spark SQL: ALTER TABLE ... ADD COLUMNS)."""
    from lance_namespace import AlterTableAddColumnsRequest

    with running(ctx, json_flag) as state:
        parts = state.identify(identifier)
        columns = [_split_definition(d) for d in definitions]
        ns = state.namespace()
        response = ns.alter_table_add_columns(
            AlterTableAddColumnsRequest(
                id=parts,
                new_columns=[{"name": name, "expression": expr} for name, expr in columns],
            )
        )
        _show_columns(state, parts, response.version)


def drop_columns_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    columns: Annotated[list[str], typer.Argument(metavar="COLUMN...")],
    json_flag: JsonFlag = False,
) -> None:
    """Drop columns (Spark SQL: ALTER TABLE ... DROP COLUMNS). Older versions keep them."""
    from lance_namespace import AlterTableDropColumnsRequest

    with running(ctx, json_flag) as state:
        parts = state.identify(identifier)
        ns = state.namespace()
        response = ns.alter_table_drop_columns(
            AlterTableDropColumnsRequest(id=parts, columns=list(columns))
        )
        _show_columns(state, parts, response.version)


def alter_column_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    column: Annotated[str, typer.Argument(metavar="COLUMN", help="Dotted path for nested.")],
    rename: Annotated[
        str | None, typer.Option("--rename", metavar="NAME", help="New name.")
    ] = None,
    data_type: Annotated[
        str | None,
        typer.Option(
            "--type",
            metavar="TYPE",
            help="New Arrow type (int32, int64, float32, float64, string, large_string, ...); "
            "Lance rewrites the column.",
        ),
    ] = None,
    nullable: Annotated[
        bool | None,
        typer.Option("--nullable/--not-null", help="Allow nulls (or not)."),
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """Rename, retype or change the nullability of a column (Spark SQL: ALTER TABLE ...
    RENAME COLUMN / ALTER COLUMN ... TYPE)."""
    from lance_namespace import AlterTableAlterColumnsRequest

    with running(ctx, json_flag) as state:
        if rename is None and data_type is None and nullable is None:
            raise CliFailure("nothing to change: give --rename, --type or --nullable/--not-null")
        parts = state.identify(identifier)
        alteration: dict[str, Any] = {"path": column}
        if rename is not None:
            alteration["rename"] = rename
        if data_type is not None:
            alteration["data_type"] = {"type": data_type}
        if nullable is not None:
            alteration["nullable"] = nullable
        ns = state.namespace()
        response = ns.alter_table_alter_columns(
            AlterTableAlterColumnsRequest(id=parts, alterations=[alteration])
        )
        _show_columns(state, parts, response.version)


def rename_table_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    new_name: Annotated[str, typer.Argument(metavar="NEW_NAME", help="The table's new name.")],
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            "-n",
            metavar="NAMESPACE",
            help="Move it to this namespace (default: where it is).",
        ),
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """Rename a table, or move it to another namespace (Spark SQL: ALTER TABLE ... RENAME TO).
    Only the catalog entry changes; the data stays where it is."""
    from lance_namespace import RenameTableRequest

    with running(ctx, json_flag) as state:
        parts = state.identify(identifier)
        target = state.identify(namespace) if namespace is not None else parts[:-1]
        state.namespace().rename_table(
            RenameTableRequest(id=parts, new_table_name=new_name, new_namespace_id=target)
        )
        renamed = [*target, new_name]
        document = {"id": parts, "renamed_to": renamed}
        state.output.done(
            document, f"renamed {join_identifier(parts)} to {join_identifier(renamed)}"
        )
