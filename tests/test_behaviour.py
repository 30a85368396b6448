"""The behaviour suite: every operation of the specs, written once, run for every backend.

Each test talks to a real server through the ``backend`` harness (see conftest.py); error
expectations are the spec's numeric codes.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from lance_namespace import (
    CreateNamespaceRequest,
    DeclareTableRequest,
    DescribeTableRequest,
    ListNamespacesRequest,
    ListTablesRequest,
)
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from support.harness import Harness

DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})


def code_of(call, *args, **kwargs) -> ErrorCode:
    with pytest.raises(LanceNamespaceError) as caught:
        call(*args, **kwargs)
    return caught.value.code


class DictWithModelDump(dict):
    """The request shape Lance's Rust core hands to a Python namespace."""

    def model_dump(self):
        return dict(self)


@pytest.fixture
def ns(backend: Harness):
    return backend.connect()


@pytest.fixture
def db(backend: Harness, ns) -> list[str]:
    path = backend.db("sales")
    ns.create_namespace({"id": path})
    return path


# ---------------------------------------------------------------------------------------------
# Namespaces
# ---------------------------------------------------------------------------------------------


def test_create_describe_and_exists(backend: Harness, ns):
    path = backend.db("analytics")
    created = ns.create_namespace(
        CreateNamespaceRequest(id=path, properties={"owner_team": "data", "description": "d"})
    )
    assert created.properties["owner_team"] == "data"
    described = ns.describe_namespace({"id": path})
    assert described.properties["owner_team"] == "data"
    assert described.properties["description"] == "d"
    ns.namespace_exists({"id": path})


def test_create_existing_namespace_modes(backend: Harness, ns):
    path = backend.db("modes")
    ns.create_namespace({"id": path, "properties": {"k": "1"}})
    assert code_of(ns.create_namespace, {"id": path}) == ErrorCode.NAMESPACE_ALREADY_EXISTS
    kept = ns.create_namespace({"id": path, "mode": "EXIST_OK", "properties": {"k": "2"}})
    assert kept.properties["k"] == "1"
    replaced = ns.create_namespace({"id": path, "mode": "OVERWRITE", "properties": {"k": "3"}})
    assert replaced.properties["k"] == "3"
    assert ns.describe_namespace({"id": path}).properties["k"] == "3"
    assert code_of(ns.create_namespace, {"id": path, "mode": "bogus"}) == ErrorCode.INVALID_INPUT


def test_overwrite_keeps_tables(backend: Harness, ns, db):
    ns.declare_table({"id": [*db, "kept"]})
    ns.create_namespace({"id": db, "mode": "overwrite", "properties": {"x": "y"}})
    assert ns.list_tables({"id": db}).tables == ["kept"]


def test_root_namespace(ns):
    ns.namespace_exists({"id": []})
    ns.describe_namespace({"id": []})
    assert code_of(ns.create_namespace, {"id": []}) == ErrorCode.NAMESPACE_ALREADY_EXISTS
    ns.create_namespace({"id": [], "mode": "exist_ok"})
    assert code_of(ns.drop_namespace, {"id": []}) == ErrorCode.INVALID_INPUT


def test_root_lists_no_tables(backend: Harness, ns, db):
    # Tables live in databases; the root answers an empty page, as Lance's own namespaces do.
    ns.declare_table({"id": [*db, "orders"]})
    listed = ns.list_tables({"id": []})
    assert listed.tables == [] and listed.page_token is None
    assert ns.list_tables(ListTablesRequest(id=[], limit=1)).tables == []
    assert ns.list_tables(DictWithModelDump(id=[], limit=10)).tables == []
    assert code_of(ns.list_tables, {"id": [], "page_token": "%%"}) == ErrorCode.INVALID_INPUT
    assert code_of(ns.list_tables, {"id": [], "limit": -1}) == ErrorCode.INVALID_INPUT
    assert code_of(ns.list_tables, {"id": 42}) == ErrorCode.INVALID_INPUT
    assert code_of(ns.list_tables, {"id": ["", ""]}) == ErrorCode.INVALID_INPUT


