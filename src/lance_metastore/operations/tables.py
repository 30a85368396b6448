"""The table operations of the spec that the catalog answers: list, declare, register, describe,
exists, deregister and drop.

A mixin of :class:`~lance_metastore.operations.catalog.CatalogNamespace`, written over the
catalog primitives and shared helpers that :class:`~lance_metastore.operations.core.CatalogCore`
names.
"""

from __future__ import annotations

import dataclasses
import logging
from concurrent.futures import ThreadPoolExecutor

from lance_namespace import (
    DeclareTableRequest,
    DeclareTableResponse,
    DeregisterTableRequest,
    DeregisterTableResponse,
    DescribeTableRequest,
    DescribeTableResponse,
    DropTableRequest,
    DropTableResponse,
    ListTablesRequest,
    ListTablesResponse,
    RegisterTableRequest,
    RegisterTableResponse,
    TableExistsRequest,
)
from lance_namespace.errors import (
    InvalidInputError,
    TableAlreadyExistsError,
    UnsupportedOperationError,
)

from ..rules import locations, tables, versions
from ..rules.identifiers import Path, describe
from ..rules.requests import (
    CREATE,
    OVERWRITE,
    RequestInput,
    coerce_request,
)
from ..rules.requests import request_id as _raw_id
from ..rules.requests import request_mode as _mode
from ..rules.schema import CatalogColumn, catalog_columns
from ..rules.tables import TableEntry
from .core import CatalogCore

logger = logging.getLogger("lance_metastore")


