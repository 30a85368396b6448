"""Apache Hive Metastore backends (spec: hive3-namespace.md), over Thrift.

- :class:`Hive3Namespace`: catalog -> database -> table (``catalog$database$table``). Against
  a metastore without the catalog API (Hive 2.x, as in the pyspark wheel) it serves the single
  catalog ``hive``, Hive 3's default, and refuses to create others.
- :class:`Hive2Namespace`: database -> table, for the metastores most Spark installations run.

Both share one connection pool per namespace object, filter Lance tables inside the metastore
(``get_table_names_by_filter`` on ``table_type``) instead of fetching every table, and retry
calls that are safe to repeat when a connection drops. Tested on real HMS 2.3, 3.1 and 4.0;
tables are read with ``get_table_req`` (HMS 4 dropped ``get_table``).

A catalog-managed commit is a compare-and-set of the table's ``version`` parameter:

- On HMS 4 it is one call: ``alter_table_req`` whose environment context names the expected
  value (``expected_parameter_key``/``expected_parameter_value``); the metastore refuses the
  alter when the value changed, in the same database transaction as the write.
- Older metastores have no ``alter_table_req`` (Thrift answers "Invalid method"), which is how
  the namespace finds out, once, on its first commit: a metastore that lacks the call can
  never apply the alter unconditionally. There the commit takes the table's exclusive lock
  before it reads the table (lock, get, alter, unlock; ``check_lock`` only while another
  writer holds it).
"""

from __future__ import annotations

import contextlib
import copy
import getpass
import hashlib
import logging
import re
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from lance_namespace.errors import (
    ConcurrentModificationError,
    InternalError,
    InvalidInputError,
    LanceNamespaceError,
    NamespaceAlreadyExistsError,
    NamespaceNotFoundError,
    ServiceUnavailableError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnauthenticatedError,
    UnsupportedOperationError,
)

from ..operations.catalog import CatalogNamespace
from ..rules.config import (
    LOCATION_PROPERTIES,
    MANAGED_BY,
    Property,
    Settings,
    non_empty,
    positive_float,
    positive_int,
)
from ..rules.credentials import VENDOR_PROPERTIES
from ..rules.errors import lance_error
from ..rules.extras import requires_extra
from ..rules.identifiers import NameRules, Path, describe
from ..rules.locations import Location, unqualified
from ..rules.retries import Backoff
from ..rules.schema import CatalogColumn
from ..rules.tables import (
    EXTERNAL_TABLE,
    TableEntry,
    join_location,
)
from .pool import ConnectionPool, parse_uris
from .transport import (
    SECURITY_PROPERTIES,
    AuthenticationFailed,
    KerberosUnavailable,
    security_from_settings,
    security_hint,
)

with requires_extra("hive"):
    from pymetastore.hive_metastore import ttypes
    from thrift.protocol.TProtocol import TProtocolException
    from thrift.Thrift import TApplicationException
    from thrift.transport.TTransport import TTransportException

logger = logging.getLogger("lance_metastore.hive")

DEFAULT_CATALOG = "hive"
# A Lance table is an EXTERNAL_TABLE with table_type=lance; the metastore makes a table
# external exactly when its EXTERNAL parameter is true (ObjectStore.convertToMTable), and the
# filter language has no key for the table type itself.
LANCE_FILTER = (
    'hive_filter_field_params__table_type like "(?i)lance" '
    'and hive_filter_field_params__EXTERNAL like "(?i)true"'
)

# Hive accepts letters, digits and underscores in database and table names (lower-cased).
HIVE_RULES = NameRules(
    max_length=128,
    pattern=re.compile(r"[a-z0-9_]+"),
    pattern_hint="Hive names use letters, digits and underscores only",
)

DB_DESCRIPTION = "database.description"
DB_LOCATION = "database.location-uri"
DB_OWNER = "database.owner"
DB_OWNER_TYPE = "database.owner-type"
CATALOG_DESCRIPTION = "catalog.description"
CATALOG_LOCATION = "catalog.location-uri"

# HMS 4's conditional alter (HiveAlterHandler): the environment context names a table parameter
# and the value it must still have, and the refusal's message says the table was modified.
CONDITION_KEY = "expected_parameter_key"
CONDITION_VALUE = "expected_parameter_value"
CONDITION_REFUSED = "The table has been modified"
# StatsSetupConst.DO_NOT_UPDATE_STATS: the metastore leaves table statistics alone.
NO_STATS = "DO_NOT_UPDATE_STATS"
# The metastore checks one parameter, but a managed table's state is its version and its list
# of deleted version records: every compare-and-set also counts this revision up, and the
# conditional alter expects it (a table without one yet takes the lock path once).
REVISION_KEY = "lance.catalog_revision"

OWNER_TYPES = {"USER": 1, "ROLE": 2, "GROUP": 3}
OWNER_TYPE_NAMES = {number: name for name, number in OWNER_TYPES.items()}

# Thrift's generic layer raises these when the connection itself failed.
TRANSPORT_ERRORS = (TTransportException, TProtocolException, OSError, EOFError)

# Waits before retrying a call whose connection dropped (0.05-0.1 s, then 0.1-0.2 s, ...), and
# between polls of a lock another writer holds (the lock wait is bounded by its own timeout).
RECONNECT_BACKOFF = Backoff(base=0.1, cap=2.0)
LOCK_WAIT_BACKOFF = Backoff(base=0.005, cap=0.25)

PROPERTIES: tuple[Property, ...] = (
    Property("uri", "thrift://host:port of the metastore; a comma list fails over", non_empty),
    Property("client.pool-size", "Connections kept per namespace object", positive_int, default=3),
    Property(
        "client.socket-timeout-sec", "Socket timeout of metastore calls", positive_float, 60.0
    ),
    Property("client.retries", "Retries of calls that are safe to repeat", positive_int, 2),
    Property("client.user", "User name the metastore records as owner", non_empty),
    Property(
        "client.lock-timeout-sec", "Longest wait for a table lock at commit", positive_float, 30.0
    ),
    *SECURITY_PROPERTIES,
    *LOCATION_PROPERTIES,
    *VENDOR_PROPERTIES,
    MANAGED_BY,
)


