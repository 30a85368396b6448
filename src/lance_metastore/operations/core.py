"""The core every spec operation is written against, once for every catalog backend.

:class:`CatalogCore` owns the rules that the operations share: request shapes, identifier
checks, error codes, Lance-table identification, default locations, paging, opening a table's
dataset, schema-to-columns sync. A backend (Glue, Hive) supplies a handful of primitives that
talk to its catalog; it never re-implements a rule. The operations are composed into
:class:`~lance_metastore.operations.catalog.CatalogNamespace`, which a backend subclasses.
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
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import pyarrow as pa
from lance_namespace import (
    LanceNamespace,
    TableVersion,
)
from lance_namespace.errors import (
    ConcurrentModificationError,
    InvalidInputError,
    InvalidTableStateError,
    LanceNamespaceError,
    NamespaceNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedOperationError,
)

from ..rules import locations, tables, versions
from ..rules.config import LOCATION_PROPERTIES, MANAGED_BY, Property, Settings, parse_properties
from ..rules.credentials import CredentialVendor
from ..rules.errors import lance_error, register_secrets, translate_errors
from ..rules.identifiers import Path, describe, split_identifier
from ..rules.manifests import ManifestFiles
from ..rules.paging import Pager
from ..rules.retries import Backoff
from ..rules.schema import CatalogColumn, catalog_columns
from ..rules.tables import TableEntry
from .datasets import lance_errors

if TYPE_CHECKING:
    from lance import LanceDataset

logger = logging.getLogger("lance_metastore")


# A catalog write that lost a race to a concurrent commit is retried on the entry as it is
# then (column syncs and register overwrites are idempotent), with jittered backoff, for up to
# this long: longer than a burst of commits keeps a table busy, bounded all the same.
CONFLICT_RETRY_SECONDS = 60.0
CONFLICT_BACKOFF = Backoff(base=0.01, cap=0.5)

T = TypeVar("T")


class CatalogCore(LanceNamespace):
    """What every operation module needs: the catalog primitives and the shared helpers.

    A backend (Glue, Hive) implements the ``_catalog_*`` primitives. The operations themselves
    live one module by subject in this package (``namespaces``, ``tables``, ``versions``,
    ``lifecycle``, ``refs``, ``data``, ``indexes``, ``batches``); each is written against this
    class, never against :class:`~lance_metastore.operations.catalog.CatalogNamespace`, which
    composes them. The few operations one subject calls on another are named here as abstract
    methods, so this class is the whole contract an operation module relies on.
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
        self._vendor = CredentialVendor(self._settings)
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

    def __enter__(self) -> CatalogCore:
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
    # Locations: one resolution rule, confinement, one entry per location (see rules/locations.py)
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

    def _answered_storage_options(
        self, location: str, vend_credentials: bool | None
    ) -> dict[str, str] | None:
        """What a describe/declare answer carries: vended credentials where configured."""
        return self._vendor.storage_options(location, self.storage_options, vend_credentials)

    def _open_dataset(self, location: str) -> LanceDataset:
        import lance

        return lance.dataset(location, storage_options=self.storage_options or None)

    def _adopt_latest_version(self, location: str, parameters: dict[str, str]) -> dict[str, str]:
        """``parameters`` moved to the latest version on storage: where a catalog-managed table
        starts when a dataset is registered, and what it adopts of versions committed around it."""
        version = self._open_dataset(location).version
        local = tables.plain_location(location) or location
        v1_name = os.path.join(local, "_versions", versions.manifest_name(version, "V1"))
        scheme = "V1" if "://" not in local and os.path.exists(v1_name) else "V2"
        record = versions.older_record(local, version, scheme, None)
        commit = versions.Commit(version, record.manifest_path, None, None, scheme)
        return commit.parameters(parameters)

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
    # What one operation module calls on another (implemented there, named here)
    # ----------------------------------------------------------------------------------------

    @abstractmethod
    def _has_data(self, path: Path, name: str) -> bool:
        """Whether the table exists and has a committed version (:mod:`.tables`)."""

    @abstractmethod
    def _require_managed_table(self, path: Path, name: str) -> TableEntry:
        """The entry of a catalog-managed Lance table, or the spec's refusal (:mod:`.versions`)."""

    @abstractmethod
    def _finalize(
        self, entry: TableEntry, committed: Mapping[str, str], records: list[TableVersion]
    ) -> list[TableVersion]:
        """The records of versions just committed, their manifests final (:mod:`.versions`)."""

    # ----------------------------------------------------------------------------------------
    # Lance datasets: open a table's dataset the way its owner requires, keep columns true
    # ----------------------------------------------------------------------------------------

    def _lance_table(self, raw_id: object) -> tuple[Path, str, TableEntry]:
        path, name = self._table_path(raw_id)
        return path, name, self._require_lance_table(path, name)

    def _dataset(
        self,
        path: Path,
        entry: TableEntry,
        version: int | str | None = None,
        branch: str | None = None,
    ) -> LanceDataset:
        """The table's dataset (at a version or branch when asked).

        Catalog-managed tables are opened through this namespace, so Lance finds the version
        the catalog names and commits every change through ``create_table_version``.
        """
        import lance

        target = describe((*path, entry.name))
        if self._managed_versioning(entry):
            if branch:
                raise UnsupportedOperationError(
                    f"Table {target} is catalog-managed: branches are not supported, as the "
                    "catalog records one line of versions (declare it managed_by=storage)"
                )
            if versions.current_version(entry.parameters) == 0:
                raise InvalidTableStateError(f"Table {target} is declared and holds no data yet")
            with lance_errors("open", f"table {target}"):
                dataset = lance.dataset(
                    namespace_client=self,
                    table_id=[*path, entry.name],
                    storage_options=self.storage_options or None,
                )
        else:
            location = tables.plain_location(entry.location) or ""
            if "://" not in location and not os.path.isdir(os.path.join(location, "_versions")):
                raise InvalidTableStateError(
                    f"Table {target} is declared and holds no data yet (nothing at {location!r})"
                )
            with lance_errors("open", f"table {target}"):
                dataset = lance.dataset(location, storage_options=self.storage_options or None)
        if version is None and branch is None:
            return dataset
        reference: Any = version if branch is None else (branch, version)
        with lance_errors("open", f"version {reference!r} of table {target}"):
            return dataset.checkout_version(reference)

    def _latest(self, path: Path, name: str) -> LanceDataset:
        """The table's dataset as it is now, read again from the catalog after a change."""
        return self._dataset(path, self._require_lance_table(path, name))

    def _retry_conflicts(self, target: str, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` (one conditional catalog write that reads the entry afresh) until it
        stops losing races to concurrent writes; ConcurrentModificationError only once
        :data:`CONFLICT_RETRY_SECONDS` have passed with every attempt refused."""
        deadline = time.monotonic() + CONFLICT_RETRY_SECONDS
        tries = 0
        while True:
            try:
                return attempt()
            except ConcurrentModificationError:
                if time.monotonic() > deadline:
                    raise ConcurrentModificationError(
                        f"{target} kept changing for {CONFLICT_RETRY_SECONDS:.0f} s: "
                        f"{tries + 1} conditional updates lost to concurrent commits"
                    ) from None
            time.sleep(CONFLICT_BACKOFF.delay(tries))
            tries += 1

    def _record_columns(
        self,
        path: Path,
        name: str,
        schema: pa.Schema,
        before: TableEntry | None = None,
    ) -> list[CatalogColumn]:
        """Make the catalog's columns mirror ``schema`` after a change that may alter it.

        ``before`` is the entry read before the change: when its columns already match, no
        catalog call is made (appends, merges and most updates keep the schema). Otherwise
        only the columns change, conditionally on the entry as read just before (see
        :meth:`_catalog_set_columns`): a concurrent commit is never undone. A lost race is
        retried, with the schema of the table's latest version then, so the columns end up
        neither failed nor stale, whatever committed in between.
        """
        columns = catalog_columns(schema)
        if before is not None and before.columns == columns:
            return columns
        target = f"Table {describe((*path, name))}"
        lost_race = False

        def attempt() -> list[CatalogColumn]:
            nonlocal columns, lost_race
            entry = self._require_lance_table(path, name)
            if lost_race:
                latest = self._table_schema(path, entry)
                columns = catalog_columns(latest) if latest is not None else columns
            if entry.columns != columns:
                try:
                    self._catalog_set_columns(path, entry, columns)
                except ConcurrentModificationError:
                    lost_race = True
                    raise
            return columns

        return self._retry_conflicts(target, attempt)


def _target(raw_id: object) -> str:
    if raw_id is None:  # an operation over several objects (a batch) names them itself
        return ""
    try:
        return describe(split_identifier(raw_id))
    except LanceNamespaceError:
        return repr(raw_id)
