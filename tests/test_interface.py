"""The whole Lance namespace interface on every backend, compared with pylance's own
``DirectoryNamespace`` (the reference implementation) given the same inputs.

Each scenario runs on the reference and on a backend, collecting what a client can observe
(rows, versions, schemas, tags, branches, indexes, error codes); the two must be equal, except
for the differences the catalog forces, listed in ``CATALOG_DIFFERENCES`` and in
docs/conformance.md. Bad input is answered with the spec's code and changes nothing (harness
``snapshot()``); concurrent merge-inserts on a catalog-managed table lose and double nothing.
"""

from __future__ import annotations

import io
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from lance_namespace import LanceNamespace
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from support.harness import GlueHarness, Harness
from support.manifests import staging_of
from test_managed_commits import needs_conditional_updates

from lance_metastore.rules.versions import manifest_name

DIM = 4
ROWS = 300  # enough for a small IVF index


def table_data(start: int = 0, count: int = 6) -> pa.Table:
    ids = list(range(start, start + count))
    rng = np.random.default_rng(start)
    vectors = rng.random((count, DIM), dtype=np.float32)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [f"name {i}" for i in ids],
            "text": [("alpha beta" if i % 2 else "gamma delta") for i in ids],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
        }
    )


def ipc_stream(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def rows_of(answer: Any) -> pa.Table:
    return ipc.open_file(pa.py_buffer(answer.data)).read_all()


def outcome(call: Callable[[], Any]) -> Any:
    """What a client sees: the value, or ("error", code)."""
    try:
        return call()
    except LanceNamespaceError as error:
        return ("error", ErrorCode(error.code).name)
    except Exception as error:  # only the reference raises plain exceptions
        return ("exception", type(error).__name__)


def sorted_rows(table: pa.Table, *columns: str) -> list[tuple[Any, ...]]:
    names = columns or tuple(n for n in table.column_names if n != "vector")
    return sorted(zip(*(table.column(n).to_pylist() for n in names), strict=True))


# ---------------------------------------------------------------------------------------------
# Who runs the scenarios
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def reference(tmp_path) -> tuple[LanceNamespace, list[str]]:
    from lance.namespace import DirectoryNamespace

    ns = DirectoryNamespace(root=str(tmp_path / "dir"), manifest_enabled="true")
    ns.create_namespace(req("CreateNamespaceRequest", id=["sales"]))
    return ns, ["sales"]


@pytest.fixture
def ours(backend: Harness) -> tuple[LanceNamespace, list[str]]:
    ns = backend.connect()
    db = backend.db("sales")
    ns.create_namespace({"id": db})
    return ns, db


# Requests as model objects: DirectoryNamespace takes only those; ours takes both.
def req(model: str, **fields: Any) -> Any:
    import lance_namespace

    return getattr(lance_namespace, model)(**fields)


# ---------------------------------------------------------------------------------------------
# Scenarios: the same calls on any namespace; each returns what was observed
# ---------------------------------------------------------------------------------------------


def lifecycle_scenario(ns: LanceNamespace, db: list[str]) -> dict[str, Any]:
    t = [*db, "events"]
    seen: dict[str, Any] = {}
    created = ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, 6)))
    seen["created version"] = created.version
    appended = ns.insert_into_table(
        req("InsertIntoTableRequest", id=t), ipc_stream(table_data(6, 3))
    )
    seen["append"] = (appended.num_inserted_rows, appended.version)
    seen["count"] = ns.count_table_rows(req("CountTableRowsRequest", id=t)).count
    seen["count where"] = ns.count_table_rows(
        req("CountTableRowsRequest", id=t, predicate="id >= 4")
    ).count
    seen["count at v1"] = ns.count_table_rows(req("CountTableRowsRequest", id=t, version=1)).count
    ns.create_table_tag(req("CreateTableTagRequest", id=t, tag="first", version=1))
    ns.create_table_tag(req("CreateTableTagRequest", id=t, tag="second", version=2))
    ns.update_table_tag(req("UpdateTableTagRequest", id=t, tag="second", version=1))
    seen["tag version"] = ns.get_table_tag_version(
        req("GetTableTagVersionRequest", id=t, tag="second")
    ).version
    ns.delete_table_tag(req("DeleteTableTagRequest", id=t, tag="first"))
    tags = ns.list_table_tags(req("ListTableTagsRequest", id=t)).tags
    seen["tags"] = {name: contents.version for name, contents in tags.items()}
    stats = ns.get_table_stats(req("GetTableStatsRequest", id=t))
    seen["stats"] = (stats.num_rows, stats.num_indices, stats.fragment_stats.num_fragments)
    seen["schema metadata"] = ns.update_table_schema_metadata(
        req("UpdateTableSchemaMetadataRequest", id=t, metadata={"owner": "data team"})
    ).metadata
    added = ns.alter_table_add_columns(
        req(
            "AlterTableAddColumnsRequest",
            id=t,
            new_columns=[{"name": "twice", "expression": "id * 2"}],
        )
    )
    renamed = ns.alter_table_alter_columns(
        req(
            "AlterTableAlterColumnsRequest",
            id=t,
            alterations=[{"path": "twice", "rename": "double"}],
        )
    )
    dropped = ns.alter_table_drop_columns(
        req("AlterTableDropColumnsRequest", id=t, columns=["text"])
    )
    seen["column versions"] = (added.version, renamed.version, dropped.version)
    latest = lance.dataset(**_open(ns, t))
    seen["schema"] = [(f.name, str(f.type)) for f in latest.schema]
    seen["schema metadata kept"] = (latest.schema.metadata or {}).get(b"owner")
    overwritten = ns.insert_into_table(
        req("InsertIntoTableRequest", id=t, mode="overwrite"),
        ipc_stream(latest.to_table().slice(0, 2)),
    )
    seen["overwrite"] = (overwritten.num_inserted_rows, overwritten.version)
    ns.restore_table(req("RestoreTableRequest", id=t, version=2))
    seen["after restore"] = ns.count_table_rows(req("CountTableRowsRequest", id=t)).count
    by_version = ns.describe_transaction(req("DescribeTransactionRequest", id=[*t, "2"]))
    uuid = by_version.properties["uuid"]
    by_uuid = ns.describe_transaction(req("DescribeTransactionRequest", id=[*t, uuid]))
    seen["transaction"] = (
        by_version.status,
        {k: v for k, v in by_version.properties.items() if k != "uuid"},
        by_uuid.properties["version"],
    )
    seen["missing transaction"] = outcome(
        lambda: ns.describe_transaction(req("DescribeTransactionRequest", id=[*t, "99"]))
    )
    return seen


