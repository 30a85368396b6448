"""The undo of a declaration (a failed create_table, a failed Spark job that declared its
table) removes the entry only while it is untouched, through one fenced removal: never a table
another writer wrote meanwhile, through the catalog or by path, and never leaving a fence.
Real Glue emulator and pylance; windows are held at the emulator, nothing of ours patched.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance_namespace.errors import TableNotFoundError
from support.glue_emulator import glue_endpoint_from_env
from support.harness import GlueHarness, HiveHarness
from support.tcp_front import TcpFront

from lance_metastore.rules.tables import FENCE_SECONDS, REMOVING_KEY

pytestmark = pytest.mark.skipif(
    glue_endpoint_from_env() is not None, reason="holds and fails calls in the emulator"
)

DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
UNWRITABLE = pa.table({"x": pa.array([None], pa.month_day_nano_interval())})


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _spark_writer(glue: GlueHarness, managed_by: str, table_id: list[str]) -> Any:
    """A Spark job's writer that declared ``table_id`` (as planning does for a new table)."""
    from lance_metastore.spark.options import ResolvedTable
    from lance_metastore.spark.plan import OP_CREATE, WritePlan
    from lance_metastore.spark.writer import LanceWriter

    declared = glue.connect(managed_by=managed_by).declare_table({"id": table_id})
    location = ResolvedTable(
        declared.location,
        None,
        "glue",
        {**glue.properties(), "managed_by": managed_by},
        tuple(table_id),
        managed_versioning=bool(declared.managed_versioning),
    )
    plan = WritePlan(location, OP_CREATE, DATA.schema, DATA.schema.names, None, declared=True)
    return LanceWriter(plan)


@pytest.mark.parametrize("managed_by", ["storage", "impl"])
def test_spark_abort_keeps_a_table_another_writer_wrote(glue: GlueHarness, managed_by: str):
    """A Spark job declares a new table; another writer's insert through the catalog is
    acknowledged; the job fails and Spark aborts it: the entry and the rows stay (the abort
    used to deregister the entry unconditionally)."""
    db = glue.db(f"abort_{managed_by}")
    ns = glue.connect(managed_by=managed_by)
    ns.create_namespace({"id": db})
    t = [*db, "t"]
    writer = _spark_writer(glue, managed_by, t)
    ns.insert_into_table({"id": t}, _ipc(DATA))
    writer.abort([None])
    reader = lance.dataset(namespace_client=glue.connect(managed_by=managed_by), table_id=t)
    assert reader.count_rows() == 3
    assert REMOVING_KEY not in (ns.describe_table({"id": t}).properties or {})


@pytest.mark.parametrize("managed_by", ["storage", "impl"])
def test_spark_abort_removes_its_untouched_declaration(glue: GlueHarness, managed_by: str):
    db = glue.db(f"abort_alone_{managed_by}")
    ns = glue.connect(managed_by=managed_by)
    ns.create_namespace({"id": db})
    t = [*db, "t"]
    _spark_writer(glue, managed_by, t).abort([None])
    with pytest.raises(TableNotFoundError):
        ns.describe_table({"id": t})


def test_a_failed_creates_undo_keeps_a_table_pylance_wrote_by_path(glue: GlueHarness):
    """Storage-managed: create_table declares the entry and its write fails; while its undo's
    fence is held, pylance with ``namespace_client`` writes the table by path (the entry is not
    touched) and is acknowledged. The undo finds storage holding a dataset under its fence:
    the entry stays, unfenced, with the rows."""
    db = glue.db("undo_pylance")
    a, b = glue.connect(), glue.connect()
    a.create_namespace({"id": db})
    t = [*db, "t"]
    failures: list[BaseException] = []

    def create() -> None:
        try:
            a.create_table({"id": t}, _ipc(UNWRITABLE))
        except BaseException as error:
            failures.append(error)

    with glue.emulator.hold("UpdateTable") as held:
        creator = threading.Thread(target=create)
        creator.start()
        assert held.reached.wait(60)
        written = lance.write_dataset(DATA, namespace_client=b, table_id=t, mode="overwrite")
        assert written.version == 1
        held.release()
        creator.join(60)
    assert len(failures) == 1 and not isinstance(failures[0], TableNotFoundError)
    assert REMOVING_KEY not in (b.describe_table({"id": t}).properties or {})
    assert lance.dataset(namespace_client=glue.connect(), table_id=t).count_rows() == 3


