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
from hypothesis import given, settings
from hypothesis import strategies as st
from lance_namespace import LanceNamespace
from lance_namespace.errors import ErrorCode, InvalidInputError, LanceNamespaceError
from support.confined_access import VIAS, Access, confined_access
from support.harness import Harness

from lance_metastore import GlueNamespace
from lance_metastore.rules.locations import Location, LocationPolicy


def resolve(given: str, root: str | None, what: str) -> str:
    """The canonical text of a location (what the catalog stores)."""
    return str(Location.parse(given, root, what))


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
        ("/lake//a/b/t.lance/", None, "/lake/a/b/t.lance"),
        ("file:///lake//t.lance/", None, "/lake/t.lance"),
        ("file:/lake/t.lance", None, "/lake/t.lance"),
        ("FILE://localhost/lake/t", None, "/lake/t"),
        ("S3://bucket/lake/x/t.lance/", None, "s3://bucket/lake/x/t.lance"),
        ("s3a://bucket/lake/t.lance", None, "s3://bucket/lake/t.lance"),
        ("hdfs://nn:8020/w/t", None, "hdfs://nn:8020/w/t"),
        ("rel_data/t.lance", "/lake", "/lake/rel_data/t.lance"),
        ("rel/t.lance", "s3://bucket/lake/", "s3://bucket/lake/rel/t.lance"),
        ("s3://bucket/lake/caf\u00e9 [1]/t.lance", None, "s3://bucket/lake/caf\u00e9 [1]/t.lance"),
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
        ("/../etc", "dot segment"),
        ("/lake/./t", "dot segment"),
        ("s3://bucket/../other", "dot segment"),
        ("s3://lake/warehouse/%2e%2e/private/hr.lance", "percent encoding"),
        ("s3://lake/warehouse/secretns%2Fpayroll.lance", "percent encoding"),
        ("s3://lake/warehouse/secretns/payroll.lance?x", "query"),
        ("s3://lake/warehouse/db2#x", "fragment"),
        ("s3://lake/warehouse/*", "wildcard"),
        ("s3://lake/warehouse/${aws:username}", "policy variable"),
        ("s3://lake/a//b", "empty segment"),
        ("s3://Lake/a", "lower case"),
        ("s3://user@lake/a", "user information"),
        ("s3://la/a", "not a valid S3 bucket name"),
        ("file:///a\\..\\b", "backslash"),
        ("", "non-empty string"),
        ("/a\nb", "control character"),
        ("/a\x85b", "control character"),
    ],
)
def test_unresolvable_locations_answer_13_with_the_reason(given: str, reason: str):
    with pytest.raises(InvalidInputError, match=reason):
        resolve(given, None, "Table x")


def _at(text: str) -> Location:
    return Location.parse(text, None, "x")


def test_prefixes_match_whole_segments():
    assert _at("/lake/a/t.lance").is_under(_at("/lake/a"))
    assert _at("/lake/a").is_under(_at("/lake/a"))
    assert not _at("/lake/a").is_under(_at("/lake/a"), strictly=True)
    assert not _at("/lake/ab").is_under(_at("/lake/a"))
    assert not _at("s3://other/lake/a").is_under(_at("s3://bucket/lake"))
    assert _at("s3a://bucket/lake/t").is_under(_at("s3://bucket/lake"))  # one store
    assert not _at("hdfs://127.0.0.1:1/lake").is_under(_at("hdfs://nn:8020/lake"))
    assert _at("/lake/t.lance").overlaps(_at("/lake/t.lance/data"))
    assert _at("/lake/t").overlaps(_at("/lake"))
    assert not _at("/lake/t1.lance").overlaps(_at("/lake/t2.lance"))
    assert _at("file:///lake/a/t") == _at("/lake/a/t")


def test_policy_owns_below_the_namespace_or_an_allowed_prefix(tmp_path: Path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "db").mkdir(parents=True)
    outside.mkdir()
    (root / "db" / "link").symlink_to(outside)
    policy = LocationPolicy(root=_at(str(root)), extra=(_at("s3://bucket/lake"),), enforced=True)
    db = _at(str(root / "db"))
    assert policy.owns(_at(str(root / "db" / "t.lance")), db)
    assert not policy.owns(db, db)  # the namespace's directory itself is no table's
    assert not policy.owns(_at(str(root / "other" / "t.lance")), db)  # another namespace's
    assert policy.owns(_at("s3://bucket/lake/t.lance"), db)
    assert not policy.owns(_at("s3://bucket/lakehouse/t.lance"), db)
    assert not policy.owns(_at(str(outside / "t.lance")), db)
    assert not policy.owns(_at(str(root / "db" / "link" / "t.lance")), db)  # no way out
    assert not LocationPolicy(root=db).enforced
    assert LocationPolicy(root=db).owns(_at("/anywhere"), db)  # off: everything
    with pytest.raises(InvalidInputError, match="scheme 'http'"):
        raise policy.refuse(_at("http://127.0.0.1:1/t"), "Table x", "http://127.0.0.1:1/t")
    with pytest.raises(InvalidInputError, match="allowed_locations"):
        raise policy.refuse(_at(str(outside)), "Table x", str(outside))


