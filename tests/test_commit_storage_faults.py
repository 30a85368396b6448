"""A catalog commit whose finalize storage refuses (S3 answering 503 on the final name's copy),
on moto's S3 behind the Glue emulator's relay, which injects the faults; nothing of ours mocked.

An acknowledged commit is never silently replaced: a writer that writes the table by path
afterwards cannot take the acknowledged version's final name, and readers through the catalog
find the acknowledged rows.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import lance
import pyarrow as pa
import pytest
from support.glue_emulator import glue_endpoint_from_env
from support.harness import GlueHarness, HiveHarness
from support.manifests import final_name
from support.tcp_front import TcpFront
from support.waiting import wait_until

from lance_metastore import GlueNamespace

pytestmark = pytest.mark.skipif(
    glue_endpoint_from_env() is not None, reason="injects faults in the emulator"
)

DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64())})


def _managed_on_s3(glue: GlueHarness, bucket: str) -> GlueNamespace:
    emulator = glue.emulator
    emulator.client("s3").create_bucket(Bucket=bucket)
    return GlueNamespace(
        **{
            **glue.properties(),
            "root": f"s3://{bucket}/lake",
            "storage.aws_endpoint": emulator.endpoint,
            "storage.allow_http": "true",
            "storage.aws_access_key_id": emulator.access_key_id,
            "storage.aws_secret_access_key": emulator.secret_access_key,
            "storage.aws_region": "us-east-1",
            "managed_by": "impl",
        }
    )


def _fresh(ns: Any) -> Any:
    return type(ns)(**ns.__getstate__()["properties"])


def _table_with_one_version(glue: GlueHarness, bucket: str) -> tuple[GlueNamespace, Any]:
    ns = _managed_on_s3(glue, bucket)
    ns.create_namespace({"id": ["db"]})
    lance.write_dataset(DATA.slice(0, 1), namespace_client=ns, table_id=["db", "t"], mode="create")
    return ns, ns.describe_table({"id": ["db", "t"]})


def _append_while_the_final_name_fails(glue: GlueHarness, ns: GlueNamespace) -> None:
    """Append row 2 as version 2 while every write of version 2's final name answers 503:
    the commit is not acknowledged (its outcome is unknown, as Lance reports it)."""
    faulty = glue.emulator.storage_fault("PUT", f"/_versions/{final_name(2)}$")
    with faulty as fault, pytest.raises(OSError, match="unknown"):
        lance.write_dataset(
            DATA.slice(1, 1), namespace_client=ns, table_id=["db", "t"], mode="append"
        )
    assert fault.met >= 1


def _ids(ns: GlueNamespace) -> tuple[int, list[int]]:
    reader = lance.dataset(namespace_client=_fresh(ns), table_id=["db", "t"])
    return reader.version, sorted(reader.to_table()["id"].to_pylist())


def test_a_commit_whose_final_copy_failed_is_not_acknowledged(glue: GlueHarness):
    """Storage refuses the final copy of version 2's manifest: the writer is not told its
    commit landed (before, it was, with the staging name, and a writer by path then took
    version 2's final name: the acknowledged row vanished). A writer by path that takes the
    name afterwards holds version 2, acknowledged to it, and readers through the catalog find
    it; the next catalog commit follows it."""
    ns, described = _table_with_one_version(glue, "unacknowledged")
    location, options = described.location, described.storage_options
    _append_while_the_final_name_fails(glue, ns)
    theirs = lance.write_dataset(DATA.slice(2, 1), location, mode="append", storage_options=options)
    assert theirs.version == 2
    assert _ids(ns) == (2, [1, 3])
    lance.write_dataset(DATA.slice(1, 1), namespace_client=ns, table_id=["db", "t"], mode="append")
    assert _ids(ns) == (3, [1, 2, 3])
    assert lance.dataset(location, storage_options=options).version == 3


def test_an_unknown_outcome_resolves_when_storage_answers_again(glue: GlueHarness):
    """The same fault, then storage answers again and no one wrote around the catalog: the
    first reader's copy finalizes the recorded version, and every later reader (by name or
    by path) finds it; the next commit follows it."""
    ns, described = _table_with_one_version(glue, "resolved")
    _append_while_the_final_name_fails(glue, ns)
    assert _ids(ns) == (2, [1, 2])
    by_path = lance.dataset(described.location, storage_options=described.storage_options)
    assert by_path.version == 2
    lance.write_dataset(DATA.slice(2, 1), namespace_client=ns, table_id=["db", "t"], mode="append")
    assert _ids(ns) == (3, [1, 2, 3])


# ---------------------------------------------------------------------------------------------
# The Spark writer's undo after a commit whose reply never came (still in flight on the server)
# ---------------------------------------------------------------------------------------------


def test_spark_undo_keeps_the_files_of_a_commit_still_in_flight(glue: GlueHarness, tmp_path):
    """The job's catalog commit (Glue UpdateTable) is held at the server past the client's
    read timeout, and every retry is refused: the job's commit fails with its outcome unknown.
    Spark then calls the writer's abort. Nothing is deleted, so when the held write lands a
    moment later, the version it records reads the job's rows (before, the undo deleted the
    files that version references). Driven as Spark's driver drives it: commit, then abort."""
    from lance.fragment import write_fragments

    from lance_metastore.spark.fragments import LanceCommitMessage
    from lance_metastore.spark.options import ResolvedTable
    from lance_metastore.spark.plan import OP_APPEND, WritePlan
    from lance_metastore.spark.writer import LanceWriter

    properties = {**glue.properties(), "managed_by": "impl", "read_timeout_sec": "1"}
    ns = GlueNamespace(**properties)
    ns.create_namespace({"id": ["db"]})
    t = ["db", "t"]
    lance.write_dataset(DATA, namespace_client=ns, table_id=t, mode="create")
    uri = ns.describe_table({"id": t}).location
    location = ResolvedTable(uri, None, "glue", properties, tuple(t), managed_versioning=True)
    fragments = write_fragments(DATA, uri)
    message = LanceCommitMessage(
        fragments=[json.dumps(f.to_json()) for f in fragments],
        files=[d.path for f in fragments for d in f.files],
        rows=DATA.num_rows,
    )
    writer = LanceWriter(WritePlan(location, OP_APPEND, DATA.schema, DATA.schema.names, 1))
    emulator = glue.emulator
    with emulator.hold("UpdateTable") as held:

        def refuse_the_retries() -> None:
            if held.reached.wait(30):
                emulator.inject_fault("UpdateTable", "InternalServiceException", 500, 10**6)

        threading.Thread(target=refuse_the_retries, daemon=True).start()
        with pytest.raises(OSError):
            writer.commit([message])
        writer.abort([message])  # Spark aborts a job whose commit raised
        emulator.clear_faults()
        held.release()  # the commit lands now
    wait_until(
        lambda: ns.describe_table({"id": t}).properties["version"] == "2", 30, "the held commit"
    )
    reader = lance.dataset(namespace_client=_fresh(ns), table_id=t)
    assert reader.version == 2
    assert reader.to_table()["id"].to_pylist() == [1, 2, 3, 1, 2, 3]


