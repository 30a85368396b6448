"""Batches of version commits, all-or-nothing where the catalog can make them so.

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
from typing import TYPE_CHECKING, Any

from lance_namespace import (
    BatchCommitTablesRequest,
    BatchCommitTablesResponse,
    BatchCreateTableVersionsRequest,
    BatchCreateTableVersionsResponse,
    BatchDeleteTableVersionsResponse,
    CommitTableResult,
    CreateTableVersionResponse,
)
from lance_namespace.errors import InvalidInputError, UnsupportedOperationError

from ..rules import versions
from ..rules.identifiers import Path, describe
from ..rules.requests import RequestInput, coerce_request
from .core import CatalogCore

if TYPE_CHECKING:
    from lance_namespace import TableVersion

    from ..rules.tables import TableEntry

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


class BatchCommitOps(CatalogCore):
    """batch_create_table_versions and batch_commit_tables."""

    def batch_create_table_versions(
        self, request: RequestInput = None
    ) -> BatchCreateTableVersionsResponse:
        with self._operation("commit a batch of versions", None):
            req = coerce_request(request, BatchCreateTableVersionsRequest)
            if not req.entries:
                return BatchCreateTableVersionsResponse(versions=[])
            path, name = self._one_table([entry.id for entry in req.entries])
            entry = self._require_managed_table(path, name)
            parameters, records = _staged(path, name, entry, req.entries)
            self._catalog_compare_and_set(path, entry, parameters)
            return BatchCreateTableVersionsResponse(
                versions=self._finalize(entry, parameters, records)
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
            entry = self._require_managed_table(path, name)
            return BatchCommitTablesResponse(
                results=self._commit_on_one_table(path, name, entry, operations)
            )

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

    def _commit_on_one_table(
        self,
        path: Path,
        name: str,
        entry: TableEntry,
        operations: list[tuple[str, Any]],
    ) -> list[CommitTableResult]:
        """Version commits and record deletions of one table as one compare-and-set."""
        target = f"table {describe((*path, name))}"
        parameters = dict(entry.parameters)
        results: list[CommitTableResult] = []
        for kind, operation in operations:
            if kind == "create_table_version":
                staged, records = _staged(path, name, _with(entry, parameters), [operation])
                parameters = staged
                results.append(
                    CommitTableResult(
                        create_table_version=CreateTableVersionResponse(version=records[0])
                    )
                )
                continue
            latest = versions.current_version(parameters)
            ranges = [
                versions.inclusive_range(r.start_version, r.end_version, latest)
                for r in operation.ranges
            ]
            if any(start <= latest <= end for start, end in ranges):
                raise InvalidInputError(
                    f"The latest version ({latest}) of {target} cannot be deleted"
                )
            before = versions.deleted_ranges(parameters)
            count = sum(
                1
                for v in range(1, latest + 1)
                if versions.is_deleted(v, ranges) and not versions.is_deleted(v, before)
            )
            parameters[versions.DELETED_KEY] = versions.with_deleted(parameters, ranges)
            results.append(
                CommitTableResult(
                    delete_table_versions=BatchDeleteTableVersionsResponse(deleted_count=count)
                )
            )
        self._catalog_compare_and_set(path, entry, parameters)
        created = [
            r.create_table_version
            for r in results
            if r.create_table_version is not None and r.create_table_version.version is not None
        ]
        finalized = self._finalize(
            entry, parameters, [c.version for c in created if c.version is not None]
        )
        for response, record in zip(created, finalized, strict=True):
            response.version = record
        return results


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


def _with(entry: TableEntry, parameters: dict[str, str]) -> TableEntry:
    from dataclasses import replace

    return replace(entry, parameters=parameters)


def _staged(
    path: Path, name: str, entry: TableEntry, entries: list[Any]
) -> tuple[dict[str, str], list[TableVersion]]:
    """The parameters after committing ``entries`` in version order, and their records."""
    target = f"table {describe((*path, name))}"
    parameters = dict(entry.parameters)
    records: list[TableVersion] = []
    for item in sorted(entries, key=lambda e: e.version):
        if getattr(item, "branch", None):
            raise UnsupportedOperationError("Branches are not supported by catalog commits")
        if not item.manifest_path:
            raise InvalidInputError(f"A commit to {target} needs a manifest_path")
        versions.check_next(target, versions.current_version(parameters), item.version)
        commit = versions.Commit(
            item.version, item.manifest_path, item.manifest_size, item.e_tag, item.naming_scheme
        )
        parameters = commit.parameters(parameters)
        record = versions.latest_record(parameters)
        assert record is not None
        records.append(record)
    return parameters, records
