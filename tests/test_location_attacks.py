"""Locations attacked: hostile text, foreign entries, races, drops (issue 38).

The invariants, checked on generated hostile locations (hypothesis, bounded examples):

- the parser either refuses the text (13) or returns a canonical :class:`Location` that
  parses to itself and holds no character Lance, S3 or IAM would read another way;
- an accepted location is what Lance opens (pylance writes exactly there);
- the vended session policy names exactly that prefix (judged by the session-policy
  emulator, whose matching follows IAM's documented wildcards);
- through every backend, in-process and through ``lance-metastore serve``, an accepted
  location lies below the caller's namespace directory (or an allowed prefix) and is the one
  the catalog keeps; a drop deletes nothing outside Lance's own files.

Races: two declares (or registers) at one location, exactly one wins, a few bounded rounds.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import lance
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lance_namespace import LanceNamespace
from lance_namespace.errors import ErrorCode, InvalidInputError, LanceNamespaceError
from support.confined_access import VIAS, Access, confined_access
from support.harness import Harness
from support.session_policy_s3 import aws_like, is_allowed, s3_request

from lance_metastore.rules.credentials import session_policy
from lance_metastore.rules.lance_files import LANCE_DIRECTORIES
from lance_metastore.rules.locations import Location, LocationPolicy

DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
REFUSED_TEXT = ("%", "?", "#", "*", "${", "\\")

# Pieces an attacker strings together: encodings, dot segments, IAM and URL metacharacters,
# unicode (combining, right-to-left, full-width), and plain names.
ATOMS = [
    "..",
    ".",
    "%2e%2e",
    "%2E.",
    "%2F",
    "%70ayroll",
    "%25",
    "%",
    "?x",
    "#x",
    "*",
    "?",
    "[ab]",
    "${aws:username}",
    "$",
    "\\..",
    "caf\u00e9",
    "cafe\u0301",
    "\u202e",
    "\uff0e\uff0e",
    "\u00a0",
    "t.lance",
    "db2",
    "x y",
    "a:b",
    "@",
    "~",
]
segment = st.one_of(
    st.sampled_from(ATOMS),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=6),
)
relative_path = st.lists(segment, min_size=1, max_size=4).flatmap(
    lambda parts: st.sampled_from(["/", "//"]).map(lambda sep: sep.join(parts))
)
SCHEMES = ["s3://", "S3://", "s3a://", "s3n://", "file://", "file:", "gs://", "", "/"]
BUCKETS = ["lake", "LAKE", "Lake", "la", "lake@evil", "lake:9000", "lake.example", ""]


@st.composite
def hostile_locations(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(SCHEMES))
    path = draw(relative_path)
    if scheme in ("", "/"):
        return scheme + path
    if scheme.startswith("file"):
        return scheme + draw(st.sampled_from(["", "/", "//localhost/", "///"])) + path
    return f"{scheme}{draw(st.sampled_from(BUCKETS))}/{path}"


PLAIN_NAMES = ["caf\u00e9", "x y", "[ab]", "a:b", "~", "a\u00a0z", "$"]
BOUNDED = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _parsed(text: str, root: str | None = "s3://lake/warehouse") -> Location | None:
    try:
        return Location.parse(text, root, "Table x")
    except InvalidInputError:
        return None


# ---------------------------------------------------------------------------------------------
# The value, on its own
# ---------------------------------------------------------------------------------------------


@BOUNDED
@given(hostile_locations())
def test_an_accepted_location_is_canonical_and_reads_one_way(text: str):
    location = _parsed(text)
    if location is None:
        return
    assert Location.parse(str(location), None, "again") == location  # a fixed point
    assert all(s not in ("", ".", "..") for s in location.segments)
    assert not any(mark in str(location) for mark in REFUSED_TEXT)
    assert location.scheme in ("file", "s3", "gs")
    if not location.local:
        assert location.authority == location.authority.lower()
        assert "@" not in location.authority
    if not text.startswith(("/", "file:")) and "://" not in text and ":" not in text:
        assert location.is_under(Location.parse("s3://lake/warehouse", None, "root"))


@BOUNDED
@given(hostile_locations())
def test_every_other_reader_of_location_text_agrees_with_the_one_parser(text: str):
    """The readers that must take text the parser has not judged (Hive's ``file:`` form,
    legacy entries' overlap, a path inside the store) give the parser's value wherever the
    parser accepts the text."""
    from lance_metastore.rules.locations import lenient, unqualified
    from lance_metastore.rules.versions import store_path

    location = _parsed(text, None)
    plain = unqualified(text)
    if location is None:
        assert plain == text or _parsed(str(plain), None) is None
        return
    assert Location.parse(plain, None, "plain") == location
    assert lenient(text) == location
    assert store_path(text) == location.key.lstrip("/")


def test_the_readers_of_stored_text_read_links_as_the_parser_does(tmp_path: Path):
    """Values keep their spelling (lexical); comparisons see through links."""
    from lance_metastore.rules.locations import lenient, unqualified

    (tmp_path / "mnt").mkdir()
    (tmp_path / "data").symlink_to(tmp_path / "mnt")
    real = Location.parse(str(tmp_path / "mnt" / "t.lance"), None, "t")
    assert unqualified(f"file://{tmp_path}/data/t.lance") == f"{tmp_path}/data/t.lance"
    assert unqualified("file://host/x") == "file://host/x"  # a host: left for the rules
    read = lenient(f"file://{tmp_path}/data/x/%2e%2e/t.lance?v=1")
    assert read == Location.parse(str(tmp_path / "data" / "t.lance"), None, "t")
    assert read.same(real) and read.is_under(real) and real.overlaps(read)


@BOUNDED
@given(hostile_locations())
def test_the_session_policy_names_exactly_the_accepted_prefix(text: str):
    location = _parsed(text)
    if location is None or location.scheme != "s3" or not location.segments:
        return
    bucket, key = location.authority, location.key
    policy = session_policy(bucket, key, "write")
    inside, sibling = f"/{bucket}/{key}/data/f.lance", f"/{bucket}/{key}x/data/f.lance"
    assert is_allowed(policy, *s3_request("GET", inside, ""))
    assert is_allowed(policy, *s3_request("PUT", inside, ""))
    assert not is_allowed(policy, *s3_request("GET", sibling, ""))
    assert not is_allowed(policy, *s3_request("PUT", f"/{bucket}/{key}", ""))
    parent = "/".join(location.segments[:-1])
    assert not is_allowed(policy, *s3_request("GET", f"/{bucket}/{parent}/other", ""))

    def listing(prefix: str) -> tuple[str, str, dict[str, str]]:
        # the query as a client encodes it: a key may hold '&', '+' or '='
        return s3_request("GET", f"/{bucket}", urlencode({"prefix": prefix}))

    assert is_allowed(policy, *listing(f"{key}/"))
    assert is_allowed(policy, *listing(f"{key}/_versions/"))
    assert not is_allowed(policy, *listing(key))
    assert not is_allowed(policy, *listing(f"{parent}/"))


@pytest.mark.parametrize(
    ("text", "refused_for"),
    [
        ("s3://lake/warehouse/%2e%2e/private/hr.lance", "percent encoding"),
        ("s3://lake/warehouse/secretns/payroll.lance?x", "query"),
        ("s3://lake/warehouse/secretns/payroll.lance#x", "fragment"),
        ("s3://lake/warehouse/secretns/%70ayroll.lance", "percent encoding"),
        ("s3://lake/warehouse/secretns%2Fpayroll.lance", "percent encoding"),
        ("s3://lake/warehouse/db2?x", "query"),
        ("s3://lake/warehouse/*", "wildcard"),
        ("s3://lake/warehouse/?x", "query"),
        ("s3://lake/warehouse/a/../b", "dot segment"),
    ],
)
def test_the_reported_attacks_are_refused_naming_the_character(text: str, refused_for: str):
    with pytest.raises(InvalidInputError, match=refused_for):
        Location.parse(text, None, "Table x")


def test_the_emulator_matches_as_iam_documents():
    """AWS: ``*`` any run of characters (``/`` too), ``?`` exactly one, nothing else special
    (``[ab]`` is literal, unlike shell globs); resources case-sensitive, actions not."""
    assert aws_like("arn:aws:s3:::b/t/*", "arn:aws:s3:::b/t/data/x")
    assert not aws_like("arn:aws:s3:::b/t/*", "arn:aws:s3:::b/t2/x")
    assert aws_like("a?c", "abc") and not aws_like("a?c", "ac") and not aws_like("a?c", "abbc")
    assert aws_like("t/[ab]/*", "t/[ab]/x") and not aws_like("t/[ab]/*", "t/a/x")
    assert not aws_like("arn:aws:s3:::b/T/*", "arn:aws:s3:::b/t/x")
    assert aws_like("s3:get*", "s3:GetObject", ignore_case=True)
    assert aws_like("db/t/", "db/t/") and not aws_like("db/t/", "db/t")
    policy = {"Statement": [{"Effect": "Allow", "Action": "S3:GetObject", "Resource": "*"}]}
    assert is_allowed(policy, "s3:GetObject", "arn:aws:s3:::b/k")


@settings(max_examples=12, deadline=None)
@given(
    st.lists(
        st.sampled_from(["caf\u00e9", "x y", "[ab]", "a:b", "~", "a\u00a0z", "$"]),
        min_size=1,
        max_size=2,
    )
)
def test_lance_opens_the_accepted_location(tmp_path_factory: pytest.TempPathFactory, names):
    """pylance writes where the canonical value says, both given the path and given it as
    a ``file://`` URL (the URL reader Lance applies to every object store)."""
    base = tmp_path_factory.mktemp("opens")
    location = Location.parse(str(base), None, "base").child(*names, "t.lance")
    assert location == Location.parse(str(location), None, "again")
    lance.write_dataset(DATA, "file://" + location.key)
    assert Path(location.key, "_versions").is_dir()
    assert lance.dataset(str(location)).count_rows() == 3


# ---------------------------------------------------------------------------------------------
# Every backend: in-process (confined) and through the REST server
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
    path = backend.db(backend.unique("atk"))
    ns.create_namespace({"id": path})
    return path


def _code(call: Callable[..., Any], request: dict[str, Any]) -> ErrorCode | None:
    try:
        call(request)
    except LanceNamespaceError as error:
        return error.code
    return None


def _message(call: Callable[..., Any], request: dict[str, Any]) -> str:
    with pytest.raises(LanceNamespaceError) as caught:
        call(request)
    return str(caught.value)


def _namespace_dir(backend: Harness, db: list[str]) -> Location:
    return Location.parse(str(backend.root / "/".join(db)), None, "dir")


def test_hostile_locations_through_every_backend(backend: Harness, access: Access, ns, db):
    """Generated suffixes below the namespace's directory: refused with 13, or kept in
    canonical form below that directory (what describe answers is what was checked)."""
    own = _namespace_dir(backend, db)
    seen: dict[Location, str] = {}
    counter = itertools.count()

    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
    @given(relative_path, st.sampled_from(["", "file://", "/"]))
    def attempt(suffix: str, form: str) -> None:
        text = f"{form}{own.key}/{suffix}" if form else f"{'/'.join(db)}/{suffix}"
        name = f"t{next(counter)}"
        request = {"id": [*db, name], "location": text}
        try:
            answer = ns.declare_table(request)
        except LanceNamespaceError as error:
            assert error.code in (ErrorCode.INVALID_INPUT, ErrorCode.TABLE_ALREADY_EXISTS), error
            if error.code == ErrorCode.TABLE_ALREADY_EXISTS:
                placed = Location.parse(text, str(backend.root), "x")
                assert any(placed.overlaps(other) for other in seen)
            return
        placed = Location.parse(answer.location, None, "answer")
        assert str(placed) == answer.location
        assert placed.is_under(own, strictly=True)
        assert ns.describe_table({"id": [*db, name]}).location == answer.location
        assert not any(placed.overlaps(other) for other in seen)
        seen[placed] = name

    attempt()


def test_a_location_must_lie_in_the_callers_namespace(backend: Harness, ns, db):
    """Pre-claiming another namespace's table (or its whole directory), or the own
    namespace's directory itself: 13, nothing created."""
    other = backend.db(backend.unique("owner"))
    ns.create_namespace({"id": other})
    theirs = _namespace_dir(backend, other)
    for target in (theirs.child("q4_forecast.lance"), theirs, _namespace_dir(backend, db)):
        request = {"id": [*db, "grab"], "location": str(target)}
        assert "is not allowed" in _message(ns.declare_table, request)
    assert _code(ns.table_exists, {"id": [*db, "grab"]}) == ErrorCode.TABLE_NOT_FOUND
    ns.declare_table({"id": [*other, "q4_forecast"]})  # the owner still can


def test_entries_of_any_format_hold_their_location_and_stay_unnamed(backend: Harness, ns, db):
    """A Parquet table's directory is taken: declare, register or a default location over or
    inside it answers 5, and the message names no entry."""
    own = _namespace_dir(backend, db)
    parquet = own.child("sales_pq")
    backend.create_foreign_table(db, "sales_pq", str(parquet), table_type="PARQUET")
    for target in (parquet, parquet.child("sub.lance")):
        request = {"id": [*db, "alias"], "location": str(target)}
        message = _message(ns.declare_table, request)
        assert _code(ns.declare_table, request) == ErrorCode.TABLE_ALREADY_EXISTS
        assert "sales_pq" not in message.replace(str(target), "")
    backend.create_foreign_table(db, "foreign", str(own.child("fresh.lance")), table_type=None)
    assert _code(ns.declare_table, {"id": [*db, "fresh"]}) == ErrorCode.TABLE_ALREADY_EXISTS


def test_a_missing_namespace_answers_1_before_any_location_check(backend: Harness, ns, db):
    ns.declare_table({"id": [*db, "t"]})
    taken = ns.describe_table({"id": [*db, "t"]}).location
    missing = backend.db(backend.unique("missing"))
    for location in (taken, "s3://lake/x?y", None):
        request = {"id": [*missing, "t"], "location": location}
        assert _code(ns.declare_table, request) == ErrorCode.NAMESPACE_NOT_FOUND


def test_a_drop_deletes_only_what_lance_wrote(backend: Harness, ns, db):
    ns.create_table({"id": [*db, "t"]}, _ipc(DATA))
    location = Path(ns.describe_table({"id": [*db, "t"]}).location)
    (location / "foreign.parquet").write_bytes(b"PAR1")
    (location.parent / "beside.txt").write_text("keep")
    assert {p.name for p in location.iterdir()} & LANCE_DIRECTORIES
    ns.drop_table({"id": [*db, "t"]})
    assert sorted(p.name for p in location.iterdir()) == ["foreign.parquet"]
    assert (location.parent / "beside.txt").read_text() == "keep"
    ns.create_table({"id": [*db, "u"]}, _ipc(DATA))
    clean = Path(ns.describe_table({"id": [*db, "u"]}).location)
    ns.drop_table({"id": [*db, "u"]})
    assert not clean.exists()  # nothing foreign there: the directory goes too


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("verb", ["declare", "register"])
def test_racing_requests_at_one_location_exactly_one_wins(backend: Harness, verb: str, tmp_path):
    """Two threads, two names, one location, a few rounds: one entry, the other answers 5."""
    ns = backend.connect(confine_locations="true")
    db = backend.db(backend.unique("race"))
    ns.create_namespace({"id": db})
    own = _namespace_dir(backend, db)
    for round_ in range(4):
        location = str(own.child(f"contested{round_}.lance"))
        if verb == "register":
            lance.write_dataset(DATA, location)
        barrier = threading.Barrier(2)
        outcomes: list[ErrorCode | None] = []

        def race(
            name: str,
            location: str = location,
            barrier: threading.Barrier = barrier,
            outcomes: list[ErrorCode | None] = outcomes,
        ) -> None:
            client = backend.connect(confine_locations="true")
            request = {"id": [*db, name], "location": location}
            call = client.declare_table if verb == "declare" else client.register_table
            barrier.wait()
            outcomes.append(_code(call, request))

        threads = [threading.Thread(target=race, args=(f"r{round_}_{n}",)) for n in "ab"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(outcomes, key=str) == sorted([None, ErrorCode.TABLE_ALREADY_EXISTS], key=str)
        holders = [n for n in ns.list_tables({"id": db}).tables if n.startswith(f"r{round_}_")]
        assert len(holders) == 1


def test_a_namespace_location_never_overlaps_another_namespace(backend: Harness, ns, db):
    """Confined, a namespace's location may not take another namespace's directory (or lie
    inside or around it): its tables would then sit among the other namespace's."""
    key = "location" if backend.name == "glue" else "database.location-uri"
    theirs = _namespace_dir(backend, db)
    for target in (theirs, theirs.child("inner"), Location.parse(str(backend.root), None, "r")):
        request = {"id": backend.db(backend.unique("nest")), "properties": {key: str(target)}}
        assert _code(ns.create_namespace, request) == ErrorCode.INVALID_INPUT
    path = backend.db(backend.unique("apart"))
    ns.create_namespace({"id": path, "properties": {key: "/".join(path)}})  # its own default
    for elsewhere in ("apart/dir", f"{'/'.join(path)}x"):
        request = {"id": backend.db(backend.unique("apart")), "properties": {key: elsewhere}}
        assert _code(ns.create_namespace, request) == ErrorCode.INVALID_INPUT


def test_a_legacy_entry_read_another_way_by_lance_keeps_the_data(backend: Harness, ns, db):
    """The probe's drop of ``...?x``: an entry stored before the rules, whose text Lance reads
    as another table's location. Its drop removes the entry and deletes nothing."""
    ns.create_table({"id": [*db, "victim"]}, _ipc(DATA))
    victim = ns.describe_table({"id": [*db, "victim"]}).location
    backend.create_foreign_table(db, "alias", f"file://{victim}?x", table_type="lance")
    dropped = ns.drop_table({"id": [*db, "alias"]})
    kept = dropped.properties.get("data_kept")  # absent where Lance does not open it at all
    assert kept is None or "cannot be resolved" in kept
    assert _code(ns.table_exists, {"id": [*db, "alias"]}) == ErrorCode.TABLE_NOT_FOUND
    assert lance.dataset(victim).count_rows() == 3


def test_stored_text_the_rules_refuse_is_compared_as_lance_reads_it():
    from lance_metastore.rules.locations import lenient

    victim = Location.parse("s3://lake/warehouse/db2/t.lance", None, "x")
    for stored in ("s3://lake/warehouse/db2?x", "s3://lake/warehouse/x/%2e%2e/db2#f"):
        found = lenient(stored)
        assert found is not None and found.overlaps(victim)
    assert not lenient("s3://lake/warehouse/db3?x").overlaps(victim)  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# The second review's attacks (scripts nest.py, rename.py, symlink.py, test_legacy.py)
# ---------------------------------------------------------------------------------------------


def test_a_namespace_never_takes_a_later_namespaces_directory(backend: Harness, ns):
    """Mallory's namespace at ``<root>/victim`` (victim not created yet) would hold every
    table victim declares later: confined, a namespace's location is exactly its default
    directory, never another name's, never the root, never inside another's."""
    key = "location" if backend.name == "glue" else "database.location-uri"
    victim = backend.db(backend.unique("victim"))
    later = str(backend.root / "/".join(victim))
    for target in (later, f"{later}/inner", str(backend.root)):
        request = {"id": backend.db(backend.unique("a")), "properties": {key: target}}
        assert _code(ns.create_namespace, request) == ErrorCode.INVALID_INPUT
    ns.create_namespace({"id": victim})
    declared = ns.declare_table({"id": [*victim, "payroll"]})
    lance.write_dataset(DATA, declared.location)
    mallory = backend.db(backend.unique("a"))
    ns.create_namespace({"id": mallory})
    alias = {"id": [*mallory, "alias"], "location": declared.location}
    assert _code(ns.declare_table, alias) == ErrorCode.INVALID_INPUT
    assert lance.dataset(declared.location).count_rows() == 3


def test_a_namespace_made_before_the_rule_inside_a_default_directory_blocks_it(
    backend: Harness, ns
):
    """A namespace created unconfined at ``<root>/victim`` (before the rule): victim's
    creation is then refused (13), never made to share the directory."""
    key = "location" if backend.name == "glue" else "database.location-uri"
    victim = backend.db(backend.unique("victim"))
    legacy = backend.db(backend.unique("a"))
    backend.connect().create_namespace(
        {"id": legacy, "properties": {key: str(backend.root / "/".join(victim))}}
    )
    assert _code(ns.create_namespace, {"id": victim}) == ErrorCode.INVALID_INPUT
    # and the legacy namespace owns nothing while confined: its tables are refused
    assert _code(ns.declare_table, {"id": [*legacy, "t"]}) == ErrorCode.INVALID_INPUT


def test_a_table_in_its_namespaces_directory_is_not_renamed_into_another(backend: Harness, ns, db):
    """rename.py: a$t renamed to b$t kept ``<root>/a/t.lance``; a declare of a$t at its
    default then shared the data and its drop deleted it. The rename is refused (13); an
    entry renamed before the rule still keeps its data from another entry's drop."""
    other = backend.db(backend.unique("b"))
    ns.create_namespace({"id": other})
    ns.create_table({"id": [*db, "t"]}, _ipc(DATA))
    rename = {"id": [*db, "t"], "new_namespace_id": other, "new_table_name": "t"}
    assert _code(ns.rename_table, rename) == ErrorCode.INVALID_INPUT
    assert _code(ns.table_exists, {"id": [*db, "t"]}) is None
    # as an old rename left it: b$u at a's directory, then a$u declared at its default
    location = str(_namespace_dir(backend, db).child("u.lance"))
    lance.write_dataset(DATA, location)
    backend.create_foreign_table(other, "u", location, table_type="lance")
    ns.declare_table({"id": [*db, "u"]})
    dropped = ns.drop_table({"id": [*db, "u"]})
    assert "another catalog entry" in dropped.properties["data_kept"]
    assert lance.dataset(location).count_rows() == 3


def test_data_operations_act_on_the_stored_location_as_todays_rules_read_it(
    backend: Harness, ns, db
):
    """test_legacy.py: an entry stored before the rules as ``<db>/%2e%2e/<victim>/...``:
    counting and deleting through it reached the victim. Every path that opens or writes
    a dataset parses the stored location first: 13, the victim untouched."""
    victim = backend.db(backend.unique("victim"))
    ns.create_namespace({"id": victim})
    ns.create_table({"id": [*victim, "payroll"]}, _ipc(DATA))
    target = ns.describe_table({"id": [*victim, "payroll"]}).location
    own = _namespace_dir(backend, db)
    for name, text in (
        ("dots", f"{own}/%2e%2e/{'/'.join(victim)}/payroll.lance"),
        ("query", f"file://{target}?x"),
        ("outside", target),  # parses, but lies outside the namespace's directory
    ):
        backend.create_foreign_table(db, name, text, table_type="lance")
        for call, request in (
            (ns.count_table_rows, {"id": [*db, name]}),
            (ns.delete_from_table, {"id": [*db, name], "predicate": "true"}),
        ):
            assert _code(call, request) == ErrorCode.INVALID_INPUT, (name, call)
    assert lance.dataset(target).count_rows() == 3


def test_a_symbolic_link_is_one_location(backend: Harness, tmp_path: Path):
    """symlink.py: with ``/data -> /mnt``, ``/mnt/shared/x`` and ``/data/shared/x`` are one
    directory; the alias through the link target was accepted and its drop deleted the
    victim. Local locations resolve their links once, in the value."""
    real = tmp_path / "mnt"
    (real / "shared").mkdir(parents=True)
    link = tmp_path / "data"
    link.symlink_to(real)
    ns = backend.connect(
        confine_locations="true", root=str(link / "lake"), allowed_locations=f"{link}/shared"
    )
    victim, mallory = backend.db(backend.unique("victim")), backend.db(backend.unique("a"))
    for path in (victim, mallory):
        ns.create_namespace({"id": path})
    lance.write_dataset(DATA, str(link / "shared" / "payroll.lance"))
    registered = ns.register_table(
        {"id": [*victim, "payroll"], "location": f"{link}/shared/payroll.lance"}
    )
    assert registered.location == str(link / "shared" / "payroll.lance")  # as given
    for text in (f"{link}/shared/payroll.lance", f"{real}/shared/payroll.lance"):
        alias = {"id": [*mallory, "alias"], "location": text}
        assert _code(ns.register_table, alias) == ErrorCode.TABLE_ALREADY_EXISTS
    assert lance.dataset(str(real / "shared" / "payroll.lance")).count_rows() == 3


def test_an_entry_stored_through_a_symbolic_link_takes_catalog_commits(
    backend: Harness, tmp_path: Path
):
    """A catalog-managed table declared, then its root moved behind a symbolic link: the
    catalog holds the link's text. Every answer gives that canonical text in the configured
    root's spelling (never the server's link target: clients elsewhere mount the lake
    there), the form the commit check compares a manifest path with, so a client that opens
    what describe answered commits through the catalog."""
    lake = tmp_path / "lake"
    ns = backend.connect(root=str(lake), managed_by="impl")
    db = backend.db(backend.unique("moved"))
    ns.create_namespace({"id": db})
    # the namespace's default directory: <root>/<database>, or <root>/<catalog>/<database>
    canonical = ns.declare_table({"id": [*db, "t"]}).location
    assert canonical.startswith(f"{lake}/") and canonical.endswith(f"/{db[-1]}/t.lance")
    moved = tmp_path / "mnt" / "lake"
    moved.parent.mkdir()
    if lake.exists():
        lake.rename(moved)
    lake.symlink_to(moved)
    moved.mkdir(parents=True, exist_ok=True)
    ns = backend.connect(root=str(lake), managed_by="impl")
    described = ns.describe_table({"id": [*db, "t"]})
    assert described.location == canonical and described.managed_versioning
    for _ in range(2):
        lance.write_dataset(DATA, namespace_client=ns, table_id=[*db, "t"], mode="append")
    assert lance.dataset(namespace_client=ns, table_id=[*db, "t"]).count_rows() == 6
    assert ns.describe_table({"id": [*db, "t"]}).properties["version"] == "2"
    assert ns.deregister_table({"id": [*db, "t"]}).location == canonical


@pytest.mark.parametrize("level", [2, 3])
def test_a_confined_hive_namespace_without_a_root_owns_its_database_directory(
    level: int, hive_metastore_uri: str, tmp_path: Path
):
    """Without ``root``, a confined Hive database's directory is the one HMS gives it,
    ``<warehouse>/<database>.db``: its tables go there and may lie only there; another
    name's directory and the warehouse itself (``default``'s directory) are never its own."""
    from lance_metastore import Hive2Namespace, Hive3Namespace

    cls = Hive3Namespace if level == 3 else Hive2Namespace
    ns = cls(uri=hive_metastore_uri, confine_locations="true")
    prefix = ["hive"] if level == 3 else []
    key = "database.location-uri"
    warehouse = Location.parse(
        ns.describe_namespace({"id": [*prefix, "default"]}).properties[key], None, "w"
    )
    name = f"noroot_{uuid.uuid4().hex[:8]}"
    db = [*prefix, name]
    ns.create_namespace({"id": db})
    own = warehouse.child(f"{name}.db")
    assert ns.describe_namespace({"id": db}).properties[key] == str(own)
    declared = ns.declare_table({"id": [*db, "d"]})
    assert declared.location == str(own.child("d.lance"))
    ns.create_table({"id": [*db, "t"]}, _ipc(DATA))
    assert ns.describe_table({"id": [*db, "t"]}).location == str(own.child("t.lance"))
    assert ns.count_table_rows({"id": [*db, "t"]}).count == 3
    inside = str(own.child("sub", "x.lance"))
    assert ns.declare_table({"id": [*db, "x"], "location": inside}).location == inside
    victim = f"victim_{uuid.uuid4().hex[:8]}"
    for elsewhere in (str(warehouse.child(f"{victim}.db", "t.lance")), str(tmp_path / "t")):
        request = {"id": [*db, "y"], "location": elsewhere}
        assert _code(ns.declare_table, request) == ErrorCode.INVALID_INPUT
    taken = {"id": [*prefix, name + "x"], "properties": {key: str(warehouse.child(f"{victim}.db"))}}
    assert _code(ns.create_namespace, taken) == ErrorCode.INVALID_INPUT
    assert _code(ns.declare_table, {"id": [*prefix, "default", "t"]}) == ErrorCode.INVALID_INPUT
    dropped = ns.drop_table({"id": [*db, "t"]})
    assert "data_kept" not in (dropped.properties or {})
    assert not os.path.exists(os.path.join(own.key, "t.lance", "_versions"))
    for table in ("d", "x"):
        ns.deregister_table({"id": [*db, table]})
    ns.drop_namespace({"id": db})


def test_a_drop_on_a_store_we_do_not_delete_file_by_file_keeps_the_data(backend: Harness, db):
    """A drop on az/gs/hdfs decided what to delete only after the entry was gone, and failed
    there (pyarrow reads no storage options). Now decided first: the data is kept and the
    answer says why. (Glue: HMS itself refuses an ``az`` location it has no file system for.)"""
    if backend.name != "glue":
        pytest.skip("HMS refuses locations of a store it has no file system for")
    unconfined = backend.connect()
    location = "az://container/lake/t.lance"
    unconfined.declare_table(
        {"id": [*db, "t"], "location": location, "properties": {"managed_by": "impl"}}
    )
    # as if it held a version: the catalog says so for a managed table
    entry = unconfined._catalog_get_table(db, "t")  # type: ignore[attr-defined]
    unconfined._catalog_write_table(  # type: ignore[attr-defined]
        db, entry, dataclasses.replace(entry, parameters={**entry.parameters, "version": "1"})
    )
    dropped = unconfined.drop_table({"id": [*db, "t"]})
    assert "deletes Lance's files only on" in dropped.properties["data_kept"]
    assert _code(unconfined.table_exists, {"id": [*db, "t"]}) == ErrorCode.TABLE_NOT_FOUND


def test_a_listing_skips_opening_a_legacy_entry(backend: Harness, ns, db):
    """A listing without declared tables opens each table: one whose stored text today's
    rules refuse is never opened, and does not break the listing."""
    ns.create_table({"id": [*db, "t"]}, _ipc(DATA))
    location = ns.describe_table({"id": [*db, "t"]}).location
    backend.create_foreign_table(db, "legacy", f"file://{location}?x", table_type="lance")
    listed = ns.list_tables({"id": db, "include_declared": False}).tables
    assert listed == ["t"]


@pytest.mark.parametrize("junk", ["/data/odd%00name", "/data/odd%1f/t.lance", "file:///data/a%7f"])
def test_a_foreign_entry_no_reading_makes_a_place_of_fails_closed(backend: Harness, ns, db, junk):
    """One entry anywhere whose stored text decodes to a control character (made with the
    catalog's own client) counts as overlapping everything: drops keep their data and a
    namespace creation answers 13, neither answers 18 nor names the entry."""
    junk_db = backend.db(backend.unique("junk"))
    ns.create_namespace({"id": junk_db})
    backend.create_foreign_table(junk_db, "odd", junk, table_type=None)
    ns.create_table({"id": [*db, "t"]}, _ipc(DATA))
    location = ns.describe_table({"id": [*db, "t"]}).location
    dropped = ns.drop_table({"id": [*db, "t"]})
    assert "points at it" in dropped.properties["data_kept"]
    assert lance.dataset(location).count_rows() == 3
    request = {"id": backend.db(backend.unique("fresh"))}
    assert _code(ns.create_namespace, request) == ErrorCode.INVALID_INPUT
    assert "odd" not in _message(ns.create_namespace, request)


@settings(max_examples=40, deadline=None)
@given(st.text(st.characters(max_codepoint=0x9F, categories=["Cc"]), min_size=1, max_size=3))
def test_a_callers_location_with_a_control_character_is_13(control: str):
    for text in (f"/lake/a{control}b", f"s3://lake/a{control}b", f"/lake/a%{ord(control[0]):02x}"):
        with pytest.raises(InvalidInputError):
            Location.parse(text, "/lake", "t")


def test_a_link_in_the_namespaces_directory_never_places_a_table_elsewhere(
    backend: Harness, ns, db
):
    """A link named ``<table>.lance`` in the caller's directory leading into another
    namespace's: the default location is checked for ownership as a given one is (13 for
    both), and neither refusal names where the link leads."""
    victim = backend.db(backend.unique("victim"))
    ns.create_namespace({"id": victim})
    own, theirs = _namespace_dir(backend, db), _namespace_dir(backend, victim)
    Path(own.key).mkdir(parents=True, exist_ok=True)
    Path(own.key, "grab.lance").symlink_to(Path(theirs.key, "payroll.lance"))
    for request in ({"id": [*db, "grab"]}, {"id": [*db, "x"], "location": f"{own}/grab.lance"}):
        assert _code(ns.declare_table, request) == ErrorCode.INVALID_INPUT
        assert "payroll" not in _message(ns.declare_table, request)
    assert _code(ns.table_exists, {"id": [*db, "grab"]}) == ErrorCode.TABLE_NOT_FOUND
    ns.declare_table({"id": [*victim, "payroll"]})  # the owner still can


def test_a_claim_on_a_location_excludes_declares_inside_and_around_it(backend: Harness, tmp_path):
    """The claim a declare takes is in the server's claim store under the root, and covers
    nested locations: while another request holds ``x.lance`` (or a location inside it), a
    declare inside (or around) it answers 5 and writes nothing at the location."""
    from lance_metastore.rules import claims

    ns = backend.connect(confine_locations="true")
    db = backend.db(backend.unique("nest"))
    ns.create_namespace({"id": db})
    own = _namespace_dir(backend, db)
    store = claims.store_under(Location.parse(str(backend.root), None, "root"))
    outer, inner = own.child("x.lance"), own.child("x.lance", "y.lance")
    for held, placed in ((outer, inner), (inner, outer)):
        release = claims.claim(held, store, {})
        try:
            request = {"id": [*db, "t"], "location": str(placed)}
            assert _code(ns.declare_table, request) == ErrorCode.TABLE_ALREADY_EXISTS
            assert not Path(outer.key).exists()
        finally:
            release()
    ns.declare_table({"id": [*db, "t"], "location": str(inner)})


def test_no_table_or_namespace_lies_in_the_servers_claim_store(backend: Harness, tmp_path):
    """``<root>/.lance-metastore/claims`` is the claim store: a table placed there (even under an
    ``allowed_locations`` prefix holding the root, or unconfined) could hold or forge every
    claim, and a namespace there would own it. Both answer 13 naming the rule; nothing is
    created."""
    root = Location.parse(str(backend.root), None, "root")
    inside = root.child(".lance-metastore", "claims", "0" * 64)
    for confined in (
        {"confine_locations": "true", "allowed_locations": str(backend.root.parent)},
        {"confine_locations": "false"},
    ):
        ns = backend.connect(**confined)
        db = backend.db(backend.unique("own"))
        ns.create_namespace({"id": db})
        request = {"id": [*db, "squat"], "location": str(inside)}
        assert _code(ns.declare_table, request) == ErrorCode.INVALID_INPUT
        assert "server's claim store" in _message(ns.declare_table, request)
        assert _code(ns.table_exists, {"id": [*db, "squat"]}) == ErrorCode.TABLE_NOT_FOUND
        assert not Path(inside.key).exists()
    s3 = LocationPolicy(root=Location.parse("s3://lake/warehouse", None, "root"))
    db_dir = Location.parse("s3://lake/warehouse/db", None, "d")
    store = Location.parse("s3://lake/warehouse/.lance-metastore/claims", None, "t")
    assert not s3.owns(store.child("0" * 64), db_dir)
    assert not s3.places_namespace(store, (".lance-metastore", "claims"))
    assert s3.owns(db_dir.child("t.lance"), db_dir)


def test_a_location_deeper_than_the_limit_is_13_and_claims_nothing(backend: Harness, tmp_path):
    """A claim holds one file per ancestor: a caller's location of more than MAX_SEGMENTS
    segments answers 13 before any claim (nothing in the claim store)."""
    from lance_metastore.rules.locations import MAX_SEGMENTS

    ns = backend.connect(confine_locations="true")
    db = backend.db(backend.unique("deep"))
    ns.create_namespace({"id": db})
    own = _namespace_dir(backend, db)
    store = Path(backend.root, ".lance-metastore", "claims")
    before = set(store.iterdir()) if store.exists() else set()
    deep = own.child(*[f"d{i}" for i in range(MAX_SEGMENTS)], "t.lance")
    request = {"id": [*db, "deep"], "location": str(deep)}
    assert _code(ns.declare_table, request) == ErrorCode.INVALID_INPUT
    assert "path segments" in _message(ns.declare_table, request)
    assert (set(store.iterdir()) if store.exists() else set()) == before
