"""The one commit routine (operations/commits.py), on every backend.

- every commit path (single, batch, multi-operation) applies the same rules: catch-up with
  versions written around the catalog, the manifest check, conflicts;
- a manifest path is the table's own staging manifest of the version, or 13;
- every write keeps what other tools wrote on the entry (read-modify-write of the whole
  catalog object);
- Lance's errors are mapped by class and leading kind; our own faults answer 18 with a trace.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lance.commit import CommitConflictError
from lance_namespace.errors import (
    ConcurrentModificationError,
    ErrorCode,
    InternalError,
    InvalidInputError,
    LanceNamespaceError,
    TableColumnNotFoundError,
    TableTagNotFoundError,
    TableVersionNotFoundError,
    UnsupportedOperationError,
)
from support.examples import examples
from support.harness import OTHERS_COMMENT, OTHERS_PARAMETER, Harness
from support.manifests import final_name, staging_of, staging_path, store_path

from lance_metastore.operations.datasets import lance_errors
from lance_metastore.rules.errors import classify_lance_error, translate_errors
from lance_metastore.rules.manifests import staging_problem
from lance_metastore.rules.schema import CatalogColumn, keep_comments

ROWS = pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]})


def code_of(call: Any, *args: Any) -> int:
    with pytest.raises(LanceNamespaceError) as caught:
        call(*args)
    return int(caught.value.code)


# ---------------------------------------------------------------------------------------------
# The manifest rule
# ---------------------------------------------------------------------------------------------

LOCATION = "/lake/sales/orders.lance"


def test_only_the_tables_own_staging_manifest_of_the_version_is_accepted():
    own = staging_path(LOCATION, 3)
    assert staging_problem(LOCATION, 3, "V2", own) is None
    assert staging_problem(LOCATION, 3, None, own) is None
    assert staging_problem(LOCATION, 3, "V1", staging_path(LOCATION, 3, "V1")) is None
    assert (
        staging_problem(
            "s3://bucket/lake/t.lance", 2, "V2", staging_path("s3://elsewhere/lake/t.lance", 2)
        )
        is None
    )
    refused = [
        staging_path(LOCATION, 4),  # another version's
        staging_path("/lake/sales/other.lance", 3),  # another table's
        staging_path("/lake/sales/orders.lance/nested", 3),
        f"lake/sales/orders.lance/_versions/{final_name(3)}",  # a final manifest
        f"lake/sales/orders.lance/_versions/../../other.lance/_versions/{final_name(3)}-x",
        f"lake/sales/./orders.lance/_versions/{final_name(3)}-x",
        f"lake/sales//orders.lance/_versions/{final_name(3)}-x",
        f"lake/sales/orders.lance/_versions/{final_name(3)}-",
        f"lake/sales/orders.lance/_versions/{final_name(3)}-a/b",
        "m/3",
        "",
    ]
    for path in refused:
        assert staging_problem(LOCATION, 3, "V2", path) is not None, path


@settings(max_examples=examples(200), deadline=None)
@given(
    version=st.integers(1, 2**40),
    other=st.integers(1, 2**40),
    prefix=st.sampled_from(["", "../", "./", "/", "x/"]),
    table=st.sampled_from(["orders.lance", "orders.lance2", "other.lance", "orders"]),
    token=st.text(st.characters(codec="ascii", categories=["L", "N", "P"]), max_size=12),
)
def test_the_manifest_rule_holds_for_any_path(version, other, prefix, table, token):
    """Accepted exactly when the path is <table>/_versions/<final name of version>-<token>,
    the table this one, the version this one, every segment a real name."""
    path = f"{prefix}lake/sales/{table}/_versions/{final_name(other)}-{token}"
    problem = staging_problem(LOCATION, version, "V2", path)
    own = (
        prefix in ("", "/")
        and table == "orders.lance"
        and other == version
        and token != ""
        and token[0].isalnum()
        and all(ch.isalnum() or ch in "-_" for ch in token)
    )
    assert (problem is None) == own, (path, problem)


def test_a_column_comment_survives_unless_lance_gives_one():
    before = [CatalogColumn("id", "bigint", "customer id"), CatalogColumn("v", "string", "")]
    after = keep_comments(
        [
            CatalogColumn("ID", "bigint"),
            CatalogColumn("v", "string"),
            CatalogColumn("vec", "array<float>", "lance vector(3)"),
        ],
        before,
    )
    assert [c.comment for c in after] == ["customer id", "", "lance vector(3)"]
    # our marker never replaces a steward's comment (e2); a marker held follows the schema
    own = keep_comments([CatalogColumn("id", "bigint", "lance vector(2)")], before)
    assert own[0].comment == "customer id"
    resized = keep_comments(
        [CatalogColumn("vec", "array<float>", "lance vector(4)")],
        [CatalogColumn("vec", "array<float>", "lance vector(3)")],
    )
    assert resized[0].comment == "lance vector(4)"


# ---------------------------------------------------------------------------------------------
# Faults by type
# ---------------------------------------------------------------------------------------------


def test_lance_errors_are_mapped_by_class_and_leading_kind():
    assert classify_lance_error(CommitConflictError("anything")) is ConcurrentModificationError
    # words anywhere in a message decide nothing
    assert classify_lance_error(OSError("IO error: /data/retryable-concurrent/x")) is InternalError
    assert classify_lance_error(RuntimeError("disk invalid state")) is InternalError
    assert classify_lance_error(ValueError("whatever it says")) is InvalidInputError
    assert (
        classify_lance_error(OSError("Invalid user input: Column 'z' is bad")) is InvalidInputError
    )
    assert classify_lance_error(RuntimeError("Not supported: no")) is UnsupportedOperationError
    preempted = OSError("Retryable commit conflict for version 6: preempted by Merge at version 6")
    assert classify_lance_error(preempted) is ConcurrentModificationError
    assert classify_lance_error(OSError("IO error: commit conflict")) is InternalError
    carried = OSError("Namespace error: Concurrent modification: 'db$t' changed concurrently")
    assert classify_lance_error(carried) is ConcurrentModificationError
    missing = OSError("Namespace error: Table version not found: version 9 of table 'db$t'")
    assert classify_lance_error(missing) is TableVersionNotFoundError
    tag = ValueError("Ref not found error: tag nope does not exist")
    assert classify_lance_error(tag) is TableTagNotFoundError
    # the object named first decides: a column named "version" is a column
    column = ValueError("Column version does not exist in the dataset")
    assert classify_lance_error(column) is TableColumnNotFoundError
    invalid_ref = OSError("Ref is invalid: Ref characters must be either alphanumeric")
    assert classify_lance_error(invalid_ref) is InvalidInputError
    gave_up = OSError("Failed to commit the transaction after 20 attempts.  This may indicate ...")
    assert classify_lance_error(gave_up) is ConcurrentModificationError


def test_a_commit_that_ran_out_of_retries_is_14_not_18(tmp_path: Path):
    """Lance raises a plain OSError ("Too many concurrent writers.") when a commit keeps
    losing until its retries run out: a race the caller may retry, never a server fault. Made
    by Lance itself, so a change of its wording fails here."""
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(ROWS, uri)
    stale = lance.dataset(uri)
    lance.dataset(uri).update({"v": "'c'"}, "id = 1")
    with pytest.raises(Exception) as caught:
        stale.update({"v": "'d'"}, "id = 1", conflict_retries=0)
    assert classify_lance_error(caught.value) is ConcurrentModificationError


def test_a_callers_bad_index_or_tag_is_13_not_18(glue: Any):
    """pylance refuses an index type the column cannot take with a TypeError, and Lance a tag
    name it does not accept with "Ref is invalid": the caller's input, 13 (e13, e8)."""
    ns = glue.connect()
    ns.create_namespace({"id": ["db"]})
    t = ["db", "t"]
    vectors = pa.FixedSizeListArray.from_arrays(pa.array([0.5] * 8, pa.float32()), 2)
    lance.write_dataset(
        pa.table({"id": pa.array(range(4), pa.int64()), "emb": vectors}),
        namespace_client=ns,
        table_id=t,
        mode="create",
    )
    btree = {"id": t, "column": "emb", "index_type": "BTREE"}
    assert code_of(ns.create_table_index, btree) == ErrorCode.INVALID_INPUT
    fts = {"id": t, "column": "id", "index_type": "FTS"}
    assert code_of(ns.create_table_index, fts) == ErrorCode.INVALID_INPUT
    tag = {"id": t, "tag": "bad tag", "version": 1}
    assert code_of(ns.create_table_tag, tag) == ErrorCode.INVALID_INPUT
    dropped = {"id": t, "columns": ["version"]}
    assert code_of(ns.alter_table_drop_columns, dropped) == ErrorCode.TABLE_COLUMN_NOT_FOUND


