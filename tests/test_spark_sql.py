"""Spark SQL on our catalogs: lance-spark 0.4.0's catalog (Spark 3.5, JVM jars from Maven
Central) over our REST server, on a real Hive Metastore (Hive 3 and Hive 2 layouts), on moto's
Glue as shipped and, where commits are catalog-managed, on the Glue emulator.

The SQL session runs on ``.venv-sql`` (pyspark 3.5, made by scripts/setup.sh) in a child process
(tests/support/spark_sql.py), one session for the whole module; everything it writes is checked
from this process with our in-process namespaces, pylance and the Python data source on
pyspark 4, and the other way round. Each server's audit log tells which REST operations every
statement called. The full statement list runs on one backend per family (hive3, glue); hive2
runs a smoke subset.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance_namespace import CreateNamespaceRequest, LanceNamespace, TableExistsRequest
from lance_namespace.errors import TableNotFoundError
from support.harness import GlueHarness, Harness, HiveHarness
from support.spark_sql import SQL_PYTHON, SqlError, SqlSession

from lance_metastore.rest import RestServer
from lance_metastore.rules import versions
from lance_metastore.rules.redaction import looks_secret
from lance_metastore.spark import sql_conf
from lance_metastore.spark.sql import jars_fetched

pytestmark = [
    pytest.mark.timeout(1200),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
    pytest.mark.skipif(
        not SQL_PYTHON.exists(), reason="no .venv-sql: run scripts/setup.sh (Spark 3.5 for SQL)"
    ),
]

TOKEN = "sql-test-token-" + uuid.uuid4().hex
# Secret-looking settings the session carries (never used by a server): SET must hide them all.
PLANTED_SECRETS = {
    "headers.X-Api-Key": "planted-api-key-" + uuid.uuid4().hex[:8],
    "azure_storage_account_key": "planted-azure-" + uuid.uuid4().hex[:8],
    "google_service_account_key": "planted-gcs-" + uuid.uuid4().hex[:8],
}


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
    harness: Harness
    server: RestServer
    audit: AuditTrail
    # the namespace path above the databases: ["hive"] in the Hive 3 layout
    parents: list[str] = field(default_factory=list)

    def calls(self, sql: SqlSession, statement: str) -> tuple[list[tuple[Any, ...]], list[str]]:
        """Run ``statement``; its rows and the REST operations it called."""
        start = len(self.audit.operations)
        rows = sql.sql(statement)
        return rows, self.audit.since(start)

    def db_id(self, db: str) -> list[str]:
        return [*self.parents, db]

    def sql_name(self, db: str, table: str | None = None) -> str:
        return ".".join([self.name, *self.parents, db, *([table] if table else [])])


def _serve(name: str, namespace: LanceNamespace, **options: Any) -> tuple[RestServer, AuditTrail]:
    audit = AuditTrail()
    logger = logging.getLogger(f"tests.spark_sql.audit.{name}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(audit)
    server = RestServer(namespace, audit_logger=logger, **options).start()
    return server, audit


def _s3_storage(endpoint: Any) -> dict[str, str]:
    """What Lance's readers and writers need to reach moto's S3 (given to sql_conf, never
    handed out by the server)."""
    return {
        "aws_endpoint": endpoint.endpoint,
        "aws_region": endpoint.region,
        "aws_access_key_id": endpoint.access_key_id,
        "aws_secret_access_key": endpoint.secret_access_key,
        "allow_http": "true",
    }


@pytest.fixture(scope="module")
def catalogs(
    hive_metastore_uri: str,
    glue_emulator: Any,
    stock_moto: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Catalog]]:
    glue_emulator.reset()
    stock_moto.reset()
    root = tmp_path_factory.mktemp("sql")
    bucket = f"sql-lake-{uuid.uuid4().hex[:8]}"
    stock_moto.client("s3").create_bucket(Bucket=bucket)
    # The server needs the bucket too (DROP TABLE ... PURGE deletes the data there).
    s3_storage = {f"storage.{k}": v for k, v in _s3_storage(stock_moto).items()}
    managed = {"managed_by": "impl"}
    hive3 = HiveHarness(root=root / "hive3", uri=hive_metastore_uri, level=3)
    hive2 = HiveHarness(root=root / "hive2", uri=hive_metastore_uri, level=2)
    stock = GlueHarness(
        root=root / "glue", emulator=stock_moto, catalog_api=False, conditional_updates=False
    )
    emulated = GlueHarness(root=root / "glue_managed", emulator=glue_emulator)
    on_s3 = GlueHarness(
        root=root / "unused", emulator=stock_moto, catalog_api=False, conditional_updates=False
    )
    made: dict[str, Catalog] = {}
    try:
        for name, harness, overrides, parents in (
            ("hive3", hive3, {}, ["hive"]),
            ("hive2", hive2, {}, []),
            ("glue", stock, {}, []),
            ("hive3_managed", hive3, {**managed, "root": str(root / "hive3m")}, ["hive"]),
            ("glue_managed", emulated, managed, []),
            ("glue_s3", on_s3, {"root": f"s3://{bucket}/lake", **s3_storage}, []),
        ):
            namespace = harness.connect(**overrides)
            options = {"auth_token": TOKEN} if name == "hive3" else {}
            server, audit = _serve(name, namespace, **options)
            made[name] = Catalog(name, namespace, harness, server, audit, parents)
        yield made
    finally:
        for catalog in made.values():
            catalog.server.stop()
            catalog.namespace.close()
        hive3.reset()


@pytest.fixture(scope="module")
def sql(
    spark_installed: None,
    catalogs: dict[str, Catalog],
    stock_moto: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[SqlSession]:
    conf: dict[str, str] = {}
    for name, catalog in catalogs.items():
        token = TOKEN if name == "hive3" else None
        storage = _s3_storage(stock_moto) if name == "glue_s3" else None
        conf.update(
            sql_conf(
                catalog.server.url, name, token=token, storage_options=storage, spark_version="3.5"
            )
        )
    # the same server as hive3 without its token: every call must be refused; and settings
    # that only carry planted secrets, for the listing test
    planted = {key.removeprefix("headers."): v for key, v in PLANTED_SECRETS.items()}
    conf.update(
        sql_conf(
            catalogs["hive3"].server.url,
            "hive3_no_token",
            headers={"X-Api-Key": planted.pop("X-Api-Key")},
            storage_options=planted,
            spark_version="3.5",
        )
    )
    log = tmp_path_factory.mktemp("sql-log") / "spark-sql.log"
    with SqlSession(conf, log) as session:
        yield session
        assert session.hangs == 0


@pytest.fixture(scope="module")
def spark4(spark: Any) -> Any:
    """pyspark 4 in this process: our Python data source (lance_metastore.spark.register).

    The session-wide SparkSession of conftest: getOrCreate would hand back that same session,
    and stopping it here would stop it for every later test module."""
    return spark


def fresh_db(catalog: Catalog, sql: SqlSession, prefix: str) -> str:
    db = f"{prefix}_{uuid.uuid4().hex[:8]}"
    _, calls = catalog.calls(sql, f"CREATE NAMESPACE {catalog.sql_name(db)}")
    assert "create_namespace" in calls
    return db


def data_source_options(catalog: Catalog, **overrides: str) -> dict[str, str]:
    return {"impl": catalog.harness.name, **catalog.harness.properties(), **overrides}


def dataset(catalog: Catalog, db: str, table: str, **kwargs: Any) -> lance.LanceDataset:
    return lance.dataset(
        namespace_client=catalog.namespace, table_id=[*catalog.db_id(db), table], **kwargs
    )


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------


def test_jars_come_from_the_machine_wide_cache() -> None:
    assert jars_fetched(spark_version="3.5"), "scripts/setup.sh fetches lance-spark's jars"


def test_set_hides_every_secret_setting(sql: SqlSession) -> None:
    """``SET`` lists the session's settings as Spark shows them (UI, logs, event logs alike):
    every value the project's secret rule calls secret is redacted, the rest stays readable."""
    shown = dict(sql.sql("SET"))
    listing = " ".join(f"{key}={value}" for key, value in shown.items())
    secrets = [TOKEN, *PLANTED_SECRETS.values()]
    assert not [secret for secret in secrets if secret in listing]
    for key in (
        "spark.sql.catalog.hive3.headers.Authorization",
        "spark.sql.catalog.hive3_no_token.headers.X-Api-Key",
        "spark.sql.catalog.hive3_no_token.azure_storage_account_key",
        "spark.sql.catalog.hive3_no_token.google_service_account_key",
        "spark.sql.catalog.glue_s3.aws_access_key_id",
        "spark.sql.catalog.glue_s3.aws_secret_access_key",
    ):
        assert looks_secret(key)
        assert "redacted" in shown[key].lower(), key
    assert shown["spark.sql.catalog.glue_s3.aws_region"] == "us-east-1"
    assert shown["spark.sql.catalog.hive3.uri"].startswith("http://127.0.0.1:")


