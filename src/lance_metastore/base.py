"""The operations of the Lance namespace spec, written once for every catalog backend.

:class:`CatalogNamespace` owns the rules that the specs share: request shapes, identifier
checks, creation and drop modes, error codes, Lance-table identification, default locations,
sorting and paging, schema-to-columns sync. A backend (Glue, Hive) subclasses it and supplies
a handful of primitives that talk to its catalog; it never re-implements a rule.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import pyarrow as pa
from lance_namespace import (
    BatchDeleteTableVersionsRequest,
    BatchDeleteTableVersionsResponse,
    CreateNamespaceRequest,
    CreateNamespaceResponse,
    CreateTableVersionRequest,
    CreateTableVersionResponse,
    DeclareTableRequest,
    DeclareTableResponse,
    DeregisterTableRequest,
    DeregisterTableResponse,
    DescribeNamespaceRequest,
    DescribeNamespaceResponse,
    DescribeTableRequest,
    DescribeTableResponse,
    DescribeTableVersionRequest,
    DescribeTableVersionResponse,
    DropNamespaceRequest,
    DropNamespaceResponse,
    DropTableRequest,
    DropTableResponse,
    LanceNamespace,
    ListNamespacesRequest,
    ListNamespacesResponse,
    ListTablesRequest,
    ListTablesResponse,
    ListTableVersionsRequest,
    ListTableVersionsResponse,
    NamespaceExistsRequest,
    RegisterTableRequest,
    RegisterTableResponse,
    TableExistsRequest,
    TableVersion,
)
from lance_namespace.errors import (
    InvalidInputError,
    LanceNamespaceError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TableVersionNotFoundError,
    UnsupportedOperationError,
)

from . import tables, versions
from .batches import BatchCommitOps
from .config import MANAGED_BY, ROOT, Property, Settings, parse_properties
from .data import TableDataOps
from .datasets import TableDatasets
from .errors import register_secrets, translate_errors
from .identifiers import Path, describe, split_identifier
from .indexes import TableIndexOps
from .lifecycle import TableLifecycleOps
from .manifests import ManifestFiles
from .paging import Pager
from .refs import TableRefOps
from .requests import (
    CASCADE,
    CREATE,
    EXIST_OK,
    FAIL,
    OVERWRITE,
    RESTRICT,
    SKIP,
    coerce_request,
)
from .requests import request_id as _raw_id
from .requests import request_mode as _mode
from .schema import CatalogColumn, catalog_columns
from .tables import TableEntry

logger = logging.getLogger("lance_metastore")


class CatalogNamespace(
    TableLifecycleOps,
    TableRefOps,
    TableDataOps,
    TableIndexOps,
    BatchCommitOps,
    TableDatasets,
    LanceNamespace,
):
    """Shared flow of every operation; subclasses implement the ``_catalog_*`` primitives.

    The namespace and catalog-managed version operations are written here; the table
    operations that run Lance on a table's dataset are in the mixins, one module by subject
    (``lifecycle``, ``refs``, ``data``, ``indexes``, ``batches``), over the same primitives.
    """

    PROPERTIES: ClassVar[tuple[Property, ...]] = (ROOT, MANAGED_BY)
    # Whether DropNamespace may cascade (Glue: no, by its spec; Hive: yes).
    SUPPORTS_CASCADE: ClassVar[bool] = False

    def __init__(self, **properties: Any) -> None:
        self._settings: Settings = parse_properties(
            type(self).__name__, properties, self.PROPERTIES
        )
        self._pager = Pager()
        # Pinned now: a pickled copy on a Spark executor must not use the executor's cwd.
        self._root = self._settings["root"] or os.getcwd()
        register_secrets(self._settings.secrets())
        self._state_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._manifests = ManifestFiles(self._settings.storage_options)
        self._configure(self._settings)

    # ----------------------------------------------------------------------------------------
    # Identity, pickling, configuration
    # ----------------------------------------------------------------------------------------

    def _configure(self, settings: Settings) -> None:
        """Backend hook: check cross-property rules; must not open connections."""

    def __getstate__(self) -> dict[str, Any]:
        # Only the configuration travels (to Spark executors, say); clients are rebuilt lazily.
        return {"properties": {**dict(self._settings.raw), "root": self._root}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["properties"])  # type: ignore[misc]

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in sorted(self._settings.public_view().items()))
        return f"{type(self).__name__}({shown})"

    @property
    def root(self) -> str:
        """Where tables without a location of their own are placed."""
        return self._root

    @property
    def storage_options(self) -> dict[str, str]:
        """The ``storage.*`` properties, prefix removed, as Lance expects them."""
        return dict(self._settings.storage_options)

    def close(self) -> None:
        """Release connections and threads; the object stays usable and reconnects on demand."""
        with self._state_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)

    def __enter__(self) -> CatalogNamespace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------------------
    # Primitives a backend implements
    # ----------------------------------------------------------------------------------------

    @abstractmethod
    def _normalize_namespace(self, parts: Path) -> Path:
        """Validate a namespace path (depth, name rules) and return it normalized."""

    @abstractmethod
    def _normalize_table(self, parts: Path) -> tuple[Path, str]:
        """Validate a table id; return (namespace path, table name) normalized."""

    @abstractmethod
    def _translate_error(self, error: BaseException, context: str) -> LanceNamespaceError | None:
        """Map a client-library exception to a namespace error (None if unknown)."""

    @abstractmethod
    def _catalog_get_namespace(self, path: Path) -> dict[str, str] | None:
        """Properties of an existing non-root namespace, or None when it does not exist."""

    def _catalog_root_properties(self) -> dict[str, str]:
        return {}

    def _stored_properties(self, properties: Mapping[str, str]) -> dict[str, str]:
        """The properties a namespace created with ``properties`` describes itself with."""
        return dict(properties)

    @abstractmethod
    def _catalog_create_namespace(self, path: Path, properties: Mapping[str, str]) -> None:
        """Create it; raise NamespaceAlreadyExistsError, or NamespaceNotFoundError (parent)."""

    @abstractmethod
    def _catalog_replace_namespace_properties(
        self, path: Path, properties: Mapping[str, str]
    ) -> None:
        """Replace the properties of an existing namespace (OVERWRITE mode)."""

    @abstractmethod
    def _catalog_namespace_is_empty(self, path: Path) -> bool | None:
        """Whether it holds no table of any kind and no child namespace; None if missing."""

    @abstractmethod
    def _catalog_drop_namespace(self, path: Path, cascade: bool) -> None:
        """Drop it; with cascade, deregister its tables (never deleting data) first."""

    @abstractmethod
    def _catalog_list_namespaces(self, path: Path) -> list[str]:
        """Names of the direct children; NamespaceNotFoundError if ``path`` does not exist."""

    @abstractmethod
    def _catalog_list_lance_tables(self, path: Path) -> list[str]:
        """Names of the Lance tables in a namespace; NamespaceNotFoundError if missing."""

    @abstractmethod
    def _catalog_get_table(self, path: Path, name: str) -> TableEntry | None:
        """The table, Lance or not, or None when it (or its namespace) does not exist."""

    @abstractmethod
    def _catalog_create_table(
        self, path: Path, entry: TableEntry, columns: list[CatalogColumn]
    ) -> None:
        """Create it; raise NamespaceNotFoundError or TableAlreadyExistsError."""

    @abstractmethod
    def _catalog_update_table(
        self, path: Path, entry: TableEntry, columns: list[CatalogColumn] | None
    ) -> None:
        """Replace location/parameters (and columns when given) of an existing table.

        Conditional on ``entry.version_token`` where the backend supports it: a concurrent
        change raises ConcurrentModificationError.
        """

    @abstractmethod
    def _catalog_compare_and_set(
        self, path: Path, expected: TableEntry, parameters: dict[str, str]
    ) -> None:
        """Replace the table's parameters only if it is unchanged since ``expected`` was read.

        Location and columns stay. Atomic against concurrent writers; a lost race raises
        ConcurrentModificationError. This is what makes the catalog the commit arbiter.
        """

    def _catalog_set_columns(
        self, path: Path, entry: TableEntry, columns: list[CatalogColumn]
    ) -> None:
        """Replace only the columns of the table read as ``entry``; its parameters stay as the
        catalog holds them. A concurrent change raises ConcurrentModificationError (retried by
        the caller), so a managed commit is never undone."""
        self._catalog_update_table(path, entry, columns)

    def _catalog_rename_table(
        self, path: Path, entry: TableEntry, new_path: Path, new_name: str
    ) -> None:
        """Give the table read as ``entry`` a new name (and namespace); location and data stay.

        TableAlreadyExistsError if the new name is taken. Whatever fails, the table is left
        with exactly one entry: the old one, or the new one.
        """
        raise UnsupportedOperationError(f"{type(self).__name__} cannot rename tables")

    @abstractmethod
    def _catalog_delete_table(self, path: Path, name: str) -> None:
        """Remove the catalog entry only; TableNotFoundError if it is gone."""

    @abstractmethod
    def _catalog_table_base(self, path: Path) -> str:
        """Where the tables of this namespace go by default (its location, or under root)."""

    # ----------------------------------------------------------------------------------------
    # Shared helpers
    # ----------------------------------------------------------------------------------------

    def _begin_operation(self) -> None:
        """Backend hook: forget what was looked up for the previous operation."""

    @contextlib.contextmanager
    def _operation(self, operation: str, raw_id: Any) -> Iterator[None]:
        self._begin_operation()
        with translate_errors(
            operation,
            _target(raw_id),
            self._translate_error,
            self._settings.secrets(),
        ):
            yield

    def _namespace_path(self, raw_id: Any) -> Path:
        return self._normalize_namespace(split_identifier(raw_id))

    def _table_path(self, raw_id: Any) -> tuple[Path, str]:
        parts = split_identifier(raw_id)
        if not parts:
            raise InvalidInputError("A table identifier is required")
        return self._normalize_table(parts)

    def is_table_id(self, table_id: Any) -> bool:
        """Whether ``table_id`` is well-formed as a table of this catalog (no catalog call).

        With :meth:`is_namespace_id`, tells a tool which operation an id can mean: on Hive 3
        ``cat$db`` is only a namespace, on Glue ``db$t`` could be either.
        """
        return self._well_formed(self._table_path, table_id)

    def is_namespace_id(self, namespace_id: Any) -> bool:
        """Whether ``namespace_id`` is well-formed as a namespace of this catalog."""
        return self._well_formed(self._namespace_path, namespace_id)

    @staticmethod
    def _well_formed(check: Callable[[Any], Any], raw_id: Any) -> bool:
        try:
            check(raw_id)
        except LanceNamespaceError:
            return False
        return True

    def _require_table(self, path: Path, name: str) -> TableEntry:
        entry = self._catalog_get_table(path, name)
        if entry is None:
            raise TableNotFoundError(f"Table {describe((*path, name))} does not exist")
        return entry

    def _require_lance_table(self, path: Path, name: str) -> TableEntry:
        entry = self._require_table(path, name)
        if not entry.is_lance:
            raise InvalidInputError(
                f"Table {describe((*path, name))} is not a Lance table "
                f"(table type {entry.table_type!r}, parameters lack table_type=lance)"
            )
        return entry

    def _storage_options_or_none(self) -> dict[str, str] | None:
        return self.storage_options or None

    def _open_dataset(self, location: str) -> Any:
        import lance

        return lance.dataset(location, storage_options=self.storage_options or None)

    def _dataset_schema(self, location: str | None) -> pa.Schema | None:
        """The Lance schema at ``location``, or None when no dataset is there yet."""
        location = tables.plain_location(location)
        if not location:
            return None
        if "://" not in location and not os.path.isdir(os.path.join(location, "_versions")):
            return None  # cheap local check before asking Lance
        try:
            return self._open_dataset(location).schema
        except Exception:
            return None

    def _has_committed_data(self, entry: TableEntry) -> bool:
        """Whether the table holds data: for catalog-managed tables the catalog knows."""
        if self._managed_versioning(entry):
            return versions.current_version(entry.parameters) > 0
        return self._dataset_schema(entry.location) is not None

    def _table_schema(self, path: Path, entry: TableEntry) -> pa.Schema | None:
        """The schema of the table's latest version; managed tables are opened through the
        catalog (their latest manifest is the one the catalog names)."""
        if not self._managed_versioning(entry):
            return self._dataset_schema(entry.location)
        if versions.current_version(entry.parameters) == 0:
            return None
        import lance

        dataset = lance.dataset(
            namespace_client=self,
            table_id=[*path, entry.name],
            storage_options=self.storage_options or None,
        )
        return dataset.schema

    def _declared_parameters(self, properties: Mapping[str, str] | None) -> dict[str, str]:
        return tables.table_parameters(properties, self._settings["managed_by"])

    def _managed_versioning(self, entry: TableEntry) -> bool:
        return entry.managed_by == tables.MANAGED_BY_IMPL

    def sync_table_columns(
        self, table_id: Any, schema: pa.Schema | None = None
    ) -> list[CatalogColumn]:
        """Make the catalog columns of a Lance table match its dataset's current schema.

        Reads never write the catalog, so this is how columns follow a schema change: our
        writers call it (the Spark writer passes the ``schema`` it just committed, so nothing
        is opened again); after another writer (pylance, lancedb) changed a table's schema,
        call it yourself, or run ``lance-metastore sync-columns TABLE``. Without ``schema``
        the table's latest version is opened to read it.
        """
        with self._operation("sync columns of table", table_id):
            path, name = self._table_path(table_id)
            entry = self._require_lance_table(path, name)
            if schema is None:
                schema = self._table_schema(path, entry)
            if schema is None:
                raise TableNotFoundError(
                    f"Table {describe((*path, name))} has no Lance dataset at {entry.location!r}"
                )
            columns = catalog_columns(schema)
            self._catalog_update_table(path, entry, columns)
            return columns

    # ----------------------------------------------------------------------------------------
    # Namespace operations
    # ----------------------------------------------------------------------------------------

    def create_namespace(self, request: Any = None) -> CreateNamespaceResponse:
        raw_id = _raw_id(request)
        with self._operation("create namespace", raw_id):
            req = coerce_request(request, CreateNamespaceRequest)
            path = self._namespace_path(req.id)
            mode = _mode(req.mode, CREATE, (CREATE, EXIST_OK, OVERWRITE), "create mode")
            properties = dict(req.properties or {})
            if not path:
                if mode == OVERWRITE:
                    raise UnsupportedOperationError("The root namespace cannot be overwritten")
                if mode == CREATE:
                    raise NamespaceAlreadyExistsError("The root namespace always exists")
                return CreateNamespaceResponse(properties=self._catalog_root_properties())
            if mode == OVERWRITE and self._catalog_get_namespace(path) is not None:
                self._catalog_replace_namespace_properties(path, properties)
                return CreateNamespaceResponse(properties=self._stored_properties(properties))
            try:
                # Create first: one catalog call in the common case, and no check-then-act race.
                self._catalog_create_namespace(path, properties)
            except NamespaceAlreadyExistsError:
                if mode == CREATE:
                    raise
                if mode == OVERWRITE:
                    self._catalog_replace_namespace_properties(path, properties)
                    return CreateNamespaceResponse(properties=self._stored_properties(properties))
                existing = self._catalog_get_namespace(path)
                return CreateNamespaceResponse(properties=existing or {})
            return CreateNamespaceResponse(properties=self._stored_properties(properties))

    def describe_namespace(self, request: Any = None) -> DescribeNamespaceResponse:
        raw_id = _raw_id(request)
        with self._operation("describe namespace", raw_id):
            req = coerce_request(request, DescribeNamespaceRequest)
            path = self._namespace_path(req.id)
            if not path:
                return DescribeNamespaceResponse(properties=self._catalog_root_properties())
            properties = self._catalog_get_namespace(path)
            if properties is None:
                raise NamespaceNotFoundError(f"Namespace {describe(path)} does not exist")
            return DescribeNamespaceResponse(properties=properties)

    def namespace_exists(self, request: Any = None) -> None:
        raw_id = _raw_id(request)
        with self._operation("check namespace", raw_id):
            req = coerce_request(request, NamespaceExistsRequest)
            path = self._namespace_path(req.id)
            if path and self._catalog_get_namespace(path) is None:
                raise NamespaceNotFoundError(f"Namespace {describe(path)} does not exist")

    def drop_namespace(self, request: Any = None) -> DropNamespaceResponse:
        raw_id = _raw_id(request)
        with self._operation("drop namespace", raw_id):
            req = coerce_request(request, DropNamespaceRequest)
            path = self._namespace_path(req.id)
            mode = _mode(req.mode, FAIL, (FAIL, SKIP), "drop mode")
            behavior = _mode(req.behavior, RESTRICT, (RESTRICT, CASCADE), "drop behavior")
            if not path:
                raise InvalidInputError("The root namespace cannot be dropped")
            if behavior == CASCADE and not self.SUPPORTS_CASCADE:
                raise UnsupportedOperationError(
                    f"{type(self).__name__} supports only RESTRICT drops; "
                    f"drop the tables of {describe(path)} first"
                )
            if behavior == CASCADE:
                exists = self._catalog_get_namespace(path) is not None
                empty = None
            else:
                empty = self._catalog_namespace_is_empty(path)
                exists = empty is not None
            if not exists:
                if mode == SKIP:
                    return DropNamespaceResponse()
                raise NamespaceNotFoundError(f"Namespace {describe(path)} does not exist")
            if behavior == RESTRICT and not empty:
                raise NamespaceNotEmptyError(
                    f"Namespace {describe(path)} is not empty: it holds tables or namespaces"
                )
            try:
                self._catalog_drop_namespace(path, cascade=behavior == CASCADE)
            except NamespaceNotFoundError:
                if mode != SKIP:
                    raise
            return DropNamespaceResponse()

    def list_namespaces(self, request: Any = None) -> ListNamespacesResponse:
        raw_id = _raw_id(request)
        with self._operation("list namespaces of", raw_id):
            req = coerce_request(request, ListNamespacesRequest)
            path = self._namespace_path(req.id)
            names, token = self._pager.page(
                ("namespaces", path),
                lambda: self._catalog_list_namespaces(path),
                req.page_token,
                req.limit,
            )
            return ListNamespacesResponse(namespaces=names, page_token=token)

    # ----------------------------------------------------------------------------------------
    # Table operations
    # ----------------------------------------------------------------------------------------

    def list_tables(self, request: Any = None) -> ListTablesResponse:
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

    def declare_table(self, request: Any = None) -> DeclareTableResponse:
        raw_id = _raw_id(request)
        with self._operation("declare table", raw_id):
            req = coerce_request(request, DeclareTableRequest)
            path, name = self._table_path(req.id)
            parameters = self._declared_parameters(req.properties)
            if req.location is not None:
                location = tables.check_location(req.location, f"Table {describe((*path, name))}")
            else:
                location = tables.default_table_location(self._catalog_table_base(path), name)
            entry = TableEntry(name=name, location=location, parameters=parameters)
            # Declaring over an existing dataset: the catalog shows its columns at once.
            schema = None if self._managed_versioning(entry) else self._dataset_schema(location)
            columns = catalog_columns(schema) if schema is not None else []
            self._catalog_create_table(path, entry, columns)
            return DeclareTableResponse(
                location=location,
                storage_options=self._storage_options_or_none(),
                properties=parameters,
                managed_versioning=self._managed_versioning(entry),
            )

    def create_empty_table(self, request: Any = None) -> DeclareTableResponse:
        """Deprecated name of :meth:`declare_table`, still called by older Lance clients."""
        return self.declare_table(request)

    def register_table(self, request: Any = None) -> RegisterTableResponse:
        raw_id = _raw_id(request)
        with self._operation("register table", raw_id):
            req = coerce_request(request, RegisterTableRequest)
            path, name = self._table_path(req.id)
            mode = _mode(req.mode, CREATE, (CREATE, OVERWRITE), "register mode")
            location = tables.check_location(req.location, f"Table {describe((*path, name))}")
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
                existing = self._require_lance_table(path, name)
                entry.version_token = existing.version_token
                self._catalog_update_table(path, entry, columns)
            return RegisterTableResponse(location=location, properties=parameters)

    def _adopt_latest_version(self, location: str, parameters: dict[str, str]) -> dict[str, str]:
        """Registering a dataset as catalog-managed: the catalog starts at its latest version."""
        version = self._open_dataset(location).version
        local = tables.plain_location(location) or location
        v1_name = os.path.join(local, "_versions", versions.manifest_name(version, "V1"))
        scheme = "V1" if "://" not in local and os.path.exists(v1_name) else "V2"
        record = versions.older_record(local, version, scheme, None)
        commit = versions.Commit(version, record.manifest_path, None, None, scheme)
        return commit.parameters(parameters)

    def describe_table(self, request: Any = None) -> DescribeTableResponse:
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
                storage_options=self._storage_options_or_none(),
                properties=dict(entry.parameters),
                managed_versioning=self._managed_versioning(entry),
                is_only_declared=only_declared,
            )

    def _background(self) -> ThreadPoolExecutor:
        with self._state_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(2, thread_name_prefix="lance-metastore")
            return self._executor

    def table_exists(self, request: Any = None) -> None:
        raw_id = _raw_id(request)
        with self._operation("check table", raw_id):
            req = coerce_request(request, TableExistsRequest)
            path, name = self._table_path(req.id)
            self._require_lance_table(path, name)

    def deregister_table(self, request: Any = None) -> DeregisterTableResponse:
        raw_id = _raw_id(request)
        with self._operation("deregister table", raw_id):
            req = coerce_request(request, DeregisterTableRequest)
            path, name = self._table_path(req.id)
            entry = self._require_lance_table(path, name)
            self._catalog_delete_table(path, name)
            return DeregisterTableResponse(
                id=[*path, name], location=entry.location, properties=dict(entry.parameters)
            )

    def drop_table(self, request: Any = None) -> DropTableResponse:
        raw_id = _raw_id(request)
        with self._operation("drop table", raw_id):
            req = coerce_request(request, DropTableRequest)
            path, name = self._table_path(req.id)
            entry = self._require_lance_table(path, name)
            # The entry goes first: if deleting data then fails, the data can be registered
            # again; the other order could leave a catalog entry pointing at nothing.
            has_data = entry.location is not None and self._has_committed_data(entry)
            self._catalog_delete_table(path, name)
            if has_data:
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
            return DropTableResponse(
                id=[*path, name], location=entry.location, properties=dict(entry.parameters)
            )

    # ----------------------------------------------------------------------------------------
    # Catalog-managed versions (managed_by=impl): the catalog arbitrates every commit
    # ----------------------------------------------------------------------------------------

    def _require_managed_table(self, path: Path, name: str) -> TableEntry:
        entry = self._require_lance_table(path, name)
        if not self._managed_versioning(entry):
            raise InvalidInputError(
                f"Table {describe((*path, name))} is managed by storage: Lance commits its "
                "versions itself; declare it with managed_by=impl for catalog-managed commits"
            )
        return entry

    def create_table_version(self, request: Any = None) -> CreateTableVersionResponse:
        raw_id = _raw_id(request)
        with self._operation("commit a version of table", raw_id):
            req = coerce_request(request, CreateTableVersionRequest)
            if req.branch:
                raise UnsupportedOperationError("Branches are not supported by catalog commits")
            path, name = self._table_path(req.id)
            if req.version < 1 or not req.manifest_path:
                raise InvalidInputError("A commit needs a version >= 1 and a manifest_path")
            entry = self._require_managed_table(path, name)
            latest = versions.current_version(entry.parameters) or self._versions_of_creation(entry)
            versions.check_next(f"table {describe((*path, name))}", latest, req.version)
            commit = versions.Commit(
                req.version, req.manifest_path, req.manifest_size, req.e_tag, req.naming_scheme
            )
            committed = commit.parameters(entry.parameters)
            self._catalog_compare_and_set(path, entry, committed)
            record = versions.latest_record(committed)
            assert record is not None
            [finalized] = self._finalize(entry, committed, [record])
            return CreateTableVersionResponse(version=finalized)

    def _versions_of_creation(self, entry: TableEntry) -> int:
        """The versions a managed table's creator wrote straight to storage before its first
        commit through the catalog (lance-spark's ``CREATE TABLE`` writes the empty version 1
        so after ``declare_table``): the first commit continues after them. Once the catalog
        records a commit, only the catalog counts."""
        location = tables.plain_location(entry.location)
        if self._dataset_schema(location) is None:
            return 0
        return int(self._open_dataset(location).version)

    def _finalize(
        self, entry: TableEntry, committed: Mapping[str, str], records: list[TableVersion]
    ) -> list[TableVersion]:
        """After this namespace's compare-and-set moved ``entry`` to ``committed``: the records
        of the versions it committed, their manifests moved to the final names, and the
        staging manifest of the version that was the latest before deleted (see
        :mod:`manifests`)."""
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

    def _version_records(self, entry: TableEntry) -> list[Any]:
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

    def list_table_versions(self, request: Any = None) -> ListTableVersionsResponse:
        raw_id = _raw_id(request)
        with self._operation("list versions of table", raw_id):
            req = coerce_request(request, ListTableVersionsRequest)
            path, name = self._table_path(req.id)
            entry = self._require_managed_table(path, name)
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

    def describe_table_version(self, request: Any = None) -> DescribeTableVersionResponse:
        raw_id = _raw_id(request)
        with self._operation("describe a version of table", raw_id):
            req = coerce_request(request, DescribeTableVersionRequest)
            path, name = self._table_path(req.id)
            entry = self._require_managed_table(path, name)
            latest = self._latest_record(entry)
            if req.version is None or (latest and req.version == latest.version):
                if latest is None:
                    raise TableVersionNotFoundError(
                        f"Table {describe((*path, name))} has no committed version yet"
                    )
                return DescribeTableVersionResponse(version=latest)
            for record in self._version_records(entry):
                if record.version == req.version:
                    return DescribeTableVersionResponse(version=record)
            raise TableVersionNotFoundError(
                f"Version {req.version} of table {describe((*path, name))} does not exist"
            )

    def batch_delete_table_versions(self, request: Any = None) -> BatchDeleteTableVersionsResponse:
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


def _target(raw_id: Any) -> str:
    try:
        return describe(split_identifier(raw_id))
    except LanceNamespaceError:
        return repr(raw_id)
