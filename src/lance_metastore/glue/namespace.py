"""AWS Glue Data Catalog backend (spec: glue-namespace.md, glue-table-definition.md).

Object mapping: every catalog level, the root included, has two kinds of children, its
databases and its child catalogs. ``["db", "t"]`` is table ``t`` of database ``db`` in the
root catalog (the older 2-level mapping keeps working); ``["cat", "db", "t"]`` reaches a
child catalog. A table id is unambiguous: its second-to-last part is always a database. A
namespace id whose last part names both a database and a catalog resolves to the database.

CreateNamespace makes a database unless its properties say ``glue.kind=catalog``. AWS's
CreateCatalog has no parent parameter, so only children of the account's root catalog can be
created; deeper catalogs (made by federation, e.g. S3 Tables) are traversed, never created.

The catalog API (GetCatalog(s), CreateCatalog, ...) is called only where an id needs it: more
than one namespace level, a one-level id that is not a database, the root's child catalogs in
a listing, and the check that a new database does not shadow a catalog. Compatible endpoints
(moto's server, LocalStack) lack that API, and many IAM policies grant database and table
actions only; the first need of the API probes it once per namespace object. Without it the
namespace serves the root catalog alone: databases and their tables, as the 2-level layout
always did, and multi-level ids answer 13 saying why.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, cast

from lance_namespace.errors import (
    ConcurrentModificationError,
    InternalError,
    InvalidInputError,
    LanceNamespaceError,
    NamespaceAlreadyExistsError,
    NamespaceNotFoundError,
    PermissionDeniedError,
    ServiceUnavailableError,
    TableAlreadyExistsError,
    TableNotFoundError,
    ThrottlingError,
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
    one_of,
    positive_float,
    positive_int,
)
from ..rules.credentials import VENDOR_PROPERTIES
from ..rules.errors import lance_error
from ..rules.extras import requires_extra
from ..rules.identifiers import NameRules, Path, describe
from ..rules.schema import CatalogColumn
from ..rules.tables import EXTERNAL_TABLE, TableEntry, join_location

with requires_extra("glue"):
    from botocore import exceptions as bx
    from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_glue import GlueClient
    from mypy_boto3_glue.type_defs import (
        CatalogInputTypeDef,
        ColumnTypeDef,
        DatabaseInputTypeDef,
        StorageDescriptorTypeDef,
        TableInputTypeDef,
    )

logger = logging.getLogger("lance_metastore.glue")


class _CatalogIds(TypedDict, total=False):
    """The ``CatalogId`` argument of a Glue call; absent, Glue uses the account's catalog."""

    CatalogId: str


def _column_input(column: CatalogColumn) -> ColumnTypeDef:
    found: ColumnTypeDef = {"Name": column.name, "Type": column.type}
    if column.comment:
        found["Comment"] = column.comment
    return found


KIND_PROPERTY = "glue.kind"
DESCRIPTION = "description"
LOCATION = "location"
PAGE_SIZE = 100  # GetTables' and GetDatabases' maximum page
CATALOG_PAGE_SIZE = 1000
CATALOG_NAMES_SECONDS = 30.0

# Glue allows any single-line text in database and table names and stores them lower-cased.
DATABASE_RULES = NameRules(max_length=255)
TABLE_RULES = NameRules(max_length=255)
CATALOG_RULES = NameRules(
    max_length=64,
    pattern=re.compile(r"(?!aws:)[^./\\]+"),
    pattern_hint="catalog names may not contain '.', '/' or '\\' nor start with 'aws:'",
)

PROPERTIES: tuple[Property, ...] = (
    Property("catalog_id", "Glue catalog to start from (default: the caller's account)", non_empty),
    Property("endpoint", "Custom Glue endpoint for API-compatible metastores", non_empty),
    Property("region", "AWS region of every Glue call (default: the environment's)", non_empty),
    Property("access_key_id", "Static AWS access key id", non_empty, secret=True),
    Property("secret_access_key", "Static AWS secret access key", non_empty, secret=True),
    Property("session_token", "AWS session token of temporary credentials", non_empty, secret=True),
    Property("profile_name", "Named profile of the AWS config files", non_empty),
    Property("assume_role_arn", "IAM role to assume for Glue calls", non_empty),
    Property("assume_role_region", "Region of the STS client that assumes the role", non_empty),
    Property(
        "assume_role_external_id", "External id for cross-account roles", non_empty, secret=True
    ),
    Property("assume_role_session_name", "Session name of the assumed role", non_empty),
    Property(
        "assume_role_timeout_sec",
        "Lifetime of assumed-role credentials; renewed before they expire",
        positive_int,
        default=3600,
    ),
    Property(
        "sts_endpoint", "Custom STS endpoint (default: endpoint if set, else AWS's)", non_empty
    ),
    Property("max_retries", "Attempts for throttled or failed calls", positive_int, default=5),
    Property(
        "retry_mode",
        "botocore retry mode (backoff with jitter)",
        one_of("standard", "adaptive", "legacy"),
        default="standard",
    ),
    Property("connect_timeout_sec", "Connect timeout", positive_float, default=10.0),
    Property("read_timeout_sec", "Read timeout", positive_float, default=60.0),
    *LOCATION_PROPERTIES,
    *VENDOR_PROPERTIES,
    MANAGED_BY,
)