def branch_scenario(ns: LanceNamespace, db: list[str]) -> dict[str, Any]:
    t = [*db, "branched"]
    ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, 4)))
    ns.insert_into_table(req("InsertIntoTableRequest", id=t), ipc_stream(table_data(4, 2)))
    ns.create_table_branch(req("CreateTableBranchRequest", id=t, name="dev", from_version=1))
    listed = ns.list_table_branches(req("ListTableBranchesRequest", id=t)).branches
    seen: dict[str, Any] = {"branches": {k: v.parent_version for k, v in listed.items()}}
    seen["count on branch"] = ns.count_table_rows(
        req("CountTableRowsRequest", id=t, branch="dev")
    ).count
    seen["duplicate"] = outcome(
        lambda: ns.create_table_branch(req("CreateTableBranchRequest", id=t, name="dev"))
    )
    ns.delete_table_branch(req("DeleteTableBranchRequest", id=t, name="dev"))
    seen["after delete"] = list(
        ns.list_table_branches(req("ListTableBranchesRequest", id=t)).branches
    )
    seen["delete missing"] = outcome(
        lambda: ns.delete_table_branch(req("DeleteTableBranchRequest", id=t, name="dev"))
    )
    return seen


def data_scenario(ns: LanceNamespace, db: list[str]) -> dict[str, Any]:
    t = [*db, "orders"]
    seen: dict[str, Any] = {}
    ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, 6)))
    changes = table_data(4, 4).set_column(1, "name", pa.array(["new 4", "new 5", "new 6", "new 7"]))
    merged = ns.merge_insert_into_table(
        req(
            "MergeInsertIntoTableRequest",
            id=t,
            on=["id"],
            when_matched_update_all=True,
            when_not_matched_insert_all=True,
            timeout="30s",
        ),
        ipc_stream(changes),
    )
    seen["merge"] = (merged.num_updated_rows, merged.num_inserted_rows, merged.version)
    updated = ns.update_table(
        req("UpdateTableRequest", id=t, predicate="id < 2", updates=[["name", "'updated'"]])
    )
    seen["update"] = (updated.updated_rows, updated.version)
    deleted = ns.delete_from_table(req("DeleteFromTableRequest", id=t, predicate="id = 3"))
    seen["delete"] = deleted.version
    everything = rows_of(ns.query_table(req("QueryTableRequest", id=t, k=100, vector={})))
    seen["rows"] = sorted_rows(everything, "id", "name")
    filtered = rows_of(
        ns.query_table(
            req(
                "QueryTableRequest",
                id=t,
                k=100,
                vector={},
                filter="id >= 5",
                columns={"column_names": ["id", "name"]},
            )
        )
    )
    seen["filtered"] = (filtered.column_names, sorted_rows(filtered))
    seen["limited"] = rows_of(
        ns.query_table(req("QueryTableRequest", id=t, k=2, vector={}))
    ).num_rows
    seen["at version 1"] = sorted_rows(
        rows_of(ns.query_table(req("QueryTableRequest", id=t, k=100, vector={}, version=1))),
        "id",
        "name",
    )
    target = table_data(0, 6).column("vector")[2].as_py()
    nearest = rows_of(
        ns.query_table(
            req(
                "QueryTableRequest",
                id=t,
                k=3,
                vector={"single_vector": target},
                vector_column="vector",
                columns={"column_names": ["id"]},
            )
        )
    )
    seen["nearest first"] = nearest.column("id")[0].as_py()
    seen["nearest count"] = nearest.num_rows
    plan = ns.explain_table_query_plan(
        req(
            "ExplainTableQueryPlanRequest",
            id=t,
            query=req("QueryTableRequest", id=t, k=3, vector={}, filter="id > 1"),
        )
    )
    seen["explain mentions filter"] = "id" in plan
    analyzed = ns.analyze_table_query_plan(
        req("AnalyzeTableQueryPlanRequest", id=t, k=3, vector={}, filter="id > 1")
    )
    seen["analyze is text"] = isinstance(analyzed, str) and len(analyzed) > 0
    return seen


