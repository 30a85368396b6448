"""Structured Streaming with the ``lance`` source and sink, against a real local Hive
Metastore and Spark local[2]: exactly-once micro-batches across failures and restarts, and a
stream of the rows each new version appends. Every query is bounded
(``trigger(availableNow=True)``) and waited for with a timeout.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import lance
import pytest
from support.harness import Harness
from test_spark import lance_options, location, make_db, orders, read, table_path, write

from lance_metastore.spark.streaming import BATCH_ID_PROPERTY, QUERY_ID_PROPERTY

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

QUERY_TIMEOUT = 240


def add_input(spark: Any, folder: Path, start: int, n: int = 10) -> None:
    """One more Parquet file in the stream's input folder (one micro-batch each)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = list(range(start, start + n))
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "customer": pa.array([i % 7 for i in ids], pa.int32()),
            "amount": pa.array([i * 1.5 for i in ids], pa.float64()),
            "item": pa.array([f"item-{i}" for i in ids], pa.string()),
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / f"part-{start:06d}.parquet")


def input_stream(spark: Any, folder: Path) -> Any:
    schema = orders(spark, 1).schema
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))


def run(query: Any) -> None:
    """Wait for an availableNow query; re-raise its failure."""
    try:
        finished = query.awaitTermination(QUERY_TIMEOUT)
        assert finished, "streaming query did not finish in time"
    finally:
        if query.isActive:
            query.stop()
    error = query.exception()
    if error is not None:
        raise error


def batches_by_version(dataset: Any) -> list[tuple[str | None, str | None]]:
    """(query id, batch id) recorded by every version's commit, oldest first."""
    found = []
    for version in range(1, dataset.version + 1):
        properties = dataset.read_transaction(version).transaction_properties or {}
        found.append((properties.get(QUERY_ID_PROPERTY), properties.get(BATCH_ID_PROPERTY)))
    return found


def sink(df: Any, harness: Harness, path: str, checkpoint: Path, **options: str) -> Any:
    return (
        df.writeStream.format("lance")
        .options(**lance_options(harness), **options)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(path)
    )


