"""Spark SQL on our catalogs: lance-spark's catalog (Spark 3.5, JVM jars from Maven Central)
over our REST server, on the real Hive Metastore 2.3 and on the Glue emulator, with pylance's
DirectoryNamespace behind the same server as the reference.

The SQL session runs on ``.venv-sql`` (pyspark 3.5, made by scripts/setup.sh) in a child process
(tests/support/spark_sql.py); everything it writes is checked from this process with our
in-process namespaces, pylance and the Python data source on pyspark 4, and the other way
round. Each server's audit log tells which REST operations every statement called.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lance
import lance.namespace
import pyarrow as pa
import pytest
from lance_namespace import (
    CreateNamespaceRequest,
    DescribeTableRequest,
    LanceNamespace,
    TableExistsRequest,
)
from lance_namespace.errors import TableNotFoundError
from support.harness import GlueHarness, Harness, HiveHarness
from support.spark_sql import SQL_PYTHON, SqlError, SqlSession

from lance_metastore.rest import RestServer
from lance_metastore.spark import sql_conf
from lance_metastore.spark.sql import jars_fetched

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
    pytest.mark.skipif(
        not SQL_PYTHON.exists(), reason="no .venv-sql: run scripts/setup.sh (Spark 3.5 for SQL)"
    ),
]

TOKEN = "sql-test-token-" + uuid.uuid4().hex
# lance-spark 0.0.14 bundles Lance 0.35, which cannot read files pylance 14 writes by default
# (its JVM aborts on them); tables meant for it are written in the 2.0 file format.
READABLE_BY_LANCE_SPARK = "2.0"
BACKENDS = ["hms", "glue"]


class AuditTrail(logging.Handler):
    """The operations a server answered, from its audit log, in order."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.operations: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        fields = dict(part.split("=", 1) for part in record.getMessage().split() if "=" in part)
        self.operations.append(fields.get("op", "?"))

    def since(self, start: int) -> list[str]:
        return self.operations[start:]


@dataclass
class Catalog:
    """One Spark catalog of the SQL session: a namespace served by one REST server."""

    name: str
    namespace: LanceNamespace
    harness: Harness | None
    server: RestServer
    audit: AuditTrail
    prefix: list[str] = field(default_factory=list)

    def calls(
        self, sql: SqlSession, statement: str, undo: str | None = None
    ) -> tuple[list[tuple[Any, ...]], list[str]]:
        """Run ``statement``; its rows and the REST operations it called (those of the try
        that answered, when lance-spark's writer hung and it ran again: see
        ``SqlSession.sql``)."""
        start = len(self.audit.operations)

        def restart_count() -> None:
            nonlocal start
            sql.columns(f"SHOW NAMESPACES IN {self.name}")  # the new session's catalog set-up
            start = len(self.audit.operations)

        rows = sql.sql(statement, undo=undo, before_retry=restart_count)
        return rows, self.audit.since(start)


def _serve(name: str, namespace: LanceNamespace, **options: Any) -> tuple[RestServer, AuditTrail]:
    audit = AuditTrail()
    logger = logging.getLogger(f"tests.spark_sql.audit.{name}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(audit)
    server = RestServer(namespace, audit_logger=logger, **options).start()
    return server, audit


@pytest.fixture(scope="module")
def catalogs(
    hive_metastore_uri: str, glue_emulator: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Catalog]]:
    glue_emulator.reset()
    root = tmp_path_factory.mktemp("sql")
    hms = HiveHarness(root=root / "hms", uri=hive_metastore_uri, level=2)
    glue = GlueHarness(root=root / "glue", emulator=glue_emulator)
    directory = lance.namespace.DirectoryNamespace(root=str(root / "dir"), manifest_enabled="true")
    made: dict[str, Catalog] = {}
    try:
        for name, harness, namespace, options in (
            ("hms", hms, hms.connect(), {"auth_token": TOKEN}),
            ("glue", glue, glue.connect(), {}),
            ("dir", None, directory, {}),
        ):
            server, audit = _serve(name, namespace, **options)
            made[name] = Catalog(name, namespace, harness, server, audit)
        yield made
    finally:
        for catalog in made.values():
            catalog.server.stop()
            if hasattr(catalog.namespace, "close"):
                catalog.namespace.close()
        hms.reset()