def test_missing_namespace_codes(backend: Harness, ns):
    missing = backend.db("nowhere")
    assert code_of(ns.describe_namespace, {"id": missing}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(ns.namespace_exists, {"id": missing}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(ns.list_tables, {"id": missing}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(ns.list_namespaces, {"id": missing}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(ns.drop_namespace, {"id": missing}) == ErrorCode.NAMESPACE_NOT_FOUND
    ns.drop_namespace({"id": missing, "mode": "SKIP"})
    assert code_of(ns.declare_table, {"id": [*missing, "t"]}) == ErrorCode.NAMESPACE_NOT_FOUND


def test_list_namespaces_sorted_and_paged(backend: Harness, ns):
    names = [backend.db(n)[-1] for n in ["delta", "alpha", "charlie", "bravo", "echo"]]
    for name in names:
        ns.create_namespace({"id": [*backend.db("x")[:-1], name]})
    parent = backend.db("x")[:-1]
    listed = ns.list_namespaces({"id": parent}).namespaces
    ours = [n for n in listed if n in names]
    assert ours == sorted(names)
    assert listed == sorted(listed)

    seen, token = [], None
    while True:
        page = ns.list_namespaces(ListNamespacesRequest(id=parent, limit=1, page_token=token))
        assert len(page.namespaces) <= 1
        seen += page.namespaces
        token = page.page_token
        if not token:
            break
    assert seen == listed

    two = ns.list_namespaces({"id": parent, "limit": 2})
    rest = ns.list_namespaces({"id": parent, "page_token": two.page_token})
    assert two.namespaces + rest.namespaces == listed
    assert rest.page_token is None


def test_paging_survives_changes_between_pages(backend: Harness, ns):
    for name in ["b1", "b2", "b3"]:
        ns.create_namespace({"id": backend.db(name)})
    parent = backend.db("x")[:-1]
    first = ns.list_namespaces({"id": parent, "limit": 1})
    ns.create_namespace({"id": backend.db("a0")})  # sorts before the page already returned
    rest = ns.list_namespaces({"id": parent, "page_token": first.page_token})
    assert first.namespaces[0] not in rest.namespaces


def test_bad_page_tokens_and_limits(backend: Harness, ns, db):
    parent = db[:-1]
    for bad in ["not-a-token", "e30", "%%%"]:
        assert code_of(ns.list_namespaces, {"id": parent, "page_token": bad}) == 13
        assert code_of(ns.list_tables, {"id": db, "page_token": bad}) == 13
    assert code_of(ns.list_namespaces, {"id": parent, "limit": -1}) == 13
    assert code_of(ns.list_tables, {"id": db, "limit": "ten"}) == 13


def test_drop_namespace(backend: Harness, ns, db):
    ns.drop_namespace({"id": db})
    assert code_of(ns.namespace_exists, {"id": db}) == ErrorCode.NAMESPACE_NOT_FOUND


def test_drop_non_empty_namespace_is_refused(backend: Harness, ns, db, tmp_path: Path):
    ns.declare_table({"id": [*db, "t"]})
    assert code_of(ns.drop_namespace, {"id": db}) == ErrorCode.NAMESPACE_NOT_EMPTY
    ns.deregister_table({"id": [*db, "t"]})
    backend.create_foreign_table(db, "iceberg_t", str(tmp_path / "ice"))
    assert code_of(ns.drop_namespace, {"id": db}) == ErrorCode.NAMESPACE_NOT_EMPTY
    ns.namespace_exists({"id": db})


def test_drop_cascade(backend: Harness, ns, db):
    ns.declare_table({"id": [*db, "t"]})
    location = ns.describe_table({"id": [*db, "t"]}).location
    lance.write_dataset(DATA, location)
    request = {"id": db, "behavior": "CASCADE"}
    if not backend.supports_cascade:
        assert code_of(ns.drop_namespace, request) == ErrorCode.UNSUPPORTED
        ns.namespace_exists({"id": db})
        return
    ns.drop_namespace(request)
    assert code_of(ns.namespace_exists, {"id": db}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert lance.dataset(location).count_rows() == 3  # cascade deregisters, never deletes


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


def test_declare_and_describe(backend: Harness, ns, db):
    declared = ns.declare_table(
        DeclareTableRequest(id=[*db, "orders"], properties={"owner": "etl"})
    )
    assert declared.location.endswith("orders.lance")
    assert declared.location.startswith(str(backend.root))
    assert declared.properties["table_type"] == "lance"
    described = ns.describe_table({"id": [*db, "orders"]})
    assert described.location == declared.location
    assert described.properties["owner"] == "etl"
    assert described.properties["managed_by"] == "storage"
    assert described.version is None and described.var_schema is None
    assert described.managed_versioning is False
    params = backend.raw_parameters(db, "orders")
    assert params["table_type"] == "lance"


def test_declare_with_location_and_errors(backend: Harness, ns, db, tmp_path: Path):
    place = str(tmp_path / "elsewhere" / "t.lance")
    assert ns.declare_table({"id": [*db, "t"], "location": place}).location == place
    assert ns.describe_table({"id": [*db, "t"]}).location == place
    assert code_of(ns.declare_table, {"id": [*db, "t"]}) == ErrorCode.TABLE_ALREADY_EXISTS
    bad_props = {"id": [*db, "u"], "properties": {"table_type": "iceberg"}}
    assert code_of(ns.declare_table, bad_props) == ErrorCode.INVALID_INPUT
    bad_owner = {"id": [*db, "u"], "properties": {"managed_by": "someone"}}
    assert code_of(ns.declare_table, bad_owner) == ErrorCode.INVALID_INPUT
    assert code_of(ns.table_exists, {"id": [*db, "u"]}) == ErrorCode.TABLE_NOT_FOUND


def test_describe_errors(backend: Harness, ns, db, tmp_path: Path):
    assert code_of(ns.describe_table, {"id": [*db, "nope"]}) == ErrorCode.TABLE_NOT_FOUND
    backend.create_foreign_table(db, "ice", str(tmp_path / "ice"))
    assert code_of(ns.describe_table, {"id": [*db, "ice"]}) == ErrorCode.INVALID_INPUT
    assert code_of(ns.deregister_table, {"id": [*db, "ice"]}) == ErrorCode.INVALID_INPUT
    assert code_of(ns.drop_table, {"id": [*db, "ice"]}) == ErrorCode.INVALID_INPUT
    ns.declare_table({"id": [*db, "t"]})
    detailed = DescribeTableRequest(id=[*db, "t"], load_detailed_metadata=True)
    assert code_of(ns.describe_table, detailed) == ErrorCode.UNSUPPORTED


def test_list_tables_only_lance_sorted_paged(backend: Harness, ns, db, tmp_path: Path):
    for name in ["zeta", "alpha", "mid"]:
        ns.declare_table({"id": [*db, name]})
    backend.create_foreign_table(db, "not_lance", str(tmp_path / "x"))
    assert ns.list_tables({"id": db}).tables == ["alpha", "mid", "zeta"]
    first = ns.list_tables(ListTablesRequest(id=db, limit=1))
    assert first.tables == ["alpha"]
    second = ns.list_tables(ListTablesRequest(id=db, limit=1, page_token=first.page_token))
    assert second.tables == ["mid"]
    last = ns.list_tables(ListTablesRequest(id=db, limit=5, page_token=second.page_token))
    assert last.tables == ["zeta"] and last.page_token is None


def test_include_declared(backend: Harness, ns, db):
    ns.declare_table({"id": [*db, "empty"]})
    ns.declare_table({"id": [*db, "full"]})
    lance.write_dataset(DATA, ns.describe_table({"id": [*db, "full"]}).location)
    assert ns.list_tables({"id": db, "include_declared": False}).tables == ["full"]
    assert ns.list_tables({"id": db}).tables == ["empty", "full"]
    checked = ns.describe_table({"id": [*db, "empty"], "check_declared": True})
    assert checked.is_only_declared is True
    checked = ns.describe_table({"id": [*db, "full"], "check_declared": True})
    assert checked.is_only_declared is False


def test_deregister_keeps_data(backend: Harness, ns, db):
    ns.declare_table({"id": [*db, "t"]})
    location = ns.describe_table({"id": [*db, "t"]}).location
    lance.write_dataset(DATA, location)
    response = ns.deregister_table({"id": [*db, "t"]})
    assert response.location == location
    assert code_of(ns.describe_table, {"id": [*db, "t"]}) == ErrorCode.TABLE_NOT_FOUND
    assert code_of(ns.deregister_table, {"id": [*db, "t"]}) == ErrorCode.TABLE_NOT_FOUND
    assert Path(location, "_versions").is_dir()
    assert lance.dataset(location).count_rows() == 3


def test_register_existing_dataset(backend: Harness, ns, db, tmp_path: Path):
    location = str(tmp_path / "existing.lance")
    lance.write_dataset(DATA, location)
    ns.register_table({"id": [*db, "existing"], "location": location})
    assert ns.describe_table({"id": [*db, "existing"]}).location == location
    assert backend.columns(db, "existing") == [("id", "bigint"), ("name", "string")]
    again = {"id": [*db, "existing"], "location": location}
    assert code_of(ns.register_table, again) == ErrorCode.TABLE_ALREADY_EXISTS
    nothing = {"id": [*db, "ghost"], "location": str(tmp_path / "nothing")}
    assert code_of(ns.register_table, nothing) == ErrorCode.INVALID_INPUT
    assert code_of(ns.table_exists, {"id": [*db, "ghost"]}) == ErrorCode.TABLE_NOT_FOUND


def test_drop_table_removes_entry_and_data(backend: Harness, ns, db):
    ns.declare_table({"id": [*db, "t"]})
    location = ns.describe_table({"id": [*db, "t"]}).location
    lance.write_dataset(DATA, location)
    ns.drop_table({"id": [*db, "t"]})
    assert code_of(ns.table_exists, {"id": [*db, "t"]}) == ErrorCode.TABLE_NOT_FOUND
    assert not Path(location).exists()
    assert code_of(ns.drop_table, {"id": [*db, "t"]}) == ErrorCode.TABLE_NOT_FOUND


def test_columns_follow_the_dataset(backend: Harness, ns, db):
    ns.declare_table({"id": [*db, "t"]})
    assert backend.columns(db, "t") == []
    lance.write_dataset(DATA, namespace_client=ns, table_id=[*db, "t"], mode="append")
    ns.describe_table({"id": [*db, "t"]})
    assert backend.columns(db, "t") == [("id", "bigint"), ("name", "string")]


# ---------------------------------------------------------------------------------------------
# Identifiers and request shapes
# ---------------------------------------------------------------------------------------------


def test_identifier_forms(backend: Harness, ns, db):
    joined = "$".join([*db, "orders"])
    ns.declare_table({"id": joined})
    ns.table_exists({"id": [*db, "orders"]})
    ns.table_exists({"id": [joined]})
    ns.table_exists(DictWithModelDump(id=[*db, "orders"]))
    assert ns.describe_table(DictWithModelDump(id=joined)).location.endswith("orders.lance")
    assert ns.list_tables(DictWithModelDump(id=db, limit=10)).tables == ["orders"]


def test_names_are_case_insensitive(backend: Harness, ns, db):
    ns.declare_table({"id": [*db, "MixedCase"]})
    ns.table_exists({"id": [*db, "mixedcase"]})
    ns.table_exists({"id": [*db[:-1], db[-1].upper(), "MIXEDCASE"]})
    assert ns.list_tables({"id": db}).tables == ["mixedcase"]


def test_odd_but_valid_names(backend: Harness, ns, db):
    for name in backend.odd_names:
        ns.declare_table({"id": [*db, name]})
        ns.table_exists({"id": [*db, name]})
    expected = sorted(n.lower() for n in backend.odd_names)
    assert ns.list_tables({"id": db}).tables == expected


def test_invalid_names_change_nothing(backend: Harness, ns, db):
    for name in backend.bad_names:
        assert code_of(ns.declare_table, {"id": [*db, name]}) == ErrorCode.INVALID_INPUT
        assert code_of(ns.create_namespace, {"id": backend.db(name)}) == ErrorCode.INVALID_INPUT
    assert code_of(ns.declare_table, {"id": [*db, "a", ""]}) == ErrorCode.INVALID_INPUT
    assert code_of(ns.describe_table, {"id": []}) == ErrorCode.INVALID_INPUT
    assert code_of(ns.describe_table, {"id": 42}) == ErrorCode.INVALID_INPUT
    assert ns.list_tables({"id": db}).tables == []


def test_pickles_without_clients(backend: Harness, ns, db):
    ns.declare_table({"id": [*db, "t"]})
    clone = pickle.loads(pickle.dumps(ns))
    assert clone.namespace_id() == ns.namespace_id()
    clone.table_exists({"id": [*db, "t"]})


# ---------------------------------------------------------------------------------------------
# Real clients: pylance and lancedb
# ---------------------------------------------------------------------------------------------


def test_pylance_create_append_overwrite(backend: Harness, ns, db):
    table_id = [*db, "events"]
    ds = lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")
    assert ds.count_rows() == 3
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="append")
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 6
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="overwrite")
    read = lance.dataset(namespace_client=ns, table_id=table_id)
    assert read.count_rows() == 3
    assert read.to_table().sort_by("id").equals(DATA)
    assert ns.list_tables({"id": db}).tables == ["events"]


def test_lancedb_lists_the_root_of_a_fresh_connection(backend: Harness):
    import lancedb

    conn = lancedb.connect_namespace(*backend.client_target())
    assert conn.list_tables().tables == []
    with pytest.warns(DeprecationWarning):  # lancedb's older name, still in wide use
        assert list(conn.table_names()) == []


def test_lancedb_connect_namespace(backend: Harness, db):
    import lancedb

    conn = lancedb.connect_namespace(*backend.client_target())
    conn.create_table("scores", DATA, namespace_path=db)
    assert conn.open_table("scores", namespace_path=db).count_rows() == 3
    assert conn.list_tables(namespace_path=db).tables == ["scores"]
    for i in range(12):
        conn.create_table(f"t{i:02d}", DATA, namespace_path=db)
    # both pages of a limited listing come back
    first = conn.list_tables(namespace_path=db, limit=10)
    second = conn.list_tables(namespace_path=db, limit=10, page_token=first.page_token)
    assert len(first.tables) == 10 and len(second.tables) == 3
    assert first.tables + second.tables == sorted(["scores"] + [f"t{i:02d}" for i in range(12)])
    conn.drop_table("scores", namespace_path=db)
    assert "scores" not in conn.list_tables(namespace_path=db, limit=100).tables
    table = conn.open_table("t00", namespace_path=db)
    table.add(DATA)
    assert conn.open_table("t00", namespace_path=db).count_rows() == 6