class _HiveNamespace(CatalogNamespace):
    """Shared mapping of both Hive namespaces; subclasses fix the hierarchy's depth."""

    PROPERTIES = PROPERTIES
    SUPPORTS_CASCADE = True
    NAMESPACE_LOCATION_KEYS = (DB_LOCATION, CATALOG_LOCATION)
    # Namespace levels above a table: 1 for Hive 2 (database), 2 for Hive 3 (catalog, db).
    DEPTH = 1
    LEVELS: tuple[str, ...] = ("database", "table")  # what each part of an id names

    def _configure(self, settings: Settings) -> None:
        # The warehouse of each catalog (its default database's directory), read once.
        self._warehouses: dict[Path, Location | None] = {}
        if not settings["uri"]:
            raise InvalidInputError(f"{type(self).__name__}: property 'uri' is required")
        try:
            self._servers = parse_uris(settings["uri"])
        except ValueError as error:
            raise InvalidInputError(
                f"{type(self).__name__}: invalid value for property 'uri': {error}"
            ) from None
        try:
            self._security = security_from_settings(settings)
        except ValueError as error:
            raise InvalidInputError(f"{type(self).__name__}: {error}") from None
        self._pool_lock = threading.Lock()
        self._pool: ConnectionPool | None = None
        self._user = settings["client.user"] or _login_name()
        self._catalog_api: bool | None = None
        # Whether alter_table_req honours an expected parameter (HMS 4); None: not tried yet.
        self._conditional_alter: bool | None = None
        # The table lock a commit of this thread asked for before its first read, if any.
        self._commit_scope = threading.local()

    def namespace_id(self) -> str:
        uris = ",".join(str(s) for s in self._servers)
        root = f", root: {self._settings['root']!r}" if self._settings["root"] else ""
        return f"{type(self).__name__} {{ uri: {uris!r}{root} }}"

    @property
    def pool(self) -> ConnectionPool:
        pool = self._pool
        if pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ConnectionPool(
                        self._servers,
                        self._settings["client.pool-size"],
                        self._settings["client.socket-timeout-sec"],
                        self._security,
                    )
                    # A namespace dropped without close() still gives its connections back.
                    weakref.finalize(self, self._pool.close)
                pool = self._pool
        return pool

    def close(self) -> None:
        super().close()
        if self._pool is not None:
            self._pool.close()

    # ----------------------------------------------------------------------------------------
    # Calls
    # ----------------------------------------------------------------------------------------

    def _call(self, method: str, *args: Any, idempotent: bool = True) -> Any:
        """Call the metastore; retry a dropped connection when the call is safe to repeat."""
        attempts = 1 + (self._settings["client.retries"] if idempotent else 0)
        for attempt in range(attempts):
            try:
                with self.pool.connection() as connection:
                    return getattr(connection.client, method)(*args)
            except TRANSPORT_ERRORS:
                if attempt + 1 >= attempts:
                    raise
                time.sleep(RECONNECT_BACKOFF.delay(attempt))
                logger.info("retrying %s after a dropped metastore connection", method)
        raise AssertionError("unreachable")

    def _get(self, method: str, *args: Any) -> Any:
        """An idempotent read; None when the metastore says the object does not exist."""
        try:
            return self._call(method, *args)
        except (ttypes.NoSuchObjectException, ttypes.UnknownDBException):
            return None

    def _translate_error(self, error: BaseException, context: str) -> LanceNamespaceError | None:
        if isinstance(error, AuthenticationFailed):
            return UnauthenticatedError(f"Not authenticated to {context}: {error}")
        if isinstance(error, KerberosUnavailable):
            return ServiceUnavailableError(f"Kerberos unavailable to {context}: {error}")
        if isinstance(error, TRANSPORT_ERRORS):
            uris = ",".join(str(s) for s in self._servers)
            hint = security_hint(error, self._security) or (
                "; is it running? check the 'uri' property, or start one with "
                "`lance-metastore hms start`"
            )
            return ServiceUnavailableError(
                f"Hive Metastore {uris} unreachable to {context}: {error}{hint}"
            )
        if isinstance(error, TApplicationException):
            if error.type == TApplicationException.UNKNOWN_METHOD:
                return UnsupportedOperationError(
                    f"This metastore does not support what is needed to {context}: {error}"
                )
            return InternalError(f"Hive Metastore failed to {context}: {error}")
        message = getattr(error, "message", None) or str(error)
        if isinstance(
            error,
            (
                ttypes.InvalidObjectException,
                ttypes.InvalidOperationException,
                ttypes.InvalidInputException,
            ),
        ):
            return InvalidInputError(f"Hive Metastore refused to {context}: {message}")
        if isinstance(error, (ttypes.NoSuchObjectException, ttypes.UnknownDBException)):
            return lance_error(NamespaceNotFoundError, f"while trying to {context}:", message)
        if isinstance(error, ttypes.MetaException):
            return InternalError(f"Hive Metastore failed to {context}: {message}")
        return None

    # ----------------------------------------------------------------------------------------
    # Hierarchy
    # ----------------------------------------------------------------------------------------

    def _normalize_namespace(self, parts: Path) -> Path:
        if len(parts) > self.DEPTH:
            raise InvalidInputError(
                f"Namespace {describe(parts)} is too deep: {type(self).__name__} has "
                f"{self.DEPTH} namespace level(s)"
            )
        levels = self.LEVELS[: len(parts)]
        return tuple(
            HIVE_RULES.normalize(p, what, parts) for p, what in zip(parts, levels, strict=True)
        )

    def _normalize_table(self, parts: Path) -> tuple[Path, str]:
        if len(parts) != self.DEPTH + 1:
            shape = "catalog$database$table" if self.DEPTH == 2 else "database$table"
            raise InvalidInputError(f"Table identifier {describe(parts)} must be {shape}")
        names = tuple(
            HIVE_RULES.normalize(p, what, parts) for p, what in zip(parts, self.LEVELS, strict=True)
        )
        return names[:-1], names[-1]

    def _db_ref(self, path: Path) -> str:
        """The database name as the Thrift API takes it (``@cat#db`` in other catalogs)."""
        return path[-1]

    def _catalog_of(self, path: Path) -> str | None:
        return None

    def _check_catalog(self, catalog: str) -> bool:
        return True

    # ----------------------------------------------------------------------------------------
    # Databases
    # ----------------------------------------------------------------------------------------

    def _database_properties(self, database: Any) -> dict[str, str]:
        properties = dict(database.parameters or {})
        if database.description:
            properties[DB_DESCRIPTION] = database.description
        if database.locationUri:
            properties[DB_LOCATION] = unqualified(database.locationUri)
        if database.ownerName:
            properties[DB_OWNER] = database.ownerName
        if database.ownerType is not None:
            properties[DB_OWNER_TYPE] = OWNER_TYPE_NAMES.get(database.ownerType, "USER")
        return properties

    def _database_object(self, path: Path, properties: Mapping[str, str]) -> Any:
        parameters = dict(properties)
        owner_type = parameters.pop(DB_OWNER_TYPE, "USER").strip().upper()
        if owner_type not in OWNER_TYPES:
            raise InvalidInputError(
                f"Property {DB_OWNER_TYPE}={owner_type!r} must be USER, ROLE or GROUP"
            )
        for key, value in parameters.items():
            if not isinstance(value, str):
                raise InvalidInputError(f"Property {key!r} must be a string")
        return ttypes.Database(
            name=path[-1],
            description=parameters.pop(DB_DESCRIPTION, None),
            locationUri=parameters.pop(DB_LOCATION, None),
            ownerName=parameters.pop(DB_OWNER, self._user),
            ownerType=OWNER_TYPES[owner_type],
            parameters=parameters,
            catalogName=self._catalog_of(path),
        )

    def _get_database_props(self, path: Path) -> dict[str, str] | None:
        database = self._get("get_database", self._db_ref(path))
        return None if database is None else self._database_properties(database)

    def _create_database(self, path: Path, properties: Mapping[str, str]) -> None:
        try:
            self._call("create_database", self._database_object(path, properties), idempotent=False)
        except ttypes.AlreadyExistsException:
            raise lance_error(NamespaceAlreadyExistsError, describe(path)) from None
        except ttypes.NoSuchObjectException:
            raise lance_error(
                NamespaceNotFoundError, f"parent catalog {describe(path[:-1])} of {describe(path)}"
            ) from None
        except ttypes.InvalidObjectException as error:
            # HMS 3 answers a missing catalog with InvalidObjectException("No such catalog").
            if len(path) > 1 and not self._check_catalog(path[0]):
                raise lance_error(
                    NamespaceNotFoundError,
                    f"parent catalog {describe(path[:-1])} of {describe(path)}",
                ) from None
            raise InvalidInputError(
                f"Hive Metastore refused namespace {describe(path)}: {error.message}"
            ) from None

    def _replace_database_properties(self, path: Path, properties: Mapping[str, str]) -> None:
        current = self._get("get_database", self._db_ref(path))
        if current is None:
            raise lance_error(NamespaceNotFoundError, describe(path))
        replacement = self._database_object(path, properties)
        if replacement.locationUri is None:
            replacement.locationUri = current.locationUri  # HMS requires one
        self._call("alter_database", self._db_ref(path), replacement)

    def _database_is_empty(self, path: Path) -> bool | None:
        if self._get("get_database", self._db_ref(path)) is None:
            return None  # HMS 2 lists the tables of a missing database as none at all
        names = self._get("get_all_tables", self._db_ref(path))
        return None if names is None else not names

    def _drop_database(self, path: Path, cascade: bool) -> None:
        try:
            # deleteData=False: dropping a namespace deregisters tables, never deletes data.
            self._call("drop_database", self._db_ref(path), False, cascade, idempotent=False)
        except ttypes.NoSuchObjectException:
            raise lance_error(NamespaceNotFoundError, describe(path)) from None

    def _list_databases(self, catalog: str | None) -> list[str]:
        if catalog is None:
            return list(self._call("get_all_databases"))
        return list(self._call("get_databases", f"@{catalog}#"))

    # ----------------------------------------------------------------------------------------
    # Tables
    # ----------------------------------------------------------------------------------------

    def _catalog_list_lance_tables(self, path: Path) -> list[str]:
        if self._get("get_database", self._db_ref(path)) is None:
            raise lance_error(NamespaceNotFoundError, describe(path))
        try:
            return list(
                self._call("get_table_names_by_filter", self._db_ref(path), LANCE_FILTER, -1)
            )
        except ttypes.UnknownDBException:
            raise lance_error(NamespaceNotFoundError, describe(path)) from None

    def _get_table(self, path: Path, name: str) -> Any:
        """The Thrift table, or None (``get_table_req``: HMS 2.3 to 4; 4 has no ``get_table``)."""
        request = ttypes.GetTableRequest(
            dbName=path[-1], tblName=name, catName=self._catalog_of(path)
        )
        response = self._get("get_table_req", request)
        return None if response is None else response.table

    def _catalog_get_table(self, path: Path, name: str) -> TableEntry | None:
        table = self._get_table(path, name)
        if table is None:
            return None
        descriptor = table.sd
        return TableEntry(
            name=table.tableName,
            location=unqualified(descriptor.location) if descriptor else None,
            parameters=dict(table.parameters or {}),
            table_type=table.tableType,
            has_columns=bool(descriptor and descriptor.cols),
            columns=[
                CatalogColumn(c.name, c.type, c.comment or "")
                for c in (descriptor.cols if descriptor and descriptor.cols else [])
            ],
            raw=table,
        )

    def _table_object(
        self, path: Path, entry: TableEntry, columns: list[CatalogColumn] | None
    ) -> Any:
        parameters = dict(entry.parameters)
        parameters["EXTERNAL"] = "TRUE"  # without it HMS turns the table into a managed one
        return ttypes.Table(
            tableName=entry.name,
            dbName=path[-1],
            owner=self._user,
            createTime=int(time.time()),
            lastAccessTime=0,
            retention=0,
            sd=ttypes.StorageDescriptor(
                cols=[_field(c) for c in columns or []],
                location=entry.location,
                inputFormat="org.apache.hadoop.mapred.FileInputFormat",
                outputFormat="org.apache.hadoop.mapred.FileOutputFormat",
                compressed=False,
                numBuckets=-1,
                serdeInfo=ttypes.SerDeInfo(
                    name=entry.name,
                    serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                    parameters={},
                ),
                bucketCols=[],
                sortCols=[],
                parameters={},
            ),
            partitionKeys=[],
            parameters=parameters,
            tableType=EXTERNAL_TABLE,
            catName=self._catalog_of(path),
        )

    def _catalog_create_table(
        self, path: Path, entry: TableEntry, columns: list[CatalogColumn]
    ) -> None:
        table = self._table_object(path, entry, columns)
        try:
            try:
                self._call("create_table", table, idempotent=False)
            except TRANSPORT_ERRORS:
                self._finish_lost_create(path, entry, table)
        except ttypes.AlreadyExistsException:
            raise lance_error(TableAlreadyExistsError, describe((*path, entry.name))) from None
        except (ttypes.NoSuchObjectException, ttypes.UnknownDBException):
            raise lance_error(
                NamespaceNotFoundError, f"{describe(path)} (of table {entry.name!r})"
            ) from None
        except ttypes.InvalidObjectException as error:
            # HMS 2.x answers a missing database with InvalidObjectException.
            if self._get("get_database", self._db_ref(path)) is None:
                raise lance_error(
                    NamespaceNotFoundError, f"{describe(path)} (of table {entry.name!r})"
                ) from None
            raise InvalidInputError(
                f"Hive Metastore refused table {describe((*path, entry.name))}: {error.message}"
            ) from None

    def _finish_lost_create(self, path: Path, entry: TableEntry, table: Any) -> None:
        """The connection dropped with a create in flight (a metastore died): find out, on a
        fresh connection (maybe to another metastore), whether it took effect; if not, create
        again. A server may still be finishing the lost call, so a create refused as existing
        is read back once more."""
        for _ in range(2):
            current = self._catalog_get_table(path, entry.name)
            if current is not None:
                if current.holds_registration(entry):
                    logger.info("creation of %s took effect", describe((*path, entry.name)))
                    return
                break
            try:
                self._call("create_table", table, idempotent=False)
                return
            except ttypes.AlreadyExistsException:
                continue
        raise ttypes.AlreadyExistsException(f"{entry.name} exists")

    def _catalog_write_table(self, path: Path, expected: TableEntry, updated: TableEntry) -> None:
        """The Thrift table read as ``expected``, with only our fields changed (parameters,
        location, columns: owner, create time, SerDe, storage parameters, other tools'
        parameters stay), written only if the table is unchanged since.

        A catalog-managed table whose entry carries a commit revision is written in one
        conditional ``alter_table_req`` where the metastore has it (HMS 4: applied only while
        the revision is the one read; its condition covers the revision, so a change by a tool
        that does not count it up is not detected there). Otherwise, and on HMS 2/3, under the
        table's exclusive lock: read again, compared whole with what was read, altered. A
        storage-managed table takes no lock (its commits never touch the entry): read again,
        compared whole, altered. An outcome that cannot be known (the connection dropped
        mid-alter, the metastore failed) raises ConcurrentModificationError: the commit
        routine reads the entry back and decides.
        """

        def change(table: Any) -> None:
            table.parameters = {**updated.parameters, "EXTERNAL": "TRUE"}
            table.sd.location = updated.location
            if updated.columns is not None:
                table.sd.cols = [_field(c) for c in updated.columns]

        try:
            if not self._conditional_change(path, expected, change):
                self._alter_unchanged(path, expected, change)
        except (ttypes.MetaException, *TRANSPORT_ERRORS) as error:
            logger.warning(
                "write of %s failed, outcome unknown: %s", describe((*path, expected.name)), error
            )
            raise ConcurrentModificationError(
                f"Write of table {describe((*path, expected.name))} not known to be applied "
                f"({type(error).__name__}); retry it"
            ) from None

    def _conditional_change(
        self, path: Path, expected: TableEntry, change: Callable[[Any], None]
    ) -> bool:
        """``change`` applied to the table read as ``expected`` in HMS 4's conditional
        ``alter_table_req`` (a catalog-managed table with a commit revision); False when this
        path does not apply (then the lock path writes).

        A column list the metastore refuses position by position (a dropped middle column, a
        changed type; see :meth:`_alter_unchanged`) is set in two conditional writes, through
        an empty list, each expecting the revision the one before left."""
        revision = expected.parameters.get(REVISION_KEY, "")
        if (
            not self._managed_versioning(expected)
            or not revision.isdigit()
            or self._conditional_alter is False
        ):
            return False
        table = copy.deepcopy(expected.raw)
        change(table)
        wanted = list(table.sd.cols or [])
        try:
            return self._conditional_write(path, expected.name, table, revision)
        except ttypes.InvalidOperationException:
            if wanted == list(expected.raw.sd.cols or []):
                raise
        table.sd.cols = []
        self._conditional_write(path, expected.name, table, revision)
        table.sd.cols = wanted
        self._conditional_write(path, expected.name, table, str(int(revision) + 1))
        return True

    def _conditional_write(self, path: Path, name: str, table: Any, revision: str) -> bool:
        """One ``alter_table_req`` that HMS 4 applies only while the revision is ``revision``
        (counted up by this write); False when the metastore lacks the call (remembered: the
        lock path from then on)."""
        table.parameters[REVISION_KEY] = str(int(revision) + 1)
        request = ttypes.AlterTableRequest(
            catName=self._catalog_of(path),
            dbName=path[-1],
            tableName=name,
            table=table,
            environmentContext=_no_stats({CONDITION_KEY: REVISION_KEY, CONDITION_VALUE: revision}),
        )
        target = describe((*path, name))
        try:
            self._call("alter_table_req", request, idempotent=False)
        except TApplicationException as error:
            if error.type != TApplicationException.UNKNOWN_METHOD:
                raise
            if self._conditional_alter is None:
                logger.info("metastore has no conditional alter_table_req: commits take locks")
            self._conditional_alter = False
            return False
        except ttypes.MetaException as error:
            self._conditional_alter = True
            if CONDITION_REFUSED in (error.message or ""):
                raise ConcurrentModificationError(f"Table {target} changed concurrently") from None
            raise
        except ttypes.InvalidOperationException:
            if self._get_table(path, name) is None:
                raise lance_error(TableNotFoundError, target) from None
            raise
        self._conditional_alter = True
        return True

    @contextlib.contextmanager
    def _catalog_commit_scope(self, path: Path, name: str) -> Iterator[None]:
        """On a metastore without the conditional alter (HMS 2/3, known after the namespace's
        first commit) a commit asks for the table lock before its first read. Granted at once
        (no other writer holds it), every read of the commit is under the lock, and the write
        is the alter alone: lock, get, alter, unlock, one table read fewer than reading first.
        Still waiting: the commit reads, and its write waits for this lock as
        :meth:`_lock_table` does, reading between polls. Refused: the write asks again."""
        if self._conditional_alter is not False:
            yield
            return
        try:
            response = self._request_lock(path, name)
        except ConcurrentModificationError:
            yield  # the write takes the lock itself (and says why it cannot)
            return
        scoped = _ScopedLock(path[-1], name, response, response.state == ttypes.LockState.ACQUIRED)
        self._commit_scope.lock = scoped
        try:
            yield
        finally:
            self._commit_scope.lock = None
            if not scoped.released:
                self._unlock(scoped.response.lockid, wait=False)

    def _scoped_lock(self, path: Path, name: str) -> _ScopedLock | None:
        """The lock this thread's commit scope holds or waits for on the table, if any."""
        scoped: _ScopedLock | None = getattr(self._commit_scope, "lock", None)
        if scoped is None or scoped.released or (scoped.database, scoped.table) != (path[-1], name):
            return None
        return scoped

    def _exclusive_lock_request(self, database: str, table: str, agent: str) -> Any:
        """A request for one EXCLUSIVE table-level lock outside any transaction (HMS accepts
        it for a table that does not exist, which location claims rely on)."""
        component = ttypes.LockComponent(
            type=ttypes.LockType.EXCLUSIVE,
            level=ttypes.LockLevel.TABLE,
            dbname=database,
            tablename=table,
            operationType=ttypes.DataOperationType.NO_TXN,
            isTransactional=False,
        )
        return ttypes.LockRequest(
            component=[component],
            user=self._user,
            hostname=socket.gethostname(),
            agentInfo=agent,
        )

    def _request_lock(self, path: Path, name: str) -> Any:
        """Ask for the table's EXCLUSIVE lock: the metastore's answer (ACQUIRED or WAITING)."""
        request = self._exclusive_lock_request(path[-1], name, "lance-metastore")
        try:
            return self._call("lock", request, idempotent=False)
        except ttypes.MetaException as error:  # e.g. the backing database timed out a lock
            raise ConcurrentModificationError(
                f"Could not lock table {describe((*path, name))}: {error.message}; retry"
            ) from None

    def _lock_table(self, path: Path, expected: TableEntry) -> int:
        """An EXCLUSIVE table lock, waiting (bounded) while another writer holds one: the one
        the commit scope asked for, else a new one.

        While waiting, the table is read between polls: once another writer changed it, this
        commit has lost, and it says so (14) at once instead of queueing for the lock only to
        find out then. Lance retries sooner, on the new version, within its retry window.
        """
        name = expected.name
        scoped = self._scoped_lock(path, name)
        response = scoped.response if scoped is not None else self._request_lock(path, name)

        def give_up() -> None:
            if scoped is not None:
                scoped.released = True
            self._unlock(response.lockid)

        deadline = time.monotonic() + self._settings["client.lock-timeout-sec"]
        attempt = 0
        while response.state == ttypes.LockState.WAITING:
            if time.monotonic() > deadline:
                give_up()
                raise ConcurrentModificationError(
                    f"Table {describe((*path, name))} stayed locked by another writer for "
                    f"{self._settings['client.lock-timeout-sec']} s"
                )
            time.sleep(LOCK_WAIT_BACKOFF.delay(attempt))
            attempt += 1
            current = self._get_table(path, name)
            if current is None or not _unchanged(expected, current):
                give_up()
                raise ConcurrentModificationError(
                    f"Table {describe((*path, name))} changed concurrently"
                )
            response = self._call("check_lock", ttypes.CheckLockRequest(lockid=response.lockid))
            if scoped is not None:
                scoped.response = response
        if response.state != ttypes.LockState.ACQUIRED:
            give_up()
            raise ConcurrentModificationError(
                f"Could not lock table {describe((*path, name))}: lock state {response.state}"
            )
        lock_id: int = response.lockid
        return lock_id

    @contextlib.contextmanager
    def _location_claim(self, location: Location, refusal: str) -> Iterator[None]:
        """A location when the root has no claim store (a root on ``hdfs``, ``gs``, ``az``):
        an EXCLUSIVE metastore lock named after the canonical location
        (``default.lance_claim_<sha256>``, one name per location whichever database asks),
        taken without waiting. Of racing requests exactly one gets it; the others answer 5.
        A holder that dies stops heartbeating and HMS expires its lock (``hive.txn.timeout``).
        A metastore without the lock service (no DbTxnManager) answers the lock with an
        error: the request then runs unclaimed, as on Glue (logged)."""
        if self._claim_store is not None:
            yield  # the claim store arbitrates
            return
        digest = hashlib.sha256(str(location).encode()).hexdigest()[:40]
        request = self._exclusive_lock_request(
            "default", f"lance_claim_{digest}", "lance-metastore claim"
        )
        try:
            response = self._call("lock", request, idempotent=False)
        except ttypes.MetaException as error:
            logger.warning("location claimed by the catalog check only: %s", error.message)
            yield
            return
        if response.state != ttypes.LockState.ACQUIRED:
            self._unlock(response.lockid)
            raise TableAlreadyExistsError(
                f"{refusal}: another request is placing a table at this location"
            )
        try:
            yield
        finally:
            self._unlock(response.lockid)

    def _unlock(self, lock_id: int, *, wait: bool = True) -> None:
        """Release a table lock. After a write (``wait=False``) the release is sent and the
        caller goes on: nothing it does depends on the reply, which the connection's next
        borrower reads (see :meth:`ConnectionPool.send_only`); a release that cannot be sent
        is made as a plain call, retried on a dropped connection."""
        request = ttypes.UnlockRequest(lockid=lock_id)

        def receive(connection: Any) -> None:
            try:
                connection.client.recv_unlock()
            except ttypes.NoSuchLockException:
                pass  # expired or already released
            except (ttypes.TxnOpenException, TApplicationException) as error:
                logger.warning("could not release metastore lock %s: %s", lock_id, error)

        if not wait:
            try:
                self.pool.send_only(lambda c: c.client.send_unlock(request), receive)
                return
            except Exception:
                pass  # not sent: the plain call below says why if it fails too
        try:
            self._call("unlock", request)
        except ttypes.NoSuchLockException:
            pass  # expired or already released
        except Exception as error:
            logger.warning("could not release metastore lock %s: %s", lock_id, error)

    def _plain_alter(self, path: Path, name: str, table: Any) -> None:
        self._call(
            "alter_table_with_environment_context",
            self._db_ref(path),
            name,
            table,
            _no_stats(),
            idempotent=False,
        )

    def _alter_unchanged(
        self, path: Path, expected: TableEntry, change: Callable[[Any], None]
    ) -> None:
        """Apply ``change`` to the table as the metastore holds it and write it, only if it is
        still the table read as ``expected``: the lock path of every write (and renames).

        A catalog-managed table takes the table's exclusive lock (commits on HMS 2/3 take it
        too), and its alter counts the commit revision up, so that a write based on the entry
        as it was before is refused rather than writing that older entry back (on HMS 4 too,
        whose conditional writes expect the revision). A storage-managed table's writes (its
        column syncs, an undo's fence) take the lock too, so none lands between another's
        compare and alter; they do not count the revision (no commit is recorded), and a
        column sync that changes nothing writes nothing, so its inserts take no lock.

        The metastore refuses a column list whose types change position by position
        (``hive.metastore.disallow.incompatible.col.type.changes``, on by default): such a list
        (a dropped middle column, a changed type) is set in two alters, through an empty list,
        which the check accepts.
        """
        guarded = self._managed_versioning(expected)
        scoped = self._scoped_lock(path, expected.name) if guarded else None
        lock_id = self._lock_table(path, expected)
        target = describe((*path, expected.name))
        try:
            if scoped is not None and scoped.before_read:
                # Locked since before ``expected`` was read: it is the table as it is.
                current = copy.deepcopy(expected.raw)
            else:
                current = self._get_table(path, expected.name)
                if current is None:
                    raise lance_error(TableNotFoundError, target)
                if not _unchanged(expected, current):
                    raise ConcurrentModificationError(f"Table {target} changed concurrently")
            columns_before = list(current.sd.cols or [])
            read_parameters = dict(current.parameters or {})
            change(current)
            if guarded:
                revision = read_parameters.get(REVISION_KEY, "")
                current.parameters = {
                    **(current.parameters or {}),
                    REVISION_KEY: str(int(revision) + 1 if revision.isdigit() else 1),
                }
            wanted = list(current.sd.cols or [])
            try:
                self._plain_alter(path, expected.name, current)
            except ttypes.InvalidOperationException:
                if wanted == columns_before:
                    raise
                current.sd.cols = []
                self._plain_alter(path, expected.name, current)
                current.sd.cols = wanted
                self._plain_alter(path, expected.name, current)
        finally:
            if scoped is None:
                self._unlock(lock_id, wait=False)  # a commit scope's lock: by the scope

    def _catalog_rename_table(
        self, path: Path, entry: TableEntry, new_path: Path, new_name: str
    ) -> None:
        """One ``alter_table`` carrying the new name and database: the metastore renames
        atomically (an external table's location stays). Across catalogs it cannot."""
        if self._catalog_of(path) != self._catalog_of(new_path):
            raise InvalidInputError(
                f"Cannot rename {describe((*path, entry.name))} into another catalog "
                f"({describe(new_path)}): the metastore renames within a catalog"
            )

        def rename(table: Any) -> None:
            table.tableName = new_name
            table.dbName = new_path[-1]

        try:
            # As every write of the entry: HMS 4's conditional write where commits use it
            # (they take no lock there), else under the lock commits take.
            if not self._conditional_change(path, entry, rename):
                self._alter_unchanged(path, entry, rename)
        except (ttypes.InvalidOperationException, ttypes.AlreadyExistsException) as error:
            if self._get_table(new_path, new_name) is not None:
                raise lance_error(
                    TableAlreadyExistsError, describe((*new_path, new_name))
                ) from None
            raise InvalidInputError(
                f"Hive Metastore refused to rename {describe((*path, entry.name))}: "
                f"{getattr(error, 'message', error)}"
            ) from None

    def _catalog_delete_table(self, path: Path, name: str) -> None:
        try:
            self._call("drop_table", self._db_ref(path), name, False, idempotent=False)
        except ttypes.NoSuchObjectException:
            raise lance_error(TableNotFoundError, describe((*path, name))) from None

    def _catalog_entry_locations(self, path: Path) -> dict[str, str | None]:
        """Two calls: the database's table names (every format: a Lance table must not take
        a Parquet table's directory either), then every table of it in one request."""
        names = self._get("get_all_tables", self._db_ref(path))
        if not names:
            return {}
        request = ttypes.GetTablesRequest(
            dbName=path[-1], tblNames=names, catName=self._catalog_of(path)
        )
        found = self._call("get_table_objects_by_name_req", request).tables or []
        return {
            table.tableName: unqualified(table.sd.location) if table.sd else None for table in found
        }

    def _catalog_table_namespaces(self) -> Iterator[Path]:
        """Every database: one ``get_all_databases``."""
        return iter([(name,) for name in self._list_databases(None)])

    def _namespace_layout(self, path: Path) -> tuple[Location | None, Location | None]:
        """Without a configured root, HMS's own layout: a database made without a location
        lies at ``<warehouse>/<database>.db`` (the warehouse: its catalog's ``default``
        database's directory), so that is the directory a confined database owns, the one
        :meth:`_catalog_table_base` answers. With a root, the root's layout. None (no
        default directory) where the catalog has no ``default`` database to find its
        warehouse by."""
        if self._settings["root"] or len(path) != self.DEPTH:
            return super()._namespace_layout(path)
        catalog = path[:-1]
        if catalog not in self._warehouses:
            self._warehouses[catalog] = self._warehouse(catalog)
        warehouse = self._warehouses[catalog]
        if warehouse is None:
            return None, None
        return warehouse, warehouse.child(f"{path[-1]}.db")

    def _warehouse(self, catalog: Path) -> Location | None:
        database = self._get("get_database", self._db_ref((*catalog, "default")))
        text = unqualified(database.locationUri) if database is not None else None
        try:
            return Location.parse(text, None, "warehouse") if text else None
        except InvalidInputError:
            return None

    def _catalog_table_base(self, path: Path) -> str:
        """The database's own location first (as on Glue), then the root.

        HMS gives every database a location; one it chose itself (``<warehouse>/<db>.db``, or
        the warehouse for ``default``) is not the database's own when ``root`` is configured:
        the root is then what the user asked for.
        """
        database = self._get("get_database", self._db_ref(path))
        if database is None:
            raise lance_error(NamespaceNotFoundError, describe(path))
        location: str | None = unqualified(database.locationUri)
        if location and not (self._settings["root"] and _metastore_default(location, path[-1])):
            return location
        return join_location(self.root, *path)


