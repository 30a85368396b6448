"""What the behaviour suite needs from each backend, behind one small interface.

The suite is written once against ``LanceNamespace``; a harness knows how to connect a
backend's namespace, where its databases live in the hierarchy, how to make a non-Lance table
with the catalog's own client, which names the catalog accepts (``accepts_name``, an oracle
independent of the library) and what the catalog and storage hold (``snapshot``, read with the
catalog's own client, so "nothing changed" is judged without the library's code).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import unicodedata
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lance_namespace import LanceNamespace

# AWS Glue's "single-line string pattern" for database and table names.
GLUE_SINGLE_LINE = re.compile("[\t\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]+")
# What HMS's validateName accepts (Java's \w is ASCII-only), at most 128 characters.
HIVE_NAME = re.compile("[A-Za-z0-9_]{1,128}")


def refused_by_library(name: str) -> bool:
    """Names refused on every backend, whatever the catalog would store (the issue's list):
    empty, ``.`` and ``..``, a path separator, a control or other non-printing character
    (Unicode category C), white space at either end, a capital letter outside ASCII (catalogs
    fold those differently: KELVIN SIGN lower-cases to "k")."""
    return (
        name in ("", ".", "..")
        or any(not ch.isascii() and ch.lower() != ch for ch in name)
        or "/" in name
        or "\\" in name
        or any(unicodedata.category(ch).startswith("C") for ch in name)
        or name[0].isspace()
        or name[-1].isspace()
    )


@dataclass
class Harness(ABC):
    root: Path
    name: str = "backend"  # the ``connect`` alias of its namespace class
    label: str = ""  # the test id (e.g. "glue-stock"); ``name`` when empty
    supports_cascade: bool = False
    # Names the catalog accepts beyond plain [a-z0-9_], and names it must refuse.
    odd_names: list[str] = field(default_factory=list)
    bad_names: list[str] = field(default_factory=list)
    # The longest database or table name the catalog stores.
    max_name_length: int = 255

    @abstractmethod
    def properties(self) -> dict[str, str]:
        """Connection properties of a namespace on this backend."""

    @abstractmethod
    def namespace_class(self) -> type[LanceNamespace]:
        """The class ``connect`` builds here, for constructing it directly."""

    def client_target(self) -> tuple[str, dict[str, str]]:
        """What lancedb's ``connect_namespace`` takes to reach this backend: impl, properties."""
        return f"lance_metastore.{self.namespace_class().__name__}", self.properties()

    def connect(self, **overrides: str) -> LanceNamespace:
        from lance_namespace import connect

        import lance_metastore  # noqa: F401 - registers the aliases

        return connect(self.name, {**self.properties(), **overrides})

    @abstractmethod
    def reset(self) -> None:
        """Forget every namespace and table, so each test starts empty."""

    def db(self, name: str) -> list[str]:
        """The namespace id of a database called ``name``."""
        return [name]

    def unique(self, prefix: str = "db") -> str:
        return f"{prefix}_{uuid.uuid4().hex[:8]}"

    @abstractmethod
    def create_foreign_table(
        self,
        db: list[str],
        name: str,
        location: str,
        table_type: str | None = "ICEBERG",
        kind: str = "EXTERNAL_TABLE",
    ) -> None:
        """A table that is not a Lance table, made with the catalog's own client.

        ``table_type`` is its ``table_type`` parameter (None: no such parameter), ``kind`` the
        catalog's own table type (a ``lance`` parameter on a non-external table is not Lance).
        """

    @abstractmethod
    def drop_foreign_table(self, db: list[str], name: str) -> None:
        """Remove a table with the catalog's own client (the entry only, never data)."""

    @abstractmethod
    def snapshot(self) -> dict[str, Any]:
        """Everything the catalog holds and every file under ``root``, read without our code.

        Read with the catalog's own client, so that "nothing changed" is judged independently
        of the library under test; two snapshots compare equal when nothing changed.
        """

    @abstractmethod
    def accepts_name(self, name: str) -> bool:
        """Whether a database or table name is valid here: an oracle written from the catalog's
        documented rules and the library's spec, independent of the library's code."""

    def files(self) -> dict[str, int]:
        """Every file and directory under ``root`` (directories with size -1), but the
        server's own claim store (``.lance-metastore``: bookkeeping, not data)."""
        found: dict[str, int] = {}
        for folder, dirs, names in os.walk(self.root):
            if folder == str(self.root):
                dirs[:] = [d for d in dirs if d != ".lance-metastore"]
            for name in dirs:
                found[os.path.relpath(os.path.join(folder, name), self.root)] = -1
            for name in names:
                path = os.path.join(folder, name)
                found[os.path.relpath(path, self.root)] = os.path.getsize(path)
        return found

    @abstractmethod
    def columns(self, db: list[str], name: str) -> list[tuple[str, str]]:
        """(name, type) of the catalog columns of a table, read with the catalog's client."""

    def raw_parameters(self, db: list[str], name: str) -> dict[str, Any]:
        raise NotImplementedError

    def write_as_another_tool(self, db: list[str], name: str, column: str) -> None:
        """Give a table the fields a data steward, Athena or Lake Formation write (a
        description, an owner, SerDe and storage parameters, a comment on ``column``, a
        parameter of theirs), with the catalog's own client, read-modify-write."""
        raise NotImplementedError

    def others_fields(self, db: list[str], name: str) -> dict[str, Any]:
        """The fields :meth:`write_as_another_tool` wrote (and the creation time), as the
        catalog's own client reads them: no write of ours may change them."""
        raise NotImplementedError


# What another tool writes on a table entry (see Harness.write_as_another_tool).
OTHERS_PARAMETER = ("lakeformation.aso.status", "true")
OTHERS_COMMENT = "customer id, written by a data steward"


@dataclass
class GlueHarness(Harness):
    """The Glue emulator, or real AWS Glue when ``real`` settings are given (opt-in).

    Against real Glue the account is shared: every database gets a per-run ``prefix`` and
    ``reset`` deletes only those. ``emulator`` may also be moto's server as shipped
    (``StockMotoServer``); ``principal`` signs the namespace's calls when it is not the
    emulator's own (the principal without catalog permissions); ``catalog_api`` says whether
    the namespace under test can use Glue's catalog API there. The harness's own client
    always signs as the endpoint's full principal.
    """

    emulator: Any = None
    real: Any = None  # support.glue_emulator.GlueConnectionSettings
    principal: Any = None  # support.glue_emulator.GlueConnectionSettings
    prefix: str = ""
    catalog_api: bool = True
    # Whether UpdateTable honours VersionId (moto as shipped ignores it).
    conditional_updates: bool = True
    _glue: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.name = "glue"
        self.label = self.label or "glue"
        self.odd_names = ["with-dash", "with space", "ünïcödé", "dots.in.name", "MiXeD"]
        self.bad_names = ["", "..", "a/b", "tab\tname", "x" * 256]

    @property
    def target(self) -> Any:
        return self.real or self.emulator

    def properties(self) -> dict[str, str]:
        target = self.principal or self.target
        props = {"region": target.region, "root": str(self.root), "max_retries": "2"}
        optional = {
            "endpoint": target.endpoint,
            "access_key_id": target.access_key_id,
            "secret_access_key": target.secret_access_key,
            "session_token": getattr(target, "session_token", None),
            "catalog_id": getattr(self.real, "catalog_id", None),
        }
        props.update({key: value for key, value in optional.items() if value})
        return props

    def namespace_class(self) -> type[LanceNamespace]:
        from lance_metastore import GlueNamespace

        return GlueNamespace

    def db(self, name: str) -> list[str]:
        return [name if name in self.bad_names else self.prefix + name]

    def accepts_name(self, name: str) -> bool:
        # AWS: Name is 1-255 characters of the "single-line string pattern"; the library also
        # refuses what no catalog name may hold (see refused_by_library).
        return (
            len(name) <= 255
            and GLUE_SINGLE_LINE.fullmatch(name) is not None
            and not refused_by_library(name)
        )

    def _stored(self, name: str) -> str:
        """A table name as AWS Glue stores it: lower-cased, which moto as shipped does not do
        by itself (a mixed-case name there would be one no Glue user could have made)."""
        return name if self.real is not None or self.emulator.folds_names else name.lower()

    def _ids(self) -> dict[str, str]:
        catalog_id = getattr(self.real, "catalog_id", None)
        return {"CatalogId": catalog_id} if catalog_id else {}

    def reset(self) -> None:
        if self.real is None:
            self.emulator.reset()
            return
        client = self._client()
        for page in client.get_paginator("get_databases").paginate(**self._ids()):
            for database in page["DatabaseList"]:
                if self.prefix and database["Name"].startswith(self.prefix):
                    client.delete_database(Name=database["Name"], **self._ids())

    def _client(self) -> Any:
        if self._glue is None:
            self._glue = self.target.client("glue")
        return self._glue

    def create_foreign_table(
        self,
        db: list[str],
        name: str,
        location: str,
        table_type: str | None = "ICEBERG",
        kind: str = "EXTERNAL_TABLE",
    ) -> None:
        self._client().create_table(
            DatabaseName=db[-1],
            TableInput={
                "Name": self._stored(name),
                "TableType": kind,
                "Parameters": {} if table_type is None else {"table_type": table_type},
                "StorageDescriptor": {"Location": location},
            },
            **self._ids(),
        )

    def drop_foreign_table(self, db: list[str], name: str) -> None:
        self._client().delete_table(DatabaseName=db[-1], Name=self._stored(name), **self._ids())

    def _pages(self, client: Any, method: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            response = getattr(client, method)(**kwargs)
            items += response.get(key, [])
            if not response.get("NextToken"):
                return items
            kwargs["NextToken"] = response["NextToken"]

    def snapshot(self) -> dict[str, Any]:
        client = self._client()
        if self.real is None and self.emulator.has_catalog_api:
            catalogs = self._pages(
                client, "get_catalogs", "CatalogList", Recursive=True, IncludeRoot=True
            )
        else:  # a shared account: its root catalog only, and only this run's databases
            catalogs = [{"CatalogId": getattr(self.real, "catalog_id", None), "Name": "root"}]
        state: dict[str, Any] = {"files": self.files()}
        for catalog in catalogs:
            ids = {"CatalogId": catalog["CatalogId"]} if catalog["CatalogId"] else {}
            databases = {}
            for database in self._pages(client, "get_databases", "DatabaseList", **ids):
                if self.real is not None and not database["Name"].startswith(self.prefix):
                    continue
                tables = {}
                for table in self._pages(
                    client, "get_tables", "TableList", DatabaseName=database["Name"], **ids
                ):
                    descriptor = table.get("StorageDescriptor") or {}
                    tables[table["Name"]] = {
                        "TableType": table.get("TableType"),
                        "Parameters": table.get("Parameters") or {},
                        "Location": descriptor.get("Location"),
                        "Columns": [
                            (c["Name"], c.get("Type"), c.get("Comment"))
                            for c in descriptor.get("Columns") or []
                        ],
                        "VersionId": table.get("VersionId"),
                    }
                databases[database["Name"]] = {
                    "Parameters": database.get("Parameters") or {},
                    "Description": database.get("Description"),
                    "LocationUri": database.get("LocationUri"),
                    "tables": tables,
                }
            state[f"catalog {catalog['CatalogId'] or 'root'}"] = {
                "Parameters": catalog.get("Parameters") or {},
                "Description": catalog.get("Description"),
                "databases": databases,
            }
        return state

    def _table(self, db: list[str], name: str) -> dict[str, Any]:
        return self._client().get_table(
            DatabaseName=db[-1], Name=self._stored(name), **self._ids()
        )["Table"]

    def columns(self, db: list[str], name: str) -> list[tuple[str, str]]:
        columns = self._table(db, name)["StorageDescriptor"].get("Columns", [])
        return [(c["Name"], c["Type"]) for c in columns]

    def raw_parameters(self, db: list[str], name: str) -> dict[str, Any]:
        return dict(self._table(db, name).get("Parameters") or {})

    def write_as_another_tool(self, db: list[str], name: str, column: str) -> None:
        table = self._table(db, name)
        descriptor = dict(table["StorageDescriptor"])
        descriptor["SerdeInfo"] = {
            "SerializationLibrary": "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
            "Parameters": {"serialization.format": "1"},
        }
        descriptor["Parameters"] = {"storage.owner.team": "analytics"}
        descriptor["Columns"] = [
            {**c, "Comment": OTHERS_COMMENT} if c["Name"] == column else c
            for c in descriptor.get("Columns") or []
        ]
        table_input = {
            "Name": table["Name"],
            "Description": "orders as the steward describes them",
            "Owner": "data-steward",
            "Retention": 30,
            "TableType": table.get("TableType"),
            "Parameters": {**table.get("Parameters", {}), OTHERS_PARAMETER[0]: OTHERS_PARAMETER[1]},
            "StorageDescriptor": descriptor,
            "PartitionKeys": table.get("PartitionKeys") or [],
        }
        self._client().update_table(DatabaseName=db[-1], TableInput=table_input, **self._ids())

    def others_fields(self, db: list[str], name: str) -> dict[str, Any]:
        table = self._table(db, name)
        descriptor = table.get("StorageDescriptor") or {}
        return {
            "Description": table.get("Description"),
            "Owner": table.get("Owner"),
            "Retention": table.get("Retention"),
            "CreateTime": table.get("CreateTime"),
            "SerdeInfo": descriptor.get("SerdeInfo"),
            "StorageParameters": descriptor.get("Parameters"),
            "comments": {c["Name"]: c.get("Comment") for c in descriptor.get("Columns") or []},
            "parameter": (table.get("Parameters") or {}).get(OTHERS_PARAMETER[0]),
        }


class _SharedMetastoreClient:
    """One open connection to a metastore, lent to one harness call at a time.

    HMS 2.3 builds a new ``HiveConf`` and object store for every connection (re-reading its
    XML configuration from a classpath of hundreds of jars) and drops them when it closes:
    a connection per harness call (every reset and snapshot) was most of the metastore's CPU
    in the behaviour tests. A connection the metastore has closed (a restarted one, say) is
    found by a cheap call and opened again.
    """

    def __init__(self, address: str, security: dict[str, str]) -> None:
        self._address = address
        self._security = security
        self._lock = threading.Lock()
        self._open: contextlib.ExitStack | None = None
        self._client: Any = None

    def _connect(self) -> None:
        from urllib.parse import urlparse

        from lance_metastore.hive.local import thrift_client

        self.close()
        stack = contextlib.ExitStack()
        if self._security:
            from .secure_hms import secured_thrift_client

            self._client = stack.enter_context(secured_thrift_client(self._address, self._security))
        else:
            parsed = urlparse(self._address)
            self._client = stack.enter_context(thrift_client(parsed.hostname, parsed.port))
        self._open = stack

    def _alive(self) -> bool:
        try:
            self._client.getMetaConf("hive.metastore.client.socket.timeout")
        except Exception:
            return False
        return True

    @contextlib.contextmanager
    def borrowed(self) -> Iterator[Any]:
        with self._lock:
            if self._open is None or not self._alive():
                self._connect()
            try:
                yield self._client
            except BaseException:
                self.close()  # a call that failed midway may leave the protocol out of step
                raise

    def close(self) -> None:
        if self._open is not None:
            stack, self._open, self._client = self._open, None, None
            with contextlib.suppress(Exception):
                stack.close()


_SHARED_CLIENTS: dict[tuple[str, tuple[tuple[str, str], ...]], _SharedMetastoreClient] = {}


@dataclass
class HiveHarness(Harness):
    """Hive 2 (database -> table) or Hive 3 (catalog -> database -> table) on a metastore."""

    uri: str = ""
    level: int = 2  # 2: hive2, 3: hive3 (default catalog "hive" on HMS 2.x)
    # Hive 3 on a metastore with catalogs (HMS 3.1+): the databases of the tests live in this
    # catalog, made by reset(); None: the default catalog "hive".
    catalog: str | None = None
    # client.auth / client.kerberos.* / client.tls.* of a secured metastore; the harness's own
    # Thrift client authenticates the same way.
    security: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.name = f"hive{self.level}"
        self.label = self.label or self.name
        self.supports_cascade = True
        self.odd_names = ["with_underscore", "MiXeD_Case", "_leading", "123"]
        self.bad_names = ["", "..", "a/b", "with-dash", "with space", "ünïcödé", "x" * 129]
        self.max_name_length = 128

    def properties(self) -> dict[str, str]:
        return {"uri": self.uri, "root": str(self.root), **self.security}

    def namespace_class(self) -> type[LanceNamespace]:
        from lance_metastore import Hive2Namespace, Hive3Namespace

        return Hive3Namespace if self.level == 3 else Hive2Namespace

    def accepts_name(self, name: str) -> bool:
        # HMS's validateName matches the name as given against Java's "[\\w_]+" (ASCII
        # letters, digits, underscore), then stores it lower-cased; its schema holds names of
        # at most 128 characters (measured on HMS 2.3: longer ones fail).
        return HIVE_NAME.fullmatch(name) is not None

    def db(self, name: str) -> list[str]:
        if self.level == 2:
            return [name]
        return [self.catalog or "hive", name]

    def _ref(self, db: list[str]) -> str:
        """A database as the Thrift API names it (``@catalog#db`` outside the default)."""
        if len(db) == 2 and db[0] != "hive" and self.catalog:
            return f"@{db[0]}#{db[1]}"
        return db[-1]

    def _client(self) -> contextlib.AbstractContextManager[Any]:
        """The harness's Thrift client of the first metastore in ``uri``, one connection per
        metastore and test process (see :class:`_SharedMetastoreClient`)."""
        from urllib.parse import urlparse

        first = urlparse(self.uri.split(",")[0])
        address = f"thrift://{first.hostname}:{first.port}"
        key = (address, tuple(sorted(self.security.items())))
        shared = _SHARED_CLIENTS.get(key)
        if shared is None:
            shared = _SHARED_CLIENTS[key] = _SharedMetastoreClient(address, dict(self.security))
        return shared.borrowed()

    def reset(self) -> None:
        from pymetastore.hive_metastore import ttypes

        with self._client() as client:
            for database in client.get_all_databases():
                if database != "default":
                    client.drop_database(database, False, True)
            for table in client.get_all_tables("default"):
                client.drop_table("default", table, False)
            if self.catalog is None:
                return
            for catalog in client.get_catalogs().names:
                if catalog == "hive":
                    continue
                for database in client.get_databases(f"@{catalog}#"):
                    client.drop_database(f"@{catalog}#{database}", False, True)
                client.drop_catalog(ttypes.DropCatalogRequest(catalog))
            # Outside root: HMS makes a directory there for each database created without a
            # location, which a snapshot of root's files would count as a change.
            location = (self.root.parent / f"hms_catalog_{self.catalog}").as_uri()
            client.create_catalog(
                ttypes.CreateCatalogRequest(ttypes.Catalog(name=self.catalog, locationUri=location))
            )

    def _table(self, client: Any, db: list[str], name: str) -> Any:
        from pymetastore.hive_metastore import ttypes

        catalog = db[0] if len(db) == 2 and self.catalog else None
        request = ttypes.GetTableRequest(dbName=db[-1], tblName=name, catName=catalog)
        return client.get_table_req(request).table

    def create_foreign_table(
        self,
        db: list[str],
        name: str,
        location: str,
        table_type: str | None = "ICEBERG",
        kind: str = "EXTERNAL_TABLE",
    ) -> None:
        catalog = db[0] if len(db) == 2 and self.catalog else None
        table = foreign_hive_table(db[-1], name, location, table_type, catalog=catalog, kind=kind)
        with self._client() as client:
            client.create_table(table)

    def drop_foreign_table(self, db: list[str], name: str) -> None:
        with self._client() as client:
            client.drop_table(self._ref(db), name, False)

    def snapshot(self) -> dict[str, Any]:
        from pymetastore.hive_metastore import ttypes

        state: dict[str, Any] = {"files": self.files()}
        with self._client() as client:
            catalogs = client.get_catalogs().names if self.catalog else ["hive"]
            for catalog in catalogs:
                if self.catalog:
                    found = client.get_catalog(ttypes.GetCatalogRequest(catalog)).catalog
                    state[f"catalog {catalog}"] = (found.description, found.locationUri)
                self._snapshot_catalog(client, catalog, state)
        return state

    def _snapshot_catalog(self, client: Any, catalog: str, state: dict[str, Any]) -> None:
        from pymetastore.hive_metastore import ttypes

        in_catalog = bool(self.catalog)
        names = client.get_databases(f"@{catalog}#") if in_catalog else client.get_all_databases()
        for name in names:
            ref = f"@{catalog}#{name}" if in_catalog else name
            database = client.get_database(ref)
            tables = {}
            table_names = client.get_all_tables(ref)
            request = ttypes.GetTablesRequest(
                dbName=name, tblNames=table_names, catName=catalog if in_catalog else None
            )
            found = client.get_table_objects_by_name_req(request).tables if table_names else []
            for table in found:
                descriptor = table.sd
                tables[table.tableName] = {
                    "tableType": table.tableType,
                    "parameters": dict(table.parameters or {}),
                    "location": descriptor.location if descriptor else None,
                    "cols": [
                        (c.name, c.type, c.comment)
                        for c in (descriptor.cols if descriptor and descriptor.cols else [])
                    ],
                    "owner": table.owner,
                }
            key = f"database {catalog}.{name}" if in_catalog else f"database {name}"
            state[key] = {
                "parameters": dict(database.parameters or {}),
                "description": database.description,
                "locationUri": database.locationUri,
                "owner": (database.ownerName, database.ownerType),
                "tables": tables,
            }

    def columns(self, db: list[str], name: str) -> list[tuple[str, str]]:
        with self._client() as client:
            table = self._table(client, db, name)
        return [(c.name, c.type) for c in table.sd.cols or []]

    def raw_parameters(self, db: list[str], name: str) -> dict[str, Any]:
        with self._client() as client:
            return dict(self._table(client, db, name).parameters or {})

    def write_as_another_tool(self, db: list[str], name: str, column: str) -> None:
        from pymetastore.hive_metastore import ttypes

        with self._client() as client:
            table = self._table(client, db, name)
            table.owner = "data-steward"
            table.sd.serdeInfo = ttypes.SerDeInfo(
                name="steward",
                serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                parameters={"serialization.format": "1"},
            )
            table.sd.parameters = {"storage.owner.team": "analytics"}
            for field in table.sd.cols:
                if field.name == column:
                    field.comment = OTHERS_COMMENT
            table.parameters = {
                **(table.parameters or {}),
                OTHERS_PARAMETER[0]: OTHERS_PARAMETER[1],
                "comment": "orders as the steward describes them",
            }
            client.alter_table(self._ref(db), name, table)

    def others_fields(self, db: list[str], name: str) -> dict[str, Any]:
        with self._client() as client:
            table = self._table(client, db, name)
        parameters = table.parameters or {}
        return {
            "owner": table.owner,
            "createTime": table.createTime,
            "serde": (table.sd.serdeInfo.serializationLib, table.sd.serdeInfo.parameters),
            "storage parameters": table.sd.parameters,
            "comments": {c.name: c.comment for c in table.sd.cols or []},
            "parameter": parameters.get(OTHERS_PARAMETER[0]),
            "comment": parameters.get("comment"),
        }


def foreign_hive_table(
    db: str,
    name: str,
    location: str,
    table_type: str | None = "ICEBERG",
    catalog: str | None = None,
    owner: str | None = None,
    kind: str = "EXTERNAL_TABLE",
) -> Any:
    """A Hive table made with the raw Thrift types, its ``table_type`` parameter as given
    (None: no such parameter) and its Hive table type ``kind``."""
    from pymetastore.hive_metastore import ttypes

    parameters = {} if table_type is None else {"table_type": table_type}
    if kind == "EXTERNAL_TABLE":
        parameters["EXTERNAL"] = "TRUE"  # without it HMS makes the table a managed one
    return ttypes.Table(
        tableName=name,
        dbName=db,
        owner=owner,
        sd=ttypes.StorageDescriptor(
            cols=[ttypes.FieldSchema("x", "int", None)],
            location=location,
            serdeInfo=ttypes.SerDeInfo(name=name, parameters={}),
            parameters={},
        ),
        partitionKeys=[],
        parameters=parameters,
        tableType=kind,
        catName=catalog,
    )