@pytest.mark.parametrize("managed_by", ["storage", "impl"])
def test_a_failed_removal_lifts_its_fence(glue: GlueHarness, managed_by: str):
    """The undo's DeleteTable fails after the fence: the fence is lifted (a conditional
    write), so the entry is not left refusing every write for good."""
    db = glue.db(f"unfence_{managed_by}")
    ns = glue.connect(managed_by=managed_by)
    ns.create_namespace({"id": db})
    t = [*db, "t"]
    with (
        glue.emulator.fault("DeleteTable", "AccessDeniedException", 400),
        pytest.raises(Exception) as failed,
    ):
        ns.create_table({"id": t}, _ipc(UNWRITABLE))
    assert not isinstance(failed.value, TableNotFoundError)
    assert REMOVING_KEY not in (ns.describe_table({"id": t}).properties or {})
    ns.insert_into_table({"id": t}, _ipc(DATA))
    assert (
        lance.dataset(namespace_client=glue.connect(managed_by=managed_by), table_id=t).count_rows()
        == 3
    )


def _fence_by_hand(glue: GlueHarness, db: list[str], name: str, since: int) -> None:
    """Set a fence as an undo does (a conditional write of ``lance.removing``), through Glue's
    own API: what an undo whose process then died leaves behind."""
    api = glue.emulator.client("glue")
    table = api.get_table(DatabaseName=db[-1], Name=name)["Table"]
    keep = ("Name", "StorageDescriptor", "PartitionKeys", "TableType", "Parameters")
    table_input = {k: v for k, v in table.items() if k in keep}
    table_input["Parameters"] = {**table.get("Parameters", {}), REMOVING_KEY: str(since)}
    api.update_table(DatabaseName=db[-1], TableInput=table_input, VersionId=table["VersionId"])


@pytest.mark.parametrize("managed_by", ["storage", "impl"])
def test_an_entry_being_removed_is_absent_to_reads_and_writes(glue: GlueHarness, managed_by: str):
    """While its fence is fresh, the entry is being removed: describe, exists and inserts
    answer 404, before any row reaches storage; create_table(exist_ok) answers 14 (retry)."""
    from lance_namespace.errors import ConcurrentModificationError

    db = glue.db(f"fresh_fence_{managed_by}")
    ns = glue.connect(managed_by=managed_by)
    ns.create_namespace({"id": db})
    t = [*db, "t"]
    location = ns.declare_table({"id": t}).location
    _fence_by_hand(glue, db, "t", int(time.time()))
    with pytest.raises(TableNotFoundError):
        ns.describe_table({"id": t})
    with pytest.raises(TableNotFoundError):
        ns.table_exists({"id": t})
    with pytest.raises(TableNotFoundError):
        ns.insert_into_table({"id": t}, _ipc(DATA))
    assert not os.path.exists(os.path.join(location.removeprefix("file://"), "_versions"))
    with pytest.raises(ConcurrentModificationError):
        ns.create_table({"id": t, "mode": "exist_ok"}, _ipc(DATA))


@pytest.mark.parametrize("managed_by", ["storage", "impl"])
def test_a_fence_left_by_a_dead_undo_is_lifted_by_the_next_write(
    glue: GlueHarness, managed_by: str
):
    """A fence older than the bound was left by an undo that died before its removal: the
    entry is a table again, and the next write lifts the fence."""
    db = glue.db(f"stale_fence_{managed_by}")
    ns = glue.connect(managed_by=managed_by)
    ns.create_namespace({"id": db})
    t = [*db, "t"]
    ns.declare_table({"id": t})
    _fence_by_hand(glue, db, "t", int(time.time() - 2 * FENCE_SECONDS))
    ns.describe_table({"id": t})
    ns.insert_into_table({"id": t}, _ipc(DATA))
    assert REMOVING_KEY not in (ns.describe_table({"id": t}).properties or {})
    assert lance.dataset(namespace_client=ns, table_id=t).count_rows() == 3


