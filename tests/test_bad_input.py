"""Bad input, found by property-based tests (hypothesis), for every backend.

Identifiers with empty parts, the delimiter inside a name, unicode, control characters, very
long names, ``..`` and ``/``; unknown or malformed properties; bad page tokens and limits;
tables that are not Lance tables; garbage requests. Every case answers a ``lance_namespace``
error with the right code and changes nothing: after every example the catalog, read with its
own client, and the files under the root are exactly as before (``Harness.snapshot``). No
other exception type may escape.

The catalog is deliberately not reset between examples: bad input must leave it as it was.
Each family has a property test and, where a known value once slipped through, a plain test
that tries the known values every run.

Codes, where the specs leave room:
- an id with too many or too few parts for the backend names nothing that could exist: 13;
- a table that is not a Lance table: 13 for every operation on it (specs: describe, deregister,
  drop; table_exists is describe without the answer), 5 to declare or register a Lance table
  under its name, 13 to register over it (OVERWRITE);
- a page token is a position in the sorted names, not a handle: given to another listing it
  continues that listing after the same name. Limit 0 means no limit (as Lance's own
  namespaces), any larger whole number is fine; negative or non-integer limits answer 13;
- unknown keys in a request are ignored (newer clients send fields older servers do not know),
  a known field of the wrong type answers 13.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import string
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

import lance
import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from lance_namespace import (
    BatchDeleteTableVersionsRequest,
    CreateNamespaceRequest,
    CreateTableVersionRequest,
    DeclareTableRequest,
    DeregisterTableRequest,
    DescribeNamespaceRequest,
    DescribeTableRequest,
    DescribeTableVersionRequest,
    DropNamespaceRequest,
    DropTableRequest,
    ListNamespacesRequest,
    ListTablesRequest,
    ListTableVersionsRequest,
    NamespaceExistsRequest,
    RegisterTableRequest,
    TableExistsRequest,
)
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from pydantic import BaseModel
from support.examples import examples
from support.harness import HIVE_NAME, Harness
from support.manifests import staging_of

from lance_metastore.rules.locations import Location

INVALID = ErrorCode.INVALID_INPUT
DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
DELIMITER = "$"

# Tables of the database every test works in, and of a second one (for tokens of another
# parent); "orders" holds data, "managed" has three catalog-managed versions.
TABLES = ["alpha", "bravo", "charlie", "managed", "orders"]
OTHER_TABLES = ["delta", "echo", "foxtrot"]
FOREIGN = "iceberg"

# How many parts an id may have (specs: Glue nests catalogs freely; Hive 2 is database ->
# table; Hive 3 catalog -> database -> table). An id of another length names nothing: 13.
TABLE_PARTS = {"glue": range(2, 99), "hive2": range(2, 3), "hive3": range(3, 4)}
NAMESPACE_PARTS = {"glue": range(0, 99), "hive2": range(0, 2), "hive3": range(0, 3)}
# Glue without its catalog API (moto as shipped, a policy without catalog actions) serves the
# root catalog alone: database -> table, like Hive 2.
ROOT_CATALOG_ONLY = {"namespace": range(0, 2), "table": range(2, 3)}


def id_lengths(backend: Harness, kind: str) -> range:
    if not getattr(backend, "catalog_api", True):
        return ROOT_CATALOG_ONLY[kind]
    return (NAMESPACE_PARTS if kind == "namespace" else TABLE_PARTS)[backend.name]


REQUEST_MODELS: dict[str, type[BaseModel]] = {
    "create_namespace": CreateNamespaceRequest,
    "describe_namespace": DescribeNamespaceRequest,
    "namespace_exists": NamespaceExistsRequest,
    "drop_namespace": DropNamespaceRequest,
    "list_namespaces": ListNamespacesRequest,
    "list_tables": ListTablesRequest,
    "declare_table": DeclareTableRequest,
    "register_table": RegisterTableRequest,
    "describe_table": DescribeTableRequest,
    "table_exists": TableExistsRequest,
    "deregister_table": DeregisterTableRequest,
    "drop_table": DropTableRequest,
    "create_table_version": CreateTableVersionRequest,
    "list_table_versions": ListTableVersionsRequest,
    "describe_table_version": DescribeTableVersionRequest,
    "batch_delete_table_versions": BatchDeleteTableVersionsRequest,
}
NAMESPACE_OPERATIONS = list(REQUEST_MODELS)[:6]
TABLE_OPERATIONS = list(REQUEST_MODELS)[6:]


# ---------------------------------------------------------------------------------------------
# 1. The world every test starts from, and the "nothing changed" oracle
# ---------------------------------------------------------------------------------------------


class Unchanged:
    """Asserts that nothing in the catalog or under the root changed since the last check.

    One snapshot per check: each check compares with the state the previous one saw, so a
    failing example is the one that made the change, even while hypothesis shrinks.
    """

    def __init__(self, backend: Harness) -> None:
        self.backend = backend
        self.last = backend.snapshot()

    def check(self, what: str) -> None:
        now = self.backend.snapshot()
        before, self.last = self.last, now
        if now != before:
            pytest.fail(f"{what} changed the catalog:\n" + "\n".join(_diff(before, now)))

    def rebase(self) -> None:
        """After a deliberate change (test set-up or clean-up)."""
        self.last = self.backend.snapshot()


def _diff(before: Any, after: Any, path: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        lines = []
        for key in sorted(set(before) | set(after), key=str):
            if key not in after:
                lines.append(f"  removed {path}/{key}")
            elif key not in before:
                lines.append(f"  added {path}/{key}: {after[key]!r:.200}")
            else:
                lines += _diff(before[key], after[key], f"{path}/{key}")
        return lines
    return [] if before == after else [f"  {path}: {before!r:.200} -> {after!r:.200}"]


@dataclass
class World:
    ns: Any
    db: list[str]  # holds TABLES and a foreign table
    other: list[str]  # holds OTHER_TABLES
    empty: list[str]  # an empty namespace (drop it by mistake and it is gone)
    parent: list[str]  # where db, other and empty are listed
    dataset: str  # a Lance dataset no table points at (for register_table)
    unchanged: Unchanged

    def table(self, name: str) -> list[str]:
        return [*self.db, name]

    @property
    def names_in_use(self) -> set[str]:
        namespaces = {self.db[-1], self.other[-1], self.empty[-1], "default", "hive"}
        return {*TABLES, *OTHER_TABLES, FOREIGN, *namespaces}


@pytest.fixture
def world(backend: Harness) -> Any:
    ns = backend.connect()
    db, other, empty = backend.db("sales"), backend.db("other"), backend.db("empty")
    ns.create_namespace({"id": empty})
    for path, names in ((db, TABLES), (other, OTHER_TABLES)):
        ns.create_namespace({"id": path})
        for name in names:
            properties = {"managed_by": "impl"} if name == "managed" else {}
            ns.declare_table({"id": [*path, name], "properties": properties})
    orders = [*db, "orders"]
    lance.write_dataset(DATA, ns.describe_table({"id": orders}).location)
    ns.describe_table({"id": orders})  # records its columns now, not during a test
    for version in (1, 2, 3):
        ns.create_table_version(
            {
                "id": [*db, "managed"],
                "version": version,
                "manifest_path": staging_of(ns, [*db, "managed"], version),
            }
        )
    backend.create_foreign_table(db, FOREIGN, str(backend.root / "elsewhere" / FOREIGN))
    dataset = str(backend.root / "loose.lance")
    lance.write_dataset(DATA, dataset)
    yield World(ns, db, other, empty, db[:-1], dataset, Unchanged(backend))
    ns.close()


# ---------------------------------------------------------------------------------------------
# Calling an operation, and the strategies
# ---------------------------------------------------------------------------------------------


def attempt(ns: Any, operation: str, request: Any) -> Any:
    """The operation's response or its namespace error; any other exception fails the test."""
    try:
        return getattr(ns, operation)(request)
    except LanceNamespaceError as error:
        return error
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # anything else escaping is the bug this suite hunts
        pytest.fail(
            f"{operation}({request!r:.300}) let {type(error).__name__} escape: {error!s:.300}",
            pytrace=False,
        )