@pytest.fixture(scope="module")
def sql(catalogs: dict[str, Catalog], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    conf: dict[str, str] = {}
    for name, catalog in catalogs.items():
        token = TOKEN if name == "hms" else None
        conf.update(sql_conf(catalog.server.url, name, token=token, spark_version="3.5"))
    # the same server as "hms" without its token: every call must be refused
    conf.update(sql_conf(catalogs["hms"].server.url, "hms_no_token", spark_version="3.5"))
    log = tmp_path_factory.mktemp("sql-log") / "spark-sql.log"
    with SqlSession(conf, log) as session:
        yield session


@pytest.fixture(scope="module")
def spark4(spark: Any) -> Any:
    """pyspark 4 in this process: our Python data source (lance_metastore.spark.register).

    The session-wide SparkSession of conftest: getOrCreate would hand back that same session,
    and stopping it here would stop it for every later test module."""
    return spark


def fresh_db(catalog: Catalog, sql: SqlSession, prefix: str) -> str:
    db = f"{prefix}_{uuid.uuid4().hex[:8]}"
    _, calls = catalog.calls(sql, f"CREATE NAMESPACE {catalog.name}.{db}")
    assert "create_namespace" in calls
    return db


def data_source_options(catalog: Catalog) -> dict[str, str]:
    assert catalog.harness is not None
    return {"impl": catalog.harness.name, **catalog.harness.properties()}


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------


def test_jars_come_from_the_machine_wide_cache() -> None:
    assert jars_fetched(spark_version="3.5"), "scripts/setup.sh fetches lance-spark's jars"


# --------------------------------------------------------------------------------------------
# The SQL surface, per backend
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_sql_table_lifecycle(backend: str, catalogs: dict[str, Catalog], sql: SqlSession) -> None:
    catalog = catalogs[backend]
    harness = catalog.harness
    assert harness is not None
    db = fresh_db(catalog, sql, "sales")
    table = f"{catalog.name}.{db}.orders"
    ns = catalog.namespace

    _, calls = catalog.calls(
        sql, f"CREATE TABLE {table} (id BIGINT, customer STRING, amount DOUBLE)"
    )
    assert calls == ["table_exists", "create_empty_table"]
    parameters = harness.raw_parameters([db], "orders")
    assert str(parameters["table_type"]).lower() == "lance"

    _, calls = catalog.calls(
        sql,
        f"INSERT INTO {table} VALUES (1, 'ann', 5.0), (2, 'bob', 12.5), (3, 'cy', 30.0),"
        " (4, 'dee', 7.5)",
    )
    assert calls == ["describe_table"]  # lance-spark writes the data itself

    rows, calls = catalog.calls(
        sql, f"SELECT id, customer FROM {table} WHERE amount > 10 ORDER BY id"
    )
    assert rows == [(2, "bob"), (3, "cy")]
    assert calls == ["describe_table"]
    # lance-spark writes straight to storage: reads never write, so the catalog records the
    # columns when told (the documented answer for writers other than ours)
    ns.describe_table(DescribeTableRequest(id=[db, "orders"]))
    assert harness.columns([db], "orders") == []
    ns.sync_table_columns([db, "orders"])
    assert [name for name, _ in harness.columns([db], "orders")] == ["id", "customer", "amount"]

    # pylance reads by name through our in-process namespace
    written = lance.dataset(namespace_client=ns, table_id=[db, "orders"]).to_table()
    assert sorted(written.column("id").to_pylist()) == [1, 2, 3, 4]
    first_version = lance.dataset(namespace_client=ns, table_id=[db, "orders"]).version

    # CTAS
    rows, calls = catalog.calls(
        sql,
        f"CREATE TABLE {catalog.name}.{db}.big_orders AS SELECT * FROM {table} WHERE amount > 10",
    )
    assert "create_empty_table" in calls
    assert sql.sql(f"SELECT count(*) FROM {catalog.name}.{db}.big_orders") == [(2,)]
    big = lance.dataset(namespace_client=ns, table_id=[db, "big_orders"]).to_table()
    assert sorted(big.column("customer").to_pylist()) == ["bob", "cy"]

    # row-level changes
    _, calls = catalog.calls(sql, f"DELETE FROM {table} WHERE id = 1")
    assert calls == ["describe_table"]
    _, calls = catalog.calls(sql, f"UPDATE {table} SET amount = amount * 2 WHERE id = 2")
    assert calls == ["describe_table"]
    assert sql.sql(f"SELECT id, amount FROM {table} ORDER BY id") == [
        (2, 25.0),
        (3, 30.0),
        (4, 7.5),
    ]
    # every version stays readable by pylance (SQL time travel: see the limitation test)
    old = lance.dataset(namespace_client=ns, table_id=[db, "orders"], version=first_version)
    assert old.count_rows() == 4

    rows, calls = catalog.calls(sql, f"SHOW TABLES IN {catalog.name}.{db}")
    assert sorted(row[1] for row in rows) == ["big_orders", "orders"]
    assert calls == ["list_tables"]

    _, calls = catalog.calls(sql, f"DROP TABLE {catalog.name}.{db}.big_orders")
    assert calls == ["table_exists", "drop_table"]
    with pytest.raises(TableNotFoundError):
        ns.table_exists(TableExistsRequest(id=[db, "big_orders"]))
    assert [row[1] for row in sql.sql(f"SHOW TABLES IN {catalog.name}.{db}")] == ["orders"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_tables_written_elsewhere_are_read_by_sql(
    backend: str, catalogs: dict[str, Catalog], sql: SqlSession, spark4: Any
) -> None:
    """pylance and the Python data source write; SQL reads. SQL writes; the data source reads."""
    catalog = catalogs[backend]
    ns = catalog.namespace
    db = f"shared_{uuid.uuid4().hex[:8]}"
    ns.create_namespace(CreateNamespaceRequest(id=[db]))

    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "city": ["oslo", "rome", "lima"]})
    lance.write_dataset(
        data,
        namespace_client=ns,
        table_id=[db, "by_pylance"],
        mode="create",
        data_storage_version=READABLE_BY_LANCE_SPARK,
    )
    rows = sql.sql(f"SELECT city FROM {catalog.name}.{db}.by_pylance WHERE id >= 2 ORDER BY id")
    assert rows == [("rome",), ("lima",)]

    options = data_source_options(catalog)
    frame = spark4.createDataFrame([(10, "x"), (20, "y")], "n BIGINT, tag STRING")
    writer = frame.write.format("lance").options(**options).mode("append")
    writer.option("data_storage_version", READABLE_BY_LANCE_SPARK).save(f"{db}$by_data_source")
    assert sql.sql(f"SELECT sum(n) FROM {catalog.name}.{db}.by_data_source") == [(30,)]

    here = f"{catalog.name}.{db}"
    sql.sql(
        f"CREATE TABLE {here}.by_sql AS SELECT id * 10 AS v FROM {here}.by_pylance",
        undo=f"DROP TABLE IF EXISTS {here}.by_sql",
    )
    read = spark4.read.format("lance").options(**options).load(f"{db}$by_sql")
    assert sorted(row.v for row in read.collect()) == [10, 20, 30]
    # what lance-spark writes, pylance reads and appends to in the same format
    by_sql = lance.dataset(namespace_client=ns, table_id=[db, "by_sql"])
    assert by_sql.data_storage_version == READABLE_BY_LANCE_SPARK
    more = pa.table({"v": pa.array([40], pa.int64())})
    lance.write_dataset(more, namespace_client=ns, table_id=[db, "by_sql"], mode="append")
    assert sql.sql(f"SELECT max(v) FROM {here}.by_sql") == [(40,)]


