"""Catalog-managed versions (``managed_by=impl``): the catalog arbitrates every commit.

A mixin of :class:`~lance_metastore.operations.catalog.CatalogNamespace`: CreateTableVersion,
ListTableVersions, DescribeTableVersion and BatchDeleteTableVersions, over the primitives and
helpers :class:`~lance_metastore.operations.core.CatalogCore` names.
"""

from __future__ import annotations

from lance_namespace import (
    BatchDeleteTableVersionsRequest,
    BatchDeleteTableVersionsResponse,
    CreateTableVersionRequest,
    CreateTableVersionResponse,
    DescribeTableVersionRequest,
    DescribeTableVersionResponse,
    ListTableVersionsRequest,
    ListTableVersionsResponse,
    TableVersion,
)
from lance_namespace.errors import (
    TableVersionNotFoundError,
)

from ..rules import tables
from ..rules.errors import lance_error
from ..rules.identifiers import describe
from ..rules.requests import (
    RequestInput,
    coerce_request,
)
from ..rules.requests import request_id as _raw_id
from .commits import CommitOps, RecordDeletion, VersionCommit


class VersionOps(CommitOps):
    """The managed-versioning operations; every commit goes through the commit routine."""

    def create_table_version(self, request: RequestInput = None) -> CreateTableVersionResponse:
        raw_id = _raw_id(request)
        with self._operation("commit a version of table", raw_id):
            req = coerce_request(request, CreateTableVersionRequest)
            path, name = self._table_path(req.id)
            [record] = self._commit_versions(path, name, [VersionCommit.of(req)])
            assert isinstance(record, TableVersion)
            return CreateTableVersionResponse(version=record)

    def list_table_versions(self, request: RequestInput = None) -> ListTableVersionsResponse:
        raw_id = _raw_id(request)
        with self._operation("list versions of table", raw_id):
            req = coerce_request(request, ListTableVersionsRequest)
            path, name = self._table_path(req.id)
            entry = self._latest_known(path, name)
            descending = bool(req.descending)
            if descending and req.limit == 1 and not req.page_token:
                # Lance's hot path on every open and commit: the catalog alone answers it.
                latest = self._latest_record(path, entry)
                return ListTableVersionsResponse(versions=[latest] if latest else [])
            records = {f"{r.version:020d}": r for r in self._version_records(path, entry)}
            keys, token = self._pager.page(
                ("versions", path, name, entry.parameters.get(tables.VERSION_KEY)),
                lambda: list(records),
                req.page_token,
                req.limit,
                descending=descending,
            )
            return ListTableVersionsResponse(
                versions=[records[k] for k in keys if k in records], page_token=token
            )

    def describe_table_version(self, request: RequestInput = None) -> DescribeTableVersionResponse:
        raw_id = _raw_id(request)
        with self._operation("describe a version of table", raw_id):
            req = coerce_request(request, DescribeTableVersionRequest)
            path, name = self._table_path(req.id)
            entry = self._latest_known(path, name)
            latest = self._latest_record(path, entry)
            if req.version is None or (latest and req.version == latest.version):
                if latest is None:
                    raise lance_error(
                        TableVersionNotFoundError,
                        f"table {describe((*path, name))}",
                        "has no committed version yet",
                    )
                return DescribeTableVersionResponse(version=latest)
            for record in self._version_records(path, entry):
                if record.version == req.version:
                    return DescribeTableVersionResponse(version=record)
            raise lance_error(
                TableVersionNotFoundError,
                f"version {req.version} of table {describe((*path, name))}",
            )

    def batch_delete_table_versions(
        self, request: RequestInput = None
    ) -> BatchDeleteTableVersionsResponse:
        raw_id = _raw_id(request)
        with self._operation("delete version records of table", raw_id):
            req = coerce_request(request, BatchDeleteTableVersionsRequest)
            path, name = self._table_path(req.id)
            [count] = self._commit_versions(path, name, [RecordDeletion.of(req)])
            assert isinstance(count, int)
            return BatchDeleteTableVersionsResponse(deleted_count=count)
