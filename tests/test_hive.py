"""Hive-specific behaviour of Hive2Namespace and Hive3Namespace.

- Hive 3 catalogs, against real Hive Metastores 3.1 and 4.0 (started once per session, see
  conftest.py), or against the one named by ``LANCE_METASTORE_TEST_HMS3_URI``
  (thrift://host:port); call counts are taken at our client (``thrift_calls``);
- configuration, database property mapping, the connection pool, lost connections, fail-over,
  server-side filtering and catalog columns, against the real Hive Metastore 2.3 of the
  session (``hive_metastore_uri``) and, for restarts, the spare one (``spare_metastore``).

Raw Thrift calls go through :class:`RawClient`, a class-based context manager: Thrift's
exceptions are immutable, and a ``@contextmanager`` generator fails re-raising them.
"""

from __future__ import annotations

import collections
import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlparse

import lance
import pyarrow as pa
import pytest
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from pymetastore.hive_metastore import ThriftHiveMetastore, ttypes
from support.connections import our_connections_to, port_of
from support.harness import foreign_hive_table
from support.hive_locks import exclusive_table_lock
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from lance_metastore import Hive2Namespace, Hive3Namespace
from lance_metastore.hive import pool as _hms_pool

HMS3_URI_ENV = "LANCE_METASTORE_TEST_HMS3_URI"
DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})
CATALOG = "sales_cat"
CATALOG_PROPS = {"catalog.description": "Sales data", "catalog.location-uri": "/lake/sales_cat"}


def code_of(call, *args, **kwargs) -> ErrorCode:
    with pytest.raises(LanceNamespaceError) as caught:
        call(*args, **kwargs)
    return caught.value.code


def unique(prefix: str = "db") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


class RawClient:
    """``with RawClient(uri) as client``: pymetastore's generated client on the first URI."""

    def __init__(self, uri: str, timeout: float = 30.0) -> None:
        first = urlparse(uri.split(",")[0].strip())
        sock = TSocket.TSocket(first.hostname, first.port)
        sock.setTimeout(int(timeout * 1000))
        self._transport = TTransport.TBufferedTransport(sock)

    def __enter__(self) -> ThriftHiveMetastore.Client:
        self._transport.open()
        return ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(self._transport))

    def __exit__(self, *exc: object) -> None:
        self._transport.close()


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def foreign_table(db: str, name: str, location: str, table_type: str, catalog=None):
    return foreign_hive_table(db, name, location, table_type, catalog, owner="someone")


class _CountingClient:
    """Counts the Thrift calls made through one pooled connection."""

    def __init__(self, client: Any, counts: collections.Counter[str]) -> None:
        self._client = client
        self._counts = counts

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name.startswith("_") or not callable(attribute):
            return attribute

        def call(*args: Any) -> Any:
            self._counts[name] += 1
            return attribute(*args)

        return call