def test_our_own_faults_answer_18_with_their_trace_logged(caplog: pytest.LogCaptureFixture):
    """lance_errors catches only what Lance raises: a TypeError or KeyError of ours goes on to
    the operation's translation, 18 with the trace in the log (never 13)."""
    for fault in (TypeError("bad call"), KeyError("missing key")):
        caplog.clear()
        with (
            caplog.at_level(logging.ERROR, logger="lance_metastore"),
            pytest.raises(LanceNamespaceError) as caught,
            translate_errors("write to", "'db$t'", lambda e, c: None),
            lance_errors("write to", "table 'db$t'"),
        ):
            raise fault
        assert caught.value.code == ErrorCode.INTERNAL
        assert any(r.exc_info and r.exc_info[1] is fault for r in caplog.records)


# ---------------------------------------------------------------------------------------------
# Every commit path, one set of rules (every backend)
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def managed(backend: Harness):
    if not getattr(backend, "conditional_updates", True):
        pytest.skip(f"{backend.label}: UpdateTable ignores VersionId, nothing can arbitrate")
    ns = backend.connect(managed_by="impl")
    db = backend.db("routine")
    ns.create_namespace({"id": db})
    return ns, db


def _paths(ns: Any, table_id: list[str], version: int) -> dict[str, Any]:
    """The three commit paths, each committing ``version`` with ``path``."""

    def single(path: str) -> None:
        ns.create_table_version({"id": table_id, "version": version, "manifest_path": path})

    def batch(path: str) -> None:
        entry = {"id": table_id, "version": version, "manifest_path": path}
        ns.batch_create_table_versions({"entries": [entry]})

    def multi(path: str) -> None:
        commit = {"id": table_id, "version": version, "manifest_path": path}
        deletion = {"id": table_id, "ranges": [{"start_version": 1, "end_version": 2}]}
        ns.batch_commit_tables(
            {"operations": [{"create_table_version": commit}, {"delete_table_versions": deletion}]}
        )

    return {"single": single, "batch": batch, "multi": multi}


