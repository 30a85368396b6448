"""Planning a Spark write on the driver: the save mode, the table's catalog entry, the schema.

Kept apart from the data path (:mod:`.fragments`) and the commit protocol (:mod:`.commit`)
because it runs once, before any task: it resolves the table (declaring it when it is new),
decides whether the job creates, appends, overwrites or skips, and fixes the Arrow schema
every task writes with. Its result, :class:`WritePlan`, is all the tasks and the commit read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.types import StructType

from .fragments import new_job_id
from .options import OptionError, ResolvedTable, Target, bool_option, int_option, parse_target
from .reader import open_existing
from .types import target_schema

logger = logging.getLogger("lance_metastore.spark")

APPEND, OVERWRITE, ERROR_IF_EXISTS, IGNORE = "append", "overwrite", "errorifexists", "ignore"
_SAVE_MODES = {
    "append": APPEND,
    "overwrite": OVERWRITE,
    "errorifexists": ERROR_IF_EXISTS,
    "error": ERROR_IF_EXISTS,
    "default": ERROR_IF_EXISTS,
    "ignore": IGNORE,
}

# What the commit does.
OP_APPEND, OP_OVERWRITE, OP_CREATE, OP_SKIP = "append", "overwrite", "create", "skip"


@dataclass
class WritePlan:
    """Everything the tasks and the commit need, fixed on the driver at planning."""

    location: ResolvedTable
    operation: str
    schema: pa.Schema
    names: list[str]
    read_version: int | None = None
    declared: bool = False
    data_storage_version: str | None = None
    max_rows_per_file: int = 1024 * 1024
    max_rows_per_group: int | None = None
    # mergeSchema: the table gains the data's new (nullable) columns in the append's commit.
    merge_schema: bool = False
    # Whether the commit changes the table's columns (then the catalog's are synced).
    columns_change: bool = True
    job_id: str = field(default_factory=lambda: new_job_id())


def save_mode(options: Mapping[str, str], overwrite: bool) -> str:
    if overwrite:
        return OVERWRITE
    raw = (options.get("save_mode") or APPEND).strip().lower().replace("_", "")
    mode = _SAVE_MODES.get(raw)
    if mode is None:
        raise OptionError(
            f"Option 'save_mode' must be one of append, overwrite, errorifexists, ignore; "
            f"got {options.get('save_mode')!r}"
        )
    return mode


def plan_write(options: Mapping[str, str], schema: StructType, overwrite: bool) -> WritePlan:
    """Resolve the table, apply the save mode, declare the table when it is new."""
    target = parse_target(options)
    mode = save_mode(options, overwrite)
    if target.impl is None:
        location = ResolvedTable(uri=target.path, storage_options=target.storage_options)
        dataset = open_existing(location)
        exists = dataset is not None
        declared = False
    else:
        location, exists, declared = _catalog_table(target)
        dataset = open_existing(location) if (exists or declared) else None
    try:
        if exists and mode == ERROR_IF_EXISTS:
            raise FileExistsError(
                f"Table {location.name!r} already exists (save_mode errorifexists); use "
                "mode('append') or mode('overwrite'), or option('save_mode', 'ignore')"
            )
        if exists and mode == IGNORE:
            return WritePlan(location, OP_SKIP, pa.schema([]), [])
        storage_version = options.get("data_storage_version") or None
        if dataset is None:
            operation, existing, read_version = OP_CREATE, None, None
        else:
            operation = OP_APPEND if mode in (APPEND,) else OP_OVERWRITE
            existing, read_version = dataset.schema, int(dataset.version)
            storage_version = storage_version or _storage_version(dataset)
        merge = False
        if operation == OP_APPEND and bool_option(options, "mergeschema", False):
            arrow_schema, merge = merged_schema(schema, dataset, options, repr(location.name))
        else:
            arrow_schema = target_schema(
                schema, existing, append=operation == OP_APPEND, where=repr(location.name)
            )
        if operation != OP_APPEND:
            arrow_schema = with_compression(arrow_schema, compression_option(options))
        incoming = {f.name.lower(): f.name for f in schema}
        names = [incoming[name.lower()] for name in arrow_schema.names]
        return WritePlan(
            location=location,
            operation=operation,
            schema=arrow_schema,
            names=names,
            read_version=read_version,
            declared=declared,
            data_storage_version=storage_version,
            max_rows_per_file=int_option(options, "max_rows_per_file", 1024 * 1024) or 1024 * 1024,
            max_rows_per_group=int_option(options, "max_rows_per_group", None),
            merge_schema=merge,
            columns_change=existing is None or not _same_columns(arrow_schema, existing),
        )
    except BaseException:
        if declared:
            deregister(location)
        raise


def _same_columns(new: pa.Schema, old: pa.Schema) -> bool:
    """Same names and types in the same order (what the catalog's column list shows)."""
    return [(f.name, f.type) for f in new] == [(f.name, f.type) for f in old]


def merged_schema(
    schema: StructType, dataset: Any, options: Mapping[str, str], where: str
) -> tuple[pa.Schema, bool]:
    """The table's schema plus the data's new columns (nullable, at the end), for an append
    with ``mergeSchema``; and whether there are any. Missing columns are still an error.

    Tasks write the new schema's field ids afresh (0, 1, ... in pre-order), so the table's
    own ids must be exactly those: true unless columns were dropped or altered in place.
    """
    existing = dataset.schema
    known = {name.lower() for name in existing.names}
    added = [f for f in schema if f.name.lower() not in known]
    kept = StructType([f for f in schema if f.name.lower() in known])
    base = target_schema(kept, existing, append=True, where=where)
    if not added:
        return base, False
    ids = _field_ids(dataset.lance_schema)
    if ids != list(range(len(ids))):
        raise OptionError(
            f"Cannot add columns {[f.name for f in added]} to {where} with mergeSchema: its "
            "columns were dropped or changed before, so new data files cannot line up with "
            "its field ids. Add the columns with pylance's add_columns, then append"
        )
    new_fields = target_schema(StructType(added), None, append=False, where=where)
    tagged = with_compression(pa.schema(list(new_fields)), compression_option(options))
    return pa.schema(list(base) + list(tagged), metadata=existing.metadata), True


def _field_ids(lance_schema: Any) -> list[int]:
    ids: list[int] = []

    def walk(fields: Any) -> None:
        for lance_field in fields:
            ids.append(int(lance_field.id()))
            walk(lance_field.children())

    walk(lance_schema.fields())
    return ids


COMPRESSION_KEY = "lance-encoding:compression"
COMPRESSIONS = ("lz4", "zstd", "none", "fsst", "default")
DEFAULT_COMPRESSION = "lz4"


def compression_option(options: Mapping[str, str]) -> str:
    value = (options.get("compression") or DEFAULT_COMPRESSION).strip().lower()
    if value not in COMPRESSIONS:
        raise OptionError(
            f"Option 'compression' must be one of {', '.join(COMPRESSIONS)}, got {value!r}"
        )
    return value


def with_compression(schema: pa.Schema, compression: str) -> pa.Schema:
    """Tag the top-level string and binary columns with a Lance compression scheme.

    Lance's default for strings (FSST plus general compression) costs ~3x lz4's encoding
    time for a modest size gain; lz4 plays the role snappy plays for Spark's Parquet. The
    tag lives in the table's schema, so later appends by any Lance writer encode alike.
    ``default`` leaves Lance's choice.
    """
    if compression == "default":
        return schema
    fields = []
    for arrow_field in schema:
        t = arrow_field.type
        if (
            pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_binary(t)
            or (pa.types.is_large_binary(t))
        ):
            metadata = dict(arrow_field.metadata or {})
            metadata[COMPRESSION_KEY.encode()] = compression.encode()
            arrow_field = arrow_field.with_metadata(metadata)  # type: ignore[arg-type]  # invariant
        fields.append(arrow_field)
    return pa.schema(fields, metadata=schema.metadata)  # type: ignore[arg-type]  # stubs: invariant


def _storage_version(dataset: Any) -> str | None:
    try:
        return str(dataset.data_storage_version)
    except Exception:
        return None


def _catalog_table(target: Target) -> tuple[ResolvedTable, bool, bool]:
    """(location, existed, declared by us): describe the table, declare it if missing."""
    from lance_namespace import DeclareTableRequest, DescribeTableRequest
    from lance_namespace.errors import TableNotFoundError

    ns = target.namespace()
    table_id = list(target.table_id or ())
    try:
        response = ns.describe_table(DescribeTableRequest(id=table_id))
        existed, declared = True, False
    except TableNotFoundError:
        response = ns.declare_table(DeclareTableRequest(id=table_id))
        existed, declared = False, True
    if not response.location:
        raise OptionError(f"The catalog gives no location for table {target.name!r}")
    location = ResolvedTable(
        uri=response.location,
        storage_options=dict(response.storage_options or {}) or None,
        impl=target.impl,
        properties=dict(target.properties),
        table_id=target.table_id,
        managed_versioning=bool(getattr(response, "managed_versioning", False)),
    )
    return location, existed, declared


def deregister(location: ResolvedTable) -> None:
    """Undo this job's declaration: remove the catalog entry (never any data), but only while
    no other writer used it, through the namespace's fenced removal
    (``remove_declared_table``). A client without it (a REST catalog) keeps the entry: an
    unconditional deregister could take a table another writer wrote meanwhile."""
    from lance_namespace import DeregisterTableRequest

    ns = location.namespace()
    remove = getattr(ns, "remove_declared_table", None)
    if remove is None:
        logger.warning(
            "%s: the declared entry stays (its catalog has no fenced removal)", location.name
        )
        return
    try:
        outcome = remove(DeregisterTableRequest(id=list(location.table_id or ())))
    except Exception as error:  # the job's own error matters more
        logger.warning("could not deregister %s after a failed write: %s", location.name, error)
        return
    if outcome == "kept":
        logger.warning("%s was written by another writer: its declared entry stays", location.name)