@pytest.fixture
def thrift_calls(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Counts the pool's Connection objects and the Thrift calls made through them."""
    counts: collections.Counter[str] = collections.Counter()
    created: list[Any] = []
    original = _hms_pool.Connection

    class CountingConnection(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            created.append(self)
            self.client = _CountingClient(self.client, counts)

    monkeypatch.setattr(_hms_pool, "Connection", CountingConnection)
    return SimpleNamespace(counts=counts, created=created)


# =============================================================================================
# Hive 3 catalogs: real Hive Metastores 3.1 and 4.0, or the one named by the env var
# =============================================================================================


HMS3_SERVERS = {"3.1": "hms31_uri", "4": "hms4_uri"}


# The parameters name the fixtures, so the tests get their markers (hms31, hms4, jvm).
@pytest.fixture(scope="module", params=list(HMS3_SERVERS.values()), ids=list(HMS3_SERVERS))
def hms3(request: pytest.FixtureRequest) -> SimpleNamespace:
    if os.environ.get(HMS3_URI_ENV):
        if request.param != "hms31_uri":
            pytest.skip(f"{HMS3_URI_ENV} names the one metastore to test")
        return SimpleNamespace(uri=os.environ[HMS3_URI_ENV])
    return SimpleNamespace(uri=request.getfixturevalue(request.param))


def _wipe_catalog(uri: str, catalog: str) -> None:
    with RawClient(uri) as client:
        if catalog not in client.get_catalogs().names:
            return
        for database in client.get_databases(f"@{catalog}#"):
            client.drop_database(f"@{catalog}#{database}", False, True)
        client.drop_catalog(ttypes.DropCatalogRequest(catalog))


@pytest.fixture
def ns3(hms3: SimpleNamespace, tmp_path: Path) -> Iterator[Hive3Namespace]:
    _wipe_catalog(hms3.uri, CATALOG)
    ns = Hive3Namespace(uri=hms3.uri, root=str(tmp_path / "lake"))
    yield ns
    ns.close()
    _wipe_catalog(hms3.uri, CATALOG)


def make_catalog(ns: Hive3Namespace, tmp_path: Path) -> dict[str, str]:
    props = {**CATALOG_PROPS, "catalog.location-uri": str(tmp_path / "sales_cat")}
    ns.create_namespace({"id": [CATALOG], "properties": props})
    return props


def test_catalog_create_describe_list_drop(ns3, tmp_path):
    props = {**CATALOG_PROPS, "catalog.location-uri": str(tmp_path / "sales_cat")}
    created = ns3.create_namespace({"id": [CATALOG], "properties": props})
    assert created.properties == props
    assert ns3.describe_namespace({"id": [CATALOG]}).properties == props
    ns3.namespace_exists({"id": [CATALOG]})
    roots = ns3.list_namespaces({"id": []}).namespaces
    assert "hive" in roots and CATALOG in roots
    # Hive 3 gives every new catalog a database called "default".
    assert ns3.list_namespaces({"id": [CATALOG]}).namespaces == ["default"]
    assert ns3.list_tables({"id": [CATALOG]}).tables == []  # catalogs hold no tables

    assert code_of(ns3.create_namespace, {"id": [CATALOG]}) == ErrorCode.NAMESPACE_ALREADY_EXISTS
    kept = ns3.create_namespace({"id": [CATALOG], "mode": "exist_ok", "properties": {}})
    assert kept.properties == props
    replaced = {**props, "catalog.description": "Renamed"}
    ns3.create_namespace({"id": [CATALOG], "mode": "overwrite", "properties": replaced})
    assert ns3.describe_namespace({"id": [CATALOG]}).properties == replaced
    bad = {"id": ["other_cat"], "properties": {"owner": "x"}}
    assert code_of(ns3.create_namespace, bad) == ErrorCode.INVALID_INPUT

    # A catalog holding only its empty "default" database is empty: RESTRICT drops it.
    ns3.drop_namespace({"id": [CATALOG]})
    assert code_of(ns3.describe_namespace, {"id": [CATALOG]}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(ns3.drop_namespace, {"id": [CATALOG]}) == ErrorCode.NAMESPACE_NOT_FOUND
    ns3.drop_namespace({"id": [CATALOG], "mode": "skip"})
    assert CATALOG not in ns3.list_namespaces({"id": []}).namespaces


def test_catalog_default_location_is_under_root(ns3, tmp_path):
    ns3.create_namespace({"id": [CATALOG]})
    described = ns3.describe_namespace({"id": [CATALOG]}).properties
    assert described["catalog.location-uri"].endswith(str(tmp_path / "lake" / CATALOG))


def test_databases_in_a_catalog(ns3, hms3, tmp_path):
    make_catalog(ns3, tmp_path)
    props = {"database.description": "orders", "team": "sales"}
    created = ns3.create_namespace({"id": [CATALOG, "db"], "properties": props})
    assert created.properties["team"] == "sales"
    described = ns3.describe_namespace({"id": [CATALOG, "DB"]}).properties
    assert described["database.description"] == "orders" and described["team"] == "sales"
    assert ns3.list_namespaces({"id": [CATALOG]}).namespaces == ["db", "default"]
    assert ns3.list_namespaces({"id": [CATALOG, "db"]}).namespaces == []
    again = {"id": [CATALOG, "db"]}
    assert code_of(ns3.create_namespace, again) == ErrorCode.NAMESPACE_ALREADY_EXISTS
    missing = {"id": ["no_cat", "db"]}
    assert code_of(ns3.create_namespace, missing) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(ns3.list_namespaces, {"id": ["no_cat"]}) == ErrorCode.NAMESPACE_NOT_FOUND
    too_deep = {"id": [CATALOG, "db", "x"]}
    assert code_of(ns3.create_namespace, too_deep) == ErrorCode.INVALID_INPUT
    with RawClient(hms3.uri) as client:
        raw = client.get_database(f"@{CATALOG}#db")
    assert (raw.catalogName, raw.description, raw.parameters) == (
        CATALOG,
        "orders",
        props_of(props),
    )

    # Isolation: the database of sales_cat does not exist in catalog hive.
    with RawClient(hms3.uri) as client:
        hive_has_db = "db" in client.get_all_databases()
    if not hive_has_db:
        assert code_of(ns3.describe_namespace, {"id": ["hive", "db"]}) == 1
        assert "db" not in ns3.list_namespaces({"id": ["hive"]}).namespaces
    ns3.drop_namespace({"id": [CATALOG, "db"]})
    assert ns3.list_namespaces({"id": [CATALOG]}).namespaces == ["default"]


def props_of(props: dict[str, str]) -> dict[str, str]:
    """The Database.parameters our mapping stores for ``props``."""
    return {k: v for k, v in props.items() if not k.startswith("database.")}


def test_tables_in_a_catalog_with_pylance(ns3, hms3, tmp_path):
    make_catalog(ns3, tmp_path)
    ns3.create_namespace({"id": [CATALOG, "db"]})
    table_id = [CATALOG, "db", "t"]
    lance.write_dataset(DATA, namespace_client=ns3, table_id=table_id, mode="create")
    lance.write_dataset(DATA, namespace_client=ns3, table_id=table_id, mode="append")
    assert lance.dataset(namespace_client=ns3, table_id=table_id).count_rows() == 6
    assert ns3.list_tables({"id": [CATALOG, "db"]}).tables == ["t"]
    described = ns3.describe_table({"id": table_id})
    assert described.namespace == [CATALOG, "db"]
    assert described.location == str(tmp_path / "lake" / CATALOG / "db" / "t.lance")
    ns3.table_exists({"id": table_id})
    with RawClient(hms3.uri) as client:
        request = ttypes.GetTableRequest(dbName="db", tblName="t", catName=CATALOG)
        raw = client.get_table_req(request).table
    assert (raw.catName, raw.dbName, raw.tableType) == (CATALOG, "db", "EXTERNAL_TABLE")
    assert raw.parameters["table_type"] == "lance"
    assert raw.sd.cols == []  # pylance commits to storage; describing wrote nothing
    ns3.sync_table_columns(table_id)
    with RawClient(hms3.uri) as client:
        raw = client.get_table_req(request).table  # HMS 4 has no get_table
    assert [(c.name, c.type) for c in raw.sd.cols] == [("id", "bigint"), ("name", "string")]

    # A non-Lance table in the same database is neither listed nor described.
    with RawClient(hms3.uri) as client:
        client.create_table(
            foreign_table("db", "ice", str(tmp_path / "ice"), "ICEBERG", catalog=CATALOG)
        )
    assert ns3.list_tables({"id": [CATALOG, "db"]}).tables == ["t"]
    assert code_of(ns3.describe_table, {"id": [CATALOG, "db", "ice"]}) == 13

    # Catalog isolation: the same database name in catalog hive holds other tables.
    with RawClient(hms3.uri) as client:
        hive_has_db = "db" in client.get_all_databases()
    if not hive_has_db:
        assert code_of(ns3.describe_table, {"id": ["hive", "db", "t"]}) == 4
        ns3.create_namespace({"id": ["hive", "db"]})
        try:
            assert ns3.list_tables({"id": ["hive", "db"]}).tables == []
            assert code_of(ns3.describe_table, {"id": ["hive", "db", "t"]}) == 4
            ns3.declare_table({"id": ["hive", "db", "t"]})
            assert ns3.describe_table({"id": ["hive", "db", "t"]}).location != described.location
            assert lance.dataset(namespace_client=ns3, table_id=table_id).count_rows() == 6
        finally:
            ns3.drop_namespace({"id": ["hive", "db"], "behavior": "cascade"})

    deregistered = ns3.deregister_table({"id": table_id})
    assert deregistered.location == described.location
    assert lance.dataset(described.location).count_rows() == 6


def test_listing_a_catalog_database_is_one_filtered_call(ns3, hms3, thrift_calls, tmp_path):
    make_catalog(ns3, tmp_path)
    ns3.create_namespace({"id": [CATALOG, "db"]})
    for index in range(5):
        ns3.declare_table({"id": [CATALOG, "db", f"t{index}"]})
    with RawClient(hms3.uri) as client:
        for index in range(5):
            table = foreign_table("db", f"x{index}", f"/x{index}", "ICEBERG", CATALOG)
            client.create_table(table)
    thrift_calls.counts.clear()
    assert ns3.list_tables({"id": [CATALOG, "db"]}).tables == [f"t{i}" for i in range(5)]
    assert thrift_calls.counts["get_table_names_by_filter"] == 1
    assert thrift_calls.counts["get_table_req"] == 0
    assert thrift_calls.counts["get_all_tables"] == 0


def test_drop_catalog_restrict_and_cascade(ns3, hms3, tmp_path):
    make_catalog(ns3, tmp_path)
    ns3.create_namespace({"id": [CATALOG, "db"]})
    table_id = [CATALOG, "db", "t"]
    lance.write_dataset(DATA, namespace_client=ns3, table_id=table_id, mode="create")
    location = ns3.describe_table({"id": table_id}).location

    assert code_of(ns3.drop_namespace, {"id": [CATALOG]}) == ErrorCode.NAMESPACE_NOT_EMPTY
    assert code_of(ns3.drop_namespace, {"id": [CATALOG, "db"]}) == 3
    # The default database with a table makes the catalog non-empty as well.
    ns3.declare_table({"id": [CATALOG, "default", "u"]})
    ns3.drop_namespace({"id": [CATALOG, "db"], "behavior": "cascade"})
    assert code_of(ns3.drop_namespace, {"id": [CATALOG]}) == ErrorCode.NAMESPACE_NOT_EMPTY
    ns3.create_namespace({"id": [CATALOG, "db"]})
    ns3.register_table({"id": table_id, "location": location})

    ns3.drop_namespace({"id": [CATALOG], "behavior": "cascade"})
    assert code_of(ns3.describe_namespace, {"id": [CATALOG]}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(ns3.describe_table, {"id": table_id}) == ErrorCode.TABLE_NOT_FOUND
    with RawClient(hms3.uri) as client:
        assert CATALOG not in client.get_catalogs().names
    assert lance.dataset(location).count_rows() == 3  # deregistered, never deleted


def test_managed_commits_on_real_metastores(ns3, hms3, thrift_calls, tmp_path):
    """HMS 4: one conditional alter_table_req per commit, refused by the server when the table
    changed; HMS 3.1 (no alter_table_req): the lock path. Owner and creation time are kept."""
    make_catalog(ns3, tmp_path)
    ns3.create_namespace({"id": [CATALOG, "db"]})
    table_id = [CATALOG, "db", "t"]
    ns3.declare_table({"id": table_id, "properties": {"managed_by": "impl"}})
    lance.write_dataset(DATA, namespace_client=ns3, table_id=table_id, mode="append")
    request = ttypes.GetTableRequest(dbName="db", tblName="t", catName=CATALOG)
    with RawClient(hms3.uri) as client:
        before = client.get_table_req(request).table
    thrift_calls.counts.clear()
    for _ in range(3):
        lance.write_dataset(DATA, namespace_client=ns3, table_id=table_id, mode="append")
    counts = thrift_calls.counts
    with RawClient(hms3.uri) as client:
        after = client.get_table_req(request).table
    assert lance.dataset(namespace_client=ns3, table_id=table_id).count_rows() == 12
    versions = [v.version for v in ns3.list_table_versions({"id": table_id}).versions]
    assert versions == [1, 2, 3, 4]
    assert (after.owner, after.createTime) == (before.owner, before.createTime)
    assert "numFiles" not in after.parameters  # the metastore gathered no statistics
    if counts["lock"]:  # HMS 3.1: lock, read, alter, unlock per commit
        assert counts["lock"] == counts["send_unlock"] == 3 and counts["alter_table_req"] <= 1
    else:  # HMS 4: one conditional call per commit, no lock
        assert counts["alter_table_req"] == 3 and counts["unlock"] == 0

        # The real server refuses an alter whose expected revision is stale.
        stale = after.__class__(**vars(after))
        stale.parameters = {**after.parameters, "version": "99"}
        context = ttypes.EnvironmentContext(
            {"expected_parameter_key": "lance.catalog_revision", "expected_parameter_value": "0"}
        )
        alter = ttypes.AlterTableRequest(
            catName=CATALOG, dbName="db", tableName="t", table=stale, environmentContext=context
        )
        with RawClient(hms3.uri) as client, pytest.raises(ttypes.MetaException):
            client.alter_table_req(alter)
        assert ns3.describe_table({"id": table_id}).properties["version"] == "4"


def test_default_catalog_cannot_be_dropped(ns3, hms3):
    keep = unique("keep")
    ns3.create_namespace({"id": ["hive", keep]})
    try:
        for behavior in ("restrict", "cascade"):
            request = {"id": ["hive"], "behavior": behavior}
            assert code_of(ns3.drop_namespace, request) in (ErrorCode.INVALID_INPUT, 3)
        ns3.namespace_exists({"id": ["hive", keep]})  # nothing was dropped on the way
    finally:
        ns3.drop_namespace({"id": ["hive", keep]})


def test_catalog_operations_on_hive2_metastore(hive_metastore_uri, tmp_path):
    ns = Hive3Namespace(uri=hive_metastore_uri, root=str(tmp_path / "lake"))
    try:
        request = {"id": [CATALOG], "properties": CATALOG_PROPS}
        assert code_of(ns.create_namespace, request) == ErrorCode.UNSUPPORTED
        assert ns.list_namespaces({"id": []}).namespaces == ["hive"]
        assert code_of(ns.describe_namespace, {"id": [CATALOG]}) == 1
        assert code_of(ns.create_namespace, {"id": [CATALOG, "db"]}) == 1
        assert code_of(ns.drop_namespace, {"id": ["hive"]}) in (0, 3, 13)
    finally:
        ns.close()


# =============================================================================================
# Configuration
# =============================================================================================


@pytest.mark.parametrize(
    "props",
    [
        {},
        {"uri": ""},
        {"uri": "http://x"},
        {"uri": "thrift://host:notaport"},
        {"uri": "thrift://h:9083", "client.pool-size": "0"},
        {"uri": "thrift://h:9083", "client.pool-size": "abc"},
        {"uri": "thrift://h:9083", "client.socket-timeout-sec": "-1"},
        {"uri": "thrift://h:9083", "client.pool_size": "3"},
        {"uri": "thrift://h:9083", "bogus": "1"},
    ],
)
@pytest.mark.parametrize("cls", [Hive2Namespace, Hive3Namespace])
def test_invalid_configuration(cls, props):
    assert code_of(cls, **props) == ErrorCode.INVALID_INPUT


def test_identity_and_repr_connect_nothing(tmp_path):
    uri = f"thrift://127.0.0.1:{dead_port()},thrift://other:9083"
    ns = Hive2Namespace(uri=uri, root=str(tmp_path), **{"client.pool-size": "2"})
    assert ns.namespace_id() == (f"Hive2Namespace {{ uri: {uri!r}, root: {str(tmp_path)!r} }}")
    assert repr(ns).startswith("Hive2Namespace(") and "uri=" in repr(ns)
    assert "***" not in repr(ns)  # nothing here is secret
    assert ns._pool is None  # construction opens no connection
    ns3 = Hive3Namespace(uri="thrift://h:1")
    assert ns3.namespace_id() == "Hive3Namespace { uri: 'thrift://h:1' }"


# =============================================================================================
# Database property mapping (real HMS 2.3)
# =============================================================================================


@pytest.fixture
def ns2(hive_metastore_uri: str, tmp_path: Path) -> Iterator[Hive2Namespace]:
    ns = Hive2Namespace(uri=hive_metastore_uri, root=str(tmp_path / "lake"))
    created: list[str] = []
    ns.created = created  # type: ignore[attr-defined]
    yield ns
    ns.close()
    with RawClient(hive_metastore_uri) as client:
        existing = set(client.get_all_databases())
        for name in created:
            if name in existing:
                client.drop_database(name, False, True)


def new_db(ns: Hive2Namespace, props: dict[str, str] | None = None) -> str:
    name = unique()
    ns.created.append(name)  # type: ignore[attr-defined]
    ns.create_namespace({"id": [name], "properties": props or {}})
    return name


def test_database_property_mapping(ns2, hive_metastore_uri, tmp_path):
    location = tmp_path / "dbs" / "orders"
    props = {
        "database.description": "Orders",
        "database.location-uri": str(location),
        "database.owner": "alice",
        "database.owner-type": "role",
        "team": "sales",
    }
    name = new_db(ns2, props)
    with RawClient(hive_metastore_uri) as client:
        raw = client.get_database(name)
    assert raw.description == "Orders"
    assert raw.locationUri.endswith(str(location)) and raw.locationUri.startswith("file:")
    assert (raw.ownerName, raw.ownerType) == ("alice", ttypes.PrincipalType.ROLE)
    assert raw.parameters == {"team": "sales"}
    described = ns2.describe_namespace({"id": [name]}).properties
    assert described == {**props, "database.owner-type": "ROLE"}

    plain = new_db(ns2, {"k": "v"})
    described = ns2.describe_namespace({"id": [plain]}).properties
    assert described["k"] == "v" and described["database.owner-type"] == "USER"
    assert described["database.owner"]  # the client user
    assert "database.location-uri" in described  # HMS chose one

    ns2.create_namespace({"id": [name], "mode": "overwrite", "properties": {"team": "ops"}})
    with RawClient(hive_metastore_uri) as client:
        raw = client.get_database(name)
    assert raw.parameters == {"team": "ops"}
    assert raw.locationUri.endswith(str(location))  # a location is kept

    for owner_type in ("nobody", ""):
        bad = {"id": [unique()], "properties": {"database.owner-type": owner_type}}
        assert code_of(ns2.create_namespace, bad) == ErrorCode.INVALID_INPUT
        assert code_of(ns2.describe_namespace, {"id": bad["id"]}) == 1


# =============================================================================================
# The connection pool
# =============================================================================================


def test_pool_shared_by_eight_threads(ns2, hive_metastore_uri):
    db = new_db(ns2)
    port = port_of(hive_metastore_uri)
    counted = our_connections_to(port)
    baseline = None if counted is None else counted - ns2.pool.open_connections
    errors: list[BaseException] = []
    operations = collections.Counter()
    barrier = threading.Barrier(8)

    def work(worker: int) -> None:
        barrier.wait()
        try:
            for index in range(5):  # 5 tables x 5 operations = 25 per thread, 200 in all
                table_id = [db, f"t_{worker}_{index}"]
                ns2.declare_table({"id": table_id})
                ns2.describe_table({"id": table_id})
                ns2.table_exists({"id": table_id})
                if index % 2:
                    ns2.list_tables({"id": [db]})
                else:
                    ns2.describe_namespace({"id": [db]})
                ns2.deregister_table({"id": table_id})
                operations[worker] += 5
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors[:3]
    assert sum(operations.values()) == 200
    assert ns2.list_tables({"id": [db]}).tables == []
    assert 1 <= ns2.pool.open_connections <= 3
    if baseline is not None:
        # Counted by the kernel: what the pool says is what is open, and no more.
        assert our_connections_to(port) - baseline == ns2.pool.open_connections
    ns2.close()
    assert ns2.pool.open_connections == 0
    if baseline is not None:
        assert our_connections_to(port) == baseline


def test_connections_are_reused(thrift_calls, hive_metastore_uri, tmp_path):
    ns = Hive2Namespace(uri=hive_metastore_uri, root=str(tmp_path))
    try:
        db = unique()
        ns.create_namespace({"id": [db]})
        for index in range(10):
            ns.declare_table({"id": [db, f"t{index}"]})
            ns.describe_table({"id": [db, f"t{index}"]})
        ns.list_tables({"id": [db]})
        ns.drop_namespace({"id": [db], "behavior": "cascade"})
        assert len(thrift_calls.created) == 1
        assert ns.pool.open_connections == 1
        assert sum(thrift_calls.counts.values()) >= 25  # all through that one connection
    finally:
        ns.close()


def _table_locks(uri: str, db: str, name: str) -> list[Any]:
    with RawClient(uri) as client:
        locks = client.show_locks(ttypes.ShowLocksRequest()).locks or []
    return [lock for lock in locks if (lock.dbname, lock.tablename) == (db, name)]


def test_a_managed_commit_on_hms2_is_lock_read_alter_unlock(
    thrift_calls, hive_metastore_uri, tmp_path
):
    """Sequential commits on HMS 2.3: the lock is asked for before the commit's one read of
    the table (Lance's append also reads it in describe_table and list_table_versions), and
    its release is sent without waiting; the next call on the connection reads that reply,
    and the lock is gone."""
    ns = Hive2Namespace(uri=hive_metastore_uri, root=str(tmp_path), managed_by="impl")
    try:
        db = unique()
        ns.create_namespace({"id": [db]})
        table_id = [db, "t"]
        lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")
        lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="append")
        for _ in range(2):
            thrift_calls.counts.clear()
            lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="append")
            assert dict(thrift_calls.counts) in (
                {
                    "get_table_req": 3,
                    "lock": 1,
                    "alter_table_with_environment_context": 1,
                    "send_unlock": 1,
                },
                # the previous commit's release, read by this append's first call
                {
                    "recv_unlock": 1,
                    "get_table_req": 3,
                    "lock": 1,
                    "alter_table_with_environment_context": 1,
                    "send_unlock": 1,
                },
            )
        thrift_calls.counts.clear()
        assert [v.version for v in ns.list_table_versions({"id": table_id}).versions] == [
            1,
            2,
            3,
            4,
        ]
        assert thrift_calls.counts["recv_unlock"] == 1
        assert _table_locks(hive_metastore_uri, db, "t") == []
        ns.drop_namespace({"id": [db], "behavior": "cascade"})
    finally:
        ns.close()


def test_a_commit_waits_for_a_lock_another_client_holds(thrift_calls, hive_metastore_uri, tmp_path):
    """A commit whose early lock request finds the table locked reads the table, waits for
    that lock (check_lock, reading between polls), and lands once it is released."""
    ns = Hive2Namespace(uri=hive_metastore_uri, root=str(tmp_path), managed_by="impl")
    try:
        db = unique()
        ns.create_namespace({"id": [db]})
        table_id = [db, "t"]
        lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")
        lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="append")
        request = exclusive_table_lock(db, "t")
        errors: list[BaseException] = []

        def append() -> None:
            try:
                lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="append")
            except BaseException as error:
                errors.append(error)

        # The append's release was sent without waiting; the next call reads its reply, after
        # which the metastore has released the table for certain.
        ns.describe_table({"id": table_id})
        with RawClient(hive_metastore_uri) as client:
            held = client.lock(request)
            assert held.state == ttypes.LockState.ACQUIRED
            thrift_calls.counts.clear()
            writer = threading.Thread(target=append)
            writer.start()
            time.sleep(1.0)
            assert writer.is_alive() and thrift_calls.counts["check_lock"] >= 1
            client.unlock(ttypes.UnlockRequest(lockid=held.lockid))
            writer.join(30)
        assert not writer.is_alive() and errors == []
        assert thrift_calls.counts["lock"] == 1  # the early request, granted after the wait
        assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 3 * len(DATA)
        assert _table_locks(hive_metastore_uri, db, "t") == []
        ns.drop_namespace({"id": [db], "behavior": "cascade"})
    finally:
        ns.close()