# --------------------------------------------------------------------------------------------
# The SQL surface
# --------------------------------------------------------------------------------------------


def run_statement_list(catalog: Catalog, sql: SqlSession) -> dict[str, list[str]]:
    """Every statement of docs/spark.md's table on one catalog; the REST calls of each."""
    calls: dict[str, list[str]] = {}

    def step(label: str, statement: str) -> list[tuple[Any, ...]]:
        rows, calls[label] = catalog.calls(sql, statement)
        return rows

    db = fresh_db(catalog, sql, "surface")
    ns = catalog.sql_name(db)
    orders = catalog.sql_name(db, "orders")
    step("SHOW NAMESPACES", f"SHOW NAMESPACES IN {'.'.join([catalog.name, *catalog.parents])}")
    step(
        "CREATE TABLE ... TBLPROPERTIES",
        f"CREATE TABLE {orders} (id BIGINT, customer STRING, amount DOUBLE)"
        " TBLPROPERTIES ('team' = 'sales')",
    )
    # lance-spark 0.4.0 sends no TBLPROPERTIES with declare_table (our server would keep them)
    described = catalog.namespace.describe_table({"id": [*catalog.db_id(db), "orders"]})
    calls["TBLPROPERTIES reach the catalog"] = [str("team" in (described.properties or {}))]
    step(
        "INSERT INTO",
        f"INSERT INTO {orders} VALUES (1, 'ann', 5.0), (2, 'bob', 12.5), (3, 'cy', 30.0),"
        " (4, 'dee', 7.5)",
    )
    first_version = dataset(catalog, db, "orders").version
    before_delete = time.time()
    rows = step("SELECT ... WHERE", f"SELECT id FROM {orders} WHERE amount > 10 ORDER BY id")
    assert rows == [(2,), (3,)]
    step(
        "CTAS",
        f"CREATE TABLE {ns}.customers AS SELECT customer AS name, id % 2 AS tier FROM {orders}",
    )
    rows = step(
        "SELECT join + aggregate",
        f"SELECT c.tier, sum(o.amount) FROM {orders} o JOIN {ns}.customers c"
        " ON o.customer = c.name GROUP BY c.tier ORDER BY c.tier",
    )
    assert rows == [(0, 20.0), (1, 35.0)]
    rows = step("SHOW TABLES", f"SHOW TABLES IN {ns}")
    assert sorted(row[1] for row in rows) == ["customers", "orders"]
    rows = step("DESCRIBE TABLE", f"DESCRIBE TABLE {orders}")
    assert [row[0] for row in rows[:3]] == ["id", "customer", "amount"]
    step("DELETE", f"DELETE FROM {orders} WHERE id = 1")
    step("UPDATE", f"UPDATE {orders} SET amount = amount * 2 WHERE id = 2")
    assert sql.sql(f"SELECT id, amount FROM {orders} ORDER BY id") == [
        (2, 25.0),
        (3, 30.0),
        (4, 7.5),
    ]
    rows = step("VERSION AS OF", f"SELECT count(*) FROM {orders} VERSION AS OF {first_version}")
    assert rows == [(4,)]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(before_delete + 1))
    rows = step("TIMESTAMP AS OF", f"SELECT count(*) FROM {orders} TIMESTAMP AS OF '{stamp}'")
    assert rows == [(4,)]
    sql.sql(
        "CREATE OR REPLACE TEMPORARY VIEW changes AS SELECT * FROM VALUES"
        " (2, 'bob', 99.0, 'upd'), (3, 'cy', 0.0, 'del'), (9, 'eve', 1.0, 'new')"
        " AS t(id, customer, amount, op)"
    )
    step(
        "MERGE INTO",
        f"MERGE INTO {orders} t USING changes s ON t.id = s.id"
        " WHEN MATCHED AND s.op = 'del' THEN DELETE"
        " WHEN MATCHED THEN UPDATE SET t.amount = s.amount"
        " WHEN NOT MATCHED THEN INSERT (id, customer, amount) VALUES (s.id, s.customer, s.amount)",
    )
    assert sql.sql(f"SELECT id, amount FROM {orders} ORDER BY id") == [
        (2, 99.0),
        (4, 7.5),
        (9, 1.0),
    ]
    step("INSERT OVERWRITE", f"INSERT OVERWRITE {ns}.customers SELECT 'zed', 7")
    assert sql.sql(f"SELECT name, tier FROM {ns}.customers") == [("zed", 7)]
    step("OPTIMIZE", f"OPTIMIZE {orders}")
    step("VACUUM", f"VACUUM {orders}")
    step("CREATE INDEX", f"ALTER TABLE {orders} CREATE INDEX orders_id USING btree (id)")
    rows = step("SHOW INDEXES", f"SHOW INDEXES FROM {orders}")
    assert any("orders_id" in str(row) for row in rows)
    sql.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW bonus AS"
        f" SELECT _rowaddr, _fragid, amount / 10 AS bonus FROM {orders}"
    )
    step("ADD COLUMNS ... FROM", f"ALTER TABLE {orders} ADD COLUMNS bonus FROM bonus")
    assert sql.sql(f"SELECT id, bonus FROM {orders} ORDER BY id") == [
        (2, 9.9),
        (4, 0.75),
        (9, 0.1),
    ]
    # what pylance reads matches what SQL wrote
    assert sorted(dataset(catalog, db, "orders").to_table().column("id").to_pylist()) == [2, 4, 9]
    for refused in (
        f"ALTER TABLE {orders} ADD COLUMNS (note STRING)",
        f"ALTER TABLE {orders} RENAME TO {ns}.orders2",
    ):
        with pytest.raises(SqlError):
            sql.sql(refused)
    assert sql.columns(f"SELECT * FROM {orders}") == ["id", "customer", "amount", "bonus"]

    kept = dataset(catalog, db, "customers").uri
    step("DROP TABLE", f"DROP TABLE {ns}.customers")
    with pytest.raises(TableNotFoundError):
        catalog.namespace.table_exists(TableExistsRequest(id=[*catalog.db_id(db), "customers"]))
    assert _exists(kept), "a plain DROP TABLE leaves the data (deregister_table)"
    purged = dataset(catalog, db, "orders").uri
    step("DROP TABLE ... PURGE", f"DROP TABLE {orders} PURGE")
    assert not _exists(purged), "DROP TABLE ... PURGE deletes the data (drop_table)"
    assert sql.sql(f"SHOW TABLES IN {ns}") == []
    return calls