def index_scenario(ns: LanceNamespace, db: list[str]) -> dict[str, Any]:
    t = [*db, "indexed"]
    seen: dict[str, Any] = {}
    ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, ROWS)))
    ns.create_table_scalar_index(
        req("CreateTableIndexRequest", id=t, column="id", index_type="BTREE", name="id_idx")
    )
    ns.create_table_index(
        req("CreateTableIndexRequest", id=t, column="text", index_type="FTS", name="text_idx")
    )
    ns.create_table_index(
        req(
            "CreateTableIndexRequest",
            id=t,
            column="vector",
            index_type="IVF_FLAT",
            name="vector_idx",
            num_partitions=2,
            distance_type="l2",
        )
    )
    listed = ns.list_table_indices(req("ListTableIndicesRequest", id=t)).indexes
    seen["indexes"] = sorted((i.index_name, i.columns[0] if i.columns else None) for i in listed)
    stats = ns.describe_table_index_stats(
        req("DescribeTableIndexStatsRequest", id=t, index_name="id_idx")
    )
    seen["btree stats"] = (stats.index_type, stats.num_indexed_rows, stats.num_unindexed_rows)
    found = rows_of(
        ns.query_table(
            req(
                "QueryTableRequest",
                id=t,
                k=500,
                vector={},
                full_text_query={"string_query": {"query": "alpha"}},
                columns={"column_names": ["id"]},
            )
        )
    )
    seen["full text hits"] = found.num_rows
    seen["duplicate index"] = outcome(
        lambda: ns.create_table_scalar_index(
            req("CreateTableIndexRequest", id=t, column="id", index_type="BTREE", name="id_idx")
        )
    )
    ns.drop_table_index(req("DropTableIndexRequest", id=t, index_name="id_idx"))
    seen["after drop"] = sorted(
        i.index_name for i in ns.list_table_indices(req("ListTableIndicesRequest", id=t)).indexes
    )
    seen["drop missing"] = outcome(
        lambda: ns.drop_table_index(req("DropTableIndexRequest", id=t, index_name="id_idx"))
    )
    seen["stats of missing"] = outcome(
        lambda: ns.describe_table_index_stats(
            req("DescribeTableIndexStatsRequest", id=t, index_name="nope")
        )
    )
    seen["table stats indices"] = ns.get_table_stats(req("GetTableStatsRequest", id=t)).num_indices
    return seen


def error_scenario(ns: LanceNamespace, db: list[str]) -> dict[str, Any]:
    """Bad input on an existing table: the codes a client sees."""
    t = [*db, "strict"]
    ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, 6)))
    return {name: outcome(lambda call=call: call(ns, t)) for name, call in BAD_CALLS.items()}


BAD_CALLS: dict[str, Callable[[LanceNamespace, list[str]], Any]] = {
    "create existing": lambda ns, t: ns.create_table(
        req("CreateTableRequest", id=t), ipc_stream(table_data(0, 2))
    ),
    "create corrupt ipc": lambda ns, t: ns.create_table(
        req("CreateTableRequest", id=[*t[:-1], "corrupt"]), b"\x00not arrow at all"
    ),
    "insert corrupt ipc": lambda ns, t: ns.insert_into_table(
        req("InsertIntoTableRequest", id=t), b"garbage"
    ),
    "insert unknown column": lambda ns, t: ns.insert_into_table(
        req("InsertIntoTableRequest", id=t), ipc_stream(pa.table({"unknown": [1]}))
    ),
    "count malformed filter": lambda ns, t: ns.count_table_rows(
        req("CountTableRowsRequest", id=t, predicate="id >>> 1")
    ),
    "count unknown column": lambda ns, t: ns.count_table_rows(
        req("CountTableRowsRequest", id=t, predicate="nope > 1")
    ),
    "count missing version": lambda ns, t: ns.count_table_rows(
        req("CountTableRowsRequest", id=t, version=99)
    ),
    "delete malformed filter": lambda ns, t: ns.delete_from_table(
        req("DeleteFromTableRequest", id=t, predicate="id = = 2")
    ),
    "update unknown column": lambda ns, t: ns.update_table(
        req("UpdateTableRequest", id=t, predicate="id = 1", updates=[["nope", "1"]])
    ),
    "merge unknown key": lambda ns, t: ns.merge_insert_into_table(
        req(
            "MergeInsertIntoTableRequest",
            id=t,
            on=["nope"],
            when_matched_update_all=True,
            when_not_matched_insert_all=True,
        ),
        ipc_stream(table_data(0, 2)),
    ),
    "merge bad timeout": lambda ns, t: ns.merge_insert_into_table(
        req(
            "MergeInsertIntoTableRequest",
            id=t,
            on=["id"],
            when_matched_update_all=True,
            timeout="soon",
        ),
        ipc_stream(table_data(0, 2)),
    ),
    "query wrong dimension": lambda ns, t: ns.query_table(
        req(
            "QueryTableRequest",
            id=t,
            k=3,
            vector={"single_vector": [1.0] * (DIM + 1)},
            vector_column="vector",
        )
    ),
    "query unknown column": lambda ns, t: ns.query_table(
        req("QueryTableRequest", id=t, k=3, vector={}, columns={"column_names": ["nope"]})
    ),
    "query malformed filter": lambda ns, t: ns.query_table(
        req("QueryTableRequest", id=t, k=3, vector={}, filter="id >>> 1")
    ),
    "missing tag": lambda ns, t: ns.get_table_tag_version(
        req("GetTableTagVersionRequest", id=t, tag="nope")
    ),
    "delete missing tag": lambda ns, t: ns.delete_table_tag(
        req("DeleteTableTagRequest", id=t, tag="nope")
    ),
    "update missing tag": lambda ns, t: ns.update_table_tag(
        req("UpdateTableTagRequest", id=t, tag="nope", version=1)
    ),
    "tag missing version": lambda ns, t: ns.create_table_tag(
        req("CreateTableTagRequest", id=t, tag="later", version=99)
    ),
    "restore missing version": lambda ns, t: ns.restore_table(
        req("RestoreTableRequest", id=t, version=99)
    ),
    "drop unknown column": lambda ns, t: ns.alter_table_drop_columns(
        req("AlterTableDropColumnsRequest", id=t, columns=["nope"])
    ),
    "alter unknown column": lambda ns, t: ns.alter_table_alter_columns(
        req("AlterTableAlterColumnsRequest", id=t, alterations=[{"path": "nope", "rename": "x"}])
    ),
    "add column bad expression": lambda ns, t: ns.alter_table_add_columns(
        req(
            "AlterTableAddColumnsRequest",
            id=t,
            new_columns=[{"name": "x", "expression": "nope * 2"}],
        )
    ),
    "index unknown column": lambda ns, t: ns.create_table_scalar_index(
        req("CreateTableIndexRequest", id=t, column="nope", index_type="BTREE")
    ),
    "alter committed transaction": lambda ns, t: ns.alter_transaction(
        req(
            "AlterTransactionRequest",
            id=[*t, "1"],
            actions=[{"set_status_action": {"status": "FAILED"}}],
        )
    ),
    "missing table": lambda ns, t: ns.count_table_rows(
        req("CountTableRowsRequest", id=[*t[:-1], "missing"])
    ),
}