@pytest.mark.parametrize("path_kind", ["single", "batch", "multi"])
def test_every_commit_path_catches_up_with_storage(managed, path_kind):
    """Storage ahead of the catalog (a commit around it): the single call, the batch and the
    multi-operation batch all adopt storage's versions and answer 14 for the taken number,
    so no commit is lost on a final name written twice."""
    ns, db = managed
    t = [*db, f"ahead_{path_kind}"]
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="create")
    location = ns.describe_table({"id": t}).location
    lance.write_dataset(ROWS, location, mode="append")  # version 2, around the catalog
    commit = _paths(ns, t, 2)[path_kind]
    assert code_of(commit, staging_of(ns, t, 2)) == ErrorCode.CONCURRENT_MODIFICATION
    assert ns.describe_table({"id": t}).properties["version"] == "2"
    assert lance.dataset(namespace_client=ns, table_id=t).count_rows() == 4


@pytest.mark.parametrize("path_kind", ["single", "batch", "multi"])
def test_every_commit_path_refuses_a_foreign_manifest(managed, path_kind):
    """Table A's version may not name table B's manifest, nor a path outside A's _versions/:
    13 on every path, and nothing changes."""
    ns, db = managed
    a, b = [*db, f"a_{path_kind}"], [*db, f"b_{path_kind}"]
    for t in (a, b):
        lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="create")
    commit = _paths(ns, a, 2)[path_kind]
    b_location = ns.describe_table({"id": b}).location
    a_location = ns.describe_table({"id": a}).location
    for path in (
        staging_of(ns, b, 2),
        f"{store_path(b_location)}/_versions/{final_name(1)}",
        f"{store_path(a_location)}/_versions/../../{b[-1]}.lance/_versions/{final_name(2)}-x",
        f"{store_path(a_location)}/_versions/{final_name(3)}-{uuid.uuid4()}",
    ):
        assert code_of(commit, path) == ErrorCode.INVALID_INPUT, path
    assert ns.describe_table({"id": a}).properties["version"] == "1"
    assert lance.dataset(namespace_client=ns, table_id=a).count_rows() == 2


