"""An EMULATOR of a Hive Metastore 3.x Thrift server: the catalog API, in memory, for tests.

Hive 3 catalogs are tested against real Hive Metastores 3.1 and 4.0 (``hive.local`` with
``version="3.1"``/``"4"``, fixtures in tests/conftest.py). This emulator stays only for what a
real server cannot be made to show: how many calls of each kind a client made (``calls``, so
a test can prove a listing is one filtered call and never reads tables one by one). This
module serves the part of Hive 3's Thrift API that catalog-aware clients use, with the
generated service code of pymetastore (``ThriftHiveMetastore.Processor``) over a
``TThreadedServer`` on 127.0.0.1 (binary protocol, buffered transport), so clients talk
to it exactly as to a real metastore::

    with Hms3Emulator() as hms:
        connect("hive3", {"uri": hms.uri, ...})

What it reproduces of HMS 3 (checked against Hive's ``HiveMetaStore.HMSHandler``):

- catalogs: ``create_catalog`` (needs a location; also creates the catalog's ``default``
  database, as HMS 3 does), ``get_catalog``, ``get_catalogs``, ``alter_catalog`` (blank fields
  keep their value), ``drop_catalog`` (refused for ``hive``; a catalog whose only database is
  an empty ``default`` is dropped with it; otherwise InvalidOperationException);
- the catalog ``hive`` with its database ``default`` at start;
- database names in calls as HMS 3 encodes them: ``@cat#db`` names a database of a catalog,
  ``@cat#`` all databases of it (``get_databases``), a plain name a database of ``hive``;
- databases: create (``Database.catalogName`` picks the catalog, a missing catalog is
  InvalidObjectException as in HMS), get, get_databases (Hive patterns: ``*`` and ``|``),
  get_all_databases (catalog ``hive`` only), alter (blank description/location kept), drop
  (``deleteData``, ``cascade``; ``hive.default`` cannot be dropped);
- tables: create (``Table.catName``; EXTERNAL_TABLE without ``EXTERNAL=TRUE`` becomes
  MANAGED_TABLE and vice versa, a missing location defaults under the database's),
  get_table, get_table_req, get_all_tables, get_tables (patterns), alter_table (renames
  within a catalog), drop_table, and get_table_names_by_filter with Hive's table filter
  language (``hive_filter_field_params__<key>``, ``hive_filter_field_owner__``,
  ``hive_filter_field_last_access__``; ``=``, ``<>``, ``!=``, ``like`` with a Java regex that
  must match the whole value, ``and``/``or``, parentheses);
- names lower-cased and checked (letters, digits, underscores) as HMS does, local database and
  table locations qualified as ``file:/path`` (catalog locations are kept as given),
  ``transient_lastDdlTime`` maintained;
- the exception types HMS 3 declares for each call; any other method answers
  ``TApplicationException(UNKNOWN_METHOD)``, like a server that lacks it.

What it does not do: it never touches storage (a real HMS creates and may delete directories),
has no partitions, functions, privileges, locks or transactions, and keeps nothing on disk.
``calls`` counts the calls received, by method name, so tests can prove how a client talks.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import os
import re
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from pymetastore.hive_metastore import ThriftHiveMetastore, ttypes
from thrift.protocol import TBinaryProtocol
from thrift.server import TServer
from thrift.Thrift import TApplicationException, TMessageType, TType
from thrift.transport import TSocket, TTransport

__all__ = ["DEFAULT_CATALOG", "DEFAULT_DATABASE", "Hms3Emulator", "Hms3Handler"]

DEFAULT_CATALOG = "hive"
DEFAULT_DATABASE = "default"
DDL_TIME = "transient_lastDdlTime"
DATABASE_SUFFIX = ".db"

# MetaStoreUtils.validateName: Java's \w, i.e. ASCII letters, digits and underscores.
_VALID_NAME = re.compile(r"[A-Za-z0-9_]+")


def _now() -> int:
    return int(time.time())


def _qualify(location: str | None) -> str | None:
    """HMS qualifies paths with the default file system: ``/x`` becomes ``file:/x``."""
    if location and location.startswith("/"):
        return "file:" + location
    return location


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def _pattern_matcher(pattern: str | None) -> Callable[[str], bool]:
    """Hive's name patterns: ``|`` separates alternatives, ``*`` is any run of characters."""
    if pattern is None:
        return lambda name: True
    alternatives = [
        re.compile(part.strip().lower().replace("*", ".*"), re.IGNORECASE)
        for part in pattern.split("|")
    ]
    return lambda name: any(p.fullmatch(name) for p in alternatives)