def expect_error(ns: Any, operation: str, request: Any, code: int = INVALID) -> None:
    answer = attempt(ns, operation, request)
    got = (
        f"{type(answer).__name__} (code {answer.code}): {answer!s:.300}"
        if isinstance(answer, LanceNamespaceError)
        else f"success {answer!r:.300}"
    )
    assert isinstance(answer, LanceNamespaceError) and answer.code == code, (
        f"{operation}({request!r:.300}) answered {got}; expected code {int(code)}"
    )


def with_id(world: World, operation: str, ident: Any) -> dict[str, Any]:
    """A request of ``operation`` that is valid but for its id."""
    extra: dict[str, Any] = {
        "drop_namespace": {"behavior": "CASCADE"},  # would empty a namespace, if it got there
        "register_table": {"location": world.dataset},
        "create_table_version": {
            "version": 4,
            "manifest_path": staging_of(world.ns, world.table("managed"), 4),
        },
        "describe_table_version": {"version": 1},
        "batch_delete_table_versions": {"ranges": [{"start_version": 1, "end_version": 1}]},
    }.get(operation, {})
    return {"id": ident, **extra}


NO_DELIMITER = st.characters(exclude_characters=DELIMITER)
SHORT_TEXT = st.text(NO_DELIMITER, max_size=8)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
NOT_A_STRING = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.binary(max_size=4),
    st.lists(st.text(max_size=4), max_size=2),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
)