def test_a_batch_after_a_creator_wrote_version_1_continues_after_it(managed):
    """declare_table, then a creator writes version 1 straight to storage (lance-spark's
    CREATE TABLE): a batch commit of version 1 is 14, as the single call answers."""
    ns, db = managed
    t = [*db, "declared"]
    location = ns.declare_table({"id": t}).location
    lance.write_dataset(ROWS, location)
    entry = {"id": t, "version": 1, "manifest_path": staging_of(ns, t, 1)}
    assert (
        code_of(ns.batch_create_table_versions, {"entries": [entry]})
        == ErrorCode.CONCURRENT_MODIFICATION
    )


# ---------------------------------------------------------------------------------------------
# What a commit records is ours alone; a version's final name holds the manifest recorded
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["version", "lance.manifest_path", "lance.naming_scheme"])
def test_declare_and_register_refuse_what_commits_record(managed, key):
    """A caller's ``version`` or ``lance.*`` property would make the table open whatever
    manifest it names (another table's): declare and register refuse it (13), creating
    nothing."""
    ns, db = managed
    b = [*db, "victim"]
    lance.write_dataset(ROWS, namespace_client=ns, table_id=b, mode="create")
    b_location = ns.describe_table({"id": b}).location
    foreign = {key: "1" if key == "version" else f"{store_path(b_location)}/_versions/x"}
    a = [*db, "intruder"]
    assert code_of(ns.declare_table, {"id": a, "properties": foreign}) == ErrorCode.INVALID_INPUT
    a_location = b_location.replace("victim.lance", "intruder.lance")
    lance.write_dataset(ROWS, a_location)
    registration = {"id": a, "location": a_location, "properties": foreign}
    assert code_of(ns.register_table, registration) == ErrorCode.INVALID_INPUT
    assert code_of(ns.describe_table, {"id": a}) == ErrorCode.TABLE_NOT_FOUND


def test_a_recorded_manifest_that_is_not_the_tables_own_is_refused(managed):
    """Another tool writes table B's manifest into A's entry: A's answers refuse it (13)
    instead of opening B's data."""
    ns, db = managed
    a, b = [*db, "a"], [*db, "b"]
    for t in (a, b):
        lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="create")
    b_manifest = ns.describe_table_version({"id": b}).version.manifest_path
    path = tuple(db)
    entry = ns._require_lance_table(path, "a")
    parameters = {**entry.parameters, "lance.manifest_path": b_manifest}
    ns._catalog_write_table(path, entry, dataclasses.replace(entry, parameters=parameters))
    assert code_of(ns.describe_table_version, {"id": a}) == ErrorCode.INVALID_INPUT
    assert code_of(ns.list_table_versions, {"id": a}) == ErrorCode.INVALID_INPUT


def test_a_commit_around_the_catalog_before_finalize_loses_no_acknowledged_commit(managed):
    """A writer commits version 2 straight to storage between a catalog commit's catch-up and
    its finalize (e6): the catalog commit finds the final name holding another manifest, the
    catalog adopts storage's version and the commit answers 14; Lance rebases it to version 3.
    Both writers' rows are in the table, and every version's final name holds what the
    catalog answers for it."""
    ns, db = managed
    t = [*db, "raced"]
    lance.write_dataset(ROWS.slice(0, 1), namespace_client=ns, table_id=t, mode="create")
    location = ns.describe_table({"id": t}).location
    write = ns._catalog_write_table
    fired: list[int] = []

    def around_the_catalog_first(path: Any, expected: Any, updated: Any) -> None:
        if not fired and updated.parameters.get("version") == "2":
            fired.append(lance.write_dataset(ROWS.slice(1, 1), location, mode="append").version)
        write(path, expected, updated)

    ns._catalog_write_table = around_the_catalog_first
    theirs = pa.table({"id": pa.array([9], pa.int64()), "v": ["z"]})
    ours = lance.write_dataset(theirs, namespace_client=ns, table_id=t, mode="append")
    assert fired == [2]
    assert ours.version == 3
    reader = lance.dataset(namespace_client=backend_fresh(ns), table_id=t)
    assert reader.version == 3
    assert sorted(reader.to_table()["id"].to_pylist()) == [1, 2, 9]
    assert ns.describe_table({"id": t}).properties["version"] == "3"