# ---------------------------------------------------------------------------------------------
# The table filter language of get_table_names_by_filter
# ---------------------------------------------------------------------------------------------

PARAMS_KEY = "hive_filter_field_params__"
OWNER_KEY = "hive_filter_field_owner__"
LAST_ACCESS_KEY = "hive_filter_field_last_access__"
_PARAM_OPERATORS = ("=", "<>", "!=", "like")

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<lparen>\() | (?P<rparen>\)) |
        (?P<op><>|!=|<=|>=|=|<|>) |
        "(?P<dq>[^"]*)" | '(?P<sq>[^']*)' |
        (?P<number>-?\d+(?![\w])) |
        (?P<word>[A-Za-z_][\w.]*)
    )""",
    re.VERBOSE,
)


class FilterError(ValueError):
    """The filter does not parse, or uses a key or operator HMS refuses."""


def _tokens(text: str) -> list[tuple[str, Any]]:
    tokens: list[tuple[str, Any]] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            raise FilterError(f"lexer error at position {position} in {text!r}")
        position = match.end()
        kind = match.lastgroup
        value = match.group(kind)
        if kind in ("dq", "sq"):
            tokens.append(("string", value))  # Hive's string literals have no escapes
        elif kind == "number":
            tokens.append(("number", int(value)))
        elif kind == "word":
            lowered = value.lower()
            if lowered in ("and", "or"):
                tokens.append((lowered, lowered))
            elif lowered == "like":
                tokens.append(("op", "like"))
            else:
                tokens.append(("word", value))
        else:
            tokens.append((kind, value))
    return tokens


Predicate = Callable[[ttypes.Table], bool]


class _FilterParser:
    """``or_expr := and_expr (OR and_expr)*; and_expr := atom (AND atom)*;
    atom := '(' or_expr ')' | key op value | value op key``."""

    def __init__(self, text: str) -> None:
        self._tokens = _tokens(text)
        self._index = 0

    def parse(self) -> Predicate:
        if not self._tokens:
            return lambda table: True
        predicate = self._or()
        if self._index != len(self._tokens):
            raise FilterError(f"unexpected {self._tokens[self._index][1]!r}")
        return predicate

    def _peek(self) -> tuple[str, Any] | None:
        return self._tokens[self._index] if self._index < len(self._tokens) else None

    def _take(self, kind: str | None = None) -> tuple[str, Any]:
        token = self._peek()
        if token is None or (kind is not None and token[0] != kind):
            raise FilterError(f"expected {kind or 'a token'}, found {token and token[1]!r}")
        self._index += 1
        return token

    def _or(self) -> Predicate:
        parts = [self._and()]
        while self._peek() and self._peek()[0] == "or":
            self._take()
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else lambda t: any(p(t) for p in parts)

    def _and(self) -> Predicate:
        parts = [self._atom()]
        while self._peek() and self._peek()[0] == "and":
            self._take()
            parts.append(self._atom())
        return parts[0] if len(parts) == 1 else lambda t: all(p(t) for p in parts)

    def _atom(self) -> Predicate:
        token = self._peek()
        if token and token[0] == "lparen":
            self._take()
            inner = self._or()
            self._take("rparen")
            return inner
        if token and token[0] == "word":
            key = self._take()[1]
            operator = self._take("op")[1]
            value = self._value()
        else:
            value = self._value()
            operator = self._take("op")[1]
            key = self._take("word")[1]
        return _leaf(key, operator, value)

    def _value(self) -> Any:
        token = self._peek()
        if token is None or token[0] not in ("string", "number"):
            raise FilterError(f"expected a value, found {token and token[1]!r}")
        return self._take()[1]


def _compare(operator: str, left: Any, right: Any) -> bool:
    if operator == "like":
        try:
            # JDO's String.matches: a Java regex that must match the whole value.
            return re.fullmatch(str(right), str(left)) is not None
        except re.error as error:
            raise FilterError(f"invalid regular expression {right!r}: {error}") from None
    return {
        "=": left == right,
        "<>": left != right,
        "!=": left != right,
        "<": left < right,
        ">": left > right,
        "<=": left <= right,
        ">=": left >= right,
    }[operator]


def _leaf(key: str, operator: str, value: Any) -> Predicate:
    if key.startswith(PARAMS_KEY) and len(key) > len(PARAMS_KEY):
        if operator not in _PARAM_OPERATORS:
            raise FilterError(
                "Only [=, <>, !=, LIKE] are supported operators for HIVE_FILTER_FIELD_PARAMS"
            )
        name, expected = key[len(PARAMS_KEY) :], str(value)
        if operator == "like":
            _compare("like", "", expected)  # refuse a bad regex now, as HMS does

        def on_parameter(table: ttypes.Table) -> bool:
            actual = (table.parameters or {}).get(name)
            # A table without the parameter has no row to compare: never a match.
            return actual is not None and _compare(operator, actual, expected)

        return on_parameter
    if key == OWNER_KEY:
        return lambda table: table.owner is not None and _compare(operator, table.owner, value)
    if key == LAST_ACCESS_KEY:
        if operator == "like":
            raise FilterError("Like is not supported for HIVE_FILTER_FIELD_LAST_ACCESS")
        if not isinstance(value, int):
            raise FilterError("HIVE_FILTER_FIELD_LAST_ACCESS needs an integer value")
        return lambda table: _compare(operator, table.lastAccessTime or 0, value)
    raise FilterError(
        "Invalid key name in filter.  Use constants from org.apache.hadoop.hive.metastore.api"
    )


def parse_table_filter(text: str) -> Predicate:
    """A predicate over Table objects for a ``get_table_names_by_filter`` filter string."""
    return _FilterParser(text).parse()


# ---------------------------------------------------------------------------------------------
# The handler: the metastore's state and the calls on it
# ---------------------------------------------------------------------------------------------


def _no_such(message: str) -> ttypes.NoSuchObjectException:
    return ttypes.NoSuchObjectException(message=message)


class Hms3Handler:
    """The in-memory metastore behind :class:`Hms3Emulator`; one lock guards all state.

    Methods named like ``ThriftHiveMetastore.Iface``'s are served; every other method of the
    interface is unknown to the server. Objects are copied in and out, never shared.
    """

    def __init__(self, warehouse: str | None = None) -> None:
        if warehouse is None:
            unique = uuid.uuid4().hex[:8]
            warehouse = os.path.join(tempfile.gettempdir(), f"hms3-emulator-{unique}", "warehouse")
        self.warehouse = _qualify(warehouse)
        self._lock = threading.RLock()
        self.calls: collections.Counter[str] = collections.Counter()
        self.reset()

    def reset(self) -> None:
        """Back to the state of a new metastore: catalog ``hive`` with database ``default``."""
        with self._lock:
            self._catalogs: dict[str, ttypes.Catalog] = {
                DEFAULT_CATALOG: ttypes.Catalog(
                    name=DEFAULT_CATALOG,
                    description="Default catalog for Hive",
                    locationUri=self.warehouse,
                )
            }
            self._databases: dict[tuple[str, str], ttypes.Database] = {}
            self._tables: dict[tuple[str, str, str], ttypes.Table] = {}
            self._databases[(DEFAULT_CATALOG, DEFAULT_DATABASE)] = ttypes.Database(
                name=DEFAULT_DATABASE,
                description="Default Hive database",
                locationUri=self.warehouse,
                parameters={},
                ownerName="public",
                ownerType=ttypes.PrincipalType.ROLE,
                catalogName=DEFAULT_CATALOG,
            )
            self.calls.clear()

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    def _parse_db_name(name: str | None) -> tuple[str, str | None]:
        """HMS 3's ``parseDbName``: ``@cat#db``, ``@cat#`` (no database) or a plain name."""
        if name is None:
            return DEFAULT_CATALOG, None
        if name.startswith("@"):
            if name.endswith("#"):
                return name[1:-1].strip().lower(), None
            if name.endswith("#!"):
                return name[1:-2].strip().lower(), ""
            parts = name[1:].split("#", 1)
            if len(parts) != 2:
                raise ttypes.MetaException(
                    message=f"{name} is prepended with the catalog marker but does not appear "
                    "to have a catalog name in it"
                )
            return parts[0].strip().lower(), parts[1].strip().lower()
        return DEFAULT_CATALOG, name.strip().lower()

    def _database(self, catalog: str, name: str | None) -> ttypes.Database:
        if name is None:
            raise ttypes.MetaException(message="Database name cannot be null.")
        found = self._databases.get((catalog, name))
        if found is None:
            raise _no_such(f"database {catalog}.{name}")
        return found

    def _table_names(self, catalog: str, database: str) -> list[str]:
        return sorted(n for (c, d, n) in self._tables if c == catalog and d == database)

    @staticmethod
    def _check_external(table: ttypes.Table) -> None:
        # ObjectStore.convertToMTable: the EXTERNAL parameter decides the table type.
        external = str((table.parameters or {}).get("EXTERNAL", "")).lower() == "true"
        if table.tableType == "MANAGED_TABLE" and external:
            table.tableType = "EXTERNAL_TABLE"
        elif table.tableType == "EXTERNAL_TABLE" and not external:
            table.tableType = "MANAGED_TABLE"

    @staticmethod
    def _check_columns(columns: Iterable[ttypes.FieldSchema] | None) -> str | None:
        for column in columns or []:
            if not column.name or not column.type:
                return repr(column.name)
        return None

    # -- catalogs ------------------------------------------------------------------------

    def create_catalog(self, catalog: ttypes.CreateCatalogRequest) -> None:
        with self._lock:
            new = copy.deepcopy(catalog.catalog) if catalog else None
            if new is None or new.name is None:
                raise ttypes.InvalidObjectException(message="catalog must have a name")
            name = new.name.strip().lower()
            if name in self._catalogs:
                raise ttypes.AlreadyExistsException(message=f"Catalog {new.name} already exists")
            if not _VALID_NAME.fullmatch(new.name):
                raise ttypes.InvalidObjectException(
                    message=f"{new.name} is not a valid catalog name"
                )
            if new.locationUri is None:
                raise ttypes.InvalidObjectException(
                    message="You must specify a path for the catalog"
                )
            new.name = name  # the location is kept as given (HMS qualifies database paths only)
            self._catalogs[name] = new
            # HMS 3 gives every new catalog a database called "default" at its location.
            self._databases[(name, DEFAULT_DATABASE)] = ttypes.Database(
                name=DEFAULT_DATABASE,
                description=f"Default database for catalog {name}",
                locationUri=_qualify(new.locationUri),
                parameters={},
                catalogName=name,
            )

    def get_catalog(self, catName: ttypes.GetCatalogRequest) -> ttypes.GetCatalogResponse:
        with self._lock:
            name = (catName.name or "").strip().lower()
            found = self._catalogs.get(name)
            if found is None:
                raise _no_such(f"No catalog {catName.name}")
            return ttypes.GetCatalogResponse(catalog=copy.deepcopy(found))

    def get_catalogs(self) -> ttypes.GetCatalogsResponse:
        with self._lock:
            return ttypes.GetCatalogsResponse(names=sorted(self._catalogs))

    def alter_catalog(self, rqst: ttypes.AlterCatalogRequest) -> None:
        with self._lock:
            name = (rqst.name or "").strip().lower()
            current = self._catalogs.get(name)
            if current is None:
                raise _no_such(f"No catalog {rqst.name}")
            new = rqst.newCat
            if new is None:
                raise ttypes.MetaException(message="new catalog is null")
            if (new.name or "").strip().lower() != name:
                raise ttypes.InvalidOperationException(message="You cannot change a catalog's name")
            # ObjectStore.alterCatalog: only non-blank fields replace the stored ones.
            if new.locationUri and new.locationUri.strip():
                current.locationUri = new.locationUri
            if new.description and new.description.strip():
                current.description = new.description

    def drop_catalog(self, catName: ttypes.DropCatalogRequest) -> None:
        with self._lock:
            name = (catName.name or "").strip().lower()
            if name == DEFAULT_CATALOG:
                raise ttypes.MetaException(message=f"Can not drop {DEFAULT_CATALOG} catalog")
            if name not in self._catalogs:
                raise _no_such(f"No catalog {catName.name}")
            databases = sorted(d for (c, d) in self._databases if c == name)
            if databases:
                if databases != [DEFAULT_DATABASE]:
                    raise ttypes.InvalidOperationException(
                        message=f"There are non-default databases in the catalog {name} so it "
                        "cannot be dropped."
                    )
                if self._table_names(name, DEFAULT_DATABASE):
                    raise ttypes.InvalidOperationException(
                        message="There are still objects in the default database for catalog "
                        + name
                    )
                del self._databases[(name, DEFAULT_DATABASE)]
            del self._catalogs[name]

    # -- databases -----------------------------------------------------------------------

    def create_database(self, database: ttypes.Database) -> None:
        with self._lock:
            new = copy.deepcopy(database)
            catalog = (new.catalogName or DEFAULT_CATALOG).strip().lower()
            if new.name is None:
                raise ttypes.MetaException(message="Database name cannot be null.")
            name = new.name.strip().lower()
            if (catalog, name) in self._databases:
                raise ttypes.AlreadyExistsException(message=f"Database {new.name} already exists")
            if not _VALID_NAME.fullmatch(new.name):
                raise ttypes.InvalidObjectException(
                    message=f"{new.name} is not a valid database name"
                )
            owner = self._catalogs.get(catalog)
            if owner is None:
                # HMS 3 answers a missing catalog with InvalidObjectException, not
                # NoSuchObjectException (which create_database cannot even declare).
                raise ttypes.InvalidObjectException(message=f"No such catalog {catalog}")
            if new.locationUri:
                new.locationUri = _qualify(new.locationUri)
            else:
                new.locationUri = _join(_qualify(owner.locationUri), name + DATABASE_SUFFIX)
            new.name = name
            new.catalogName = catalog
            new.parameters = dict(new.parameters or {})
            self._databases[(catalog, name)] = new

    def get_database(self, name: str) -> ttypes.Database:
        with self._lock:
            catalog, database = self._parse_db_name(name)
            return copy.deepcopy(self._database(catalog, database))

    def get_databases(self, pattern: str) -> list[str]:
        with self._lock:
            catalog, database = self._parse_db_name(pattern)
            matches = _pattern_matcher(database)
            return sorted(d for (c, d) in self._databases if c == catalog and matches(d))

    def get_all_databases(self) -> list[str]:
        with self._lock:
            return sorted(d for (c, d) in self._databases if c == DEFAULT_CATALOG)

    def alter_database(self, dbname: str, db: ttypes.Database) -> None:
        with self._lock:
            catalog, name = self._parse_db_name(dbname)
            current = self._database(catalog, name)
            # ObjectStore.alterDatabase: parameters and owner are replaced; description and
            # location only when the new value is not blank.
            current.parameters = dict(db.parameters or {})
            current.ownerName = db.ownerName
            if db.ownerType is not None:
                current.ownerType = db.ownerType
            if db.description and db.description.strip():
                current.description = db.description
            if db.locationUri and db.locationUri.strip():
                current.locationUri = _qualify(db.locationUri)

    def drop_database(self, name: str, deleteData: bool, cascade: bool) -> None:
        with self._lock:
            catalog, database = self._parse_db_name(name)
            if catalog == DEFAULT_CATALOG and database == DEFAULT_DATABASE:
                raise ttypes.MetaException(
                    message=f"Can not drop {DEFAULT_DATABASE} database in catalog {DEFAULT_CATALOG}"
                )
            found = self._database(catalog, database)
            tables = self._table_names(catalog, found.name)
            if tables and not cascade:
                raise ttypes.InvalidOperationException(
                    message=f"Database {found.name} is not empty. One or more tables exist."
                )
            for table in tables:  # the emulator never deletes data, whatever deleteData says
                del self._tables[(catalog, found.name, table)]
            del self._databases[(catalog, found.name)]

    # -- tables --------------------------------------------------------------------------

    def create_table(self, tbl: ttypes.Table) -> None:
        with self._lock:
            new = copy.deepcopy(tbl)
            if new.dbName is None:
                raise ttypes.MetaException(message="Null database name is not allowed")
            if not new.tableName or not _VALID_NAME.fullmatch(new.tableName):
                raise ttypes.InvalidObjectException(
                    message=f"{new.tableName} is not a valid object name"
                )
            if new.sd is None:
                raise ttypes.MetaException(message="java.lang.NullPointerException")
            invalid = self._check_columns(new.sd.cols) or self._check_columns(new.partitionKeys)
            if invalid is not None:
                raise ttypes.InvalidObjectException(message=f"Invalid column {invalid}")
            catalog = (new.catName or DEFAULT_CATALOG).strip().lower()
            database_name = new.dbName.strip().lower()
            name = new.tableName.lower()
            database = self._databases.get((catalog, database_name))
            if database is None:
                # HMS 3 turns the NoSuchObjectException of the lookup into this one.
                raise ttypes.InvalidObjectException(
                    message=f"database {catalog}.{database_name} does not exist"
                )
            if (catalog, database_name, name) in self._tables:
                raise ttypes.AlreadyExistsException(
                    message=f"Table {catalog}.{database_name}.{name} already exists"
                )
            new.catName, new.dbName, new.tableName = catalog, database_name, name
            new.tableType = new.tableType or "MANAGED_TABLE"
            new.parameters = dict(new.parameters or {})
            self._check_external(new)
            if new.tableType != "VIRTUAL_VIEW":
                if new.sd.location:
                    new.sd.location = _qualify(new.sd.location)
                else:
                    new.sd.location = _join(database.locationUri, name)
            now = _now()
            new.createTime = now
            new.parameters.setdefault(DDL_TIME, str(now))
            self._tables[(catalog, database_name, name)] = new

    def _get_table(self, catalog: str, database: str | None, name: str | None) -> ttypes.Table:
        key = (catalog, (database or "").lower(), (name or "").strip().lower())
        found = self._tables.get(key)
        if found is None:
            raise _no_such(f"{'.'.join(key)} table not found")
        return found

    def get_table(self, dbname: str, tbl_name: str) -> ttypes.Table:
        with self._lock:
            catalog, database = self._parse_db_name(dbname)
            return copy.deepcopy(self._get_table(catalog, database, tbl_name))

    def get_table_req(self, req: ttypes.GetTableRequest) -> ttypes.GetTableResult:
        with self._lock:
            catalog = (req.catName or DEFAULT_CATALOG).strip().lower()
            database = (req.dbName or "").strip().lower()
            table = self._get_table(catalog, database, req.tblName)
            return ttypes.GetTableResult(table=copy.deepcopy(table))

    def get_all_tables(self, db_name: str) -> list[str]:
        with self._lock:
            catalog, database = self._parse_db_name(db_name)
            return self._table_names(catalog, database or "")

    def get_tables(self, db_name: str, pattern: str) -> list[str]:
        with self._lock:
            catalog, database = self._parse_db_name(db_name)
            matches = _pattern_matcher(pattern)
            return [n for n in self._table_names(catalog, database or "") if matches(n)]

    def get_table_names_by_filter(self, dbname: str, filter: str, max_tables: int) -> list[str]:
        with self._lock:
            catalog, database = self._parse_db_name(dbname)
            if not catalog or not database:
                raise ttypes.UnknownDBException(message="DB name is null or empty")
            if filter is None:
                raise ttypes.InvalidOperationException(message="null cannot apply null filter")
            try:
                predicate = parse_table_filter(filter)
            except FilterError as error:
                raise ttypes.MetaException(
                    message=f"Error parsing partition filter : {error}"
                ) from None
            names = [
                name
                for name in self._table_names(catalog, database)
                if predicate(self._tables[(catalog, database, name)])
            ]
            return names if max_tables is None or max_tables < 0 else names[:max_tables]

    def alter_table_with_environment_context(
        self,
        dbname: str,
        tbl_name: str,
        new_tbl: ttypes.Table,
        environment_context: ttypes.EnvironmentContext,
    ) -> None:
        # HMS 3 reads no property of the context that matters here (statistics are not kept).
        self.alter_table(dbname, tbl_name, new_tbl)

    def alter_table(self, dbname: str, tbl_name: str, new_tbl: ttypes.Table) -> None:
        with self._lock:
            if new_tbl is None:
                raise ttypes.InvalidOperationException(message="New table is null")
            catalog, database = self._parse_db_name(dbname)
            name = (tbl_name or "").strip().lower()
            new = copy.deepcopy(new_tbl)
            if not new.tableName or not _VALID_NAME.fullmatch(new.tableName):
                raise ttypes.InvalidOperationException(
                    message=f"{new.tableName} is not a valid object name"
                )
            if new.sd is not None:
                invalid = self._check_columns(new.sd.cols)
                if invalid is not None:
                    raise ttypes.InvalidOperationException(message=f"Invalid column {invalid}")
            old = self._tables.get((catalog, database or "", name))
            if old is None:
                raise ttypes.InvalidOperationException(
                    message=f"table {catalog}.{database}.{name} doesn't exist"
                )
            if new.catName and new.catName.strip().lower() != catalog:
                raise ttypes.InvalidOperationException(
                    message=f"Tables cannot be moved between catalogs, old catalog {catalog}, "
                    f"new catalog {new.catName}"
                )
            new_database = (new.dbName or database or "").strip().lower()
            new_name = new.tableName.lower()
            if (new_database, new_name) != (database, name):
                if (catalog, new_database) not in self._databases:
                    raise ttypes.InvalidOperationException(
                        message=f"Unable to change partition or table. Database "
                        f"{new_database} does not exist"
                    )
                if (catalog, new_database, new_name) in self._tables:
                    raise ttypes.InvalidOperationException(
                        message=f"new table {new_database}.{new_name} already exists"
                    )
            new.catName, new.dbName, new.tableName = catalog, new_database, new_name
            new.tableType = new.tableType or old.tableType
            new.parameters = dict(new.parameters or {})
            self._check_external(new)
            if new.sd is not None:
                new.sd.location = _qualify(new.sd.location)
            if new.createTime is None:
                new.createTime = old.createTime
            new.parameters.setdefault(DDL_TIME, str(_now()))
            del self._tables[(catalog, database or "", name)]
            self._tables[(catalog, new_database, new_name)] = new

    def drop_table(self, dbname: str, name: str, deleteData: bool) -> None:
        with self._lock:
            catalog, database = self._parse_db_name(dbname)
            table = self._get_table(catalog, database, name)
            del self._tables[(catalog, table.dbName, table.tableName)]


