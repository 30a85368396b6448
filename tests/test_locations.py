"""Locations: one resolution rule, confinement of every location a caller sets, and drops that
never delete data outside the allowed prefixes or data another table still points at.

The rule itself is tested on its own (no server); then every backend, each twice: in-process
with ``confine_locations=true`` and through ``lance-metastore``'s REST server (which always
confines), reached by pylance's REST client. The probe's cases of the network-safety issue
are here: a declared table over a directory outside the root, a second entry at another
table's location, a dataset registered from elsewhere on disk, a relative location, a
namespace's location property and an ``hdfs://127.0.0.1:PORT`` location.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from lance_namespace import LanceNamespace
from lance_namespace.errors import ErrorCode, InvalidInputError, LanceNamespaceError
from support.harness import Harness
from support.rest import RestHarness

from lance_metastore import GlueNamespace
from lance_metastore.rules.locations import LocationPolicy, is_under, overlap, resolve

DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})


def code_of(call, *args, **kwargs) -> ErrorCode:
    with pytest.raises(LanceNamespaceError) as caught:
        call(*args, **kwargs)
    return caught.value.code


def message_of(call, *args, **kwargs) -> str:
    with pytest.raises(LanceNamespaceError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


# ---------------------------------------------------------------------------------------------
# The rule, on its own
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "root", "resolved"),
    [
        ("/lake//a/./b/../t.lance/", None, "/lake/a/t.lance"),
        ("file:///lake//t.lance/", None, "file:///lake/t.lance"),
        ("file:/lake/t.lance", None, "file:///lake/t.lance"),
        ("FILE://localhost/lake/t", None, "file:///lake/t"),
        ("S3://bucket/lake//x/../t.lance/", None, "s3://bucket/lake/t.lance"),
        ("hdfs://nn:8020/w/t", None, "hdfs://nn:8020/w/t"),
        ("rel_data/t.lance", "/lake", "/lake/rel_data/t.lance"),
        ("./rel/../t.lance", "s3://bucket/lake/", "s3://bucket/lake/t.lance"),
        ("../up/t.lance", "/lake/root", "/lake/up/t.lance"),
    ],
)
def test_resolution_rule(given: str, root: str | None, resolved: str):
    assert resolve(given, root, "Table x") == resolved


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("rel_data/t.lance", "relative and the namespace has no root"),
        ("s3:bucket/t", "neither an absolute path nor a URI"),
        ("s3:///t", "names no bucket or host"),
        ("file://otherhost/t", "names a host"),
        ("file:t", "not an absolute file path"),
        ("/../etc", "climbs above its root"),
        ("s3://bucket/../other", "climbs above its root"),
        ("", "non-empty string"),
        ("/a\nb", "control character"),
    ],
)
def test_unresolvable_locations_answer_13_with_the_reason(given: str, reason: str):
    with pytest.raises(InvalidInputError, match=reason):
        resolve(given, None, "Table x")


def test_prefixes_match_whole_segments():
    assert is_under("/lake/a/t.lance", "/lake/a")
    assert is_under("/lake/a", "/lake/a")
    assert not is_under("/lake/ab", "/lake/a")
    assert not is_under("s3://other/lake/a", "s3://bucket/lake")
    assert is_under("s3a://bucket/lake/t", "s3://bucket/lake")  # one store, two schemes
    assert not is_under("hdfs://127.0.0.1:1/lake", "hdfs://nn:8020/lake")
    assert overlap("/lake/t.lance", "/lake/t.lance/data") and overlap("/lake/t", "/lake")
    assert not overlap("/lake/t1.lance", "/lake/t2.lance")
    assert is_under("file:///lake/a/t", "/lake/a") and overlap("/lake/a", "file:///lake")


def test_policy_schemes_prefixes_and_links(tmp_path: Path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    policy = LocationPolicy(root=str(root), extra=("s3://bucket/lake",), enforced=True)
    assert policy.allows(str(root / "t.lance"))
    assert policy.allows("s3://bucket/lake/t.lance")
    assert not policy.allows("s3://bucket/lakehouse/t.lance")
    assert not policy.allows(str(outside / "t.lance"))
    assert not policy.allows(str(root / "link" / "t.lance"))  # a link does not lead out
    assert policy.allows("/db/t.lance", lambda: ["file:/db"])
    assert not LocationPolicy(root=str(root)).enforced
    assert LocationPolicy(root=str(root)).allows("/anywhere")  # off: everything
    with pytest.raises(InvalidInputError, match="scheme 'http'"):
        policy.check("http://127.0.0.1:1/t", tuple, "Table x")
    with pytest.raises(InvalidInputError, match="allowed_locations"):
        policy.check(str(outside), tuple, "Table x")


def test_location_properties_are_checked_when_configured():
    with pytest.raises(InvalidInputError, match="allowed_locations"):
        GlueNamespace(region="us-east-1", allowed_locations="relative/prefix")
    with pytest.raises(InvalidInputError, match="allowed_schemes"):
        GlueNamespace(region="us-east-1", allowed_schemes=" , ")
    with pytest.raises(InvalidInputError, match="confine_locations"):
        GlueNamespace(region="us-east-1", confine_locations="sometimes")
    confined = GlueNamespace(region="us-east-1", root="/lake", confine_locations="true")
    assert confined.locations_confined
    open_ns = GlueNamespace(region="us-east-1", root="/lake")
    assert not open_ns.locations_confined
    open_ns.confine_locations()
    assert open_ns.locations_confined


# ---------------------------------------------------------------------------------------------
# Every backend, in-process (confined by the property) and through the REST server
# ---------------------------------------------------------------------------------------------


class Access:
    """Namespaces of one backend reached one way: in-process or through our REST server."""

    def __init__(self, backend: Harness, via: str) -> None:
        self.backend = backend
        self.via = via
        # The REST harness allows its test directory unless told otherwise; here only root.
        self.rest = RestHarness(root=backend.root, inner=backend) if via == "rest" else None

    def connect(self, **overrides: str | None) -> LanceNamespace:
        if self.rest is not None:
            return self.rest.connect(**{"allowed_locations": None, **overrides})
        return self.backend.connect(confine_locations="true", **overrides)

    def close(self) -> None:
        if self.rest is not None:
            self.rest.close()


@pytest.fixture(params=["in-process", "rest"])
def access(request: pytest.FixtureRequest, backend: Harness) -> Iterator[Access]:
    chosen = Access(backend, request.param)
    try:
        yield chosen
    finally:
        chosen.close()


@pytest.fixture
def ns(access: Access) -> LanceNamespace:
    return access.connect()


@pytest.fixture
def db(backend: Harness, ns: LanceNamespace) -> list[str]:
    path = backend.db(backend.unique("loc"))
    ns.create_namespace({"id": path})
    return path


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory beside the test's own (so outside root and the REST harness's allowance),
    holding something precious."""
    place = tmp_path_factory.mktemp("outside")
    (place / "precious.txt").write_text("keep me")
    return place


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _row_count(ns: LanceNamespace, table_id: list[str]) -> int:
    return lance.dataset(namespace_client=ns, table_id=table_id).count_rows()