def _exists(uri: str) -> bool:
    if "://" in uri and not uri.startswith("file://"):
        return True  # not checked here: S3 objects are checked by their own test
    return Path(uri.removeprefix("file://")).exists()


@pytest.mark.parametrize("backend", ["hive3", "glue"])
def test_the_whole_statement_list(
    backend: str, catalogs: dict[str, Catalog], sql: SqlSession, capsys: Any
) -> None:
    calls = run_statement_list(catalogs[backend], sql)
    with capsys.disabled():  # the table of docs/spark.md
        print(f"\nREST calls per statement on {backend}:")
        for label, operations in calls.items():
            print(f"| {label} | {', '.join(operations)} |")
    # Spark's DROP TABLE keeps an external table's data: lance-spark tells the two apart
    assert calls["DROP TABLE"] == ["table_exists", "deregister_table"]
    assert calls["DROP TABLE ... PURGE"] == ["table_exists", "drop_table"]
    assert calls["SHOW TABLES"] == ["list_tables"]
    # every other statement only reads the catalog (commits go to storage or, for managed
    # tables, through create_table_version: test_every_sql_write_commits_through_the_catalog)
    catalog_writes = {"create_namespace", "declare_table", "deregister_table", "drop_table"}
    declaring = ("CREATE TABLE", "CTAS", "DROP TABLE")
    unexpected = {
        label: ops
        for label, ops in calls.items()
        if set(ops) & catalog_writes and not label.startswith(declaring)
    }
    assert not unexpected


