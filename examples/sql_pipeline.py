"""A SQL pipeline on Lance tables in a Hive Metastore: Spark SQL -> lance-spark -> our REST server.

    bash scripts/demo.sh --sql            # or: .venv-sql/bin/python examples/sql_pipeline.py

1. Start a local Hive Metastore whose state lives in ``<data-dir>/hms`` (``--data-dir``,
   default ``./.lance-metastore-sql``; or reuse the one running there), Lance tables under
   ``<data-dir>/lake``: ``lance-metastore ls -r`` shows the tables after. Not the DataFrame
   demo's ``./.lance-metastore``: Spark 3.5's Derby (10.14) cannot open a database that Spark
   4's (10.16) made, so each demo keeps its own.
2. Serve it over the Lance Namespace REST spec (``lance_metastore.rest.RestServer``, the same
   server as ``lance-metastore serve``) on 127.0.0.1, with a bearer token made for this run.
3. Start Spark 3.5 at local[2] with ``sql_conf(server.url, token=...)``: lance-spark 0.4.0's
   catalog ``lance`` on that server (its jars are fetched once per machine, by
   ``scripts/setup.sh sql`` or here, then loaded from the cache without resolving anything).
4. In SQL only: create ``lance.hive.sales.orders``, insert rows, build ``top_customers`` with
   CTAS, delete cancelled orders, update a price, list the tables, query with filters.
5. Check from outside Spark: the metastore holds both tables as Lance tables
   (``table_type=lance``, columns recorded), and pylance reads them by name with the same
   counts SQL saw; the version before the delete is still readable.
6. Drop ``top_customers`` with its data (``DROP TABLE ... PURGE``; a plain ``DROP TABLE`` keeps
   the data) unless ``--keep-tables`` (``orders`` stays for other readers).

Exits non-zero if a step fails or the readers disagree; Ctrl-C stops it with one line. Runs on
.venv-sql (pyspark 3.5): lance-spark's builds served by Maven Central here are for Spark 3.5
(docs/spark.md).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import secrets
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore", message="lance is not fork-safe")

CATALOG = "lance"
# Not the DataFrame demo's (examples/pipeline.py) directory: see the module docstring.
DEFAULT_DATA_DIR = ".lance-metastore-sql"
DB = "sales"  # the namespace path is hive.sales: the Hive 3 layout's catalog, then database


QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def log(message: str) -> None:
    print(f"[sql-pipeline {time.strftime('%H:%M:%S')}] {message}", flush=True)


def start_metastore(data_dir: Path) -> tuple[Any, bool]:
    from lance_metastore.hive.local import LocalMetastore

    try:
        existing = LocalMetastore.from_data_dir(data_dir)
        if existing.is_running():
            log(f"reusing the metastore at {existing.uri} ({data_dir})")
            return existing, False
    except FileNotFoundError:
        pass
    metastore = LocalMetastore(data_dir)
    log(f"starting a Hive Metastore in {data_dir} (about 15 s) ...")
    metastore.start()
    log(f"metastore ready at {metastore.uri}")
    return metastore, True


def start_spark(server_url: str, token: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from lance_metastore.spark.sql import fetch_jars, jars_fetched, sql_conf

    if not jars_fetched():
        log("fetching lance-spark's jars into the machine's Ivy cache (about 200 MB, once) ...")
        fetch_jars()
    log("starting Spark 3.5 with lance-spark's catalog 'lance' (about 20 s) ...")
    # Only errors from the JVM's loggers (Spark, Hadoop, Lance), from its first line on.
    log_config = Path(tempfile.mkdtemp(prefix="sql-pipeline-")) / "log4j2.properties"
    log_config.write_text(QUIET_LOG4J2)
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("lance-metastore-sql-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log_config}")
    )
    for key, value in sql_conf(server_url, CATALOG, token=token).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    stop_quietly_on_ctrl_c(spark)
    return spark


def stop_quietly_on_ctrl_c(spark: Any) -> None:
    """Ctrl-C prints one line and stops: py4j's and Python's logs are silenced at once (no call
    into the JVM here, whose connection the interrupted call holds), the JVM's when Spark
    stops (see ``run_pipeline``), so no cancelled job's stack trace reaches the reader."""

    def interrupted(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # one Ctrl-C is enough
        say_interrupted()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)


