"""A Spark 4 job for tests/test_vending.py, run as its own process whose environment holds no
AWS credentials (one SparkContext per process; a test process may already have one).

    python -m support.vended_spark_job '<json>'   ->   one JSON line on stdout

The JSON names the table (``table``, ``$``-joined) and the data source's options
(``options``: ``impl=rest``, the server's ``uri`` and ``header.Authorization``). The job reads
the table by name and counts it, appends ``rows`` (``id``/``name`` pairs) from two partitions,
reads it again, and asks its Python workers what they hold: their ``AWS_*`` variable names,
whether ``~/.aws`` exists, and their process ids (to show they are not the driver).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _what_workers_hold(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    for _ in batches:
        aws = sorted(name for name in os.environ if name.startswith("AWS_"))
        yield pa.RecordBatch.from_pydict(
            {
                "pid": [os.getpid()],
                "aws_variables": [",".join(aws)],
                "aws_dir": [(Path.home() / ".aws").exists()],
            }
        )


def main(job: dict[str, Any]) -> dict[str, Any]:
    from support.spark import local_session

    spark = local_session("lance-metastore-vended-credentials", cores=2)
    options, table = job["options"], job["table"]
    try:
        before = spark.read.format("lance").options(**options).load(table).count()
        rows = spark.createDataFrame(
            [tuple(row) for row in job["rows"]], "id long, name string"
        ).repartition(2)
        rows.write.format("lance").options(**options).mode("append").save(table)
        after = spark.read.format("lance").options(**options).load(table)
        ids = sorted(row.id for row in after.select("id").collect())
        held = (
            spark.range(0, 2, numPartitions=2)
            .mapInArrow(_what_workers_hold, "pid long, aws_variables string, aws_dir boolean")
            .collect()
        )
        return {
            "before": before,
            "ids": ids,
            "driver_pid": os.getpid(),
            "workers": [row.asDict() for row in held],
        }
    finally:
        spark.stop()


if __name__ == "__main__":
    # Spark's and py4j's output go to stderr; stdout carries the one answer.
    answer = main(json.loads(sys.argv[1]))
    print(json.dumps(answer), flush=True)