def test_smoke_on_hive2(catalogs: dict[str, Catalog], sql: SqlSession) -> None:
    catalog = catalogs["hive2"]
    db = fresh_db(catalog, sql, "smoke")
    table = catalog.sql_name(db, "t")
    sql.sql(f"CREATE TABLE {table} AS SELECT id, id * 2 AS v FROM range(100)")
    sql.sql(f"INSERT INTO {table} VALUES (1000, 1)")
    sql.sql(f"DELETE FROM {table} WHERE id < 10")
    assert sql.sql(f"SELECT count(*), max(id) FROM {table}") == [(91, 1000)]
    assert dataset(catalog, db, "t").count_rows() == 91
    sql.sql(f"DROP TABLE {table}")


def test_tables_on_s3_with_storage_options_from_sql_conf(
    catalogs: dict[str, Catalog], sql: SqlSession, stock_moto: Any
) -> None:
    """Tables on moto's S3: Spark's JVM gets its storage options from sql_conf."""
    catalog = catalogs["glue_s3"]
    db = fresh_db(catalog, sql, "s3")
    table = catalog.sql_name(db, "events")
    sql.sql(f"CREATE TABLE {table} AS SELECT id, cast(id AS STRING) AS s FROM range(1000)")
    sql.sql(f"UPDATE {table} SET s = 'x' WHERE id < 10")
    assert sql.sql(f"SELECT count(*) FROM {table} WHERE s = 'x'") == [(10,)]
    described = catalog.namespace.describe_table({"id": [db, "events"]})
    assert described.location.startswith("s3://")
    assert dataset(catalog, db, "events").count_rows() == 1000
    s3 = stock_moto.client("s3")
    prefix = described.location.split("/", 3)[3]
    sql.sql(f"DROP TABLE {table} PURGE")
    assert not s3.list_objects_v2(Bucket=described.location.split("/")[2], Prefix=prefix).get(
        "Contents"
    )