# --------------------------------------------------------------------------------------------
# Auth, errors, and what lance-spark 0.0.14 cannot do
# --------------------------------------------------------------------------------------------


def test_server_token_is_required(catalogs: dict[str, Catalog], sql: SqlSession) -> None:
    catalog = catalogs["hms"]
    start = len(catalog.audit.operations)
    with pytest.raises(SqlError):
        sql.sql("SHOW NAMESPACES IN hms_no_token")
    assert catalog.audit.since(start), "the refused call reached the server and was audited"
    # the token never shows in the session's settings as Spark reports them
    shown = dict(sql.sql("SET"))
    assert TOKEN not in " ".join(str(value) for value in shown.values())


def test_missing_table_and_namespace_errors(catalogs: dict[str, Catalog], sql: SqlSession) -> None:
    with pytest.raises(SqlError) as missing:
        sql.sql("SELECT * FROM hms.no_such_db.no_such_table")
    assert missing.value.kind == "AnalysisException"
    assert "no_such_table" in missing.value.message
    db = fresh_db(catalogs["glue"], sql, "dup")
    sql.sql(f"CREATE TABLE glue.{db}.t (a INT)")
    with pytest.raises(SqlError) as duplicate:
        sql.sql(f"CREATE TABLE glue.{db}.t (a INT)")
    assert "already exists" in duplicate.value.message.lower()


@pytest.mark.parametrize("backend", ["hms", "dir"])
def test_time_travel_and_add_columns_need_a_newer_lance_spark(
    backend: str, catalogs: dict[str, Catalog], sql: SqlSession
) -> None:
    """lance-spark 0.0.14 (the Spark 3.5 build served here) has neither ``VERSION AS OF`` nor
    ``ALTER TABLE ... ADD COLUMNS``, even on pylance's own DirectoryNamespace; the statements
    fail cleanly and change nothing. When a newer build is served, this test says so."""
    catalog = catalogs[backend]
    db = fresh_db(catalog, sql, "limits")
    table = f"{catalog.name}.{db}.t"
    sql.sql(f"CREATE TABLE {table} (a BIGINT)")
    sql.sql(f"INSERT INTO {table} VALUES (1), (2)")
    with pytest.raises(SqlError):
        sql.sql(f"SELECT * FROM {table} VERSION AS OF 1")
    with pytest.raises(SqlError) as alter:
        sql.sql(f"ALTER TABLE {table} ADD COLUMNS (b STRING)")
    assert "not supported" in alter.value.message.lower()
    assert sql.columns(f"SELECT * FROM {table}") == ["a"]
    assert sorted(sql.sql(f"SELECT a FROM {table}")) == [(1,), (2,)]


