"""Spark SQL benchmark: lance-spark over our REST server vs Spark's Parquet vs our data source.

Run from the repository root, in the project's venv, after ``scripts/setup.sh`` (which makes
``.venv-sql`` with Spark 3.5 and fetches lance-spark's jars)::

    python benchmarks/bench_spark_sql.py --rows 2000000 [--repeat 3] [--json out.json]
    python benchmarks/bench_spark_sql.py --rows 10000000

One run starts a local Hive Metastore, our REST server over it (``hive3`` layout, on a
background thread of this process, the code of ``lance-metastore serve``), and two Spark
sessions at ``local[2]``, both alive for the whole run:

- Spark 3.5 (child process on ``.venv-sql``, tests/support/spark_sql.py) with lance-spark's
  catalog ``lance`` on the server (``sql_conf``): the SQL path, against Spark 3.5's Parquet in
  the same session;
- Spark 4 (this process) with our Python data source (``lance_metastore.spark.register``),
  against Spark 4's Parquet in the same session.

Each session generates the same ``--rows`` rows (``id`` bigint, ``k`` int, ``x`` double, ``s``
string) and caches them. Then, ``--repeat`` times per operation, alternating the order of the
contenders every round:

- write: ``CREATE TABLE ... AS SELECT`` (a new table each round) vs Parquet's writer; the data
  source's ``mode("overwrite")`` of a catalog table vs Spark 4's Parquet;
- full scan: an aggregate over every column;
- two-column aggregate: ``SELECT k, sum(x) ... GROUP BY k`` (reads two of four columns);
- selective filter: 1,000 consecutive ids (0.05% at 2 M rows), through filter pushdown;
- merge: 1% of the rows (every 100th id, ``x`` changed) merged on ``id`` (update when
  matched, insert otherwise): SQL ``MERGE INTO`` vs pylance's ``merge_insert`` of the same rows
  (an Arrow table in this process) vs the data source's ``LanceTable.merge``.

Every SQL statement's REST calls are counted from the server's audit log (operation and
count), the same for every round of a statement; they are printed per statement.

Printed: medians, the Lance/Parquet ratios within each Spark and against the goals (write
within 1.0x of Parquet, two-column aggregate within 1.1x), the REST calls per statement, and
the load average before and after. The machine is shared: compare ratios, not seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

GOALS = {"write": 1.0, "aggregate": 1.1}  # the SQL path vs Parquet (Spark 3.5)
# A statement that takes this long fails the run instead of hanging it.
STATEMENT_TIMEOUT = 900
DB = ["hive", "bench"]
COLUMNS = (
    "id, CAST(id * 7919 % 1000 AS INT) AS k, rand(7) AS x, "
    "concat('user-', CAST(id * 31 % 100003 AS STRING)) AS s"
)
UPDATES = "SELECT id, k, x + 1.0 AS x, s FROM cached WHERE id % 100 = 0"
QUERIES = {
    "full scan": "SELECT count(*) AS n, sum(k) AS k, sum(x) AS x, max(length(s)) AS s FROM {t}",
    "aggregate": "SELECT k, sum(x) AS x FROM {t} GROUP BY k",
    "filter": "SELECT count(*) AS n, sum(x) AS x FROM {t} WHERE id >= {lo} AND id < {hi}",
}
SQL, PARQUET35, SOURCE, PARQUET4, PYLANCE = (
    "lance-spark SQL",
    "Parquet (Spark 3.5)",
    "data source (Spark 4)",
    "Parquet (Spark 4)",
    "pylance merge_insert",
)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


class CallLog(logging.Handler):
    """The REST operations the server answered, in order, from its audit log."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.operations: list[str] = []
        self.milliseconds: list[float] = []  # the server's time for each, as it logged it

    def emit(self, record: logging.LogRecord) -> None:
        fields = dict(part.split("=", 1) for part in record.getMessage().split() if "=" in part)
        self.operations.append(fields.get("op", "?"))
        self.milliseconds.append(float(fields.get("ms", "nan")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4, help="Spark partitions of the data")
    parser.add_argument("--work-dir", help="where the metastore, Parquet and Lance data go")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary work dir")
    parser.add_argument(
        "--skip-source", action="store_true", help="leave out the Spark 4 data source"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the timed rounds, record one more run of each SQL read and of its "
        "Parquet twin with Java Flight Recorder (jcmd) and print where the JVM spent it",
    )
    args = parser.parse_args(argv)

    from support.spark_sql import SQL_PYTHON

    if not SQL_PYTHON.exists():
        sys.exit("no .venv-sql: run scripts/setup.sh first")
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench_spark_sql_")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    from lance_metastore.hive.local import LocalMetastore

    print(f"work dir {work}; {args.rows:,} rows; repeat {args.repeat}; load {load()}", flush=True)
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
    from lance_namespace import CreateNamespaceRequest, connect
    from support.spark import local_session
    from support.spark_sql import SqlSession

    import lance_metastore  # noqa: F401
    from lance_metastore.rest import RestServer
    from lance_metastore.spark import LanceTable, sql_conf

    props = {"uri": uri, "root": str(work / "lake")}
    namespace = connect("hive3", props)
    namespace.create_namespace(CreateNamespaceRequest(id=DB, mode="exist_ok"))
    n = args.rows
    calls = CallLog()
    audit = logging.getLogger("bench_spark_sql.audit")
    audit.setLevel(logging.INFO)
    audit.propagate = False
    audit.addHandler(calls)
    server = RestServer(namespace, audit_logger=audit).start()
    sql = spark = None
    rest_calls: dict[str, Counter[str]] = {}
    server_ms: dict[str, tuple[float, float]] = {}  # statement: (server's ms, statement's ms)
    try:
        sql = SqlSession(
            {
                **sql_conf(server.url, "lance", spark_version="3.5"),
                "spark.driver.memory": "6g",
                "spark.sql.parquet.compression.codec": "snappy",
            },
            work / "spark35.log",
            timeout=STATEMENT_TIMEOUT,
        )
        rows = f"SELECT {COLUMNS} FROM range(0, {n}, 1, {args.partitions})"
        sql.sql(f"CACHE TABLE cached AS {rows}")
        sql.sql(f"CACHE TABLE updates AS {UPDATES}")
        if not args.skip_source:
            spark = local_session(
                "lance-metastore-bench-sql",
                conf={
                    "spark.driver.memory": "6g",
                    "spark.sql.warehouse.dir": str(work / "warehouse"),
                    "spark.sql.parquet.compression.codec": "snappy",
                },
            )
            data = spark.sql(rows).cache()
            data.count()
            data.createOrReplaceTempView("cached")
            spark.sql(UPDATES).cache().createOrReplaceTempView("updates")

        def statement(label: str, text: str) -> Callable[[], Any]:
            """Run a SQL statement on the 3.5 session, counting its REST calls."""

            def go() -> Any:
                start = len(calls.operations)
                began = time.perf_counter()
                answer = sql.sql(text)
                rest_calls[label] = Counter(calls.operations[start:])
                server_ms[label] = (
                    sum(calls.milliseconds[start:]),
                    (time.perf_counter() - began) * 1000,
                )
                return answer

            return go

        parquet35, parquet4 = work / "parquet35", work / "parquet4"
        source_options = {"impl": "hive3", **props}
        source_name = "$".join([*DB, "by_source"])
        sql_rounds = iter(range(1_000_000))
        sql_table: dict[str, str] = {}  # "name": the table the last CTAS made, "old": before

        def sql_write() -> None:
            name = f"lance.hive.bench.by_sql_{next(sql_rounds)}"
            statement(
                "CREATE TABLE ... AS SELECT", f"CREATE TABLE {name} AS SELECT * FROM cached"
            )()
            if "name" in sql_table:
                sql_table["old"] = sql_table["name"]
            sql_table["name"] = name

        def drop_old_sql_table() -> None:  # untimed, after each CTAS
            if "old" in sql_table:
                sql.sql(f"DROP TABLE {sql_table.pop('old')} PURGE")

        writes: dict[str, Callable[[], Any]] = {
            SQL: sql_write,
            PARQUET35: lambda: sql.sql(
                f"INSERT OVERWRITE DIRECTORY '{parquet35}' USING parquet SELECT * FROM cached"
            ),
        }
        if spark is not None:
            writes[SOURCE] = lambda: (
                data.write.format("lance")
                .options(**source_options)
                .mode("overwrite")
                .save(source_name)
            )
            writes[PARQUET4] = lambda: data.write.mode("overwrite").parquet(str(parquet4))

        def source_frame() -> Any:
            return spark.read.format("lance").options(**source_options).load(source_name)

        lo, hi = n // 2, n // 2 + 1_000
        queries: dict[str, dict[str, Callable[[], Any]]] = {}
        for operation, template in QUERIES.items():
            entries: dict[str, Callable[[], Any]] = {
                SQL: lambda t=template, op=operation: statement(
                    f"SELECT ({op})", t.format(t=sql_table["name"], lo=lo, hi=hi)
                )(),
                PARQUET35: lambda t=template: sql.sql(
                    t.format(t=f"parquet.`{parquet35}`", lo=lo, hi=hi)
                ),
            }
            if spark is not None:

                def on_source(t: str = template) -> Any:
                    source_frame().createOrReplaceTempView("by_source")
                    return spark.sql(t.format(t="by_source", lo=lo, hi=hi)).collect()

                def on_parquet(t: str = template) -> Any:
                    spark.read.parquet(str(parquet4)).createOrReplaceTempView("parquet4")
                    return spark.sql(t.format(t="parquet4", lo=lo, hi=hi)).collect()

                entries[SOURCE], entries[PARQUET4] = on_source, on_parquet
            queries[operation] = entries

        # The rows merged, as an Arrow table for pylance (the same rows as the SQL "updates").
        update_rows = spark.sql("SELECT * FROM updates").toArrow() if spark is not None else None

        def pylance_merge() -> None:
            dataset = lance.dataset(namespace_client=namespace, table_id=[*DB, "by_source"])
            merge = dataset.merge_insert("id").when_matched_update_all()
            merge.when_not_matched_insert_all().execute(update_rows)

        def source_merge() -> None:
            table = LanceTable.for_name(spark, source_name, **source_options)
            merge = table.merge(spark.table("updates"), "id").when_matched_update_all()
            merge.when_not_matched_insert_all().execute()

        merges: dict[str, Callable[[], Any]] = {
            SQL: lambda: statement(
                "MERGE INTO (1% of rows)",
                f"MERGE INTO {sql_table['name']} t USING updates u ON t.id = u.id "
                "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
            )(),
        }
        if spark is not None:
            merges[PYLANCE] = pylance_merge
            merges[SOURCE] = source_merge

        def clean_source_versions() -> None:
            if spark is not None:
                dataset = lance.dataset(namespace_client=namespace, table_id=[*DB, "by_source"])
                dataset.cleanup_old_versions(older_than=dt.timedelta(0))

        # Warm-up (untimed): JIT, jars, Python workers, catalog entries; answers compared.
        for fn in writes.values():
            fn()
        drop_old_sql_table()
        for operation, entries in queries.items():
            answers = {label: _plain(fn()) for label, fn in entries.items()}
            if len({json.dumps(a, sort_keys=True) for a in answers.values()}) != 1:
                print(f"  note: {operation} answers differ in float rounding: {answers}")
        assert sql.sql(f"SELECT count(*) FROM {sql_table['name']}") == [(n,)]

        times: dict[str, dict[str, list[float]]] = {}
        plan: list[tuple[str, dict[str, Callable[[], Any]]]] = [
            ("write", writes),
            *queries.items(),
            ("merge", merges),
        ]
        for operation, entries in plan:
            times[operation] = {label: [] for label in entries}
            for round_ in range(args.repeat):
                order = list(entries.items())
                if round_ % 2:
                    order.reverse()
                for label, fn in order:
                    start = time.perf_counter()
                    fn()
                    times[operation][label].append(time.perf_counter() - start)
                    if operation == "write" and label == SOURCE:
                        clean_source_versions()  # untimed
                    if operation == "write" and label == SQL:
                        drop_old_sql_table()  # untimed
            print(f"  {operation} done; load {load()}", flush=True)
        merged = sql.sql(f"SELECT count(*) FROM {sql_table['name']}")
        assert merged == [(n,)], merged  # every merged row matched: nothing inserted
        report(times, rest_calls, server_ms, n, args)
        if args.profile:
            pid = _jvm_of(sql)
            for operation, entries in [("write", writes), *queries.items()]:
                for label in (SQL, PARQUET35):
                    recording = work / f"{operation.replace(' ', '_')}-{label[:7]}.jfr"
                    profiled(pid, recording, entries[label])
                    print(f"\nJFR, {operation}, {label} ({recording.name}):")
                    for line in jfr_summary(recording):
                        print(f"  {line}")
        return 0
    finally:
        if sql is not None:
            sql.close()
        if spark is not None:
            spark.stop()
        server.stop()
        namespace.close()


def _jvm_of(sql: Any) -> int:
    """The pid of the Spark 3.5 session's JVM (a child of the SQL session's Python)."""
    parent = sql._process.pid
    children = [
        c for f in Path(f"/proc/{parent}/task").glob("*/children") for c in f.read_text().split()
    ]
    for pid in children:
        if "java" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
            return int(pid)
    raise RuntimeError("the SQL session has no JVM child")


def _jcmd(pid: int, *command: str) -> None:
    jcmd = shutil.which("jcmd") or str(Path(os.environ.get("JAVA_HOME", "/usr")) / "bin/jcmd")
    subprocess.run([jcmd, str(pid), *command], check=True, capture_output=True, timeout=120)


def profiled(pid: int, recording: Path, fn: Callable[[], Any]) -> None:
    """Run ``fn`` once under a Java Flight Recorder recording of the session's JVM."""
    _jcmd(pid, "JFR.start", "name=bench", "settings=profile")
    try:
        fn()
    finally:
        _jcmd(pid, "JFR.stop", "name=bench", f"filename={recording}")


# Where a sample's top frame is: by the first matching prefix of its class.
FRAME_GROUPS = (
    ("org.lance.spark.", "lance-spark (Java)"),
    ("org.lance.", "Lance JNI (Rust core, native)"),
    # lance-spark pulls each batch from Lance's Rust scanner through an Arrow C stream.
    ("org.apache.arrow.c.jni.", "Lance's native scan (Arrow C stream)"),
    ("org.apache.arrow.", "Arrow Java (lance-spark's batches)"),
    ("org.apache.parquet.", "Parquet"),
    ("org.apache.spark.sql.execution.datasources.parquet.", "Parquet"),
    ("org.apache.spark.sql.catalyst.expressions.GeneratedClass", "Spark generated code"),
    ("org.apache.spark.", "Spark"),
    ("io.netty.", "netty"),
    ("java.", "JDK"),
    ("jdk.", "JDK"),
    ("sun.", "JDK"),
)


def jfr_summary(recording: Path, top: int = 8) -> list[str]:
    """Shares of the recording's execution samples (Java and native-method samples of Spark's
    task threads) by where their top frame is; the top frames themselves."""
    printed = subprocess.run(
        [
            shutil.which("jfr") or "jfr",
            "print",
            "--events",
            "jdk.ExecutionSample,jdk.NativeMethodSample",
            str(recording),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    groups: Counter[str] = Counter()
    frames: Counter[str] = Counter()
    in_task, take_next = False, False
    for line in printed.splitlines():
        stripped = line.strip()
        if stripped.startswith("sampledThread"):
            in_task = "task" in stripped.lower() or "Executor" in stripped
        elif stripped == "stackTrace = [":
            take_next = True
        elif take_next:
            take_next = False
            if not in_task:
                continue
            frame = stripped.split("(")[0]
            frames[frame] += 1
            group = next(
                (name for prefix, name in FRAME_GROUPS if frame.startswith(prefix)), "other"
            )
            groups[group] += 1
    total = sum(groups.values()) or 1
    lines = [f"{total} samples of task threads"]
    lines += [f"{count / total:6.1%}  {group}" for group, count in groups.most_common()]
    lines += ["top frames:"]
    lines += [f"{count / total:6.1%}  {frame}" for frame, count in frames.most_common(top)]
    return lines


def _plain(answer: Any) -> Any:
    rows = [tuple(row) for row in answer]
    return sorted(tuple(round(v, 3) if isinstance(v, float) else v for v in r) for r in rows)


def report(
    times: dict[str, dict[str, list[float]]],
    rest_calls: dict[str, Counter[str]],
    server_ms: dict[str, tuple[float, float]],
    n: int,
    args: argparse.Namespace,
) -> None:
    print()
    print(f"{n:,} rows, local[2], medians of {args.repeat}; load average now {load()}")
    print(f"{'operation':<10} {'contender':<24} {'median s':>9}  runs")
    for operation, entries in times.items():
        for label, values in entries.items():
            runs = " ".join(f"{value:.2f}" for value in values)
            print(f"{operation:<10} {label:<24} {median(values):9.2f}  {runs}")
    print()
    ratios: dict[str, float] = {}
    for operation, entries in times.items():
        m = {label: median(values) for label, values in entries.items()}
        if PARQUET35 in m:
            ratios[f"{operation}: SQL / Parquet (Spark 3.5)"] = m[SQL] / m[PARQUET35]
        if PARQUET4 in m:
            ratios[f"{operation}: data source / Parquet (Spark 4)"] = m[SOURCE] / m[PARQUET4]
        if PYLANCE in m:
            ratios[f"{operation}: SQL MERGE / pylance merge_insert"] = m[SQL] / m[PYLANCE]
            ratios[f"{operation}: LanceTable.merge / pylance merge_insert"] = m[SOURCE] / m[PYLANCE]
    for name, value in ratios.items():
        goal = GOALS.get(name.split(":")[0]) if "SQL / Parquet" in name else None
        verdict = f"  goal <= {goal}x: {'met' if value <= goal else 'MISSED'}" if goal else ""
        print(f"{name:<48} {value:6.2f}x{verdict}")
    print()
    print("REST calls per SQL statement (server's audit log; its time in them, last run):")
    for label, counter in rest_calls.items():
        detail = ", ".join(f"{op} {count}" for op, count in sorted(counter.items()))
        inside, whole = server_ms[label]
        share = f"{inside:7.1f} ms of {whole / 1000:6.2f} s ({inside / whole:.1%})"
        print(f"  {label:<28} {sum(counter.values()):3d}  {share}  {detail}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "rows": n,
                    "repeat": args.repeat,
                    "load": load(),
                    "results": times,
                    "ratios": ratios,
                    "rest_calls": {k: dict(v) for k, v in rest_calls.items()},
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    sys.exit(main())