def _metastore_default(location: str, database: str) -> bool:
    """Whether HMS chose this database location itself (its ``<parent>/<db>.db`` layout),
    judged on the one parser's value, never on the text: text it refuses (``?``, ``%``, dot
    segments) is no layout of HMS's, and stays for the rules to judge where it is used."""
    if database == "default":
        return True
    try:
        parsed = Location.parse(location, None, "database location")
    except InvalidInputError:
        return False
    return bool(parsed.segments) and parsed.segments[-1] == f"{database}.db"


class Hive2Namespace(_HiveNamespace):
    """Lance tables in a Hive 2.x metastore: database -> table."""

    DEPTH = 1

    def _catalog_get_namespace(self, path: Path) -> dict[str, str] | None:
        return self._get_database_props(path)

    def _catalog_create_namespace(self, path: Path, properties: Mapping[str, str]) -> None:
        self._create_database(path, properties)

    def _catalog_replace_namespace_properties(
        self, path: Path, properties: Mapping[str, str]
    ) -> None:
        self._replace_database_properties(path, properties)

    def _catalog_namespace_is_empty(self, path: Path) -> bool | None:
        return self._database_is_empty(path)

    def _catalog_drop_namespace(self, path: Path, cascade: bool) -> None:
        self._drop_database(path, cascade)

    def _catalog_list_namespaces(self, path: Path) -> list[str]:
        if path:
            if self._get_database_props(path) is None:
                raise lance_error(NamespaceNotFoundError, describe(path))
            return []
        return self._list_databases(None)