def test_pooled_sockets_closed_under_the_pool(ns2):
    db = new_db(ns2)
    pool = ns2.pool
    with contextlib.ExitStack() as stack:  # fill the pool: three idle connections
        for _ in range(3):
            stack.enter_context(pool.connection())
    assert pool.open_connections == 3
    for connection in list(pool._idle.queue):
        connection.transport.close()  # broken from under the pool
    ns2.describe_namespace({"id": [db]})  # idempotent: retried on a fresh connection
    ns2.declare_table({"id": [db, "t"]})  # not retried, but never sent on a dead connection
    assert ns2.describe_table({"id": [db, "t"]}).location
    assert pool.open_connections <= 3


# =============================================================================================
# Lost connections, server down, fail-over (the spare metastore of conftest.py)
# =============================================================================================


def test_metastore_restart_and_outage(spare_metastore, tmp_path):
    props = {"client.socket-timeout-sec": "5", "client.pool-size": "3"}
    ns = Hive2Namespace(uri=spare_metastore.uri, root=str(tmp_path), **props)
    try:
        db = unique()
        ns.create_namespace({"id": [db]})
        with contextlib.ExitStack() as stack:
            for _ in range(3):
                stack.enter_context(ns.pool.connection())
        assert ns.pool.open_connections == 3

        # Restart: every pooled connection dies; calls carry on transparently.
        spare_metastore.restart()
        assert ns.describe_namespace({"id": [db]}).properties is not None
        ns.declare_table({"id": [db, "after_restart"]})
        assert ns.list_tables({"id": [db]}).tables == ["after_restart"]
        assert ns.pool.open_connections <= 3

        # Down: calls fail with ServiceUnavailable, quickly (well within the socket timeout).
        spare_metastore.stop()
        for call, request in [
            (ns.describe_namespace, {"id": [db]}),
            (ns.list_tables, {"id": [db]}),
            (ns.declare_table, {"id": [db, "while_down"]}),
        ]:
            started = time.monotonic()
            assert code_of(call, request) == ErrorCode.SERVICE_UNAVAILABLE
            assert time.monotonic() - started < 5
        assert ns.pool.open_connections == 0

        # Back: the same namespace object works again.
        spare_metastore.start()
        ns.declare_table({"id": [db, "back"]})
        assert ns.list_tables({"id": [db]}).tables == ["after_restart", "back"]
    finally:
        ns.close()


