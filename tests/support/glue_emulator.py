"""A Glue-compatible test endpoint: moto's server plus Glue behaviour AWS documents but moto lacks.

Our library relies on parts of Glue that moto does not implement: the catalog hierarchy
(CreateCatalog, GetCatalog(s), UpdateCatalog, DeleteCatalog), databases and tables scoped to a
catalog through ``CatalogId``, lower-cased database and table names, and ``VersionId`` checks on
UpdateTable. ``GlueEmulator`` runs a real ``ThreadedMotoServer`` on 127.0.0.1 (Glue, STS and S3 on
one port, spoken to over HTTP) and installs those behaviours in its Glue handler only, so every
other moto behaviour stays as it is. It also offers fault injection for resilience tests.

State layout: the root catalog of an account and region is moto's own Glue backend; every other
catalog gets a separate moto ``GlueBackend`` of its own, so databases and tables are scoped per
catalog by construction, and requests are routed to one of them by their ``CatalogId``. A
CatalogId's account prefix picks the account, without cross-account permission checks.

Modes for endpoints as they are deployed:

- **catalog API denied** (``GlueEmulator.catalog_api_denied``): connection settings of a second
  principal whose IAM policy grants database and table actions but no catalog action; the
  emulator answers its GetCatalog(s), CreateCatalog, UpdateCatalog and DeleteCatalog with
  AWS's AccessDeniedException, on the same server and state as the full principal.
- **moto as shipped** (``StockMotoServer``): a plain ``ThreadedMotoServer`` with none of the
  extensions above: no catalog API (500 "not implemented"), no ``VersionId`` check, no name
  folding, no serialized writes. It runs in this process, so it shares moto's in-memory state
  with the emulator: a reset of either forgets both.

``glue_endpoint_from_env()`` lets the same tests run against real AWS Glue instead
(``LANCE_METASTORE_TEST_GLUE_REAL=1``); the emulator-only helpers are not available there.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import os
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

import boto3
from botocore.config import Config
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.responses import TYPE_RESPONSE, ActionResult, EmptyResult
from moto.core.utils import convert_to_flask_response, utcnow
from moto.glue.exceptions import GlueClientError
from moto.glue.models import FakeDatabase, FakeTable, GlueBackend, glue_backends
from moto.glue.responses import GlueResponse
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from moto.utilities.utils import get_partition
from werkzeug.serving import make_server

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "CATALOG_ACTIONS",
    "REAL_GLUE_ENV",
    "GlueConnectionSettings",
    "GlueEmulator",
    "StockMotoServer",
    "glue_endpoint_from_env",
]

REAL_GLUE_ENV = "LANCE_METASTORE_TEST_GLUE_REAL"
REAL_GLUE_CATALOG_ID_ENV = "LANCE_METASTORE_TEST_GLUE_CATALOG_ID"
REAL_GLUE_ENDPOINT_ENV = "LANCE_METASTORE_TEST_GLUE_ENDPOINT"
REAL_GLUE_REGION_ENV = "LANCE_METASTORE_TEST_GLUE_REGION"

_ACCOUNT_ID_PATTERN = re.compile(r"\d{12}")
_DEFAULT_PAGE_SIZE = 100
_MAX_PAGE_SIZE = 1000

# Actions whose databases and tables live in the catalog named by the request's CatalogId.
_CATALOG_SCOPED_ACTIONS = frozenset(
    {
        "CreateDatabase",
        "GetDatabase",
        "GetDatabases",
        "UpdateDatabase",
        "DeleteDatabase",
        "CreateTable",
        "GetTable",
        "GetTables",
        "UpdateTable",
        "DeleteTable",
        "BatchDeleteTable",
        "GetTableVersion",
        "GetTableVersions",
        "DeleteTableVersion",
        "CreatePartition",
        "BatchCreatePartition",
        "GetPartition",
        "GetPartitions",
        "BatchGetPartition",
        "UpdatePartition",
        "BatchUpdatePartition",
        "DeletePartition",
        "BatchDeletePartition",
        "GetPartitionIndexes",
    }
)
# Glue's catalog API: what an IAM policy without glue:*Catalog* actions may not call.
CATALOG_ACTIONS = frozenset(
    {"CreateCatalog", "GetCatalog", "GetCatalogs", "UpdateCatalog", "DeleteCatalog"}
)
# The access key of the principal whose policy grants no catalog action.
_CATALOG_API_DENIED_KEY = "AKIACATALOGAPIDENIED"  # moto reads 20-character key ids only
# Actions whose top-level ``Name`` is a database or table name (elsewhere it names a job, ...).
_NAME_IS_DATABASE_OR_TABLE = frozenset(
    {"GetDatabase", "UpdateDatabase", "DeleteDatabase", "GetTable", "UpdateTable", "DeleteTable"}
)
# CatalogInput fields that GetCatalog echoes back as they were given.
_ECHOED_CATALOG_FIELDS = (
    "TargetRedshiftCatalog",
    "FederatedCatalog",
    "CatalogProperties",
    "CreateTableDefaultPermissions",
    "CreateDatabaseDefaultPermissions",
    "AllowFullTableExternalDataAccess",
)


def _invalid_input(message: str) -> GlueClientError:
    return GlueClientError("InvalidInputException", message)


def _not_found(message: str) -> GlueClientError:
    return GlueClientError("EntityNotFoundException", message)


# --------------------------------------------------------------------------------------------
# Catalog hierarchy
# --------------------------------------------------------------------------------------------


class _CatalogStore(GlueBackend):
    """Databases and tables of one non-root catalog (moto's own backend serves the root).

    moto stamps databases and tables with the account id; here they report their catalog's id.
    """

    def __init__(self, region_name: str, account_id: str, catalog_id: str) -> None:
        super().__init__(region_name, account_id)
        self.catalog_id = catalog_id

    def create_database(
        self,
        database_name: str,
        database_input: dict[str, Any],
        tags: dict[str, str] | None = None,
    ) -> FakeDatabase:
        database = super().create_database(database_name, database_input, tags)
        database.catalog_id = self.catalog_id
        return database

    def create_table(
        self,
        database_name: str,
        table_name: str,
        table_input: dict[str, Any],
        open_table_format_input: dict[str, Any] | None = None,
    ) -> FakeTable:
        table = super().create_table(
            database_name, table_name, table_input, open_table_format_input
        )
        table.catalog_id = self.catalog_id
        return table


@dataclass
class _Catalog:
    """One node of the hierarchy; ``store`` holds its databases and tables."""

    catalog_id: str
    name: str
    parent_id: str | None
    resource_arn: str
    store: GlueBackend
    catalog_input: dict[str, Any] = field(default_factory=dict)
    create_time: datetime = field(default_factory=utcnow)
    update_time: datetime = field(default_factory=utcnow)

    @property
    def is_root(self) -> bool:
        return self.parent_id is None

    def as_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "CatalogId": self.catalog_id,
            "Name": self.name,
            "ResourceArn": self.resource_arn,
            "Parameters": dict(self.catalog_input.get("Parameters") or {}),
            "CreateTime": self.create_time,
            "UpdateTime": self.update_time,
        }
        if self.catalog_input.get("Description") is not None:
            result["Description"] = self.catalog_input["Description"]
        for key in _ECHOED_CATALOG_FIELDS:
            if key in self.catalog_input:
                result[key] = self.catalog_input[key]
        return result


class _CatalogTree:
    """The catalogs of one account and region, by catalog id (the root's id is the account id)."""

    def __init__(self, root_store: GlueBackend) -> None:
        account_id, region = root_store.account_id, root_store.region_name
        self.root = _Catalog(
            catalog_id=account_id,
            name=account_id,
            parent_id=None,
            resource_arn=f"arn:{get_partition(region)}:glue:{region}:{account_id}:catalog",
            store=root_store,
        )
        self.catalogs: dict[str, _Catalog] = {account_id: self.root}

    def get(self, catalog_id: str) -> _Catalog:
        try:
            return self.catalogs[catalog_id]
        except KeyError:
            raise _not_found(f"Catalog {catalog_id} not found.") from None

    def add(self, parent: _Catalog, name: str, catalog_input: dict[str, Any]) -> _Catalog:
        """Insert a child; ids follow AWS: ``<account>:<name>``, then ``.../<child>``."""
        separator = ":" if parent.is_root else "/"
        catalog_id = f"{parent.catalog_id}{separator}{name}"
        if catalog_id in self.catalogs:
            raise GlueClientError("AlreadyExistsException", f"Catalog {catalog_id} already exists.")
        path = catalog_id.split(":", 1)[1]
        catalog = _Catalog(
            catalog_id=catalog_id,
            name=name,
            parent_id=parent.catalog_id,
            resource_arn=f"{self.root.resource_arn}/{path}",
            store=_CatalogStore(self.root.store.region_name, self.root.catalog_id, catalog_id),
            catalog_input=dict(catalog_input),
        )
        self.catalogs[catalog_id] = catalog
        return catalog

    def children(self, parent: _Catalog, *, recursive: bool) -> list[_Catalog]:
        found = [c for c in self.catalogs.values() if c.parent_id == parent.catalog_id]
        if recursive:
            for child in list(found):
                found.extend(self.children(child, recursive=True))
        return found

    def remove(self, catalog: _Catalog) -> None:
        del self.catalogs[catalog.catalog_id]
        self.root.store.tagger.delete_all_tags_for_resource(catalog.resource_arn)


def _validate_catalog_name(name: Any, account_id: str) -> str:
    """CreateCatalog's documented name rules (CatalogNameString plus 'not the account id')."""
    if not isinstance(name, str) or not 1 <= len(name) <= 64:
        raise _invalid_input("Catalog name must be between 1 and 64 characters long.")
    if any(ch in name for ch in "./\\"):
        raise _invalid_input("Catalog name may not contain '.', '/' or '\\'.")
    if name.startswith("aws:"):
        raise _invalid_input("Catalog name may not start with 'aws:'.")
    if name == account_id:
        raise _invalid_input("Catalog name may not be the same as the account id.")
    return name


# --------------------------------------------------------------------------------------------
# Fault injection
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

    def matches(self, action: str) -> bool:
        return self.action in ("*", action)


class _FaultPlan:
    """Errors and delays queued for upcoming Glue requests; the first matching rule wins."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._errors: list[_Fault] = []
        self._delays: list[_Fault] = []

    def add_error(self, fault: _Fault) -> None:
        with self._lock:
            self._errors.append(fault)

    def add_delay(self, fault: _Fault) -> None:
        with self._lock:
            self._delays.append(fault)

    def take_error(self, action: str) -> _Fault | None:
        return self._take(self._errors, action)

    def take_delay(self, action: str) -> _Fault | None:
        return self._take(self._delays, action)

    def clear(self) -> None:
        with self._lock:
            self._errors.clear()
            self._delays.clear()

    def pending(self) -> int:
        with self._lock:
            return sum(fault.remaining for fault in self._errors + self._delays)

    def _take(self, faults: list[_Fault], action: str) -> _Fault | None:
        with self._lock:
            for fault in faults:
                if fault.matches(action):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        faults.remove(fault)
                    return fault
        return None


# --------------------------------------------------------------------------------------------
# Emulator state and the Glue handler
# --------------------------------------------------------------------------------------------


class _ReadWriteLock:
    """Many readers or one writer: AWS serves reads concurrently, moto's models need writes
    alone (and UpdateTable's VersionId check-and-update must be atomic)."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._readers = 0
        self._writing = False

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        with self._condition:
            while self._writing:
                self._condition.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._condition:
                self._readers -= 1
                if not self._readers:
                    self._condition.notify_all()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        with self._condition:
            while self._writing or self._readers:
                self._condition.wait()
            self._writing = True
        try:
            yield
        finally:
            with self._condition:
                self._writing = False
                self._condition.notify_all()


_READ_ACTION_PREFIXES = ("Get", "List", "Search", "BatchGet")


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


class _EmulatorState:
    """Everything the emulator adds to moto, shared by the server's request threads."""

    def __init__(self) -> None:
        # Writes run one at a time (moto's models are not thread-safe); reads run together.
        self.lock = threading.RLock()
        self.access = _ReadWriteLock()
        self.faults = _FaultPlan()
        self.holds: list[HeldRequest] = []
        self._trees: dict[tuple[str, str], _CatalogTree] = {}
        self.catalog_calls_refused = 0  # by the catalog-API-denied principal's policy

    def tree(self, account_id: str, region: str) -> _CatalogTree:
        """The account's catalogs; rebuilt when moto's backend was reset underneath us."""
        root_store = glue_backends[account_id][region]
        tree = self._trees.get((account_id, region))
        if tree is None or tree.root.store is not root_store:
            tree = self._trees[(account_id, region)] = _CatalogTree(root_store)
        return tree

    def catalog(self, catalog_id: str | None, caller_account: str, region: str) -> _Catalog:
        """Resolve a CatalogId; empty means the caller's root catalog."""
        if not catalog_id:
            return self.tree(caller_account, region).root
        account_id = catalog_id.split(":", 1)[0]
        if not _ACCOUNT_ID_PATTERN.fullmatch(account_id):
            raise _not_found(f"Catalog {catalog_id} not found.")
        return self.tree(account_id, region).get(catalog_id)

    def reset(self) -> None:
        with self.lock:
            self._trees.clear()
            self.catalog_calls_refused = 0
        self.faults.clear()


def _lowercase_names(action: str, params: dict[str, Any]) -> None:
    """AWS stores database and table names in lower case and matches them case-insensitively."""
    if action not in _CATALOG_SCOPED_ACTIONS:
        return
    keys = ["DatabaseName", "TableName"]
    if action in _NAME_IS_DATABASE_OR_TABLE:
        keys.append("Name")
    for key in keys:
        if isinstance(params.get(key), str):
            params[key] = params[key].lower()
    for key in ("DatabaseInput", "TableInput"):
        nested = params.get(key)
        if isinstance(nested, dict) and isinstance(nested.get("Name"), str):
            nested["Name"] = nested["Name"].lower()
    if isinstance(params.get("TablesToDelete"), list):
        params["TablesToDelete"] = [
            name.lower() if isinstance(name, str) else name for name in params["TablesToDelete"]
        ]


class _EmulatedGlueResponse(GlueResponse):
    """moto's Glue handler with the catalog hierarchy, name folding, VersionId and faults.

    Public methods are dispatched by action name (``CreateCatalog`` -> ``create_catalog``), so
    helpers are private.
    """

    state: ClassVar[_EmulatorState]

    def __init__(self) -> None:
        super().__init__()
        self._params: dict[str, Any] | None = None

    @classmethod
    def bound_to(cls, state: _EmulatorState) -> type[_EmulatedGlueResponse]:
        """A handler class for one emulator; moto instantiates it without arguments."""
        return type(cls.__name__, (cls,), {"state": state})

    # moto re-parses the body on every access; parse once so name folding sticks.
    @property
    def parameters(self) -> dict[str, Any]:  # type: ignore[override]
        if self._params is None:
            self._params = json.loads(self.body or "{}")
            _lowercase_names(self._get_action(), self._params)
        return self._params

    @property
    def glue_backend(self) -> GlueBackend:
        if self._get_action() in _CATALOG_SCOPED_ACTIONS:
            return self._catalog(self.parameters.get("CatalogId")).store
        return self._tree().root.store

    def call_action(self) -> TYPE_RESPONSE:
        action = self._get_action()
        if action in CATALOG_ACTIONS and self.get_access_key() == _CATALOG_API_DENIED_KEY:
            return self._catalog_api_denied(action)
        held = self._take_hold(action)
        if held is not None:
            held.hold()  # outside every lock: the other requests go on meanwhile
        delay = self.state.faults.take_delay(action)
        if delay is not None:
            time.sleep(delay.delay_seconds)
        fault = self.state.faults.take_error(action)
        if fault is not None and not fault.after_apply:
            return self._fault_response(fault)
        if action.startswith(_READ_ACTION_PREFIXES):
            with self.state.access.reading():
                response = super().call_action()
        else:
            with self.state.access.writing(), self.state.lock:
                response = super().call_action()
        return self._fault_response(fault) if fault is not None else response

    # -- catalogs ---------------------------------------------------------------------------

    def create_catalog(self) -> ActionResult:
        """AWS's CreateCatalog has no parent: new catalogs are children of the caller's root."""
        tree = self._tree()
        name = _validate_catalog_name(self.parameters.get("Name"), tree.root.catalog_id)
        catalog = tree.add(tree.root, name, self.parameters.get("CatalogInput") or {})
        tree.root.store.tag_resource(catalog.resource_arn, self.parameters.get("Tags"))
        return EmptyResult()

    def get_catalog(self) -> ActionResult:
        catalog = self._catalog(self._required("CatalogId"))
        return ActionResult({"Catalog": catalog.as_dict()})

    def get_catalogs(self) -> ActionResult:
        params = self.parameters
        parent = self._catalog(params.get("ParentCatalogId"))
        include_root = params.get("IncludeRoot")
        if include_root is not None and not parent.is_root:
            raise _invalid_input("IncludeRoot is only allowed when ParentCatalogId is the account.")
        max_results = params.get("MaxResults", _DEFAULT_PAGE_SIZE)
        if not isinstance(max_results, int) or not 1 <= max_results <= _MAX_PAGE_SIZE:
            raise _invalid_input(f"MaxResults must be between 1 and {_MAX_PAGE_SIZE}.")

        tree = self.state.tree(parent.store.account_id, self.region)
        catalogs = tree.children(parent, recursive=bool(params.get("Recursive")))
        if include_root:
            catalogs.append(parent)
        if params.get("HasDatabases"):
            # Below the root, catalogs that hold catalogs are containers (like s3tablescatalog).
            catalogs = [c for c in catalogs if c.is_root or not tree.children(c, recursive=False)]
        catalogs.sort(key=lambda c: c.catalog_id)

        after = _decode_token(params.get("NextToken"))
        if after is not None:
            catalogs = [c for c in catalogs if c.catalog_id > after]
        page = catalogs[:max_results]
        result: dict[str, Any] = {"CatalogList": [c.as_dict() for c in page]}
        if len(catalogs) > max_results:
            result["NextToken"] = _encode_token(page[-1].catalog_id)
        return ActionResult(result)

    def update_catalog(self) -> ActionResult:
        """Replaces the catalog's input, as Glue's Update* operations do."""
        catalog = self._catalog(self._required("CatalogId"))
        if catalog.is_root:
            raise _invalid_input("The default catalog of the account can't be updated.")
        catalog.catalog_input = dict(self.parameters.get("CatalogInput") or {})
        catalog.update_time = utcnow()
        return EmptyResult()

    def delete_catalog(self) -> ActionResult:
        """AWS documents that a catalog must be empty (no databases, no catalogs) to be deleted."""
        catalog = self._catalog(self._required("CatalogId"))
        if catalog.is_root:
            raise _invalid_input("The default catalog of the account can't be deleted.")
        tree = self.state.tree(catalog.store.account_id, self.region)
        if catalog.store.databases or tree.children(catalog, recursive=False):
            raise _invalid_input(
                f"Catalog {catalog.catalog_id} is not empty: "
                "delete its databases and catalogs first."
            )
        tree.remove(catalog)
        return EmptyResult()

    # -- tables -----------------------------------------------------------------------------

    def update_table(self) -> ActionResult:
        """With VersionId, AWS updates only if it is still the table's current version."""
        expected = self.parameters.get("VersionId")
        if expected is not None:
            table_input = self.parameters.get("TableInput") or {}
            name = table_input.get("Name") or self.parameters.get("Name")
            table = self.glue_backend.get_table(self.parameters.get("DatabaseName"), name)  # type: ignore[arg-type]
            current = table.as_dict()["VersionId"]
            if expected != current:
                raise GlueClientError(
                    "ConcurrentModificationException",
                    f"Table {name} was updated concurrently: VersionId {expected} is not the "
                    f"current version {current}.",
                )
        return super().update_table()

    # -- helpers ----------------------------------------------------------------------------

    def _take_hold(self, action: str) -> HeldRequest | None:
        with self.state.lock:
            for held in self.state.holds:
                if held.matches(action, self.parameters):
                    self.state.holds.remove(held)
                    return held
        return None

    def _tree(self) -> _CatalogTree:
        return self.state.tree(self.current_account, self.region)

    def _catalog(self, catalog_id: str | None) -> _Catalog:
        return self.state.catalog(catalog_id, self.current_account, self.region)

    def _required(self, key: str) -> Any:
        value = self.parameters.get(key)
        if value in (None, ""):
            raise _invalid_input(f"{key} is required.")
        return value

    def _catalog_api_denied(self, action: str) -> TYPE_RESPONSE:
        """What AWS answers a principal whose identity policy lacks the action."""
        with self.state.lock:
            self.state.catalog_calls_refused += 1
        user = f"arn:aws:iam::{self.current_account}:user/no-catalog-actions"
        resource = f"arn:aws:glue:{self.region}:{self.current_account}:catalog"
        message = (
            f"User: {user} is not authorized to perform: glue:{action} on resource: "
            f"{resource} because no identity-based policy allows the glue:{action} action"
        )
        return self._fault_response(_Fault(action, 1, "AccessDeniedException", 400, message))

    def _fault_response(self, fault: _Fault) -> TYPE_RESPONSE:
        """The AWS JSON protocol's error shape, so botocore raises ClientError with this code."""
        body = json.dumps({"__type": fault.error_code, "message": fault.message})
        headers = {
            "Content-Type": "application/x-amz-json-1.1",
            "x-amzn-ErrorType": fault.error_code,
            "status": str(fault.http_status),
        }
        headers, body = self._enrich_response(headers, body)
        return fault.http_status, headers, body


def _encode_token(after_catalog_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": after_catalog_id}).encode()).decode()


def _decode_token(token: Any) -> str | None:
    if not token:
        return None
    try:
        after = json.loads(base64.urlsafe_b64decode(str(token).encode()))["after"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise _invalid_input("Invalid NextToken.") from None
    if not isinstance(after, str):
        raise _invalid_input("Invalid NextToken.")
    return after


class _EmulatorServer(ThreadedMotoServer):
    """moto's threaded server, with the Glue service answered by our handler class."""

    def __init__(self, glue_handler: type[_EmulatedGlueResponse]) -> None:
        super().__init__(ip_address="127.0.0.1", port=0, verbose=False)
        self._glue_handler = glue_handler

    def _create_app(self, service: Any) -> Any:
        app = create_backend_app(service)
        if service == "glue":
            view = convert_to_flask_response(self._glue_handler.dispatch)
            for endpoint in list(app.view_functions):
                if endpoint.startswith("GlueResponse.dispatch"):
                    app.view_functions[endpoint] = view
        return app

    def _server_entry(self) -> None:
        # Same as moto's, except for the app factory.
        self._server = make_server(
            self._ip_address,
            self._port,
            DomainDispatcherApplication(self._create_app),
            True,
            request_handler=MotoRequestHandler,
        )
        self._server_ready_event.set()
        self._server.serve_forever()


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


class _LoopbackGlueServer:
    """What every Glue-compatible endpoint of the tests shares: moto's threaded server on
    127.0.0.1 (an OS-chosen port), its URL, clients, resetting moto's state, start/stop."""

    region: str = "us-east-1"
    access_key_id: str = "testing"
    secret_access_key: str = "testing"

    def __init__(self) -> None:
        self._server: ThreadedMotoServer | None = None
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

    def _new_server(self) -> ThreadedMotoServer:
        raise NotImplementedError

    def start(self) -> Self:
        if self._server is not None:
            raise RuntimeError(f"{type(self).__name__} is already running.")
        # One log line per request drowns test output.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        server = self._new_server()
        server.start()
        host, port = server.get_host_and_port()
        self._server, self._endpoint = server, f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
        self._server = self._endpoint = None

    def reset(self) -> None:
        """Forget moto's state (every service)."""
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


class GlueEmulator(_LoopbackGlueServer):
    """A Glue-compatible endpoint on 127.0.0.1: moto's server (Glue, STS, S3) plus extensions.

    Use as a context manager, or call ``start()``/``stop()``; ``reset()`` between tests.
    """

    account_id: str = DEFAULT_ACCOUNT_ID
    has_catalog_api: bool = True
    folds_names: bool = True

    def __init__(self) -> None:
        super().__init__()
        self._state = _EmulatorState()

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

    def _new_server(self) -> ThreadedMotoServer:
        return _EmulatorServer(_EmulatedGlueResponse.bound_to(self._state))

    def stop(self) -> None:
        super().stop()
        self._state.reset()

    def reset(self) -> None:
        """Forget everything: moto's state (all services) and the emulator's catalogs and faults."""
        super().reset()
        self._state.reset()

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
            account_id = parent_catalog_id.split(":", 1)[0]
            try:
                parent = self._state.catalog(parent_catalog_id, account_id, self.region)
                tree = self._state.tree(parent.store.account_id, self.region)
                catalog = tree.add(parent, name, {"Parameters": dict(parameters or {})})
            except GlueClientError as error:
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
        self._state.faults.add_error(
            _Fault(
                action,
                times,
                error_code=error_code,
                http_status=http_status,
                message=message,
                after_apply=after_apply,
            )
        )

    def inject_delay(self, action: str, seconds: float, times: int = 1) -> None:
        """Hold the next ``times`` calls of a Glue action for ``seconds`` (to provoke timeouts)."""
        if seconds < 0 or times < 1:
            raise ValueError("seconds must be >= 0 and times >= 1")
        self._state.faults.add_delay(_Fault(action, times, delay_seconds=seconds))

    def clear_faults(self) -> None:
        self._state.faults.clear()

    def pending_faults(self) -> int:
        """How many injected errors and delays no call has met yet (tests wait on 0)."""
        return self._state.faults.pending()

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
    def fault(
        self, action: str, error_code: str, http_status: int, **options: Any
    ) -> Iterator[None]:
        """``inject_fault`` for the ``with`` block; every fault is cleared when it ends."""
        self.inject_fault(action, error_code, http_status, **options)
        try:
            yield
        finally:
            self.clear_faults()


def _not_an_unimplemented_action(record: logging.LogRecord) -> bool:
    """Drop flask's and werkzeug's traceback of an action moto lacks (werkzeug's is text)."""
    if record.exc_info and isinstance(record.exc_info[1], NotImplementedError):
        return False
    return "NotImplementedError: The " not in record.getMessage()


class StockMotoServer(_LoopbackGlueServer):
    """moto's server as shipped: ``ThreadedMotoServer(ip_address="127.0.0.1", port=0)``.

    What a user of moto, LocalStack and similar Glue-compatible endpoints has: databases and
    tables, no catalog API (GetCatalog(s) answer a bare HTTP 500), no ``VersionId`` check on
    UpdateTable. Same interface as :class:`GlueEmulator` for connecting and resetting.
    """

    has_catalog_api: bool = False
    folds_names: bool = False  # AWS stores database and table names lower-cased

    def _new_server(self) -> ThreadedMotoServer:
        # Each call of an action moto lacks logs a traceback, twice: expected here.
        for name in ("moto", "werkzeug"):
            logging.getLogger(name).addFilter(_not_an_unimplemented_action)
        return ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