def test_declare_outside_the_allowed_prefixes_is_refused_and_changes_nothing(
    backend: Harness, ns, db, outside: Path
):
    """The probe: declare at /some/dir, insert, drop deleted the directory. Now the declare
    answers 13 naming the rule, before any catalog or storage call."""
    before = backend.snapshot()
    for location in [str(outside), outside.as_uri(), f"{backend.root}/../{outside.name}"]:
        request = {"id": [*db, "evil"], "location": location}
        assert "is not allowed" in message_of(ns.declare_table, request)
        assert code_of(ns.declare_table, request) == ErrorCode.INVALID_INPUT
        assert code_of(ns.register_table, request) == ErrorCode.INVALID_INPUT
    assert code_of(ns.table_exists, {"id": [*db, "evil"]}) == ErrorCode.TABLE_NOT_FOUND
    assert backend.snapshot() == before
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]


def test_entries_stored_outside_stay_readable_and_a_drop_keeps_their_data(
    backend: Harness, access: Access, ns, db, outside: Path
):
    """An entry made before confinement (in-process, unconfined) at a place outside the
    prefixes: readable through a confined namespace; its drop deregisters and says so."""
    location = str(outside / "old.lance")
    lance.write_dataset(DATA, location)
    backend.connect().register_table({"id": [*db, "old"], "location": location})
    assert ns.describe_table({"id": [*db, "old"]}).location == location
    assert _row_count(ns, [*db, "old"]) == 3
    dropped = ns.drop_table({"id": [*db, "old"]})
    assert "outside the allowed prefixes" in dropped.properties["data_kept"]
    assert code_of(ns.table_exists, {"id": [*db, "old"]}) == ErrorCode.TABLE_NOT_FOUND
    assert lance.dataset(location).count_rows() == 3
    assert (outside / "precious.txt").read_text() == "keep me"


