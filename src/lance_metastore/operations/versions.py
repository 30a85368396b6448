"""Catalog-managed versions (``managed_by=impl``): the catalog arbitrates every commit.

A mixin of :class:`~lance_metastore.operations.catalog.CatalogNamespace`: CreateTableVersion,
ListTableVersions, DescribeTableVersion and BatchDeleteTableVersions, over the primitives and
helpers :class:`~lance_metastore.operations.core.CatalogCore` names.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

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
    ConcurrentModificationError,
    InvalidInputError,
    TableVersionNotFoundError,
    UnsupportedOperationError,
)

from ..rules import tables, versions
from ..rules.errors import lance_error
from ..rules.identifiers import Path, describe
from ..rules.requests import (
    RequestInput,
    coerce_request,
)
from ..rules.requests import request_id as _raw_id
from ..rules.tables import TableEntry
from .core import CatalogCore

logger = logging.getLogger("lance_metastore")

# How long a commit refused by a write that left its version free is made again (Lance's own
# retry window for a commit is 30 s).
COMMIT_RETRY_SECONDS = 10.0


class VersionOps(CatalogCore):
    """The managed-versioning operations; every commit is a compare-and-set on the entry."""

    def _require_managed_table(self, path: Path, name: str) -> TableEntry:
        entry = self._require_lance_table(path, name)
        if not self._managed_versioning(entry):
            raise InvalidInputError(
                f"Table {describe((*path, name))} is managed by storage: Lance commits its "
                "versions itself; declare it with managed_by=impl for catalog-managed commits"
            )
        return entry

    def create_table_version(self, request: RequestInput = None) -> CreateTableVersionResponse:
        raw_id = _raw_id(request)
        with self._operation("commit a version of table", raw_id):
            req = coerce_request(request, CreateTableVersionRequest)
            if req.branch:
                raise UnsupportedOperationError("Branches are not supported by catalog commits")
            path, name = self._table_path(req.id)
            if req.version < 1 or not req.manifest_path:
                raise InvalidInputError("A commit needs a version >= 1 and a manifest_path")
            commit = versions.Commit(
                req.version, req.manifest_path, req.manifest_size, req.e_tag, req.naming_scheme
            )
            entry, committed = self._commit_next(path, name, req.version, commit.parameters)
            record = versions.latest_record(committed)
            assert record is not None
            [finalized] = self._finalize(entry, committed, [record])
            return CreateTableVersionResponse(version=finalized)

    def _commit_next(
        self,
        path: Path,
        name: str,
        version: int,
        parameters_after: Callable[[Mapping[str, str]], dict[str, str]],
    ) -> tuple[TableEntry, dict[str, str]]:
        """Compare-and-set the table from its entry to ``parameters_after(entry's)``, which
        commit ``version``; (the entry it was based on, the parameters written).

        A refusal is final when another commit took the version (14, Lance rebases). When the
        version is still free, the race was lost to a write that left it so (a column sync,
        say): the commit is made again at once on the fresh entry, for a short while only,
        well inside Lance's own retry window, so Lance never has to treat it as unknown.
        """
        target = f"table {describe((*path, name))}"
        deadline = time.monotonic() + COMMIT_RETRY_SECONDS
        entry = self._require_managed_table(path, name)
        while True:
            entry = self._caught_up_with_storage(path, entry)
            latest = versions.current_version(entry.parameters) or self._versions_of_creation(entry)
            versions.check_next(target, latest, version)
            committed = parameters_after(entry.parameters)
            try:
                self._catalog_compare_and_set(path, entry, committed)
                return entry, committed
            except ConcurrentModificationError:
                current = self._require_managed_table(path, name)
                moved = versions.current_version(current.parameters) != versions.current_version(
                    entry.parameters
                )
                # Nothing moved at all: not a race with a write (a lock that timed out, say).
                if moved or current == entry or time.monotonic() > deadline:
                    raise
                entry = current

    def _caught_up_with_storage(self, path: Path, entry: TableEntry) -> TableEntry:
        """``entry``, first moved to storage's latest version when storage holds the version
        after the catalog's: a writer committed it straight to storage, around the catalog
        (lance-spark 0.4.0's ``OPTIMIZE`` does so on managed tables).

        Committing that number again through the catalog would put two manifests on one final
        name, and one of the two commits would be lost. Once the catalog has adopted storage's
        versions, the commit at hand is a conflict (14), which Lance rebases onto them."""
        committed = versions.current_version(entry.parameters)
        location = tables.plain_location(entry.location)
        scheme = entry.parameters.get(versions.NAMING_SCHEME_KEY)
        if not committed or not location:
            return entry
        if not self._manifests.holds_final(location, committed + 1, scheme):
            return entry
        fresh = self._require_managed_table(path, entry.name)
        if versions.current_version(fresh.parameters) != committed:
            return fresh  # ``entry`` was stale: a commit through the catalog wrote that name
        entry = fresh
        adopted = self._adopt_latest_version(location, dict(entry.parameters))
        logger.warning(
            "table %s: storage holds versions after the catalog's %s, committed around it "
            "(up to %s); the catalog adopts them",
            describe((*path, entry.name)),
            committed,
            versions.current_version(adopted),
        )
        self._catalog_compare_and_set(path, entry, adopted)
        # Read again: the write moved the entry's token (Glue's VersionId, Hive 4's revision),
        # which the commit that follows must hold to succeed at its first attempt.
        return self._require_managed_table(path, entry.name)

    def _latest_known(self, path: Path, name: str) -> TableEntry:
        """The managed table's entry for an answer about its versions, caught up with versions
        committed around the catalog, so readers see them right after (they are Lance commits
        on the latest version, as good as any; see :meth:`_caught_up_with_storage`). A commit
        that lands meanwhile wins; its entry is the answer."""
        entry = self._require_managed_table(path, name)
        try:
            return self._caught_up_with_storage(path, entry)
        except ConcurrentModificationError:
            return self._require_managed_table(path, name)

    def _versions_of_creation(self, entry: TableEntry) -> int:
        """The versions a managed table's creator wrote straight to storage before its first
        commit through the catalog (lance-spark's ``CREATE TABLE`` writes the empty version 1
        so after ``declare_table``): the first commit continues after them. Once the catalog
        records a commit, only the catalog counts."""
        location = tables.plain_location(entry.location)
        if location is None or self._dataset_schema(location) is None:
            return 0
        return int(self._open_dataset(location).version)

    def _finalize(
        self,
        entry: TableEntry,
        committed: Mapping[str, str],
        records: list[TableVersion],
    ) -> list[TableVersion]:
        """After this namespace's compare-and-set moved ``entry`` to ``committed``: the records
        of the versions it committed, their manifests moved to the final names, and the
        staging manifest of the version that was the latest before deleted (see
        :mod:`~lance_metastore.rules.manifests`)."""
        location = tables.plain_location(entry.location) or ""
        scheme = committed.get(versions.NAMING_SCHEME_KEY)
        finalized = [self._manifests.finalize(location, record, scheme) for record in records]
        self._manifests.retire(
            location,
            versions.latest_record(entry.parameters),
            entry.parameters.get(versions.NAMING_SCHEME_KEY),
        )
        return finalized

    def _latest_record(self, entry: TableEntry) -> TableVersion | None:
        """The latest version's record, naming its final manifest once that exists."""
        location = tables.plain_location(entry.location) or ""
        scheme = entry.parameters.get(versions.NAMING_SCHEME_KEY)
        return self._manifests.answer(location, versions.latest_record(entry.parameters), scheme)

    def _version_records(self, entry: TableEntry) -> list[TableVersion]:
        """Every visible version record, ascending.

        Commits are contiguous by construction (each must be latest + 1), so the catalog
        knows the history: 1..latest less the deleted records and the versions whose manifests
        are gone from storage (``cleanup_old_versions`` does not tell the catalog). Older
        manifests are at the names Lance gives committed manifests.
        """
        latest = self._latest_record(entry)
        if latest is None:
            return []
        deleted = versions.deleted_ranges(entry.parameters)
        scheme = entry.parameters.get(versions.NAMING_SCHEME_KEY)
        location = tables.plain_location(entry.location) or ""
        present = self._manifests.present(location) if latest.version > 1 else None
        records = [
            versions.older_record(location, number, scheme, None)
            for number in range(1, latest.version)
            if not versions.is_deleted(number, deleted) and (present is None or number in present)
        ]
        if not versions.is_deleted(latest.version, deleted):
            records.append(latest)
        return records

    def list_table_versions(self, request: RequestInput = None) -> ListTableVersionsResponse:
        raw_id = _raw_id(request)
        with self._operation("list versions of table", raw_id):
            req = coerce_request(request, ListTableVersionsRequest)
            path, name = self._table_path(req.id)
            entry = self._latest_known(path, name)
            descending = bool(req.descending)
            if descending and req.limit == 1 and not req.page_token:
                # Lance's hot path on every open and commit: the catalog alone answers it.
                latest = self._latest_record(entry)
                return ListTableVersionsResponse(versions=[latest] if latest else [])
            records = {f"{r.version:020d}": r for r in self._version_records(entry)}
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
            latest = self._latest_record(entry)
            if req.version is None or (latest and req.version == latest.version):
                if latest is None:
                    raise lance_error(
                        TableVersionNotFoundError,
                        f"table {describe((*path, name))}",
                        "has no committed version yet",
                    )
                return DescribeTableVersionResponse(version=latest)
            for record in self._version_records(entry):
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
            entry = self._require_managed_table(path, name)
            latest = versions.current_version(entry.parameters)
            ranges = [
                versions.inclusive_range(r.start_version, r.end_version, latest) for r in req.ranges
            ]
            if any(start <= latest <= end for start, end in ranges):
                raise InvalidInputError(
                    f"The latest version ({latest}) of table {describe((*path, name))} "
                    "cannot be deleted"
                )
            visible = {r.version for r in self._version_records(entry)}
            count = sum(1 for v in visible if versions.is_deleted(v, ranges))
            deleted = versions.with_deleted(entry.parameters, ranges)
            if deleted == entry.parameters.get(versions.DELETED_KEY, ""):
                # No range, or only records deleted before: nothing to write.
                return BatchDeleteTableVersionsResponse(deleted_count=count)
            parameters = dict(entry.parameters)
            parameters[versions.DELETED_KEY] = deleted
            self._catalog_compare_and_set(path, entry, parameters)
            return BatchDeleteTableVersionsResponse(deleted_count=count)
