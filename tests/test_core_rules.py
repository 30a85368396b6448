"""The rules the core owns once, as pure units (no server): which class an impl names, the
identifier parser, the secret rule, the id forms of each backend, bulk planning, the Spark
data source's client cache, and the AWS sessions that share botocore's loader and handlers."""

from __future__ import annotations

import gc
import json
import re
import sys
import threading
import weakref
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance_namespace.errors import (
    ErrorCode,
    InternalError,
    InvalidInputError,
    NamespaceNotEmptyError,
    TableNotFoundError,
    UnsupportedOperationError,
)

import lance_metastore
from lance_metastore import impls
from lance_metastore.operations.datasets import lance_errors
from lance_metastore.rules.aws_sessions import aws_session
from lance_metastore.rules.bulk import PLANNED, find_datasets, register_many, table_name_for
from lance_metastore.rules.errors import lance_error, translate_errors
from lance_metastore.rules.identifiers import parse_identifier
from lance_metastore.rules.json_nesting import nests_deeper_than
from lance_metastore.rules.paging import decode_token, encode_token, seal
from lance_metastore.rules.redaction import (
    REDACTED,
    is_secret,
    looks_secret,
    masked,
    scrub,
    secret_name_pattern,
    secret_values,
)
from lance_metastore.spark import options

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
RECORDING = "support.recording_namespace.RecordingNamespace"
UNREACHABLE = {"uri": "thrift://127.0.0.1:9"}  # building a namespace opens no connection


# --------------------------------------------------------------------------------------------
# impls
# --------------------------------------------------------------------------------------------


def test_one_alias_table_published_as_entry_points() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    declared = project["project"]["entry-points"][impls.ENTRY_POINT_GROUP]
    assert {k: v.replace(":", ".") for k, v in declared.items()} == impls.ALIASES
    installed = {e.name: e.value for e in entry_points(group=impls.ENTRY_POINT_GROUP)}
    assert {k: installed.get(k) for k in declared} == declared
    assert lance_metastore.ALIASES is impls.ALIASES


@pytest.mark.parametrize(
    ("impl", "cls"),
    [
        ("hive2", lance_metastore.Hive2Namespace),
        ("hive3", lance_metastore.Hive3Namespace),
        (" hive3 ", lance_metastore.Hive3Namespace),
        ("lance_metastore.Hive2Namespace", lance_metastore.Hive2Namespace),
        ("lance_metastore.hive.namespace.Hive3Namespace", lance_metastore.Hive3Namespace),
    ],
)
def test_connect_by_alias_or_class_path(impl: str, cls: type) -> None:
    ns = lance_metastore.connect(impl, UNREACHABLE)
    try:
        assert type(ns) is cls
    finally:
        ns.close()


def test_misspelt_impl_names_the_known_aliases() -> None:
    with pytest.raises(impls.UnknownImplError) as caught:
        impls.namespace_class("hiv3")
    message = str(caught.value)
    assert "'hiv3'" in message and "did you mean 'hive3'?" in message
    assert all(alias in message for alias in ("glue", "hive2", "hive3"))
    assert caught.value.code == ErrorCode.INVALID_INPUT
    with pytest.raises(impls.UnknownImplError, match="no class 'Nope'"):
        impls.namespace_class("lance_metastore.Nope")
    with pytest.raises(impls.UnknownImplError, match="not a LanceNamespace"):
        impls.namespace_class("lance_metastore.rules.config.Property")
    with pytest.raises(impls.UnknownImplError, match="cannot import"):
        impls.namespace_class("no_such_module_xyz.Cls")


