"""Batches of version commits, all-or-nothing where the catalog can make them so.

Every batch goes through the one commit routine (:mod:`.commits`): the same catch-up with
storage, manifest checks, finalization, conflicts and retries as a single commit.

A mixin of :class:`~lance_metastore.operations.catalog.CatalogNamespace`. The catalog's atomic
write is one compare-and-set of one table's entry (Glue: UpdateTable with VersionId; Hive:
alter under the table's exclusive lock). So a batch is all-or-nothing when it comes down to one
such write:

- ``batch_create_table_versions`` whose entries all commit to one table (consecutive versions);
- ``batch_commit_tables`` whose operations are version commits and version-record deletions of
  one table, or a single operation of any kind.

A batch over several tables would need a write that is atomic across table entries, which
neither catalog offers (Glue has no multi-table conditional update; the Hive Metastore alters
one table per call, and its transactions do not cover table parameters). Such batches answer
the spec's unsupported error saying so, and change nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lance_namespace import (
    BatchCommitTablesRequest,
    BatchCommitTablesResponse,
    BatchCreateTableVersionsRequest,
    BatchCreateTableVersionsResponse,
    BatchDeleteTableVersionsResponse,
    CommitTableResult,
    CreateTableVersionResponse,
    TableVersion,
)
from lance_namespace.errors import InvalidInputError, UnsupportedOperationError

from ..rules.identifiers import Path
from ..rules.requests import RequestInput, coerce_request
from .commits import CommitOps, RecordDeletion, Step, VersionCommit

MANY_TABLES = (
    "a batch over several tables cannot be all-or-nothing here: the catalog's atomic write "
    "covers one table entry (Glue has no multi-table conditional update; the Hive Metastore "
    "alters one table per call). Commit each table on its own"
)


OPERATION_KINDS = (
    "declare_table",
    "create_table_version",
    "delete_table_versions",
    "deregister_table",
)


class BatchCommitOps(CommitOps):
    """batch_create_table_versions and batch_commit_tables, through the commit routine."""

    def batch_create_table_versions(
        self, request: RequestInput = None
    ) -> BatchCreateTableVersionsResponse:
        with self._operation("commit a batch of versions", None):
            req = coerce_request(request, BatchCreateTableVersionsRequest)
            if not req.entries:
                return BatchCreateTableVersionsResponse(versions=[])
            path, name = self._one_table([entry.id for entry in req.entries])
            steps = [VersionCommit.of(e) for e in sorted(req.entries, key=lambda e: e.version)]
            records = self._commit_versions(path, name, steps)
            return BatchCreateTableVersionsResponse(
                versions=[r for r in records if isinstance(r, TableVersion)]
            )

    def batch_commit_tables(self, request: RequestInput = None) -> BatchCommitTablesResponse:
        with self._operation("commit a batch of table operations", None):
            req = coerce_request(request, BatchCommitTablesRequest)
            operations = [_single(op) for op in req.operations]
            if not operations:
                return BatchCommitTablesResponse(results=[])
            if len(operations) == 1:
                return BatchCommitTablesResponse(results=[self._run_one(*operations[0])])
            kinds = {kind for kind, _ in operations}
            if not kinds <= {"create_table_version", "delete_table_versions"}:
                raise UnsupportedOperationError(
                    "A batch that declares or deregisters tables along with other operations "
                    "cannot be all-or-nothing here: each is its own catalog write"
                )
            path, name = self._one_table([op.id for _, op in operations])
            steps: list[Step] = [
                VersionCommit.of(op) if kind == "create_table_version" else RecordDeletion.of(op)
                for kind, op in operations
            ]
            outcome = self._commit_versions(path, name, steps)
            return BatchCommitTablesResponse(results=[_result(item) for item in outcome])

    def _one_table(self, ids: list[object]) -> tuple[Path, str]:
        targets = {self._table_path(raw) for raw in ids}
        if len(targets) != 1:
            raise UnsupportedOperationError(f"Not supported: {MANY_TABLES}")
        return next(iter(targets))

    def _run_one(self, kind: str, operation: RequestInput) -> CommitTableResult:
        methods: dict[str, Callable[..., object]] = {
            "declare_table": self.declare_table,
            "create_table_version": self.create_table_version,
            "delete_table_versions": self.batch_delete_table_versions,
            "deregister_table": self.deregister_table,
        }
        return CommitTableResult(**{kind: methods[kind](operation)})


def _result(item: TableVersion | int) -> CommitTableResult:
    if isinstance(item, TableVersion):
        return CommitTableResult(create_table_version=CreateTableVersionResponse(version=item))
    return CommitTableResult(
        delete_table_versions=BatchDeleteTableVersionsResponse(deleted_count=item)
    )


def _single(operation: Any) -> tuple[str, Any]:
    """The one request an operation carries."""
    chosen = [
        (kind, getattr(operation, kind))
        for kind in OPERATION_KINDS
        if getattr(operation, kind, None) is not None
    ]
    if len(chosen) != 1:
        raise InvalidInputError(
            f"Each batch operation must carry exactly one request, got {len(chosen)}"
        )
    return chosen[0]
