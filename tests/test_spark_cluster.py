"""Spark on a real standalone cluster, not ``local[2]``: a master and two workers (one core,
1 GB each) started from the pyspark install on 127.0.0.1 (tests/support/spark_cluster.py).

- Spark 4.3 (``.venv``): our Python data source. Executors in their own JVMs, with Python
  workers under them, write and read a Hive table by catalog name; an executor killed while
  its task writes leaves the table as it was or committed once.
- Spark 3.5 (``.venv-sql``): the SQL path, lance-spark's catalog through our REST server
  (the code of ``lance-metastore serve``) on the same metastore; executors run lance-spark's
  writer and reader from the jars the driver resolved.

Each driver is its own process (one SparkContext per process). Everything is checked from
this process with pylance through our namespace.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from support.harness import HiveHarness
from support.spark_cluster import StandaloneCluster, wait_for
from support.spark_sql import SQL_PYTHON, SqlSession

from lance_metastore.rest import RestServer
from lance_metastore.spark import sql_conf

ROOT = Path(__file__).resolve().parents[1]
JOB = Path(__file__).parent / "support" / "cluster_job.py"
WORKERS = 2
JOB_TIMEOUT_SECONDS = 900

pytestmark = [
    pytest.mark.timeout(2700),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]


def _spark_home(python: Path) -> Path:
    found = subprocess.run(
        [str(python), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(found.stdout.strip())


@pytest.fixture(scope="module")
def cluster4(
    spark_installed: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandaloneCluster]:
    home = _spark_home(Path(sys.executable))
    with StandaloneCluster(home, tmp_path_factory.mktemp("cluster4"), workers=WORKERS) as cluster:
        yield cluster


@pytest.fixture
def hive(hive_metastore_uri: str, tmp_path: Path) -> HiveHarness:
    harness = HiveHarness(root=tmp_path / "lake", uri=hive_metastore_uri, level=3)
    harness.reset()
    return harness


def _run_job(job: dict[str, Any], log: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    with open(log, "ab") as err:
        return subprocess.Popen(
            [sys.executable, str(JOB), json.dumps(job)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
            cwd=str(ROOT),
        )


def _answer(
    process: subprocess.Popen[str], log: Path, cluster: StandaloneCluster
) -> dict[str, Any]:
    """The driver's one JSON answer; its log and the cluster's when it fails or hangs."""
    try:
        out, _ = process.communicate(timeout=JOB_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        out = ""
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        driver = "\n".join(log.read_text(errors="replace").splitlines()[-60:])
        raise AssertionError(
            f"driver failed or hung ({process.returncode}):\n{driver}\n{cluster.logs()}"
        )
    return json.loads(lines[-1])


def _new_table(hive: HiveHarness) -> tuple[list[str], str]:
    db = hive.db(hive.unique("cluster"))
    ns = hive.connect()
    from lance_namespace import CreateNamespaceRequest

    ns.create_namespace(CreateNamespaceRequest(id=db))
    table = [*db, "events"]
    return table, "$".join(table)


def test_python_data_source_on_a_cluster(
    cluster4: StandaloneCluster, hive: HiveHarness, tmp_path: Path
) -> None:
    table, name = _new_table(hive)
    options = {"impl": "hive3", **hive.properties()}
    log = tmp_path / "driver.log"
    job = {"master": cluster4.url, "job": "roundtrip", "executors": WORKERS}
    driver = _run_job({**job, "table": name, "options": options, "rows": 20_000}, log)
    answer = _answer(driver, log, cluster4)

    assert answer["rows"] == 20_000 and answer["sum"] == sum(range(20_000))
    assert answer["executors"] == WORKERS
    # The rows were written by Python workers under the executors, not by the driver.
    assert answer["driver_pid"] not in answer["writer_pids"]
    assert len(answer["writer_pids"]) == 2

    dataset = lance.dataset(namespace_client=hive.connect(), table_id=table)
    assert dataset.count_rows() == 20_000 and dataset.version == 1
    assert hive.columns(table[:-1], "events") == [
        ("id", "bigint"),
        ("label", "string"),
        ("pid", "bigint"),
    ]


def _executor_of(cluster: StandaloneCluster, python_pid: int) -> int:
    """The executor JVM a Python worker runs under (its nearest executor ancestor)."""
    executors = set(cluster.executor_pids())
    pid = python_pid
    while pid > 1:
        if pid in executors:
            return pid
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    raise AssertionError(f"Python worker {python_pid} runs under no executor of the cluster")


def _gone(pid: int) -> bool:
    """The process has exited (a zombie its worker has not reaped yet counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_killed_executor_during_a_write(
    cluster4: StandaloneCluster, hive: HiveHarness, tmp_path: Path
) -> None:
    table, name = _new_table(hive)
    options = {"impl": "hive3", **hive.properties()}
    log = tmp_path / "driver.log"
    base = {"master": cluster4.url, "executors": WORKERS, "table": name, "options": options}
    ns = hive.connect()
    first = pa.table(
        {
            "id": pa.array(range(1_000), pa.int64()),
            "label": [f"row-{i}" for i in range(1_000)],
            "pid": pa.array([0] * 1_000, pa.int64()),
        }
    )
    lance.write_dataset(first, namespace_client=ns, table_id=table, mode="create")
    before = lance.dataset(namespace_client=ns, table_id=table)
    assert (before.version, before.count_rows()) == (1, 1_000)

    gate = tmp_path / "gate"
    gate.mkdir()
    writing = _run_job({**base, "job": "gated_append", "rows": 10_000, "gate": str(gate)}, log)
    try:
        started = wait_for(
            lambda: sorted(gate.glob("started-*")), JOB_TIMEOUT_SECONDS, "a write task to start"
        )
        victim = _executor_of(cluster4, int(started[0].name.split("-")[1]))
        cluster4.kill_executor(victim)
        wait_for(lambda: _gone(victim), 60, "the executor to die")
    finally:
        (gate / "release").touch()
    answer = _answer(writing, log, cluster4)

    after = lance.dataset(namespace_client=ns, table_id=table)
    ids = after.to_table(columns=["id"]).column("id").to_pylist()
    if answer["ok"]:  # the lost task ran again elsewhere: one commit, every row once
        assert after.version == 2 and len(ids) == 11_000
        assert sorted(ids) == sorted([*range(1_000), *range(10_000)])
    else:  # the job failed: the table is as it was
        assert (after.version, len(ids)) == (1, 1_000)


# --------------------------------------------------------------------------------------------
# Spark 3.5: SQL through our REST server
# --------------------------------------------------------------------------------------------


@pytest.mark.skipif(not SQL_PYTHON.exists(), reason="no .venv-sql: run scripts/setup.sh")
def test_sql_on_a_cluster(spark_installed: None, hive_metastore_uri: str, tmp_path: Path) -> None:
    home = _spark_home(SQL_PYTHON)
    hive = HiveHarness(root=tmp_path / "lake", uri=hive_metastore_uri, level=2)
    namespace = hive.connect()
    audit = logging.getLogger(f"tests.cluster.audit.{uuid.uuid4().hex[:6]}")
    audit.propagate = False
    server = RestServer(namespace, audit_logger=audit).start()
    db = hive.unique("sqlcluster")
    try:
        with StandaloneCluster(home, tmp_path / "cluster35", workers=WORKERS) as cluster:
            conf = {
                **sql_conf(server.url, "lake", spark_version="3.5"),
                "spark.master": cluster.url,
                "spark.executor.memory": "512m",
                "spark.executor.cores": "1",
                "spark.pyspark.python": str(SQL_PYTHON),
            }
            with SqlSession(conf, tmp_path / "sql.log", timeout=300) as sql:
                sql.sql(f"CREATE NAMESPACE lake.{db}")
                sql.sql(
                    f"CREATE TABLE lake.{db}.orders AS "
                    "SELECT id, id % 7 AS shop, CAST(id AS DOUBLE) * 1.5 AS amount "
                    "FROM range(0, 50000, 1, 4)"
                )
                sql.sql(f"INSERT INTO lake.{db}.orders VALUES (50000, 3, 1.0)")
                rows = sql.sql(
                    f"SELECT count(*), sum(id), count(DISTINCT shop) FROM lake.{db}.orders"
                )
                assert rows == [(50_001, sum(range(50_001)), 7)]
                assert len(cluster.executor_pids()) == WORKERS  # the job ran on the workers
        dataset = lance.dataset(namespace_client=namespace, table_id=[db, "orders"])
        assert dataset.count_rows() == 50_001
    finally:
        server.stop()
