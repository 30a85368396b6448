"""Row-level changes from PySpark (``LanceTable``: delete, update, merge) and ``mergeSchema``
appends, on a real local Hive Metastore and Spark local[2]. Each change must be one Lance
commit, leave the table as it was when it fails, and meet a concurrent writer with 14 or land.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import lance
import pytest
from lance_namespace import DescribeTableRequest
from lance_namespace.errors import (
    ConcurrentModificationError,
    InvalidInputError,
    TableColumnNotFoundError,
)
from support.harness import Harness
from test_spark import lance_options, location, make_db, orders, read, rows, table_path, write

from lance_metastore.spark import LanceTable, use_in_this_thread

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]


def table(spark: Any, harness: Harness, path: str, **options: str) -> LanceTable:
    return LanceTable.for_name(spark, path, **lance_options(harness), **options)


def as_dict(df: Any) -> dict[int, tuple]:
    return {r["id"]: tuple(r) for r in df.collect()}


def files_on_disk(uri: str) -> set[str]:
    found = set()
    for folder in ("data", "_deletions"):
        if (Path(uri) / folder).is_dir():
            found |= {f"{folder}/{n}" for n in os.listdir(Path(uri) / folder)}
    return found


def test_delete_and_update_are_one_commit_each(spark, hive3):
    db = make_db(hive3)
    path = table_path(db, "orders")
    write(orders(spark, 100), hive3, path)
    uri = location(hive3, db, "orders")
    orders_table = table(spark, hive3, path)

    result = orders_table.delete("customer = 3")
    assert result.version == 2 and result.deleted == len([i for i in range(100) if i % 7 == 3])
    dataset = lance.dataset(uri)
    assert type(dataset.read_transaction(2).operation).__name__ == "Delete"
    expected = {i: (i, i % 7, i * 1.5, f"item-{i}") for i in range(100) if i % 7 != 3}
    assert as_dict(orders_table.to_df()) == expected

    result = orders_table.update("id < 10", {"amount": "amount * 2", "ITEM": "concat(item, '!')"})
    assert result.version == 3 and result.deleted == result.written == 9  # id 3 is gone
    for i in range(10):
        if i in expected:
            expected[i] = (i, i % 7, i * 3.0, f"item-{i}!")
    assert as_dict(orders_table.to_df()) == expected
    assert lance.dataset(uri).version == 3
    # nothing matches: no commit
    assert orders_table.delete("id > 1000").version is None
    assert lance.dataset(uri).version == 3
    # to_df(columns) reads only those columns
    assert orders_table.to_df(["id"]).columns == ["id"]


def test_merge_upserts_updates_and_deletes(spark, hive2):
    db = make_db(hive2)
    path = table_path(db, "merge")
    write(orders(spark, 20), hive2, path)
    merged = table(spark, hive2, path)
    from pyspark.sql import functions as F

    # upsert: ids 15..24, 15..19 exist
    changes = orders(spark, 10, start=15).withColumn("item", F.lit("new"))
    result = merged.merge(changes, on="id").when_matched_update_all().when_not_matched_insert_all()
    result = result.execute()
    assert (result.deleted, result.written) == (5, 10)
    expected = {i: (i, i % 7, i * 1.5, "new" if i >= 15 else f"item-{i}") for i in range(25)}
    assert as_dict(merged.to_df()) == expected

    # update with expressions over target and source, on a condition
    bump = spark.createDataFrame([(1, 100.0), (2, 200.0), (99, 1.0)], "key long, extra double")
    result = (
        merged.merge(bump, on="target.id = source.key")
        .when_matched_update({"amount": "target.amount + source.extra"})
        .execute()
    )
    assert (result.deleted, result.written) == (2, 2)  # 99 matches nothing; no insert clause
    expected[1] = (1, 1, 101.5, "item-1")
    expected[2] = (2, 2, 203.0, "item-2")
    assert as_dict(merged.to_df()) == expected

    # delete the matched rows, on key columns given as a list
    gone = spark.createDataFrame([(0,), (24,), (77,)], "id long")
    result = merged.merge(gone, on=["id"]).when_matched_delete().execute()
    assert (result.deleted, result.written) == (2, 0)
    del expected[0], expected[24]
    assert as_dict(merged.to_df()) == expected
    dataset = lance.dataset(location(hive2, db, "merge"))
    assert dataset.version == 4  # one commit per merge


def test_changes_on_a_managed_table_commit_through_the_catalog(spark, hive3):
    db = make_db(hive3)
    path = table_path(db, "managed")
    managed = {"managed_by": "impl"}
    write(orders(spark, 30), hive3, path, **managed)
    managed_table = table(spark, hive3, path, **managed)
    managed_table.delete("id >= 20")
    managed_table.update("id = 0", {"item": "'zero'"})
    ns = hive3.connect(**managed)
    described = ns.describe_table(DescribeTableRequest(id=[*db, "managed"]))
    assert described.properties["version"] == "3"
    df = read(spark, hive3, path, **managed)
    assert df.count() == 20
    assert df.filter("id = 0").collect()[0]["item"] == "zero"


def test_failed_change_changes_nothing(spark, hive3):
    db = make_db(hive3)
    path = table_path(db, "fails")
    write(orders(spark, 50), hive3, path)
    uri = location(hive3, db, "fails")
    before_files, before = files_on_disk(uri), rows(read(spark, hive3, path))
    failing = table(spark, hive3, path)
    with pytest.raises(Exception, match="boom"):
        failing.update("id < 40", {"item": "if(id = 33, raise_error('boom'), item)"})
    with pytest.raises(Exception, match="match the same row"):
        twice = spark.createDataFrame([(1, "a"), (1, "b")], "id long, item string")
        failing.merge(twice, on="id").when_matched_update({"item": "source.item"}).execute()
    assert lance.dataset(uri).version == 1
    assert rows(read(spark, hive3, path)) == before
    leftovers = files_on_disk(uri) - before_files
    assert not {f for f in leftovers if f.startswith("data/")}, leftovers


def test_bad_arguments_are_refused_before_any_job(spark, hive3):
    db = make_db(hive3)
    path = table_path(db, "bad")
    write(orders(spark, 5), hive3, path)
    bad = table(spark, hive3, path)
    with pytest.raises(TableColumnNotFoundError, match="no column 'nope'"):
        bad.update("id = 1", {"nope": "1"})
    with pytest.raises(TableColumnNotFoundError, match="Merge key 'key'"):
        bad.merge(orders(spark, 1), on=["key"]).when_matched_delete().execute()
    with pytest.raises(InvalidInputError, match="at least one when_"):
        bad.merge(orders(spark, 1), on="id").execute()
    with pytest.raises(InvalidInputError, match="needs option 'impl'"):
        LanceTable.for_name(spark, path)
    with pytest.raises(Exception, match=r"unknown impl 'hiv3'.*hive3"):
        LanceTable.for_name(spark, path, impl="hiv3")
    assert lance.dataset(location(hive3, db, "bad")).version == 1


def test_concurrent_changes_get_14_or_land(spark, hive3):
    """Two updates of the same rows at once: each lands or fails with 14, and the table
    shows exactly the ones that landed."""
    db = make_db(hive3)
    path = table_path(db, "race")
    write(orders(spark, 20, parts=1), hive3, path)
    outcomes: dict[str, BaseException | None] = {}

    def change(tag: str) -> None:
        use_in_this_thread(spark)
        try:
            table(spark, hive3, path).update("id < 10", {"item": f"'{tag}'"})
            outcomes[tag] = None
        except BaseException as error:
            outcomes[tag] = error

    threads = [threading.Thread(target=change, args=(tag,)) for tag in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    landed = [tag for tag, error in outcomes.items() if error is None]
    failed = [error for error in outcomes.values() if error is not None]
    assert all(isinstance(e, ConcurrentModificationError) for e in failed), failed
    assert landed
    items = {r["item"] for r in read(spark, hive3, path).filter("id < 10").collect()}
    assert len(items) == 1 and items <= set(landed)
    assert read(spark, hive3, path).count() == 20
    assert lance.dataset(location(hive3, db, "race")).version == 1 + len(landed)


def test_merge_schema_adds_nullable_columns_in_one_commit(spark, hive3):
    db = make_db(hive3)
    path = table_path(db, "evolve")
    write(orders(spark, 5), hive3, path)
    from pyspark.sql import functions as F

    wider = orders(spark, 3, start=5).withColumn("note", F.lit("hi"))
    with pytest.raises(Exception, match="unknown columns"):
        write(wider, hive3, path)
    write(wider, hive3, path, mergeSchema="true")
    uri = location(hive3, db, "evolve")
    dataset = lance.dataset(uri)
    assert dataset.version == 2
    assert dataset.schema.names == ["id", "customer", "amount", "item", "note"]
    df = read(spark, hive3, path)
    assert {r["id"]: r["note"] for r in df.collect()} == {
        **{i: None for i in range(5)},
        **{i: "hi" for i in range(5, 8)},
    }
    assert [c for c, _ in hive3.columns(db, "evolve")][-1] == "note"  # catalog columns synced
