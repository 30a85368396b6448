"""A Glue-compatible test endpoint: a standalone Glue emulator in front of moto's server.

moto's Glue lacks behaviour our library relies on (the catalog hierarchy, databases and tables
scoped to a catalog through ``CatalogId``, lower-cased names, the ``VersionId`` check on
UpdateTable), and extending it meant subclassing moto's internals, which broke on upgrades. So
Glue is emulated here, driven by the API model botocore ships (``botocore/data/glue/*/
service-2.json``): the model names the operations, validates their input (required members,
types, lengths, ranges, patterns) and lists the error codes each may answer. Only the
operations our library and tests call are implemented; any other answers as AWS answers an
unknown target.

``GlueEmulator`` serves one endpoint on 127.0.0.1 (an OS-chosen port): requests whose
``X-Amz-Target`` is ``AWSGlue.*`` are answered by the emulator, everything else (STS, S3, IAM,
``/moto-api/``) is relayed unchanged to moto's ``ThreadedMotoServer`` as shipped (moto's public
server-mode entry point, ``moto.server``), writes of one S3 object one at a time, so that
conditional writes (``If-Match``, ``If-None-Match``) are atomic as AWS documents them and moto's
server alone does not make them (``_object_lock``). The emulator adds test hooks:
fault injection, a pause hook (``hold``), a request log (``recording``), signature checks
(``check_signatures``) and a principal whose policy grants no catalog action
(``catalog_api_denied``).

State: catalogs per account (the root catalog's id is the account id; a CatalogId's account
prefix picks the account, without cross-account permission checks); one region.

``StockMotoServer`` is moto's server as shipped (its Glue too: no catalog API, no ``VersionId``
check, no name folding). Both moto servers run in this process and share moto's in-memory state
(STS, S3, IAM): a reset of either forgets it for both.

``glue_endpoint_from_env()`` lets the same tests run against real AWS Glue instead
(``LANCE_METASTORE_TEST_GLUE_REAL=1``); the emulator-only helpers are not available there.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import http.client
import json
import logging
import os
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import boto3
import botocore.session
from botocore.config import Config
from botocore.model import OperationModel, Shape
from moto.server import ThreadedMotoServer

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "CATALOG_ACTIONS",
    "REAL_GLUE_ENV",
    "GlueConnectionSettings",
    "GlueEmulator",
    "HeldRequest",
    "RecordedRequest",
    "StockMotoServer",
    "glue_endpoint_from_env",
]

REAL_GLUE_ENV = "LANCE_METASTORE_TEST_GLUE_REAL"
REAL_GLUE_CATALOG_ID_ENV = "LANCE_METASTORE_TEST_GLUE_CATALOG_ID"
REAL_GLUE_ENDPOINT_ENV = "LANCE_METASTORE_TEST_GLUE_ENDPOINT"
REAL_GLUE_REGION_ENV = "LANCE_METASTORE_TEST_GLUE_REGION"

GLUE_MODEL = botocore.session.get_session().get_service_model("glue")
_TARGET_PREFIX = f"{GLUE_MODEL.metadata['targetPrefix']}."
_CONTENT_TYPE = f"application/x-amz-json-{GLUE_MODEL.metadata['jsonVersion']}"
_ACCOUNT_ID_PATTERN = re.compile(r"\d{12}")
_CREDENTIAL = re.compile(
    r"Credential=(?P<key>[^/,\s]+)/(?P<scope>[^,\s]+),\s*SignedHeaders=(?P<signed>[^,\s]+),"
    r"\s*Signature=(?P<signature>[0-9a-f]+)"
)
_DEFAULT_PAGE_SIZE = 100

# Glue's catalog API: what an IAM policy without glue:*Catalog* actions may not call.
CATALOG_ACTIONS = frozenset(
    {"CreateCatalog", "GetCatalog", "GetCatalogs", "UpdateCatalog", "DeleteCatalog"}
)
# The access key of the principal whose policy grants no catalog action.
_CATALOG_API_DENIED_KEY = "AKIACATALOGAPIDENIED"
# Top-level members that name a database or table (AWS stores those names lower-cased).
_NAME_MEMBERS = {"DatabaseName", "TableName"}
_NAME_IS_DATABASE_OR_TABLE = frozenset(
    {"GetDatabase", "UpdateDatabase", "DeleteDatabase", "GetTable", "UpdateTable", "DeleteTable"}
)
# CatalogInput fields that GetCatalog echoes back as they were given.
_ECHOED_CATALOG_FIELDS = (
    "Description",
    "TargetRedshiftCatalog",
    "FederatedCatalog",
    "CatalogProperties",
    "CreateTableDefaultPermissions",
    "CreateDatabaseDefaultPermissions",
    "AllowFullTableExternalDataAccess",
)


class GlueError(Exception):
    """An answer in the AWS JSON protocol's error shape: ``__type`` and ``message``."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def _invalid_input(message: str) -> GlueError:
    return GlueError("InvalidInputException", message)


def _not_found(message: str) -> GlueError:
    return GlueError("EntityNotFoundException", message)


# --------------------------------------------------------------------------------------------
# Input checked against the model
# --------------------------------------------------------------------------------------------

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "long": (int,),
    "double": (int, float),
    "float": (int, float),
    "timestamp": (int, float, str),
    "blob": (str,),
    "structure": (dict,),
    "map": (dict,),
    "list": (list,),
}