def _inside(characters: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A name with one of ``characters`` somewhere in it."""
    return st.builds(lambda a, c, b: a + c + b, SHORT_TEXT, characters, SHORT_TEXT)


def bad_names(backend: Harness) -> st.SearchStrategy[str]:
    """Names every backend refuses (none holds the delimiter)."""
    longest = backend.max_name_length
    long_alphabet = NO_DELIMITER if backend.name == "glue" else string.ascii_lowercase + "_"
    spaces = st.sampled_from(" \t\n\r\u00a0\u2003\u3000\u2028")
    strategies = [
        st.sampled_from(["", ".", ".."]),
        _inside(st.sampled_from("/\\")),
        _inside(st.characters(categories=["Cc", "Cf", "Cs", "Co", "Cn"])),
        st.builds(lambda s, name: s + name, spaces, SHORT_TEXT),
        st.builds(lambda name, s: name + s, SHORT_TEXT, spaces),
        st.text(long_alphabet, min_size=longest + 1, max_size=longest + 40),
    ]
    if backend.name != "glue":  # Hive: ASCII letters, digits and underscores only
        strategies.append(
            st.text(NO_DELIMITER, min_size=1, max_size=12).filter(
                lambda name: not HIVE_NAME.fullmatch(name)
            )
        )
        strategies.append(st.sampled_from(["\u212a", "with-dash", "with space", "ünïcödé"]))
    return st.one_of(strategies)


def _as_given(parts: list[Any], joined: bool) -> Any:
    """The list form, or the ``$``-joined string when asked and the parts allow it."""
    if joined and all(isinstance(p, str) for p in parts) and DELIMITER.join(parts):
        return DELIMITER.join(parts)
    return parts


def bad_ids(backend: Harness, shape: list[str], lengths: range) -> st.SearchStrategy[Any]:
    """Ids of the given shape made bad in one of the ways the issue lists."""
    index = st.integers(0, len(shape) - 1)

    def replaced(i: int, value: Any, joined: bool) -> Any:
        return _as_given([*shape[:i], value, *shape[i + 1 :]], joined)

    def empty_part(i: int, form: str) -> Any:
        # The delimiter inside an element (or the joined string) leaves an empty part.
        element = form.replace("x", shape[i])
        return [*shape[:i], element, *shape[i + 1 :]]

    def joined_with_empty_part(where: int) -> str:
        parts = [*shape]
        parts.insert(where, "")
        return DELIMITER.join(parts)

    wrong_lengths = [n for n in range(0, len(shape) + 3) if n not in lengths and n > 0]
    strategies = [
        st.builds(replaced, index, bad_names(backend), st.booleans()),
        st.builds(empty_part, index, st.sampled_from(["x$", "$x", "x$$x", "$", "$$"])),
        st.builds(joined_with_empty_part, st.integers(0, len(shape))),
        st.builds(replaced, index, NOT_A_STRING, st.just(False)),
        # The id itself of a wrong type (a set has no order: no path).
        NOT_A_STRING.filter(lambda v: not isinstance(v, (str, list, type(None)))),
        st.sets(st.sampled_from(shape), min_size=1),
        st.frozensets(st.sampled_from(shape), min_size=1),
    ]
    if wrong_lengths:
        names = st.sampled_from(["sales", "orders", "hive", "x1"])
        strategies.append(
            st.builds(
                _as_given,
                st.sampled_from(wrong_lengths).flatmap(
                    lambda n: st.lists(names, min_size=n, max_size=n)
                ),
                st.booleans(),
            )
        )
    if 0 not in lengths:
        strategies.append(st.sampled_from([[], "", None]))
    if backend.name == "glue":  # a catalog in the chain: 1-64 chars, no '.', not 'aws:...'
        catalog = st.one_of(
            _inside(st.just(".")),
            st.builds(lambda s: "aws:" + s, SHORT_TEXT),
            st.text(string.ascii_lowercase, min_size=65, max_size=80),
        )
        strategies.append(st.builds(lambda c, j: _as_given([c, *shape], j), catalog, st.booleans()))
    return st.one_of(strategies)


# ---------------------------------------------------------------------------------------------
# 2. Identifiers
# ---------------------------------------------------------------------------------------------


@settings(max_examples=examples(25))
@given(data=st.data())
def test_bad_identifiers_answer_13_and_change_nothing(backend: Harness, world: World, data):
    namespace_id = data.draw(
        bad_ids(backend, world.db, id_lengths(backend, "namespace")), label="namespace id"
    )
    table_id = data.draw(
        bad_ids(backend, world.table("orders"), id_lengths(backend, "table")), label="table id"
    )
    for operation in NAMESPACE_OPERATIONS:
        expect_error(world.ns, operation, with_id(world, operation, namespace_id))
    for operation in TABLE_OPERATIONS:
        expect_error(world.ns, operation, with_id(world, operation, table_id))
    world.unchanged.check("bad identifiers")


# ---------------------------------------------------------------------------------------------
# 3. Arbitrary names against the catalog's own rules
# ---------------------------------------------------------------------------------------------


# Names worth trying every time: letters that lower-case into ASCII (KELVIN SIGN -> "k") or
# into two characters, title case, beyond the BMP, line separators, spaces at the ends.
TRICKY_NAMES = ["\u212a", "İstanbul", "ǅ", "Straße", "😀", "a\u2028b", "tab\there", "\u00a0x"]


def names(backend: Harness) -> st.SearchStrategy[str]:
    ascii_word = string.ascii_letters + string.digits + "_"
    longest = backend.max_name_length
    near_limit = NO_DELIMITER if backend.name == "glue" else ascii_word
    return st.one_of(
        st.text(NO_DELIMITER, max_size=16),  # anything, unicode and control characters included
        st.text(ascii_word, min_size=1, max_size=16),
        st.text(near_limit, min_size=longest - 1, max_size=longest + 1),
        st.sampled_from([*TRICKY_NAMES, *backend.odd_names, *backend.bad_names]),
    )


def everything(ns: Any, operation: str, request: dict[str, Any], limit: int | None = None) -> list:
    """Every item of a listing, page after page."""
    items, token = [], None
    for _ in range(1000):
        page = getattr(ns, operation)({**request, "limit": limit, "page_token": token})
        items += _items(page)
        token = page.page_token
        if not token:
            return items
    raise AssertionError(f"{operation} never stopped paging")


def _items(page: Any) -> list:
    for field in ("namespaces", "tables"):
        if hasattr(page, field):
            return list(getattr(page, field))
    return [version.version for version in page.versions]


@settings(max_examples=examples(30))
@given(data=st.data())
def test_names_follow_the_catalogs_rules(backend: Harness, world: World, data):
    name = data.draw(names(backend), label="name")
    assume(name.lower() not in world.names_in_use)
    check_name(backend, world, name)


def test_tricky_names_follow_the_catalogs_rules(backend: Harness, world: World):
    for name in [*TRICKY_NAMES, *backend.odd_names, *backend.bad_names]:
        check_name(backend, world, name)


def check_name(backend: Harness, world: World, name: str) -> None:
    """As a namespace and as a table name: accepted by the oracle, it works and round-trips,
    lower-cased; refused, it answers 13 and nothing changes."""
    ns, namespace, table = world.ns, backend.db(name), world.table(name)
    if not backend.accepts_name(namespace[-1]):
        expect_error(ns, "create_namespace", {"id": namespace})
    else:
        stored = namespace[-1].lower()  # both catalogs keep names lower-cased
        accepted(ns, "create_namespace", {"id": namespace})
        try:
            accepted(ns, "namespace_exists", {"id": [*namespace[:-1], stored]})
            accepted(ns, "describe_namespace", {"id": namespace})
            listed = everything(ns, "list_namespaces", {"id": namespace[:-1]})
            assert stored in listed, f"{name!r} created, not listed as {stored!r}: {listed}"
        finally:
            accepted(ns, "drop_namespace", {"id": namespace})
    world.unchanged.check(f"namespace {name!r}")

    if not backend.accepts_name(name) or not _reads_one_way_as_a_location(name.lower()):
        # a name the catalog refuses, or one its default location could not hold: Lance would
        # read the segment otherwise (a percent sign, a query mark, ...; see rules/locations)
        expect_error(ns, "declare_table", {"id": table})
    else:
        stored = name.lower()
        declared = accepted(ns, "declare_table", {"id": table})
        try:
            described = accepted(ns, "describe_table", {"id": [*world.db, stored]})
            assert described.table == stored, f"{name!r} described as {described.table!r}"
            accepted(ns, "table_exists", {"id": table})
            listed = everything(ns, "list_tables", {"id": world.db}, limit=2)
            assert stored in listed, f"{name!r} declared, not listed as {stored!r}: {listed}"
        finally:
            accepted(ns, "deregister_table", {"id": table})
            # The metastore makes the directory of a new table; deregistering leaves it.
            if os.path.isdir(declared.location):  # False for names too long for a file
                shutil.rmtree(declared.location)
    world.unchanged.check(f"table {name!r}")


def _reads_one_way_as_a_location(table_name: str) -> bool:
    """Whether ``<table>.lance`` is a segment of a default location (the location rule)."""
    try:
        Location.parse("/lake", None, "root").child(f"{table_name}.lance")
    except LanceNamespaceError:
        return False
    return True


def accepted(ns: Any, operation: str, request: dict[str, Any]) -> Any:
    answer = attempt(ns, operation, request)
    assert not isinstance(answer, LanceNamespaceError), (
        f"the catalog accepts {request['id']!r}, but {operation} answered {answer!r:.300}"
    )
    return answer


# ---------------------------------------------------------------------------------------------
# 4. Properties: of the connection, and of namespaces in requests
# ---------------------------------------------------------------------------------------------

LETTERS = string.ascii_letters + " .-"
BLANK = ["", " ", "\t\n"]
# Values each kind of property must refuse; the strategies below add random ones.
BAD_COUNTS = [0, -1, "0", "-5", "1.5", "2e3", "0x10", "1,000", "--1", "ten", True, 2.0, *BLANK]
BAD_SECONDS = [0, -1.5, "0", "inf", "-inf", "nan", float("inf"), float("nan"), "1e400", "1e300"]
BAD_SECONDS += ["1e10", "soon", True, *BLANK]  # sockets refuse waits of 9.2e9 s and more
BAD_ENDPOINTS = [
    *("ftp://x", "http://[", "http://[::1", "http://x:abc", "http://x:99999", "http://x:-1"),
    *("http://x:0", "localhost:4566", "http://", "https://", *BLANK),
]
BAD_URIS = [
    *("thrift://", "thrift://:9083", "thrift://h:port", "thrift://h:99999", "thrift://["),
    *("thrift://h:0", "http://h:9083", "h:9083", ",", "thrift:h", *BLANK),
]
BAD_CATALOG_IDS = ["12345678901", "1234567890123", "123456789012:", "1:2:3", "account", *BLANK]


def not_one_of(*choices: str) -> st.SearchStrategy[str]:
    return st.text(max_size=10).filter(lambda value: value.strip().lower() not in choices)


def malformed_values(backend: Harness) -> dict[str, tuple[list[Any], st.SearchStrategy[Any]]]:
    """Per property: values it must refuse, and a strategy of random ones."""
    not_a_count = st.one_of(
        st.integers(max_value=0),
        st.integers(max_value=0).map(str),
        st.floats(),  # str() of a float is never a whole number
        st.floats().map(str),
        st.text(LETTERS, max_size=6),
    )
    not_seconds = st.one_of(
        st.floats(max_value=0), st.integers(max_value=0).map(str), st.text(LETTERS, max_size=6)
    )

    counts, seconds = (BAD_COUNTS, not_a_count), (BAD_SECONDS, not_seconds)
    if backend.name == "glue":
        catalog_ids = st.text(max_size=14).filter(
            lambda value: not re.fullmatch(r"[0-9]{12}(:[^:]+)?", value.strip())
        )
        values = {
            "max_retries": counts,
            "assume_role_timeout_sec": counts,
            "connect_timeout_sec": seconds,
            "read_timeout_sec": seconds,
            "retry_mode": (
                ["fast", "", "standard mode"],
                not_one_of("standard", "adaptive", "legacy"),
            ),
            "region": (BLANK, st.sampled_from(BLANK)),
            "endpoint": (BAD_ENDPOINTS, st.text(max_size=12).filter(lambda url: "://" not in url)),
            "catalog_id": (BAD_CATALOG_IDS, catalog_ids),
        }
    else:
        uris = st.text(max_size=12).filter(lambda uri: "thrift://" not in uri.lower())
        values = {
            "client.pool-size": counts,
            "client.retries": counts,
            "client.socket-timeout-sec": seconds,
            "client.lock-timeout-sec": seconds,
            "client.user": (BLANK, st.sampled_from(BLANK)),
            "uri": (BAD_URIS, uris),
        }
    values["managed_by"] = (["catalog", "", "lance"], not_one_of("storage", "impl"))
    values["root"] = (BLANK, st.sampled_from(BLANK))
    return values


def expect_refused(cls: type, properties: dict[str, Any], naming: str) -> None:
    try:
        cls(**properties)
    except LanceNamespaceError as error:
        assert error.code == INVALID and naming in str(error), (
            f"{cls.__name__}({properties!r:.300}) answered {error!r:.300}; expected code 13 "
            f"naming {naming!r}"
        )
        return
    except KeyboardInterrupt:
        raise
    except BaseException as error:
        pytest.fail(f"{cls.__name__}({properties!r:.300}) let {error!r:.300} escape")
    pytest.fail(f"{cls.__name__} accepted {properties!r:.300}")


@settings(max_examples=examples(60))
@given(data=st.data())
def test_unknown_and_malformed_properties_answer_13(backend: Harness, data):
    cls, properties = backend.namespace_class(), backend.properties()
    known = {prop.name for prop in cls.PROPERTIES}
    key = data.draw(
        st.one_of(
            st.text(min_size=1, max_size=20),
            st.sampled_from([name.upper() for name in known] + ["storage.", "Region", "URI"]),
        ).filter(lambda key: key not in known and not (key.startswith("storage.") and key[8:])),
        label="unknown property",
    )
    value = data.draw(st.text(max_size=10), label="its value")
    expect_refused(cls, {**properties, key: value}, repr(key))

    values = malformed_values(backend)
    name = data.draw(st.sampled_from(sorted(values)), label="property")
    known_bad, random_bad = values[name]
    bad = data.draw(st.one_of(st.sampled_from(known_bad), random_bad), label="malformed value")
    expect_refused(cls, {**properties, name: bad}, name)


def test_known_malformed_property_values_answer_13(backend: Harness):
    cls, properties = backend.namespace_class(), backend.properties()
    for name, (known_bad, _) in malformed_values(backend).items():
        for bad in known_bad:
            expect_refused(cls, {**properties, name: bad}, name)


def test_glue_credentials_come_in_pairs(glue: Harness):
    cls, properties = glue.namespace_class(), glue.properties()
    for missing in ("access_key_id", "secret_access_key"):
        partial = {k: v for k, v in properties.items() if k != missing}
        expect_refused(cls, partial, "access_key_id and secret_access_key")
    alone = {k: v for k, v in properties.items() if k not in ("access_key_id", "secret_access_key")}
    # A secret is scrubbed from every later log line of the process: no common word here.
    expect_refused(cls, {**alone, "session_token": "FQoGZXIvYXdzEXAMPLE"}, "session_token")


def normalized_mode(value: str) -> str:
    """How the spec's mode names are matched: any case, '-' or '_' between words, or none."""
    return value.strip().lower().replace("-", "_").replace("existok", "exist_ok")


def bad_modes(*allowed: str) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.text(min_size=1, max_size=12).filter(lambda mode: normalized_mode(mode) not in allowed),
        st.sampled_from(
            ["CASCADE", "RESTRICT", "SKIP", "FAIL", "CREATE", "OVERWRITE", "ok"]
        ).filter(lambda mode: normalized_mode(mode) not in allowed),
        NOT_A_STRING.filter(lambda value: value is not None and value != ""),
    )