class TableOps(CatalogCore):
    """ListTables, DeclareTable, RegisterTable, DescribeTable, TableExists, DeregisterTable,
    DropTable."""

    def list_tables(self, request: RequestInput = None) -> ListTablesResponse:
        raw_id = _raw_id(request)
        with self._operation("list tables of", raw_id):
            req = coerce_request(request, ListTablesRequest)
            path = self._namespace_path(req.id)
            if not path:
                # Tables live in databases, never at the root: an empty listing, as Lance's
                # DirectoryNamespace and lancedb's table_names() on a fresh connection expect.
                # Paged like any listing, so a malformed token or limit still answers 13.
                names, token = self._pager.page(("tables", path), list, req.page_token, req.limit)
                return ListTablesResponse(tables=names, page_token=token)
            include_declared = req.include_declared is not False

            def fetch() -> list[str]:
                names = self._catalog_list_lance_tables(path)
                if include_declared:
                    return names
                return [n for n in names if self._has_data(path, n)]

            names, token = self._pager.page(
                ("tables", path, include_declared), fetch, req.page_token, req.limit
            )
            return ListTablesResponse(tables=names, page_token=token)

    def _has_data(self, path: Path, name: str) -> bool:
        entry = self._catalog_get_table(path, name)
        return entry is not None and self._has_committed_data(entry)

    def declare_table(self, request: RequestInput = None) -> DeclareTableResponse:
        raw_id = _raw_id(request)
        with self._operation("declare table", raw_id):
            req = coerce_request(request, DeclareTableRequest)
            path, name = self._table_path(req.id)
            parameters = self._declared_parameters(req.properties)
            if req.location is not None:
                location = self._caller_table_location(path, name, req.location, "declare")
            else:
                location = self._default_location(path, name)
            entry = TableEntry(name=name, location=location, parameters=parameters)
            # Declaring over an existing dataset: the catalog shows its columns at once.
            schema = None if self._managed_versioning(entry) else self._dataset_schema(location)
            columns = catalog_columns(schema) if schema is not None else []
            self._catalog_create_table(path, entry, columns)
            return DeclareTableResponse(
                location=location,
                storage_options=self._answered_storage_options(location, req.vend_credentials),
                properties=parameters,
                managed_versioning=self._managed_versioning(entry),
            )

    def create_empty_table(self, request: RequestInput = None) -> DeclareTableResponse:  # type: ignore[override]
        """Deprecated name of :meth:`declare_table`, still called by older Lance clients."""
        return self.declare_table(request)

    def register_table(self, request: RequestInput = None) -> RegisterTableResponse:
        raw_id = _raw_id(request)
        with self._operation("register table", raw_id):
            req = coerce_request(request, RegisterTableRequest)
            path, name = self._table_path(req.id)
            mode = _mode(req.mode, CREATE, (CREATE, OVERWRITE), "register mode")
            location = self._caller_table_location(path, name, req.location, "register")
            parameters = self._declared_parameters(req.properties)
            schema = self._dataset_schema(location)
            if schema is None:
                raise InvalidInputError(
                    f"Cannot register {describe((*path, name))}: no Lance dataset at {location!r}"
                )
            if parameters[tables.MANAGED_BY_KEY] == tables.MANAGED_BY_IMPL:
                parameters = self._adopt_latest_version(location, parameters)
            entry = TableEntry(name=name, location=location, parameters=parameters)
            columns = catalog_columns(schema)
            try:
                self._catalog_create_table(path, entry, columns)
            except TableAlreadyExistsError:
                if mode != OVERWRITE:
                    raise
                # Conditional on the entry as read, retried when a commit lands in between:
                # never a blind write over an entry another writer has just changed.
                parameters = self._retry_conflicts(
                    f"Table {describe((*path, name))}",
                    lambda: self._reregister(path, entry, columns),
                )
            return RegisterTableResponse(location=location, properties=parameters)

    def _reregister(
        self, path: Path, entry: TableEntry, columns: list[CatalogColumn]
    ) -> dict[str, str]:
        """One conditional replacement of an existing entry by ``entry`` (register overwrite);
        the parameters written. The same managed dataset registered again never takes the
        catalog back to an older version than it has recorded."""
        existing = self._require_lance_table(path, entry.name)
        parameters = entry.parameters
        if (
            self._managed_versioning(entry)
            and self._managed_versioning(existing)
            and existing.location == entry.location
        ):
            parameters = versions.never_behind(parameters, existing.parameters)
        replacement = dataclasses.replace(entry, parameters=parameters)
        self._catalog_replace_table(path, existing, replacement, columns)
        return parameters

    def describe_table(self, request: RequestInput = None) -> DescribeTableResponse:
        raw_id = _raw_id(request)
        with self._operation("describe table", raw_id):
            req = coerce_request(request, DescribeTableRequest)
            if req.load_detailed_metadata:
                raise UnsupportedOperationError(
                    "load_detailed_metadata=true is not supported: the catalog keeps the "
                    "location only; open the dataset with Lance for version, schema and stats"
                )
            path, name = self._table_path(req.id)
            entry = self._require_lance_table(path, name)
            location = tables.check_location(entry.location, f"Table {describe((*path, name))}")
            only_declared: bool | None = None
            if req.check_declared:
                # Managed tables: the catalog knows (opening the dataset would come back here).
                if self._managed_versioning(entry):
                    only_declared = versions.current_version(entry.parameters) == 0
                else:
                    only_declared = self._dataset_schema(location) is None
            return DescribeTableResponse(
                table=name,
                namespace=list(path),
                location=location,
                table_uri=location if req.with_table_uri else None,
                storage_options=self._answered_storage_options(location, req.vend_credentials),
                properties=dict(entry.parameters),
                managed_versioning=self._managed_versioning(entry),
                is_only_declared=only_declared,
            )

    def _background(self) -> ThreadPoolExecutor:
        with self._state_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(2, thread_name_prefix="lance-metastore")
            return self._executor

    def table_exists(self, request: RequestInput = None) -> None:  # type: ignore[override]
        raw_id = _raw_id(request)
        with self._operation("check table", raw_id):
            req = coerce_request(request, TableExistsRequest)
            path, name = self._table_path(req.id)
            self._require_lance_table(path, name)

    def deregister_table(self, request: RequestInput = None) -> DeregisterTableResponse:
        raw_id = _raw_id(request)
        with self._operation("deregister table", raw_id):
            req = coerce_request(request, DeregisterTableRequest)
            path, name = self._table_path(req.id)
            entry = self._require_lance_table(path, name)
            self._catalog_delete_table(path, name)
            return DeregisterTableResponse(
                id=[*path, name], location=entry.location, properties=dict(entry.parameters)
            )

    def drop_table(self, request: RequestInput = None) -> DropTableResponse:
        raw_id = _raw_id(request)
        with self._operation("drop table", raw_id):
            req = coerce_request(request, DropTableRequest)
            path, name = self._table_path(req.id)
            entry = self._require_lance_table(path, name)
            # The entry goes first: if deleting data then fails, the data can be registered
            # again; the other order could leave a catalog entry pointing at nothing.
            has_data = entry.location is not None and self._has_committed_data(entry)
            kept = self._reason_to_keep_data(path, name, entry) if has_data else None
            self._catalog_delete_table(path, name)
            answer = dict(entry.parameters)
            if kept is not None:
                logger.warning(
                    "catalog entry of %s dropped, data kept at %s: %s",
                    describe((*path, name)),
                    entry.location,
                    kept,
                )
                answer[locations.DATA_KEPT_KEY] = kept
            elif has_data and entry.location is not None:  # has_data implies a location
                import lance

                try:
                    lance.LanceDataset.drop(
                        tables.plain_location(entry.location),
                        self.storage_options or None,
                        ignore_not_found=True,
                    )
                except ValueError as error:  # Lance refuses roots it cannot read as datasets
                    logger.warning(
                        "catalog entry of %s dropped, data left at %s: %s",
                        describe((*path, name)),
                        entry.location,
                        error,
                    )
            return DropTableResponse(id=[*path, name], location=entry.location, properties=answer)