def test_failover_to_the_next_uri(spare_metastore, tmp_path):
    if not spare_metastore.is_running():
        spare_metastore.start()
    uri = f"thrift://127.0.0.1:{dead_port()},{spare_metastore.uri}"
    ns = Hive2Namespace(uri=uri, root=str(tmp_path))
    try:
        db = unique()
        ns.create_namespace({"id": [db]})
        ns.declare_table({"id": [db, "t"]})
        assert ns.list_tables({"id": [db]}).tables == ["t"]
        assert ns.pool.open_connections == 1
        connection = ns.pool._idle.queue[0]
        assert connection.server.port == port_of(spare_metastore.uri)
        ns.drop_namespace({"id": [db], "behavior": "cascade"})
    finally:
        ns.close()
    all_dead = Hive2Namespace(uri=f"thrift://127.0.0.1:{dead_port()}")
    assert code_of(all_dead.list_namespaces, {"id": []}) == ErrorCode.SERVICE_UNAVAILABLE


# =============================================================================================
# Server-side filtering, catalog columns, cascade (real HMS 2.3)
# =============================================================================================


def test_list_tables_filters_in_the_metastore(ns2, hive_metastore_uri, thrift_calls, tmp_path):
    db = new_db(ns2)
    for index in range(50):
        ns2.declare_table({"id": [db, f"lance_{index:02d}"]})
    with RawClient(hive_metastore_uri) as client:
        for index in range(50):
            location = str(tmp_path / f"other_{index}")
            client.create_table(foreign_table(db, f"other_{index:02d}", location, "ICEBERG"))
        client.create_table(foreign_table(db, "upper", str(tmp_path / "u"), "LANCE"))
        client.create_table(foreign_table(db, "prefix", str(tmp_path / "p"), "lancedb"))
    thrift_calls.counts.clear()
    listed = ns2.list_tables({"id": [db]}).tables
    assert listed == sorted([f"lance_{i:02d}" for i in range(50)] + ["upper"])
    assert thrift_calls.counts["get_table_names_by_filter"] == 1
    assert thrift_calls.counts["get_table"] == 0
    assert thrift_calls.counts["get_all_tables"] == 0
    assert sum(thrift_calls.counts.values()) == 2  # + get_database (namespace exists)
    # Paging works on the filtered listing.
    page = ns2.list_tables({"id": [db], "limit": 20})
    assert page.tables == listed[:20] and page.page_token