def test_a_location_another_entry_holds_answers_5_and_a_drop_keeps_shared_data(
    backend: Harness, access: Access, ns, db
):
    """The probe: a second entry at another table's location, dropped, deleted the first
    table's data. Registering or declaring over another entry's location (or inside it)
    answers 5; where shared_locations allows it, a drop keeps data another entry points at."""
    ns.create_table({"id": [*db, "first"]}, _ipc(DATA))
    first = ns.describe_table({"id": [*db, "first"]}).location
    for request in [
        {"id": [*db, "second"], "location": first},
        {"id": [*db, "second"], "location": first + "/"},
        {"id": [*db, "second"], "location": first + "/data"},
    ]:
        assert code_of(ns.register_table, request) == ErrorCode.TABLE_ALREADY_EXISTS
        assert code_of(ns.declare_table, request) == ErrorCode.TABLE_ALREADY_EXISTS
    assert "already exists" in message_of(ns.declare_table, {"id": [*db, "x"], "location": first})
    assert code_of(ns.table_exists, {"id": [*db, "second"]}) == ErrorCode.TABLE_NOT_FOUND

    shared = access.connect(shared_locations="true")
    shared.register_table({"id": [*db, "second"], "location": first})
    dropped = shared.drop_table({"id": [*db, "second"]})
    assert "still points at it" in dropped.properties["data_kept"]
    assert _row_count(ns, [*db, "first"]) == 3
    ns.drop_table({"id": [*db, "first"]})  # the last entry: its data goes
    assert not Path(first).exists()


def test_registering_a_dataset_elsewhere_needs_an_allowed_prefix(
    backend: Harness, access: Access, ns, db, outside: Path
):
    """The probe: registering a dataset anywhere on the server's disk and querying it
    returned its rows. Now only under an allowed prefix: ``allowed_locations`` adds one."""
    location = str(outside / "lake" / "t.lance")
    lance.write_dataset(DATA, location)
    request = {"id": [*db, "t"], "location": location}
    assert code_of(ns.register_table, request) == ErrorCode.INVALID_INPUT
    allowed = access.connect(allowed_locations=f"s3://bucket/x,{outside / 'lake'}")
    assert allowed.register_table(request).location == location
    assert _row_count(allowed, [*db, "t"]) == 3
    # Unconfined in-process (the default), bulk registration of an existing lake still works.
    lance.write_dataset(DATA, str(outside / "other.lance"))
    backend.connect().register_table({"id": [*db, "u"], "location": str(outside / "other.lance")})