def run(spark: Any, statement: str) -> list[Any]:
    log(f"SQL> {' '.join(statement.split())}")
    return spark.sql(statement).collect()


def pipeline(spark: Any, n_orders: int) -> dict[str, int]:
    """Everything in SQL; returns the row counts the checks compare."""
    ns = f"{CATALOG}.hive.{DB}"
    run(spark, f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    run(spark, f"DROP TABLE IF EXISTS {ns}.top_customers PURGE")
    run(spark, f"DROP TABLE IF EXISTS {ns}.orders PURGE")
    run(
        spark,
        f"""CREATE TABLE {ns}.orders (
              order_id BIGINT, customer STRING, country STRING, amount DOUBLE, status STRING)""",
    )
    run(
        spark,
        f"""INSERT INTO {ns}.orders
            SELECT id, concat('customer-', CAST(id % 500 AS STRING)),
                   element_at(array('DE', 'FR', 'US', 'JP'), CAST(id % 4 + 1 AS INT)),
                   round(5 + (id * 7919 % 10000) / 20.0, 2),
                   CASE WHEN id % 17 = 0 THEN 'cancelled' ELSE 'completed' END
            FROM range({n_orders})""",
    )
    inserted = run(spark, f"SELECT count(*) FROM {ns}.orders")[0][0]
    run(
        spark,
        f"""CREATE TABLE {ns}.top_customers AS
            SELECT customer, country, count(*) AS orders, round(sum(amount), 2) AS total
            FROM {ns}.orders WHERE status = 'completed'
            GROUP BY customer, country HAVING sum(amount) > 10000""",
    )
    run(spark, f"DELETE FROM {ns}.orders WHERE status = 'cancelled'")
    run(spark, f"UPDATE {ns}.orders SET amount = amount * 1.1 WHERE country = 'JP'")
    tables = sorted(row[1] for row in run(spark, f"SHOW TABLES IN {ns}"))
    log(f"tables in {ns}: {tables}")
    if tables != ["orders", "top_customers"]:
        raise SystemExit(f"SHOW TABLES listed {tables}")
    remaining = run(spark, f"SELECT count(*) FROM {ns}.orders")[0][0]
    top = run(spark, f"SELECT count(*) FROM {ns}.top_customers")[0][0]
    best = run(
        spark,
        f"""SELECT country, round(sum(amount), 2) AS revenue FROM {ns}.orders
            WHERE amount > 100 AND country IN ('DE', 'JP') GROUP BY country ORDER BY country""",
    )
    for row in best:
        log(f"  revenue over 100 in {row['country']}: {row['revenue']}")
    return {"inserted": inserted, "remaining": remaining, "top_customers": top}


def check_outside_spark(metastore_uri: str, lake: Path, counts: dict[str, int]) -> None:
    """The catalog and pylance agree with what SQL saw."""
    import lance
    from lance_namespace import DescribeTableRequest, connect

    import lance_metastore  # noqa: F401  (registers the "hive3" alias)

    ns = connect("hive3", {"uri": metastore_uri, "root": str(lake)})
    try:
        for table, expected in (("orders", counts["remaining"]), ("top_customers", None)):
            table_id = ["hive", DB, table]
            described = ns.describe_table(DescribeTableRequest(id=table_id))
            kind = (described.properties or {}).get("table_type", "")
            if kind.lower() != "lance":
                raise SystemExit(f"{'.'.join(table_id)} is not a Lance table: {kind!r}")
            dataset = lance.dataset(namespace_client=ns, table_id=table_id)
            rows = dataset.count_rows()
            log(f"pylance reads {'.'.join(table_id)}: {rows} rows, version {dataset.version}")
            if expected is not None and rows != expected:
                raise SystemExit(f"pylance counts {rows} rows, SQL counted {expected}")
            if table == "top_customers" and rows != counts["top_customers"]:
                raise SystemExit(f"pylance counts {rows} top customers, SQL {counts}")
        orders = lance.dataset(namespace_client=ns, table_id=["hive", DB, "orders"])
        first = min(v["version"] for v in orders.versions() if v["version"] > 1)
        before_delete = lance.dataset(
            namespace_client=ns, table_id=["hive", DB, "orders"], version=first
        ).count_rows()
        log(f"version {first} (before the delete) still has {before_delete} rows")
        if before_delete != counts["inserted"]:
            raise SystemExit(f"version {first} has {before_delete} rows, not {counts['inserted']}")
    finally:
        ns.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--keep-tables", action="store_true", help="leave the tables in place")
    parser.add_argument(
        "--keep-metastore", action="store_true", help="leave a metastore started here running"
    )
    args = parser.parse_args(argv)
    data_dir = Path(args.data_dir).resolve()
    lake = data_dir / "lake"
    lake.mkdir(parents=True, exist_ok=True)
    try:
        return run_pipeline(args, data_dir, lake)
    except KeyboardInterrupt:
        say_interrupted()
        return 130


def say_interrupted() -> None:
    """The one line Ctrl-C prints; whatever the cancelled job and the clean-up still print is
    of no use to the reader."""
    if logging.root.manager.disable >= logging.CRITICAL:
        return  # said already
    print(f"[sql-pipeline {time.strftime('%H:%M:%S')}] interrupted: stopping", flush=True)
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the rest of the process
    logging.disable(logging.CRITICAL)


def run_pipeline(args: argparse.Namespace, data_dir: Path, lake: Path) -> int:
    from lance_namespace import connect

    import lance_metastore  # noqa: F401
    from lance_metastore.rest import RestServer

    metastore, started_here = start_metastore(data_dir / "hms")
    spark = None
    interrupted = False
    try:
        token = secrets.token_urlsafe(24)
        namespace = connect("hive3", {"uri": metastore.uri, "root": str(lake)})
        with RestServer(namespace, auth_token=token) as server:
            log(f"REST server on {server.url} (bearer token required)")
            spark = start_spark(server.url, token)
            counts = pipeline(spark, args.orders)
            check_outside_spark(metastore.uri, lake, counts)
            if not args.keep_tables:
                run(spark, f"DROP TABLE {CATALOG}.hive.{DB}.top_customers PURGE")
            spark.stop()
            spark = None
        namespace.close()
        log(f"done: {counts}")
        return 0
    except KeyboardInterrupt:
        interrupted = True
        say_interrupted()
        raise
    finally:
        if spark is not None:
            if interrupted:
                with contextlib.suppress(Exception):
                    spark.sparkContext.setLogLevel("OFF")  # the cancelled jobs' errors
            spark.stop()
        if started_here and not args.keep_metastore:
            metastore.stop()
            if not interrupted:
                log("metastore stopped (use --keep-metastore to leave it running)")
        if not interrupted:
            running = not started_here or args.keep_metastore
            show_next_steps(data_dir, metastore.uri, running=running)


def show_next_steps(data_dir: Path, uri: str, running: bool) -> None:
    """How to look at what the pipeline made with the command line, on the same metastore."""
    hms_dir = data_dir / "hms"
    data_flag = f" --data-dir {os.path.relpath(hms_dir)}"
    # .venv-sql's command: its metastore runs Spark 3.5's Derby, which made the database.
    cli = ".venv-sql/bin/lance-metastore"
    steps = []
    if not running:
        steps.append(f"{cli} hms start{data_flag}   # same data; prints its uri")
    steps += [
        f"{cli} --impl hive3 --uri {uri} ls -r   # the uri 'hms start' printed",
        f"{cli} hms stop{data_flag}",
    ]
    log("look at the tables with the command line:\n    " + "\n    ".join(steps))


if __name__ == "__main__":
    sys.exit(main())