def test_catalog_columns_follow_the_lance_schema(ns2, hive_metastore_uri, tmp_path):
    db = new_db(ns2)
    data = pa.table(
        {
            "id": pa.array([1], pa.int64()),
            "name": ["a"],
            "score": pa.array([1.5], pa.float32()),
            "vec": pa.array([[1.0, 2.0]], pa.list_(pa.float32(), 2)),
            "tags": pa.array([["x"]], pa.list_(pa.string())),
            "ts": pa.array([0], pa.timestamp("us")),
            "ok": [True],
        }
    )
    expected = [
        ("id", "bigint"),
        ("name", "string"),
        ("score", "float"),
        ("vec", "array<float>"),
        ("tags", "array<string>"),
        ("ts", "timestamp"),
        ("ok", "boolean"),
    ]
    location = str(tmp_path / "registered.lance")
    lance.write_dataset(data, location)
    ns2.register_table({"id": [db, "registered"], "location": location})
    with RawClient(hive_metastore_uri) as client:
        cols = client.get_table(db, "registered").sd.cols
    assert [(c.name, c.type) for c in cols] == expected
    assert cols[3].comment == "lance vector(2)"

    declared = ns2.declare_table({"id": [db, "written"]}).location
    with RawClient(hive_metastore_uri) as client:
        assert not client.get_table(db, "written").sd.cols  # nothing known yet
    lance.write_dataset(data, declared)  # straight to storage: the catalog is not told
    ns2.describe_table({"id": [db, "written"]})  # a read: never writes the catalog
    with RawClient(hive_metastore_uri) as client:
        assert not client.get_table(db, "written").sd.cols
    ns2.sync_table_columns([db, "written"])  # what such a writer is told to call
    with RawClient(hive_metastore_uri) as client:
        cols = client.get_table(db, "written").sd.cols
    assert [(c.name, c.type) for c in cols] == expected