def test_relative_locations_resolve_against_root_and_never_the_working_directory(
    backend: Harness, access: Access, ns, db, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """Issue 21's example: a dataset at ``<root>/rel_data/t.lance`` registered as
    ``rel_data/t.lance``. Without a configured root a relative location answers 13; a relative
    location that climbs out of the root is refused like any other."""
    lance.write_dataset(DATA, str(backend.root / "rel_data" / "t.lance"))
    registered = ns.register_table({"id": [*db, "t"], "location": "rel_data/t.lance"})
    assert registered.location == str(backend.root / "rel_data" / "t.lance")
    assert ns.describe_table({"id": [*db, "t"]}).location == registered.location
    assert _row_count(ns, [*db, "t"]) == 3
    declared = ns.declare_table({"id": [*db, "d"], "location": "./tables//d.lance/"})
    assert declared.location == str(backend.root / "tables" / "d.lance")
    escape = {"id": [*db, "e"], "location": "../escape.lance"}
    assert code_of(ns.declare_table, escape) == ErrorCode.INVALID_INPUT

    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    rootless = access.connect(root=None)
    for call in (rootless.declare_table, rootless.register_table):
        request = {"id": [*db, "r"], "location": "r.lance"}
        assert "no root" in message_of(call, request)
    assert code_of(ns.table_exists, {"id": [*db, "r"]}) == ErrorCode.TABLE_NOT_FOUND
    assert os.listdir(workdir) == []


def _location_key(backend: Harness) -> str:
    return "location" if backend.name == "glue" else "database.location-uri"


def test_namespace_location_properties_are_resolved_and_confined(
    backend: Harness, ns, outside: Path
):
    """The probe: a namespace ``location`` (Glue) or ``database.location-uri`` (Hive) put
    tables and directories anywhere. Outside the prefixes it answers 13 and changes nothing;
    a relative one resolves against root, and the namespace's tables go under it."""
    key = _location_key(backend)
    path = backend.db(backend.unique("placed"))
    before = backend.snapshot()
    refused = {"id": path, "properties": {key: str(outside / "db")}}
    assert code_of(ns.create_namespace, refused) == ErrorCode.INVALID_INPUT
    assert code_of(ns.namespace_exists, {"id": path}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert backend.snapshot() == before
    assert not (outside / "db").exists()

    ns.create_namespace({"id": path, "properties": {key: "dbs/placed"}})
    placed = str(backend.root / "dbs" / "placed")
    assert ns.describe_namespace({"id": path}).properties[key] == placed
    assert ns.declare_table({"id": [*path, "t"]}).location == placed + "/t.lance"
    overwrite = {"id": path, "mode": "overwrite", "properties": {key: str(outside)}}
    assert code_of(ns.create_namespace, overwrite) == ErrorCode.INVALID_INPUT
    assert ns.describe_namespace({"id": path}).properties[key] == placed


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A listening socket on 127.0.0.1 that nothing should ever connect to."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        sock.setblocking(False)
        yield sock


def _accepted_any(sock: socket.socket) -> bool:
    try:
        connection, _ = sock.accept()
    except BlockingIOError:
        return False
    connection.close()
    return True


def test_an_hdfs_location_at_a_local_port_is_refused_before_the_catalog_sees_it(
    backend: Harness, ns, db, listener: socket.socket
):
    """The probe: ``hdfs://127.0.0.1:PORT/x`` made the metastore connect there. The location
    is refused (13) before any catalog call, so nothing connects to the port."""
    target = f"hdfs://127.0.0.1:{listener.getsockname()[1]}/x"
    assert code_of(ns.declare_table, {"id": [*db, "h"], "location": target}) == 13
    assert code_of(ns.register_table, {"id": [*db, "h"], "location": target}) == 13
    namespace = {
        "id": backend.db(backend.unique("h")),
        "properties": {_location_key(backend): target},
    }
    assert code_of(ns.create_namespace, namespace) == 13
    other = {"id": [*db, "h"], "location": "gopher://127.0.0.1/x"}
    assert "scheme 'gopher'" in message_of(ns.declare_table, other)
    assert not _accepted_any(listener)


def test_the_catalog_search_costs_one_listing_per_database(glue: Harness):
    """The cost the README gives: a declare with a ``location`` reads every database once
    (GetDatabases, GetCatalogs, one GetTables per database), a default declare does not."""
    ns = glue.connect()
    for d in range(3):
        ns.create_namespace({"id": glue.db(f"d{d}")})
        for t in range(5):
            ns.declare_table({"id": [*glue.db(f"d{d}"), f"t{t}"]})
    calls: list[str] = []
    ns.glue.meta.events.register("before-call.glue", lambda model, **_: calls.append(model.name))
    ns.declare_table({"id": [*glue.db("d0"), "x"]})
    assert sorted(calls) == ["CreateTable", "GetDatabase"]
    calls.clear()
    ns.declare_table({"id": [*glue.db("d0"), "y"], "location": str(glue.root / "y.lance")})
    assert sorted(calls) == ["CreateTable", "GetCatalogs", "GetDatabases", *["GetTables"] * 3]