def validate(value: Any, shape: Shape, where: str) -> None:
    """What AWS checks before an operation runs: required members, types, min/max, patterns."""
    expected = _JSON_TYPES.get(shape.type_name, (object,))
    if not isinstance(value, expected) or isinstance(value, bool) != (shape.type_name == "boolean"):
        raise _invalid_input(f"{where} must be of type {shape.type_name}.")
    bounds = shape.metadata
    size = value if isinstance(value, int | float) else None
    if isinstance(value, str | list | dict):
        size = len(value)
    if size is not None and "min" in bounds and size < bounds["min"]:
        raise _invalid_input(f"{where} must be at least {bounds['min']}.")
    if size is not None and "max" in bounds and size > bounds["max"]:
        raise _invalid_input(f"{where} must be at most {bounds['max']}.")
    if isinstance(value, str) and "pattern" in bounds:
        with contextlib.suppress(re.error):  # a few model patterns are Java-only regexes
            if not re.search(bounds["pattern"], value):
                raise _invalid_input(f"{where} does not match {bounds['pattern']}.")
    if shape.type_name == "structure":
        for member in shape.required_members:
            if member not in value:
                raise _invalid_input(f"{where}.{member} is required.")
        for member, item in value.items():
            if member not in shape.members:
                raise GlueError("SerializationException", f"Unknown member {where}.{member}.")
            validate(item, shape.members[member], f"{where}.{member}")
    elif shape.type_name == "list":
        for index, item in enumerate(value):
            validate(item, shape.member, f"{where}[{index}]")
    elif shape.type_name == "map":
        for key, item in value.items():
            validate(key, shape.key, f"{where} key")
            validate(item, shape.value, f"{where}[{key}]")


def _fold_names(action: str, params: dict[str, Any]) -> None:
    """AWS stores database and table names in lower case and matches them case-insensitively."""
    keys = _NAME_MEMBERS | ({"Name"} if action in _NAME_IS_DATABASE_OR_TABLE else set())
    for key in keys & params.keys():
        params[key] = params[key].lower()
    for key in ("DatabaseInput", "TableInput"):
        if "Name" in params.get(key, {}):
            params[key]["Name"] = params[key]["Name"].lower()
    if "TablesToDelete" in params:
        params["TablesToDelete"] = [name.lower() for name in params["TablesToDelete"]]


# --------------------------------------------------------------------------------------------
# State: catalogs hold databases, databases hold tables
# --------------------------------------------------------------------------------------------


@dataclass
class _Table:
    fields: dict[str, Any]  # the TableInput, then what Glue adds
    versions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def version_id(self) -> str:
        return str(self.fields["VersionId"])


@dataclass
class _Database:
    fields: dict[str, Any]
    tables: dict[str, _Table] = field(default_factory=dict)


@dataclass
class _Catalog:
    catalog_id: str
    name: str
    parent_id: str | None
    resource_arn: str
    catalog_input: dict[str, Any] = field(default_factory=dict)
    create_time: float = field(default_factory=time.time)
    update_time: float = field(default_factory=time.time)
    databases: dict[str, _Database] = field(default_factory=dict)

    @property
    def is_root(self) -> bool:
        return self.parent_id is None

    def as_dict(self) -> dict[str, Any]:
        result = {
            "CatalogId": self.catalog_id,
            "Name": self.name,
            "ResourceArn": self.resource_arn,
            "Parameters": dict(self.catalog_input.get("Parameters") or {}),
            "CreateTime": self.create_time,
            "UpdateTime": self.update_time,
        }
        return result | {
            k: self.catalog_input[k] for k in _ECHOED_CATALOG_FIELDS if k in self.catalog_input
        }


def _validate_catalog_name(name: str, account_id: str) -> str:
    """CreateCatalog's documented rule the model cannot state: not the account id."""
    if name == account_id:
        raise _invalid_input("Catalog name may not be the same as the account id.")
    return name


def _page(
    items: list[Any], key: Callable[[Any], str], params: dict[str, Any]
) -> tuple[list[Any], dict[str, str]]:
    """One page of ``items`` (sorted by ``key``) after the NextToken, and the next token."""
    items = sorted(items, key=key)
    token = params.get("NextToken")
    if token:
        try:
            after = json.loads(base64.urlsafe_b64decode(token.encode()))["after"]
        except (binascii.Error, ValueError, KeyError, TypeError):
            raise _invalid_input("Invalid NextToken.") from None
        items = [item for item in items if key(item) > str(after)]
    size = params.get("MaxResults", _DEFAULT_PAGE_SIZE)
    page = items[:size]
    if len(items) <= size:
        return page, {}
    token = base64.urlsafe_b64encode(json.dumps({"after": key(page[-1])}).encode()).decode()
    return page, {"NextToken": token}