@pytest.mark.parametrize("backend", ["hive3", "glue"])
def test_tables_written_elsewhere_are_read_and_written_by_sql(
    backend: str, catalogs: dict[str, Catalog], sql: SqlSession, spark4: Any
) -> None:
    """pylance (its default file format) and the Python data source write; SQL reads and
    writes; pylance and the data source read what SQL wrote."""
    catalog = catalogs[backend]
    ns = catalog.namespace
    db = f"shared_{uuid.uuid4().hex[:8]}"
    ns.create_namespace(CreateNamespaceRequest(id=catalog.db_id(db)))
    here = catalog.sql_name(db)

    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "city": ["oslo", "rome", "lima"]})
    table_id = [*catalog.db_id(db), "by_pylance"]
    lance.write_dataset(data, namespace_client=ns, table_id=table_id, mode="create")
    rows = sql.sql(f"SELECT city FROM {here}.by_pylance WHERE id >= 2 ORDER BY id")
    assert rows == [("rome",), ("lima",)]
    sql.sql(f"INSERT INTO {here}.by_pylance VALUES (4, 'kyiv')")
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 4

    options = data_source_options(catalog)
    frame = spark4.createDataFrame([(10, "x"), (20, "y")], "n BIGINT, tag STRING")
    path = "$".join([*catalog.db_id(db), "by_data_source"])
    frame.write.format("lance").options(**options).mode("append").save(path)
    assert sql.sql(f"SELECT sum(n) FROM {here}.by_data_source") == [(30,)]
    sql.sql(f"UPDATE {here}.by_data_source SET n = n + 1")
    read = spark4.read.format("lance").options(**options).load(path)
    assert sorted(row.n for row in read.collect()) == [11, 21]

    sql.sql(f"CREATE TABLE {here}.by_sql AS SELECT id * 10 AS v FROM {here}.by_pylance")
    read = spark4.read.format("lance").options(**options).load("$".join([*table_id[:-1], "by_sql"]))
    assert sorted(row.v for row in read.collect()) == [10, 20, 30, 40]
    more = pa.table({"v": pa.array([50], pa.int64())})
    by_sql_id = [*catalog.db_id(db), "by_sql"]
    lance.write_dataset(more, namespace_client=ns, table_id=by_sql_id, mode="append")
    assert sql.sql(f"SELECT max(v) FROM {here}.by_sql") == [(50,)]