class Hive3Namespace(_HiveNamespace):
    """Lance tables in a Hive 3.x metastore: catalog -> database -> table."""

    DEPTH = 2
    LEVELS = ("catalog", "database", "table")

    # ----------------------------------------------------------------------------------------
    # Catalog support detection
    # ----------------------------------------------------------------------------------------

    def _has_catalog_api(self) -> bool:
        """Whether the server has Hive 3's catalog API (HMS 2.x answers 'Invalid method')."""
        if self._catalog_api is None:
            try:
                self._call("get_catalogs")
                self._catalog_api = True
            except TApplicationException as error:
                if error.type != TApplicationException.UNKNOWN_METHOD:
                    raise
                logger.info("metastore has no catalog API: serving the single catalog 'hive'")
                self._catalog_api = False
        return self._catalog_api

    def _catalog_of(self, path: Path) -> str | None:
        return path[0] if self._has_catalog_api() else None

    def _db_ref(self, path: Path) -> str:
        if self._has_catalog_api():
            return f"@{path[0]}#{path[1]}"
        return path[1]

    def _check_catalog(self, catalog: str) -> bool:
        if self._has_catalog_api():
            return self._get("get_catalog", ttypes.GetCatalogRequest(name=catalog)) is not None
        return catalog == DEFAULT_CATALOG

    def _catalog_properties(self, catalog: str) -> dict[str, str] | None:
        if not self._has_catalog_api():
            return {} if catalog == DEFAULT_CATALOG else None
        response = self._get("get_catalog", ttypes.GetCatalogRequest(name=catalog))
        if response is None:
            return None
        found = response.catalog
        properties = {}
        if found.description:
            properties[CATALOG_DESCRIPTION] = found.description
        if found.locationUri:
            properties[CATALOG_LOCATION] = found.locationUri
        return properties

    def _catalog_object(self, catalog: str, properties: Mapping[str, str]) -> Any:
        unknown = set(properties) - {CATALOG_DESCRIPTION, CATALOG_LOCATION}
        if unknown:
            raise InvalidInputError(
                f"Catalog {catalog!r} keeps only {CATALOG_DESCRIPTION} and "
                f"{CATALOG_LOCATION}; unknown properties: {', '.join(sorted(unknown))}"
            )
        location = properties.get(CATALOG_LOCATION) or join_location(self.root, catalog)
        return ttypes.Catalog(
            name=catalog, description=properties.get(CATALOG_DESCRIPTION), locationUri=location
        )

    def _require_catalog_api(self, what: str) -> None:
        if not self._has_catalog_api():
            raise UnsupportedOperationError(
                f"Cannot {what}: this metastore has no catalog API (Hive 2.x); it serves the "
                f"single catalog {DEFAULT_CATALOG!r}"
            )

    # ----------------------------------------------------------------------------------------
    # Namespace primitives
    # ----------------------------------------------------------------------------------------

    def _catalog_get_namespace(self, path: Path) -> dict[str, str] | None:
        if len(path) == 1:
            return self._catalog_properties(path[0])
        if not self._check_catalog(path[0]):
            return None
        return self._get_database_props(path)

    def _catalog_create_namespace(self, path: Path, properties: Mapping[str, str]) -> None:
        if len(path) == 1:
            self._require_catalog_api(f"create catalog {describe(path)}")
            try:
                self._call(
                    "create_catalog",
                    ttypes.CreateCatalogRequest(self._catalog_object(path[0], properties)),
                    idempotent=False,
                )
            except ttypes.AlreadyExistsException:
                raise lance_error(NamespaceAlreadyExistsError, describe(path)) from None
            return
        if not self._check_catalog(path[0]):
            raise lance_error(
                NamespaceNotFoundError, f"parent catalog {describe(path[:1])} of {describe(path)}"
            )
        self._create_database(path, properties)

    def _catalog_replace_namespace_properties(
        self, path: Path, properties: Mapping[str, str]
    ) -> None:
        if len(path) == 2:
            self._replace_database_properties(path, properties)
            return
        self._require_catalog_api(f"change catalog {describe(path)}")
        self._call(
            "alter_catalog",
            ttypes.AlterCatalogRequest(path[0], self._catalog_object(path[0], properties)),
        )

    def _catalog_namespace_is_empty(self, path: Path) -> bool | None:
        if len(path) == 2:
            return self._database_is_empty(path) if self._check_catalog(path[0]) else None
        if not self._check_catalog(path[0]):
            return None
        databases = self._catalog_databases(path[0])
        # HMS 3 gives every new catalog a database "default" and drops it with the catalog
        # when it is empty: a catalog holding only an empty "default" is an empty catalog.
        if databases == ["default"] and path[0] != DEFAULT_CATALOG and self._has_catalog_api():
            return self._database_is_empty((path[0], "default"))
        return not databases

    def _catalog_databases(self, catalog: str) -> list[str]:
        return self._list_databases(catalog if self._has_catalog_api() else None)

    def _catalog_drop_namespace(self, path: Path, cascade: bool) -> None:
        if len(path) == 2:
            self._drop_database(path, cascade)
            return
        if path[0] == DEFAULT_CATALOG:
            # HMS refuses it, but only after a cascade would have dropped every database.
            raise InvalidInputError(f"Catalog {DEFAULT_CATALOG!r} is the default; never dropped")
        self._require_catalog_api(f"drop catalog {describe(path)}")
        if cascade:
            for database in self._catalog_databases(path[0]):
                self._drop_database((path[0], database), cascade=True)
        try:
            self._call("drop_catalog", ttypes.DropCatalogRequest(path[0]), idempotent=False)
        except ttypes.NoSuchObjectException:
            raise lance_error(NamespaceNotFoundError, describe(path)) from None

    def _catalog_list_namespaces(self, path: Path) -> list[str]:
        if not path:
            if self._has_catalog_api():
                return list(self._call("get_catalogs").names)
            return [DEFAULT_CATALOG]
        if self._catalog_get_namespace(path) is None:
            raise lance_error(NamespaceNotFoundError, describe(path))
        if len(path) == 2:
            return []
        return self._catalog_databases(path[0])

    def _catalog_list_lance_tables(self, path: Path) -> list[str]:
        if len(path) < 2:
            if self._catalog_get_namespace(path) is None:
                raise lance_error(NamespaceNotFoundError, describe(path))
            return []  # catalogs hold databases, not tables
        if not self._check_catalog(path[0]):
            raise lance_error(NamespaceNotFoundError, describe(path))
        return super()._catalog_list_lance_tables(path)

    def _catalog_table_namespaces(self) -> Iterator[Path]:
        """The databases of every catalog: ``get_catalogs``, then one listing per catalog."""
        for catalog in self._catalog_list_namespaces(()):
            yield from ((catalog, name) for name in self._catalog_databases(catalog))

    def _catalog_entry_locations(self, path: Path) -> dict[str, str | None]:
        if len(path) < 2:
            return {}  # catalogs hold databases, not tables
        return super()._catalog_entry_locations(path)

    def _catalog_get_table(self, path: Path, name: str) -> TableEntry | None:
        if not self._has_catalog_api() and path[0] != DEFAULT_CATALOG:
            return None
        return super()._catalog_get_table(path, name)

    def _catalog_create_table(
        self, path: Path, entry: TableEntry, columns: list[CatalogColumn]
    ) -> None:
        if not self._check_catalog(path[0]):
            raise lance_error(NamespaceNotFoundError, describe(path))
        super()._catalog_create_table(path, entry, columns)


@dataclass
class _ScopedLock:
    """A commit scope's table lock: the metastore's latest answer about it, whether it was
    granted before the commit's first read, and whether it is released already."""

    database: str
    table: str
    response: Any
    before_read: bool
    released: bool = False


def _no_stats(properties: Mapping[str, str] | None = None) -> Any:
    """An environment context telling the metastore not to gather statistics on an alter:
    it would list every file under the table's location (Lance's data, manifests) each time,
    a cost that grows with the table, and add numFiles/totalSize to its parameters."""
    return ttypes.EnvironmentContext(properties={NO_STATS: "true", **(properties or {})})


def _field(column: CatalogColumn) -> Any:
    return ttypes.FieldSchema(column.name, column.type, column.comment or None)


def _unchanged(expected: TableEntry, current: Any) -> bool:
    """Whether the Thrift table ``current`` is still the one read as ``expected``: the whole
    object, so a change by any tool (a comment, the owner, a parameter) counts. Every entry
    the backend reads carries its Thrift table."""
    return bool(current == expected.raw)


def _login_name() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "lance-metastore"