def test_sink_appends_each_micro_batch_once_and_skips_a_replay(spark, hive3, tmp_path: Path):
    """Each micro-batch is one commit carrying query and batch id. A batch Spark replays
    because its end was never recorded in the checkpoint (the state a crash between the
    Lance commit and Spark's commit log leaves) is recognised and not written again."""
    db = make_db(hive3)
    path = table_path(db, "events")
    folder, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    for start in (0, 10, 20):
        add_input(spark, folder, start)
    run(sink(input_stream(spark, folder), hive3, path, checkpoint))
    uri = location(hive3, db, "events")
    dataset = lance.dataset(uri)
    recorded = batches_by_version(dataset)
    query_ids = {q for q, _ in recorded}
    assert len(query_ids) == 1 and None not in query_ids
    assert [b for _, b in recorded] == ["0", "1", "2"]
    assert dataset.count_rows() == 30

    # Spark forgets that batch 2 ended: its restart replays batch 2, then reads a new file.
    for name in ("2", ".2.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    add_input(spark, folder, 30)
    run(sink(input_stream(spark, folder), hive3, path, checkpoint))
    dataset = lance.dataset(uri)
    assert [b for _, b in batches_by_version(dataset)] == ["0", "1", "2", "3"]
    assert read(spark, hive3, path).count() == 40
    ids = [r[0] for r in read(spark, hive3, path).select("id").collect()]
    assert sorted(ids) == list(range(40))
    assert sorted(os.listdir(Path(uri) / "data")) == sorted(
        f.path for fr in dataset.get_fragments() for f in fr.data_files()
    ), "the replay's data files were deleted"


def test_sink_survives_a_python_worker_killed_mid_batch(spark, hive3, tmp_path: Path):
    """A Python worker killed (SIGKILL) in the middle of a micro-batch fails the query; a
    restart from its checkpoint writes every row exactly once."""
    db = make_db(hive3)
    path = table_path(db, "killed")
    folder, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    marker = tmp_path / "killed-once"
    for start in (0, 10, 20):
        add_input(spark, folder, start)

    from pyspark.sql import functions as F

    @F.udf("long")
    def kill_once_in_batch_two(value):  # no type hints: Spark would read them as a pandas UDF
        # Rows 20..29 arrive in the third micro-batch: the first time, kill this worker.
        if value == 25 and not os.path.exists(str(marker)):
            open(str(marker), "w").close()
            os.kill(os.getpid(), 9)
        return value

    def stream() -> Any:
        return input_stream(spark, folder).withColumn("id", kill_once_in_batch_two("id"))

    with pytest.raises(Exception):  # noqa: B017 - Spark reports the lost worker in many ways
        run(sink(stream(), hive3, path, checkpoint))
    assert marker.exists()
    uri = location(hive3, db, "killed")
    assert lance.dataset(uri).count_rows() == 20  # batches 0 and 1 landed, batch 2 did not
    run(sink(stream(), hive3, path, checkpoint))
    dataset = lance.dataset(uri)
    recorded = batches_by_version(dataset)
    assert Counter(recorded).most_common(1)[0][1] == 1, recorded
    assert sorted(r[0] for r in read(spark, hive3, path).select("id").collect()) == list(range(30))


def test_sink_complete_mode_on_a_managed_table(spark, hive3, tmp_path: Path):
    """Complete mode replaces the table with each micro-batch's result; a catalog-managed
    table commits every micro-batch through the catalog."""
    db = make_db(hive3)
    path = table_path(db, "totals")
    folder, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    for start in (0, 10):
        add_input(spark, folder, start)
    totals = input_stream(spark, folder).groupBy("customer").count()
    query = (
        totals.writeStream.format("lance")
        .outputMode("complete")
        .options(**lance_options(hive3), managed_by="impl")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(path)
    )
    run(query)
    ns = hive3.connect(managed_by="impl")
    dataset = lance.dataset(namespace_client=ns, table_id=[*db, "totals"])
    assert dataset.version == 2
    assert [b for _, b in batches_by_version(dataset)] == ["0", "1"]
    got = {r["customer"]: r["count"] for r in read(spark, hive3, path, managed_by="impl").collect()}
    assert got == dict(Counter(i % 7 for i in range(20)))


def test_sink_by_path_needs_a_checkpoint_identity(spark, tmp_path: Path):
    uri = str(tmp_path / "t.lance")
    df = spark.readStream.format("rate").option("rowsPerSecond", 1).load()
    query = None
    with pytest.raises(Exception, match="checkpointLocation"):
        query = df.writeStream.format("lance").trigger(availableNow=True).start(uri)
        run(query)
    if query is not None and query.isActive:
        query.stop()


def test_source_streams_new_versions_and_refuses_deletes(spark, hive3, tmp_path: Path):
    """Offsets are versions: the first micro-batch is the table, later ones what each new
    version appends; a version that deletes rows fails the query, naming it."""
    db = make_db(hive3)
    path = table_path(db, "source")
    write(orders(spark, 10), hive3, path)
    checkpoint = tmp_path / "checkpoint"

    out = tmp_path / "out"

    def drain() -> list[int]:
        """Run the stream to a Parquet sink; every id it has written so far, sorted."""
        query = (
            spark.readStream.format("lance")
            .options(**lance_options(hive3))
            .load(path)
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        run(query)
        return sorted(r[0] for r in spark.read.parquet(str(out)).select("id").collect())

    assert drain() == list(range(10))
    write(orders(spark, 5, start=10), hive3, path)
    write(orders(spark, 5, start=15), hive3, path)
    assert drain() == list(range(20))  # the appended rows, once each
    assert drain() == list(range(20))  # nothing new
    lance.dataset(location(hive3, db, "source")).delete("id < 3")
    with pytest.raises(Exception, match=r"Version 4 .* deletes or rewrites rows"):
        drain()
    shutil.rmtree(checkpoint)


def test_a_relative_checkpoint_location_is_read_where_spark_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``option("checkpointLocation", "checkpoints/q")``, as a reader writes it: Spark resolves
    it against the working directory, and so does the sink reading the query's id there."""
    from lance_metastore.spark.streaming import streaming_query_id

    (tmp_path / "checkpoints" / "q").mkdir(parents=True)
    (tmp_path / "checkpoints" / "q" / "metadata").write_text('{"id": "query-1"}')
    monkeypatch.chdir(tmp_path)
    assert streaming_query_id({"checkpointlocation": "checkpoints/q"}) == "query-1"
    assert streaming_query_id({"checkpointlocation": "./checkpoints/q/"}) == "query-1"