# ---------------------------------------------------------------------------------------------
# A failed create's undo never removes another writer's acknowledged write
# ---------------------------------------------------------------------------------------------


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _race_a_failed_creates_removal(ns: Any, other: Any, db: list[str], hold: Any) -> None:
    """``ns`` creates ``db.t`` with rows Lance cannot write; while its undo's removal is held
    (``hold``: a context manager whose value has ``reached`` and ``release()``), ``other``
    inserts into the table: refused, and the entry is gone afterwards."""
    from lance_namespace.errors import LanceNamespaceError, TableNotFoundError

    ns.create_namespace({"id": db})
    t = [*db, "t"]
    unwritable = pa.table({"x": pa.array([None], pa.month_day_nano_interval())})
    failures: list[BaseException] = []

    def create() -> None:
        try:
            ns.create_table({"id": t}, _ipc(unwritable))
        except BaseException as error:
            failures.append(error)

    with hold as held:
        creator = threading.Thread(target=create)
        creator.start()
        assert held.reached.wait(60)
        with pytest.raises(LanceNamespaceError):
            other.insert_into_table({"id": t}, _ipc(DATA))
        held.release()
        creator.join(60)
    assert len(failures) == 1 and not isinstance(failures[0], TableNotFoundError)
    with pytest.raises(TableNotFoundError):
        other.describe_table({"id": t})


@pytest.mark.parametrize("managed_by", ["storage", "impl"])
def test_a_write_racing_a_failed_creates_removal_is_refused_not_lost(
    glue: GlueHarness, managed_by: str
):
    """create_table declares the entry, its write fails (Lance has no month-day-nano
    interval type), and the undo removes the entry it judged untouched. Glue's DeleteTable
    takes no condition: another writer's insert between that judgement and the DeleteTable
    (held at the server) used to land, be acknowledged, and vanish with the entry. The undo
    fences the entry with a conditional write first: the insert is refused (not found), never
    acknowledged, and the entry is removed."""
    ns, other = glue.connect(managed_by=managed_by), glue.connect(managed_by=managed_by)
    hold = glue.emulator.hold("DeleteTable")
    _race_a_failed_creates_removal(ns, other, glue.db(f"fence_{managed_by}"), hold)


@pytest.mark.parametrize("managed_by", ["storage", "impl"])
def test_a_write_racing_a_failed_creates_drop_is_refused_not_lost_on_hive(
    hive2: HiveHarness, managed_by: str
):
    """The same on HMS 2.3, whose ``drop_table`` takes no condition either: a TCP front
    holds the undo's drop_table; the fence (a locked, compared alter) refuses the insert."""
    host, port = hive2.uri.removeprefix("thrift://").rsplit(":", 1)
    other = hive2.connect(managed_by=managed_by)
    with TcpFront(host, int(port)) as front:
        ns = hive2.connect(managed_by=managed_by, uri=front.uri)
        hold = front.hold("drop_table")
        _race_a_failed_creates_removal(ns, other, hive2.db(f"fence_{managed_by}"), hold)
