"""Catalog writes racing catalog-managed commits: no commit is lost, no sync fails.

Every write of a table's catalog entry that can meet a managed commit (column sync, register
overwrite, the column write after a schema change) is conditional on the entry it read, the way
the commit itself is (Glue ``VersionId``, HMS 4's conditional alter, the HMS 2/3 table lock),
and retried when it loses. Two kinds of test:

- races: two writers append while a third thread runs one such write in a loop, for real;
- ordered: the write is held between its read and its write (at the Glue emulator, or at a
  TCP front of the metastore), a commit lands, then the write goes on: the commit survives.

moto's server as shipped ignores ``VersionId`` (``glue-stock``): no catalog can arbitrate
there, and these tests skip on it (README, "Reliability").
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from support.examples import sized
from support.harness import HiveHarness
from support.tcp_front import TcpFront

from lance_metastore.rules.schema import catalog_columns

WRITERS = 2
APPENDS = sized(10, 4)  # per writer; 4 in the fast tier
RACE_DEADLINE_SECONDS = 240


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"r{i}" for i in ids]})


@pytest.fixture
def managed(backend):
    if not getattr(backend, "conditional_updates", True):
        pytest.skip(f"{backend.label}: UpdateTable ignores VersionId, nothing can arbitrate")
    ns = backend.connect(managed_by="impl")
    db = backend.db("races")
    ns.create_namespace({"id": db})
    table_id = [*db, "events"]
    lance.write_dataset(rows(0), namespace_client=ns, table_id=table_id, mode="create")
    return ns, table_id


def make_columns_stale(ns: Any, table_id: list[str]) -> None:
    """Empty the catalog's columns (conditionally: a lost race is fine here), so that the
    sync that follows has something to write."""
    path, name = ns._table_path(table_id)
    entry = ns._require_lance_table(path, name)
    try:
        ns._catalog_write_table(path, entry, dataclasses.replace(entry, columns=[]))
    except LanceNamespaceError as error:
        assert error.code == ErrorCode.CONCURRENT_MODIFICATION, error


def sync_columns(ns: Any, table_id: list[str], location: str) -> None:
    make_columns_stale(ns, table_id)
    ns.sync_table_columns(table_id)


def sync_given_schema(ns: Any, table_id: list[str], location: str) -> None:
    """As the Spark writer syncs: with the schema it has just committed."""
    make_columns_stale(ns, table_id)
    ns.sync_table_columns(table_id, rows(0).schema)


def register_overwrite(ns: Any, table_id: list[str], location: str) -> None:
    ns.register_table(
        {
            "id": table_id,
            "location": location,
            "mode": "overwrite",
            "properties": {"managed_by": "impl"},
        }
    )


@pytest.mark.parametrize(
    "third",
    [sync_columns, sync_given_schema, register_overwrite],
    ids=lambda f: f.__name__,
)
def test_catalog_writes_racing_two_appenders_lose_nothing(backend, managed, third: Callable):
    """Two writers append ten times each while a third thread repeats one catalog write:
    every append that returned is in the table, at least 18 of 20 land, the third thread
    never fails, and the catalog's version is the dataset's latest."""
    ns, table_id = managed
    location = ns.describe_table({"id": table_id}).location
    returned: list[int] = []
    append_errors: list[str] = []
    third_errors: list[BaseException] = []
    third_calls = 0
    writers_done = threading.Event()

    def append(writer: int) -> None:
        own = backend.connect(managed_by="impl")
        for index in range(APPENDS):
            row_id = 1 + writer * APPENDS + index
            try:
                lance.write_dataset(
                    rows(row_id), namespace_client=own, table_id=table_id, mode="append"
                )
                returned.append(row_id)
            except Exception as error:
                append_errors.append(f"{type(error).__name__}: {error}"[:300])

    def repeat_third() -> None:
        nonlocal third_calls
        own = backend.connect(managed_by="impl")
        while not writers_done.is_set():
            try:
                third(own, table_id, location)
                third_calls += 1
            except Exception as error:
                third_errors.append(error)
                return

    writers = [threading.Thread(target=append, args=(w,)) for w in range(WRITERS)]
    repeater = threading.Thread(target=repeat_third)
    repeater.start()
    for thread in writers:
        thread.start()
    deadline = time.monotonic() + RACE_DEADLINE_SECONDS
    for thread in writers:
        thread.join(max(0.0, deadline - time.monotonic()))
    writers_done.set()
    repeater.join(max(1.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in [*writers, repeater]), "race did not finish in time"

    assert third_errors == [], third_errors
    assert third_calls >= 1
    assert len(returned) >= WRITERS * APPENDS - 2, (returned, append_errors)
    dataset = lance.dataset(namespace_client=ns, table_id=table_id)
    present = set(dataset.to_table()["id"].to_pylist())
    assert set(returned) | {0} <= present, sorted(set(returned) - present)
    described = ns.describe_table({"id": table_id})
    latest = dataset.version
    assert int(described.properties["version"]) == latest
    assert latest == 1 + len(present - {0})  # one version per landed append, none lost
    assert latest == max(v.version for v in ns.list_table_versions({"id": table_id}).versions)
    if third is not register_overwrite:  # the last sync leaves the columns true
        ns.sync_table_columns(table_id)
        wanted = [(c.name, c.type) for c in catalog_columns(rows(0).schema)]
        assert backend.columns(table_id[:-1], table_id[-1]) == wanted


# ----------------------------------------------------------------------------------------------
# Ordered: a sync held between its read and its write while a commit lands
# ----------------------------------------------------------------------------------------------


def held_sync(ns: Any, table_id: list[str], hold: Any, commit: Callable[[], None]) -> None:
    """Start a column sync, wait until ``hold`` stopped its first catalog write, land
    ``commit``, release the sync; it must then succeed."""
    errors: list[BaseException] = []

    def sync() -> None:
        try:
            ns.sync_table_columns(table_id)
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=sync)
    thread.start()
    assert hold.reached.wait(60), "the sync never reached its catalog write"
    commit()
    hold.release()
    thread.join(120)
    assert not thread.is_alive()
    assert errors == [], errors


def assert_commit_survived(ns: Any, table_id: list[str]) -> None:
    described = ns.describe_table({"id": table_id})
    assert described.properties["version"] == "2"
    dataset = lance.dataset(namespace_client=ns, table_id=table_id)
    assert sorted(dataset.to_table()["id"].to_pylist()) == [0, 1]
    assert dataset.version == 2
    assert [c.name for c in catalog_columns(dataset.schema)] == ["id", "v"]
    wanted = [(c.name, c.type) for c in catalog_columns(dataset.schema)]
    assert [
        (c.name, c.type) for c in ns._require_lance_table(*ns._table_path(table_id)).columns
    ] == wanted


def test_sync_held_before_its_update_never_undoes_a_commit_on_glue(glue, glue_emulator):
    """The Glue emulator holds the sync's UpdateTable (read done, VersionId in hand); an
    append commits; released, the update is refused for its stale VersionId and the sync
    retries on the new entry: version 2 stays, columns are recorded."""
    ns = glue.connect(managed_by="impl")
    ns.create_namespace({"id": ["ordered"]})
    table_id = ["ordered", "t"]
    lance.write_dataset(rows(0), namespace_client=ns, table_id=table_id, mode="create")
    writer = glue.connect(managed_by="impl")

    def sets_columns(parameters: dict[str, Any]) -> bool:
        descriptor = (parameters.get("TableInput") or {}).get("StorageDescriptor") or {}
        return bool(descriptor.get("Columns"))

    def commit() -> None:
        lance.write_dataset(rows(1), namespace_client=writer, table_id=table_id, mode="append")

    with glue_emulator.hold("UpdateTable", when=sets_columns) as hold:
        held_sync(ns, table_id, hold, commit)
    assert_commit_survived(ns, table_id)


@pytest.mark.parametrize(
    ("flavour", "method"),
    [
        ("hive3", "lock"),
        ("hive2", "lock"),
        ("hive3_hms31", "lock"),
        ("hive3_hms4", "alter_table_req"),
    ],
    ids=["hive3-lock", "hive2-lock", "hive3-3.1-lock", "hive3-4-conditional-alter"],
)
def test_sync_held_before_its_write_never_undoes_a_commit_on_hive(
    request: pytest.FixtureRequest, flavour: str, method: str
):
    """A TCP front of the metastore holds the sync's first write call: on HMS 2.3/3.1 the
    table lock it asks for (the commit then takes the lock and lands; the sync, locked, finds
    the entry moved and retries), on HMS 4 its conditional alter while it holds the lock (the
    commit takes no lock there and lands; the metastore refuses the stale alter)."""
    harness: HiveHarness = request.getfixturevalue(flavour)
    harness.reset()
    host, port = harness.uri.removeprefix("thrift://").rsplit(":", 1)
    writer = harness.connect(managed_by="impl")
    db = harness.db("ordered")
    writer.create_namespace({"id": db})
    table_id = [*db, "t"]
    lance.write_dataset(rows(0), namespace_client=writer, table_id=table_id, mode="create")
    if method == "alter_table_req":
        # HMS 4's conditional path expects the revision the first commit wrote: one commit
        # more, so that the sync and the commit below both take the one-call path.
        lance.write_dataset(rows(9), namespace_client=writer, table_id=table_id, mode="append")
    with TcpFront(host, int(port)) as front:
        syncing = harness.connect(managed_by="impl", uri=front.uri)

        def commit() -> None:
            lance.write_dataset(rows(1), namespace_client=writer, table_id=table_id, mode="append")

        with front.hold(method) as hold:
            held_sync(syncing, table_id, hold, commit)
    if method == "alter_table_req":
        dataset = lance.dataset(namespace_client=writer, table_id=table_id)
        assert sorted(dataset.to_table()["id"].to_pylist()) == [0, 1, 9]
        assert writer.describe_table({"id": table_id}).properties["version"] == "3"
        assert dataset.version == 3
    else:
        assert_commit_survived(writer, table_id)