def bad_namespace_properties(backend: Harness) -> st.SearchStrategy[Any]:
    if backend.name == "glue":
        kind = not_one_of("database", "catalog").map(lambda value: {"glue.kind": value})
    else:
        owner = st.text(max_size=8).filter(
            lambda v: v.strip().upper() not in ("USER", "ROLE", "GROUP")
        )
        kind = owner.map(lambda value: {"database.owner-type": value})
    return st.one_of(
        NOT_A_STRING.filter(lambda value: not isinstance(value, dict) and value is not None),
        st.dictionaries(st.text(max_size=5), NOT_A_STRING, min_size=1, max_size=3),
        st.dictionaries(st.integers(), st.text(max_size=3), min_size=1, max_size=2),
        kind,
    )


@settings(max_examples=examples(20))
@given(data=st.data())
def test_bad_namespace_properties_and_modes_answer_13(backend: Harness, world: World, data):
    ns, fresh = world.ns, backend.db("fresh")
    properties = data.draw(bad_namespace_properties(backend), label="properties")
    expect_error(ns, "create_namespace", {"id": fresh, "properties": properties})
    overwrite = {"id": world.empty, "mode": "overwrite", "properties": properties}
    expect_error(ns, "create_namespace", overwrite)

    create_mode = data.draw(bad_modes("create", "exist_ok", "overwrite"), label="create mode")
    expect_error(ns, "create_namespace", {"id": fresh, "mode": create_mode})
    replace = {"id": world.empty, "mode": create_mode, "properties": {"replaced": "yes"}}
    expect_error(ns, "create_namespace", replace)

    drop_mode = data.draw(bad_modes("fail", "skip"), label="drop mode")
    expect_error(ns, "drop_namespace", {"id": world.empty, "mode": drop_mode})
    behavior = data.draw(bad_modes("restrict", "cascade"), label="drop behavior")
    expect_error(ns, "drop_namespace", {"id": world.other, "behavior": behavior})

    register_mode = data.draw(bad_modes("create", "overwrite"), label="register mode")
    register = {"id": world.table("orders"), "location": world.dataset, "mode": register_mode}
    expect_error(ns, "register_table", register)
    world.unchanged.check("bad properties or modes")