# --------------------------------------------------------------------------------------------
# One commit path: catalog-managed tables
# --------------------------------------------------------------------------------------------


def _catalog_version(catalog: Catalog, db: str, table: str) -> int:
    """The latest version the catalog recorded (0: none committed through it yet)."""
    return versions.current_version(catalog.harness.raw_parameters(catalog.db_id(db), table))


@pytest.mark.parametrize("backend", ["hive3_managed", "glue_managed"])
def test_every_sql_write_commits_through_the_catalog(
    backend: str, catalogs: dict[str, Catalog], sql: SqlSession
) -> None:
    """On a managed_by=impl table every SQL write commits through our commit arbiter: the
    catalog's version follows each statement, storage holds no version beside it, and pylance
    by name sees it right after. VACUUM removes old files and keeps that so. (lance-spark
    0.4.0's OPTIMIZE commits around the catalog, which adopts it: the test after this one.)"""
    catalog = catalogs[backend]
    db = fresh_db(catalog, sql, "managed")
    table = catalog.sql_name(db, "t")
    sql.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    described = catalog.namespace.describe_table({"id": [*catalog.db_id(db), "t"]})
    assert described.managed_versioning
    location = described.location
    committed: list[str] = []
    for statement in (
        f"INSERT INTO {table} SELECT id, 'a' FROM range(50)",
        f"INSERT INTO {table} SELECT id, 'b' FROM range(50, 60)",
        f"UPDATE {table} SET v = 'c' WHERE id < 5",
        f"DELETE FROM {table} WHERE id >= 55",
        f"MERGE INTO {table} t USING (SELECT 1 AS id, 'm' AS v) s ON t.id = s.id"
        " WHEN MATCHED THEN UPDATE SET t.v = s.v",
        f"VACUUM {table}",
    ):
        before = _catalog_version(catalog, db, "t")
        _, calls = catalog.calls(sql, statement)
        after = _catalog_version(catalog, db, "t")
        # nothing reached storage around the catalog: its latest version is the catalog's
        assert lance.dataset(location).version == after, (statement, calls)
        assert dataset(catalog, db, "t").version == after
        if after > before:
            assert "create_table_version" in calls, (statement, calls)
            committed.append(statement.split()[0])
    assert dataset(catalog, db, "t").count_rows() == 55
    assert committed == ["INSERT", "INSERT", "UPDATE", "DELETE", "MERGE"]


