"""The operations of the Lance namespace spec, written once for every catalog backend.

:class:`CatalogNamespace` owns the rules that the specs share: request shapes, identifier
checks, creation and drop modes, error codes, Lance-table identification, default locations,
sorting and paging, schema-to-columns sync. A backend (Glue, Hive) subclasses it and supplies
a handful of primitives that talk to its catalog; it never re-implements a rule.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar

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
    ConcurrentModificationError,
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

from . import locations, tables, versions
from .batches import BatchCommitOps
from .config import LOCATION_PROPERTIES, MANAGED_BY, Property, Settings, parse_properties
from .data import TableDataOps
from .datasets import TableDatasets
from .errors import lance_error, register_secrets, translate_errors
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
    RequestInput,
    coerce_request,
)
from .requests import request_id as _raw_id
from .requests import request_mode as _mode
from .schema import CatalogColumn, catalog_columns
from .tables import TableEntry

if TYPE_CHECKING:
    from lance import LanceDataset

logger = logging.getLogger("lance_metastore")

# How long a commit refused by a write that left its version free is made again (Lance's own
# retry window for a commit is 30 s).
COMMIT_RETRY_SECONDS = 10.0


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

    PROPERTIES: ClassVar[tuple[Property, ...]] = (*LOCATION_PROPERTIES, MANAGED_BY)
    # Whether DropNamespace may cascade (Glue: no, by its spec; Hive: yes).
    SUPPORTS_CASCADE: ClassVar[bool] = False
    # The namespace properties that are storage locations (resolved and confined on write).
    NAMESPACE_LOCATION_KEYS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **properties: Any) -> None:
        self._settings: Settings = parse_properties(
            type(self).__name__, properties, self.PROPERTIES
        )
        self._pager = Pager()
        # Pinned now: a pickled copy on a Spark executor must not use the executor's cwd.
        self._root = self._settings["root"] or os.getcwd()
        self._locations = locations.LocationPolicy(
            root=self._root,
            extra=self._settings["allowed_locations"],
            schemes=self._settings["allowed_schemes"],
            enforced=self._settings["confine_locations"],
        )
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
        properties = {**dict(self._settings.raw), "root": self._root}
        if self._locations.enforced:
            properties["confine_locations"] = "true"
        return {"properties": properties}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["properties"])  # type: ignore[misc]

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in sorted(self._settings.public_view().items()))
        return f"{type(self).__name__}({shown})"

    @property
    def root(self) -> str:
        """Where tables without a location of their own are placed."""
        return self._root

    def confine_locations(self) -> None:
        """From now on refuse every location a caller sets outside the allowed prefixes, as
        ``confine_locations=true`` does (``lance-metastore serve`` calls this)."""
        self._locations = dataclasses.replace(self._locations, enforced=True)

    @property
    def locations_confined(self) -> bool:
        """Whether caller-set locations are confined to the allowed prefixes."""
        return self._locations.enforced

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
    def _catalog_replace_table(
        self,
        path: Path,
        expected: TableEntry,
        replacement: TableEntry,
        columns: list[CatalogColumn] | None,
    ) -> None:
        """Give the table read as ``expected`` the location and parameters of
        ``replacement`` (and ``columns``; None keeps the expected ones), only if it is
        unchanged since: the same conditional path as a managed commit (Glue ``VersionId``,
        HMS 4's conditional alter, the HMS 2/3 table lock). A lost race raises
        ConcurrentModificationError and changes nothing; callers retry with
        :meth:`_retry_conflicts`.
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
        self._catalog_replace_table(path, entry, entry, columns)

    def _catalog_rename_table(
        self, path: Path, entry: TableEntry, new_path: Path, new_name: str
    ) -> None:
        """Give the table read as ``entry`` a new name (and namespace); location and data stay.

        TableAlreadyExistsError if the new name is taken. Whatever fails, the table is left
        with exactly one entry: the old one, or the new one.
        """
        # lancedb raises NotImplementedError for a message with these words
        raise UnsupportedOperationError("rename_table not implemented: this catalog cannot rename")

    @abstractmethod
    def _catalog_delete_table(self, path: Path, name: str) -> None:
        """Remove the catalog entry only; TableNotFoundError if it is gone."""

    @abstractmethod
    def _catalog_table_base(self, path: Path) -> str:
        """Where the tables of this namespace go by default (its location, or under root)."""

    def _catalog_table_prefixes(self, path: Path) -> list[str | None]:
        """The catalog's own locations under which a table of ``path`` may lie when locations
        are confined (its database's location, the metastore's warehouse). Read only when
        ``root`` and ``allowed_locations`` do not hold the location."""
        return []

    def _catalog_namespace_prefixes(self, path: Path) -> list[str | None]:
        """The catalog's own locations under which the location of namespace ``path`` may
        lie when confined (the metastore's warehouse, a parent catalog's location)."""
        return []

    def _catalog_table_namespaces(self) -> Iterator[Path]:
        """Every namespace of the catalog that may hold tables. Here a walk of every level;
        backends that know which levels hold tables list only those."""
        pending: list[Path] = [()]
        while pending:
            path = pending.pop()
            try:
                pending.extend((*path, child) for child in self._catalog_list_namespaces(path))
            except NamespaceNotFoundError:
                continue  # dropped while we walked
            if path:
                yield path

    def _catalog_lance_locations(self, path: Path) -> dict[str, str | None]:
        """Name -> stored location of every Lance table of a namespace ({} for a level that
        holds no tables). Backends whose listing returns whole tables override this; here it
        is one listing and one read per table."""
        found: dict[str, str | None] = {}
        for name in self._catalog_list_lance_tables(path):
            entry = self._catalog_get_table(path, name)
            if entry is not None and entry.is_lance:
                found[name] = entry.location
        return found

    # ----------------------------------------------------------------------------------------
    # Shared helpers
    # ----------------------------------------------------------------------------------------

    def _begin_operation(self) -> None:
        """Backend hook: forget what was looked up for the previous operation."""

    @contextlib.contextmanager
    def _operation(self, operation: str, raw_id: object) -> Iterator[None]:
        self._begin_operation()
        with translate_errors(
            operation,
            _target(raw_id),
            self._translate_error,
            self._settings.secrets(),
            backend=type(self).__name__,
        ):
            yield

    def _namespace_path(self, raw_id: object) -> Path:
        return self._normalize_namespace(split_identifier(raw_id))

    def _table_path(self, raw_id: object) -> tuple[Path, str]:
        parts = split_identifier(raw_id)
        if not parts:
            raise InvalidInputError("A table identifier is required")
        return self._normalize_table(parts)

    def is_table_id(self, table_id: object) -> bool:
        """Whether ``table_id`` is well-formed as a table of this catalog (no catalog call).

        With :meth:`is_namespace_id`, tells a tool which operation an id can mean: on Hive 3
        ``cat$db`` is only a namespace, on Glue ``db$t`` could be either.
        """
        return self._well_formed(self._table_path, table_id)

    def is_namespace_id(self, namespace_id: object) -> bool:
        """Whether ``namespace_id`` is well-formed as a namespace of this catalog."""
        return self._well_formed(self._namespace_path, namespace_id)

    @staticmethod
    def _well_formed(check: Callable[[object], object], raw_id: object) -> bool:
        try:
            check(raw_id)
        except LanceNamespaceError:
            return False
        return True

    # ----------------------------------------------------------------------------------------
    # Locations: one resolution rule, confinement, one entry per location (see locations.py)
    # ----------------------------------------------------------------------------------------

    def _resolve_location(self, location: object, what: str) -> str:
        """A caller's location, absolute and normalised; relative ones resolve against the
        configured ``root`` (13 without one)."""
        return locations.resolve(location, self._settings["root"], what)

    def _default_location(self, path: Path, name: str) -> str:
        """``<namespace base>/<name>.lance``, normalised by the same rule."""
        base = self._catalog_table_base(path)
        what = f"Table {describe((*path, name))}"
        return locations.resolve(tables.default_table_location(base, name), self._root, what)

    def _caller_table_location(self, path: Path, name: str, location: object, verb: str) -> str:
        """A location a caller gave for table ``path``/``name``: resolved, confined (when
        enforced) and held by no other Lance table entry (unless ``shared_locations``).

        Raises before any catalog write or storage call: 13 for a location that cannot be
        resolved or is not allowed, 5 for one another entry holds.
        """
        what = f"Table {describe((*path, name))}"
        resolved = self._resolve_location(location, what)
        self._locations.check(resolved, lambda: self._catalog_table_prefixes(path), what)
        if not self._settings["shared_locations"]:
            holder = self._location_holder(resolved, exclude=(path, name))
            if holder is not None:
                raise TableAlreadyExistsError(
                    f"Cannot {verb} table {describe((*path, name))}: location {resolved!r} "
                    f"already exists as (or overlaps) the location of table {describe(holder)}; "
                    "set shared_locations=true to allow it"
                )
        return resolved

    def _namespace_properties(self, path: Path, properties: Mapping[str, Any]) -> dict[str, Any]:
        """The properties of a namespace to create or overwrite, with every location property
        resolved and (when enforced) confined."""
        checked = dict(properties)
        what = f"Namespace {describe(path)}"
        for key in self.NAMESPACE_LOCATION_KEYS:
            if key in checked:
                location = self._resolve_location(checked[key], f"{what}: property {key}")
                self._locations.check(
                    location, lambda: self._catalog_namespace_prefixes(path), what
                )
                checked[key] = location
        return checked

    def _location_holder(self, location: str, exclude: tuple[Path, str]) -> tuple[str, ...] | None:
        """The id of another Lance table whose location is ``location``, holds it or lies
        under it, or None. Reads every namespace of the catalog (see the README for the
        cost); stored locations that cannot be resolved are skipped."""
        for path, name, stored in self._lance_locations():
            if (path, name) == exclude or not stored:
                continue
            try:
                other = locations.resolve(tables.plain_location(stored), None, "stored")
            except InvalidInputError:
                continue
            if locations.overlap(location, other):
                return (*path, name)
        return None

    def _lance_locations(self) -> Iterator[tuple[Path, str, str | None]]:
        """(namespace, name, stored location) of every Lance table of the catalog."""
        for path in self._catalog_table_namespaces():
            try:
                found = self._catalog_lance_locations(path)
            except NamespaceNotFoundError:
                continue  # dropped while we walked
            for name, stored in found.items():
                yield path, name, stored

    def _reason_to_keep_data(self, path: Path, name: str, entry: TableEntry) -> str | None:
        """Why a drop must leave the table's data where it is, or None to delete it: its
        location is outside the allowed prefixes, or another Lance table points there."""
        what = f"Table {describe((*path, name))}"
        try:
            location = locations.resolve(tables.plain_location(entry.location), None, what)
        except InvalidInputError as error:
            return f"its location cannot be resolved ({error})"
        if not self._locations.allows(location, lambda: self._catalog_table_prefixes(path)):
            return f"its location is outside the allowed prefixes ({locations.CONFINEMENT_RULE})"
        holder = self._location_holder(location, exclude=(path, name))
        if holder is not None:
            return f"table {describe(holder)} still points at it"
        return None

    def _require_table(self, path: Path, name: str) -> TableEntry:
        entry = self._catalog_get_table(path, name)
        if entry is None:
            raise lance_error(TableNotFoundError, describe((*path, name)))
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

    def _open_dataset(self, location: str) -> LanceDataset:
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
        self, table_id: object, schema: pa.Schema | None = None
    ) -> list[CatalogColumn]:
        """Make the catalog columns of a Lance table match its dataset's current schema.

        Reads never write the catalog, so this is how columns follow a schema change: our
        writers call it (the Spark writer passes the ``schema`` it just committed, so nothing
        is opened again); after another writer (pylance, lancedb) changed a table's schema,
        call it yourself, or run ``lance-metastore sync-columns TABLE``. Without ``schema``
        the table's latest version is opened to read it. Only the columns are written,
        conditionally on the entry just read, and a race lost to a concurrent commit is
        retried (see :meth:`_record_columns`): it never undoes a commit nor fails because of
        one.
        """
        with self._operation("sync columns of table", table_id):
            path, name = self._table_path(table_id)
            entry = self._require_lance_table(path, name)
            if schema is None:
                schema = self._table_schema(path, entry)
            if schema is None:
                raise lance_error(
                    TableNotFoundError,
                    describe((*path, name)),
                    f"has no Lance dataset at {entry.location!r}",
                )
            return self._record_columns(path, name, schema)

    # ----------------------------------------------------------------------------------------
    # Namespace operations
    # ----------------------------------------------------------------------------------------

    def create_namespace(self, request: RequestInput = None) -> CreateNamespaceResponse:
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
                    raise lance_error(
                        NamespaceAlreadyExistsError, describe(path), "(it always exists)"
                    )
                return CreateNamespaceResponse(properties=self._catalog_root_properties())
            properties = self._namespace_properties(path, properties)
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

    def describe_namespace(self, request: RequestInput = None) -> DescribeNamespaceResponse:
        raw_id = _raw_id(request)
        with self._operation("describe namespace", raw_id):
            req = coerce_request(request, DescribeNamespaceRequest)
            path = self._namespace_path(req.id)
            if not path:
                return DescribeNamespaceResponse(properties=self._catalog_root_properties())
            properties = self._catalog_get_namespace(path)
            if properties is None:
                raise lance_error(NamespaceNotFoundError, describe(path))
            return DescribeNamespaceResponse(properties=properties)

    # The *_exists operations answer by raising the spec's not-found error, else nothing.
    def namespace_exists(self, request: RequestInput = None) -> None:  # type: ignore[override]
        raw_id = _raw_id(request)
        with self._operation("check namespace", raw_id):
            req = coerce_request(request, NamespaceExistsRequest)
            path = self._namespace_path(req.id)
            if path and self._catalog_get_namespace(path) is None:
                raise lance_error(NamespaceNotFoundError, describe(path))

    def drop_namespace(self, request: RequestInput = None) -> DropNamespaceResponse:
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
                    "only RESTRICT drops are supported (CASCADE is not); "
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
                raise lance_error(NamespaceNotFoundError, describe(path))
            if behavior == RESTRICT and not empty:
                raise lance_error(
                    NamespaceNotEmptyError, describe(path), "holds tables or namespaces"
                )
            try:
                self._catalog_drop_namespace(path, cascade=behavior == CASCADE)
            except NamespaceNotFoundError:
                if mode != SKIP:
                    raise
            return DropNamespaceResponse()

    def list_namespaces(self, request: RequestInput = None) -> ListNamespacesResponse:
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
                storage_options=self._storage_options_or_none(),
                properties=parameters,
                managed_versioning=self._managed_versioning(entry),
            )

    # Answers as declare_table does (the spec's replacement), not with CreateTableResponse.
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

    def _adopt_latest_version(self, location: str, parameters: dict[str, str]) -> dict[str, str]:
        """Registering a dataset as catalog-managed: the catalog starts at its latest version."""
        version = self._open_dataset(location).version
        local = tables.plain_location(location) or location
        v1_name = os.path.join(local, "_versions", versions.manifest_name(version, "V1"))
        scheme = "V1" if "://" not in local and os.path.exists(v1_name) else "V2"
        record = versions.older_record(local, version, scheme, None)
        commit = versions.Commit(version, record.manifest_path, None, None, scheme)
        return commit.parameters(parameters)

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
            elif has_data and entry.location is not None:
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

    def describe_table_version(self, request: RequestInput = None) -> DescribeTableVersionResponse:
        raw_id = _raw_id(request)
        with self._operation("describe a version of table", raw_id):
            req = coerce_request(request, DescribeTableVersionRequest)
            path, name = self._table_path(req.id)
            entry = self._require_managed_table(path, name)
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


def _target(raw_id: object) -> str:
    if raw_id is None:  # an operation over several objects (a batch) names them itself
        return ""
    try:
        return describe(split_identifier(raw_id))
    except LanceNamespaceError:
        return repr(raw_id)