def test_drop_namespace_cascade_keeps_data(ns2, hive_metastore_uri):
    db = new_db(ns2)
    table_id = [db, "t"]
    lance.write_dataset(DATA, namespace_client=ns2, table_id=table_id, mode="create")
    location = ns2.describe_table({"id": table_id}).location
    assert code_of(ns2.drop_namespace, {"id": [db]}) == ErrorCode.NAMESPACE_NOT_EMPTY
    ns2.drop_namespace({"id": [db], "behavior": "cascade"})
    with RawClient(hive_metastore_uri) as client:
        assert db not in client.get_all_databases()
    assert lance.dataset(location).count_rows() == 3
    assert sorted(os.listdir(location))  # the files are all still there


def test_declare_uses_the_database_location(ns2, hive_metastore_uri, tmp_path):
    """A table without a location goes under its database's own location (as on Glue), then
    under root; the location HMS picks itself (its warehouse) gives way to a configured root."""
    own = tmp_path / "elsewhere" / "orders_db"
    placed = new_db(ns2, {"database.location-uri": str(own)})
    declared = ns2.declare_table({"id": [placed, "t"]}).location
    assert declared == str(own / "t.lance")

    chosen_by_hms = new_db(ns2)
    described = ns2.describe_namespace({"id": [chosen_by_hms]}).properties
    assert described["database.location-uri"].endswith(f"/{chosen_by_hms}.db")
    assert ns2.declare_table({"id": [chosen_by_hms, "t"]}).location == str(
        tmp_path / "lake" / chosen_by_hms / "t.lance"
    )

    # Without root, a database gets the metastore's warehouse location, and its tables too.
    rootless = Hive2Namespace(uri=hive_metastore_uri)
    try:
        bare = unique()
        ns2.created.append(bare)  # type: ignore[attr-defined]
        rootless.create_namespace({"id": [bare]})
        warehouse = rootless.describe_namespace({"id": [bare]}).properties
        location = rootless.declare_table({"id": [bare, "t"]}).location
        assert location == warehouse["database.location-uri"] + "/t.lance"
        assert not location.startswith(os.getcwd())
    finally:
        rootless.close()