@pytest.mark.parametrize("backend", ["hive3_managed", "glue_managed"])
def test_two_sql_jobs_and_pylance_write_one_managed_table_at_once(
    backend: str, catalogs: dict[str, Catalog], sql: SqlSession
) -> None:
    catalog = catalogs[backend]
    db = fresh_db(catalog, sql, "race")
    table = catalog.sql_name(db, "t")
    table_id = [*catalog.db_id(db), "t"]
    sql.sql(f"CREATE TABLE {table} (id BIGINT, writer STRING)")
    pylance_rows = 0
    pylance_errors: list[BaseException] = []

    def pylance_writer() -> None:
        nonlocal pylance_rows
        try:
            for round_ in range(3):
                batch = pa.table(
                    {
                        "id": pa.array(range(round_ * 10, round_ * 10 + 10), pa.int64()),
                        "writer": ["pylance"] * 10,
                    }
                )
                lance.write_dataset(
                    batch, namespace_client=catalog.namespace, table_id=table_id, mode="append"
                )
                pylance_rows += 10
        except BaseException as error:  # reported below, in the test's thread
            pylance_errors.append(error)

    thread = threading.Thread(target=pylance_writer)
    thread.start()
    results = sql.concurrently(
        [
            f"INSERT INTO {table} SELECT id, 'sql-a' FROM range(1000)",
            f"INSERT INTO {table} SELECT id, 'sql-b' FROM range(2000)",
        ]
    )
    thread.join(120)
    assert not thread.is_alive() and not pylance_errors
    assert not [result for result in results if isinstance(result, SqlError)], results
    counts = dict(sql.sql(f"SELECT writer, count(*) FROM {table} GROUP BY writer"))
    assert counts == {"sql-a": 1000, "sql-b": 2000, "pylance": pylance_rows}
    assert _catalog_version(catalog, db, "t") == dataset(catalog, db, "t").version


@pytest.mark.parametrize("backend", ["hive3_managed", "glue_managed"])
def test_optimize_around_the_catalog_is_adopted(
    backend: str, catalogs: dict[str, Catalog], sql: SqlSession
) -> None:
    """lance-spark 0.4.0's OPTIMIZE commits its compaction straight to storage, around the
    catalog. The catalog adopts it: a SQL INSERT right after it (no read in between) and a
    pylance append rebase onto it instead of reusing a version storage holds, and pylance
    opening the table by name right after the next OPTIMIZE sees it (reads answer storage's
    versions; the catalog adopts them at the next commit). No row or version is lost."""
    catalog = catalogs[backend]
    db = fresh_db(catalog, sql, "optimize")
    table = catalog.sql_name(db, "t")
    table_id = [*catalog.db_id(db), "t"]
    sql.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    sql.sql(f"INSERT INTO {table} SELECT id, 'a' FROM range(10)")
    sql.sql(f"INSERT INTO {table} SELECT id, 'b' FROM range(10, 20)")
    location = dataset(catalog, db, "t").uri
    before = _catalog_version(catalog, db, "t")
    sql.sql(f"OPTIMIZE {table}")
    compacted = lance.dataset(location).version
    assert compacted > before == _catalog_version(catalog, db, "t"), "OPTIMIZE went around"

    _, calls = catalog.calls(sql, f"INSERT INTO {table} SELECT id, 'c' FROM range(20, 30)")
    assert "create_table_version" in calls
    lance.write_dataset(
        pa.table({"id": pa.array([30], pa.int64()), "v": ["pylance"]}),
        namespace_client=catalog.namespace,
        table_id=table_id,
        mode="append",
    )
    latest = dataset(catalog, db, "t")
    assert latest.version == compacted + 2 == _catalog_version(catalog, db, "t")
    assert lance.dataset(location).version == latest.version
    assert sorted(latest.to_table()["id"].to_pylist()) == list(range(31))
    assert sql.sql(f"SELECT count(*) FROM {table}") == [(31,)]
    assert lance.dataset(location, version=compacted).count_rows() == 20

    sql.sql(f"OPTIMIZE {table}")
    again = lance.dataset(location).version
    assert again > latest.version
    assert dataset(catalog, db, "t").version == again  # by name, right after
    # reads never write the catalog: the next commit adopts storage's versions, then lands
    assert _catalog_version(catalog, db, "t") == latest.version
    sql.sql(f"INSERT INTO {table} SELECT id, 'd' FROM range(31, 32)")
    assert _catalog_version(catalog, db, "t") == again + 1 == lance.dataset(location).version
    assert sorted(dataset(catalog, db, "t").to_table()["id"].to_pylist()) == list(range(32))