# ---------------------------------------------------------------------------------------------
# 5. Page tokens and limits
# ---------------------------------------------------------------------------------------------


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _is_position(payload: Any) -> bool:
    """A well-formed token payload: the last name returned, and maybe a snapshot id."""
    return (
        isinstance(payload, dict)
        and isinstance(payload.get("a"), str)
        and isinstance(payload.get("s"), (str, type(None)))
    )


def _not_a_position(raw: bytes) -> bool:
    try:
        return not _is_position(json.loads(raw))
    except (ValueError, RecursionError):
        return True


# Tokens no listing ever gave: not base64 of JSON, JSON nested too deep to decode, JSON that
# is not {"a": last name, "s": snapshot id}, and not strings at all.
BAD_TOKENS = [
    *("%%%", "e30", "W10", "bnVsbA", " ", "=", "\x00", "not-a-token", "🙂", 7, ["e30"]),
    _b64(b"[" * 100_000),
    *(_b64(b'{"a": 1}'), _b64(b'{"s": "x"}'), _b64(b'{"a": "x", "s": 5}'), _b64(b'"a"')),
]
MALFORMED_TOKENS = st.one_of(
    st.sampled_from(BAD_TOKENS),
    st.binary(min_size=1, max_size=24).filter(_not_a_position).map(_b64),
    JSON.filter(lambda value: not _is_position(value)).map(lambda v: _b64(json.dumps(v).encode())),
    NOT_A_STRING.filter(lambda value: value is not None),  # page_token is a string
)
BAD_LIMIT_VALUES = [-1, -(2**70), "5", "ten", "", 2.0, 0.5, float("nan"), True, False, [1], b"1"]
BAD_LIMITS = st.one_of(
    st.sampled_from(BAD_LIMIT_VALUES),
    st.integers(max_value=-1),
    st.text(max_size=5),  # "5" too: limit is an integer, strictly
    st.floats(),
    st.lists(st.integers(), max_size=2),
    st.binary(max_size=3),
)
GOOD_LIMITS = st.one_of(st.just(0), st.integers(1, 6), st.integers(2**31, 2**70))


