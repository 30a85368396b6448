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
  (lock, get, alter, unlock; ``check_lock`` only while another writer holds it).
"""

from __future__ import annotations

import getpass
import logging
import re
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
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
from ..rules import versions
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
from ..rules.retries import Backoff
from ..rules.schema import CatalogColumn
from ..rules.tables import EXTERNAL_TABLE, TableEntry, join_location, plain_location
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
MAX_TABLE_ORIGINS = 4096
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
        # Owner and creation time of tables as last read: the one-call commit writes the whole
        # table without reading it again, and must not change either (bounded, see below).
        self._table_origins: dict[tuple[Path, str], tuple[str | None, int | None]] = {}

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
            properties[DB_LOCATION] = plain_location(database.locationUri)
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
        if len(self._table_origins) >= MAX_TABLE_ORIGINS:
            self._table_origins.clear()
        self._table_origins[path, name] = (table.owner, table.createTime)
        descriptor = table.sd
        return TableEntry(
            name=table.tableName,
            location=plain_location(descriptor.location) if descriptor else None,
            parameters=dict(table.parameters or {}),
            table_type=table.tableType,
            has_columns=bool(descriptor and descriptor.cols),
            columns=[
                CatalogColumn(c.name, c.type, c.comment or "")
                for c in (descriptor.cols if descriptor and descriptor.cols else [])
            ],
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

    def _catalog_replace_table(
        self,
        path: Path,
        expected: TableEntry,
        replacement: TableEntry,
        columns: list[CatalogColumn] | None,
    ) -> None:
        """Location and parameters of ``replacement`` (and ``columns`` when given) on the
        table read as ``expected``; owner, creation time and the commit revision stay."""

        def replace(table: Any) -> None:
            parameters = {**replacement.parameters, "EXTERNAL": "TRUE"}
            revision = (table.parameters or {}).get(REVISION_KEY)
            if revision is not None:
                parameters[REVISION_KEY] = revision  # counted up by the alter that follows
            table.parameters = parameters
            table.sd.location = replacement.location
            if columns is not None:
                table.sd.cols = [_field(c) for c in columns]

        self._alter_unchanged(path, expected, replace)

    def _catalog_compare_and_set(
        self, path: Path, expected: TableEntry, parameters: dict[str, str]
    ) -> None:
        """Set ``parameters`` if the table still has the expected version: in one conditional
        alter where the metastore has it (HMS 4), else under its exclusive table lock."""
        revision = expected.parameters.get(REVISION_KEY, "")
        parameters = {
            **parameters,
            REVISION_KEY: str(int(revision) + 1 if revision.isdigit() else 1),
        }
        if (
            revision
            and self._conditional_alter is not False
            and self._conditional_compare_and_set(path, expected, parameters)
        ):
            return
        lock_id = self._lock_table(path, expected)
        try:
            current = self._get_table(path, expected.name)
            if current is None:
                raise lance_error(TableNotFoundError, describe((*path, expected.name)))
            if _changed(expected, current):
                raise ConcurrentModificationError(
                    f"Table {describe((*path, expected.name))} changed concurrently"
                )
            current.parameters = {**parameters, "EXTERNAL": "TRUE"}
            try:
                self._call(
                    "alter_table_with_environment_context",
                    self._db_ref(path),
                    expected.name,
                    current,
                    _no_stats(),
                    idempotent=False,
                )
            except (ttypes.MetaException, *TRANSPORT_ERRORS) as error:
                # Under our lock nobody else changes the table: read back whether it applied.
                # An unknown outcome is never reported as a conflict (Lance would commit the
                # same data again): if the read-back fails too, its error (17) goes up.
                if not self._applied(path, expected.name, parameters):
                    logger.warning("commit to %s not applied: %s", describe(path), error)
                    raise ConcurrentModificationError(
                        f"Commit to table {describe((*path, expected.name))} was not applied "
                        f"({type(error).__name__}); retry it"
                    ) from None
        finally:
            self._unlock(lock_id)

    def _conditional_compare_and_set(
        self, path: Path, expected: TableEntry, parameters: dict[str, str]
    ) -> bool:
        """One ``alter_table_req`` that HMS 4 applies only if ``version`` is still the expected
        one; False when the metastore lacks the call (then remembered: the lock path)."""
        table = self._table_object(path, expected, expected.columns)
        table.parameters = {**parameters, "EXTERNAL": "TRUE"}
        owner, created = self._table_origins.get((path, expected.name), (None, None))
        table.owner = owner or table.owner
        table.createTime = created if created is not None else table.createTime
        context = _no_stats(
            {CONDITION_KEY: REVISION_KEY, CONDITION_VALUE: expected.parameters[REVISION_KEY]}
        )
        request = ttypes.AlterTableRequest(
            catName=self._catalog_of(path),
            dbName=path[-1],
            tableName=expected.name,
            table=table,
            environmentContext=context,
        )
        name = describe((*path, expected.name))
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
                raise ConcurrentModificationError(f"Table {name} changed concurrently") from None
            raise
        except ttypes.InvalidOperationException:
            if self._get_table(path, expected.name) is None:
                raise lance_error(TableNotFoundError, name) from None
            raise
        except TRANSPORT_ERRORS as error:
            # The outcome is unknown: read back whether this very commit took effect.
            if not self._applied(path, expected.name, parameters):
                logger.warning("commit to %s not applied: %s", name, error)
                raise ConcurrentModificationError(
                    f"Commit to table {name} was not applied ({type(error).__name__}); retry it"
                ) from None
        self._conditional_alter = True
        return True

    def _applied(self, path: Path, name: str, parameters: dict[str, str]) -> bool:
        """Whether a failed alter took effect; a read-back that fails too propagates (17)."""
        table = self._get_table(path, name)
        now = dict(table.parameters or {}) if table is not None else {}
        return versions.already_applied(now, parameters)

    def _lock_table(self, path: Path, expected: TableEntry) -> int:
        """An EXCLUSIVE table lock, waiting (bounded) while another writer holds one.

        While waiting, the table is read between polls: once another writer changed it, this
        commit has lost, and it says so (14) at once instead of queueing for the lock only to
        find out then. Lance retries sooner, on the new version, within its retry window.
        """
        name = expected.name
        component = ttypes.LockComponent(
            type=ttypes.LockType.EXCLUSIVE,
            level=ttypes.LockLevel.TABLE,
            dbname=path[-1],
            tablename=name,
            operationType=ttypes.DataOperationType.NO_TXN,
            isTransactional=False,
        )
        request = ttypes.LockRequest(
            component=[component],
            user=self._user,
            hostname=socket.gethostname(),
            agentInfo="lance-metastore",
        )
        try:
            response = self._call("lock", request, idempotent=False)
        except ttypes.MetaException as error:  # e.g. the backing database timed out a lock
            raise ConcurrentModificationError(
                f"Could not lock table {describe((*path, name))}: {error.message}; retry"
            ) from None
        deadline = time.monotonic() + self._settings["client.lock-timeout-sec"]
        attempt = 0
        while response.state == ttypes.LockState.WAITING:
            if time.monotonic() > deadline:
                self._unlock(response.lockid)
                raise ConcurrentModificationError(
                    f"Table {describe((*path, name))} stayed locked by another writer for "
                    f"{self._settings['client.lock-timeout-sec']} s"
                )
            time.sleep(LOCK_WAIT_BACKOFF.delay(attempt))
            attempt += 1
            current = self._get_table(path, name)
            if current is None or _changed(expected, current):
                self._unlock(response.lockid)
                raise ConcurrentModificationError(
                    f"Table {describe((*path, name))} changed concurrently"
                )
            response = self._call("check_lock", ttypes.CheckLockRequest(lockid=response.lockid))
        if response.state != ttypes.LockState.ACQUIRED:
            self._unlock(response.lockid)
            raise ConcurrentModificationError(
                f"Could not lock table {describe((*path, name))}: lock state {response.state}"
            )
        lock_id: int = response.lockid
        return lock_id

    def _unlock(self, lock_id: int) -> None:
        try:
            self._call("unlock", ttypes.UnlockRequest(lockid=lock_id))
        except ttypes.NoSuchLockException:
            pass  # expired or already released
        except Exception as error:
            logger.warning("could not release metastore lock %s: %s", lock_id, error)

    def _lock_if_managed(self, path: Path, entry: TableEntry) -> int | None:
        """The table's exclusive lock for a change of a catalog-managed table, so that a
        concurrent commit (also under the lock) is neither undone nor lost.

        Released with :meth:`_unlock` in a ``finally`` (not a context manager: Thrift's
        exceptions are immutable, and contextlib's re-raise would fail on them).
        """
        return self._lock_table(path, entry) if self._managed_versioning(entry) else None

    def _alter_managed(self, path: Path, name: str, table: Any, guarded: bool) -> None:
        """Alter a table that ``table`` was read from (statistics left alone).

        A catalog-managed table's alter (``guarded``: its lock is held) counts the commit
        revision up, so that a commit based on the entry as it was before is refused (14)
        rather than writing that older entry back. On HMS 4, whose commits take no lock, the
        alter is also conditional on the revision read, so that it never undoes a commit that
        landed in between (14 instead)."""
        if not guarded:
            self._plain_alter(path, name, table)
            return
        read_parameters = dict(table.parameters or {})
        revision = read_parameters.get(REVISION_KEY, "")
        table.parameters = {
            **read_parameters,
            REVISION_KEY: str(int(revision) + 1 if revision.isdigit() else 1),
        }
        try:
            if revision.isdigit() and self._conditional_alter is not False:
                self._conditional_alter_req(path, name, table, revision)
            else:
                self._plain_alter(path, name, table)
        except BaseException:
            table.parameters = read_parameters  # not applied: a next alter expects the same
            raise

    def _plain_alter(self, path: Path, name: str, table: Any) -> None:
        self._call(
            "alter_table_with_environment_context",
            self._db_ref(path),
            name,
            table,
            _no_stats(),
            idempotent=False,
        )

    def _conditional_alter_req(self, path: Path, name: str, table: Any, revision: str) -> None:
        """HMS 4's ``alter_table_req`` applied only while the revision is ``revision``; on a
        metastore without the call, the plain alter under the lock the caller holds."""
        request = ttypes.AlterTableRequest(
            catName=self._catalog_of(path),
            dbName=path[-1],
            tableName=name,
            table=table,
            environmentContext=_no_stats({CONDITION_KEY: REVISION_KEY, CONDITION_VALUE: revision}),
        )
        try:
            self._call("alter_table_req", request, idempotent=False)
        except TApplicationException as error:
            if error.type != TApplicationException.UNKNOWN_METHOD:
                raise
            self._conditional_alter = False  # an older metastore: the lock held suffices
            self._plain_alter(path, name, table)
        except ttypes.MetaException as error:
            if CONDITION_REFUSED in (error.message or ""):
                raise ConcurrentModificationError(
                    f"Table {describe((*path, name))} changed concurrently"
                ) from None
            raise

    def _alter_unchanged(
        self, path: Path, expected: TableEntry, change: Callable[[Any], None]
    ) -> None:
        """Apply ``change`` to the table read as ``expected`` and write it, only if its commit
        state has not moved since: every read-modify-write of an entry goes through here.

        A catalog-managed table takes the commit's own conditional path: the exclusive table
        lock (HMS 2/3 commits take it too), the table read again under it and compared with
        ``expected`` (ConcurrentModificationError if a commit landed since), and on HMS 4,
        whose commits take no lock, an alter conditional on the revision read (see
        :meth:`_alter_managed`). A storage-managed table has no commit in the catalog to
        lose: the change is applied to the entry as read just now, and to nothing else.

        The metastore refuses a column list whose types change position by position
        (``hive.metastore.disallow.incompatible.col.type.changes``, on by default): such a list
        (a dropped middle column, a changed type) is set in two alters, through an empty list,
        which the check accepts.
        """
        lock_id = self._lock_if_managed(path, expected)
        guarded = lock_id is not None
        target = describe((*path, expected.name))
        try:
            current = self._get_table(path, expected.name)
            if current is None:
                raise lance_error(TableNotFoundError, target)
            if _changed(expected, current):
                raise ConcurrentModificationError(f"Table {target} changed concurrently")
            columns_before = list(current.sd.cols or [])
            change(current)
            wanted = list(current.sd.cols or [])
            try:
                self._alter_managed(path, expected.name, current, guarded)
            except ttypes.InvalidOperationException:
                if wanted == columns_before:
                    raise
                current.sd.cols = []
                self._alter_managed(path, expected.name, current, guarded)
                current.sd.cols = wanted
                self._alter_managed(path, expected.name, current, guarded)
        finally:
            if lock_id is not None:
                self._unlock(lock_id)

    def _catalog_set_columns(
        self, path: Path, entry: TableEntry, columns: list[CatalogColumn]
    ) -> None:
        """Columns only, on the entry as the catalog holds it (see :meth:`_alter_unchanged`)."""

        def set_columns(table: Any) -> None:
            table.sd.cols = [_field(c) for c in columns]

        self._alter_unchanged(path, entry, set_columns)

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

    def _catalog_lance_locations(self, path: Path) -> dict[str, str | None]:
        """Two calls: the filtered listing, then every table of it in one request."""
        try:
            names = list(
                self._call("get_table_names_by_filter", self._db_ref(path), LANCE_FILTER, -1)
            )
        except ttypes.UnknownDBException:
            return {}
        if not names:
            return {}
        request = ttypes.GetTablesRequest(
            dbName=path[-1], tblNames=names, catName=self._catalog_of(path)
        )
        found = self._call("get_table_objects_by_name_req", request).tables or []
        return {
            table.tableName: plain_location(table.sd.location) if table.sd else None
            for table in found
        }

    def _catalog_table_namespaces(self) -> Iterator[Path]:
        """Every database: one ``get_all_databases``."""
        return iter([(name,) for name in self._list_databases(None)])

    def _catalog_table_prefixes(self, path: Path) -> list[str | None]:
        database = self._get("get_database", self._db_ref(path))
        own = database.locationUri if database is not None else None
        return [own, *self._warehouse_locations(path[:-1])]

    def _catalog_namespace_prefixes(self, path: Path) -> list[str | None]:
        return self._warehouse_locations(path[:-1])

    def _warehouse_locations(self, parent: Path) -> list[str | None]:
        """The metastore's warehouse: the location of its database ``default``."""
        default = self._get("get_database", self._db_ref((*parent, "default")))
        return [default.locationUri if default is not None else None]

    def _catalog_table_base(self, path: Path) -> str:
        """The database's own location first (as on Glue), then the root.

        HMS gives every database a location; one it chose itself (``<warehouse>/<db>.db``, or
        the warehouse for ``default``) is not the database's own when ``root`` is configured:
        the root is then what the user asked for.
        """
        database = self._get("get_database", self._db_ref(path))
        location: str | None = (
            plain_location(database.locationUri) if database is not None else None
        )
        if location and not (self._settings["root"] and _metastore_default(location, path[-1])):
            return location
        return join_location(self.root, *path)


def _metastore_default(location: str, database: str) -> bool:
    """Whether HMS chose this database location itself (its ``<parent>/<db>.db`` layout)."""
    return database == "default" or location.rstrip("/").endswith(f"/{database}.db")


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

    def _catalog_lance_locations(self, path: Path) -> dict[str, str | None]:
        if len(path) < 2:
            return {}  # catalogs hold databases, not tables
        return super()._catalog_lance_locations(path)

    def _warehouse_locations(self, parent: Path) -> list[str | None]:
        """The default catalog's warehouse, and the location of the catalog ``parent`` names
        (with its own database ``default``)."""
        found = super()._warehouse_locations((DEFAULT_CATALOG,))
        if parent and parent[0] != DEFAULT_CATALOG and self._has_catalog_api():
            found.extend(super()._warehouse_locations(parent[:1]))
            found.append((self._catalog_properties(parent[0]) or {}).get(CATALOG_LOCATION))
        return found

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


def _no_stats(properties: Mapping[str, str] | None = None) -> Any:
    """An environment context telling the metastore not to gather statistics on an alter:
    it would list every file under the table's location (Lance's data, manifests) each time,
    a cost that grows with the table, and add numFiles/totalSize to its parameters."""
    return ttypes.EnvironmentContext(properties={NO_STATS: "true", **(properties or {})})


def _field(column: CatalogColumn) -> Any:
    return ttypes.FieldSchema(column.name, column.type, column.comment or None)


def _changed(expected: TableEntry, current: Any) -> bool:
    """Whether the table's commit state moved since ``expected`` was read."""
    now = dict(current.parameters or {})
    return (
        versions.current_version(now) != versions.current_version(expected.parameters)
        or now.get(versions.DELETED_KEY) != expected.parameters.get(versions.DELETED_KEY)
        or now.get(REVISION_KEY) != expected.parameters.get(REVISION_KEY)
    )


def _login_name() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "lance-metastore"
