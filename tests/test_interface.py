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
from collections.abc import Callable
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from lance_namespace import LanceNamespace
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from support.harness import Harness

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