def listings(world: World) -> dict[str, dict[str, Any]]:
    return {
        "list_namespaces": {"id": world.parent},
        "list_tables": {"id": world.db},
        "list_table_versions": {"id": world.table("managed")},
    }


def test_known_bad_page_tokens_and_limits_answer_13(backend: Harness, world: World):
    for operation, request in listings(world).items():
        for token in BAD_TOKENS:
            expect_error(world.ns, operation, {**request, "page_token": token})
        for limit in BAD_LIMIT_VALUES:
            expect_error(world.ns, operation, {**request, "limit": limit})
    world.unchanged.check("bad page tokens and limits")


@settings(max_examples=examples(20))
@given(data=st.data())
def test_bad_page_tokens_and_limits_answer_13(backend: Harness, world: World, data):
    ns = world.ns
    for operation, request in listings(world).items():
        full = everything(ns, operation, request)
        token = data.draw(MALFORMED_TOKENS, label=f"{operation} token")
        expect_error(ns, operation, {**request, "page_token": token})
        limit = data.draw(BAD_LIMITS, label=f"{operation} limit")
        expect_error(ns, operation, {**request, "limit": limit})

        # Any text: refused, or (if it happens to decode) a valid page: the listing's tail.
        text = data.draw(st.text(min_size=1, max_size=40), label=f"{operation} text token")
        answer = attempt(ns, operation, {**request, "page_token": text})
        if isinstance(answer, LanceNamespaceError):
            assert answer.code == INVALID, f"{operation} token {text!r}: {answer!r}"
        else:
            page = _items(answer)
            assert page == full[len(full) - len(page) :], f"{operation} token {text!r}: {page}"

        # Any whole number >= 0 pages through everything (0: no limit, as Lance's own).
        good = data.draw(GOOD_LIMITS, label=f"{operation} good limit")
        assert everything(ns, operation, request, limit=good) == full
        if 0 < good < len(full):
            assert len(_items(getattr(ns, operation)({**request, "limit": good}))) == good
    world.unchanged.check("bad page tokens and limits")