# --------------------------------------------------------------------------------------------
# identifiers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "delimiter", "parts"),
    [
        ("db$t", "$", ("db", "t")),
        ("db/t", "$", ("db", "t")),
        ("cat/db$t", "$", ("cat", "db", "t")),
        (" /db/ ", "$", ("db",)),
        ("", "$", ()),
        ("/", "$", ()),
        (None, "$", ()),
        ("hive$$orders", "$", ("hive", "", "orders")),  # the namespace says what is wrong
        ("a.b.c", ".", ("a", "b", "c")),
        ("a/b.c", ".", ("a", "b", "c")),
    ],
)
def test_one_identifier_parser(text, delimiter, parts) -> None:
    assert parse_identifier(text, delimiter) == parts


def test_messages_name_each_level() -> None:
    hive3 = lance_metastore.Hive3Namespace(**UNREACHABLE)
    hive2 = lance_metastore.Hive2Namespace(**UNREACHABLE)
    with pytest.raises(InvalidInputError, match=r"^Empty database name in 'hive\$\$orders'$"):
        hive3.describe_table({"id": "hive$$orders"})
    with pytest.raises(InvalidInputError, match=r"^Table name 'sa les' in 'db\$sa les' is not"):
        hive2.declare_table({"id": "db$sa les"})
    with pytest.raises(InvalidInputError, match=r"^Database name 'sa les' is not valid"):
        hive2.create_namespace({"id": "sa les"})


def test_id_forms_are_public() -> None:
    hive3 = lance_metastore.Hive3Namespace(**UNREACHABLE)
    assert hive3.is_namespace_id("hive$db") and not hive3.is_table_id("hive$db")
    assert hive3.is_table_id(["hive", "db", "t"]) and not hive3.is_namespace_id("hive$db$t")
    hive2 = lance_metastore.Hive2Namespace(**UNREACHABLE)
    assert hive2.is_table_id("db$t") and not hive2.is_namespace_id("db$t")
    assert not hive2.is_table_id("db$sa les") and not hive2.is_table_id(["db", ""])


# --------------------------------------------------------------------------------------------
# secrets
# --------------------------------------------------------------------------------------------


def test_one_secret_rule() -> None:
    declared = {"assume_role_external_id"}
    for key in ("secret_access_key", "session_token", "access_key_id", "password"):
        assert is_secret(key)
        assert is_secret(f"storage.aws_{key}")
    assert is_secret("assume_role_external_id", declared)
    assert not is_secret("assume_role_external_id")
    for key in ("region", "storage.aws_region", "endpoint", "uri", "storage.bucket", "root"):
        assert not is_secret(key)
    shown = masked({"storage.aws_secret_access_key": "s3cr3t!", "region": "eu"})
    assert shown == {"region": "eu", "storage.aws_secret_access_key": REDACTED}
    assert secret_values({"token": "abcd", "region": "eu"}) == ["abcd"]
    assert scrub("key abcd and ab", ["abcd", "ab"]) == f"key {REDACTED} and ab"


def test_the_secret_rule_as_one_pattern() -> None:
    """Tools that take a regular expression (Spark's spark.redaction.regex) get the same rule."""
    pattern = re.compile(secret_name_pattern())
    names = [
        "Authorization",
        "X-Api-Key",
        "aws_access_key_id",
        "storage.aws_secret_access_key",
        "azure_storage_account_key",
        "google_service_account_key",
        "azure_storage_sas_token",
        "client.kerberos.keytab",
        "aws_region",
        "aws_endpoint",
        "allow_http",
        "storage.bucket",
        "spark.sql.catalog.lance.uri",
        "spark.sql.catalog.lance.headers.X-Trace",
    ]
    for name in names:
        assert bool(pattern.search(name)) == looks_secret(name), name
    assert looks_secret("spark.sql.catalog.lance.headers.Authorization")


# --------------------------------------------------------------------------------------------
# bulk registration planning
# --------------------------------------------------------------------------------------------


