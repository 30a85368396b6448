"""A data engineer's pipeline on embedded defaults: Spark -> Lance tables in a Hive Metastore.

    python examples/pipeline.py [--data-dir .lance-metastore] [--orders 120000] [--keep-metastore]

1. Start a local Hive Metastore whose state lives in ``<data-dir>/hms`` (the directory
   ``lance-metastore hms start`` uses by default; or reuse the one already running there), with
   the Lance tables under ``<data-dir>/lake``.
2. Start Spark at local[2] and register the ``lance`` data source.
3. Generate raw data: customers, and orders with amounts and statuses.
4. Transform: join orders to customers, keep completed orders, aggregate per customer.
5. Write two Lance tables registered in the metastore (``hive$analytics$orders_enriched`` and
   ``hive$analytics$customer_stats``), replacing earlier runs' data.
6. Read ``customer_stats`` back through Spark with a filter, and open the same table with
   pylance through the same metastore, and check that both see the same rows.

It needs only the ``hive`` and ``spark`` extras (``bash scripts/demo.sh`` installs them).

Exits non-zero if any step fails or the two readers disagree; at the end it says how to look
at the tables with the ``lance-metastore`` command.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

# Lance warns on any fork of a process that imported it; starting Spark's JVM forks and
# execs at once, which is safe.
warnings.filterwarnings("ignore", message="lance is not fork-safe")
# Lance's Rust log ("No existing dataset ... it will be created" on every first write) means
# nothing to someone running the demo; errors still show.
os.environ.setdefault("LANCE_LOG", "error")

DB = ["hive", "analytics"]
# The CLI's default (``lance-metastore hms start`` finds the metastore in <this>/hms). The SQL
# demo keeps its own (examples/sql_pipeline.py): Spark 3.5's Derby cannot open this one.
DEFAULT_DATA_DIR = ".lance-metastore"
COUNTRIES = ["DE", "FR", "US", "JP", "BR", "IN", "NL", "SE"]
SEGMENTS = ["consumer", "smb", "enterprise"]


class Timings:
    """Where the demo's time went: install (measured by scripts/demo.sh), then each part."""

    def __init__(self, install: float | None) -> None:
        self.parts: list[tuple[str, float]] = [] if install is None else [("install", install)]
        self._since = time.perf_counter()

    def lap(self, part: str) -> None:
        now = time.perf_counter()
        self.parts.append((part, now - self._since))
        self._since = now

    def summary(self) -> str:
        total = sum(seconds for _, seconds in self.parts)
        parts = ", ".join(f"{part} {seconds:.1f} s" for part, seconds in self.parts)
        return f"time: {parts}; total {total:.1f} s"


def log(message: str) -> None:
    print(f"[pipeline {time.strftime('%H:%M:%S')}] {message}", flush=True)


def start_metastore(data_dir: Path) -> tuple[Any, bool]:
    """A running metastore for ``data_dir``: the one already there, or a new one.

    Returns (metastore, started_here).
    """
    from lance_metastore.hive.local import LocalMetastore

    try:
        existing = LocalMetastore.from_data_dir(data_dir)
        if existing.is_running():
            log(f"reusing the metastore at {existing.uri} ({data_dir})")
            return existing, False
    except FileNotFoundError:
        pass
    metastore = LocalMetastore(data_dir)
    log(f"starting a Hive Metastore in {data_dir} (about 20 s the first time) ...")
    metastore.start()
    log(f"metastore ready at {metastore.uri}")
    return metastore, True


