"""Arrow <-> Spark types, and the batch conversions on both sides of the data source.

Reading: a Lance schema becomes a Spark ``StructType`` (:func:`spark_schema`), and every batch
handed back to Spark must have *exactly* the Arrow schema Spark derives from that struct
(``to_arrow_schema(..., timezone="UTC")``; pyspark checks with ``Schema.equals``), so batches
are cast to it (:func:`conform`): fixed-size lists become lists, unsigned integers widen,
timestamps are presented in UTC, nullability follows the Spark schema.

Writing: Spark hands Arrow batches whose buffers are only 8-byte aligned (its IPC stream), and
Lance's Rust writer refuses (panics on) 16-byte types such as decimals that are not 16-byte
aligned; :func:`realign` copies exactly the columns whose buffers are misaligned, a no-op
for everything else. A new table's Arrow schema is Spark's, made nullable throughout (as
Spark's own Parquet writer does) with timestamps in UTC (:func:`storage_schema`); writing
into an existing table keeps that table's Arrow types where Spark's type maps to them, so a
Lance ``fixed_size_list`` vector column stays one (:func:`target_schema`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ..rules.schema import MAX_DECIMAL_PRECISION, SqlType, sql_type

UTC = "UTC"


class UnsupportedTypeError(TypeError):
    """An Arrow type that Spark cannot represent (the message names the column)."""


# --------------------------------------------------------------------------------------------
# Arrow -> Spark
# --------------------------------------------------------------------------------------------


def spark_type(data_type: pa.DataType | SqlType, where: str = "") -> DataType:
    """The Spark SQL type that holds every value of an Arrow type (read direction).

    The choice of SQL type is :func:`lance_metastore.rules.schema.sql_type`'s, shared with the
    catalog columns; this only spells it in Spark's classes.
    """
    sql = data_type if isinstance(data_type, SqlType) else sql_type(data_type)
    simple = _SPARK_SIMPLE.get(sql.name)
    if simple is not None:
        return simple()
    if sql.name == "decimal":
        if sql.precision > MAX_DECIMAL_PRECISION:
            raise UnsupportedTypeError(
                f"column {where!r}: {sql.arrow} exceeds Spark's decimal precision 38"
            )
        return DecimalType(sql.precision, sql.scale)
    if sql.name == "array":
        assert sql.element is not None
        element = spark_type(sql.element.type, f"{where}[]")
        return ArrayType(element, containsNull=sql.element.nullable)
    if sql.name == "map":
        assert sql.key is not None and sql.value is not None
        return MapType(
            spark_type(sql.key, f"{where}.key"),
            spark_type(sql.value.type, f"{where}.value"),
            valueContainsNull=sql.value.nullable,
        )
    if sql.name == "struct":
        return StructType(
            [
                StructField(f.name, spark_type(f.type, f"{where}.{f.name}"), f.nullable)
                for f in sql.fields
            ]
        )
    raise UnsupportedTypeError(f"column {where!r}: Arrow type {sql.arrow} has no Spark type")


_SPARK_SIMPLE: dict[str, Callable[[], DataType]] = {
    "boolean": BooleanType,
    "tinyint": ByteType,
    "smallint": ShortType,
    "int": IntegerType,
    "bigint": LongType,
    "float": FloatType,
    "double": DoubleType,
    "string": StringType,
    "binary": BinaryType,
    "date": DateType,
    "timestamp": TimestampType,
    "timestamp_ntz": TimestampNTZType,
    "interval": DayTimeIntervalType,
    "void": NullType,
}


def spark_schema(schema: pa.Schema, columns: Sequence[str] | None = None) -> StructType:
    """The Spark schema of a Lance dataset (or of the named columns, in that order)."""
    names = list(columns) if columns is not None else schema.names
    fields = []
    for name in names:
        arrow_field = schema.field(name)
        fields.append(
            StructField(
                arrow_field.name,
                spark_type(arrow_field.type, arrow_field.name),
                arrow_field.nullable,
            )
        )
    return StructType(fields)


def spark_arrow_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark expects of the batches a reader yields."""
    return to_arrow_schema(schema, timezone=UTC)


# --------------------------------------------------------------------------------------------
# Spark -> Arrow (write direction)
# --------------------------------------------------------------------------------------------


def storage_type(data_type: DataType) -> pa.DataType:
    """The Arrow type a new Lance column gets for a Spark type: nullable, timestamps in UTC."""
    if isinstance(data_type, ArrayType):
        return pa.list_(pa.field("item", storage_type(data_type.elementType), nullable=True))
    if isinstance(data_type, MapType):
        return pa.map_(  # type: ignore[call-overload,no-any-return]  # fields: stubs lack it
            pa.field("key", storage_type(data_type.keyType), nullable=False),
            pa.field("value", storage_type(data_type.valueType), nullable=True),
        )
    if isinstance(data_type, StructType):
        return pa.struct(
            [pa.field(f.name, storage_type(f.dataType), nullable=True) for f in data_type]
        )
    return to_arrow_type(data_type, timezone=UTC)


