"""What the behaviour suite needs from each backend, behind one small interface.

The suite is written once against ``LanceNamespace``; a harness knows how to connect a
backend's namespace, where its databases live in the hierarchy, how to make a non-Lance table
with the catalog's own client, and which names the catalog accepts.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lance_namespace import LanceNamespace


@dataclass
class Harness(ABC):
    root: Path
    name: str = "backend"
    supports_cascade: bool = False
    # Names the catalog accepts beyond plain [a-z0-9_], and names it must refuse.
    odd_names: list[str] = field(default_factory=list)
    bad_names: list[str] = field(default_factory=list)

    @abstractmethod
    def properties(self) -> dict[str, str]:
        """Connection properties of a namespace on this backend."""

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
    def create_foreign_table(self, db: list[str], name: str, location: str) -> None:
        """A table that is not a Lance table, made with the catalog's own client."""

    @abstractmethod
    def columns(self, db: list[str], name: str) -> list[tuple[str, str]]:
        """(name, type) of the catalog columns of a table, read with the catalog's client."""

    def raw_parameters(self, db: list[str], name: str) -> dict[str, Any]:
        raise NotImplementedError


@dataclass
class GlueHarness(Harness):
    """The Glue emulator, or real AWS Glue when ``real`` settings are given (opt-in).

    Against real Glue the account is shared: every database gets a per-run ``prefix`` and
    ``reset`` deletes only those.
    """

    emulator: Any = None
    real: Any = None  # support.glue_emulator.GlueConnectionSettings
    prefix: str = ""

    def __post_init__(self) -> None:
        self.name = "glue"
        self.odd_names = ["with-dash", "with space", "ünïcödé", "dots.in.name", "MiXeD"]
        self.bad_names = ["", "..", "a/b", "tab\tname", "x" * 256]

    @property
    def target(self) -> Any:
        return self.real or self.emulator

    def properties(self) -> dict[str, str]:
        target = self.target
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

    def db(self, name: str) -> list[str]:
        return [name if name in self.bad_names else self.prefix + name]

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
        return self.target.client("glue")

    def create_foreign_table(self, db: list[str], name: str, location: str) -> None:
        self._client().create_table(
            DatabaseName=db[-1],
            TableInput={
                "Name": name,
                "TableType": "EXTERNAL_TABLE",
                "Parameters": {"table_type": "ICEBERG"},
                "StorageDescriptor": {"Location": location},
            },
            **self._ids(),
        )

    def _table(self, db: list[str], name: str) -> dict[str, Any]:
        return self._client().get_table(DatabaseName=db[-1], Name=name, **self._ids())["Table"]

    def columns(self, db: list[str], name: str) -> list[tuple[str, str]]:
        columns = self._table(db, name)["StorageDescriptor"].get("Columns", [])
        return [(c["Name"], c["Type"]) for c in columns]

    def raw_parameters(self, db: list[str], name: str) -> dict[str, Any]:
        return dict(self._table(db, name).get("Parameters") or {})


@dataclass
class HiveHarness(Harness):
    """Hive 2 (database -> table) or Hive 3 (catalog -> database -> table) on a metastore."""

    uri: str = ""
    level: int = 2  # 2: hive2, 3: hive3 (default catalog "hive" on HMS 2.x)

    def __post_init__(self) -> None:
        self.name = f"hive{self.level}"
        self.supports_cascade = True
        self.odd_names = ["with_underscore", "MiXeD_Case", "_leading", "123"]
        self.bad_names = ["", "..", "a/b", "with-dash", "with space", "ünïcödé", "x" * 129]

    def properties(self) -> dict[str, str]:
        return {"uri": self.uri, "root": str(self.root)}

    def db(self, name: str) -> list[str]:
        return ["hive", name] if self.level == 3 else [name]

    def _client(self):
        from urllib.parse import urlparse

        from lance_metastore.hms_local import thrift_client

        first = urlparse(self.uri.split(",")[0])
        return thrift_client(first.hostname, first.port)

    def reset(self) -> None:
        with self._client() as client:
            for database in client.get_all_databases():
                if database != "default":
                    client.drop_database(database, False, True)
            for table in client.get_all_tables("default"):
                client.drop_table("default", table, False)

    def create_foreign_table(self, db: list[str], name: str, location: str) -> None:
        with self._client() as client:
            client.create_table(foreign_hive_table(db[-1], name, location))

    def columns(self, db: list[str], name: str) -> list[tuple[str, str]]:
        with self._client() as client:
            table = client.get_table(db[-1], name)
        return [(c.name, c.type) for c in table.sd.cols or []]

    def raw_parameters(self, db: list[str], name: str) -> dict[str, Any]:
        with self._client() as client:
            return dict(client.get_table(db[-1], name).parameters or {})


def foreign_hive_table(
    db: str,
    name: str,
    location: str,
    table_type: str = "ICEBERG",
    catalog: str | None = None,
    owner: str | None = None,
) -> Any:
    """A Hive table made with the raw Thrift types, its ``table_type`` parameter as given."""
    from pymetastore.hive_metastore import ttypes

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
        parameters={"table_type": table_type, "EXTERNAL": "TRUE"},
        tableType="EXTERNAL_TABLE",
        catName=catalog,
    )