def test_reference_directory_namespace_through_our_server(
    catalogs: dict[str, Catalog], sql: SqlSession
) -> None:
    """The same statements on pylance's DirectoryNamespace behind our server call the same
    REST operations as on our catalogs."""
    catalog = catalogs["dir"]
    db = fresh_db(catalog, sql, "ref")
    table = f"{catalog.name}.{db}.orders"
    _, calls = catalog.calls(sql, f"CREATE TABLE {table} (id BIGINT, amount DOUBLE)")
    assert calls == ["table_exists", "create_empty_table"]
    sql.sql(f"INSERT INTO {table} VALUES (1, 1.0), (2, 2.0)")
    sql.sql(f"DELETE FROM {table} WHERE id = 1")
    assert sql.sql(f"SELECT id FROM {table}") == [(2,)]
    _, calls = catalog.calls(sql, f"DROP TABLE {table}")
    assert calls == ["table_exists", "drop_table"]


def test_sql_conf_names_the_build_for_each_spark(tmp_path: Path) -> None:
    conf = sql_conf(
        "http://127.0.0.1:2333/", "lake", token="t0k", spark_version="3.5.9", ivy_dir=tmp_path
    )
    assert conf["spark.sql.catalog.lake"] == "org.lance.spark.LanceNamespaceSparkCatalog"
    assert conf["spark.sql.extensions"] == "org.lance.spark.extensions.LanceSparkSessionExtensions"
    assert conf["spark.sql.catalog.lake.impl"] == "rest"
    assert conf["spark.sql.catalog.lake.uri"] == "http://127.0.0.1:2333"
    assert conf["spark.sql.catalog.lake.headers.Authorization"] == "Bearer t0k"
    # an empty cache: Spark resolves the build (listenablefuture is an unfetchable placeholder)
    assert conf["spark.jars.packages"] == "org.lance:lance-spark-3.5_2.12:0.4.0"
    assert conf["spark.jars.excludes"] == "com.google.guava:listenablefuture"
    assert conf["spark.jars.ivy"] == str(tmp_path)


def test_sql_conf_loads_cached_jars_without_resolving() -> None:
    """Once fetched, a session loads the jar files directly: it starts offline and prints no
    Ivy resolution report."""
    conf = sql_conf("http://127.0.0.1:2333", spark_version="3.5")
    assert "spark.jars.packages" not in conf and "spark.jars.ivy" not in conf
    jars = conf["spark.jars"].split(",")
    assert all(Path(jar).is_file() for jar in jars)
    assert any(Path(jar).name == "org.lance_lance-spark-3.5_2.12-0.4.0.jar" for jar in jars)


def test_sql_conf_names_another_build(tmp_path: Path) -> None:
    conf = sql_conf(
        "http://127.0.0.1:2333",
        spark_version="4.0.1",
        packages="org.lance:lance-spark-4.0_2.13:0.4.0",
        ivy_dir=tmp_path,
    )
    assert conf["spark.jars.packages"] == "org.lance:lance-spark-4.0_2.13:0.4.0"
    assert conf["spark.sql.catalog.lance"] == "org.lance.spark.LanceNamespaceSparkCatalog"


@pytest.mark.parametrize(
    ("uri", "kwargs", "fragment"),
    [
        (
            "http://127.0.0.1:2333",
            {"spark_version": "4.3.0"},
            "No lance-spark build for Spark 4.3.0",
        ),
        ("thrift://127.0.0.1:9083", {"spark_version": "3.5"}, "must be an http"),
        ("http://127.0.0.1:2333", {"spark_version": "3.5", "catalog": "a.b"}, "catalog name"),
        ("http://127.0.0.1:2333", {"spark_version": "3.5", "token": "a\nb"}, "one non-empty line"),
        ("http://127.0.0.1:2333", {"packages": "org.lance:lance-spark"}, "group:artifact:version"),
    ],
)
def test_sql_conf_refuses_what_cannot_work(uri: str, kwargs: dict[str, Any], fragment: str) -> None:
    from lance_namespace.errors import LanceNamespaceError

    with pytest.raises(LanceNamespaceError, match=fragment) as refused:
        sql_conf(uri, **kwargs)
    assert "a\nb" not in str(refused.value)