# Where the reference answers differently, and why ours is the spec's answer (conformance.md).
REFERENCE_DIFFERENCES = {
    # DirectoryNamespace reports these as InternalError (18) or a bare exception; the spec
    # has a code for each.
    "create corrupt ipc": ("error", "INTERNAL"),
    "insert corrupt ipc": ("error", "INTERNAL"),
    "insert unknown column": ("error", "INTERNAL"),
    "count malformed filter": ("error", "INTERNAL"),
    "count unknown column": ("error", "INTERNAL"),
    "update unknown column": ("error", "INVALID_INPUT"),
    "merge unknown key": ("error", "INVALID_INPUT"),
    "restore missing version": None,  # a RuntimeError, not a namespace error
    "drop unknown column": ("error", "INTERNAL"),
    "alter unknown column": ("error", "INTERNAL"),
    "add column bad expression": ("error", "INTERNAL"),
    "query unknown column": None,
    "query malformed filter": ("error", "INTERNAL"),
    "merge bad timeout": None,  # the reference ignores the timeout
    "alter committed transaction": None,  # the reference answers it unchanged
}
OUR_ANSWERS = {
    "create existing": ("error", "TABLE_ALREADY_EXISTS"),
    "create corrupt ipc": ("error", "INVALID_INPUT"),
    "insert corrupt ipc": ("error", "INVALID_INPUT"),
    "insert unknown column": ("error", "TABLE_SCHEMA_VALIDATION_ERROR"),
    "count malformed filter": ("error", "INVALID_INPUT"),
    "count unknown column": ("error", "TABLE_COLUMN_NOT_FOUND"),
    "count missing version": ("error", "TABLE_VERSION_NOT_FOUND"),
    "delete malformed filter": ("error", "INVALID_INPUT"),
    "update unknown column": ("error", "TABLE_COLUMN_NOT_FOUND"),
    "merge unknown key": ("error", "TABLE_COLUMN_NOT_FOUND"),
    "merge bad timeout": ("error", "INVALID_INPUT"),
    "query wrong dimension": ("error", "INVALID_INPUT"),
    "query unknown column": ("error", "TABLE_COLUMN_NOT_FOUND"),
    "query malformed filter": ("error", "INVALID_INPUT"),
    "missing tag": ("error", "TABLE_TAG_NOT_FOUND"),
    "delete missing tag": ("error", "TABLE_TAG_NOT_FOUND"),
    "update missing tag": ("error", "TABLE_TAG_NOT_FOUND"),
    "tag missing version": ("error", "TABLE_VERSION_NOT_FOUND"),
    "restore missing version": ("error", "TABLE_VERSION_NOT_FOUND"),
    "drop unknown column": ("error", "TABLE_COLUMN_NOT_FOUND"),
    "alter unknown column": ("error", "TABLE_COLUMN_NOT_FOUND"),
    "add column bad expression": ("error", "TABLE_COLUMN_NOT_FOUND"),
    "index unknown column": ("error", "TABLE_COLUMN_NOT_FOUND"),
    "alter committed transaction": ("error", "UNSUPPORTED"),
    "missing table": ("error", "TABLE_NOT_FOUND"),
}


def _open(ns: LanceNamespace, table_id: list[str]) -> dict[str, Any]:
    """How a client opens the table by name, whatever the namespace."""
    return {"namespace_client": ns, "table_id": table_id}


# ---------------------------------------------------------------------------------------------
# Same inputs, same results
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scenario", [lifecycle_scenario, data_scenario, index_scenario, branch_scenario]
)
def test_same_results_as_the_directory_namespace(backend: Harness, ours, reference, scenario):
    expected = scenario(*reference)
    seen = scenario(*ours)
    assert seen == expected


def test_errors_compared_with_the_directory_namespace(backend: Harness, ours, reference):
    try:
        expected = error_scenario(*reference)
    except Exception as error:  # pragma: no cover - the reference itself failed
        pytest.fail(f"reference failed: {error}")
    seen = error_scenario(*ours)
    assert seen == OUR_ANSWERS
    differing = {
        name: answer
        for name, answer in expected.items()
        if name not in REFERENCE_DIFFERENCES and answer != OUR_ANSWERS[name]
    }
    assert differing == {}


@pytest.mark.parametrize("scenario", [lifecycle_scenario, data_scenario, index_scenario])
def test_catalog_managed_tables_give_the_same_results(backend: Harness, reference, scenario):
    """managed_by=impl: every change commits through the catalog's compare-and-set, and the
    client sees exactly what it sees on the reference."""
    ns = backend.connect(managed_by="impl")
    db = backend.db("sales")
    ns.create_namespace({"id": db})
    assert scenario(ns, db) == scenario(*reference)
    for table in ns.list_tables({"id": db}).tables:
        described = ns.describe_table({"id": [*db, table]})
        assert described.managed_versioning is True
        latest = lance.dataset(namespace_client=ns, table_id=[*db, table]).version
        assert described.properties["version"] == str(latest)


def test_catalog_columns_follow_every_schema_change(backend: Harness, ours):
    ns, db = ours
    t = [*db, "evolving"]

    def catalog_names() -> list[str]:
        return [name for name, _ in backend.columns(db, "evolving")]

    ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, 3)))
    assert catalog_names() == ["id", "name", "text", "vector"]
    ns.alter_table_add_columns(
        req("AlterTableAddColumnsRequest", id=t, new_columns=[{"name": "k", "expression": "id"}])
    )
    assert catalog_names() == ["id", "name", "text", "vector", "k"]
    ns.alter_table_alter_columns(
        req(
            "AlterTableAlterColumnsRequest",
            id=t,
            alterations=[{"path": "k", "rename": "key", "data_type": {"type": "int32"}}],
        )
    )
    assert backend.columns(db, "evolving")[-1] == ("key", "int")
    ns.alter_table_drop_columns(req("AlterTableDropColumnsRequest", id=t, columns=["text"]))
    assert catalog_names() == ["id", "name", "vector", "key"]
    ns.restore_table(req("RestoreTableRequest", id=t, version=1))
    assert catalog_names() == ["id", "name", "text", "vector"]
    ns.insert_into_table(
        req("InsertIntoTableRequest", id=t, mode="overwrite"), ipc_stream(pa.table({"only": [1]}))
    )
    assert catalog_names() == ["only"]