class _Glue:
    """The Glue operations, one method each (``CreateCatalog`` -> ``create_catalog``); the caller
    holds the state lock. ``region`` names ARNs."""

    def __init__(self, region: str) -> None:
        self.region = region
        self.catalogs: dict[str, _Catalog] = {}
        self.tags: dict[str, dict[str, str]] = {}

    # -- catalogs ---------------------------------------------------------------------------

    def root(self, account_id: str) -> _Catalog:
        if account_id not in self.catalogs:
            arn = f"arn:aws:glue:{self.region}:{account_id}:catalog"
            self.catalogs[account_id] = _Catalog(account_id, account_id, None, arn)
        return self.catalogs[account_id]

    def catalog(self, catalog_id: str | None, caller: str) -> _Catalog:
        """Resolve a CatalogId; absent means the caller's root catalog."""
        account_id = (catalog_id or caller).split(":", 1)[0]
        if not _ACCOUNT_ID_PATTERN.fullmatch(account_id):
            raise _not_found(f"Catalog {catalog_id} not found.")
        self.root(account_id)
        try:
            return self.catalogs[catalog_id or caller]
        except KeyError:
            raise _not_found(f"Catalog {catalog_id} not found.") from None

    def add_catalog(self, parent: _Catalog, name: str, catalog_input: dict[str, Any]) -> _Catalog:
        """Insert a child; ids follow AWS: ``<account>:<name>``, then ``.../<child>``."""
        catalog_id = f"{parent.catalog_id}{':' if parent.is_root else '/'}{name}"
        if catalog_id in self.catalogs:
            raise GlueError("AlreadyExistsException", f"Catalog {catalog_id} already exists.")
        account_id, path = catalog_id.split(":", 1)
        arn = f"{self.root(account_id).resource_arn}/{path}"
        self.catalogs[catalog_id] = _Catalog(
            catalog_id, name, parent.catalog_id, arn, catalog_input
        )
        return self.catalogs[catalog_id]

    def children(self, parent: _Catalog, *, recursive: bool) -> list[_Catalog]:
        found = [c for c in self.catalogs.values() if c.parent_id == parent.catalog_id]
        if recursive:
            for child in list(found):
                found.extend(self.children(child, recursive=True))
        return found

    def create_catalog(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        """AWS's CreateCatalog has no parent: new catalogs are children of the caller's root."""
        root = self.root(caller)
        name = _validate_catalog_name(p["Name"], root.catalog_id)
        catalog = self.add_catalog(root, name, p["CatalogInput"])
        self.tags[catalog.resource_arn] = dict(p.get("Tags") or {})
        return {}

    def get_catalog(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        return {"Catalog": self.catalog(p["CatalogId"], caller).as_dict()}

    def get_catalogs(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        parent = self.catalog(p.get("ParentCatalogId"), caller)
        if "IncludeRoot" in p and not parent.is_root:
            raise _invalid_input("IncludeRoot is only allowed when ParentCatalogId is the account.")
        catalogs = self.children(parent, recursive=bool(p.get("Recursive")))
        if p.get("IncludeRoot"):
            catalogs.append(parent)
        if p.get("HasDatabases"):
            # Below the root, catalogs that hold catalogs are containers (like s3tablescatalog).
            catalogs = [c for c in catalogs if c.is_root or not self.children(c, recursive=False)]
        page, token = _page(catalogs, lambda c: c.catalog_id, p)
        return {"CatalogList": [c.as_dict() for c in page], **token}

    def update_catalog(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        """Replaces the catalog's input, as Glue's Update* operations do."""
        catalog = self.catalog(p["CatalogId"], caller)
        if catalog.is_root:
            raise _invalid_input("The default catalog of the account can't be updated.")
        catalog.catalog_input, catalog.update_time = dict(p["CatalogInput"]), time.time()
        return {}

    def delete_catalog(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        """AWS documents that a catalog must be empty (no databases, no catalogs) to be deleted."""
        catalog = self.catalog(p["CatalogId"], caller)
        if catalog.is_root:
            raise _invalid_input("The default catalog of the account can't be deleted.")
        if catalog.databases or self.children(catalog, recursive=False):
            raise _invalid_input(
                f"Catalog {catalog.catalog_id} is not empty: "
                "delete its databases and catalogs first."
            )
        del self.catalogs[catalog.catalog_id]
        self.tags.pop(catalog.resource_arn, None)
        return {}

    # -- databases --------------------------------------------------------------------------

    def database(self, p: dict[str, Any], caller: str, name: str) -> _Database:
        catalog = self.catalog(p.get("CatalogId"), caller)
        try:
            return catalog.databases[name]
        except KeyError:
            raise _not_found(f"Database {name} not found.") from None

    def create_database(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        catalog = self.catalog(p.get("CatalogId"), caller)
        database_input = p["DatabaseInput"]
        if database_input["Name"] in catalog.databases:
            raise GlueError("AlreadyExistsException", "Database already exists.")
        fields = {"Parameters": {}, **database_input, "CatalogId": catalog.catalog_id}
        catalog.databases[database_input["Name"]] = _Database(fields | {"CreateTime": time.time()})
        return {}

    def get_database(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        return {"Database": self.database(p, caller, p["Name"]).fields}

    def get_databases(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        databases = list(self.catalog(p.get("CatalogId"), caller).databases.values())
        page, token = _page(databases, lambda d: d.fields["Name"], p)
        return {"DatabaseList": [d.fields for d in page], **token}

    def update_database(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        database = self.database(p, caller, p["Name"])
        kept = {k: database.fields[k] for k in ("Name", "CatalogId", "CreateTime")}
        database.fields = {"Parameters": {}, **p["DatabaseInput"], **kept}
        return {}

    def delete_database(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        self.database(p, caller, p["Name"])
        del self.catalog(p.get("CatalogId"), caller).databases[p["Name"]]
        return {}

    # -- tables -----------------------------------------------------------------------------

    def table(self, p: dict[str, Any], caller: str, name: str) -> _Table:
        tables = self.database(p, caller, p["DatabaseName"]).tables
        try:
            return tables[name]
        except KeyError:
            raise _not_found(f"Table {name} not found.") from None

    def create_table(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        database = self.database(p, caller, p["DatabaseName"])
        table_input = p["TableInput"]
        if table_input["Name"] in database.tables:
            raise GlueError("AlreadyExistsException", "Table already exists.")
        now = time.time()
        fields = {
            **table_input,
            "DatabaseName": p["DatabaseName"],
            "CatalogId": database.fields["CatalogId"],
            "CreateTime": now,
            "UpdateTime": now,
            "IsRegisteredWithLakeFormation": False,
            "VersionId": "1",
        }
        table = database.tables[table_input["Name"]] = _Table(fields)
        table.versions.append({"Table": dict(fields), "VersionId": "1"})
        return {}

    def get_table(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        return {"Table": self.table(p, caller, p["Name"]).fields}

    def get_tables(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        tables = list(self.database(p, caller, p["DatabaseName"]).tables.values())
        if p.get("Expression"):
            tables = [t for t in tables if re.fullmatch(p["Expression"], t.fields["Name"])]
        page, token = _page(tables, lambda t: t.fields["Name"], p)
        return {"TableList": [t.fields for t in page], **token}

    def update_table(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        """With VersionId, AWS updates only if it is still the table's current version."""
        table = self.table(p, caller, p["TableInput"]["Name"])
        expected = p.get("VersionId")
        if expected is not None and expected != table.version_id:
            raise GlueError(
                "ConcurrentModificationException",
                f"Table {p['TableInput']['Name']} was updated concurrently: VersionId "
                f"{expected} is not the current version {table.version_id}.",
            )
        version = str(int(table.version_id) + 1)
        kept = {k: table.fields[k] for k in ("DatabaseName", "CatalogId", "CreateTime")}
        table.fields = {
            **p["TableInput"],
            **kept,
            "UpdateTime": time.time(),
            "IsRegisteredWithLakeFormation": False,
            "VersionId": version,
        }
        table.versions.append({"Table": dict(table.fields), "VersionId": version})
        return {}

    def delete_table(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        self.table(p, caller, p["Name"])
        del self.database(p, caller, p["DatabaseName"]).tables[p["Name"]]
        return {}

    def batch_delete_table(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        errors = []
        for name in p["TablesToDelete"]:
            try:
                self.delete_table({**p, "Name": name}, caller)
            except GlueError as error:
                detail = {"ErrorCode": error.code, "ErrorMessage": error.message}
                errors.append({"TableName": name, "ErrorDetail": detail})
        return {"Errors": errors}

    def get_table_versions(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        versions = self.table(p, caller, p["TableName"]).versions
        page, token = _page(versions, lambda v: v["VersionId"].zfill(20), p)
        return {"TableVersions": page[::-1], **token}

    # -- tags -------------------------------------------------------------------------------

    def get_tags(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        return {"Tags": dict(self.tags.get(p["ResourceArn"], {}))}

    def tag_resource(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        self.tags.setdefault(p["ResourceArn"], {}).update(p["TagsToAdd"])
        return {}

    def untag_resource(self, p: dict[str, Any], caller: str) -> dict[str, Any]:
        for key in p["TagsToRemove"]:
            self.tags.get(p["ResourceArn"], {}).pop(key, None)
        return {}


# --------------------------------------------------------------------------------------------
# Test hooks: faults, holds, the request log, signature checks
# --------------------------------------------------------------------------------------------


@dataclass
class _Fault:
    action: str
    remaining: int
    error_code: str = ""
    http_status: int = 400
    message: str = ""
    delay_seconds: float = 0.0
    after_apply: bool = False  # the action takes effect, then the error is answered


@dataclass
class _StorageFault:
    """A relayed (S3) request refused before it reaches moto: ``method`` and a regular
    expression the request's path must match; ``remaining`` None: until cleared;
    ``after_apply``: moto applies the request first, then the error is answered (a write
    whose answer was lost)."""

    method: str
    path: re.Pattern[str]
    http_status: int
    error_code: str
    remaining: int | None
    met: int = 0
    after_apply: bool = False


class HeldRequest:
    """One request held in flight, to order a race deterministically: the first call of
    ``action`` that ``when`` accepts stops before it is applied; ``reached`` is set then, and
    it proceeds on ``release()`` (or after ``timeout`` seconds, so a failed test cannot hang
    the server)."""

    def __init__(
        self, action: str, when: Callable[[dict[str, Any]], bool] | None, timeout: float
    ) -> None:
        self.action = action
        self.when = when
        self.timeout = timeout
        self.reached = threading.Event()
        self._released = threading.Event()

    def matches(self, action: str, parameters: dict[str, Any]) -> bool:
        return action == self.action and (self.when is None or self.when(parameters))

    def hold(self) -> None:
        self.reached.set()
        self._released.wait(self.timeout)

    def release(self) -> None:
        self._released.set()


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the endpoint received it (Glue or relayed to moto)."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes


def _take(faults: list[_Fault], action: str) -> _Fault | None:
    """The first fault for ``action`` (or ``*``), counted down; the caller holds the lock."""
    for fault in faults:
        if fault.action in ("*", action):
            fault.remaining -= 1
            if fault.remaining <= 0:
                faults.remove(fault)
            return fault
    return None


def _signature_is_valid(request: RecordedRequest, secret: str) -> bool:
    """AWS Signature Version 4, recomputed for the request with the signer's secret."""
    found = _CREDENTIAL.search(request.headers.get("authorization", ""))
    if found is None:
        return False
    signed = found["signed"].split(";")
    parts = urlsplit(request.path)
    query = "&".join(sorted(parts.query.split("&"))) if parts.query else ""
    canonical = "\n".join(
        [
            request.method,
            quote(parts.path or "/", safe="/~"),
            query,
            "".join(
                f"{name}:{' '.join(request.headers.get(name, '').split())}\n" for name in signed
            ),
            ";".join(signed),
            hashlib.sha256(request.body).hexdigest(),
        ]
    )
    scope = found["scope"]
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            request.headers.get("x-amz-date", ""),
            scope,
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    key = f"AWS4{secret}".encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, found["signature"])


class _EmulatorState:
    """Everything the request threads share; ``lock`` makes each operation atomic."""

    def __init__(self, account_id: str, region: str) -> None:
        self.account_id = account_id
        self.region = region
        self.lock = threading.Lock()
        self.glue = _Glue(region)
        self.errors: list[_Fault] = []
        self.delays: list[_Fault] = []
        self.holds: list[HeldRequest] = []
        self.storage_faults: list[_StorageFault] = []
        self.log: list[RecordedRequest] | None = None
        self.secrets: dict[str, str] | None = None  # access key -> secret, when checked
        self.catalog_calls_refused = 0
        # Emulates an S3-compatible store without conditional writes: If-Match and
        # If-None-Match are dropped before the request reaches moto.
        self.conditional_writes_ignored = False
        # S3 writes of one object, one at a time (see _object_lock).
        self.object_locks = [threading.Lock() for _ in range(64)]

    def reset(self) -> None:
        with self.lock:
            self.glue = _Glue(self.region)
            self.errors.clear()
            self.delays.clear()
            self.storage_faults.clear()
            self.catalog_calls_refused = 0

    def answer(self, request: RecordedRequest) -> tuple[int, dict[str, Any]]:
        """Glue's answer to one request: its status and JSON body."""
        action = request.headers.get("x-amz-target", "").removeprefix(_TARGET_PREFIX)
        try:
            return 200, self._run(action, request)
        except GlueError as error:
            return error.status, {"__type": error.code, "message": error.message}

    def _run(self, action: str, request: RecordedRequest) -> dict[str, Any]:
        if action not in GLUE_MODEL.operation_names:
            raise GlueError("UnknownOperationException", f"Unknown operation {action}.")
        access_key = self._authenticate(request)
        operation = GLUE_MODEL.operation_model(action)
        handler = getattr(self.glue, botocore.xform_name(action), None)
        if handler is None:
            raise GlueError(
                "InternalServiceException", f"GlueEmulator does not implement {action}.", 501
            )
        if action in CATALOG_ACTIONS and access_key == _CATALOG_API_DENIED_KEY:
            self._refuse_catalog_call(action)
        params = self._parameters(request.body, operation)
        with self.lock:
            held = next((h for h in self.holds if h.matches(action, params)), None)
            if held is not None:
                self.holds.remove(held)
            delay = _take(self.delays, action)
            fault = _take(self.errors, action)
        if held is not None:
            held.hold()  # outside the lock: the other requests go on meanwhile
        if delay is not None:
            time.sleep(delay.delay_seconds)
        if fault is not None and not fault.after_apply:
            raise GlueError(fault.error_code, fault.message, fault.http_status)
        with self.lock:
            result = getattr(self.glue, handler.__name__)(params, self.account_id)
        if fault is not None:
            raise GlueError(fault.error_code, fault.message, fault.http_status)
        return result

    def _authenticate(self, request: RecordedRequest) -> str | None:
        """The signer's access key; with signature checks on, an unknown key or a wrong
        signature answers as AWS does."""
        found = _CREDENTIAL.search(request.headers.get("authorization", ""))
        access_key = found["key"] if found else None
        secrets = self.secrets
        if secrets is None:
            return access_key
        if found is None:
            raise GlueError(
                "MissingAuthenticationTokenException", "Missing Authentication Token", 403
            )
        if access_key not in secrets:
            raise GlueError(
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            )
        if not _signature_is_valid(request, secrets[access_key]):
            raise GlueError(
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
            )
        return access_key

    def _parameters(self, body: bytes, operation: OperationModel) -> dict[str, Any]:
        try:
            params = json.loads(body or b"{}")
        except ValueError:
            raise GlueError("SerializationException", "The request body is not JSON.") from None
        if operation.input_shape is not None:
            validate(params, operation.input_shape, operation.input_shape.name)
        _fold_names(operation.name, params)
        return params

    def _refuse_catalog_call(self, action: str) -> None:
        """What AWS answers a principal whose identity policy lacks the action."""
        with self.lock:
            self.catalog_calls_refused += 1
        user = f"arn:aws:iam::{self.account_id}:user/no-catalog-actions"
        resource = f"arn:aws:glue:{self.region}:{self.account_id}:catalog"
        raise GlueError(
            "AccessDeniedException",
            f"User: {user} is not authorized to perform: glue:{action} on resource: "
            f"{resource} because no identity-based policy allows the glue:{action} action",
        )


# --------------------------------------------------------------------------------------------
# The endpoint: Glue answered here, the rest relayed to moto
# --------------------------------------------------------------------------------------------

_WRITES = {"PUT", "POST", "DELETE"}


def _object_lock(
    state: _EmulatorState, request: RecordedRequest
) -> contextlib.AbstractContextManager[Any]:
    """Atomic conditional writes, as AWS documents them: S3 evaluates ``If-Match`` and
    ``If-None-Match`` and writes as one step, so of two racing conditional puts of one key
    exactly one succeeds. moto's server checks the condition, then writes, in two steps on
    two threads (both racers can pass the check). Writes of one object path (without the
    query: a multipart completion is the object's write) are relayed one at a time, so its
    check and write are one step here; reads and other objects go on in parallel. Not
    covered: ``DeleteObjects`` (a bucket-level POST) is not ordered with the keys it names."""
    if request.method not in _WRITES or "x-amz-target" in request.headers:
        return contextlib.nullcontext()
    path = request.path.split("?", 1)[0]
    return state.object_locks[hash(path) % len(state.object_locks)]


_HOP_BY_HOP = {"content-length", "transfer-encoding", "connection", "keep-alive"}


def _handler_for(state: _EmulatorState, upstream: str) -> type[BaseHTTPRequestHandler]:
    moto = urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body leave in two writes: with Nagle's algorithm on, the body waited for
        # the client's delayed ACK, 40 ms per request (measured), as AWS never makes a client wait.
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:  # one line per request drowns test output
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                self.rfile.readline()
                return b"".join(chunks)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _serve(self) -> None:
            headers = {name.lower(): value for name, value in self.headers.items()}
            request = RecordedRequest(self.command, self.path, headers, self._body())
            with state.lock:
                if state.log is not None:
                    state.log.append(request)
            if headers.get("x-amz-target", "").startswith(_TARGET_PREFIX):
                status, answer = state.answer(request)
                body = json.dumps(answer).encode()
                reply = [("Content-Type", _CONTENT_TYPE)]
                if status != 200:
                    reply.append(("x-amzn-ErrorType", answer["__type"]))
            elif (refused := self._storage_fault(request)) is not None:
                status, reply, body = refused
            else:
                status, reply, body = self._relay(request)
            with contextlib.suppress(OSError):  # the client gave up (a read timeout)
                # moto's answers carry their own Date and Server: one of each, as AWS sends
                # (send_response would add a second, which clients join into one value).
                self.send_response_only(status)
                present = {name.lower() for name, _ in reply}
                if "date" not in present:
                    self.send_header("Date", self.date_time_string())
                if "server" not in present:
                    self.send_header("Server", self.version_string())
                length = str(len(body))
                for name, value in reply:
                    if name.lower() not in _HOP_BY_HOP:
                        self.send_header(name, value)
                    elif name.lower() == "content-length" and self.command == "HEAD":
                        length = value  # a HEAD answer tells the size of what GET would send
                self.send_header("Content-Length", length)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

        def _storage_fault(
            self, request: RecordedRequest
        ) -> tuple[int, list[tuple[str, str]], bytes] | None:
            """S3's error answer when a storage fault matches the request, else None."""
            with state.lock:
                fault = next(
                    (
                        f
                        for f in state.storage_faults
                        if f.method == request.method and f.path.search(request.path)
                    ),
                    None,
                )
                if fault is None:
                    return None
                fault.met += 1
                if fault.remaining is not None:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        state.storage_faults.remove(fault)
            if fault.after_apply:
                self._relay(request)
            body = (
                '<?xml version="1.0" encoding="UTF-8"?><Error>'
                f"<Code>{fault.error_code}</Code><Message>Injected by GlueEmulator.</Message>"
                "</Error>"
            ).encode()
            return fault.http_status, [("Content-Type", "application/xml")], body

        def _relay(self, request: RecordedRequest) -> tuple[int, list[tuple[str, str]], bytes]:
            with _object_lock(state, request):
                return self._relay_now(request)

        def _relay_now(self, request: RecordedRequest) -> tuple[int, list[tuple[str, str]], bytes]:
            connection = http.client.HTTPConnection(moto.hostname, moto.port, timeout=120)
            try:
                dropped = set(_HOP_BY_HOP)
                if state.conditional_writes_ignored:
                    dropped |= {"if-match", "if-none-match"}
                headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
                connection.request(self.command, self.path, body=request.body, headers=headers)
                response = connection.getresponse()
                return response.status, response.getheaders(), response.read()
            finally:
                connection.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _serve

    return Handler


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GlueConnectionSettings:
    """How to reach a Glue endpoint: the emulator or, opted in, real AWS Glue.

    ``endpoint`` None means AWS's own endpoint; ``catalog_id`` None means the caller's root catalog.
    """

    region: str
    endpoint: str | None
    access_key_id: str | None
    secret_access_key: str | None
    session_token: str | None = None
    catalog_id: str | None = None

    def client(self, service_name: str = "glue", **config: Any) -> Any:
        """A boto3 client for Glue, STS or S3 there; ``config`` goes to botocore's Config."""
        return boto3.client(
            service_name,  # type: ignore[call-overload]
            region_name=self.region,
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            aws_session_token=self.session_token,
            config=Config(**config) if config else None,
        )


def glue_endpoint_from_env(
    environ: Mapping[str, str] | None = None,
) -> GlueConnectionSettings | None:
    """Settings for real AWS Glue when ``LANCE_METASTORE_TEST_GLUE_REAL=1``, else None.

    Region: ``LANCE_METASTORE_TEST_GLUE_REGION`` or boto3's default; endpoint (optional):
    ``LANCE_METASTORE_TEST_GLUE_ENDPOINT``; catalog: ``LANCE_METASTORE_TEST_GLUE_CATALOG_ID``;
    credentials: boto3's default chain, resolved now so callers get explicit values.
    """
    env = os.environ if environ is None else environ
    if env.get(REAL_GLUE_ENV) != "1":
        return None
    session = boto3.Session(region_name=env.get(REAL_GLUE_REGION_ENV) or None)
    credentials = session.get_credentials()
    if credentials is None:
        raise RuntimeError(f"{REAL_GLUE_ENV}=1 but boto3 found no AWS credentials.")
    frozen = credentials.get_frozen_credentials()
    return GlueConnectionSettings(
        region=session.region_name or "us-east-1",
        endpoint=env.get(REAL_GLUE_ENDPOINT_ENV) or None,
        access_key_id=frozen.access_key,
        secret_access_key=frozen.secret_key,
        session_token=frozen.token,
        catalog_id=env.get(REAL_GLUE_CATALOG_ID_ENV) or None,
    )


class StockMotoServer:
    """moto's server as shipped: ``ThreadedMotoServer(ip_address="127.0.0.1", port=0)``.

    What a user of moto, LocalStack and similar Glue-compatible endpoints has: databases and
    tables, no catalog API (GetCatalog(s) answer a bare HTTP 500), no ``VersionId`` check on
    UpdateTable. :class:`GlueEmulator` relays everything but Glue to one of these.
    """

    region: str = "us-east-1"
    access_key_id: str = "testing"
    secret_access_key: str = "testing"
    account_id: str = "123456789012"  # moto's default account
    has_catalog_api: bool = False
    folds_names: bool = False  # AWS stores database and table names lower-cased

    def __init__(self) -> None:
        self._moto: ThreadedMotoServer | None = None
        self._endpoint: str | None = None

    @property
    def endpoint(self) -> str:
        """The server's URL, e.g. ``http://127.0.0.1:54321``."""
        if self._endpoint is None:
            raise RuntimeError(f"{type(self).__name__} is not running: call start() first.")
        return self._endpoint

    @property
    def connection_settings(self) -> GlueConnectionSettings:
        return GlueConnectionSettings(
            region=self.region,
            endpoint=self.endpoint,
            access_key_id=self.access_key_id,
            secret_access_key=self.secret_access_key,
        )

    def client(self, service_name: str = "glue", **config: Any) -> Any:
        """A boto3 client for this endpoint (``config`` goes to botocore's Config)."""
        return self.connection_settings.client(service_name, **config)

    def start(self) -> Self:
        if self._moto is not None:
            raise RuntimeError(f"{type(self).__name__} is already running.")
        for name in ("moto", "werkzeug"):  # moto logs a traceback per action it lacks
            logging.getLogger(name).addFilter(_not_an_unimplemented_action)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._moto.start()
        host, port = self._moto.get_host_and_port()
        self._endpoint = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        if self._moto is not None:
            self._moto.stop()
        self._moto = self._endpoint = None

    def reset(self) -> None:
        """Forget moto's state (every service), through its documented ``/moto-api/reset``."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _not_an_unimplemented_action(record: logging.LogRecord) -> bool:
    """Drop flask's and werkzeug's traceback of an action moto lacks (werkzeug's is text)."""
    if record.exc_info and isinstance(record.exc_info[1], NotImplementedError):
        return False
    return "NotImplementedError: The " not in record.getMessage()


class GlueEmulator(StockMotoServer):
    """A Glue-compatible endpoint on 127.0.0.1: the emulated Glue, moto for everything else.

    Use as a context manager, or call ``start()``/``stop()``; ``reset()`` between tests.
    """

    has_catalog_api: bool = True
    folds_names: bool = True

    def __init__(self) -> None:
        super().__init__()
        self._state = _EmulatorState(self.account_id, self.region)
        self._front: ThreadingHTTPServer | None = None

    def start(self) -> Self:
        super().start()
        moto_endpoint = self._endpoint
        assert moto_endpoint is not None
        self._front = ThreadingHTTPServer(
            ("127.0.0.1", 0), _handler_for(self._state, moto_endpoint)
        )
        self._front.daemon_threads = True
        threading.Thread(target=self._front.serve_forever, daemon=True).start()
        host, port = self._front.server_address[:2]
        self._endpoint = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        if self._front is not None:
            self._front.shutdown()
            self._front.server_close()
            self._front = None
        super().stop()
        self._state.reset()

    def reset(self) -> None:
        """Forget everything: moto's state (all services), the Glue catalog and the faults."""
        super().reset()
        self._state.reset()

    @property
    def catalog_api_denied(self) -> GlueConnectionSettings:
        """Settings of a principal whose IAM policy grants no Glue catalog action.

        Its GetCatalog(s), CreateCatalog, UpdateCatalog and DeleteCatalog calls answer
        AccessDeniedException (HTTP 400), as AWS answers them; everything else it may do, on
        the same state the full principal sees.
        """
        return GlueConnectionSettings(
            region=self.region,
            endpoint=self.endpoint,
            access_key_id=_CATALOG_API_DENIED_KEY,
            secret_access_key=self.secret_access_key,
        )

    @property
    def catalog_calls_refused(self) -> int:
        """How many catalog calls the denied principal's policy refused since the reset."""
        return self._state.catalog_calls_refused

    # -- test-only helpers ------------------------------------------------------------------

    def add_federated_catalog(
        self, parent_catalog_id: str, name: str, parameters: dict[str, str] | None = None
    ) -> str:
        """Insert a catalog under any catalog, as AWS federation does (e.g. S3 Tables buckets).

        CreateCatalog can only make children of the root, so deeper catalogs need this stand-in.
        Returns the new catalog's id, e.g. ``123456789012:s3tablescatalog/my-bucket``.
        """
        if not name or any(ch in name for ch in ":/\\"):
            raise ValueError(f"invalid federated catalog name: {name!r}")
        with self._state.lock:
            glue = self._state.glue
            try:
                parent = glue.catalog(parent_catalog_id, self.account_id)
                catalog = glue.add_catalog(parent, name, {"Parameters": dict(parameters or {})})
            except GlueError as error:
                raise ValueError(error.message) from None
        return catalog.catalog_id

    def inject_fault(
        self,
        action: str,
        error_code: str,
        http_status: int,
        times: int = 1,
        message: str = "Injected by GlueEmulator.",
        after_apply: bool = False,
    ) -> None:
        """Answer the next ``times`` calls of a Glue action ("GetTable", or "*") with an error.

        ``after_apply``: the call takes effect first, as when a server fails after committing
        or a reply is lost on its way back; the client sees only the error.
        """
        if not 400 <= http_status <= 599:
            raise ValueError("http_status must be an error status (400-599)")
        if times < 1:
            raise ValueError("times must be at least 1")
        fault = _Fault(action, times, error_code, http_status, message, after_apply=after_apply)
        with self._state.lock:
            self._state.errors.append(fault)

    def inject_delay(self, action: str, seconds: float, times: int = 1) -> None:
        """Hold the next ``times`` calls of a Glue action for ``seconds`` (to provoke timeouts)."""
        if seconds < 0 or times < 1:
            raise ValueError("seconds must be >= 0 and times >= 1")
        with self._state.lock:
            self._state.delays.append(_Fault(action, times, delay_seconds=seconds))

    @contextlib.contextmanager
    def storage_fault(
        self,
        method: str,
        path: str,
        http_status: int = 503,
        error_code: str = "SlowDown",
        times: int | None = None,
        after_apply: bool = False,
    ) -> Iterator[_StorageFault]:
        """Refuse relayed (S3) requests of ``method`` whose path matches the regular expression
        ``path`` with S3's error answer, ``times`` times or for the whole block; the fault's
        ``met`` counts the requests refused. ``after_apply``: moto applies each first (the
        write lands, its answer is lost). moto itself is unchanged."""
        fault = _StorageFault(
            method, re.compile(path), http_status, error_code, times, after_apply=after_apply
        )
        with self._state.lock:
            self._state.storage_faults.append(fault)
        try:
            yield fault
        finally:
            with self._state.lock:
                if fault in self._state.storage_faults:
                    self._state.storage_faults.remove(fault)

    @contextlib.contextmanager
    def ignoring_conditional_writes(self) -> Iterator[None]:
        """For the block, S3 as some S3-compatible stores and proxies are: ``If-Match`` and
        ``If-None-Match`` are dropped, so every conditional write succeeds."""
        with self._state.lock:
            self._state.conditional_writes_ignored = True
        try:
            yield
        finally:
            with self._state.lock:
                self._state.conditional_writes_ignored = False

    def clear_faults(self) -> None:
        with self._state.lock:
            self._state.errors.clear()
            self._state.delays.clear()
            self._state.storage_faults.clear()

    def pending_faults(self) -> int:
        """How many injected errors and delays no call has met yet (tests wait on 0)."""
        with self._state.lock:
            return sum(f.remaining for f in self._state.errors + self._state.delays)

    @contextlib.contextmanager
    def fault(
        self, action: str, error_code: str, http_status: int, **options: Any
    ) -> Iterator[None]:
        """``inject_fault`` for the ``with`` block; every fault is cleared when it ends."""
        self.inject_fault(action, error_code, http_status, **options)
        try:
            yield
        finally:
            self.clear_faults()

    @contextlib.contextmanager
    def hold(
        self,
        action: str,
        when: Callable[[dict[str, Any]], bool] | None = None,
        timeout: float = 60.0,
    ) -> Iterator[HeldRequest]:
        """Hold the next call of ``action`` (whose parameters ``when`` accepts) before it is
        applied, until the block's ``release()`` or its end (see :class:`HeldRequest`)."""
        held = HeldRequest(action, when, timeout)
        with self._state.lock:
            self._state.holds.append(held)
        try:
            yield held
        finally:
            with self._state.lock:
                if held in self._state.holds:
                    self._state.holds.remove(held)
            held.release()

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[RecordedRequest]]:
        """Every request the endpoint receives in the block (Glue and relayed), in order."""
        log: list[RecordedRequest] = []
        with self._state.lock:
            self._state.log = log
        try:
            yield log
        finally:
            with self._state.lock:
                self._state.log = None

    @contextlib.contextmanager
    def check_signatures(self, secrets: Mapping[str, str]) -> Iterator[None]:
        """Check the SigV4 signature of Glue requests in the block, as AWS does: keys not in
        ``secrets`` (access key -> secret) answer UnrecognizedClientException, a wrong
        signature InvalidSignatureException."""
        with self._state.lock:
            self._state.secrets = dict(secrets)
        try:
            yield
        finally:
            with self._state.lock:
                self._state.secrets = None