def test_namespace_directories_never_nest(tmp_path: Path):
    """A confined namespace's directory is exactly <root>/<name>, or one segment below an
    allowed prefix apart from the root: never the root, never inside another's default."""
    root = tmp_path / "root"
    inside = f"{root}/shared"
    policy = LocationPolicy(
        root=_at(str(root)), extra=(_at("s3://bucket/lake"), _at(inside)), enforced=True
    )
    assert policy.places_namespace(_at(f"{root}/a"), ("a",))
    assert not policy.places_namespace(_at(f"{root}/victim"), ("a",))  # another's default
    assert not policy.places_namespace(_at(str(root)), ("a",))
    assert not policy.places_namespace(_at(f"{root}/a/b"), ("a",))
    assert policy.places_namespace(_at("s3://bucket/lake/anything"), ("a",))
    assert not policy.places_namespace(_at("s3://bucket/lake"), ("a",))
    assert not policy.places_namespace(_at("s3://bucket/lake/x/y"), ("a",))
    assert not policy.places_namespace(_at(f"{inside}/x"), ("a",))  # the prefix meets root
    assert policy.places_namespace(_at(f"{root}/c/d"), ("c", "d"))
    assert LocationPolicy(root=None).places_namespace(_at("/anywhere"), ("a",))  # off


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


@pytest.fixture(params=VIAS)
def access(request: pytest.FixtureRequest, backend: Harness) -> Iterator[Access]:
    with confined_access(backend, request.param) as chosen:
        yield chosen


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
        reason = "dot segment" if ".." in location else "is not allowed"
        assert reason in message_of(ns.declare_table, request)
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
    own = "/".join(db)  # the namespace's directory, relative to root
    lance.write_dataset(DATA, str(backend.root / own / "rel_data" / "t.lance"))
    registered = ns.register_table({"id": [*db, "t"], "location": f"{own}/rel_data/t.lance"})
    assert registered.location == str(backend.root / own / "rel_data" / "t.lance")
    assert ns.describe_table({"id": [*db, "t"]}).location == registered.location
    assert _row_count(ns, [*db, "t"]) == 3
    declared = ns.declare_table({"id": [*db, "d"], "location": f"{own}/tables//d.lance/"})
    assert declared.location == str(backend.root / own / "tables" / "d.lance")
    for elsewhere in ("../escape.lance", "./t.lance", "rel_data/t.lance"):
        escape = {"id": [*db, "e"], "location": elsewhere}
        assert code_of(ns.declare_table, escape) == ErrorCode.INVALID_INPUT

    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    rootless = access.connect(root=None)
    for call in (rootless.declare_table, rootless.register_table):
        request = {"id": [*db, "r"], "location": "r.lance"}
        # Hive without a root: the database's directory is HMS's own, which a confined
        # namespace may not have (HMS nests every database inside default's), so 13 first.
        assert code_of(call, request) == ErrorCode.INVALID_INPUT
        if backend.name == "glue":
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

    nested = {"id": path, "properties": {key: "dbs/placed"}}  # not its default directory
    assert code_of(ns.create_namespace, nested) == ErrorCode.INVALID_INPUT
    own = "/".join(path)  # confined: exactly the namespace's default directory
    ns.create_namespace({"id": path, "properties": {key: own}})
    placed = str(backend.root / own)
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


def test_a_declare_reads_only_its_own_namespace(glue: Harness):
    """The cost docs/locations.md gives: confined, a declare (default or with a location in the
    namespace's own directory) reads that namespace once (GetDatabase, one GetTables per 100
    entries), whatever the other namespaces hold; an unconfined declare at a location of the
    caller's choice searches the catalog."""
    ns = glue.connect(confine_locations="true")
    for d in range(3):
        ns.create_namespace({"id": glue.db(f"d{d}")})
        for t in range(5):
            ns.declare_table({"id": [*glue.db(f"d{d}"), f"t{t}"]})
    calls: list[str] = []
    ns.glue.meta.events.register("before-call.glue", lambda model, **_: calls.append(model.name))
    ns.declare_table({"id": [*glue.db("d0"), "x"]})
    assert sorted(calls) == ["CreateTable", "GetDatabase", "GetTables"]
    calls.clear()
    own = str(glue.root / "/".join(glue.db("d0")) / "placed" / "y.lance")
    ns.declare_table({"id": [*glue.db("d0"), "y"], "location": own})
    assert sorted(calls) == ["CreateTable", "GetDatabase", "GetTables"]
    unconfined = glue.connect()
    unconfined.glue.meta.events.register(
        "before-call.glue", lambda model, **_: calls.append(model.name)
    )
    calls.clear()
    unconfined.declare_table({"id": [*glue.db("d0"), "z"], "location": str(glue.root / "z")})
    assert calls.count("GetTables") == 3


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["lake", "x", "..", ".", "%2e%2e", "a?", "#f", "db.db", "db.db?x", ""]),
        max_size=4,
    ),
    st.sampled_from(["/", "file:///", "hdfs://nn/", "s3://lake/"]),
)
def test_hms_own_database_layout_is_judged_on_the_parsed_location(parts: list[str], form: str):
    """A Hive database location counts as HMS's own ``<parent>/<db>.db`` layout (its
    tables then go under the root) only when the one parser reads it so, never by text."""
    from lance_metastore.hive.namespace import _metastore_default

    text = form + "/".join([*parts, "db.db"])
    try:
        parsed: Location | None = Location.parse(text, None, "t")
    except InvalidInputError:
        parsed = None
    expected = parsed is not None and parsed.segments[-1:] == ("db.db",)
    assert _metastore_default(text, "db") == expected
    assert _metastore_default(text, "default")