def test_field_metadata(backend: Harness, ours):
    """Not in the reference (it answers unsupported); the field's metadata after the change."""
    ns, db = ours
    t = [*db, "annotated"]
    ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, 3)))
    answer = ns.update_field_metadata(
        req(
            "UpdateFieldMetadataRequest",
            id=t,
            updates=[{"path": "name", "metadata": {"pii": "no"}}],
        )
    )
    assert answer.fields == {"name": {"pii": "no"}}
    assert answer.version == 2
    field = lance.dataset(namespace_client=ns, table_id=t).schema.field("name")
    assert field.metadata == {b"pii": b"no"}
    assert outcome(
        lambda: ns.update_field_metadata(
            req("UpdateFieldMetadataRequest", id=t, updates=[{"path": "nope", "metadata": {}}])
        )
    ) == ("error", "TABLE_COLUMN_NOT_FOUND")


# ---------------------------------------------------------------------------------------------
# Bad input changes nothing
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("managed_by", ["storage", "impl"])
def test_bad_input_changes_nothing(backend: Harness, managed_by):
    ns = backend.connect(managed_by=managed_by)
    db = backend.db("sales")
    ns.create_namespace({"id": db})
    t = [*db, "strict"]
    ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, 6)))
    ns.create_table(req("CreateTableRequest", id=[*db, "other"]), ipc_stream(table_data(0, 1)))
    # The first read of a catalog-managed table lets Lance finish its own commit (it copies
    # the staging manifest to its final name); settle that before comparing snapshots.
    for table in (t, [*db, "other"]):
        ns.count_table_rows(req("CountTableRowsRequest", id=table))
    renames = {
        "rename onto existing": lambda ns, t: ns.rename_table(
            req("RenameTableRequest", id=t, new_table_name="other")
        ),
        "rename missing": lambda ns, t: ns.rename_table(
            req("RenameTableRequest", id=[*t[:-1], "missing"], new_table_name="x")
        ),
        "rename into missing namespace": lambda ns, t: ns.rename_table(
            req("RenameTableRequest", id=t, new_table_name="x", new_namespace_id=backend.db("nope"))
        ),
    }
    expected = {
        **OUR_ANSWERS,
        "rename onto existing": ("error", "TABLE_ALREADY_EXISTS"),
        "rename missing": ("error", "TABLE_NOT_FOUND"),
        "rename into missing namespace": ("error", "NAMESPACE_NOT_FOUND"),
    }
    before = backend.snapshot()  # each call is compared with it: none may change anything
    for name, call in {**BAD_CALLS, **renames}.items():
        assert outcome(lambda call=call: call(ns, t)) == expected[name], name
        after = backend.snapshot()
        assert after == before, (name, _difference(before, after))