def backend_fresh(ns: Any) -> Any:
    """A second namespace object like ``ns`` (no cache shared)."""
    return type(ns)(**ns.__getstate__()["properties"])


def test_dropping_a_middle_column_of_a_managed_table(managed):
    """The metastore refuses a column list whose types change position by position; the
    write sets it through an empty list, on HMS 4's conditional path too (e10)."""
    ns, db = managed
    t = [*db, "wide"]
    rows = pa.table({"id": [1], "v": ["a"], "w": [1.5]})
    lance.write_dataset(rows, namespace_client=ns, table_id=t, mode="create")
    ns.sync_table_columns(t)
    lance.write_dataset(rows, namespace_client=ns, table_id=t, mode="append")
    ns.alter_table_drop_columns({"id": t, "columns": ["v"]})
    assert lance.dataset(namespace_client=ns, table_id=t).schema.names == ["id", "w"]
    described = ns.describe_table({"id": t})
    assert described.properties["version"] == "3"


def test_hms4_rename_never_undoes_a_concurrent_commit(hive3_hms4: Any):
    """HMS 4's commits take no lock (their alter_table_req expects the revision), so a rename
    writes the same conditional way: a commit landing between the rename's read and its write
    makes the rename answer 14, and the commit stays (e7)."""
    hive3_hms4.reset()
    ns, other = hive3_hms4.connect(managed_by="impl"), hive3_hms4.connect(managed_by="impl")
    db = hive3_hms4.db("renamed")
    ns.create_namespace({"id": db})
    t = [*db, "t"]
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="create")
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="append")
    write = ns._conditional_write
    fired: list[int] = []

    def commit_first(*args: Any) -> bool:
        if not fired:
            appended = lance.write_dataset(ROWS, namespace_client=other, table_id=t, mode="append")
            fired.append(appended.version)
        return bool(write(*args))

    ns._conditional_write = commit_first
    renamed = {"id": t, "new_table_name": "t2", "new_namespace_id": db}
    assert code_of(ns.rename_table, renamed) == ErrorCode.CONCURRENT_MODIFICATION
    assert fired == [3]
    reader = lance.dataset(namespace_client=hive3_hms4.connect(), table_id=t)
    assert (reader.version, reader.count_rows()) == (3, 6)


def test_deleting_records_of_versions_not_yet_committed_hides_no_future_commit(managed):
    """A deletion range past the latest version deletes nothing there: the versions committed
    later are listed and can be opened (e14)."""
    ns, db = managed
    t = [*db, "future"]
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="create")
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="append")
    deletion = {"id": t, "ranges": [{"start_version": 1, "end_version": 2}]}
    assert ns.batch_delete_table_versions(deletion).deleted_count == 1
    ahead = {"id": t, "ranges": [{"start_version": 3, "end_version": 100}]}
    assert ns.batch_delete_table_versions(ahead).deleted_count == 0
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="append")
    listed = [v.version for v in ns.list_table_versions({"id": t}).versions]
    assert sorted(listed) == [2, 3]
    assert lance.dataset(namespace_client=ns, table_id=t, version=3).count_rows() == 6


# ---------------------------------------------------------------------------------------------
# What other tools wrote survives every write
# ---------------------------------------------------------------------------------------------