_PERMISSION = {"AccessDeniedException", "AccessDenied", "UnauthorizedOperation"}
_UNAUTHENTICATED = {
    "UnrecognizedClientException",
    "InvalidClientTokenId",
    "ExpiredTokenException",
    "ExpiredToken",
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "MissingAuthenticationTokenException",
    "IncompleteSignature",
    "AuthFailure",
}
_THROTTLING = {
    "ThrottlingException",
    "Throttling",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "SlowDown",
}
_UNAVAILABLE = {
    "InternalServiceException",
    "InternalFailure",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "OperationTimeoutException",
    "ResourceNotReadyException",
    "FederationSourceException",
    "FederationSourceRetryableException",
}
_INVALID = {"InvalidInputException", "ValidationException", "ValidationError"}
# How endpoints say they lack an operation: AWS's JSON protocol, query-style services, Java
# SDK-based servers; LocalStack answers 501 "not yet implemented"; moto's server a bare 500
# whose HTML body names nothing (botocore then reports the status as the code).
_UNKNOWN_OPERATION = {
    "UnknownOperationException",
    "UnknownOperation",
    "InvalidAction",
    "NotImplemented",
    "NotImplementedException",
    "UnsupportedOperation",
    "UnsupportedOperationException",
}
_NOT_IMPLEMENTED_TEXT = re.compile(
    r"not (?:yet |been )?(?:implemented|emulated)|unknown operation|get_?catalogs?\b", re.IGNORECASE
)


def _error_code(error: BaseException) -> str | None:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        code: str | None = response.get("Error", {}).get("Code")
        return code
    return None


@dataclass(frozen=True)
class CatalogApi:
    """Whether this namespace may use Glue's catalog API, and if not, why (for messages)."""

    available: bool
    reason: str = ""


def _catalog_api_refusal(error: BaseException, endpoint: str | None) -> str | None:
    """Why an error answering GetCatalogs shows the catalog API unusable here, or None when
    it shows nothing of the kind (throttling, an outage, ...: the probe is repeated later)."""
    code = _error_code(error)
    if code is None:
        return None
    response: dict[str, Any] = error.response  # type: ignore[attr-defined]
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    message = str(response.get("Error", {}).get("Message") or "")
    answer = f"HTTP {status}" if code == str(status) else code
    if code in _PERMISSION:
        return f"the caller may not use Glue's catalog API (GetCatalogs answered {answer})"
    where = f"the Glue endpoint {endpoint}" if endpoint else "the Glue endpoint"
    lacks = (
        code in _UNKNOWN_OPERATION
        or status == 501
        or (status == 500 and _NOT_IMPLEMENTED_TEXT.search(message) is not None)
        # A bare 500 that is no AWS error document, from a compatible server: AWS itself
        # always answers with one, so only a custom endpoint is read this way.
        or (status == 500 and code == "500" and endpoint is not None)
    )
    if lacks:
        return f"{where} does not implement Glue's catalog API (GetCatalogs answered {answer})"
    return None


def _retried(error: BaseException) -> bool:
    """Whether botocore sent the call more than once: an earlier attempt may have taken effect
    although its reply was lost (a 5xx after the change, a read timeout)."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return False
    return int(response.get("ResponseMetadata", {}).get("RetryAttempts") or 0) > 0


def _is_endpoint_url(url: str) -> bool:
    """What botocore accepts as endpoint_url (it raises a bare ValueError otherwise)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not 0-65535
    except ValueError:  # e.g. "http://[" (an unclosed IPv6 address)
        return False
    if parts.scheme.lower() not in ("http", "https") or parts.port == 0:
        return False
    return bool(is_valid_endpoint_url(url) or is_valid_ipv6_endpoint_url(url))