def _difference(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    files = {
        path: (before["files"].get(path), after["files"].get(path))
        for path in set(before["files"]) | set(after["files"])
        if before["files"].get(path) != after["files"].get(path)
    }
    catalog = {
        k: (before[k], after.get(k)) for k in before if k != "files" and before[k] != after.get(k)
    }
    return {"files": files, "catalog": catalog}


# ---------------------------------------------------------------------------------------------
# Concurrent writers on a catalog-managed table
# ---------------------------------------------------------------------------------------------


def test_two_merge_inserts_on_a_managed_table(backend: Harness):
    """Both land, or one gets 14; no row is lost or doubled."""
    needs_conditional_updates(backend)
    ns = backend.connect(managed_by="impl")
    db = backend.db("sales")
    ns.create_namespace({"id": db})
    t = [*db, "contended"]
    ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, 10)))
    batches = {0: table_data(5, 10), 1: table_data(100, 10)}  # overlaps the table; disjoint
    results: dict[int, Any] = {}
    start = threading.Barrier(2)

    def writer(index: int) -> None:
        writer_ns = backend.connect(managed_by="impl")
        start.wait()
        results[index] = outcome(
            lambda: writer_ns.merge_insert_into_table(
                req(
                    "MergeInsertIntoTableRequest",
                    id=t,
                    on=["id"],
                    when_matched_update_all=True,
                    when_not_matched_insert_all=True,
                ),
                ipc_stream(batches[index]),
            )
        )

    threads = [threading.Thread(target=writer, args=(i,)) for i in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    landed = {i for i, r in results.items() if not isinstance(r, tuple)}
    for index, result in results.items():
        if index not in landed:
            assert result == ("error", "CONCURRENT_MODIFICATION")
    assert landed, results
    expected_ids = set(range(10))
    for index in landed:
        expected_ids |= set(batches[index].column("id").to_pylist())
    rows = rows_of(ns.query_table(req("QueryTableRequest", id=t, k=1000, vector={})))
    ids = rows.column("id").to_pylist()
    assert sorted(ids) == sorted(expected_ids)  # nothing lost, nothing doubled
    described = ns.describe_table({"id": t})
    assert described.properties["version"] == str(1 + len(landed))


# ---------------------------------------------------------------------------------------------
# Rename
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("managed_by", ["storage", "impl"])
def test_rename_within_and_across_namespaces(backend: Harness, managed_by):
    ns = backend.connect(managed_by=managed_by)
    db, archive = backend.db("sales"), backend.db("archive")
    ns.create_namespace({"id": db})
    ns.create_namespace({"id": archive})
    ns.create_table(req("CreateTableRequest", id=[*db, "t"]), ipc_stream(table_data(0, 5)))
    ns.insert_into_table(req("InsertIntoTableRequest", id=[*db, "t"]), ipc_stream(table_data(5, 1)))
    location = ns.describe_table({"id": [*db, "t"]}).location
    if managed_by == "impl" and "glue" in (backend.label or backend.name):
        # Glue has no rename, and a copy-then-delete could lose a commit: refused (docs).
        before = backend.snapshot()
        refused = outcome(
            lambda: ns.rename_table(req("RenameTableRequest", id=[*db, "t"], new_table_name="u"))
        )
        assert refused == ("error", "UNSUPPORTED")
        assert backend.snapshot() == before
        return
    ns.rename_table(req("RenameTableRequest", id=[*db, "t"], new_table_name="u"))
    assert ns.list_tables({"id": db}).tables == ["u"]
    if backend.name == "rest":
        # Served, locations are confined: a table whose data lies in its namespace's
        # directory stays in that namespace (docs/locations.md).
        across = req("RenameTableRequest", id=[*db, "u"], new_table_name="kept")
        across.new_namespace_id = archive
        assert outcome(lambda: ns.rename_table(across)) == ("error", "INVALID_INPUT")
        assert ns.list_tables({"id": db}).tables == ["u"]
        return
    ns.rename_table(
        req("RenameTableRequest", id=[*db, "u"], new_table_name="kept", new_namespace_id=archive)
    )
    assert ns.list_tables({"id": db}).tables == []
    assert ns.list_tables({"id": archive}).tables == ["kept"]
    moved = ns.describe_table({"id": [*archive, "kept"]})
    assert moved.location == location  # data stays where it is
    assert ns.count_table_rows(req("CountTableRowsRequest", id=[*archive, "kept"])).count == 6
    # Still writable under the new name (managed tables: the commit goes to the new entry).
    ns.insert_into_table(
        req("InsertIntoTableRequest", id=[*archive, "kept"]), ipc_stream(table_data(6, 1))
    )
    assert ns.count_table_rows(req("CountTableRowsRequest", id=[*archive, "kept"])).count == 7
    if managed_by == "impl":
        assert ns.describe_table({"id": [*archive, "kept"]}).properties["version"] == "3"
    assert outcome(lambda: ns.describe_table({"id": [*db, "t"]})) == ("error", "TABLE_NOT_FOUND")


@pytest.fixture
def glue_tables(glue: GlueHarness):
    ns = glue.connect()
    db = glue.db("sales")
    ns.create_namespace({"id": db})
    ns.create_table(req("CreateTableRequest", id=[*db, "t"]), ipc_stream(table_data(0, 3)))
    return ns, db


def test_glue_rename_failing_between_create_and_delete_leaves_one_entry(
    glue: GlueHarness, glue_tables
):
    """Glue renames by CreateTable then DeleteTable: if the delete fails, the new entry is
    removed again and the old one stays, exactly as it was."""
    ns, db = glue_tables
    before = glue.snapshot()
    # Every attempt of the one DeleteTable call fails (max_retries=2: 3 attempts); the undo
    # (a second DeleteTable call) succeeds.
    with glue.emulator.fault("DeleteTable", "InternalServiceException", 500, times=3):
        answer = outcome(
            lambda: ns.rename_table(req("RenameTableRequest", id=[*db, "t"], new_table_name="u"))
        )
    assert answer == ("error", "SERVICE_UNAVAILABLE")
    after = glue.snapshot()
    assert after == before
    assert ns.list_tables({"id": db}).tables == ["t"]


def test_glue_rename_whose_delete_reply_was_lost_is_done(glue: GlueHarness, glue_tables):
    ns, db = glue_tables
    with glue.emulator.fault(
        "DeleteTable", "InternalServiceException", 500, times=1, after_apply=True
    ):
        ns.rename_table(req("RenameTableRequest", id=[*db, "t"], new_table_name="u"))
    assert ns.list_tables({"id": db}).tables == ["u"]
    assert ns.count_table_rows(req("CountTableRowsRequest", id=[*db, "u"])).count == 3


def test_glue_rename_when_the_create_fails_changes_nothing(glue: GlueHarness, glue_tables):
    ns, db = glue_tables
    before = glue.snapshot()
    with glue.emulator.fault("CreateTable", "InternalServiceException", 500, times=10):
        answer = outcome(
            lambda: ns.rename_table(req("RenameTableRequest", id=[*db, "t"], new_table_name="u"))
        )
    assert answer == ("error", "SERVICE_UNAVAILABLE")
    assert glue.snapshot() == before


# ---------------------------------------------------------------------------------------------
# Listing everything; batches
# ---------------------------------------------------------------------------------------------


def test_list_all_tables_sorted_and_paged(backend: Harness):
    ns = backend.connect()
    first, second = backend.db("alpha"), backend.db("beta")
    for db, names in ((first, ["b", "a"]), (second, ["c"])):
        ns.create_namespace({"id": db})
        for name in names:
            ns.declare_table({"id": [*db, name]})
    expected = sorted(
        "$".join([*db, name])
        for db, names in ((first, ["a", "b"]), (second, ["c"]))
        for name in names
    )
    everything = ns.list_all_tables(req("ListTablesRequest"))
    assert everything.tables == expected
    page = ns.list_all_tables(req("ListTablesRequest", limit=2))
    rest = ns.list_all_tables(req("ListTablesRequest", limit=2, page_token=page.page_token))
    assert page.tables + rest.tables == expected and rest.page_token is None


def test_list_all_tables_under_a_namespace(backend: Harness):
    """In-process only: the REST route of list_all_tables (GET /v1/table) carries no id."""
    ns = backend.connect()
    first, second = backend.db("alpha"), backend.db("beta")
    for db in (first, second):
        ns.create_namespace({"id": db})
        ns.declare_table({"id": [*db, "t"]})
    assert ns.list_all_tables(req("ListTablesRequest", id=second)).tables == [
        "$".join([*second, "t"])
    ]
    assert outcome(lambda: ns.list_all_tables(req("ListTablesRequest", id=backend.db("no")))) == (
        "error",
        "NAMESPACE_NOT_FOUND",
    )


def test_batch_of_versions_on_one_table_is_all_or_nothing(backend: Harness):
    ns = backend.connect(managed_by="impl")
    db = backend.db("sales")
    ns.create_namespace({"id": db})
    t = [*db, "batched"]
    ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, 2)))
    entries = [
        {"id": t, "version": 2, "manifest_path": staging_of(ns, t, 2)},
        {"id": t, "version": 3, "manifest_path": staging_of(ns, t, 3)},
    ]
    answer = ns.batch_create_table_versions({"entries": entries})
    assert [v.version for v in answer.versions] == [2, 3]
    assert ns.describe_table({"id": t}).properties["version"] == "3"
    before = backend.snapshot()
    clash = [
        {"id": t, "version": 4, "manifest_path": staging_of(ns, t, 4)},
        {"id": t, "version": 3, "manifest_path": staging_of(ns, t, 3)},  # taken
    ]
    assert outcome(lambda: ns.batch_create_table_versions({"entries": clash})) == (
        "error",
        "CONCURRENT_MODIFICATION",
    )
    assert backend.snapshot() == before
    ns.create_table(req("CreateTableRequest", id=[*db, "second"]), ipc_stream(table_data(0, 2)))
    before = backend.snapshot()
    two_tables = [
        {"id": t, "version": 4, "manifest_path": staging_of(ns, t, 4)},
        {"id": [*db, "second"], "version": 2, "manifest_path": "staging/f.manifest"},
    ]
    assert outcome(lambda: ns.batch_create_table_versions({"entries": two_tables})) == (
        "error",
        "UNSUPPORTED",
    )
    assert backend.snapshot() == before