def test_every_write_keeps_what_other_tools_wrote(backend: Harness):
    """A data steward's description, owner, SerDe, storage parameters, a column comment and a
    Lake Formation-style parameter survive a commit, a batch commit, a record deletion, a
    column sync with a new schema and a register overwrite; only our fields change."""
    ns = backend.connect(managed_by="impl")
    db = backend.db("kept")
    ns.create_namespace({"id": db})
    t = [*db, "orders"]
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="create")
    ns.sync_table_columns(t)
    backend.write_as_another_tool(db, "orders", column="id")
    written = backend.others_fields(db, "orders")
    assert written["comments"]["id"] == OTHERS_COMMENT
    assert written["parameter"] == OTHERS_PARAMETER[1]

    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="append")  # a commit
    assert backend.others_fields(db, "orders") == written
    ns.batch_delete_table_versions({"id": t, "ranges": [{"start_version": 1, "end_version": 2}]})
    assert backend.others_fields(db, "orders") == written
    wider = ROWS.schema.append(pa.field("extra", pa.float64()))
    ns.sync_table_columns(t, wider)
    after_sync = backend.others_fields(db, "orders")
    assert after_sync["comments"] == {
        **written["comments"],
        "extra": after_sync["comments"]["extra"],
    }
    assert {k: v for k, v in after_sync.items() if k != "comments"} == {
        k: v for k, v in written.items() if k != "comments"
    }
    location = ns.describe_table({"id": t}).location
    ns.register_table(
        {"id": t, "location": location, "mode": "overwrite", "properties": {"managed_by": "impl"}}
    )
    after_register = backend.others_fields(db, "orders")
    assert after_register["comments"]["id"] == OTHERS_COMMENT
    assert {k: v for k, v in after_register.items() if k != "comments"} == {
        k: v for k, v in written.items() if k != "comments"
    }
    assert ns.describe_table({"id": t}).properties["version"] == "2"
    assert lance.dataset(namespace_client=ns, table_id=t).count_rows() == 4


# ---------------------------------------------------------------------------------------------
# The Spark writer's undo never deletes what a committed version references
# ---------------------------------------------------------------------------------------------


def test_spark_undo_keeps_files_a_later_version_references(tmp_path):
    """The job's commit landed but its reply was lost, and another writer's commit (an
    overwrite) followed at once: the latest version no longer references the job's files, the
    job's own version does. ``committed`` says so, so the undo deletes nothing, and time
    travel to the job's version still reads its rows."""
    from lance.fragment import write_fragments

    from lance_metastore.spark.commit import committed, lance_operation
    from lance_metastore.spark.fragments import LanceCommitMessage
    from lance_metastore.spark.options import ResolvedTable
    from lance_metastore.spark.plan import OP_APPEND, WritePlan

    uri = str(tmp_path / "t.lance")
    lance.write_dataset(ROWS, uri)  # version 1: what the job read
    fragments = write_fragments(ROWS, uri)
    message = LanceCommitMessage(
        fragments=[f.to_json() for f in fragments],
        files=[d.path for f in fragments for d in f.files],
    )
    plan = WritePlan(ResolvedTable(uri), OP_APPEND, ROWS.schema, ROWS.schema.names, read_version=1)
    assert not committed(plan, [message])  # nothing landed yet: the undo may delete
    lance.LanceDataset.commit(uri, lance_operation(plan, fragments), read_version=1)  # landed
    lance.write_dataset(ROWS, uri, mode="overwrite")  # another writer, right after
    latest = lance.dataset(uri)
    assert latest.version == 3
    assert not any(
        d.path in message.files for f in latest.get_fragments() for d in f.metadata.files
    )
    assert committed(plan, [message])  # version 2 references the job's files: no undo
    assert lance.dataset(uri, version=2).count_rows() == 4


