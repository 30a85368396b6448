"""A Spark 4 driver for tests/test_spark_cluster.py, run as its own process (one SparkContext
per process; the test process already has a ``local[2]`` one).

    python cluster_job.py '<json>'   ->   one JSON line on stdout

The JSON names the master, the table (``table``), the data source's options (``options``)
and the ``job``:

- ``roundtrip``: append ``rows`` rows in two partitions by catalog name, read them back by
  name; answers the row count, the id sum, how many executors the job had and which Python
  worker processes wrote (they run under the executor JVMs, never the driver);
- ``gated_append``: append ``rows`` rows whose partitions each wait, once started, for the file
  ``<gate>/release`` (the test kills an executor meanwhile); every started partition first
  leaves ``<gate>/started-<pid>`` so the test knows the write is under way. Answers
  ``{"ok": true}``, or ``{"ok": false, "error": <the failure's class name>}`` (the test reads
  the table itself).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

GATE_TIMEOUT_SECONDS = 300


def _session(job: dict[str, Any]) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(job["master"])
        .appName(f"lance-metastore-cluster-{job['job']}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.python.daemon.module", "lance_metastore.spark.daemon")
        .config("spark.sql.shuffle.partitions", "2")
        # A lost executor is replaced and its task retried there, not counted against the job.
        .config("spark.task.maxFailures", "4")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from lance_metastore.spark import register

    register(spark)
    # Wait until the executors joined: the job must not run before they can take it.
    tracker = spark.sparkContext._jsc.sc()
    deadline = time.monotonic() + 120
    while tracker.getExecutorMemoryStatus().size() < job["executors"] + 1:
        if time.monotonic() > deadline:
            raise TimeoutError("the executors did not register with the driver")
        time.sleep(0.1)
    return spark


def _frame(spark: Any, rows: int, gate: str | None) -> Any:
    import pyarrow as pa

    schema = "id long, label string, pid long"

    def tag(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pid = os.getpid()
        if gate is not None:
            (Path(gate) / f"started-{pid}").touch()
            release = Path(gate) / "release"
            deadline = time.monotonic() + GATE_TIMEOUT_SECONDS
            while not release.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        for batch in batches:
            ids = batch.column(0)
            yield pa.RecordBatch.from_arrays(
                [
                    ids,
                    pa.array([f"row-{i}" for i in ids.to_pylist()]),
                    pa.array([pid] * len(batch), pa.int64()),
                ],
                names=["id", "label", "pid"],
            )

    return spark.range(0, rows, numPartitions=2).mapInArrow(tag, schema)


def main(job: dict[str, Any]) -> dict[str, Any]:
    spark = _session(job)
    options = job["options"]
    table = job["table"]
    try:
        try:
            frame = _frame(spark, job["rows"], job.get("gate"))
            frame.write.format("lance").options(**options).mode("append").save(table)
        except Exception as error:  # a lost job: the test checks the table is unchanged
            java = getattr(error, "java_exception", None)
            kind = java.getClass().getSimpleName() if java is not None else type(error).__name__
            return {"ok": False, "error": kind}
        if job["job"] == "gated_append":
            return {"ok": True}
        read = spark.read.format("lance").options(**options).load(table)
        summary = read.selectExpr("count(*) AS n", "sum(id) AS total").collect()[0]
        writers = sorted({row.pid for row in read.select("pid").distinct().collect()})
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        return {
            "ok": True,
            "rows": summary.n,
            "sum": summary.total,
            "executors": executors,
            "writer_pids": writers,
            "driver_pid": os.getpid(),
        }
    finally:
        spark.stop()


if __name__ == "__main__":
    # Spark's and py4j's output go to stderr; stdout carries the one answer.
    answer = main(json.loads(sys.argv[1]))
    print(json.dumps(answer), flush=True)