def _staging_manifests(ns: Any, table_id: list[str], numbers: tuple[int, ...]) -> dict[int, str]:
    """Manifests under staging names for versions ``numbers``, as a writer leaves them before
    it commits (copies of the latest one: the catalog only records and moves them)."""
    location = Path(ns.describe_table({"id": table_id}).location)
    latest = location / "_versions" / manifest_name(1, "V2")
    staged = {}
    for number in numbers:
        path = location / "_versions" / f"{manifest_name(number, 'V2')}-{uuid.uuid4()}"
        path.write_bytes(latest.read_bytes())
        staged[number] = str(path).lstrip("/")
    return staged


def test_batch_commit_tables(backend: Harness):
    ns = backend.connect(managed_by="impl")
    db = backend.db("sales")
    ns.create_namespace({"id": db})
    t = [*db, "committed"]
    ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, 2)))
    staged = _staging_manifests(ns, t, (2, 3))
    answer = ns.batch_commit_tables(
        {
            "operations": [
                {"create_table_version": {"id": t, "version": 2, "manifest_path": staged[2]}},
                {"create_table_version": {"id": t, "version": 3, "manifest_path": staged[3]}},
                {
                    "delete_table_versions": {
                        "id": t,
                        "ranges": [{"start_version": 1, "end_version": 2}],
                    }
                },
            ]
        }
    )
    assert [r.create_table_version.version.version for r in answer.results[:2]] == [2, 3]
    assert answer.results[2].delete_table_versions.deleted_count == 1
    listed = ns.list_table_versions({"id": t}).versions
    assert [v.version for v in listed] == [2, 3]
    # every version of the batch was moved to its final name, not only the last
    assert [v.manifest_path.endswith(f"/{manifest_name(v.version, 'V2')}") for v in listed] == [
        True,
        True,
    ]
    single = ns.batch_commit_tables({"operations": [{"declare_table": {"id": [*db, "fresh"]}}]})
    assert single.results[0].declare_table.location.endswith("fresh.lance")
    before = backend.snapshot()
    mixed = {
        "operations": [
            {"declare_table": {"id": [*db, "another"]}},
            {"create_table_version": {"id": t, "version": 4, "manifest_path": "s/c"}},
        ]
    }
    assert outcome(lambda: ns.batch_commit_tables(mixed)) == ("error", "UNSUPPORTED")
    assert backend.snapshot() == before


def test_glue_rename_whose_undo_fails_too_says_so(glue: GlueHarness, glue_tables):
    """A double fault (the delete and its undo both fail): the only case with two entries.
    The error (18) names both and what to do; the old entry still holds the table."""
    ns, db = glue_tables
    with (
        glue.emulator.fault("DeleteTable", "InternalServiceException", 500, times=6),
        pytest.raises(LanceNamespaceError) as caught,
    ):
        ns.rename_table(req("RenameTableRequest", id=[*db, "t"], new_table_name="u"))
    assert caught.value.code == ErrorCode.INTERNAL
    assert "'sales$u'" in str(caught.value) and "deregister" in str(caught.value)
    assert ns.count_table_rows(req("CountTableRowsRequest", id=[*db, "t"])).count == 3


@pytest.mark.parametrize("managed_by", ["storage", "impl"])
def test_declared_tables_take_their_first_rows_by_insert(backend: Harness, managed_by):
    """A declared table holds no data: reads answer 19 (InvalidTableState); the first insert
    creates its dataset at the declared location and records its columns."""
    ns = backend.connect(managed_by=managed_by)
    db = backend.db("sales")
    ns.create_namespace({"id": db})
    t = [*db, "declared"]
    ns.declare_table({"id": t})
    assert outcome(lambda: ns.count_table_rows(req("CountTableRowsRequest", id=t))) == (
        "error",
        "INVALID_TABLE_STATE",
    )
    inserted = ns.insert_into_table(
        req("InsertIntoTableRequest", id=t), ipc_stream(table_data(0, 3))
    )
    assert (inserted.num_inserted_rows, inserted.version) == (3, 1)
    assert ns.count_table_rows(req("CountTableRowsRequest", id=t)).count == 3
    assert [name for name, _ in backend.columns(db, "declared")] == ["id", "name", "text", "vector"]
    kept = ns.create_table(
        req("CreateTableRequest", id=t, mode="exist_ok"), ipc_stream(table_data(0, 1))
    )
    assert kept.version == 1
    replaced = ns.create_table(
        req("CreateTableRequest", id=t, mode="overwrite"), ipc_stream(table_data(0, 1))
    )
    assert replaced.version == 2
    assert ns.count_table_rows(req("CountTableRowsRequest", id=t)).count == 1