def test_spark_undo_only_after_a_refusal(tmp_path):
    """A failed commit is undone only when it was refused for sure (14, 13) and no version
    references the job's files; a timeout or an unavailable service leaves its outcome
    unknown (the commit may be in flight on the server), and nothing is deleted. The same
    landed commit is never undone, whatever the error says."""
    import builtins

    from lance.fragment import write_fragments

    from lance_metastore.spark.commit import lance_operation, undo_allowed
    from lance_metastore.spark.fragments import LanceCommitMessage
    from lance_metastore.spark.options import ResolvedTable
    from lance_metastore.spark.plan import OP_APPEND, WritePlan

    uri = str(tmp_path / "t.lance")
    lance.write_dataset(ROWS, uri)
    fragments = write_fragments(ROWS, uri)
    message = LanceCommitMessage(files=[d.path for f in fragments for d in f.files])
    plan = WritePlan(ResolvedTable(uri), OP_APPEND, ROWS.schema, ROWS.schema.names, read_version=1)
    refusals = [
        ConcurrentModificationError("taken"),
        InvalidInputError("bad"),
        CommitConflictError("conflict"),
    ]
    unknown = [
        builtins.TimeoutError("read timed out"),
        OSError("Namespace error: Service unavailable: Glue is unavailable"),
        OSError("Commit result for version 2 is unknown"),
        InternalError("ours"),
    ]
    assert all(undo_allowed(error, plan, [message]) for error in refusals)
    assert not any(undo_allowed(error, plan, [message]) for error in unknown)
    lance.LanceDataset.commit(uri, lance_operation(plan, fragments), read_version=1)
    assert not any(undo_allowed(error, plan, [message]) for error in refusals)


def test_glue_rename_of_a_storage_managed_table_moves_every_field(glue):
    """Glue renames a storage-managed table by copying its Table whole: what another tool
    wrote (description, owner, SerDe, storage parameters, a column comment, its parameter)
    moves to the new entry."""
    ns = glue.connect()
    db = glue.db("sales")
    ns.create_namespace({"id": db})
    lance.write_dataset(ROWS, ns.declare_table({"id": [*db, "t"]}).location)
    ns.sync_table_columns([*db, "t"])
    glue.write_as_another_tool(db, "t", column="id")
    written = glue.others_fields(db, "t")
    ns.rename_table({"id": [*db, "t"], "new_table_name": "u"})
    moved = glue.others_fields(db, "u")
    assert {k: v for k, v in moved.items() if k != "CreateTime"} == {
        k: v for k, v in written.items() if k != "CreateTime"
    }
    assert ns.list_tables({"id": db}).tables == ["u"]


# ---------------------------------------------------------------------------------------------
# Second review: the request is judged before the catalog; the table's scheme is its own
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["V1", "V9", "v2"])
def test_a_commit_may_not_change_or_invent_the_naming_scheme(managed, scheme):
    """A V2 table's commit naming scheme V1 (or an unknown one) is 13: recording it would
    leave two schemes in _versions/, which Lance refuses on every later write."""
    ns, db = managed
    t = [*db, f"scheme_{scheme}"]
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="create")
    before = dict(ns.describe_table({"id": t}).properties)
    request = {"id": t, "version": 2, "manifest_path": staging_of(ns, t, 2, "V1")}
    request["naming_scheme"] = scheme
    assert code_of(ns.create_table_version, request) == ErrorCode.INVALID_INPUT
    assert dict(ns.describe_table({"id": t}).properties) == before
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="append")
    assert lance.dataset(namespace_client=ns, table_id=t).count_rows() == 4


@pytest.mark.parametrize("numbers", [(2, 2), (2, 4)])
def test_a_malformed_batch_is_13_before_the_catalog_is_judged(managed, numbers):
    """A batch repeating or skipping a version is the caller's error (13), not a conflict
    (14) that Lance would retry forever; nothing is committed."""
    ns, db = managed
    t = [*db, "batch_" + "_".join(map(str, numbers))]
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="create")
    entries = [{"id": t, "version": n, "manifest_path": staging_of(ns, t, n)} for n in numbers]
    commit = ns.batch_create_table_versions
    assert code_of(commit, {"entries": entries}) == ErrorCode.INVALID_INPUT
    operations = [{"create_table_version": e} for e in entries]
    assert code_of(ns.batch_commit_tables, {"operations": operations}) == ErrorCode.INVALID_INPUT
    assert ns.describe_table({"id": t}).properties["version"] == "1"