@settings(max_examples=examples(15))
@given(data=st.data())
def test_tokens_of_another_listing_continue_after_their_name(backend: Harness, world: World, data):
    """A page token is a position in the sorted names (the last one returned), not a handle:
    given to another listing, or to the same listing of another parent, it continues that
    listing after the same name, as it does when its cached snapshot expired. Nothing to
    refuse, nothing repeated, nothing changed."""
    ns = world.ns
    name_listings = {
        "namespaces": ("list_namespaces", {"id": world.parent}),
        "tables": ("list_tables", {"id": world.db}),
        "tables of another parent": ("list_tables", {"id": world.other}),
    }
    source = data.draw(st.sampled_from(sorted(name_listings)), label="token of")
    target = data.draw(st.sampled_from(sorted(name_listings)), label="given to")
    source_op, source_request = name_listings[source]
    page = getattr(ns, source_op)({**source_request, "limit": data.draw(st.integers(1, 2))})
    assert page.page_token, f"{source} fits one page: no token to reuse"
    after = _items(page)[-1]

    target_op, target_request = name_listings[target]
    limit = data.draw(st.sampled_from([None, 1, 2]), label="limit")
    rest, token = [], page.page_token
    while token:
        answer = getattr(ns, target_op)({**target_request, "limit": limit, "page_token": token})
        rest += _items(answer)
        token = answer.page_token
    assert rest == [name for name in everything(ns, target_op, target_request) if name > after]
    world.unchanged.check("reusing a page token")


# ---------------------------------------------------------------------------------------------
# 6. Tables that are not Lance tables
# ---------------------------------------------------------------------------------------------

PARAMETER_TEXT = st.text(st.characters(categories=["L", "N", "P", "Zs"]), max_size=12)
NOT_LANCE = st.one_of(
    # Spec: an EXTERNAL_TABLE whose table_type is "lance" in any case; nothing else.
    st.tuples(
        st.one_of(
            st.none(),
            PARAMETER_TEXT.filter(lambda value: value.lower() != "lance"),
            st.sampled_from(["ICEBERG", "delta", " lance", "lance ", "lancedb", "LANCE\u3000"]),
        ),
        st.just("EXTERNAL_TABLE"),
    ),
    st.tuples(
        st.sampled_from(["lance", "LANCE", "Lance"]),
        st.sampled_from(["MANAGED_TABLE", "VIRTUAL_VIEW"]),
    ),
)
VERSION_OPERATIONS = [
    "create_table_version",
    "list_table_versions",
    "describe_table_version",
    "batch_delete_table_versions",
]


# Not Lance by the spec, however close: spaces around "lance", a table that is not external.
KNOWN_NOT_LANCE = [
    *((None, "EXTERNAL_TABLE"), ("ICEBERG", "EXTERNAL_TABLE"), (" lance", "EXTERNAL_TABLE")),
    *(("lance", "MANAGED_TABLE"), ("LANCE", "VIRTUAL_VIEW")),
]


def test_known_tables_that_are_not_lance_tables(backend: Harness, world: World):
    for table_type, kind in KNOWN_NOT_LANCE:
        check_not_lance(backend, world, "ice", table_type, kind)


@settings(max_examples=examples(8))
@given(data=st.data())
def test_tables_that_are_not_lance_tables(backend: Harness, world: World, data):
    table_type, kind = data.draw(NOT_LANCE, label="table_type parameter and table type")
    name = data.draw(st.sampled_from(["ice", "Delta_1", "view"]), label="name")
    check_not_lance(backend, world, name, table_type, kind)


def check_not_lance(
    backend: Harness, world: World, name: str, table_type: str | None, kind: str
) -> None:
    """A table made with the catalog's own client that is not a Lance table: every operation
    on it answers the spec's code, listings never show it, and it stays as it was."""
    ns, location = world.ns, backend.root / "foreign" / name.lower()
    backend.create_foreign_table(world.db, name, str(location), table_type, kind)
    world.unchanged.rebase()
    try:
        ident = world.table(name)
        # Specs: describe, deregister and drop answer 13 for a table that is not Lance; so
        # do table_exists (it is describe without the answer) and the version operations.
        for operation in ["describe_table", "table_exists", "deregister_table", "drop_table"]:
            expect_error(ns, operation, {"id": ident})
        for operation in VERSION_OPERATIONS:
            expect_error(ns, operation, with_id(world, operation, ident))
        # The name is taken: declaring or registering a Lance table there answers 5, and
        # registering over it (OVERWRITE) 13, as it is not a Lance table to replace.
        exists = ErrorCode.TABLE_ALREADY_EXISTS
        expect_error(ns, "declare_table", {"id": ident}, exists)
        expect_error(ns, "register_table", {"id": ident, "location": world.dataset}, exists)
        overwrite = {"id": ident, "location": world.dataset, "mode": "overwrite"}
        expect_error(ns, "register_table", overwrite)
        for include_declared in (True, False):
            request = {"id": world.db, "include_declared": include_declared}
            for limit in (None, 1):
                listed = everything(ns, "list_tables", request, limit)
                assert name.lower() not in listed, f"{kind} {table_type!r} listed: {listed}"
        world.unchanged.check(f"operations on a {kind} with table_type={table_type!r}")
    finally:
        backend.drop_foreign_table(world.db, name)
        shutil.rmtree(location, ignore_errors=True)  # the metastore may have made it
        world.unchanged.rebase()