def test_a_fence_on_hive_waits_for_a_column_sync_it_would_erase(hive2: HiveHarness):
    """HMS 2.3, storage-managed: a failed create's fence and an insert's column sync both
    take the table lock, so the sync cannot land between the fence's compare and its alter
    (held at a TCP front) and be erased; the undo then finds the insert's dataset under its
    fence and keeps the entry, unfenced, with the insert's columns."""
    host, port = hive2.uri.removeprefix("thrift://").rsplit(":", 1)
    other = hive2.connect(managed_by="storage")
    db = hive2.db("fence_locked")
    other.create_namespace({"id": db})
    t = [*db, "t"]
    failures: list[BaseException] = []
    inserted: list[Any] = []
    with TcpFront(host, int(port)) as front:
        ns = hive2.connect(managed_by="storage", uri=front.uri)

        def create() -> None:
            try:
                ns.create_table({"id": t}, _ipc(UNWRITABLE))
            except BaseException as error:
                failures.append(error)

        def insert() -> None:
            inserted.append(other.insert_into_table({"id": t}, _ipc(DATA)))

        with front.hold("alter_table_with_environment_context") as held:
            creator = threading.Thread(target=create)
            creator.start()
            assert held.reached.wait(60)
            inserter = threading.Thread(target=insert)
            inserter.start()
            inserter.join(2)  # the insert's rows are written; its column sync waits
            held.release()
            creator.join(60)
            inserter.join(90)
    assert len(failures) == 1 and not isinstance(failures[0], TableNotFoundError)
    assert inserted and inserted[0].num_inserted_rows == 3
    described = other.describe_table({"id": t})
    assert REMOVING_KEY not in (described.properties or {})
    assert lance.dataset(namespace_client=other, table_id=t).count_rows() == 3
    entry = other._catalog_get_table(tuple(db), "t")
    assert entry is not None and [c.name for c in entry.columns or []] == ["id"]


@pytest.mark.parametrize("managed_by", ["storage", "impl"])
def test_a_create_refuses_a_location_holding_a_dataset(glue: GlueHarness, managed_by: str):
    """A deregistered table's data stays at its location; a new create_table of the same name
    refuses it (table already exists, as Lance's create of an existing dataset) instead of
    adopting or appending to the old rows, whoever manages the versions."""
    from lance_namespace.errors import TableAlreadyExistsError

    db = glue.db(f"recreate_{managed_by}")
    ns = glue.connect(managed_by=managed_by)
    ns.create_namespace({"id": db})
    t = [*db, "t"]
    ns.create_table({"id": t}, _ipc(DATA))
    ns.deregister_table({"id": t})
    with pytest.raises(TableAlreadyExistsError, match="Dataset already exists"):
        ns.create_table({"id": t}, _ipc(DATA.slice(0, 1)))
    with pytest.raises(TableNotFoundError):
        ns.describe_table({"id": t})


def test_a_fence_never_outlives_its_bound_whatever_time_it_holds():
    """A fence is fresh only for a finite time at most FENCE_SKEW_SECONDS ahead of this clock
    and younger than FENCE_SECONDS: ``inf``, a day ahead or text are stale (another tool, or a
    clock far ahead, can never fence an entry for longer)."""
    from lance_metastore.rules.tables import FENCE_SECONDS, FENCE_SKEW_SECONDS, fenced

    now = time.time()
    fresh = [now, now - FENCE_SECONDS + 30, now + FENCE_SKEW_SECONDS / 2]
    stale = [now - FENCE_SECONDS - 1, now + FENCE_SKEW_SECONDS + 30, now + 86400]
    assert all(fenced({REMOVING_KEY: str(t)}) for t in fresh)
    assert not any(fenced({REMOVING_KEY: str(t)}) for t in stale)
    for text in ("inf", "-inf", "nan", "1e999", "", "soon"):
        assert not fenced({REMOVING_KEY: text})