@pytest.mark.parametrize("form", ["file://{}", "{}/"])
def test_register_overwrite_of_a_non_canonical_stored_location_never_goes_back(managed, form):
    """The entry stores the table's location in another spelling of the same place (as Hive
    qualifies it, or with a trailing slash), and storage's latest final manifest is behind
    the catalog's version: a register overwrite of the same dataset keeps the catalog's
    version (the places are compared parsed, not as text)."""
    import os

    ns, db = managed
    t = [*db, "respelled"]
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="create")
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="append")
    location = ns.describe_table({"id": t}).location
    os.remove(f"{location}/_versions/{final_name(2)}")  # storage's latest final is version 1
    path = tuple(db)
    entry = ns._require_lance_table(path, t[-1])
    respelled = dataclasses.replace(entry, location=form.format(location))
    ns._catalog_write_table(path, entry, respelled)
    request = {"id": t, "location": location, "mode": "overwrite"}
    request["properties"] = {"managed_by": "impl"}
    assert ns.register_table(request).properties["version"] == "2"
    assert ns.describe_table({"id": t}).properties["version"] == "2"


@pytest.mark.parametrize("form", ["file://{}", "file:{}/"])
def test_commits_find_manifests_at_the_stored_location_as_parsed(managed, form):
    """The entry stores the table's place in another spelling (as Hive qualifies local
    paths): commits, the version list and appends act on the parsed place, as every other
    data path does."""
    ns, db = managed
    t = [*db, "respelled_" + str(len(form))]
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="create")
    location = ns.describe_table({"id": t}).location
    path = tuple(db)
    entry = ns._require_lance_table(path, t[-1])
    respelled = dataclasses.replace(entry, location=form.format(location))
    ns._catalog_write_table(path, entry, respelled)
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="append")
    listed = ns.list_table_versions({"id": t}).versions
    assert [v.version for v in listed] == [1, 2]
    assert all(v.manifest_path.startswith(store_path(location)) for v in listed)
    assert lance.dataset(namespace_client=ns, table_id=t).count_rows() == 4


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


@pytest.mark.parametrize("managed_by", ["storage", "impl"])
def test_a_failed_create_never_undoes_another_writers_data(backend: Harness, managed_by):
    """create_table declares the entry, then writes. Another writer inserts into the declared
    table before the create's write, which then fails (the dataset exists): the undo keeps
    the other writer's acknowledged rows, entry and directory alike; the create answers its
    own error (rows of another schema: refused on a dataset that exists)."""
    import os

    ns, other = backend.connect(managed_by=managed_by), backend.connect(managed_by=managed_by)
    db = backend.db(f"undo_{managed_by}")
    ns.create_namespace({"id": db})
    t = [*db, "t"]
    theirs = pa.table({"id": pa.array([99], pa.int64())})
    write = ns._write

    def insert_first(*args: Any) -> Any:
        other.insert_into_table({"id": t}, _ipc(theirs))
        return write(*args)

    ns._write = insert_first
    with pytest.raises(LanceNamespaceError):
        ns.create_table({"id": t}, _ipc(pa.table({"name": ["a"]})))  # fails either way
    del ns._write
    location = ns.describe_table({"id": t}).location
    assert os.path.isdir(os.path.join("/" + store_path(location), "_versions"))
    assert lance.dataset(namespace_client=ns, table_id=t).to_table().to_pydict() == {"id": [99]}


def test_finalize_of_a_retired_staging_manifest_answers_the_final_name(managed):
    """A writer's finalize runs after another finalize copied its manifest and a later
    commit retired the staging one: the answer names the final manifest, never the staging
    path that no longer exists."""
    import os

    from lance_namespace import TableVersion

    ns, db = managed
    t = [*db, "retired"]
    lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="create")
    for _ in range(2):
        lance.write_dataset(ROWS, namespace_client=ns, table_id=t, mode="append")
    location = ns.describe_table({"id": t}).location
    final = f"{location}/_versions/{final_name(2)}"
    staging = "/" + staging_path(location, 2)
    assert not os.path.exists(staging)
    record = TableVersion(
        version=2, manifest_path=staging.lstrip("/"), manifest_size=os.path.getsize(final)
    )
    answered = ns._manifests.finalize(location, record, "V2")
    assert answered.manifest_path == f"{store_path(location)}/_versions/{final_name(2)}"
