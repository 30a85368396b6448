"""A SQL pipeline on Lance tables in a Hive Metastore: Spark SQL -> lance-spark -> our REST server.

    bash scripts/demo.sh --sql            # or: .venv-sql/bin/python examples/sql_pipeline.py

1. Start a local Hive Metastore whose state lives in ``--data-dir`` (or reuse the one running
   there), Lance tables under ``<data-dir>/lake``.
2. Serve it over the Lance Namespace REST spec (``lance_metastore.rest.RestServer``, the same
   server as ``lance-metastore serve``) on 127.0.0.1, with a bearer token made for this run.
3. Start Spark 3.5 at local[2] with ``sql_conf(server.url, token=...)``: lance-spark's catalog
   ``lance`` on that server (its jars come from the machine's Ivy cache after the first run).
4. In SQL only: create ``lance.hive.sales.orders``, insert rows, build ``top_customers`` with
   CTAS, delete cancelled orders, update a price, list the tables, query with filters.
5. Check from outside Spark: the metastore holds both tables as Lance tables
   (``table_type=lance``, columns recorded), and pylance reads them by name with the same
   counts SQL saw; the version before the delete is still readable.
6. Drop ``top_customers`` unless ``--keep-tables`` (``orders`` stays for other readers).

Exits non-zero if a step fails or the readers disagree. Runs on .venv-sql (pyspark 3.5):
lance-spark's builds served by Maven Central here are for Spark 3.5 (docs/spark.md).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
import warnings
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore", message="lance is not fork-safe")

CATALOG = "lance"
DB = "sales"  # the namespace path is hive.sales: the Hive 3 layout's catalog, then database


def log(message: str) -> None:
    print(f"[sql-pipeline {time.strftime('%H:%M:%S')}] {message}", flush=True)


def start_metastore(data_dir: Path) -> tuple[Any, bool]:
    from lance_metastore.hms_local import LocalMetastore

    try:
        existing = LocalMetastore.from_data_dir(data_dir)
        if existing.is_running():
            log(f"reusing the metastore at {existing.uri} ({data_dir})")
            return existing, False
    except FileNotFoundError:
        pass
    metastore = LocalMetastore(data_dir)
    log(f"starting a Hive Metastore in {data_dir} ...")
    metastore.start()
    log(f"metastore ready at {metastore.uri}")
    return metastore, True


def start_spark(server_url: str, token: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from lance_metastore.spark import sql_conf

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("lance-metastore-sql-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
    )
    for key, value in sql_conf(server_url, CATALOG, token=token).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(spark: Any, statement: str) -> list[Any]:
    log(f"SQL> {' '.join(statement.split())}")
    return spark.sql(statement).collect()


def pipeline(spark: Any, n_orders: int) -> dict[str, int]:
    """Everything in SQL; returns the row counts the checks compare."""
    ns = f"{CATALOG}.hive.{DB}"
    run(spark, f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    run(spark, f"DROP TABLE IF EXISTS {ns}.top_customers")
    run(spark, f"DROP TABLE IF EXISTS {ns}.orders")
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
    parser.add_argument("--data-dir", default=".lance-metastore")
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--keep-tables", action="store_true", help="leave the tables in place")
    parser.add_argument(
        "--keep-metastore", action="store_true", help="leave a metastore started here running"
    )
    args = parser.parse_args(argv)
    data_dir = Path(args.data_dir).resolve()
    lake = data_dir / "lake"
    lake.mkdir(parents=True, exist_ok=True)

    from lance_namespace import connect

    import lance_metastore  # noqa: F401
    from lance_metastore.rest import RestServer

    metastore, started_here = start_metastore(data_dir)
    spark = None
    try:
        token = secrets.token_urlsafe(24)
        namespace = connect("hive3", {"uri": metastore.uri, "root": str(lake)})
        with RestServer(namespace, auth_token=token) as server:
            log(f"REST server on {server.url} (bearer token required)")
            log("starting Spark 3.5 with lance-spark's catalog 'lance' ...")
            spark = start_spark(server.url, token)
            counts = pipeline(spark, args.orders)
            check_outside_spark(metastore.uri, lake, counts)
            if not args.keep_tables:
                run(spark, f"DROP TABLE {CATALOG}.hive.{DB}.top_customers")
            spark.stop()
            spark = None
        namespace.close()
        log(f"done: {counts}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if started_here and not args.keep_metastore:
            metastore.stop()


if __name__ == "__main__":
    sys.exit(main())
