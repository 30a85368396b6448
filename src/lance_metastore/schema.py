"""Arrow schema to catalog columns, so Athena, Hive and the Glue console show real columns.

Glue Columns and Hive FieldSchemas both use Hive type names; one mapping serves both.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class CatalogColumn:
    name: str
    type: str
    comment: str = ""


def hive_type(data_type: pa.DataType) -> str:
    """The Hive type name that can hold values of an Arrow type."""
    t = pa.types
    if t.is_dictionary(data_type):
        return hive_type(data_type.value_type)
    if t.is_boolean(data_type):
        return "boolean"
    if t.is_int8(data_type):
        return "tinyint"
    if t.is_int16(data_type) or t.is_uint8(data_type):
        return "smallint"
    if t.is_int32(data_type) or t.is_uint16(data_type):
        return "int"
    if t.is_int64(data_type) or t.is_uint32(data_type):
        return "bigint"
    if t.is_uint64(data_type):
        return "decimal(20,0)"
    if t.is_float16(data_type) or t.is_float32(data_type):
        return "float"
    if t.is_float64(data_type):
        return "double"
    if t.is_decimal(data_type):
        return f"decimal({data_type.precision},{data_type.scale})"
    if t.is_string(data_type) or t.is_large_string(data_type) or _is_string_view(data_type):
        return "string"
    if t.is_binary(data_type) or t.is_large_binary(data_type) or t.is_fixed_size_binary(data_type):
        return "binary"
    if t.is_date(data_type):
        return "date"
    if t.is_timestamp(data_type):
        return "timestamp"
    if t.is_time(data_type) or t.is_null(data_type):
        return "string"
    if t.is_duration(data_type):
        return "bigint"
    if t.is_list(data_type) or t.is_large_list(data_type) or t.is_fixed_size_list(data_type):
        return f"array<{hive_type(data_type.value_type)}>"
    if t.is_map(data_type):
        return f"map<{hive_type(data_type.key_type)},{hive_type(data_type.item_type)}>"
    if t.is_struct(data_type):
        fields = ",".join(
            f"{data_type.field(i).name}:{hive_type(data_type.field(i).type)}"
            for i in range(data_type.num_fields)
        )
        return f"struct<{fields}>"
    return "string"


def _is_string_view(data_type: pa.DataType) -> bool:
    check = getattr(pa.types, "is_string_view", None)
    return bool(check and check(data_type))


def catalog_columns(schema: pa.Schema) -> list[CatalogColumn]:
    """One catalog column per top-level Arrow field."""
    columns = []
    for arrow_field in schema:
        comment = ""
        if pa.types.is_fixed_size_list(arrow_field.type):
            comment = f"lance vector({arrow_field.type.list_size})"
        columns.append(CatalogColumn(arrow_field.name, hive_type(arrow_field.type), comment))
    return columns
