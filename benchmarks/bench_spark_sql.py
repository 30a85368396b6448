"""Spark SQL benchmark: lance-spark over our REST server vs Spark's Parquet vs our data source.

Run from the repository root, in the project's venv, after ``scripts/setup.sh`` (which makes
``.venv-sql`` with Spark 3.5 and fetches lance-spark's jars)::

    python benchmarks/bench_spark_sql.py [--rows 10000000] [--repeat 3] [--json out.json]

One run starts a local Hive Metastore, our REST server over it (``hive3`` layout, on a
background thread of this process), and two Spark sessions at ``local[2]``, both alive for the
whole run:

- Spark 3.5 (child process on ``.venv-sql``, tests/support/spark_sql.py) with lance-spark's
  catalog ``lance`` on the server (``sql_conf``): the SQL path;
- Spark 4 (this process) with our Python data source (``lance_metastore.spark.register``).

Each session generates the same ``--rows`` rows (``id`` bigint, ``k`` int, ``x`` double, ``s``
string) and caches them. Then, ``--repeat`` times, alternating the order every round:

- write: lance-spark ``CREATE TABLE lance.hive.bench.t AS SELECT * FROM cached`` vs Spark 3.5's
  Parquet writer (``INSERT OVERWRITE DIRECTORY ... USING parquet``, snappy) in the same JVM;
  our data source ``mode("overwrite")`` of a catalog table vs Spark 4's Parquet writer;
- scan: an aggregate over every column (``count``, ``sum(k)``, ``sum(x)``,
  ``max(length(s))``), the same query on each side's Parquet output and Lance table.

Printed: medians, each Lance/Parquet ratio within its own Spark (the goal: the SQL path's write
within 1.1x of Parquet), the cross ratios, and the load average before and after (the machine
is shared: compare ratios, not seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

WRITE_GOAL = 1.1  # the SQL path's write vs Parquet's
# lance-spark 0.0.14's writer can deadlock (docs/spark.md); a statement that takes this long is
# counted as a hang, its session restarted, and the round goes on without it.
HANG_SECONDS = 240
DB = ["hive", "bench"]
COLUMNS = "id, CAST(id * 7919 % 1000 AS INT) AS k, rand(7) AS x, concat('user-', CAST(id * 31 % 100003 AS STRING)) AS s"  # noqa: E501
SCAN = "count(*) AS n, sum(k) AS k, sum(x) AS x, max(length(s)) AS s"


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def clock(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4, help="Spark partitions of the data")
    parser.add_argument("--work-dir", help="where the metastore, Parquet and Lance data go")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary work dir")
    args = parser.parse_args(argv)

    from support.spark_sql import SQL_PYTHON

    if not SQL_PYTHON.exists():
        sys.exit("no .venv-sql: run scripts/setup.sh first")
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench_spark_sql_")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    from lance_metastore.hms_local import LocalMetastore

    print(f"work dir {work}; {args.rows:,} rows; repeat {args.repeat}; load {load()}")
    metastore = LocalMetastore(work / "hms")
    metastore.start()
    try:
        return run(args, work, metastore.uri)
    finally:
        metastore.stop()
        if args.work_dir is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path, uri: str) -> int:
    import lance
    from lance_namespace import CreateNamespaceRequest, DescribeTableRequest, connect
    from support.spark import local_session
    from support.spark_sql import SqlSession

    import lance_metastore  # noqa: F401
    from lance_metastore.rest import RestServer
    from lance_metastore.spark import sql_conf

    lake = work / "lake"
    props = {"uri": uri, "root": str(lake)}
    namespace = connect("hive3", props)
    namespace.create_namespace(CreateNamespaceRequest(id=DB, mode="exist_ok"))
    n = args.rows
    server = RestServer(namespace).start()
    sql = spark = None
    try:
        conf = {
            **sql_conf(server.url, "lance", spark_version="3.5"),
            "spark.driver.memory": "6g",
            "spark.sql.parquet.compression.codec": "snappy",
        }
        sql = SqlSession(conf, work / "spark35.log", timeout=HANG_SECONDS)
        spark = local_session(
            "lance-metastore-bench-sql",
            conf={
                "spark.driver.memory": "6g",
                "spark.sql.warehouse.dir": str(work / "warehouse"),
                "spark.sql.parquet.compression.codec": "snappy",
            },
        )
        rows = f"SELECT {COLUMNS} FROM range(0, {n}, 1, {args.partitions})"
        cache = f"CACHE TABLE cached AS {rows}"
        sql.sql(cache)
        data = spark.sql(rows).cache()
        data.count()

        sql_table = "lance.hive.bench.by_sql"
        source_table = "hive$bench$by_source"
        options = {"impl": "hive3", **props}
        parquet35, parquet4 = work / "parquet35", work / "parquet4"

        def sql_write() -> None:
            sql.sql(f"CREATE TABLE {sql_table} AS SELECT * FROM cached")

        def sql_drop() -> None:  # untimed: CTAS needs a fresh table each round
            sql.sql(f"DROP TABLE IF EXISTS {sql_table}")

        def parquet35_write() -> None:
            sql.sql(f"INSERT OVERWRITE DIRECTORY '{parquet35}' USING parquet SELECT * FROM cached")

        def source_write() -> None:
            data.write.format("lance").options(**options).mode("overwrite").save(source_table)

        def parquet4_write() -> None:
            data.write.mode("overwrite").parquet(str(parquet4))

        def clean_source_versions() -> None:
            import datetime as dt

            location = namespace.describe_table(
                DescribeTableRequest(id=[*DB, "by_source"])
            ).location
            lance.dataset(location).cleanup_old_versions(older_than=dt.timedelta(0))

        def sql_scan() -> Any:
            return sql.sql(f"SELECT {SCAN} FROM {sql_table}")

        def parquet35_scan() -> Any:
            return sql.sql(f"SELECT {SCAN} FROM parquet.`{parquet35}`")

        def source_scan() -> Any:
            return (
                spark.read.format("lance")
                .options(**options)
                .load(source_table)
                .selectExpr(*SCAN.split(", "))
                .collect()
            )

        def parquet4_scan() -> Any:
            return spark.read.parquet(str(parquet4)).selectExpr(*SCAN.split(", ")).collect()

        # Warm-up (untimed): JIT, jars, Python workers, catalog entries; answers compared.
        sql_drop()
        sql_write()
        parquet35_write()
        source_write()
        parquet4_write()
        answers = {
            "sql": sql_scan()[0],
            "parquet35": parquet35_scan()[0],
            "source": tuple(source_scan()[0]),
            "parquet4": tuple(parquet4_scan()[0]),
        }
        counts = {name: answer[0] for name, answer in answers.items()}
        assert set(counts.values()) == {n}, counts

        contenders: dict[str, dict[str, tuple[Callable[[], Any], Callable[[], Any] | None]]] = {
            "write": {
                "lance-spark SQL": (sql_write, None),  # dropped before each round
                "Parquet (Spark 3.5)": (parquet35_write, None),
                "data source": (source_write, clean_source_versions),
                "Parquet (Spark 4)": (parquet4_write, None),
            },
            "scan": {
                "lance-spark SQL": (sql_scan, None),
                "Parquet (Spark 3.5)": (parquet35_scan, None),
                "data source": (source_scan, None),
                "Parquet (Spark 4)": (parquet4_scan, None),
            },
        }
        times: dict[str, dict[str, list[float]]] = {}
        hangs: list[str] = []

        def timed(operation: str, label: str, fn: Callable[[], Any]) -> float | None:
            try:
                return clock(fn)
            except TimeoutError:
                hangs.append(f"{operation} / {label}")
                print(f"  {operation} / {label}: no answer in {HANG_SECONDS} s, session restarted")
                sql.sql(cache)  # the new session's copy of the rows
                return None

        def ensure_sql_table() -> None:
            """The scans need a complete table: rewrite it if the last timed write hung."""
            for _ in range(3):
                try:
                    if sql.sql(f"SELECT count(*) FROM {sql_table}") == [(n,)]:
                        return
                except Exception:
                    pass
                try:
                    sql_drop()
                    sql_write()
                except TimeoutError:
                    sql.sql(cache)
            raise SystemExit("lance-spark could not write the table for the scans")

        for operation, entries in contenders.items():
            if operation == "scan":
                ensure_sql_table()
            times[operation] = {label: [] for label in entries}
            for round_ in range(args.repeat):
                order = list(entries.items())
                if round_ % 2:
                    order.reverse()
                for label, (fn, after) in order:
                    if operation == "write" and label == "lance-spark SQL":
                        sql_drop()
                    seconds = timed(operation, label, fn)
                    if seconds is not None:
                        times[operation][label].append(seconds)
                    if after is not None:  # untimed
                        after()
        report(times, hangs, n, args)
        return 0
    finally:
        if sql is not None:
            sql.close()
        if spark is not None:
            spark.stop()
        server.stop()
        namespace.close()


def report(
    times: dict[str, dict[str, list[float]]], hangs: list[str], n: int, args: argparse.Namespace
) -> None:
    print()
    print(f"{n:,} rows, local[2], medians of {args.repeat}; load average now {load()}")
    print(f"{'operation':<10} {'contender':<22} {'median s':>9}  runs")
    summary: dict[str, Any] = {"rows": n, "repeat": args.repeat, "load": load(), "results": {}}
    for operation, entries in times.items():
        for label, values in entries.items():
            runs = " ".join(f"{value:.2f}" for value in values)
            print(f"{operation:<10} {label:<22} {median(values):9.2f}  {runs}")
        summary["results"][operation] = entries
    print()
    ratios = {}
    for operation, entries in times.items():
        m = {label: median(values) for label, values in entries.items()}
        ratios[f"{operation}: SQL / Parquet (Spark 3.5)"] = (
            m["lance-spark SQL"] / m["Parquet (Spark 3.5)"]
        )
        ratios[f"{operation}: data source / Parquet (Spark 4)"] = (
            m["data source"] / m["Parquet (Spark 4)"]
        )
        ratios[f"{operation}: SQL / data source"] = m["lance-spark SQL"] / m["data source"]
    for name, value in ratios.items():
        goal = ""
        if name == "write: SQL / Parquet (Spark 3.5)":
            goal = f"  goal <= {WRITE_GOAL}x: " + ("met" if value <= WRITE_GOAL else "MISSED")
        print(f"{name:<42} {value:6.2f}x{goal}")
    summary["ratios"] = ratios
    summary["hangs"] = hangs
    if hangs:
        print(f"hangs (lance-spark 0.0.14 writer deadlock, not timed): {', '.join(hangs)}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    sys.exit(main())
