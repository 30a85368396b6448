"""Arrow types to SQL types: the one mapping behind catalog columns and Spark schemas.

:func:`sql_type` decides, once for every Arrow type, which SQL type holds its values (view,
large and dictionary encodings are the same SQL type as the plain one; unsigned integers widen).
Two renderings use it: :func:`hive_type` for the catalog columns of Glue and Hive (so Athena,
Hive and the Glue console show real columns), and ``lance_metastore.spark.types.spark_type``
for Spark. Where a target has no such type, the rendering says so in one place: Hive columns
fall back to ``string`` (a column list must never stop a registration), Spark refuses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

import pyarrow as pa

# SQL type names (Spark's spelling; Hive's where they differ is in _HIVE_NAMES).
PRIMITIVES = (
    "boolean",
    "tinyint",
    "smallint",
    "int",
    "bigint",
    "float",
    "double",
    "string",
    "binary",
    "date",
    "timestamp",  # with a time zone: an instant
    "timestamp_ntz",  # without one: a wall-clock time
    "interval",  # a day-time interval (Arrow duration)
    "void",  # Arrow null: no values at all
    "time",  # a time of day: no Spark type; Hive keeps it as a string
    "unsupported",  # unions, extension types and the like
)
MAX_DECIMAL_PRECISION = 38  # Hive's and Spark's


@dataclass(frozen=True)
class SqlField:
    name: str
    type: SqlType
    nullable: bool = True


@dataclass(frozen=True)
class SqlType:
    """A SQL type: a primitive name, ``decimal(p,s)``, ``array``, ``map`` or ``struct``."""

    name: str
    precision: int = 0
    scale: int = 0
    element: SqlField | None = None  # array
    key: SqlType | None = None  # map
    value: SqlField | None = None  # map
    fields: tuple[SqlField, ...] = ()  # struct
    arrow: str = ""  # the Arrow type it came from, for messages


def _is(data_type: pa.DataType, check: str) -> bool:
    """pyarrow type checks that older pyarrow versions lack count as False."""
    fn = getattr(pa.types, check, None)
    return bool(fn and fn(data_type))


_SIMPLE = (
    ("is_boolean", "boolean"),
    ("is_int8", "tinyint"),
    ("is_int16", "smallint"),
    ("is_uint8", "smallint"),
    ("is_int32", "int"),
    ("is_uint16", "int"),
    ("is_int64", "bigint"),
    ("is_uint32", "bigint"),
    ("is_float16", "float"),
    ("is_float32", "float"),
    ("is_float64", "double"),
    ("is_string", "string"),
    ("is_large_string", "string"),
    ("is_string_view", "string"),
    ("is_binary", "binary"),
    ("is_large_binary", "binary"),
    ("is_binary_view", "binary"),
    ("is_fixed_size_binary", "binary"),
    ("is_date", "date"),
    ("is_duration", "interval"),
    ("is_null", "void"),
    ("is_time", "time"),
)
_LISTS = ("is_list", "is_large_list", "is_fixed_size_list", "is_list_view", "is_large_list_view")


def sql_type(data_type: pa.DataType) -> SqlType:
    """The SQL type that holds every value of an Arrow type."""
    if pa.types.is_dictionary(data_type):
        return sql_type(data_type.value_type)
    for check, name in _SIMPLE:
        if _is(data_type, check):
            return SqlType(name, arrow=str(data_type))
    if pa.types.is_uint64(data_type):
        return SqlType("decimal", 20, 0, arrow=str(data_type))
    if pa.types.is_decimal(data_type):
        return SqlType("decimal", data_type.precision, data_type.scale, arrow=str(data_type))
    if pa.types.is_timestamp(data_type):
        name = "timestamp" if data_type.tz is not None else "timestamp_ntz"
        return SqlType(name, arrow=str(data_type))
    if any(_is(data_type, check) for check in _LISTS):
        item = cast("pa.ListType[pa.DataType]", data_type).value_field
        element = SqlField(item.name, sql_type(item.type), item.nullable)
        return SqlType("array", element=element, arrow=str(data_type))
    if pa.types.is_map(data_type):
        value = SqlField("value", sql_type(data_type.item_type), data_type.item_field.nullable)
        return SqlType("map", key=sql_type(data_type.key_type), value=value, arrow=str(data_type))
    if pa.types.is_struct(data_type):
        fields = tuple(SqlField(f.name, sql_type(f.type), f.nullable) for f in data_type)
        return SqlType("struct", fields=fields, arrow=str(data_type))
    return SqlType("unsupported", arrow=str(data_type))


# Hive has no such column types: the values are kept in the closest one that holds them.
_HIVE_NAMES = {
    "timestamp_ntz": "timestamp",
    "interval": "bigint",
    "void": "string",
    "time": "string",
    "unsupported": "string",
}


def hive_type(data_type: pa.DataType | SqlType) -> str:
    """The Hive type name (Glue and Hive columns) that can hold values of an Arrow type."""
    sql = data_type if isinstance(data_type, SqlType) else sql_type(data_type)
    if sql.name == "decimal":
        if sql.precision > MAX_DECIMAL_PRECISION:
            return "string"
        return f"decimal({sql.precision},{sql.scale})"
    if sql.name == "array":
        assert sql.element is not None
        return f"array<{hive_type(sql.element.type)}>"
    if sql.name == "map":
        assert sql.key is not None and sql.value is not None
        return f"map<{hive_type(sql.key)},{hive_type(sql.value.type)}>"
    if sql.name == "struct":
        return "struct<" + ",".join(f"{f.name}:{hive_type(f.type)}" for f in sql.fields) + ">"
    return _HIVE_NAMES.get(sql.name, sql.name)


@dataclass(frozen=True)
class CatalogColumn:
    name: str
    type: str
    comment: str = ""


def catalog_columns(schema: pa.Schema) -> list[CatalogColumn]:
    """One catalog column per top-level Arrow field."""
    columns = []
    for arrow_field in schema:
        comment = ""
        if pa.types.is_fixed_size_list(arrow_field.type):
            comment = f"lance vector({arrow_field.type.list_size})"
        columns.append(CatalogColumn(arrow_field.name, hive_type(arrow_field.type), comment))
    return columns


def keep_comments(
    columns: list[CatalogColumn], before: list[CatalogColumn] | None
) -> list[CatalogColumn]:
    """``columns`` (from a Lance schema), each given the comment the catalog holds for the
    column of that name when a data steward or another tool wrote it: such a comment survives
    every write. Our own marker (``lance vector(n)``) is only a default: it never replaces a
    comment someone wrote, and a marker held is replaced by the current one."""
    held = {
        c.name.lower(): c.comment
        for c in before or ()
        if c.comment and not _VECTOR_MARKER.fullmatch(c.comment)
    }
    return [
        CatalogColumn(c.name, c.type, held[c.name.lower()]) if c.name.lower() in held else c
        for c in columns
    ]


# The comment catalog_columns gives a vector column: ours, not anyone's description.
_VECTOR_MARKER = re.compile(r"lance vector\(\d+\)")