def test_create_over_an_unregistered_dataset_keeps_it(backend: Harness, ours):
    """A dataset already at the default location (written without the catalog): create_table
    answers 5 and leaves both the catalog and that dataset as they were."""
    ns, db = ours
    location = ns.declare_table({"id": [*db, "probe"]}).location
    ns.deregister_table({"id": [*db, "probe"]})
    lance.write_dataset(table_data(0, 2), location)
    before = backend.snapshot()
    answer = outcome(
        lambda: ns.create_table(
            req("CreateTableRequest", id=[*db, "probe"]), ipc_stream(table_data(0, 3))
        )
    )
    assert answer == ("error", "TABLE_ALREADY_EXISTS")
    assert backend.snapshot() == before
    assert lance.dataset(location).count_rows() == 2


def test_glue_refuses_to_rename_a_managed_table(glue: GlueHarness):
    """Glue has no rename: copy-then-delete would lose a commit landing on the old entry in
    between, and no Glue call makes "unchanged, then delete" one step. A catalog-managed
    table's rename is refused (0, saying what to do instead) and changes nothing; the table
    keeps committing under its name. (Storage-managed tables rename: their commits never
    touch the entry.)"""
    ns = glue.connect(managed_by="impl")
    db = glue.db("sales")
    ns.create_namespace({"id": db})
    t = [*db, "t"]
    ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, 3)))
    before = glue.snapshot()
    with pytest.raises(LanceNamespaceError) as caught:
        ns.rename_table(req("RenameTableRequest", id=t, new_table_name="u"))
    assert caught.value.code == ErrorCode.UNSUPPORTED
    assert "rename_table not implemented" in str(caught.value)
    assert "register its location" in str(caught.value)
    assert glue.snapshot() == before
    ns.insert_into_table(req("InsertIntoTableRequest", id=t), ipc_stream(table_data(3, 1)))
    assert ns.describe_table({"id": t}).properties["version"] == "2"


# pylance's REST client answers 0 itself for these (test_rest_interface.py sends raw HTTP).
REST_CLIENT_LACKS = {"update_field_metadata", "batch_create_table_versions", "batch_commit_tables"}

# Every new operation, with the least request it takes beside its id.
NEW_OPERATIONS: dict[str, tuple[dict[str, Any], bytes | None]] = {
    "rename_table": ({"new_table_name": "x"}, None),
    "restore_table": ({"version": 1}, None),
    "get_table_stats": ({}, None),
    "update_table_schema_metadata": ({"metadata": {"k": "v"}}, None),
    "update_field_metadata": ({"updates": []}, None),
    "alter_table_add_columns": ({"new_columns": [{"name": "x", "expression": "1"}]}, None),
    "alter_table_alter_columns": ({"alterations": [{"path": "id", "rename": "x"}]}, None),
    "alter_table_drop_columns": ({"columns": ["id"]}, None),
    "list_table_tags": ({}, None),
    "get_table_tag_version": ({"tag": "t"}, None),
    "create_table_tag": ({"tag": "t", "version": 1}, None),
    "update_table_tag": ({"tag": "t", "version": 1}, None),
    "delete_table_tag": ({"tag": "t"}, None),
    "list_table_branches": ({}, None),
    "create_table_branch": ({"name": "b"}, None),
    "delete_table_branch": ({"name": "b"}, None),
    "create_table": ({}, ipc_stream(table_data(0, 1))),
    "insert_into_table": ({}, ipc_stream(table_data(0, 1))),
    "merge_insert_into_table": ({"on": ["id"]}, ipc_stream(table_data(0, 1))),
    "update_table": ({"updates": [["id", "1"]]}, None),
    "delete_from_table": ({"predicate": "id = 1"}, None),
    "count_table_rows": ({}, None),
    "query_table": ({"k": 1, "vector": {}}, None),
    "analyze_table_query_plan": ({"k": 1, "vector": {}}, None),
    "create_table_index": ({"column": "id", "index_type": "BTREE"}, None),
    "create_table_scalar_index": ({"column": "id", "index_type": "BTREE"}, None),
    "list_table_indices": ({}, None),
    "describe_table_index_stats": ({"index_name": "i"}, None),
    "drop_table_index": ({"index_name": "i"}, None),
}


def test_new_operations_refuse_bad_identifiers(backend: Harness, ours):
    """Each new operation answers 13 for an identifier no catalog could hold (an empty part,
    a path separator, the root) and 4 for a missing table; nothing changes."""
    ns, db = ours
    before = backend.snapshot()
    for operation, (fields, body) in NEW_OPERATIONS.items():
        if backend.name == "rest" and operation in REST_CLIENT_LACKS:
            continue  # sent as raw HTTP in test_rest_interface.py
        call = getattr(ns, operation)
        for bad in ([*db, ""], [*db, "a/b"], []):
            args = ({**fields, "id": bad},) + ((body,) if body is not None else ())
            assert outcome(lambda c=call, a=args: c(*a)) == ("error", "INVALID_INPUT"), (
                operation,
                bad,
            )
        if operation != "create_table":
            args = ({**fields, "id": [*db, "missing"]},) + ((body,) if body is not None else ())
            assert outcome(lambda c=call, a=args: c(*a)) == ("error", "TABLE_NOT_FOUND"), operation
    assert backend.snapshot() == before
