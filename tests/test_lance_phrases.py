"""Lance's clients read our errors as they read Lance's own: a differential with lancedb.

lancedb hands a namespace's failure back as its own exception partly by the words of the
message (Lance's bridge passes an in-process Python namespace's error on as text), so the same
failing calls go to pylance's ``DirectoryNamespace`` and to ours, in-process (lancedb's
``connect_namespace`` with the class) and through a REST server (pylance's ``RestAdapter`` for
the directory, ours for our namespaces), on every backend: the same lancedb exception class,
the same spec code, and every Lance phrase the reference's message carries is in ours.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa
import pytest
from lance.namespace import DirectoryNamespace, RestAdapter
from lance_namespace import (
    CreateNamespaceRequest,
    DeclareTableRequest,
    DescribeNamespaceRequest,
    DescribeTableRequest,
    DropNamespaceRequest,
    DropTableRequest,
    LanceNamespace,
    NamespaceExistsRequest,
    TableExistsRequest,
)
from lance_namespace.errors import LanceNamespaceError
from support.harness import Harness
from support.rest import RestHarness

from lance_metastore.rules.errors import LANCE_PHRASES

SCHEMA = pa.schema([("id", pa.int64())])
PHRASES = sorted(LANCE_PHRASES.values())


@dataclass
class Place:
    """Where the failing calls go: a lancedb connection and the ids it works on."""

    connection: Any
    namespace: list[str]  # holds the table ``present``
    missing_namespace: list[str]


def _prepared(connection: Any, namespace: list[str], missing: list[str]) -> Place:
    connection.create_namespace(namespace)
    connection.create_table("present", schema=SCHEMA, namespace_path=namespace)
    return Place(connection, namespace, missing)


# (what lancedb is asked, the call): the list of failing calls.
FAILING_CALLS: list[tuple[str, Callable[[Place], Any]]] = [
    (
        "open_table of a missing table",
        lambda p: p.connection.open_table("gone", namespace_path=p.namespace),
    ),
    (
        "drop_table of a missing table",
        lambda p: p.connection.drop_table("gone", namespace_path=p.namespace),
    ),
    (
        "create_table of an existing table",
        lambda p: p.connection.create_table("present", schema=SCHEMA, namespace_path=p.namespace),
    ),
    ("drop_namespace of a non-empty namespace", lambda p: p.connection.drop_namespace(p.namespace)),
    (
        "create_namespace of an existing namespace",
        lambda p: p.connection.create_namespace(p.namespace),
    ),
    (
        "open_table in a missing namespace",
        lambda p: p.connection.open_table("gone", namespace_path=p.missing_namespace),
    ),
]


def _outcome(call: Callable[[Place], Any], place: Place) -> tuple[str, Any, list[str], str]:
    """The exception's class, spec code, the Lance phrases its message carries, the message."""
    with pytest.raises(Exception) as raised:
        call(place)
    error = raised.value
    message = str(error)
    code = int(error.code) if isinstance(error, LanceNamespaceError) else None
    kind = f"{type(error).__module__}.{type(error).__qualname__}"
    return kind, code, [phrase for phrase in PHRASES if phrase in message], message


def _compare(reference: Place, ours: Place) -> None:
    differences = []
    for label, call in FAILING_CALLS:
        theirs_kind, theirs_code, theirs_phrases, theirs_message = _outcome(call, reference)
        our_kind, our_code, our_phrases, our_message = _outcome(call, ours)
        if (theirs_kind, theirs_code) != (our_kind, our_code) or not set(theirs_phrases) <= set(
            our_phrases
        ):
            differences.append(
                f"{label}: DirectoryNamespace {theirs_kind} {theirs_code} {theirs_message!r}; "
                f"ours {our_kind} {our_code} {our_message!r}"
            )
    assert not differences, "\n".join(differences)


def _our_place(backend: Harness, connection: Any) -> Place:
    return _prepared(
        connection, backend.db(backend.unique("phr")), backend.db(backend.unique("nowhere"))
    )


def test_lancedb_in_process_raises_what_it_raises_on_the_directory(
    backend: Harness, tmp_path: Path
):
    directory = lancedb.connect_namespace(
        "lance.namespace.DirectoryNamespace",
        {"root": str(tmp_path / "dir"), "manifest_enabled": "true"},
    )
    reference = _prepared(directory, ["phr"], ["nowhere"])
    ours = _our_place(backend, lancedb.connect_namespace(*backend.client_target()))
    _compare(reference, ours)