# ---------------------------------------------------------------------------------------------
# The Thrift server
# ---------------------------------------------------------------------------------------------


class _Processor(ThriftHiveMetastore.Processor):
    """The generated processor, limited to what the handler implements.

    Calls of any other method get the answer of a real (Java) metastore that lacks it:
    ``TApplicationException(UNKNOWN_METHOD, "Invalid method name: '<name>'")``.
    """

    def __init__(self, handler: Hms3Handler) -> None:
        super().__init__(handler)
        self._handler_calls = handler.calls
        self._processMap = {
            name: function
            for name, function in self._processMap.items()
            if callable(getattr(handler, name, None))
        }

    def process(self, iprot: Any, oprot: Any) -> Any:
        name, _type, seqid = iprot.readMessageBegin()
        self._handler_calls[name] += 1
        function = self._processMap.get(name)
        if function is not None:
            function(self, seqid, iprot, oprot)
            return True
        iprot.skip(TType.STRUCT)
        iprot.readMessageEnd()
        error = TApplicationException(
            TApplicationException.UNKNOWN_METHOD, f"Invalid method name: '{name}'"
        )
        oprot.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
        error.write(oprot)
        oprot.writeMessageEnd()
        oprot.trans.flush()
        return None


class _ServerSocket(TSocket.TServerSocket):
    """Listens once (so the bound port can be read before serving) and can be shut down."""

    def listen(self) -> None:
        if self.handle is None:
            super().listen()

    @property
    def bound_port(self) -> int:
        return int(self.handle.getsockname()[1])

    def shutdown(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                self.handle.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept()
            self.handle.close()


class _Server(TServer.TThreadedServer):
    """TThreadedServer that stops: the accept loop ends and open connections are closed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stopping = threading.Event()
        self._clients: set[socket.socket] = set()
        self._clients_lock = threading.Lock()

    def serve(self) -> None:
        self.serverTransport.listen()
        while not self._stopping.is_set():
            try:
                client = self.serverTransport.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                continue
            if client is None:
                continue
            with self._clients_lock:
                if self._stopping.is_set():
                    client.close()
                    return
                self._clients.add(client.handle)
            thread = threading.Thread(target=self._handle, args=(client,), daemon=True)
            thread.start()

    def _handle(self, client: Any) -> None:
        try:
            self.handle(client)
        finally:
            with self._clients_lock:
                self._clients.discard(client.handle)

    def stop(self) -> None:
        self._stopping.set()
        self.serverTransport.shutdown()
        with self._clients_lock:
            clients = list(self._clients)
        for client in clients:  # as when a metastore goes away: peers see their sockets close
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)


class Hms3Emulator:
    """A Hive Metastore 3 emulator on ``127.0.0.1``; ``port=0`` lets the OS choose.

    ``start()``/``stop()`` (or ``with``); ``restart()`` keeps the state and the port, as a
    metastore restart does, and drops every connection. ``handler`` holds the state
    (``handler.calls`` counts calls by method; ``reset()`` forgets everything).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, warehouse: str | None = None):
        self.host = host
        self.port = port
        self.handler = Hms3Handler(warehouse)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def uri(self) -> str:
        return f"thrift://{self.host}:{self.port}"

    @property
    def calls(self) -> collections.Counter[str]:
        return self.handler.calls

    def reset(self) -> None:
        self.handler.reset()

    def start(self) -> Hms3Emulator:
        if self._server is not None:
            return self
        server_socket = _ServerSocket(host=self.host, port=self.port)
        server_socket.listen()
        self.port = server_socket.bound_port
        self._server = _Server(
            _Processor(self.handler),
            server_socket,
            TTransport.TBufferedTransportFactory(),
            TBinaryProtocol.TBinaryProtocolFactory(),
            daemon=True,
        )
        self._thread = threading.Thread(
            target=self._server.serve, name=f"hms3-emulator-{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.stop()
        if self._thread is not None:
            self._thread.join(5)
        self._server = None
        self._thread = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> Hms3Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self._server is not None else "stopped"
        return f"Hms3Emulator({self.uri}, {state})"
