"""The table operations of the spec that the catalog answers: list, declare, register, describe,
exists, deregister and drop.

A mixin of :class:`~lance_metastore.operations.catalog.CatalogNamespace`, written over the
catalog primitives and shared helpers that :class:`~lance_metastore.operations.core.CatalogCore`
names.
"""

from __future__ import annotations

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
    LanceNamespaceError,
    TableAlreadyExistsError,
    UnsupportedOperationError,
)

from ..rules import locations, tables, versions
from ..rules.identifiers import Path, describe
from ..rules.lance_files import drop_lance_files
from ..rules.requests import (
    CREATE,
    OVERWRITE,
    RequestInput,
    coerce_request,
)
from ..rules.requests import request_id as _raw_id
from ..rules.requests import request_mode as _mode
from ..rules.schema import catalog_columns
from ..rules.tables import TableEntry
from ..rules.visibility import TABLE
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
                names, token = self._pager.objects(
                    ("tables", path), list, req.page_token, req.limit, kind=TABLE, render=str
                )
                return ListTablesResponse(tables=names, page_token=token)
            include_declared = req.include_declared is not False

            def fetch() -> list[Path]:
                names = self._catalog_list_lance_tables(path)
                if not include_declared:
                    names = [n for n in names if self._has_data(path, n)]
                return [(*path, name) for name in names]

            names, token = self._pager.objects(
                ("tables", path, include_declared),
                fetch,
                req.page_token,
                req.limit,
                kind=TABLE,
                render=lambda object_id: object_id[-1],
            )
            return ListTablesResponse(tables=names, page_token=token)

    def _has_data(self, path: Path, name: str) -> bool:
        entry = self._catalog_get_table(path, name)
        try:
            return entry is not None and self._has_committed_data(entry)
        except InvalidInputError:  # a stored location today's rules refuse is never opened
            return False

    def declare_table(self, request: RequestInput = None) -> DeclareTableResponse:
        raw_id = _raw_id(request)
        with self._operation("declare table", raw_id):
            req = coerce_request(request, DeclareTableRequest)
            path, name = self._table_path(req.id)
            with self._placing_table(path, name, req.location, "declare") as location:
                # After the namespace is found: a bad property of a missing namespace is 1.
                parameters = self._declared_parameters(req.properties)
                entry = TableEntry(name=name, location=location, parameters=parameters)
                # Declaring over an existing dataset: the catalog shows its columns at once.
                managed = self._managed_versioning(entry)
                schema = None if managed else self._dataset_schema(location)
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
            with self._placing_table(path, name, req.location, "register") as location:
                parameters = self._declared_parameters(req.properties)
                schema = self._dataset_schema(location)
                if schema is None:
                    raise InvalidInputError(
                        f"Cannot register {describe((*path, name))}: "
                        f"no Lance dataset at {location!r}"
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
                    # Through the commit routine: conditional on the entry as read, retried
                    # when a commit lands in between, keeping what other tools wrote on it.
                    parameters = self._reregister(path, entry, columns)
            return RegisterTableResponse(location=location, properties=parameters)

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
            location = locations.answered(entry.location, f"Table {describe((*path, name))}")
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
                storage_options=self._answered_storage_options(
                    location, req.vend_credentials, path
                ),
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
                id=[*path, name],
                location=_answered(path, entry),
                properties=dict(entry.parameters),
            )

    def drop_table(self, request: RequestInput = None) -> DropTableResponse:
        raw_id = _raw_id(request)
        with self._operation("drop table", raw_id):
            req = coerce_request(request, DropTableRequest)
            path, name = self._table_path(req.id)
            entry = self._require_lance_table(path, name)
            # The entry goes first: if deleting data then fails, the data can be registered
            # again; the other order could leave a catalog entry pointing at nothing.
            kept: str | None = None
            try:
                has_data = entry.location is not None and self._has_committed_data(entry)
            except InvalidInputError as error:  # text today's rules refuse: never opened
                has_data, kept = False, f"its location cannot be resolved ({error})"
            if has_data:
                kept = self._reason_to_keep_data(path, name, entry)
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
                # Only what Lance wrote there (rules/lance_files.py): a foreign file stays.
                # The location was judged by _reason_to_keep_data, before the entry went.
                where = locations.stored(entry.location, "Table")
                try:
                    foreign = drop_lance_files(where, self.storage_options)
                except (OSError, ValueError, LanceNamespaceError) as error:
                    reason = f"deleting Lance's files failed ({type(error).__name__})"
                    logger.warning(
                        "catalog entry of %s dropped, data left at %s: %s",
                        describe((*path, name)),
                        entry.location,
                        error,
                    )
                    answer[locations.DATA_KEPT_KEY] = reason
                else:
                    if foreign:
                        logger.info(
                            "drop of %s left %d file(s) Lance did not write at %s",
                            describe((*path, name)),
                            len(foreign),
                            entry.location,
                        )
            return DropTableResponse(
                id=[*path, name], location=_answered(path, entry), properties=answer
            )


def _answered(path: Path, entry: TableEntry) -> str | None:
    """The location a deregister or drop answers: the canonical text (see
    :func:`~lance_metastore.rules.locations.answered`); an entry without one answers none."""
    if not entry.location:
        return entry.location
    return locations.answered(entry.location, f"Table {describe((*path, entry.name))}")