@pytest.fixture
def directory_server(tmp_path: Path) -> Iterator[str]:
    adapter = RestAdapter(
        "dir", {"root": str(tmp_path / "served"), "manifest_enabled": "true"}, port=0
    )
    adapter.start()
    try:
        yield f"http://127.0.0.1:{adapter.port}"
    finally:
        adapter.stop()


def test_lancedb_through_rest_raises_what_it_raises_on_the_directory(
    backend: Harness, directory_server: str
):
    reference = _prepared(
        lancedb.connect_namespace("rest", {"uri": directory_server}), ["phr"], ["nowhere"]
    )
    served = RestHarness(root=backend.root, inner=backend)
    try:
        ours = _our_place(backend, lancedb.connect_namespace(*served.client_target()))
        _compare(reference, ours)
    finally:
        served.close()


# The namespace's own errors, without lancedb: (operation, request on our ids) for each situation.
def _namespace_calls(namespace: list[str], missing: list[str]) -> list[tuple[str, str, Any]]:
    return [
        ("describe_namespace", "of a missing namespace", DescribeNamespaceRequest(id=missing)),
        ("namespace_exists", "of a missing namespace", NamespaceExistsRequest(id=missing)),
        ("drop_namespace", "of a missing namespace", DropNamespaceRequest(id=missing)),
        ("create_namespace", "of an existing namespace", CreateNamespaceRequest(id=namespace)),
        ("drop_namespace", "of a non-empty namespace", DropNamespaceRequest(id=namespace)),
        ("describe_table", "of a missing table", DescribeTableRequest(id=[*namespace, "gone"])),
        ("table_exists", "of a missing table", TableExistsRequest(id=[*namespace, "gone"])),
        ("drop_table", "of a missing table", DropTableRequest(id=[*namespace, "gone"])),
        ("declare_table", "of an existing table", DeclareTableRequest(id=[*namespace, "present"])),
    ]


def test_every_error_starts_with_the_phrase_directory_namespace_uses(
    backend: Harness, tmp_path: Path
):
    """Same call, same class, same first words, then our name of the object."""
    directory = DirectoryNamespace(root=str(tmp_path / "dir"), manifest_enabled="true")
    ours = backend.connect()
    ours_namespace = backend.db(backend.unique("phr"))
    for namespace_client, namespace in ((directory, ["phr"]), (ours, ours_namespace)):
        namespace_client.create_namespace(CreateNamespaceRequest(id=namespace))
        namespace_client.declare_table(DeclareTableRequest(id=[*namespace, "present"]))
    reference_calls = _namespace_calls(["phr"], ["nowhere"])
    our_calls = _namespace_calls(ours_namespace, backend.db(backend.unique("nowhere")))
    pairs = zip(reference_calls, our_calls, strict=True)
    for (operation, situation, theirs), (_, _, mine) in pairs:
        with pytest.raises(LanceNamespaceError) as expected:
            getattr(directory, operation)(theirs)
        with pytest.raises(LanceNamespaceError) as got:
            getattr(ours, operation)(mine)
        label = f"{operation} {situation}"
        assert type(got.value) is type(expected.value), label
        phrase = LANCE_PHRASES[type(expected.value)]
        assert str(expected.value).startswith(f"{phrase}: "), label
        assert str(got.value).startswith(f"{phrase}: "), f"{label}: {got.value}"


class _Failing(LanceNamespace):
    """A namespace whose describe_table fails with the error class named by the table."""

    def namespace_id(self) -> str:
        return "failing"

    def describe_table(self, request: Any) -> Any:
        kind = next(k for k in LANCE_PHRASES if k.__name__ == request.id[-1])
        raise kind(f"{LANCE_PHRASES[kind]}: 'db$t'")


def test_errors_through_pylances_rest_client_carry_the_phrase_once() -> None:
    """pylance's REST client puts the code's phrase before the body's message: the server
    sends the message without it, so the caller reads "Table not found: 'db$t'", once."""
    import lance_namespace

    from lance_metastore.rest import RestServer

    with RestServer(_Failing()) as server:
        client = lance_namespace.connect("rest", {"uri": server.url})
        for kind, phrase in LANCE_PHRASES.items():
            with pytest.raises(kind) as raised:
                client.describe_table(DescribeTableRequest(id=["db", kind.__name__]))
            assert str(raised.value) == f"{phrase}: 'db$t'"
