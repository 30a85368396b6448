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
from abc import abstractmethod
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
from lance_namespace import LanceNamespace
from lance_namespace.errors import (
    InvalidInputError,
    InvalidTableStateError,
    LanceNamespaceError,
    NamespaceNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedOperationError,
)

from ..rules import claims, locations, observe, tables, versions
from ..rules.config import LOCATION_PROPERTIES, MANAGED_BY, Property, Settings, parse_properties
from ..rules.credentials import CredentialVendor
from ..rules.errors import lance_error, register_secrets, translate_errors
from ..rules.identifiers import Path, describe, split_identifier
from ..rules.locations import Location
from ..rules.manifests import ManifestFiles
from ..rules.paging import Pager
from ..rules.schema import CatalogColumn
from ..rules.tables import TableEntry
from ..rules.visibility import TABLE
from .datasets import lance_errors

if TYPE_CHECKING:
    from lance import LanceDataset

logger = logging.getLogger("lance_metastore")


# The stores whose Lance files a drop deletes one by one (rules/lance_files.py); on others
# the data is kept and the answer says why.
DELETES_FILES_IN = ("file", "s3")


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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        observe.timed_primitives(cls)  # each backend's catalog round trips report latency

    def __init__(self, **properties: Any) -> None:
        self._settings: Settings = parse_properties(
            type(self).__name__, properties, self.PROPERTIES
        )
        self._pager = Pager()
        # Pinned now: a pickled copy on a Spark executor must not use the executor's cwd.
        self._root = self._settings["root"] or os.getcwd()
        self._locations = locations.LocationPolicy(
            root=_root_location(self._root),
            extra=self._settings["allowed_locations"],
            schemes=self._settings["allowed_schemes"],
            enforced=self._settings["confine_locations"],
        )
        # Where claims on locations are taken (rules/claims.py): the server's own, never the
        # location. Only under a configured root: a store in each process's working directory
        # would arbitrate nothing between servers (Hive then claims through its lock).
        self._claim_store = (
            claims.store_under(self._locations.root) if self._settings["root"] else None
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
    def _catalog_write_table(self, path: Path, expected: TableEntry, updated: TableEntry) -> None:
        """Write ``updated``'s location, parameters and columns (None: keep them) onto the
        catalog object ``expected`` was read from (``expected.raw``), keeping every other field
        of it, and only if the table is unchanged since it was read: Glue ``UpdateTable`` with
        the ``VersionId`` read, HMS 4's conditional alter, the HMS 2/3 table lock.

        A refusal, or an outcome the backend cannot know (a connection lost mid-call), raises
        ConcurrentModificationError; the commit routine (:mod:`.commits`) then reads the entry
        again and decides. TableNotFoundError if the table is gone.
        """

    @contextlib.contextmanager
    def _catalog_commit_scope(self, path: Path, name: str) -> Iterator[None]:
        """Held around one version commit's reads and writes of a managed table's entry (the
        commit routine's steps 1-6). A backend whose conditional write is a lock (HMS 2/3)
        takes it here, before the first read, so that read is already the one under the
        lock; Glue and HMS 4 write conditionally in one call and need nothing."""
        yield

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

    def _catalog_entry_locations(self, path: Path) -> dict[str, str | None]:
        """Name -> stored location of every table entry of a namespace, Lance or not ({} for
        a level that holds no tables; NamespaceNotFoundError when it is missing). Backends
        whose listing returns whole tables override this; here one listing and one read per
        Lance table (the generic listing names Lance tables only)."""
        found: dict[str, str | None] = {}
        for name in self._catalog_list_lance_tables(path):
            entry = self._catalog_get_table(path, name)
            if entry is not None:
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

    def canonical_id(self, parts: Sequence[str], kind: str) -> Path:
        """The id as this catalog acts on it (a table's when ``kind`` is ``"table"``, else a
        namespace's): split on the delimiter as every operation splits its id (``["a$b"]``
        is ``("a", "b")``), names folded as the catalog folds them, with no catalog call.
        Raises the InvalidInputError the operation would for an id the catalog refuses. The
        REST server's grants and access decisions use this form."""
        parts = split_identifier(list(parts))
        if kind != TABLE:
            return self._canonical_namespace(parts)
        if not parts:
            raise InvalidInputError("A table identifier is required")
        path, name = self._canonical_table(parts)
        return (*path, name)

    def _canonical_namespace(self, parts: Path) -> Path:
        """:meth:`_normalize_namespace` without catalog calls (a backend whose check makes
        one overrides this with its name rules alone)."""
        return self._normalize_namespace(parts)

    def _canonical_table(self, parts: Path) -> tuple[Path, str]:
        """:meth:`_normalize_table` without catalog calls."""
        return self._normalize_table(parts)

    def police_listings(self) -> None:
        """Served to callers of unequal rights: a listing outside a caller's
        :func:`~lance_metastore.rules.visibility.seen_by` block shows nothing from now on
        (a thread that lost the request's context fails closed)."""
        self._pager.police()

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

    def _resolve_location(self, location: object, what: str) -> Location:
        """A caller's location as one value; relative ones resolve against the configured
        ``root`` (13 without one, or for text Lance would read differently, or deeper than
        :data:`~lance_metastore.rules.locations.MAX_SEGMENTS`: a claim locks every ancestor)."""
        parsed = Location.parse(location, self._settings["root"], what)
        if len(parsed.segments) > locations.MAX_SEGMENTS:
            raise InvalidInputError(
                f"{what}: location has {len(parsed.segments)} path segments; at most "
                f"{locations.MAX_SEGMENTS} are allowed"
            )
        return parsed

    def _namespace_dir(self, path: Path, *, judged: bool = True) -> Location:
        """The namespace's own directory (its location, or ``<root>/<path>``): where its
        tables go by default and the prefix it owns. NamespaceNotFoundError if missing.

        ``judged`` (every use but overlap searches): when confined, a directory the namespace
        rule refuses (one set before it, Hive's warehouse for its ``default`` database) owns
        nothing, and using it answers 13: fail closed."""
        base = self._catalog_table_base(path)
        what = f"Namespace {describe(path)}"
        location = Location.parse(base, self._root, what)
        if judged and not self._locations.places_namespace(
            location, path, self._namespace_layout(path)
        ):
            raise InvalidInputError(
                f"{what}: its location {str(location)!r} is not one a confined namespace may "
                f"have, so it owns no storage: {locations.NAMESPACE_RULE}"
            )
        return location

    def _location_claim(
        self, location: Location, refusal: str
    ) -> contextlib.AbstractContextManager[None]:
        """The catalog's own claim on a location whose store gets none from
        :mod:`~lance_metastore.rules.claims` (not ``file``, not ``s3``), held like one: 5
        (``TableAlreadyExistsError``, ``refusal``) when another request holds it. Here none
        (Glue has no lock); Hive takes the metastore's lock."""
        return contextlib.nullcontext()

    def _namespace_layout(self, path: Path) -> tuple[Location | None, Location | None]:
        """Where the catalog puts the directories of namespaces made without a location: the
        tree holding them, and ``path``'s default directory in it (None: it has none). Here
        the root and ``<root>/<path>``; Hive without a configured root overrides this with
        HMS's own layout."""
        return self._locations.layout(path)

    def _stored_location(self, path: Path, entry: TableEntry) -> Location:
        """The location of a stored entry as an operation acts on it: parsed by today's rules
        and, when confined, owned by its namespace (13 otherwise). Every path that opens,
        writes, vends or drops a table's data goes through here, never through the text."""
        what = f"Table {describe((*path, entry.name))}"
        location = locations.stored(entry.location, what)
        if self._locations.enforced and not self._locations.owns(
            location, self._namespace_dir(path)
        ):
            raise InvalidInputError(
                f"{what}: its location lies outside what its namespace owns "
                f"({locations.CONFINEMENT_RULE})"
            )
        return location

    @contextlib.contextmanager
    def _placing_table(
        self, path: Path, name: str, location: object, verb: str
    ) -> Generator[str, None, None]:
        """The location of a table to declare, register or create (the caller's
        ``location``, or the default for None), held for the block, in which the caller
        creates the entry.

        Checks run cheapest first, all before any catalog write: the namespace exists (1),
        the text reads one way only (13), the namespace owns the place (13, when confined),
        no catalog entry holds, lies inside or contains it (5, unless ``shared_locations``).
        The last check and the block run under the location's claim (rules/claims.py), so of
        two requests racing for one location exactly one creates its entry.
        """
        what = f"Table {describe((*path, name))}"
        namespace_dir = self._namespace_dir(path)
        if location is None and verb == "register":
            locations.check_text(location, what)  # a register names its dataset
        if location is None:
            resolved = namespace_dir.child(name + tables.LANCE_SUFFIX)
            given = f"{namespace_dir}/{name}{tables.LANCE_SUFFIX}"
        else:
            resolved = self._resolve_location(location, what)
            given = str(location)
        # One ownership check for the default and a caller's location alike: a symbolic link
        # inside the namespace's directory may lead anywhere (the default resolves it too).
        if not self._locations.owns(resolved, namespace_dir):
            raise self._locations.refuse(resolved, what, given)
        if self._settings["shared_locations"]:
            yield str(resolved)
            return
        refusal = f"Cannot {verb} {what}"
        with (
            claims.claimed(
                resolved, self._claim_store, self.storage_options, refusal
            ) as within_lease,
            self._location_claim(resolved, refusal),
        ):
            if self._location_holder(path, name, resolved, namespace_dir) is not None:
                raise TableAlreadyExistsError(
                    f"Cannot {verb} table {describe((*path, name))}: its location already "
                    "exists as, holds or lies inside the location of an existing catalog "
                    "entry; set shared_locations=true to allow it"
                )
            within_lease()
            yield str(resolved)

    @contextlib.contextmanager
    def _placing_namespace(
        self, path: Path, properties: Mapping[str, Any]
    ) -> Generator[dict[str, Any], None, None]:
        """The properties of a namespace to create or overwrite, every location property
        resolved, held for the block in which the caller writes the namespace.

        When confined, the namespace's directory (the location given, or the default
        ``<root>/<path>``) must pass the namespace rule (exactly its default directory, or one
        segment below an allowed prefix apart from the root: 13), and, under the directory's
        claim as for tables, no other namespace's directory or table entry may overlap it
        (13). So namespace directories never nest, whichever is created first.
        """
        checked = dict(properties)
        what = f"Namespace {describe(path)}"
        directory: Location | None = None
        for key in self.NAMESPACE_LOCATION_KEYS:
            if key in checked:
                location = self._resolve_location(checked[key], f"{what}: property {key}")
                checked[key] = str(location)
                directory = location
        if not self._locations.enforced:
            yield checked
            return
        layout = self._namespace_layout(path)
        if directory is None:
            if layout[1] is None:
                raise InvalidInputError(
                    f"{what}: the namespace has no default directory (the root cannot be read "
                    "as a location, or the catalog lays out no directory for it): give it a "
                    "location under an allowed_locations prefix, or configure the root property"
                )
            directory = layout[1]
        if not self._locations.places_namespace(directory, path, layout):
            rule = (
                locations.RESERVED_RULE
                if self._locations.reserved(directory)
                else locations.NAMESPACE_RULE
            )
            raise InvalidInputError(f"{what}: location {str(directory)!r} is not allowed: {rule}")
        refusal = f"Cannot create {what}"
        with (
            claims.claimed(
                directory, self._claim_store, self.storage_options, refusal
            ) as within_lease,
            self._location_claim(directory, refusal),
        ):
            if self._namespace_location_taken(path, directory, layout[0]):
                raise InvalidInputError(
                    f"{what}: its directory {str(directory)!r} overlaps an existing catalog "
                    "entry or another namespace's directory"
                )
            within_lease()
            yield checked

    def _namespace_location_taken(
        self, path: Path, location: Location, tree: Location | None
    ) -> bool:
        """Whether another namespace's directory or any table entry overlaps ``location``
        (a catalog-wide search: namespaces are created rarely). A namespace whose directory
        is the ``tree`` itself does not count: that is the catalog's own layout (HMS's
        warehouse is its ``default`` database's directory), which owns nothing when
        confined."""
        for other in self._catalog_table_namespaces():
            if other == path:
                continue
            with contextlib.suppress(LanceNamespaceError):
                directory = self._namespace_dir(other, judged=False)
                if (tree is None or not directory.same(tree)) and directory.overlaps(location):
                    return True
        return any(
            _overlaps(location, stored)
            for other, _, stored in self._entry_locations(None, path)
            if other != path
        )

    def _location_holder(
        self,
        path: Path,
        name: str,
        location: Location,
        namespace_dir: Location,
        everywhere: bool = False,
    ) -> tuple[str, ...] | None:
        """Another catalog entry (table of any format, or namespace directory) whose location
        is ``location``, holds it or lies inside it, or None.

        Where to look (see docs/locations.md): confined, a location strictly inside the
        namespace's own directory can only meet the entries of that namespace, when no
        ``allowed_locations`` prefix overlaps the directory (another namespace's tables may lie
        there; a confined rename never moves a table out of its directory). Unconfined, a
        caller may have put or renamed a table anywhere, so every namespace is searched
        (``everywhere``: always, for a drop). Stored text today's rules refuse is compared
        as Lance reads it.
        """
        own_only = (
            not everywhere
            and location.is_under(namespace_dir, strictly=True)
            and not self._locations.extra_overlaps(namespace_dir)
            and self._locations.enforced
        )
        for other_path, other_name, stored in self._entry_locations(
            path if own_only else None, path
        ):
            if (other_path, other_name) != (path, name) and _overlaps(location, stored):
                return (*other_path, other_name)
        if not own_only:
            # A location holding another namespace's directory would take every table made
            # there later. (One inside another namespace's directory is Hive's own layout:
            # databases lie in the warehouse, the default database's directory; the entries
            # found above are what may not be overlapped there.)
            for other in self._catalog_table_namespaces():
                if other == path:
                    continue
                with contextlib.suppress(LanceNamespaceError):
                    if self._namespace_dir(other, judged=False).is_under(location):
                        return other
        return None

    def _entry_locations(
        self, only: Path | None, current: Path
    ) -> Iterator[tuple[Path, str, str | None]]:
        """(namespace, name, stored location) of every table entry, Lance or not, of the
        namespace ``only`` (None: of every namespace of the catalog)."""
        namespaces = [only] if only is not None else self._catalog_table_namespaces()
        for path in namespaces:
            try:
                found = self._catalog_entry_locations(path)
            except NamespaceNotFoundError:
                if path == current:
                    raise
                continue  # dropped while we walked
            for name, stored in found.items():
                yield path, name, stored

    def _check_moves_namespace(self, path: Path, name: str, entry: TableEntry) -> None:
        """13 unless the table may be renamed into another namespace: confined, one whose
        location lies in its namespace's directory may not, on any catalog. Its data would
        stay where it is, no longer under its namespace, and the cheap overlap search (which
        trusts that a namespace's directory holds only its own tables) would let a declare at
        the default location of the old name share, and its drop delete, the data. Move
        the data and register it instead; a table under an ``allowed_locations`` prefix
        moves freely. Unconfined, every overlap search covers the whole catalog, so a
        rename is free."""
        if not self._locations.enforced:
            return
        what = f"Table {describe((*path, name))}"
        try:
            location = locations.stored(entry.location, what)
            namespace_dir = self._namespace_dir(path, judged=False)
        except InvalidInputError:
            raise InvalidInputError(
                f"Cannot rename {what} into another namespace: its location cannot be judged "
                "by today's rules"
            ) from None
        if location.overlaps(namespace_dir):
            raise InvalidInputError(
                f"Cannot rename {what} into another namespace: its data lies in its "
                "namespace's directory, which holds only that namespace's tables; copy the "
                "data under the new namespace and register it there"
            )

    def _reason_to_keep_data(self, path: Path, name: str, entry: TableEntry) -> str | None:
        """Why a drop must leave the table's data where it is, or None to delete Lance's files
        there: its location fails today's rules, lies outside what the namespace owns, lies in
        a store whose files we do not delete one by one, or another catalog entry of any
        namespace points at, into or around it (a search of the whole catalog: a drop must
        find an entry made before today's rules, or renamed, wherever it is)."""
        what = f"Table {describe((*path, name))}"
        try:
            location = locations.stored(entry.location, what)
        except InvalidInputError as error:
            return f"its location cannot be resolved ({error})"
        if location.scheme not in DELETES_FILES_IN:
            return (
                f"lance-metastore deletes Lance's files only on {', '.join(DELETES_FILES_IN)}; "
                "delete them with the store's own tools"
            )
        try:
            namespace_dir = self._namespace_dir(path, judged=self._locations.enforced)
        except InvalidInputError as error:
            return f"its namespace's directory cannot be resolved ({error})"
        if not self._locations.owns(location, namespace_dir):
            return f"its location is outside the allowed prefixes ({locations.CONFINEMENT_RULE})"
        holder = self._location_holder(path, name, location, namespace_dir, everywhere=True)
        if holder is not None:
            return "another catalog entry still points at it"
        return None

    def _require_table(self, path: Path, name: str) -> TableEntry:
        entry = self._catalog_get_table(path, name)
        if entry is None:
            raise lance_error(TableNotFoundError, describe((*path, name)))
        if tables.fenced(entry.parameters):  # being removed (a failed create's undo)
            raise lance_error(TableNotFoundError, describe((*path, name)), "(being removed)")
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
        self, location: str, vend_credentials: bool | None, path: Path | None = None
    ) -> dict[str, str] | None:
        """What a describe/declare answer carries: vended credentials where configured.

        The vendor judges the stored location by today's rules; for a stored entry (``path``
        given) a confined namespace also re-checks that the namespace owns the place (an
        entry made before confinement gets no credentials)."""
        if (
            path is not None
            and self._vendor.enabled
            and vend_credentials is not False
            and self._locations.enforced
        ):
            from ..rules.credentials import vended_location

            where = vended_location(location)
            if not self._locations.owns(where, self._namespace_dir(path)):
                raise InvalidInputError(
                    "Cannot vend credentials for this table: its location lies outside what "
                    f"its namespace owns ({locations.CONFINEMENT_RULE})"
                )
        return self._vendor.storage_options(location, self.storage_options, vend_credentials)

    def _open_dataset(self, location: str) -> LanceDataset:
        """The dataset at ``location`` (text the catalog holds or a placement yielded), opened
        at its canonical form: text today's rules refuse is never handed to Lance (13)."""
        import lance

        where = locations.stored(location, "Table")
        return lance.dataset(str(where), storage_options=self.storage_options or None)

    def _adopt_latest_version(self, location: str, parameters: dict[str, str]) -> dict[str, str]:
        """``parameters`` moved to the latest version on storage: where a catalog-managed table
        starts when a dataset is registered, and what it adopts of versions committed around it."""
        version = self._open_dataset(location).version
        local = str(locations.stored(location, "Table"))
        # The naming scheme as storage shows it (local disk or object store alike).
        scheme = "V1" if self._manifests.holds_final(local, version, "V1") else "V2"
        record = versions.older_record(local, version, scheme, None)
        commit = versions.Commit(version, record.manifest_path, None, None, scheme)
        return commit.parameters(parameters)

    def _dataset_schema(self, location: str | None) -> pa.Schema | None:
        """The Lance schema at ``location``, or None when no dataset is there yet."""
        if not location:
            return None
        where = locations.stored(location, "Table")  # 13 for text today's rules refuse
        if where.local and not os.path.isdir(os.path.join(where.key, "_versions")):
            return None  # cheap local check before asking Lance
        try:
            return self._open_dataset(str(where)).schema
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
        """The entry of a catalog-managed Lance table, or the spec's refusal (:mod:`.commits`)."""

    @abstractmethod
    def _record_columns(
        self, path: Path, name: str, schema: pa.Schema, before: TableEntry | None = None
    ) -> list[CatalogColumn]:
        """Make the catalog's columns mirror ``schema``, through the commit routine
        (:mod:`.commits`)."""

    @abstractmethod
    def _remove_untouched(
        self, path: Path, name: str, declared: Mapping[str, str] | None = None
    ) -> str:
        """Remove a declared entry only while untouched (``declared``: the parameters it was
        declared with, when known), fenced against the commit routine; "removed", "kept" or
        "absent" (:mod:`.commits`)."""

    @abstractmethod
    def _reregister(
        self, path: Path, entry: TableEntry, columns: list[CatalogColumn]
    ) -> dict[str, str]:
        """Register overwrite of an existing entry, through the commit routine (:mod:`.commits`)."""

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
        where = self._stored_location(path, entry)  # today's rules, ownership when confined
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
            if where.local and not os.path.isdir(os.path.join(where.key, "_versions")):
                raise InvalidTableStateError(
                    f"Table {target} is declared and holds no data yet (nothing at {str(where)!r})"
                )
            with lance_errors("open", f"table {target}"):
                dataset = lance.dataset(str(where), storage_options=self.storage_options or None)
        if version is None and branch is None:
            return dataset
        reference: Any = version if branch is None else (branch, version)
        with lance_errors("open", f"version {reference!r} of table {target}"):
            return dataset.checkout_version(reference)

    def _latest(self, path: Path, name: str) -> LanceDataset:
        """The table's dataset as it is now, read again from the catalog after a change."""
        return self._dataset(path, self._require_lance_table(path, name))


def _target(raw_id: object) -> str:
    if raw_id is None:  # an operation over several objects (a batch) names them itself
        return ""
    try:
        return describe(split_identifier(raw_id))
    except LanceNamespaceError:
        return repr(raw_id)


def _overlaps(location: Location, stored: str | None) -> bool:
    """Whether a stored location (text the catalog holds) overlaps ``location``. Text that
    today's rules refuse (an entry made before them) is read leniently, as Lance would open
    it: query and fragment dropped, percent-decoded, dot segments resolved. Text no reading
    makes a place of (``%00``) overlaps everything: a check refuses (5/13, naming nothing) or a
    drop keeps the data rather than guess where such an entry's data lies."""
    if not stored:
        return False
    try:
        return location.overlaps(locations.stored(stored, "stored"))
    except InvalidInputError:
        pass
    try:
        return location.overlaps(locations.lenient(stored))
    except InvalidInputError:
        return True


def _root_location(root: str) -> Location | None:
    """The root as a prefix; None (it allows nothing) when today's rules refuse its text (an
    unconfigured root is the working directory, whatever its name)."""
    try:
        return Location.parse(root, None, "root")
    except InvalidInputError:
        return None