# ---------------------------------------------------------------------------------------------
# 7. Random request shapes
# ---------------------------------------------------------------------------------------------


def _field_types(annotation: Any) -> tuple[type, ...]:
    """The Python types a (strict) request field takes, Optional and Annotated removed."""
    while get_origin(annotation) is not None and get_origin(annotation) not in (list, dict):
        if get_origin(annotation) is Union:
            annotation = next(a for a in get_args(annotation) if a is not type(None))
        else:  # Annotated
            annotation = get_args(annotation)[0]
    origin = get_origin(annotation) or annotation
    if isinstance(origin, type) and issubclass(origin, BaseModel):
        return (dict,)
    return (origin,)


def wrong_value(model: type[BaseModel], field: str) -> st.SearchStrategy[Any]:
    """A value the field cannot take (strict types: no bool for int, no "5" for 5)."""
    types = _field_types(model.model_fields[field].annotation)
    if field == "id":
        types = (list, str)  # the $-joined form is accepted too

    def wrong(value: Any) -> bool:
        if value is None:
            return False  # None means "not given"
        if int in types and isinstance(value, bool):
            return True
        return not isinstance(value, types)

    # (pydantic takes a set for a list: an empty one would be a valid empty list)
    sets = st.sets(st.integers(), min_size=1, max_size=2)
    return st.one_of(JSON, st.binary(max_size=3), sets).filter(wrong)


READ_OPERATIONS = [
    *("describe_namespace", "namespace_exists", "list_namespaces", "list_tables"),
    *("describe_table", "table_exists", "list_table_versions", "describe_table_version"),
]


def valid_request(world: World, operation: str) -> dict[str, Any]:
    """A request that would act on a real object, if its wrong field were ignored."""
    ident = {
        "create_namespace": [*world.db[:-1], "fresh"],
        "describe_namespace": world.db,
        "namespace_exists": world.db,
        "drop_namespace": world.empty,
        "list_namespaces": world.parent,
        "list_tables": world.db,
        "declare_table": world.table("fresh"),
        "register_table": world.table("fresh"),
        "list_table_versions": world.table("managed"),
        "describe_table_version": world.table("managed"),
        "batch_delete_table_versions": world.table("managed"),
        "create_table_version": world.table("managed"),
    }.get(operation, world.table("orders"))
    return with_id(world, operation, ident)


@settings(max_examples=examples(20))
@given(data=st.data())
def test_garbage_requests_answer_13(backend: Harness, world: World, data):
    ns = world.ns
    # The whole request of a wrong type: only a request model, a dict or None will do.
    garbage = data.draw(
        st.one_of(JSON, st.binary(max_size=4), st.tuples(st.integers())).filter(
            lambda value: value is not None and not isinstance(value, dict)
        ),
        label="request",
    )
    for operation in REQUEST_MODELS:
        expect_error(ns, operation, garbage)

    # A real request with one field of a wrong type, plus unknown keys (which are ignored).
    for operation, model in REQUEST_MODELS.items():
        field = data.draw(st.sampled_from(sorted(model.model_fields)), label=f"{operation} field")
        value = data.draw(wrong_value(model, field), label=f"{operation}.{field}")
        unknown_key = st.text(max_size=8).filter(lambda key, m=model: key not in m.model_fields)
        unknown = data.draw(
            st.dictionaries(unknown_key, JSON, max_size=2),
            label=f"{operation} unknown keys",
        )
        request = valid_request(world, operation)
        expect_error(ns, operation, {**request, **unknown, field: value})
        if operation in READ_OPERATIONS:  # the same request without the wrong field
            assert attempt(ns, operation, {**request, **unknown}) == getattr(ns, operation)(request)
    world.unchanged.check("garbage requests")


def test_deleting_no_version_records_changes_nothing(backend: Harness, world: World):
    """Found by the request shapes above: an empty ``ranges`` (or ranges deleted before) used
    to write an unchanged deletion list, changing the table's catalog entry for nothing."""
    managed = world.table("managed")
    ns = world.ns
    assert ns.batch_delete_table_versions({"id": managed, "ranges": []}).deleted_count == 0
    world.unchanged.check("deleting no version record")
    once = {"id": managed, "ranges": [{"start_version": 1, "end_version": 2}]}
    assert ns.batch_delete_table_versions(once).deleted_count == 1
    world.unchanged.rebase()
    assert ns.batch_delete_table_versions(once).deleted_count == 0
    world.unchanged.check("deleting version records deleted before")