def start_spark(data_dir: Path) -> Any:
    # Python workers must run this interpreter (it has lance-metastore installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from lance_metastore.spark import local_session

    # local[2] on loopback with format "lance" registered (local_session sets SPARK_LOCAL_IP
    # before the JVM starts, unless it is set).
    spark = local_session(
        2,
        app_name="lance-metastore-pipeline",
        conf={
            "spark.ui.enabled": "false",
            # Stage progress bars on a terminal.
            "spark.ui.showConsoleProgress": str(sys.stderr.isatty()).lower(),
            "spark.sql.shuffle.partitions": "4",
            "spark.sql.warehouse.dir": str(data_dir / "spark-warehouse"),
            # Python workers fork from a daemon that imported Lance and the source once.
            "spark.python.daemon.module": "lance_metastore.spark.daemon",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def generate(spark: Any, n_orders: int, n_customers: int) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    customers = spark.range(0, n_customers, 1, 2).select(
        F.col("id").alias("customer_id"),
        F.concat(F.lit("customer-"), F.col("id").cast("string")).alias("name"),
        F.element_at(
            F.array(*[F.lit(c) for c in COUNTRIES]), (F.col("id") % len(COUNTRIES) + 1).cast("int")
        ).alias("country"),
        F.element_at(
            F.array(*[F.lit(s) for s in SEGMENTS]), (F.col("id") % len(SEGMENTS) + 1).cast("int")
        ).alias("segment"),
    )
    orders = spark.range(0, n_orders, 1, 4).select(
        F.col("id").alias("order_id"),
        ((F.col("id") * 7919) % n_customers).alias("customer_id"),
        F.round(F.rand(seed=42) * 500 + 5, 2).cast("decimal(10,2)").alias("amount"),
        (F.timestamp_seconds(F.lit(1_704_067_200) + (F.col("id") * 97) % (365 * 86400))).alias(
            "ordered_at"
        ),
        F.when(F.col("id") % 17 == 0, "cancelled").otherwise("completed").alias("status"),
    )
    return orders, customers


def transform(orders: Any, customers: Any) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    enriched = orders.filter(F.col("status") == "completed").join(customers, "customer_id")
    stats = enriched.groupBy("customer_id", "name", "country", "segment").agg(
        F.count("*").alias("orders"),
        F.sum("amount").alias("total"),
        F.round(F.avg("amount"), 2).alias("avg_amount"),
        F.max("ordered_at").alias("last_order_at"),
    )
    return enriched, stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    parser.add_argument("--orders", type=int, default=120_000)
    parser.add_argument("--customers", type=int, default=2_000)
    parser.add_argument(
        "--keep-metastore", action="store_true", help="leave a metastore started here running"
    )
    parser.add_argument(
        "--install-seconds",
        type=float,
        default=None,
        help="time scripts/demo.sh spent installing, for the breakdown printed at the end",
    )
    args = parser.parse_args(argv)
    data_dir = Path(args.data_dir).resolve()
    started = time.perf_counter()
    timings = Timings(install=args.install_seconds)

    metastore, started_here = start_metastore(data_dir / "hms")
    timings.lap("metastore")
    spark = None
    try:
        from lance_namespace import CreateNamespaceRequest

        from lance_metastore import connect

        props = {"uri": metastore.uri, "root": str(data_dir / "lake")}
        connect("hive3", props).create_namespace(CreateNamespaceRequest(id=DB, mode="exist_ok"))
        lance_options = {"impl": "hive3", **props}

        log("starting Spark local[2] ...")
        spark = start_spark(data_dir)
        log("Spark local[2] started")
        timings.lap("Spark")

        orders, customers = generate(spark, args.orders, args.customers)
        enriched, stats = transform(orders, customers)

        # -- write -----------------------------------------------------------------------------
        enriched_table = "$".join([*DB, "orders_enriched"])
        stats_table = "$".join([*DB, "customer_stats"])
        t0 = time.perf_counter()
        log(f"writing {enriched_table} ({args.orders:,} orders) ...")
        enriched.write.format("lance").options(**lance_options).mode("overwrite").save(
            enriched_table
        )
        log(f"writing {stats_table} ...")
        stats.write.format("lance").options(**lance_options).mode("overwrite").save(stats_table)
        log(f"wrote {enriched_table} and {stats_table} in {time.perf_counter() - t0:.1f}s")

        # -- read back with a filter -------------------------------------------------------------
        def read(table: str) -> Any:
            return spark.read.format("lance").options(**lance_options).load(table)

        n_enriched = read(enriched_table).count()
        expected_enriched = orders.filter("status = 'completed'").count()
        log(f"{enriched_table}: {n_enriched:,} rows (expected {expected_enriched:,})")
        condition = "country = 'DE' AND segment = 'enterprise' AND orders >= 55"
        top = (
            read(stats_table)
            .filter(condition)
            .orderBy("total", ascending=False)
            .select("customer_id", "name", "orders", "total", "avg_amount", "last_order_at")
        )
        spark_rows = top.collect()
        log(f"Spark read of {stats_table} WHERE {condition}: {len(spark_rows)} customers")
        top.show(5, truncate=False)

        # -- the same table through pylance, by name, from the same metastore --------------------
        import lance

        dataset = lance.dataset(
            namespace_client=connect("hive3", props), table_id=[*DB, "customer_stats"]
        )
        lance_rows = (
            dataset.to_table(columns=["customer_id", "orders", "total"], filter=condition)
            .sort_by([("total", "descending")])
            .to_pylist()
        )
        log(
            f"pylance opened customer_stats ({dataset.count_rows():,} rows, version "
            f"{dataset.version}); the same filter gives {len(lance_rows)} customers"
        )
        for row in lance_rows[:3]:
            print(f"    {row}")

        mismatches = []
        if n_enriched != expected_enriched:
            mismatches.append(f"orders_enriched has {n_enriched} rows, not {expected_enriched}")
        spark_view = sorted((r.customer_id, r.orders, r.total) for r in spark_rows)
        lance_view = sorted((r["customer_id"], r["orders"], r["total"]) for r in lance_rows)
        if spark_view != lance_view:
            mismatches.append("Spark and pylance disagree on the filtered customer_stats rows")
        if not spark_rows:
            mismatches.append("the filter matched nothing: the data is not what was written")
        if mismatches:
            for problem in mismatches:
                log(f"FAILED: {problem}")
            timings.lap("pipeline")
            return 1
        timings.lap("pipeline")
        log(f"done in {time.perf_counter() - started:.1f}s: Spark and pylance agree")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if started_here and not args.keep_metastore:
            # The first stop also records the metastore's class-data archive (later starts
            # are faster): part of the time the demo takes, so part of the breakdown.
            metastore.stop()
            log("metastore stopped (use --keep-metastore to leave it running)")
            timings.lap("stop")
        log(timings.summary())
        show_next_steps(data_dir, metastore.uri, running=not started_here or args.keep_metastore)


def show_next_steps(data_dir: Path, uri: str, running: bool) -> None:
    """How to look at what the pipeline made, with the command line, on the same data."""
    cwd = Path.cwd()
    hms_dir = data_dir / "hms"
    default_dir = hms_dir == (cwd / ".lance-metastore" / "hms")
    data_flag = "" if default_dir else f" --data-dir {hms_dir}"
    steps = ["source .venv/bin/activate"]
    if not running:
        steps.append(f"lance-metastore hms start{data_flag}   # same data; prints its uri")
    steps += [
        f"lance-metastore --impl hive3 --uri {uri} ls -r   # the uri 'hms start' printed",
        f"lance-metastore --impl hive3 --uri {uri} versions hive/analytics/customer_stats",
        f"lance-metastore hms stop{data_flag}",
    ]
    log("look at the tables with the command line:\n    " + "\n    ".join(steps))


if __name__ == "__main__":
    sys.exit(main())