def test_errors_leave_worded_as_lance_words_them() -> None:
    """Lance's phrase first (even on a catalog's own text), a refusal names the operation and
    the backend (a NotImplementedError inside an operation included), a fault stays 18."""
    assert str(lance_error(TableNotFoundError, "'db$t'")) == "Table not found: 'db$t'"

    def failure(error: Exception) -> Exception:
        translated = translate_errors("drop table", "'db$t'", lambda e, c: None, backend="HiveNS")
        with pytest.raises(Exception) as raised, translated:
            raise error
        return raised.value

    catalogs_words = failure(NamespaceNotEmptyError("'db' holds tables"))
    assert str(catalogs_words) == "Namespace not empty: 'db' holds tables"
    for refusal in (
        NotImplementedError("no such thing"),
        UnsupportedOperationError("no such thing"),
    ):
        error = failure(refusal)
        assert type(error) is UnsupportedOperationError
        assert str(error) == "Not supported: drop table 'db$t' on HiveNS: no such thing"
    assert type(failure(KeyError("x"))) is InternalError
    # Lance's own refusal, raised as a RuntimeError by pylance, is a refusal too
    with pytest.raises(UnsupportedOperationError), lance_errors("rename", "'db$t'"):
        raise RuntimeError("Not supported: rename_table not implemented, namespace.rs:292:13")


def test_bulk_plan(tmp_path: Path) -> None:
    for where in ("a/one.lance", "b/two", "b/deeper/three.lance"):
        lance.write_dataset(pa.table({"x": [1]}), str(tmp_path / where))
    (tmp_path / "not-a-dataset").mkdir()
    found = find_datasets(tmp_path)
    assert [table_name_for(p) for p in found] == ["one", "three", "two"]  # sorted by path
    assert table_name_for(Path(".lance")) == ".lance"
    plan = register_many(None, ["db"], tmp_path, dry_run=True)  # no catalog call
    assert [(o.id, o.status) for o in plan.outcomes] == [
        (("db", "one"), PLANNED),
        (("db", "three"), PLANNED),
        (("db", "two"), PLANNED),
    ]
    assert plan.first_error is None and plan.failed == []


# --------------------------------------------------------------------------------------------
# the Spark data source's client cache
# --------------------------------------------------------------------------------------------


@pytest.fixture
def empty_cache():
    with options._CLIENTS_LOCK:
        saved = dict(options._CLIENTS)
        options._CLIENTS.clear()
    yield
    with options._CLIENTS_LOCK:
        options._CLIENTS.clear()
        options._CLIENTS.update(saved)


def test_client_cache_shares_one_client_across_threads(empty_cache) -> None:
    from support import recording_namespace

    start = threading.Barrier(8)
    got: list[object] = []

    def build() -> None:
        start.wait()
        got.append(options.connect(RECORDING, {"k": "shared"}))

    threads = [threading.Thread(target=build) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(c) for c in got}) == 1  # every thread got the cached one
    assert got[0] in recording_namespace.BUILT


def test_client_cache_is_lru_and_never_closes_a_client(empty_cache) -> None:
    first = options.connect(RECORDING, {"n": "0"})
    others = [options.connect(RECORDING, {"n": str(i)}) for i in range(1, options._MAX_CLIENTS)]
    assert options.connect(RECORDING, {"n": "0"}) is first  # used again: now the newest
    options.connect(RECORDING, {"n": "new"})  # one more than fits: the LRU one goes
    assert options.connect(RECORDING, {"n": "0"}) is first
    assert options.connect(RECORDING, {"n": "1"}) is not others[0]
    assert not any(c.closed for c in [first, *others])  # a holder may still use it
    evicted = weakref.ref(others[0])
    del others
    gc.collect()
    assert evicted() is None  # dropped by the cache, released by its last holder


@pytest.mark.parametrize(
    ("text", "deepest"),
    [
        (b"1", 0),
        (b"{}", 1),
        (b'{"a": [1, {"b": []}]}', 4),
        (b'{"a": "]]]\\"[[[", "b": "{"}', 1),  # brackets inside strings are text
        (b"{[]}", 2),
        (b"[[[}", 3),  # unbalanced: as deep as its openers
    ],
)
def test_json_nesting_is_judged_from_the_text(text: bytes, deepest: int) -> None:
    assert nests_deeper_than(text, deepest - 1) and not nests_deeper_than(text, deepest)