class GlueNamespace(CatalogNamespace):
    """Lance tables in the AWS Glue Data Catalog."""

    PROPERTIES = PROPERTIES
    SUPPORTS_CASCADE = False
    NAMESPACE_LOCATION_KEYS = (LOCATION,)

    def _configure(self, settings: Settings) -> None:
        has_key = settings["access_key_id"] is not None
        has_secret = settings["secret_access_key"] is not None
        if has_key != has_secret:
            raise InvalidInputError(
                "GlueNamespace: access_key_id and secret_access_key must be given together"
            )
        if settings["session_token"] is not None and not has_key:
            raise InvalidInputError(
                "GlueNamespace: session_token needs access_key_id and secret_access_key"
            )
        catalog_id = settings["catalog_id"]
        if catalog_id is not None and not re.fullmatch(r"\d{12}(:[^:]+)?", catalog_id):
            raise InvalidInputError(
                f"GlueNamespace: invalid catalog_id {catalog_id!r}: expected an account id "
                "or '<account-id>:<catalog>[/<child>...]'"
            )
        for name in ("endpoint", "sts_endpoint"):
            if settings[name] is not None and not _is_endpoint_url(settings[name]):
                raise InvalidInputError(
                    f"GlueNamespace: invalid {name} {settings[name]!r}: expected an http(s) URL "
                    "such as https://glue.us-east-1.amazonaws.com"
                )
        self._client_lock = threading.Lock()
        self._lookups = threading.local()
        # parent path -> (valid until, names of its child catalogs)
        self._catalog_names: dict[Path, tuple[float, frozenset[str]]] = {}
        self._session: boto3.Session | None = None
        self._glue: GlueClient | None = None
        self._account_id: str | None = None
        self._probe_lock = threading.Lock()
        self._catalog_api_state: CatalogApi | None = None

    def namespace_id(self) -> str:
        s = self._settings
        parts = [
            f"catalog_id: {s['catalog_id'] or 'caller account'!r}",
            f"region: {s['region'] or 'default'!r}",
        ]
        if s["endpoint"]:
            parts.append(f"endpoint: {s['endpoint']!r}")
        if s["assume_role_arn"]:
            parts.append(f"role: {s['assume_role_arn']!r}")
        if s["root"]:
            parts.append(f"root: {s['root']!r}")
        return "GlueNamespace { " + ", ".join(parts) + " }"

    def close(self) -> None:
        super().close()
        with self._client_lock:
            client, self._glue = self._glue, None
        if client is not None:
            client.close()  # its connection pool; a later call builds a new client

    # ----------------------------------------------------------------------------------------
    # Client
    # ----------------------------------------------------------------------------------------

    @property
    def glue(self) -> GlueClient:
        """The boto3 Glue client, built once (thread-safe) and shared by every call."""
        client = self._glue
        if client is None:
            with self._client_lock:
                if self._glue is None:
                    from .aws import glue_client

                    self._glue = glue_client(self._settings, self._aws_session())
                client = self._glue
        assert client is not None
        return client

    def _aws_session(self) -> boto3.Session:
        """The boto3 session every client of this namespace is built from (call under
        ``_client_lock``): an assumed role is assumed once."""
        if self._session is None:
            from .aws import glue_session

            self._session = glue_session(self._settings)
        return self._session

    # ----------------------------------------------------------------------------------------
    # The catalog API: probed once, on first need
    # ----------------------------------------------------------------------------------------

    def catalog_api(self) -> CatalogApi:
        """Whether Glue's catalog API is usable here, probed once per namespace object.

        The probe is one GetCatalogs call on a client that does not retry, so an endpoint
        that lacks the operation (moto's server answers 500) is recognised from its first
        answer instead of after every retry. An answer that says nothing about the API
        (throttling, an outage) is asked again with retries, and decides nothing if it
        persists: the operation fails with 21 or 17 and the next one probes again.
        """
        known = self._catalog_api_state
        if known is not None:
            return known
        with self._probe_lock:
            if self._catalog_api_state is None:
                try:
                    self._catalog_api_state = self._probe_catalog_api()
                except LanceNamespaceError:
                    raise
                except Exception as error:
                    context = "probe Glue's catalog API"
                    raise self._translate_error(error, context) or InternalError(
                        f"Unexpected error trying to {context}: {type(error).__name__}: {error}"
                    ) from None
            return self._catalog_api_state

    def _probe_catalog_api(self) -> CatalogApi:
        from .aws import glue_client

        kwargs: dict[str, Any] = {"MaxResults": 1}
        if self._settings["catalog_id"]:
            kwargs["ParentCatalogId"] = self._settings["catalog_id"]
        endpoint = self._settings["endpoint"]
        with self._client_lock:
            single_try = glue_client(self._settings, self._aws_session(), attempts=1)
        try:
            try:
                single_try.get_catalogs(**kwargs)
            except Exception as error:
                if _catalog_api_refusal(error, endpoint) is not None:
                    raise
                if _error_code(error) != "EntityNotFoundException":
                    self.glue.get_catalogs(**kwargs)  # botocore's retries decide
        except Exception as error:
            reason = _catalog_api_refusal(error, endpoint)
            if reason is None:
                if _error_code(error) == "EntityNotFoundException":
                    return CatalogApi(True)  # the API answered: catalog_id names no catalog
                raise
            logger.info("%s: serving the root catalog alone (its databases and tables)", reason)
            return CatalogApi(False, reason)
        finally:
            single_try.close()
        return CatalogApi(True)

    def _has_catalog_api(self) -> bool:
        return self.catalog_api().available

    def _root_catalog_only(self, parts: Path, what: str) -> InvalidInputError:
        return InvalidInputError(
            f"{what.capitalize()} {describe(parts)} names a child catalog, but "
            f"{self.catalog_api().reason}; this namespace serves the root catalog alone, "
            "whose namespaces are its databases (e.g. 'sales', tables 'sales$orders')"
        )

    def _root_catalog_id(self) -> str:
        """The root catalog's id, resolving the caller's account only when needed."""
        configured: str | None = self._settings["catalog_id"]
        if configured:
            return configured
        if self._account_id is None:
            from .aws import caller_account

            self._account_id = caller_account(self._settings)
        return self._account_id

    def _catalog_id(self, chain: Path) -> str | None:
        """CatalogId of a catalog chain below the root; None means the account's default."""
        if not chain:
            configured: str | None = self._settings["catalog_id"]
            return configured
        base = self._root_catalog_id()
        separator = "/" if ":" in base else ":"
        return base + separator + "/".join(chain)

    def _ids(self, chain: Path) -> _CatalogIds:
        catalog_id = self._catalog_id(chain)
        return {"CatalogId": catalog_id} if catalog_id else {}

    # ----------------------------------------------------------------------------------------
    # Identifiers
    # ----------------------------------------------------------------------------------------

    def _canonical_namespace(self, parts: Path) -> Path:
        normalized = [CATALOG_RULES.normalize(p, "catalog", parts) for p in parts[:-1]]
        if parts:
            # The last part may be a database or a catalog: apply the looser database rules
            # here; catalog creation checks the catalog rules itself.
            normalized.append(DATABASE_RULES.normalize(parts[-1], "namespace", parts))
        return tuple(normalized)

    def _normalize_namespace(self, parts: Path) -> Path:
        normalized = self._canonical_namespace(parts)
        if len(parts) > 1 and not self._has_catalog_api():
            raise self._root_catalog_only(parts, "namespace")
        return normalized

    def _canonical_table(self, parts: Path) -> tuple[Path, str]:
        if len(parts) < 2:
            raise InvalidInputError(
                f"Table identifier {describe(parts)} must name a database and a table "
                "(e.g. 'db$table' or 'catalog$db$table')"
            )
        chain = tuple(CATALOG_RULES.normalize(p, "catalog", parts) for p in parts[:-2])
        database = DATABASE_RULES.normalize(parts[-2], "database", parts)
        table = TABLE_RULES.normalize(parts[-1], "table", parts)
        return (*chain, database), table

    def _normalize_table(self, parts: Path) -> tuple[Path, str]:
        path, table = self._canonical_table(parts)
        if len(path) > 1 and not self._has_catalog_api():
            raise self._root_catalog_only(parts, "table")
        return path, table

    # ----------------------------------------------------------------------------------------
    # Error translation
    # ----------------------------------------------------------------------------------------

    def _translate_error(self, error: BaseException, context: str) -> LanceNamespaceError | None:
        code = _error_code(error)
        message = f"Glue refused to {context}: {error}"
        if code is not None:
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)  # type: ignore[attr-defined]
            if code in _PERMISSION:
                return PermissionDeniedError(message)
            if code in _UNAUTHENTICATED:
                return UnauthenticatedError(message)
            if code in _THROTTLING:
                return ThrottlingError(f"Glue kept throttling {context} after retries: {error}")
            if code in _INVALID:
                return InvalidInputError(message)
            if code == "ConcurrentModificationException":
                return ConcurrentModificationError(message)
            if code in _UNAVAILABLE or (isinstance(status, int) and status >= 500):
                return ServiceUnavailableError(f"Glue is unavailable to {context}: {error}")
            # An error body botocore could not parse leaves only the HTTP status.
            by_status = {401: UnauthenticatedError, 403: PermissionDeniedError}
            if status in by_status:
                return by_status[status](message)
            if status == 429:
                return ThrottlingError(f"Glue kept throttling {context} after retries: {error}")
            return InternalError(message)
        if isinstance(
            error, (bx.NoCredentialsError, bx.PartialCredentialsError, bx.CredentialRetrievalError)
        ):
            return UnauthenticatedError(
                f"No usable AWS credentials to {context}: {error}; set the access_key_id and "
                "secret_access_key properties, profile_name, or AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY"
            )
        if isinstance(error, bx.NoRegionError):
            return InvalidInputError(f"No AWS region to {context}: set the 'region' property")
        if isinstance(error, bx.ProfileNotFound):
            return InvalidInputError(f"Cannot {context}: {error} (check 'profile_name')")
        if isinstance(error, bx.ParamValidationError):
            return InvalidInputError(f"Invalid request to {context}: {error}")
        if isinstance(
            error,
            (
                bx.EndpointConnectionError,
                bx.ConnectionClosedError,
                bx.ConnectTimeoutError,
                bx.ReadTimeoutError,
                bx.HTTPClientError,
            ),
        ):
            return ServiceUnavailableError(
                f"Glue is unreachable to {context}: {error}; check the 'endpoint' and 'region' "
                "properties"
            )
        return None

    # ----------------------------------------------------------------------------------------
    # Raw Glue calls
    # ----------------------------------------------------------------------------------------

    def _call(self, method: str, **kwargs: Any) -> dict[str, Any] | None:
        """Call Glue; None on EntityNotFoundException, every other error propagates."""
        try:
            response: dict[str, Any] = getattr(self.glue, method)(**kwargs)
            return response
        except Exception as error:
            if _error_code(error) == "EntityNotFoundException":
                return None
            raise

    def _pages(self, method: str, key: str, **kwargs: Any) -> Iterator[dict[str, Any]] | None:
        """Every item of a NextToken-paged Glue listing; None if the parent is not found."""
        first = self._call(method, **kwargs)
        if first is None:
            return None

        def items() -> Iterator[dict[str, Any]]:
            response: dict[str, Any] | None = first
            while response is not None:
                yield from response.get(key, [])
                token = response.get("NextToken")
                if not token:
                    return
                response = getattr(self.glue, method)(**kwargs, NextToken=token)

        return items()

    def _get_database(self, path: Path) -> dict[str, Any] | None:
        response = self._call("get_database", Name=path[-1], **self._ids(path[:-1]))
        database: dict[str, Any] | None = None if response is None else response["Database"]
        return database

    def _get_catalog(self, path: Path) -> dict[str, Any] | None:
        response = self._call("get_catalog", CatalogId=self._catalog_id(path))
        return None if response is None else response["Catalog"]

    def _begin_operation(self) -> None:
        self._forget_kinds()

    def _memo(self) -> dict[Path, str]:
        memo = getattr(self._lookups, "kinds", None)
        if memo is None:
            memo = self._lookups.kinds = {}
        return memo

    def _remember_kind(self, path: Path, kind: str) -> None:
        """Within one operation, what a namespace path resolved to (database or catalog)."""
        self._memo()[path] = kind

    def _known_kind(self, path: Path) -> str | None:
        return self._memo().get(path)

    def _forget_kinds(self) -> None:
        self._memo().clear()

    def _kind(self, path: Path) -> tuple[str, dict[str, Any]] | None:
        database = self._get_database(path)
        if database is not None:
            self._remember_kind(path, "database")
            return "database", database
        if not self._has_catalog_api():
            return None  # no catalogs here: only the root's databases exist
        catalog = self._get_catalog(path)
        if catalog is not None:
            self._remember_kind(path, "catalog")
            return "catalog", catalog
        return None

    def _child_catalogs_recently(self, parent: Path) -> frozenset[str]:
        now = time.monotonic()
        with self._client_lock:
            known = self._catalog_names.get(parent)
        if known is not None and known[0] > now:
            return known[1]
        names = frozenset(self._child_catalog_names(parent) or ())
        return names

    def _forget_catalog_names(self) -> None:
        with self._client_lock:
            self._catalog_names.clear()

    def _child_catalog_names(self, parent: Path) -> list[str] | None:
        if not self._has_catalog_api():
            return []  # the root catalog alone: it has no child catalogs we could see
        parent_id = self._catalog_id(parent)  # None: AWS defaults to the caller's account
        items = self._pages(
            "get_catalogs",
            "CatalogList",
            MaxResults=CATALOG_PAGE_SIZE,
            **({"ParentCatalogId": parent_id} if parent_id else {}),
        )
        if items is None:
            return None
        names = [item["Name"].rsplit("/", 1)[-1] for item in items]
        with self._client_lock:
            self._catalog_names[parent] = (
                time.monotonic() + CATALOG_NAMES_SECONDS,
                frozenset(names),
            )
        return names

    def _database_names(self, chain: Path, limit: int | None = None) -> list[str] | None:
        kwargs: dict[str, Any] = {"MaxResults": limit or PAGE_SIZE, **self._ids(chain)}
        items = self._pages("get_databases", "DatabaseList", **kwargs)
        if items is None:
            return None
        names = []
        for item in items:
            names.append(item["Name"])
            if limit and len(names) >= limit:
                break
        return names

    # ----------------------------------------------------------------------------------------
    # Namespace primitives
    # ----------------------------------------------------------------------------------------

    def _stored_properties(self, properties: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in properties.items() if k != KIND_PROPERTY}

    def _catalog_root_properties(self) -> dict[str, str]:
        catalog_id = self._settings["catalog_id"]
        return {"catalog_id": catalog_id} if catalog_id else {}

    def _catalog_get_namespace(self, path: Path) -> dict[str, str] | None:
        found = self._kind(path)
        if found is None:
            return None
        kind, obj = found
        properties = dict(obj.get("Parameters") or {})
        if obj.get("Description"):
            properties[DESCRIPTION] = obj["Description"]
        if kind == "database" and obj.get("LocationUri"):
            properties[LOCATION] = obj["LocationUri"]
        return properties

    def _split_properties(
        self, properties: Mapping[str, str], kind: str
    ) -> tuple[dict[str, str], dict[str, str]]:
        """(Glue fields, Parameters) of a catalog or database input."""
        parameters = {k: v for k, v in properties.items() if k != KIND_PROPERTY}
        fields: dict[str, str] = {}
        if DESCRIPTION in parameters:
            fields["Description"] = parameters.pop(DESCRIPTION)
        if kind == "database" and LOCATION in parameters:
            fields["LocationUri"] = parameters.pop(LOCATION)
        for key, value in parameters.items():
            if not isinstance(value, str):
                raise InvalidInputError(f"Property {key!r} must be a string")
        return fields, parameters

    def _requested_kind(self, properties: Mapping[str, str]) -> str:
        kind = properties.get(KIND_PROPERTY, "database").strip().lower()
        if kind not in ("database", "catalog"):
            raise InvalidInputError(
                f"Property {KIND_PROPERTY}={properties[KIND_PROPERTY]!r} must be "
                "'database' or 'catalog'"
            )
        return kind

    def _catalog_create_namespace(self, path: Path, properties: Mapping[str, str]) -> None:
        kind = self._requested_kind(properties)
        fields, parameters = self._split_properties(properties, kind)
        if kind == "catalog":
            self._create_catalog(path, fields, parameters)
            return
        # A catalog of the same name would be shadowed by the new database. Catalogs are
        # rarely made, so their names are known from a listing at most 30 s old (our own
        # catalog changes refresh it at once).
        if path[-1] in self._child_catalogs_recently(path[:-1]):
            raise lance_error(NamespaceAlreadyExistsError, describe(path))
        try:
            self.glue.create_database(
                DatabaseInput=cast(
                    "DatabaseInputTypeDef", {"Name": path[-1], "Parameters": parameters, **fields}
                ),
                **self._ids(path[:-1]),
            )
        except Exception as error:
            code = _error_code(error)
            if code == "AlreadyExistsException":
                if _retried(error) and self._database_matches(path, fields, parameters):
                    logger.info(
                        "creation of %s took effect before its reply was lost", describe(path)
                    )
                    return
                raise lance_error(NamespaceAlreadyExistsError, describe(path)) from None
            if code == "EntityNotFoundException":
                raise lance_error(
                    NamespaceNotFoundError,
                    f"parent catalog {describe(path[:-1])} of {describe(path)}",
                ) from None
            raise

    def _database_matches(
        self, path: Path, fields: Mapping[str, str], parameters: Mapping[str, str]
    ) -> bool:
        database = self._get_database(path)
        return (
            database is not None
            and dict(database.get("Parameters") or {}) == dict(parameters)
            and all(database.get(key) == value for key, value in fields.items())
        )

    def _create_catalog(
        self, path: Path, fields: dict[str, str], parameters: dict[str, str]
    ) -> None:
        name = CATALOG_RULES.normalize(path[-1], "catalog", path)
        if not self._has_catalog_api():
            raise UnsupportedOperationError(
                f"Cannot create catalog {describe(path)}: {self.catalog_api().reason}; "
                "create a database instead (without glue.kind=catalog)"
            )
        if len(path) > 1 or ":" in self._root_catalog_id():
            raise UnsupportedOperationError(
                f"Cannot create catalog {describe(path)}: Glue creates catalogs only directly "
                "under the account's root catalog; deeper catalogs come from federation"
            )
        if self._get_database(path) is not None:
            raise lance_error(NamespaceAlreadyExistsError, describe(path), "(as a database)")
        self._forget_catalog_names()
        try:
            catalog_input = cast("CatalogInputTypeDef", {"Parameters": parameters, **fields})
            self.glue.create_catalog(Name=name, CatalogInput=catalog_input)
        except Exception as error:
            if _error_code(error) == "AlreadyExistsException":
                raise lance_error(NamespaceAlreadyExistsError, describe(path)) from None
            raise

    def _catalog_replace_namespace_properties(
        self, path: Path, properties: Mapping[str, str]
    ) -> None:
        found = self._kind(path)
        if found is None:
            raise lance_error(NamespaceNotFoundError, describe(path))
        kind, _ = found
        if KIND_PROPERTY in properties and self._requested_kind(properties) != kind:
            raise InvalidInputError(
                f"Namespace {describe(path)} is a {kind}; OVERWRITE cannot change its kind"
            )
        fields, parameters = self._split_properties(properties, kind)
        if kind == "catalog":
            catalog_id = self._catalog_id(path)
            assert catalog_id is not None  # a non-empty chain always has one
            self.glue.update_catalog(
                CatalogId=catalog_id,
                CatalogInput=cast("CatalogInputTypeDef", {"Parameters": parameters, **fields}),
            )
        else:
            self.glue.update_database(
                Name=path[-1],
                DatabaseInput=cast(
                    "DatabaseInputTypeDef", {"Name": path[-1], "Parameters": parameters, **fields}
                ),
                **self._ids(path[:-1]),
            )

    def _catalog_namespace_is_empty(self, path: Path) -> bool | None:
        # A database answers with its tables in one call; only a miss asks about catalogs.
        response = self._call(
            "get_tables", DatabaseName=path[-1], MaxResults=1, **self._ids(path[:-1])
        )
        if response is not None:
            self._remember_kind(path, "database")
            return not response.get("TableList")
        found = self._kind(path)
        if found is None:
            return None
        if found[0] == "database":  # created between the two calls: ask its tables once more
            again = self._call(
                "get_tables", DatabaseName=path[-1], MaxResults=1, **self._ids(path[:-1])
            )
            return again is None or not again.get("TableList")
        databases = self._database_names(path, limit=1) or []
        catalogs = self._child_catalog_names(path) or []
        return not databases and not catalogs

    def _catalog_drop_namespace(self, path: Path, cascade: bool) -> None:
        kind = self._known_kind(path)
        if kind is None:
            found = self._kind(path)
            if found is None:
                raise lance_error(NamespaceNotFoundError, describe(path))
            kind = found[0]
        self._forget_kinds()
        if kind == "database":
            deleted = self._call("delete_database", Name=path[-1], **self._ids(path[:-1]))
        else:
            deleted = self._call("delete_catalog", CatalogId=self._catalog_id(path))
            self._forget_catalog_names()
        if deleted is None:
            raise lance_error(NamespaceNotFoundError, describe(path))

    def _catalog_list_namespaces(self, path: Path) -> list[str]:
        if path:
            found = self._kind(path)
            if found is None:
                raise lance_error(NamespaceNotFoundError, describe(path))
            if found[0] == "database":
                return []  # databases hold tables only
        # Two independent listings: ask for both at once.
        catalogs_future = self._background().submit(self._child_catalog_names, path)
        databases = self._database_names(path)
        catalogs = catalogs_future.result()
        if databases is None or catalogs is None:
            raise lance_error(NamespaceNotFoundError, describe(path))
        return databases + catalogs

    # ----------------------------------------------------------------------------------------
    # Table primitives
    # ----------------------------------------------------------------------------------------

    def _catalog_list_lance_tables(self, path: Path) -> list[str]:
        from ..rules.tables import is_lance_table

        items = self._pages(
            "get_tables",
            "TableList",
            DatabaseName=path[-1],
            MaxResults=PAGE_SIZE,
            **self._ids(path[:-1]),
        )
        if items is None:
            found = self._kind(path)
            if found is not None and found[0] == "catalog":
                return []  # catalogs hold databases, not tables
            raise lance_error(NamespaceNotFoundError, describe(path))
        return [
            item["Name"]
            for item in items
            if is_lance_table(item.get("TableType"), item.get("Parameters"))
        ]

    def _catalog_entry_locations(self, path: Path) -> dict[str, str | None]:
        """One GetTables listing (a call per 100 tables): it returns whole tables, of every
        format (a Lance table must not take a Parquet table's directory either)."""
        items = self._pages(
            "get_tables",
            "TableList",
            DatabaseName=path[-1],
            MaxResults=PAGE_SIZE,
            **self._ids(path[:-1]),
        )
        return {
            item["Name"]: (item.get("StorageDescriptor") or {}).get("Location")
            for item in items or ()
        }

    def _catalog_table_namespaces(self) -> Iterator[Path]:
        """The databases of every catalog level: one GetDatabases and one GetCatalogs each."""
        pending: list[Path] = [()]
        while pending:
            chain = pending.pop()
            yield from ((*chain, name) for name in self._database_names(chain) or ())
            pending.extend((*chain, name) for name in self._child_catalog_names(chain) or ())

    def _catalog_get_table(self, path: Path, name: str) -> TableEntry | None:
        response = self._call("get_table", DatabaseName=path[-1], Name=name, **self._ids(path[:-1]))
        if response is None:
            return None
        table = response["Table"]
        descriptor = table.get("StorageDescriptor") or {}
        return TableEntry(
            name=table["Name"],
            location=descriptor.get("Location"),
            parameters=dict(table.get("Parameters") or {}),
            table_type=table.get("TableType"),
            has_columns=bool(descriptor.get("Columns")),
            columns=[
                CatalogColumn(c["Name"], c.get("Type", "string"), c.get("Comment", ""))
                for c in descriptor.get("Columns") or []
            ],
            version_token=table.get("VersionId"),
            raw=table,
        )

    def _table_input(
        self, entry: TableEntry, columns: list[CatalogColumn] | None
    ) -> TableInputTypeDef:
        # Sent as given: Glue's model types Location as str, TableEntry as optional.
        descriptor = cast("StorageDescriptorTypeDef", {"Location": entry.location})
        if columns is not None:
            descriptor["Columns"] = [_column_input(c) for c in columns]
        return {
            "Name": entry.name,
            "TableType": EXTERNAL_TABLE,
            "Parameters": dict(entry.parameters),
            "StorageDescriptor": descriptor,
        }

    def _catalog_create_table(
        self, path: Path, entry: TableEntry, columns: list[CatalogColumn]
    ) -> None:
        self._create_table_input(path, self._table_input(entry, columns), entry)

    def _create_table_input(
        self, path: Path, table_input: TableInputTypeDef, entry: TableEntry | None
    ) -> None:
        """CreateTable; a retried create refused as existing is read back and, when the entry
        there is the one sent, taken as done (its first attempt's reply was lost)."""
        name = table_input["Name"]
        sent = entry or TableEntry(
            name=name,
            location=(table_input.get("StorageDescriptor") or {}).get("Location"),
            parameters=dict(table_input.get("Parameters") or {}),
        )
        try:
            self.glue.create_table(
                DatabaseName=path[-1], TableInput=table_input, **self._ids(path[:-1])
            )
        except Exception as error:
            code = _error_code(error)
            if code == "AlreadyExistsException":
                if _retried(error):
                    current = self._catalog_get_table(path, name)
                    if current is not None and current.holds_registration(sent):
                        logger.info(
                            "creation of %s took effect before its reply was lost",
                            describe((*path, name)),
                        )
                        return
                raise lance_error(TableAlreadyExistsError, describe((*path, name))) from None
            if code == "EntityNotFoundException":
                raise lance_error(
                    NamespaceNotFoundError, f"{describe(path)} (of table {name!r})"
                ) from None
            raise

    def _input_of(self, table: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
        """The ``TableInput`` that writes back the Table GetTable returned, whole: every field
        a TableInput can carry (Description, Owner, Retention, the StorageDescriptor with its
        SerDe, storage parameters and column comments, PartitionKeys, TableType, Parameters
        other tools wrote, ...), read from botocore's model, so none is dropped by a list of
        ours; GetTable's read-only fields (VersionId, CreateTime, DatabaseName, ...) are not."""
        shape: Any = self.glue.meta.service_model.shape_for("TableInput")
        members = shape.members
        kept = {key: value for key, value in (table or {}).items() if key in members}
        kept["Name"] = name
        return kept

    def _updated_input(self, expected: TableEntry, updated: TableEntry) -> TableInputTypeDef:
        """``expected``'s Table as a TableInput with only our fields changed: the parameters,
        the location and (when given) the columns, each column keeping its other fields."""
        table_input = self._input_of(expected.raw, expected.name)
        descriptor = dict(table_input.get("StorageDescriptor") or {})
        descriptor["Location"] = updated.location
        if updated.columns is not None:
            held = {c.get("Name", "").lower(): c for c in descriptor.get("Columns") or []}
            columns = []
            for column in updated.columns:
                merged = {**held.get(column.name.lower(), {}), **_column_input(column)}
                if not column.comment:
                    merged.pop("Comment", None)
                columns.append(merged)
            descriptor["Columns"] = columns
        table_input["StorageDescriptor"] = descriptor
        table_input["Parameters"] = dict(updated.parameters)
        table_input.setdefault("TableType", EXTERNAL_TABLE)
        return cast("TableInputTypeDef", table_input)

    def _catalog_write_table(self, path: Path, expected: TableEntry, updated: TableEntry) -> None:
        """One UpdateTable of the Table read as ``expected``, our fields changed, conditional
        on the ``VersionId`` read with it: Glue refuses it (ConcurrentModificationException)
        once any other update landed. An endpoint that ignores ``VersionId`` (moto as
        shipped) applies it unconditionally."""
        kwargs: dict[str, Any] = {}
        if expected.version_token is not None:
            kwargs["VersionId"] = expected.version_token
        elif self._managed_versioning(expected):
            raise InternalError(
                f"Glue returned no VersionId for table {describe((*path, expected.name))}: "
                "conditional updates are impossible"
            )
        try:
            self.glue.update_table(
                DatabaseName=path[-1],
                TableInput=self._updated_input(expected, updated),
                **self._ids(path[:-1]),
                **kwargs,
            )
        except Exception as error:
            code = _error_code(error)
            if code == "EntityNotFoundException":
                raise lance_error(TableNotFoundError, describe((*path, expected.name))) from None
            if code == "ConcurrentModificationException":
                raise ConcurrentModificationError(
                    f"Table {describe((*path, expected.name))} changed concurrently"
                ) from None
            raise

    def _catalog_rename_table(
        self, path: Path, entry: TableEntry, new_path: Path, new_name: str
    ) -> None:
        """Glue has no rename: create the new entry (the old Table whole, under the new
        name), then delete the old one.

        A catalog-managed table is refused: its commits land on the old entry, and nothing
        Glue offers makes "check unchanged, then delete" one step, so a commit between the
        two would vanish from the renamed entry. Its data needs no move: deregister it and
        register its location under the new name (that adopts storage's latest version).
        A storage-managed table's commits never touch its entry, so none can be lost.

        Between the two calls the table has two entries for a moment; every way out leaves
        one. If the old entry changed meanwhile, or deleting it fails, the new entry is
        deleted again and the error raised: the old entry alone stays. A delete whose reply
        was lost but which took effect is the rename done.
        """
        old = describe((*path, entry.name))
        if self._managed_versioning(entry):
            raise UnsupportedOperationError(
                f"rename_table not implemented for catalog-managed table {old} on Glue: Glue "
                "has no rename, and a commit landing between the copy and the delete of the "
                "old entry would be lost; deregister it and register its location under the "
                "new name instead"
            )
        table_input = self._input_of(entry.raw, new_name)
        if not table_input.get("StorageDescriptor"):
            table_input = dict(self._table_input(entry, list(entry.columns or [])))
            table_input["Name"] = new_name
        self._create_table_input(new_path, cast("TableInputTypeDef", table_input), None)
        try:
            current = self._catalog_get_table(path, entry.name)
            if current is None or current.version_token != entry.version_token:
                raise ConcurrentModificationError(
                    f"Table {old} changed while it was being renamed; rename it again"
                )
            self._catalog_delete_table(path, entry.name)
        except Exception as error:
            if not isinstance(error, ConcurrentModificationError):
                try:
                    gone = self._catalog_get_table(path, entry.name) is None
                except Exception:
                    gone = False
                if gone:
                    logger.info("rename of %s: the old entry's deletion took effect", old)
                    return
            self._undo_rename(new_path, new_name, old)
            raise

    def _undo_rename(self, new_path: Path, new_name: str, old: str) -> None:
        new = describe((*new_path, new_name))
        try:
            self._catalog_delete_table(new_path, new_name)
        except TableNotFoundError:
            pass
        except Exception as error:
            # Both entries exist and the catalog refuses to drop one: say so, loudly.
            raise InternalError(
                f"Renaming {old} to {new} failed half-way and the new entry could not be "
                f"removed ({error}); deregister {new} to finish undoing it"
            ) from None

    def _catalog_delete_table(self, path: Path, name: str) -> None:
        deleted = self._call(
            "delete_table", DatabaseName=path[-1], Name=name, **self._ids(path[:-1])
        )
        if deleted is None:
            raise lance_error(TableNotFoundError, describe((*path, name)))

    def _catalog_table_base(self, path: Path) -> str:
        database = self._get_database(path)
        if database is None:
            raise lance_error(NamespaceNotFoundError, describe(path))
        location: str | None = database.get("LocationUri")
        return location or join_location(self.root, *path)
