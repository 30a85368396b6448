"""The Hive Metastore 3 emulator (tests/support/hms3_emulator.py), through the plain generated
Thrift client, as any Hive client would talk to it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from pymetastore.hive_metastore import ThriftHiveMetastore, ttypes
from support.hms3_emulator import Hms3Emulator, parse_table_filter
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TApplicationException
from thrift.transport import TSocket, TTransport

LANCE_FILTER = 'hive_filter_field_params__table_type like "(?i)lance"'


@pytest.fixture(scope="module")
def emulator() -> Iterator[Hms3Emulator]:
    with Hms3Emulator() as running:
        yield running


def _open(port: int) -> tuple[ThriftHiveMetastore.Client, TTransport.TTransportBase]:
    sock = TSocket.TSocket("127.0.0.1", port)
    sock.setTimeout(10_000)
    transport = TTransport.TBufferedTransport(sock)
    transport.open()
    return ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport)), transport


@pytest.fixture
def client(emulator: Hms3Emulator) -> Iterator[ThriftHiveMetastore.Client]:
    # A fixture, not a @contextmanager: Thrift's exceptions are immutable and contextlib
    # would fail re-raising them.
    emulator.reset()
    connected, transport = _open(emulator.port)
    yield connected
    transport.close()


def _catalog(name: str, location: str = "/lake/cat", description: str | None = None):
    return ttypes.CreateCatalogRequest(ttypes.Catalog(name, description, location))


def _table(db: str, name: str, params: dict[str, str], catalog: str | None = None, **kw):
    return ttypes.Table(
        tableName=name,
        dbName=db,
        owner=kw.get("owner", "alice"),
        sd=ttypes.StorageDescriptor(
            cols=[ttypes.FieldSchema("x", "int", None)],
            location=kw.get("location"),
            serdeInfo=ttypes.SerDeInfo(name=name, parameters={}),
            parameters={},
        ),
        partitionKeys=[],
        parameters=params,
        tableType=kw.get("table_type", "EXTERNAL_TABLE"),
        catName=catalog,
    )


# ---------------------------------------------------------------------------------------------
# Catalogs
# ---------------------------------------------------------------------------------------------


def test_starts_with_catalog_hive_and_database_default(client):
    assert client.get_catalogs().names == ["hive"]
    hive = client.get_catalog(ttypes.GetCatalogRequest("hive")).catalog
    assert hive.name == "hive" and hive.locationUri.startswith("file:/")
    assert client.get_all_databases() == ["default"]
    default = client.get_database("default")
    assert default.catalogName == "hive" and default.ownerName == "public"


def test_create_get_alter_drop_catalog(client):
    client.create_catalog(_catalog("Sales_Cat", "/lake/sales", "Sales"))
    assert client.get_catalogs().names == ["hive", "sales_cat"]
    found = client.get_catalog(ttypes.GetCatalogRequest("SALES_CAT")).catalog
    assert (found.name, found.description, found.locationUri) == (
        "sales_cat",
        "Sales",
        "/lake/sales",
    )
    # Like HMS 3, a new catalog gets a database "default" at its location.
    assert client.get_databases("@sales_cat#") == ["default"]
    assert client.get_database("@sales_cat#default").locationUri == "file:/lake/sales"

    client.alter_catalog(
        ttypes.AlterCatalogRequest("sales_cat", ttypes.Catalog("sales_cat", "New", ""))
    )
    altered = client.get_catalog(ttypes.GetCatalogRequest("sales_cat")).catalog
    assert (altered.description, altered.locationUri) == ("New", "/lake/sales")

    client.drop_catalog(ttypes.DropCatalogRequest("sales_cat"))  # only an empty "default"
    assert client.get_catalogs().names == ["hive"]
    with pytest.raises(ttypes.NoSuchObjectException):
        client.get_catalog(ttypes.GetCatalogRequest("sales_cat"))


def test_catalog_errors(client):
    client.create_catalog(_catalog("c1"))
    with pytest.raises(ttypes.AlreadyExistsException):
        client.create_catalog(_catalog("C1"))
    with pytest.raises(ttypes.InvalidObjectException):
        client.create_catalog(_catalog("bad-name"))
    with pytest.raises(ttypes.InvalidObjectException):
        client.create_catalog(ttypes.CreateCatalogRequest(ttypes.Catalog("noloc", None, None)))
    with pytest.raises(ttypes.NoSuchObjectException):
        client.get_catalog(ttypes.GetCatalogRequest("missing"))
    with pytest.raises(ttypes.NoSuchObjectException):
        client.drop_catalog(ttypes.DropCatalogRequest("missing"))
    with pytest.raises(ttypes.NoSuchObjectException):
        client.alter_catalog(ttypes.AlterCatalogRequest("missing", ttypes.Catalog("missing")))
    with pytest.raises(ttypes.InvalidOperationException):
        client.alter_catalog(ttypes.AlterCatalogRequest("c1", ttypes.Catalog("other")))
    with pytest.raises(ttypes.MetaException):
        client.drop_catalog(ttypes.DropCatalogRequest("hive"))


def test_drop_catalog_refuses_non_empty(client):
    client.create_catalog(_catalog("c1"))
    client.create_database(ttypes.Database(name="db", parameters={}, catalogName="c1"))
    with pytest.raises(ttypes.InvalidOperationException, match="non-default databases"):
        client.drop_catalog(ttypes.DropCatalogRequest("c1"))
    client.drop_database("@c1#db", False, False)
    client.create_table(_table("default", "t", {}, catalog="c1"))
    with pytest.raises(ttypes.InvalidOperationException, match="default database"):
        client.drop_catalog(ttypes.DropCatalogRequest("c1"))
    client.drop_table("@c1#default", "t", False)
    client.drop_catalog(ttypes.DropCatalogRequest("c1"))


# ---------------------------------------------------------------------------------------------
# Databases
# ---------------------------------------------------------------------------------------------


def test_databases_per_catalog(client):
    client.create_catalog(_catalog("c1", "/lake/c1"))
    client.create_database(
        ttypes.Database(
            name="Sales", description="d", parameters={"k": "v"}, ownerName="bob", catalogName="c1"
        )
    )
    client.create_database(ttypes.Database(name="sales", parameters={}))  # catalog hive
    found = client.get_database("@c1#SALES")
    assert (found.name, found.catalogName, found.description, found.parameters) == (
        "sales",
        "c1",
        "d",
        {"k": "v"},
    )
    assert found.locationUri == "file:/lake/c1/sales.db"
    assert client.get_database("sales").catalogName == "hive"
    assert client.get_database("@hive#sales").catalogName == "hive"
    assert client.get_databases("@c1#") == ["default", "sales"]
    assert client.get_databases("@c1#sal*|nothing") == ["sales"]
    assert client.get_databases("*") == ["default", "sales"]
    assert client.get_all_databases() == ["default", "sales"]
    assert client.get_databases("@nocat#") == []

    with pytest.raises(ttypes.AlreadyExistsException):
        client.create_database(ttypes.Database(name="SALES", catalogName="c1"))
    with pytest.raises(ttypes.InvalidObjectException, match="No such catalog"):
        client.create_database(ttypes.Database(name="x", catalogName="nocat"))
    with pytest.raises(ttypes.InvalidObjectException):
        client.create_database(ttypes.Database(name="bad name", catalogName="c1"))
    with pytest.raises(ttypes.NoSuchObjectException):
        client.get_database("@c1#missing")
    with pytest.raises(ttypes.NoSuchObjectException):
        client.get_database("@nocat#sales")
    with pytest.raises(ttypes.MetaException):
        client.get_database("@nohash")


def test_alter_database_keeps_blank_fields(client):
    client.create_database(
        ttypes.Database(name="db", description="d", locationUri="/x", parameters={"a": "1"})
    )
    client.alter_database(
        "db", ttypes.Database(name="db", description="", parameters={"b": "2"}, ownerName="o")
    )
    found = client.get_database("db")
    assert (found.description, found.locationUri, found.parameters, found.ownerName) == (
        "d",
        "file:/x",
        {"b": "2"},
        "o",
    )
    with pytest.raises(ttypes.NoSuchObjectException):
        client.alter_database("@hive#missing", ttypes.Database(name="missing"))


def test_drop_database(client):
    client.create_catalog(_catalog("c1"))
    client.create_database(ttypes.Database(name="db", catalogName="c1"))
    client.create_table(_table("db", "t", {"EXTERNAL": "TRUE"}, catalog="c1"))
    with pytest.raises(ttypes.InvalidOperationException, match="not empty"):
        client.drop_database("@c1#db", False, False)
    client.drop_database("@c1#db", True, True)
    assert client.get_databases("@c1#") == ["default"]
    with pytest.raises(ttypes.NoSuchObjectException):
        client.get_table("@c1#db", "t")
    with pytest.raises(ttypes.NoSuchObjectException):
        client.drop_database("@c1#db", False, False)
    with pytest.raises(ttypes.MetaException, match="Can not drop default"):
        client.drop_database("default", False, False)
    client.drop_database("@c1#default", False, False)  # other catalogs' default may go


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


def test_create_get_table(client):
    client.create_catalog(_catalog("c1", "/lake/c1"))
    client.create_database(ttypes.Database(name="db", catalogName="c1"))
    client.create_table(_table("DB", "T1", {"EXTERNAL": "TRUE", "a": "1"}, catalog="C1"))
    found = client.get_table("@c1#db", "t1")
    assert (found.catName, found.dbName, found.tableName) == ("c1", "db", "t1")
    assert found.tableType == "EXTERNAL_TABLE"
    assert found.sd.location == "file:/lake/c1/db.db/t1"  # default: under the database
    assert found.parameters["a"] == "1" and "transient_lastDdlTime" in found.parameters
    assert found.createTime > 0
    by_request = client.get_table_req(ttypes.GetTableRequest("db", "T1", catName="c1")).table
    assert by_request.tableName == "t1"

    # EXTERNAL_TABLE without EXTERNAL=TRUE becomes a managed table, as in HMS.
    client.create_table(_table("db", "t2", {}, catalog="c1", location="/data/t2"))
    managed = client.get_table("@c1#db", "t2")
    assert (managed.tableType, managed.sd.location) == ("MANAGED_TABLE", "file:/data/t2")

    assert client.get_all_tables("@c1#db") == ["t1", "t2"]
    assert client.get_tables("@c1#db", "t1|x*") == ["t1"]
    assert client.get_all_tables("db") == []  # hive.db does not exist
    assert client.get_all_tables("@c1#missing") == []


def test_table_errors(client):
    client.create_database(ttypes.Database(name="db"))
    client.create_table(_table("db", "t", {}))
    with pytest.raises(ttypes.AlreadyExistsException):
        client.create_table(_table("db", "T", {}))
    with pytest.raises(ttypes.InvalidObjectException):
        client.create_table(_table("missing", "t", {}))
    with pytest.raises(ttypes.InvalidObjectException):
        client.create_table(_table("db", "bad-name", {}))
    with pytest.raises(ttypes.InvalidObjectException):
        client.create_table(_table("db", "t", {}, catalog="nocat"))
    with pytest.raises(ttypes.NoSuchObjectException):
        client.get_table("db", "missing")
    with pytest.raises(ttypes.NoSuchObjectException):
        client.get_table("@nocat#db", "t")
    with pytest.raises(ttypes.NoSuchObjectException):
        client.get_table_req(ttypes.GetTableRequest("db", "t", catName="nocat"))
    with pytest.raises(ttypes.NoSuchObjectException):
        client.drop_table("db", "missing", False)
    with pytest.raises(ttypes.InvalidOperationException, match="doesn't exist"):
        client.alter_table("db", "missing", _table("db", "missing", {}))


def test_alter_and_rename_table(client):
    client.create_catalog(_catalog("c1"))
    client.create_database(ttypes.Database(name="db", catalogName="c1"))
    client.create_database(ttypes.Database(name="db2", catalogName="c1"))
    client.create_table(_table("db", "t", {"EXTERNAL": "TRUE"}, catalog="c1", location="/a"))
    client.create_table(_table("db", "other", {}, catalog="c1"))
    changed = client.get_table("@c1#db", "t")
    changed.parameters = {"EXTERNAL": "TRUE", "k": "v"}
    changed.sd.location = "/b"
    changed.sd.cols = [ttypes.FieldSchema("y", "string", None)]
    client.alter_table("@c1#db", "t", changed)
    found = client.get_table("@c1#db", "t")
    assert (found.parameters["k"], found.sd.location, found.sd.cols[0].name) == (
        "v",
        "file:/b",
        "y",
    )
    renamed = client.get_table("@c1#db", "t")
    renamed.tableName = "other"
    with pytest.raises(ttypes.InvalidOperationException, match="already exists"):
        client.alter_table("@c1#db", "t", renamed)
    renamed.tableName, renamed.dbName = "moved", "db2"
    client.alter_table("@c1#db", "t", renamed)
    assert client.get_all_tables("@c1#db") == ["other"]
    assert client.get_all_tables("@c1#db2") == ["moved"]
    renamed.catName = "hive"
    with pytest.raises(ttypes.InvalidOperationException, match="between catalogs"):
        client.alter_table("@c1#db2", "moved", renamed)


def test_get_table_names_by_filter(client):
    client.create_catalog(_catalog("c1"))
    client.create_database(ttypes.Database(name="db", catalogName="c1"))
    kinds = {
        "a_lower": "lance",
        "b_upper": "LANCE",
        "c_mixed": "LaNcE",
        "d_iceberg": "ICEBERG",
        "e_prefix": "lancedb",
    }
    for name, kind in kinds.items():
        client.create_table(_table("db", name, {"table_type": kind, "EXTERNAL": "TRUE"}, "c1"))
    client.create_table(_table("db", "f_none", {"EXTERNAL": "TRUE"}, "c1", owner="bob"))
    # the same names in catalog hive must not leak into c1's answer
    client.create_database(ttypes.Database(name="db"))
    client.create_table(_table("db", "z_hive", {"table_type": "lance"}))

    assert client.get_table_names_by_filter("@c1#db", LANCE_FILTER, -1) == [
        "a_lower",
        "b_upper",
        "c_mixed",
    ]
    assert client.get_table_names_by_filter("@c1#db", LANCE_FILTER, 2) == ["a_lower", "b_upper"]
    assert client.get_table_names_by_filter("db", LANCE_FILTER, -1) == ["z_hive"]
    equals = 'hive_filter_field_params__table_type = "ICEBERG"'
    assert client.get_table_names_by_filter("@c1#db", equals, -1) == ["d_iceberg"]
    combined = (
        'hive_filter_field_owner__ = "bob" or (hive_filter_field_params__table_type <> "lance" '
        'and hive_filter_field_params__table_type like "lance.*")'
    )
    assert client.get_table_names_by_filter("@c1#db", combined, -1) == ["e_prefix", "f_none"]
    assert client.get_table_names_by_filter("@c1#db", "", -1) == sorted([*kinds, "f_none"])
    assert client.get_table_names_by_filter("@c1#missing", LANCE_FILTER, -1) == []

    with pytest.raises(ttypes.MetaException):
        client.get_table_names_by_filter("@c1#db", "hive_filter_field_params__x < 3", -1)
    with pytest.raises(ttypes.MetaException):
        client.get_table_names_by_filter("@c1#db", 'tableName = "x"', -1)
    with pytest.raises(ttypes.MetaException):
        client.get_table_names_by_filter("@c1#db", 'hive_filter_field_params__x = "a', -1)
    with pytest.raises(ttypes.UnknownDBException):
        client.get_table_names_by_filter("@c1#", LANCE_FILTER, -1)


def test_filter_parser_directly():
    table = ttypes.Table(owner="o", lastAccessTime=5, parameters={"k": "V1"})
    assert parse_table_filter('hive_filter_field_params__k like "(?i)v\\d"')(table)
    assert not parse_table_filter('hive_filter_field_params__k like "v\\d"')(table)
    assert parse_table_filter("hive_filter_field_last_access__ > 3")(table)
    assert parse_table_filter('"V1" = hive_filter_field_params__k')(table)
    assert parse_table_filter(
        'hive_filter_field_params__k = "x" OR hive_filter_field_owner__ = "o"'
    )(table)
    assert not parse_table_filter('hive_filter_field_params__missing <> "x"')(table)


# ---------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------


def test_unknown_methods_answer_like_a_server_that_lacks_them(client):
    with pytest.raises(TApplicationException) as caught:
        client.get_partition_names("default", "t", -1)
    assert caught.value.type == TApplicationException.UNKNOWN_METHOD
    assert "Invalid method name" in caught.value.message
    assert client.get_all_databases() == ["default"]  # the connection stays usable


def test_counts_calls(client, emulator):
    client.get_all_databases()
    client.get_all_databases()
    client.get_catalogs()
    assert emulator.calls["get_all_databases"] == 2
    assert emulator.calls["get_catalogs"] == 1


def test_concurrent_clients(emulator):
    emulator.reset()
    errors: list[BaseException] = []

    def work(index: int) -> None:
        connected, transport = _open(emulator.port)
        try:
            for j in range(20):
                connected.create_database(ttypes.Database(name=f"db_{index}_{j}"))
                connected.get_database(f"db_{index}_{j}")
        except BaseException as error:  # reported below
            errors.append(error)
        finally:
            transport.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    connected, transport = _open(emulator.port)
    try:
        assert len(connected.get_all_databases()) == 1 + 8 * 20
    finally:
        transport.close()


def test_restart_keeps_state_and_drops_connections():
    with Hms3Emulator() as emulator:
        connected, transport = _open(emulator.port)
        connected.create_database(ttypes.Database(name="kept"))
        port = emulator.port
        emulator.restart()
        assert emulator.port == port
        with pytest.raises((TTransport.TTransportException, OSError, EOFError)):
            connected.get_all_databases()
        transport.close()
        connected, transport = _open(emulator.port)
        assert "kept" in connected.get_all_databases()
        transport.close()
    with pytest.raises(TTransport.TTransportException):
        _open(port)
