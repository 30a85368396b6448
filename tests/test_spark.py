"""The Spark data source, end to end: a real local[2] SparkSession against the real Hive
Metastore (hive2, hive3) and the Glue emulator, Lance data on local disk and on moto's S3.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import threading
import time
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance_namespace import CreateNamespaceRequest, DescribeTableRequest, TableExistsRequest
from lance_namespace.errors import TableNotFoundError
from support.harness import Harness
from support.spark import plan_nodes, scan_rows

from lance_metastore.spark import use_in_this_thread

pyspark = pytest.importorskip("pyspark")

from pyspark.errors import PySparkException  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

pytestmark = [
    pytest.mark.timeout(300),
    # pytest's process imports lance before Spark starts its JVM and Python workers
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def make_db(harness: Harness, prefix: str = "db") -> list[str]:
    db = harness.db(harness.unique(prefix))
    ns = harness.connect()
    ns.create_namespace(CreateNamespaceRequest(id=db))
    return db


def table_path(db: list[str], name: str) -> str:
    return "$".join([*db, name])


def lance_options(harness: Harness) -> dict[str, str]:
    return {"impl": harness.name, **harness.properties()}


def write(df: Any, harness: Harness, path: str, mode: str = "append", **options: str) -> None:
    writer = df.write.format("lance").mode(mode).options(**lance_options(harness))
    writer.options(**options).save(path)


def read(spark: Any, harness: Harness, path: str, **options: str) -> Any:
    return spark.read.format("lance").options(**lance_options(harness), **options).load(path)


def location(harness: Harness, db: list[str], name: str) -> str:
    return harness.connect().describe_table(DescribeTableRequest(id=[*db, name])).location


def data_files(uri: str) -> list[str]:
    data = Path(uri) / "data"
    return sorted(os.listdir(data)) if data.is_dir() else []


def exists(harness: Harness, db: list[str], name: str) -> bool:
    try:
        harness.connect().table_exists(TableExistsRequest(id=[*db, name]))
    except TableNotFoundError:
        return False
    return True


def eventually(predicate: Any, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)


def rows(df: Any, key: str = "id") -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=lambda r: r[df.columns.index(key)])


def orders(spark: Any, n: int = 1000, start: int = 0, parts: int = 2) -> Any:
    return spark.range(start, start + n, 1, parts).select(
        F.col("id"),
        (F.col("id") % 7).cast("int").alias("customer"),
        (F.col("id") * 1.5).alias("amount"),
        F.concat(F.lit("item-"), F.col("id").cast("string")).alias("item"),
    )


# --------------------------------------------------------------------------------------------
# Save modes, per catalog
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend_name", ["hive2", "hive3", "glue"])
def test_save_modes(spark, request, backend_name: str):
    harness: Harness = request.getfixturevalue(backend_name)
    db = make_db(harness)
    path = table_path(db, "orders")

    # append creates a missing table: declared in the catalog, written, columns recorded
    write(orders(spark, 100), harness, path)
    assert read(spark, harness, path).count() == 100
    uri = location(harness, db, "orders")
    assert lance.dataset(uri).version == 1
    assert harness.columns(db, "orders") == [
        ("id", "bigint"),
        ("customer", "int"),
        ("amount", "double"),
        ("item", "string"),
    ]

    # append adds rows in one new version
    write(orders(spark, 50, start=100), harness, path)
    assert read(spark, harness, path).count() == 150
    assert lance.dataset(uri).version == 2

    # errorifexists: refused, nothing changes
    with pytest.raises(Exception, match="already exists"):
        write(orders(spark, 10), harness, path, save_mode="errorifexists")
    assert lance.dataset(uri).version == 2

    # ignore: nothing written
    write(orders(spark, 10), harness, path, save_mode="ignore")
    assert lance.dataset(uri).version == 2
    assert read(spark, harness, path).count() == 150

    # overwrite: new data and schema, same catalog entry, columns follow the schema
    replacement = spark.range(0, 5).select(F.col("id"), F.lit("x").alias("note"))
    write(replacement, harness, path, mode="overwrite")
    assert location(harness, db, "orders") == uri
    assert rows(read(spark, harness, path)) == [(i, "x") for i in range(5)]
    assert harness.columns(db, "orders") == [("id", "bigint"), ("note", "string")]

    # errorifexists and ignore on a new table create it
    write(orders(spark, 3), harness, table_path(db, "fresh"), save_mode="errorifexists")
    write(orders(spark, 4), harness, table_path(db, "fresh2"), save_mode="ignore")
    assert read(spark, harness, table_path(db, "fresh")).count() == 3
    assert read(spark, harness, table_path(db, "fresh2")).count() == 4


def test_append_checks_columns(spark, hive3):
    db = make_db(hive3)
    path = table_path(db, "t")
    write(orders(spark, 10), hive3, path)
    # different column order and case is fine; types are widened where lossless
    reordered = orders(spark, 5, start=10).select(
        F.col("item").alias("ITEM"), "amount", F.col("customer").cast("short"), "id"
    )
    write(reordered, hive3, path)
    assert rows(read(spark, hive3, path))[-1] == (14, 0, 21.0, "item-14")
    with pytest.raises(Exception, match="missing columns"):
        write(orders(spark, 5).drop("item"), hive3, path)
    with pytest.raises(Exception, match="is double in the table but string"):
        write(orders(spark, 5).withColumn("amount", F.lit("x")), hive3, path)
    assert read(spark, hive3, path).count() == 15


# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------

TYPE_SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("b", T.ByteType()),
        T.StructField("s16", T.ShortType()),
        T.StructField("i", T.IntegerType()),
        T.StructField("f", T.FloatType()),
        T.StructField("d", T.DoubleType()),
        T.StructField("dec", T.DecimalType(20, 4)),
        T.StructField("dec38", T.DecimalType(38, 10)),
        T.StructField("s", T.StringType()),
        T.StructField("bin", T.BinaryType()),
        T.StructField("flag", T.BooleanType()),
        T.StructField("day", T.DateType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("ntz", T.TimestampNTZType()),
        T.StructField("ints", T.ArrayType(T.IntegerType())),
        T.StructField("words", T.ArrayType(T.StringType())),
        T.StructField(
            "point",
            T.StructType(
                [
                    T.StructField("x", T.DoubleType()),
                    T.StructField("tags", T.ArrayType(T.StringType())),
                    T.StructField("at", T.TimestampType()),
                ]
            ),
        ),
        T.StructField("attrs", T.MapType(T.StringType(), T.LongType())),
        T.StructField("nested", T.ArrayType(T.StructType([T.StructField("k", T.StringType())]))),
    ]
)

UTC = dt.timezone.utc


def type_rows() -> list[tuple]:
    full = (
        1,
        -128,
        -32768,
        -(2**31),
        1.5,
        -2.25e300,
        decimal.Decimal("1234567890123456.1234"),
        decimal.Decimal("1234567890123456789012345678.0123456789"),
        "héllo 'quoted' \\ 世界",
        b"\x00\x01\xff",
        True,
        dt.date(1969, 12, 31),
        dt.datetime(1965, 3, 4, 5, 6, 7, 891011),
        dt.datetime(2262, 4, 11, 23, 47, 16, 854775),
        [1, None, 3],
        ["a", None],
        (3.5, ["t1", "t2"], dt.datetime(2024, 2, 29, 12, 0, 0, 1)),
        {"k": 1, "n": None},
        [("v",), None],
    )
    extremes = (
        2,
        127,
        32767,
        2**31 - 1,
        float("inf"),
        float("nan"),
        decimal.Decimal("-9999999999999999.9999"),
        decimal.Decimal("-0.0000000001"),
        "",
        b"",
        False,
        dt.date(9999, 12, 31),
        dt.datetime(2038, 1, 19, 3, 14, 8),
        dt.datetime(1, 1, 1, 0, 0, 0),
        [],
        [],
        (None, None, None),
        {},
        [],
    )
    nulls = (3, *([None] * (len(full) - 1)))
    return [full, extremes, nulls]


def test_type_matrix_round_trip(spark, hive3):
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        df = spark.createDataFrame(type_rows(), TYPE_SCHEMA).repartition(2)
        db = make_db(hive3)
        path = table_path(db, "types")
        write(df, hive3, path)
        back = read(spark, hive3, path)
        assert back.schema == T.StructType(
            [T.StructField(f.name, f.dataType, True) for f in TYPE_SCHEMA]
        )
        expected = {r["id"]: r for r in df.collect()}
        got = {r["id"]: r for r in back.collect()}
        assert set(got) == set(expected)
        for key, row in expected.items():
            for name in TYPE_SCHEMA.names:
                want, have = row[name], got[key][name]
                if isinstance(want, float) and want != want:  # NaN
                    assert have != have
                else:
                    assert have == want, (key, name, have, want)
        # Spark compares the whole data set, too (NaN = NaN in Spark SQL; no set operations
        # on maps)
        back, df = back.drop("attrs"), df.drop("attrs")
        assert back.exceptAll(df).count() == 0 and df.exceptAll(back).count() == 0
        # timestamps are instants: stored in UTC whatever the session zone
        schema = lance.dataset(location(hive3, db, "types")).schema
        assert schema.field("ts").type == pa.timestamp("us", tz="UTC")
        assert schema.field("ntz").type == pa.timestamp("us")
        assert dict(hive3.columns(db, "types"))["attrs"] == "map<string,bigint>"
    finally:
        spark.conf.unset("spark.sql.session.timeZone")


def test_decimal_alignment(spark, tmp_path: Path):
    # Decimals are 16-byte values; batches from Spark only guarantee 8-byte alignment.
    df = spark.range(0, 20000, 1, 2).select(
        F.col("id"),
        F.col("id").cast("int").alias("i"),
        (F.col("id") / 3).cast("decimal(38,6)").alias("a"),
        (F.col("id") * 7).cast("decimal(10,2)").alias("b"),
    )
    uri = str(tmp_path / "dec.lance")
    df.write.format("lance").mode("append").save(uri)
    assert spark.read.format("lance").load(uri).exceptAll(df).count() == 0


def test_realign_copies_only_misaligned_columns():
    import ctypes

    from lance_metastore.spark.types import realign

    n = 64
    decimals = pa.array([decimal.Decimal(i) for i in range(n)], pa.decimal128(20, 3))
    raw = pa.allocate_buffer(16 * n + 16)
    offset = 8 if raw.address % 16 == 0 else 0
    ctypes.memmove(raw.address + offset, decimals.buffers()[1].address, 16 * n)
    shifted = pa.Array.from_buffers(decimals.type, n, [None, raw.slice(offset, 16 * n)])
    ints = pa.array(range(n), pa.int64())
    batch = pa.record_batch([ints, shifted], names=["i", "d"])
    assert batch.column(1).buffers()[1].address % 16 == 8
    fixed = realign(batch)
    assert fixed.column(1).buffers()[1].address % 16 == 0
    assert fixed.column(0).buffers()[1].address == ints.buffers()[1].address  # not copied
    assert fixed.equals(batch)
    assert realign(fixed) is fixed


def test_pylance_vectors_and_unsigned_read_as_spark_types(spark, hive2):
    ns = hive2.connect()
    db = make_db(hive2)
    data = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array([1, 2, 3, 4], pa.float32()), 2),
            "u8": pa.array([255, 0], pa.uint8()),
            "u64": pa.array([2**64 - 1, 0], pa.uint64()),
            "big": pa.array(["x", "y"], pa.large_string()),
            "ns": pa.array([1_000_000_001, 0], pa.timestamp("ns", tz="Europe/Paris")),
        }
    )
    lance.write_dataset(data, namespace_client=ns, table_id=[*db, "vectors"], mode="create")
    df = read(spark, hive2, table_path(db, "vectors"))
    assert df.schema["vec"].dataType == T.ArrayType(T.FloatType(), True)
    assert df.schema["u64"].dataType == T.DecimalType(20, 0)
    got = {r["id"]: r for r in df.collect()}
    assert got[1]["vec"] == [1.0, 2.0] and got[2]["vec"] == [3.0, 4.0]
    assert got[1]["u8"] == 255 and got[1]["u64"] == decimal.Decimal(2**64 - 1)
    assert got[1]["ns"] == dt.datetime(1970, 1, 1, 0, 0, 1)  # truncated to microseconds
    # Spark can append to it: arrays become the table's fixed-size vectors again
    more = spark.createDataFrame(
        [(3, [5.0, 6.0], 1, decimal.Decimal(7), "z", None)],
        "id long, vec array<float>, u8 short, u64 decimal(20,0), big string, ns timestamp",
    )
    write(more, hive2, table_path(db, "vectors"))
    table = lance.dataset(location(hive2, db, "vectors")).to_table()
    assert table.schema.field("vec").type == pa.list_(pa.float32(), 2)
    assert table.num_rows == 3


# --------------------------------------------------------------------------------------------
# Reads: filters, columns, versions, partitions
# --------------------------------------------------------------------------------------------


@pytest.fixture
def filter_table(spark, hive3) -> tuple[Any, str, Any]:
    db = make_db(hive3)
    path = table_path(db, "events")
    df = spark.createDataFrame(
        [
            (
                i,
                None if i % 10 == 0 else f"name-{i % 13}'s",
                i * 0.5,
                decimal.Decimal(i) / 4,
                dt.date(2024, 1, 1) + dt.timedelta(days=i % 40),
                dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i),
                dt.datetime(2024, 1, 1) + dt.timedelta(minutes=i),
                i % 3 == 0,
                (i % 5, f"s{i % 4}"),
            )
            for i in range(400)
        ],
        "id long, name string, score double, price decimal(12,2), day date, at timestamp, "
        "local timestamp_ntz, flag boolean, pos struct<x:int, label:string>",
    )
    write(df.repartition(2), hive3, path)
    return df, path, read(spark, hive3, path)


FILTERS = [
    "id = 7",
    "id <=> 7",
    "id > 390",
    "id >= 390 and id < 395",
    "id <= 3",
    "id in (1, 5, 399, 1000)",
    "not (id > 5)",
    "id != 3 and id < 6",
    "name is null",
    "name is not null and id < 20",
    "name = 'name-3''s'",
    "name like 'name-1%'",
    "name like '%2''s'",
    "name like '%-1%'",
    "score > 150.25",
    "price >= 99.5",
    "price = 12.25",
    "day = date'2024-01-05'",
    "day > date'2024-02-05'",
    "at >= timestamp'2024-01-16 12:00:00'",
    "at < timestamp'2024-01-01 03:00:00+00:00'",
    "local = timestamp_ntz'2024-01-01 01:40:00'",
    "flag = true and id < 10",
    "pos.x = 3 and pos.label = 's2'",
    "id < 10 or id > 395",  # never offered to the source: Spark evaluates it
    "length(name) = 9",  # not translatable: Spark evaluates it
]


@pytest.mark.parametrize("condition", FILTERS)
def test_filters_match_spark(spark, filter_table, condition: str):
    df, _, lance_df = filter_table
    spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")
    try:
        assert rows(lance_df.filter(condition)) == rows(df.filter(condition))
    finally:
        spark.conf.unset("spark.sql.session.timeZone")


def test_pushed_filter_reduces_rows_read(spark, filter_table, hive3):
    _, path, lance_df = filter_table
    selective = lance_df.filter("id >= 100 and id < 110 and name is not null")
    assert len(selective.collect()) == 9
    assert scan_rows(selective) == 9
    assert "Filter" not in plan_nodes(selective)  # Spark trusts the source: no re-check
    unpushed = read(spark, hive3, path, pushdown="false").filter("id >= 100 and id < 110")
    assert len(unpushed.collect()) == 10
    assert scan_rows(unpushed) == 400


def test_columns_option_and_user_schema(spark, filter_table, hive3):
    _, path, _ = filter_table
    picked = read(spark, hive3, path, columns="score, ID")
    assert picked.columns == ["score", "id"]
    assert picked.filter("id = 4").collect()[0] == (2.0, 4)
    by_schema = (
        spark.read.format("lance")
        .options(**lance_options(hive3))
        .schema("id long, day date")
        .load(path)
    )
    assert by_schema.filter("id = 2").collect()[0] == (2, dt.date(2024, 1, 3))
    with pytest.raises(Exception, match="no column"):
        read(spark, hive3, path, columns="nope").collect()


def test_version_time_travel(spark, hive2):
    db = make_db(hive2)
    path = table_path(db, "history")
    write(orders(spark, 10), hive2, path)
    write(orders(spark, 5, start=10), hive2, path)
    write(orders(spark, 2), hive2, path, mode="overwrite")
    assert read(spark, hive2, path).count() == 2
    assert read(spark, hive2, path, version="1").count() == 10
    assert read(spark, hive2, path, version="2").count() == 15
    ds = lance.dataset(location(hive2, db, "history"))
    ds.tags.create("golden", 2)
    assert read(spark, hive2, path, version="golden").count() == 15
    with pytest.raises(Exception, match=r"has no version 9.*latest version is 3"):
        read(spark, hive2, path, version="9").count()
    with pytest.raises(Exception, match="has no as_of"):
        read(spark, hive2, path, as_of="2000-01-01T00:00:00Z").count()
    now = dt.datetime.now(dt.timezone.utc).isoformat()
    assert read(spark, hive2, path, as_of=now).count() == 2


def test_large_fragment_is_split_across_cores(spark, tmp_path: Path):
    uri = str(tmp_path / "big.lance")
    n = 300_000
    lance.write_dataset(
        pa.table({"id": pa.array(range(n), pa.int64()), "v": pa.array(range(n), pa.int32())}),
        uri,
        max_rows_per_file=n,
    )
    df = spark.read.format("lance").load(uri)
    assert df.rdd.getNumPartitions() >= 2
    assert df.agg(F.sum("id"), F.count("*")).collect()[0] == (n * (n - 1) // 2, n)
    filtered = df.filter("v % 1000 = 0 and id >= 1000")
    assert filtered.rdd.getNumPartitions() >= 2
    assert filtered.count() == n // 1000 - 1
    pushed = spark.read.format("lance").load(uri).filter("id >= 1000 and id < 151000")
    assert pushed.rdd.getNumPartitions() >= 2
    assert pushed.count() == 150_000
    # a deletion leaves the ranges consistent
    lance.dataset(uri).delete("id % 2 = 1")
    again = spark.read.format("lance").load(uri)
    assert again.count() == n // 2
    assert again.filter("id < 10").count() == 5


# --------------------------------------------------------------------------------------------
# Failed jobs change nothing
# --------------------------------------------------------------------------------------------


def failing(spark: Any, n: int = 2000, bad: int = 1500) -> Any:
    @F.udf("long", useArrow=False)
    def explode_at(value):
        if value == bad:
            raise ValueError("boom: bad row")
        return value

    return orders(spark, n).withColumn("id", explode_at("id"))


@pytest.mark.parametrize("backend_name", ["hive2", "glue"])
def test_failed_job_leaves_no_trace(spark, request, backend_name: str):
    harness: Harness = request.getfixturevalue(backend_name)
    db = make_db(harness)
    # a new table: no catalog entry, no files afterwards
    with pytest.raises(Exception, match="boom"):
        write(failing(spark), harness, table_path(db, "never"))
    assert not exists(harness, db, "never")

    def leftovers() -> list[Path]:
        # Only the job's _ABORTED marker may stay (it stops straggling tasks from writing).
        return [
            p
            for p in harness.root.rglob("*")
            if "never" in str(p) and p.is_file() and p.name != "_ABORTED"
        ]

    # Tasks of a failed job are not interrupted: wait for stragglers to clean up.
    assert eventually(lambda: leftovers() == []), leftovers()

    # an existing table: same version, same rows, no new data files
    path = table_path(db, "kept")
    write(orders(spark, 100), harness, path)
    uri = location(harness, db, "kept")
    before = data_files(uri)
    for mode in ("append", "overwrite"):
        with pytest.raises(Exception, match="boom"):
            write(failing(spark), harness, path, mode=mode)
        assert lance.dataset(uri).version == 1
        assert eventually(lambda: data_files(uri) == before), data_files(uri)
        assert read(spark, harness, path).count() == 100


@pytest.mark.parametrize("backend_name", ["hive3", "glue"])
def test_catalog_managed_table(spark, request, backend_name: str):
    """managed_by=impl: every Spark commit goes through the catalog, which keeps the versions."""
    harness: Harness = request.getfixturevalue(backend_name)
    db = make_db(harness)
    path = table_path(db, "managed")
    managed = {"managed_by": "impl"}
    write(orders(spark, 10), harness, path, **managed)
    write(orders(spark, 5, start=10), harness, path, **managed)
    ns = harness.connect(**managed)
    described = ns.describe_table(DescribeTableRequest(id=[*db, "managed"]))
    assert described.managed_versioning is True
    assert described.properties["version"] == "2"
    # The driver's committed schema becomes the columns; nothing re-opened through the catalog.
    assert [name for name, _ in harness.columns(db, "managed")] == [
        "id",
        "customer",
        "amount",
        "item",
    ]
    assert read(spark, harness, path, **managed).count() == 15
    assert read(spark, harness, path, version="1", **managed).count() == 10
    with pytest.raises(Exception, match="boom"):
        write(failing(spark), harness, path, mode="overwrite", **managed)
    described = ns.describe_table(DescribeTableRequest(id=[*db, "managed"]))
    assert described.properties["version"] == "2"
    write(orders(spark, 3), harness, path, mode="overwrite", **managed)
    assert ns.describe_table(DescribeTableRequest(id=[*db, "managed"])).properties["version"] == "3"
    assert rows(read(spark, harness, path, **managed)) == rows(orders(spark, 3))
    dataset = lance.dataset(namespace_client=ns, table_id=[*db, "managed"])
    assert dataset.version == 3 and dataset.count_rows() == 3


@pytest.mark.parametrize("backend_name", ["hive2", "glue"])
def test_two_jobs_append_to_one_managed_table_at_once(spark, request, backend_name: str):
    """Two Spark jobs commit to one catalog-managed table at the same time: both land."""
    harness: Harness = request.getfixturevalue(backend_name)
    db = make_db(harness)
    path = table_path(db, "shared")
    managed = {"managed_by": "impl"}
    write(orders(spark, 10), harness, path, **managed)
    errors: list[BaseException] = []

    def job(start: int) -> None:
        try:
            # Spark finds Python data sources through the thread's active session.
            use_in_this_thread(spark)
            write(orders(spark, 100, start=start), harness, path, **managed)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=job, args=(start,)) for start in (1000, 2000)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    ns = harness.connect(**managed)
    assert ns.describe_table({"id": [*db, "shared"]}).properties["version"] == "3"
    assert read(spark, harness, path, **managed).count() == 210
    ids = {row[0] for row in read(spark, harness, path, **managed).select("id").collect()}
    assert len(ids) == 210


# --------------------------------------------------------------------------------------------
# Interop with pylance and lancedb
# --------------------------------------------------------------------------------------------


def test_reads_table_written_by_pylance(spark, hive3):
    ns = hive3.connect()
    db = make_db(hive3)
    data = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]})
    lance.write_dataset(data, namespace_client=ns, table_id=[*db, "from_pylance"], mode="create")
    df = read(spark, hive3, table_path(db, "from_pylance"))
    assert rows(df) == [(1, "a"), (2, "b"), (3, "c")]
    assert rows(df.filter("name > 'a'")) == [(2, "b"), (3, "c")]


def test_lancedb_opens_table_written_by_spark(spark, hive2):
    import lancedb

    db = make_db(hive2)
    vectors = spark.range(0, 300, 1, 2).select(
        F.col("id"),
        F.array(F.col("id").cast("float"), (F.col("id") * 2).cast("float")).alias("vector"),
        F.concat(F.lit("doc-"), F.col("id").cast("string")).alias("text"),
    )
    write(vectors, hive2, table_path(db, "docs"))
    conn = lancedb.connect_namespace("lance_metastore.Hive2Namespace", hive2.properties())
    table = conn.open_table("docs", namespace_path=db)
    assert table.count_rows() == 300
    found = table.search().where("id = 42").to_list()
    assert found[0]["text"] == "doc-42" and list(found[0]["vector"]) == [42.0, 84.0]
    assert "docs" in conn.list_tables(namespace_path=db).tables


def test_catalog_columns_reflect_schema(spark, glue):
    db = make_db(glue)
    df = spark.createDataFrame(
        [(1, [1.0], {"a": 1}, ("x", 2))],
        "id long, v array<double>, m map<string,int>, s struct<a:string, b:int>",
    )
    write(df, glue, table_path(db, "cols"))
    assert glue.columns(db, "cols") == [
        ("id", "bigint"),
        ("v", "array<double>"),
        ("m", "map<string,int>"),
        ("s", "struct<a:string,b:int>"),
    ]


# --------------------------------------------------------------------------------------------
# S3 (moto) through storage.* options
# --------------------------------------------------------------------------------------------


def test_s3_through_glue(spark, glue, glue_emulator):
    bucket = f"lake-{glue.unique('b').replace('_', '-')}"
    glue_emulator.client("s3").create_bucket(Bucket=bucket)
    storage = {
        "storage.aws_endpoint": glue_emulator.endpoint,
        "storage.allow_http": "true",
        "storage.aws_access_key_id": glue_emulator.access_key_id,
        "storage.aws_secret_access_key": glue_emulator.secret_access_key,
        "storage.aws_region": glue_emulator.region,
    }
    props = {**glue.properties(), "root": f"s3://{bucket}/lake", **storage}
    db = glue.db(glue.unique("s3db"))
    ns = glue.connect(**{k: v for k, v in props.items() if k not in glue.properties()})
    ns.create_namespace(CreateNamespaceRequest(id=db))
    opts = {"impl": "glue", **props}
    path = table_path(db, "orders")
    orders(spark, 500).write.format("lance").options(**opts).mode("append").save(path)
    orders(spark, 20, start=500).write.format("lance").options(**opts).mode("append").save(path)
    df = spark.read.format("lance").options(**opts).load(path)
    assert df.count() == 520
    assert df.filter("id >= 510").count() == 10
    uri = ns.describe_table(DescribeTableRequest(id=[*db, "orders"])).location
    assert uri.startswith(f"s3://{bucket}/lake/")
    s3_options = {k.removeprefix("storage."): v for k, v in storage.items()}
    assert lance.dataset(uri, storage_options=s3_options).count_rows() == 520
    # a failed overwrite on S3 leaves the objects as they were
    s3 = glue_emulator.client("s3")
    before = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    with pytest.raises(Exception, match="boom"):
        failing(spark).write.format("lance").options(**opts).mode("overwrite").save(path)

    def objects() -> list[str]:
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
        return sorted(k for k in keys if not k.endswith("/_ABORTED"))

    assert eventually(lambda: objects() == before), objects()


# --------------------------------------------------------------------------------------------
# Paths, options and SQL
# --------------------------------------------------------------------------------------------


def test_plain_path_and_delimiter(spark, tmp_path: Path, hive3):
    uri = str(tmp_path / "plain.lance")
    # Spark's default save mode (errorifexists) is refused for every Python data source
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        orders(spark, 10).write.format("lance").save(uri)
    orders(spark, 10).write.format("lance").mode("append").save(uri)
    orders(spark, 10).write.format("lance").mode("overwrite").save(uri)
    assert spark.read.format("lance").load(uri).count() == 10
    assert lance.dataset(uri).version == 2

    db = make_db(hive3)
    dotted = ".".join([*db, "dotted"])
    write(orders(spark, 3), hive3, dotted, delimiter=".")
    assert read(spark, hive3, table_path(db, "dotted")).count() == 3


def test_option_errors(spark, hive3):
    with pytest.raises(Exception, match="No table given"):
        spark.read.format("lance").load().count()
    with pytest.raises(Exception, match="unknown property 'urii'"):
        spark.read.format("lance").option("impl", "hive3").option("urii", "x").load("a$b").count()
    with pytest.raises(Exception, match="only storage"):
        spark.read.format("lance").option("region", "x").load("/tmp/nowhere").count()
    with pytest.raises(Exception, match="save_mode"):
        write(orders(spark, 1), hive3, "hive$x$y", save_mode="sometimes")
    # a misspelt impl names the aliases it could have meant
    with pytest.raises(PySparkException, match=r"unknown impl 'hive4'.*glue, hive2, hive3"):
        spark.read.format("lance").option("impl", "hive4").load("a$b").count()


def test_sql_temporary_view(spark, hive3):
    db = make_db(hive3)
    path = table_path(db, "sqlt")
    write(orders(spark, 10), hive3, path)
    options = ", ".join(f"`{k}` '{v}'" for k, v in {**lance_options(hive3), "path": path}.items())
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW sqlt USING lance OPTIONS ({options})")
    try:
        assert spark.sql("SELECT count(*) FROM sqlt WHERE id < 5").collect()[0][0] == 5
        spark.sql("INSERT INTO sqlt VALUES (100, 1, 2.5, 'extra')")
        assert spark.sql("SELECT item FROM sqlt WHERE id = 100").collect()[0][0] == "extra"
        spark.sql("INSERT OVERWRITE sqlt SELECT id, customer, amount, item FROM sqlt WHERE id < 3")
        assert spark.sql("SELECT count(*) FROM sqlt").collect()[0][0] == 3
        orders(spark, 2, start=200).writeTo("sqlt").append()
        assert read(spark, hive3, path).count() == 5
        # Spark keeps the read planned by the view's first unfiltered query (a snapshot, like
        # a file source's listing; REFRESH TABLE does not reach Python sources): the same
        # query still sees 3 rows until the view is created again.
        assert spark.sql("SELECT count(*) FROM sqlt").collect()[0][0] == 3
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW sqlt USING lance OPTIONS ({options})")
        assert spark.sql("SELECT count(*) FROM sqlt").collect()[0][0] == 5
    finally:
        spark.sql("DROP VIEW IF EXISTS sqlt")


def test_sql_catalog_tables_fail_at_once_and_leave_no_entry(spark, hive3, tmp_path: Path):
    """Spark 4.3 hands a Python data source none of a spark_catalog table's OPTIONS, so such
    a table could never find its data: every form that asks the source fails at once, says to
    use a temporary view, and leaves no catalog entry."""
    db = make_db(hive3)
    path = table_path(db, "sqlcat")
    write(orders(spark, 3), hive3, path)
    options = ", ".join(f"`{k}` '{v}'" for k, v in {**lance_options(hive3), "path": path}.items())
    statements = {
        "lost1": f"CREATE TABLE lost1 USING lance OPTIONS ({options})",
        "lost2": f"CREATE TABLE lost2 USING lance LOCATION '{tmp_path / 't.lance'}'",
        "lost3": f"CREATE TABLE lost3 USING lance OPTIONS ({options}) AS SELECT 1 AS id",
    }
    try:
        for name, statement in statements.items():
            with pytest.raises(PySparkException, match="TEMPORARY VIEW"):
                spark.sql(statement)
            assert not spark.catalog.tableExists(name), statement
        for mode in ("append", "overwrite"):
            writer = orders(spark, 1).write.format("lance").options(**lance_options(hive3))
            with pytest.raises(PySparkException, match="TEMPORARY VIEW"):
                writer.mode(mode).saveAsTable(f"lost_{mode}")
            assert not spark.catalog.tableExists(f"lost_{mode}")
        # With a column list Spark creates the entry without asking the source; its first
        # use fails and says what to do.
        spark.sql("CREATE TABLE unasked (id bigint) USING lance")
        with pytest.raises(PySparkException, match=r"(?s)DROP TABLE it.*TEMPORARY VIEW"):
            spark.table("unasked").collect()
        with pytest.raises(PySparkException, match="DROP TABLE it"):
            spark.sql("INSERT INTO unasked VALUES (1)")
    finally:
        for name in [*statements, "lost_append", "lost_overwrite", "unasked"]:
            spark.sql(f"DROP TABLE IF EXISTS {name}")


def test_column_subset_reads_only_those_columns(spark, tmp_path: Path):
    """Spark 4.3 offers Python sources no column pruning; option ``columns`` (and
    ``LanceTable.to_df(columns)``) does it. Proof: the data file holding column ``b`` is
    deleted, and reads of ``a`` alone still succeed (reads of ``b`` cannot)."""
    from lance_metastore.spark import LanceTable

    uri = str(tmp_path / "pruned.lance")
    lance.write_dataset(pa.table({"a": list(range(100))}), uri)
    dataset = lance.dataset(uri)
    dataset.add_columns({"b": "a * 2"})  # b goes to its own data file in each fragment
    files = lance.dataset(uri).get_fragments()[0].metadata.files
    (b_file,) = [f.path for f in files if f.fields == [1]]
    os.remove(Path(uri) / "data" / b_file)
    by_option = spark.read.format("lance").option("columns", "a").load(uri)
    assert sorted(r[0] for r in by_option.collect()) == list(range(100))
    by_table = LanceTable.for_path(spark, uri).to_df(["a"])
    assert by_table.agg(F.sum("a")).collect()[0][0] == sum(range(100))
    by_schema = spark.read.format("lance").schema("a long").load(uri)
    assert by_schema.count() == 100
    with pytest.raises(Exception, match=r"(?i)not found|no such file|does not exist"):
        spark.read.format("lance").option("columns", "b").load(uri).collect()


def test_explain_shows_pushed_filters(spark, tmp_path: Path, capsys: pytest.CaptureFixture):
    uri = str(tmp_path / "explained.lance")
    lance.write_dataset(pa.table({"a": [1, 2, 3], "b": ["x", "yy", "z"]}), uri)
    df = spark.read.format("lance").load(uri).filter("a > 1 AND length(b) = 1")
    df.explain("formatted")
    plan = capsys.readouterr().out
    pushed = next(line for line in plan.splitlines() if line.startswith("PushedFilters"))
    assert "GreaterThan(a,1)" in pushed and "length" not in pushed
    assert [tuple(r) for r in df.collect()] == [(3, "z")]