@pytest.mark.parametrize(
    ("text", "deeper"),
    [
        (b"[" * 100_000, True),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, True),
        (b"[]" * 10**6, False),
        (b'["' + b'\\"' * 10**6, False),  # a string left open: one pass, not one per quote
    ],
)
def test_json_nesting_is_judged_in_a_few_rounds(text: bytes, deeper: bool) -> None:
    """Each round drops one level: a limit of 64 costs at most 65 passes over the text, and
    finding the strings one pass."""
    assert nests_deeper_than(text, 64) is deeper


def test_a_deep_page_token_never_reaches_the_json_parser() -> None:
    """json.loads recursed once per bracket of a caller's page token, up to the interpreter's
    limit, where a finalizer the collector ran failed (CI saw a Hive pool's close fail so).
    A token nested deeper than one flat object is refused before the parser sees it."""
    parsed: list[object] = []

    def watch(frame: Any, event: str, _arg: object) -> None:
        if event == "call" and frame.f_code is json.JSONDecoder.raw_decode.__code__:
            parsed.append(frame.f_locals.get("s"))

    shallow = encode_token("x", "y")
    deep = seal(b"[" * 3_000, "")  # sealed by the server itself: still judged before parsing
    sys.setprofile(watch)
    try:
        assert decode_token(shallow) == ("x", "y")
        with pytest.raises(InvalidInputError, match="Invalid page_token"):
            decode_token(deep)
    finally:
        sys.setprofile(None)
    assert len(parsed) == 1  # the shallow token only


def _handlers(session: Any, event: str) -> list[str]:
    """The handlers of ``event``, in order, by name (boto3 registers closures of its own,
    new for each session). botocore has no public lookup: its trie, read here only."""
    found = session.events._emitter._handlers.prefix_search(event)
    return [
        f"{getattr(h, '__module__', '')}.{getattr(h, '__qualname__', type(h).__qualname__)}"
        for h in found
    ]


def test_aws_sessions_carry_botocores_builtin_handlers() -> None:
    import boto3
    import botocore.handlers
    import botocore.session

    ours = aws_session(region_name="us-east-1")
    botocores = boto3.Session(botocore_session=botocore.session.Session())
    # each built-in event, as named and as a service-specific event below it
    events = {spec[0] for spec in botocore.handlers.BUILTIN_HANDLERS}
    events |= {f"{event}.glue.GetTable" for event in events if event.count(".") == 0}
    assert len(events) > 100
    for event in sorted(events):
        assert _handlers(ours, event) == _handlers(botocores, event), event


def test_botocores_session_initializers_run_once_per_session() -> None:
    import botocore

    seen: list[Any] = []

    def initializer(session: Any) -> None:
        seen.append(session)
        session.register("lance-metastore-test", lambda **_: "marked")

    botocore.register_initializer(initializer)
    try:
        session = aws_session(region_name="us-east-1")
    finally:
        botocore.unregister_initializer(initializer)
    assert seen == [session._session]
    assert [answer for _, answer in session.events.emit("lance-metastore-test")] == ["marked"]


def test_aws_sessions_share_the_loader_but_not_their_handlers() -> None:
    first, second = aws_session(region_name="us-east-1"), aws_session(region_name="eu-west-1")
    loader = first._session.get_component("data_loader")
    assert second._session.get_component("data_loader") is loader
    marks: list[str] = []
    first.events.register("lance-metastore-test", lambda **_: marks.append("first"))
    second.events.emit("lance-metastore-test")
    aws_session().events.emit("lance-metastore-test")
    assert marks == []  # a handler registered on one session reaches no other
    first.events.emit("lance-metastore-test")
    assert marks == ["first"]
    assert (first.region_name, second.region_name) == ("us-east-1", "eu-west-1")