def storage_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of a new Lance table written from a Spark schema."""
    return pa.schema([pa.field(f.name, storage_type(f.dataType), nullable=True) for f in schema])


def target_schema(
    schema: StructType, existing: pa.Schema | None, *, append: bool, where: str = ""
) -> pa.Schema:
    """The Arrow schema to write a Spark schema's data with.

    ``append``: the columns must be the existing table's (matched case-insensitively, any
    order); each keeps its existing Arrow type, which the data is cast to. Otherwise (a new
    table or an overwrite) the columns are Spark's; a column of the same name and Spark type
    in the replaced data keeps its Arrow type (a vector stays a ``fixed_size_list``).
    """
    by_lower = {name.lower(): name for name in existing.names} if existing is not None else {}
    if append and existing is not None:
        incoming = {f.name.lower(): f for f in schema}
        missing = [n for n in existing.names if n.lower() not in incoming]
        extra = [f.name for f in schema if f.name.lower() not in by_lower]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing columns {missing}")
            if extra:
                parts.append(f"unknown columns {extra}")
            raise ValueError(
                f"Cannot append to {where}: the data's columns do not match the table's "
                f"({'; '.join(parts)}). Table columns: {existing.names}. Append exactly these "
                "columns, or write with mode('overwrite') to replace the table and its schema"
            )
        fields = []
        for name in existing.names:
            have = existing.field(name)
            want = spark_type_or_none(have.type)
            got = incoming[name.lower()].dataType
            if want is not None and not castable(got, want):
                raise ValueError(
                    f"Cannot append to {where}: column {name!r} is {want.simpleString()} in the "
                    f"table but {got.simpleString()} in the data"
                )
            fields.append(have)
        # (pyarrow-stubs type metadata as an invariant dict of bytes or str.)
        return pa.schema(fields, metadata=existing.metadata)  # type: ignore[arg-type]
    fields = []
    for spark_field in schema:
        natural = pa.field(spark_field.name, storage_type(spark_field.dataType), nullable=True)
        old_name = by_lower.get(spark_field.name.lower())
        if old_name is not None and existing is not None:
            old = existing.field(old_name)
            if spark_type_or_none(old.type) == _nullable_type(spark_field.dataType):
                natural = pa.field(spark_field.name, old.type, nullable=True, metadata=old.metadata)
        fields.append(natural)
    return pa.schema(fields)


def spark_type_or_none(data_type: pa.DataType) -> DataType | None:
    try:
        return _nullable_type(spark_type(data_type))
    except UnsupportedTypeError:
        return None


def _nullable_type(data_type: DataType) -> DataType:
    """The type with every nested field, element and value nullable (for comparisons)."""
    if isinstance(data_type, ArrayType):
        return ArrayType(_nullable_type(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(_nullable_type(data_type.keyType), _nullable_type(data_type.valueType), True)
    if isinstance(data_type, StructType):
        return StructType(
            [StructField(f.name, _nullable_type(f.dataType), True) for f in data_type]
        )
    return data_type


def castable(got: DataType, want: DataType) -> bool:
    """Whether Spark data of type ``got`` may be written into a column of type ``want``.

    Same type (nullability aside), or a numeric widening that loses nothing.
    """
    got, want = _nullable_type(got), _nullable_type(want)
    if got == want:
        return True
    widening: dict[type[DataType], tuple[type[DataType], ...]] = {
        ByteType: (ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType),
        ShortType: (IntegerType, LongType, FloatType, DoubleType, DecimalType),
        IntegerType: (LongType, DoubleType, DecimalType),
        LongType: (DecimalType,),
        FloatType: (DoubleType,),
    }
    allowed = widening.get(type(got), ())
    return isinstance(want, allowed)


# --------------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------------

_WIDE = 16


def _needs_wide_alignment(data_type: pa.DataType) -> bool:
    """Whether the type (or a child) holds 16-byte values: decimals, month-day-nano intervals."""
    t = pa.types
    if t.is_decimal(data_type) or data_type == pa.month_day_nano_interval():
        return True
    if t.is_dictionary(data_type):
        return _needs_wide_alignment(data_type.value_type)
    return any(_needs_wide_alignment(data_type.field(i).type) for i in range(data_type.num_fields))


def _aligned(array: pa.Array[Any]) -> bool:
    alignment = _WIDE if _needs_wide_alignment(array.type) else 8
    return all(b is None or b.address % alignment == 0 for b in array.buffers())


def realign(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with every misaligned column copied into fresh (64-byte aligned) memory."""
    columns = list(batch.columns)
    changed = False
    for i, column in enumerate(columns):
        if not _aligned(column):
            columns[i] = pa.concat_arrays([column])
            changed = True
    if not changed:
        return batch
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def conform(batch: pa.RecordBatch, schema: pa.Schema, names: Sequence[str]) -> pa.RecordBatch:
    """Select ``names`` from ``batch`` (in order) and cast them to ``schema``.

    ``names[i]`` is the batch column that becomes ``schema.field(i)``; the result carries
    ``schema``'s names, types and nullability exactly.
    """
    columns = []
    for i, name in enumerate(names):
        target = schema.field(i)
        column = batch.column(name)
        if not column.type.equals(target.type):
            column = _cast(column, target.type, target.name)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _cast(column: pa.Array[Any], data_type: pa.DataType, name: str) -> pa.Array[Any]:
    try:
        return column.cast(data_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        if pa.types.is_timestamp(data_type) or pa.types.is_duration(data_type):
            # Nanosecond precision to Spark's microseconds: truncate, as Spark would.
            return column.cast(data_type, safe=False)
        raise ValueError(
            f"column {name!r}: cannot convert {column.type} to {data_type}: {error}"
        ) from error