# --------------------------------------------------------------------------------------------
# Auth, errors
# --------------------------------------------------------------------------------------------


def test_server_token_is_required(catalogs: dict[str, Catalog], sql: SqlSession) -> None:
    catalog = catalogs["hive3"]
    start = len(catalog.audit.operations)
    with pytest.raises(SqlError):
        sql.sql("SHOW NAMESPACES IN hive3_no_token")
    assert catalog.audit.since(start), "the refused call reached the server and was audited"


def test_missing_table_and_namespace_errors(catalogs: dict[str, Catalog], sql: SqlSession) -> None:
    with pytest.raises(SqlError) as missing:
        sql.sql("SELECT * FROM hive3.hive.no_such_db.no_such_table")
    assert "no_such_table" in missing.value.message
    catalog = catalogs["glue"]
    db = fresh_db(catalog, sql, "dup")
    sql.sql(f"CREATE TABLE {catalog.sql_name(db, 't')} (a INT)")
    with pytest.raises(SqlError) as duplicate:
        sql.sql(f"CREATE TABLE {catalog.sql_name(db, 't')} (a INT)")
    assert "already exists" in duplicate.value.message.lower()


# --------------------------------------------------------------------------------------------
# Never a hang
# --------------------------------------------------------------------------------------------

BIG_CTAS_ROWS = 2_000_000
BIG_CTAS_TIMEOUT_SECONDS = 240


@pytest.mark.slow
def test_big_ctas_five_times_in_a_row(catalogs: dict[str, Catalog], sql: SqlSession) -> None:
    """lance-spark 0.0.14's writer deadlocked now and then; 0.4.0's must finish every time.
    Each CTAS runs under a deadline that fails the test (and kills the session) on a hang."""
    catalog = catalogs["hive3"]
    db = fresh_db(catalog, sql, "big")
    for attempt in range(5):
        table = catalog.sql_name(db, f"big_{attempt}")
        started = time.monotonic()
        sql.sql(
            f"CREATE TABLE {table} AS SELECT id, id * 3 AS v, cast(id AS STRING) AS s"
            f" FROM range({BIG_CTAS_ROWS})",
            timeout=BIG_CTAS_TIMEOUT_SECONDS,
        )
        elapsed = time.monotonic() - started
        assert sql.sql(f"SELECT count(*) FROM {table}") == [(BIG_CTAS_ROWS,)]
        print(f"CTAS {attempt + 1}/5 of {BIG_CTAS_ROWS} rows: {elapsed:.1f} s")
        sql.sql(f"DROP TABLE {table} PURGE")


# --------------------------------------------------------------------------------------------
# sql_conf
# --------------------------------------------------------------------------------------------


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


def test_sql_conf_redaction_follows_the_secret_rule() -> None:
    """The pattern Spark gets is the project's rule: it hides exactly the names the rule calls
    secret, among the names sql_conf sets."""
    conf = sql_conf(
        "http://127.0.0.1:2333",
        token="t0k",
        headers={"X-Api-Key": "k", "X-Trace": "on"},
        storage_options={
            "aws_access_key_id": "a",
            "aws_secret_access_key": "s",
            "aws_session_token": "t",
            "azure_storage_account_key": "z",
            "google_service_account_key": "g",
            "aws_region": "us-east-1",
            "aws_endpoint": "http://127.0.0.1:1",
            "allow_http": "true",
        },
        spark_version="3.5",
    )
    pattern = re.compile(conf["spark.redaction.regex"])
    catalog_keys = [key for key in conf if key.startswith("spark.sql.catalog.lance.")]
    for key in catalog_keys:
        assert bool(pattern.search(key)) == looks_secret(key), key
    hidden = sorted(key.rsplit(".", 1)[1] for key in catalog_keys if pattern.search(key))
    assert hidden == [
        "Authorization",
        "X-Api-Key",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "azure_storage_account_key",
        "google_service_account_key",
    ]


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
