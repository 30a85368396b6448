"""The one Arrow -> SQL type mapping, as a pure unit over every Arrow type: the catalog column
(Hive spelling) and the Spark type of each must name the same SQL type."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lance_metastore.rules.schema import hive_type, sql_type
from lance_metastore.spark.types import UnsupportedTypeError, spark_type

POINT = pa.struct([("x", pa.int64()), ("label", pa.string())])

# (Arrow type, catalog column type, Spark type as simpleString, or None: Spark refuses it)
CASES = [
    (pa.bool_(), "boolean", "boolean"),
    (pa.int8(), "tinyint", "tinyint"),
    (pa.int16(), "smallint", "smallint"),
    (pa.int32(), "int", "int"),
    (pa.int64(), "bigint", "bigint"),
    (pa.uint8(), "smallint", "smallint"),
    (pa.uint16(), "int", "int"),
    (pa.uint32(), "bigint", "bigint"),
    (pa.uint64(), "decimal(20,0)", "decimal(20,0)"),
    (pa.float16(), "float", "float"),
    (pa.float32(), "float", "float"),
    (pa.float64(), "double", "double"),
    (pa.decimal128(10, 2), "decimal(10,2)", "decimal(10,2)"),
    (pa.decimal256(38, 4), "decimal(38,4)", "decimal(38,4)"),
    (pa.decimal256(60, 4), "string", None),
    (pa.string(), "string", "string"),
    (pa.large_string(), "string", "string"),
    (pa.string_view(), "string", "string"),
    (pa.binary(), "binary", "binary"),
    (pa.large_binary(), "binary", "binary"),
    (pa.binary_view(), "binary", "binary"),
    (pa.binary(16), "binary", "binary"),
    (pa.date32(), "date", "date"),
    (pa.date64(), "date", "date"),
    (pa.timestamp("us", tz="UTC"), "timestamp", "timestamp"),
    (pa.timestamp("ns", tz="Europe/Paris"), "timestamp", "timestamp"),
    (pa.timestamp("ms"), "timestamp", "timestamp_ntz"),
    (pa.duration("us"), "bigint", "interval day to second"),
    (pa.null(), "string", "void"),
    (pa.time64("us"), "string", None),
    (pa.time32("s"), "string", None),
    (pa.dictionary(pa.int32(), pa.string()), "string", "string"),
    (pa.list_(pa.int32()), "array<int>", "array<int>"),
    (pa.large_list(pa.string()), "array<string>", "array<string>"),
    (pa.list_(pa.float32(), 4), "array<float>", "array<float>"),
    (pa.list_view(pa.int32()), "array<int>", "array<int>"),
    (pa.large_list_view(pa.binary_view()), "array<binary>", "array<binary>"),
    (pa.map_(pa.string(), pa.int64()), "map<string,bigint>", "map<string,bigint>"),
    (POINT, "struct<x:bigint,label:string>", "struct<x:bigint,label:string>"),
    (
        pa.list_(pa.struct([("tags", pa.list_view(pa.string_view())), ("n", pa.uint64())])),
        "array<struct<tags:array<string>,n:decimal(20,0)>>",
        "array<struct<tags:array<string>,n:decimal(20,0)>>",
    ),
    (
        pa.map_(pa.string(), pa.list_(POINT)),
        "map<string,array<struct<x:bigint,label:string>>>",
        "map<string,array<struct<x:bigint,label:string>>>",
    ),
    (pa.dense_union([pa.field("a", pa.int32())]), "string", None),
]


@pytest.mark.parametrize(("arrow", "hive", "spark"), CASES, ids=[str(c[0]) for c in CASES])
def test_one_mapping_for_catalog_columns_and_spark(arrow, hive, spark) -> None:
    assert hive_type(arrow) == hive
    if spark is None:
        with pytest.raises(UnsupportedTypeError, match="column 'c'"):
            spark_type(arrow, "c")
    else:
        assert spark_type(arrow, "c").simpleString() == spark
    assert sql_type(arrow) == sql_type(arrow)  # a value: the same answer every time


def test_nullability_travels_to_spark() -> None:
    strict = pa.list_(pa.field("item", pa.int32(), nullable=False))
    assert spark_type(strict).containsNull is False
    assert spark_type(pa.map_(pa.string(), pa.int32())).valueContainsNull is True
