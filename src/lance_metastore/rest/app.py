"""An ASGI app that serves any ``LanceNamespace`` over the Lance Namespace REST spec.

One generic endpoint per row of ``operations.OPERATIONS``: it builds the operation's request
model from the route, the query string and the body, calls the namespace on a worker thread
(namespaces block on their catalogs), and renders the response the way the spec says. Every
failure becomes the spec's error body ``{"error": ..., "code": N}`` with the HTTP status the
spec gives that code; nothing else (no stack trace, no framework page) ever leaves.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_plus

from lance_namespace import LanceNamespace
from lance_namespace.errors import (
    ErrorCode,
    InvalidInputError,
    LanceNamespaceError,
    UnsupportedOperationError,
)
from pydantic import BaseModel, TypeAdapter, ValidationError

from ..operations.catalog import CatalogNamespace
from ..rules.credentials import vending_at_most
from ..rules.errors import is_worded_refusal, known_secrets, unsupported, wire_message
from ..rules.extras import requires_extra
from ..rules.identifiers import split_identifier
from ..rules.json_nesting import nests_deeper_than
from ..rules.redaction import scrub, shareable
from ..rules.visibility import seen_by
from . import metrics
from .access import AccessControl, Denial
from .arrow_bodies import DECODED_LIMIT_FACTOR, DecodedBodyTooLarge, arrow_body
from .auth import BearerTokens, Principal
from .disclosure import public_message
from .fairness import (
    DEFAULT_PER_ADDRESS_IN_FLIGHT,
    DEFAULT_PER_PRINCIPAL_IN_FLIGHT,
    InFlightLimit,
    PrincipalConnections,
    client_address,
    principal_name,
)
from .listings import LISTINGS, ForeignListings
from .offload import DEFAULT_MAX_JSON_BYTES, DEFAULT_WORKER_THREADS, Pools, WorkerPool
from .openapi import openapi_document
from .operations import ARROW_FILE, OPERATIONS, Body, Operation, Reply, wire_kind
from .routing import LastSegmentRouter
from .security import (
    DEFAULT_MAX_BODY_BYTES,
    AuditMiddleware,
    AuthenticationMiddleware,
    BodyLimitMiddleware,
    BodyTooLarge,
    note,
    principal_of,
)
from .statuses import http_status

with requires_extra("server"):
    from starlette.applications import Starlette
    from starlette.convertors import Convertor, register_url_convertor
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
    from starlette.types import Scope

logger = logging.getLogger("lance_metastore.rest")

DEFAULT_DELIMITER = "$"
# JSON bodies nested deeper than this are refused (the spec's requests nest a few levels).
MAX_JSON_DEPTH = 64
HEALTH_PATH = "/health"
READY_PATH = "/ready"
METRICS_PATH = "/metrics"
OPENAPI_PATH = "/openapi.json"
# Probes and scrapes: no caller credentials (/metrics has its own gate, see metrics.py).
OPEN_PATHS = {HEALTH_PATH, READY_PATH, METRICS_PATH}


def error_response(
    code: int, message: str, scope: Scope | None = None, status: int | None = None
) -> JSONResponse:
    """The spec's error body; ``status`` overrides the code's own (404 for unknown routes).
    The message goes without the phrase Lance's clients put before it (``wire_message``)."""
    if scope is not None:
        note(scope, code=int(code))
    return JSONResponse(
        {"error": wire_message(code, message), "code": int(code)},
        status_code=status or http_status(code),
    )


class BadRequest(Exception):
    """A request the server refuses before it reaches the namespace (code 13)."""


class _ObjectIdConvertor(Convertor[str]):
    """An object id: any characters, ``/`` and line breaks included (the namespace judges)."""

    regex = "[\\s\\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("lance_object_id", _ObjectIdConvertor())


def create_app(
    namespace: LanceNamespace,
    *,
    auth_token: str | None = None,
    access: AccessControl | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_decoded_bytes: int | None = None,
    max_json_bytes: int = DEFAULT_MAX_JSON_BYTES,
    worker_threads: int = DEFAULT_WORKER_THREADS,
    metrics_token: str | None = None,
    max_in_flight_per_client: int = DEFAULT_PER_ADDRESS_IN_FLIGHT,
    max_in_flight_per_principal: int = DEFAULT_PER_PRINCIPAL_IN_FLIGHT,
    audit_logger: logging.Logger | None = None,
    audit_json: bool = False,
) -> Starlette:
    """The REST app for ``namespace``.

    ``access``: the authentication schemes and policy every route but the health route checks
    (401 with code 16 for a caller no scheme admits; 403 with code 15, or the 404 of a missing
    object, for one the policy does not allow); ``app.state.access.reload()`` re-reads their
    files. ``auth_token`` is the short form of one bearer token (principal ``token``) and no
    policy. Without either, every caller may do everything. ``max_body_bytes`` caps request
    bodies as they arrive, ``max_json_bytes`` the JSON bodies of every operation but the data
    ones (the body limit caps them too), ``max_decoded_bytes`` (default 4x the body limit)
    what an Arrow IPC data body may decode to (all 413, code 13). Parsing, the namespace call
    and encoding the answer run on worker threads, never on the event loop (``offload.py``):
    at most ``worker_threads`` metadata reads, as many scans and as many changes at once. One
    client address may have ``max_in_flight_per_client`` requests in progress, one principal
    ``max_in_flight_per_principal`` (429, code 21, past them: see ``fairness.py``; connections
    per principal are the server's ``ClientLimits``). One audit line per request goes to
    ``audit_logger``
    (``lance_metastore.rest.audit`` by default; ``audit_json``: as JSON objects).
    ``/metrics`` answers loopback callers, or with ``metrics_token`` those presenting it
    (``metrics.py``). Our namespaces are switched to confined locations
    (``confine_locations``) first: callers set locations only under allowed prefixes.
    """
    if max_decoded_bytes is None:
        max_decoded_bytes = DECODED_LIMIT_FACTOR * max_body_bytes
    if access is None:
        access = access_with_token(auth_token)
    elif auth_token:
        raise ValueError("Pass auth_token or access, not both")
    # A served namespace always confines the locations its callers set (see rules/locations.py).
    confine = getattr(namespace, "confine_locations", None)
    if callable(confine):
        confine()
    # Access is decided on ids as the namespace acts on them (see rest/access.py).
    canonical = getattr(namespace, "canonical_id", None)
    if callable(canonical):
        access.bind(canonical)
    # Under a policy, a listing that runs outside a caller's block shows nothing, not all.
    foreign = None if isinstance(namespace, CatalogNamespace) else ForeignListings(namespace)
    police = foreign.police if foreign is not None else getattr(namespace, "police_listings", None)
    if access.policy is not None and callable(police):
        police()
    document: dict[str, Any] = {}
    # Metadata reads, scans and changes have a pool each: a change may wait on the catalog (a
    # Hive table lock, a lost conditional write and its retry), a scan may read for seconds,
    # and neither may take the threads every describe and listing needs (see offload.py).
    pools = Pools(
        catalog=WorkerPool(worker_threads, metrics.POOL_CALLS.labels("catalog")),
        scans=WorkerPool(worker_threads, metrics.POOL_CALLS.labels("scans")),
        changes=WorkerPool(worker_threads, metrics.POOL_CALLS.labels("changes")),
    )
    max_json_bytes = min(max_json_bytes, max_body_bytes)

    async def health(request: Request) -> Response:
        note(request.scope, operation="health")
        return JSONResponse({"status": "ok"})

    async def openapi(request: Request) -> Response:
        note(request.scope, operation="openapi")
        if not document:
            document.update(openapi_document())
        return JSONResponse(document)

    metrics.install()
    readiness = metrics.Readiness(namespace, pools.catalog)
    routes = [
        Route(HEALTH_PATH, health, methods=["GET"]),
        Route(READY_PATH, readiness.endpoint, methods=["GET"]),
        Route(METRICS_PATH, metrics.metrics_endpoint(metrics_token), methods=["GET"]),
        Route(OPENAPI_PATH, openapi, methods=["GET"]),
    ]
    for operation in sorted(OPERATIONS, key=_route_priority):
        route_path = operation.path.replace("{id}", "{id:lance_object_id}")
        routes.append(
            Route(
                route_path,
                _endpoint(
                    namespace,
                    operation,
                    access,
                    pools.of(operation.name),
                    max_json_bytes,
                    max_decoded_bytes,
                    foreign,
                ),
                methods=[operation.method],
            )
        )

    async def routing_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        if status == 405:
            message = f"Method {request.method} is not allowed on {request.url.path}"
        else:
            message = f"No route {request.method} {request.url.path}"
        # not a spec operation: invalid input, with the HTTP status of the routing failure
        return error_response(ErrorCode.INVALID_INPUT, message, request.scope, status=status)

    async def unexpected(request: Request, exc: Exception) -> Response:
        logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(ErrorCode.INTERNAL, "Internal server error", request.scope)

    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(metrics.MetricsMiddleware),
            Middleware(AuditMiddleware, logger=audit_logger, json_lines=audit_json),
            Middleware(
                InFlightLimit,
                limit=max_in_flight_per_client,
                key_of=client_address,
                what="client address",
                exempt=OPEN_PATHS,
            ),
            Middleware(AuthenticationMiddleware, access=access, open_paths=OPEN_PATHS),
            Middleware(PrincipalConnections, exempt=OPEN_PATHS),
            Middleware(
                InFlightLimit,
                limit=max_in_flight_per_principal,
                key_of=principal_name,
                what="principal",
                exempt=OPEN_PATHS,
            ),
            Middleware(BodyLimitMiddleware, max_bytes=max_body_bytes),
        ],
        exception_handlers={HTTPException: routing_error, Exception: unexpected},
    )
    app.router = LastSegmentRouter(routes)  # the same routes, fewer tried (see routing.py)
    app.state.access = access
    app.state.pools = pools
    return app


def access_with_token(auth_token: str | None) -> AccessControl:
    """One bearer token admitting principal ``token`` to everything (no token: no auth)."""
    return AccessControl([BearerTokens(token=auth_token)] if auth_token else [])


def _route_priority(operation: Operation) -> tuple[int, int]:
    """Routes without an id first, then those with more literal segments after the id.

    The id may hold anything, so ``/v1/namespace/{id}/table/list`` must be tried
    before ``/v1/namespace/{id}/list``, and ``/v1/table/{id}/index/{name}/drop`` before
    ``/v1/table/{id}/drop``.
    """
    if not operation.has_id:
        return (0, 0)
    tail = operation.path.split("{id}", 1)[1]
    return (1, -len([part for part in tail.split("/") if part]))


def spec_error(
    error: LanceNamespaceError | NotImplementedError, operation: Operation, backend: str
) -> LanceNamespaceError:
    """What a namespace's failure answers: its own spec error, except that every refusal (the
    spec's ``UnsupportedOperationError``, or a ``NotImplementedError`` from the namespace or a
    library under it) answers 406 with code 0 naming the operation and the backend, as the
    spec's error table says (pylance 14's own server answers a ``NotImplementedError`` 500/18).
    Only what is neither is a fault (500, code 18)."""
    if isinstance(error, LanceNamespaceError) and not (
        isinstance(error, UnsupportedOperationError) and not is_worded_refusal(error, backend)
    ):
        return error
    return unsupported(operation.name, backend, str(error))


def _endpoint(
    namespace: LanceNamespace,
    operation: Operation,
    access: AccessControl,
    pool: WorkerPool,
    max_json_bytes: int,
    max_decoded_bytes: int,
    foreign: ForeignListings | None,
) -> Callable[..., Any]:
    method = getattr(namespace, operation.method_name)
    raw_route = _raw_route_pattern(operation)
    backend = type(namespace).__name__
    # Our namespaces check the target before reading rows: they get a lazily checked reader.
    lazy_rows = isinstance(namespace, CatalogNamespace)
    if foreign is not None and operation.name in LISTINGS:
        method = foreign.method(operation.name)  # paged by the server (see rest/listings.py)

    json_body = operation.body in (Body.JSON, Body.MAP)

    def handle(request: Request, route_id: str | None, body: bytes) -> Response:
        """Everything after the bytes arrived, on a worker thread (see ``offload.py``)."""
        scope = request.scope
        principal = principal_of(scope)
        model = _request_model(operation, request, route_id, body)
        denial = _check_access(access, principal, operation, model)
        if denial is not None:
            return _refused(denial, scope)
        if foreign is not None and access.policy is not None:
            _refuse_unconfined_location(namespace, operation, model)
        object_id = split_identifier(getattr(model, "id", None))
        # the most credential vending may hand this caller (see rules/credentials.py),
        # and what its listings show, before they page (see rules/visibility.py); both are
        # set here, on the worker thread that runs the call
        with (
            vending_at_most(access.storage_permission(principal, object_id)),
            seen_by(principal.qualified, access.visible(principal)),
        ):
            if operation.body is Body.ARROW:
                result = method(model, arrow_body(body, max_decoded_bytes, lazy=lazy_rows))
            else:
                result = method(model)
        return _render(operation, result)

    async def endpoint(request: Request) -> Response:
        scope = request.scope
        note(scope, operation=operation.name)
        try:
            route_id = _route_id(request, raw_route)
            note(scope, object_id=route_id)
            if route_id is not None:  # refused before the body is read or judged
                delimiter = request.query_params.get("delimiter") or DEFAULT_DELIMITER
                route_object = split_identifier(parse_id(route_id, delimiter), delimiter)
                denial = access.check(principal_of(scope), operation.name, route_object)
                if denial is not None:
                    return _refused(denial, scope)
            body = b""
            if operation.body is not Body.NONE:
                body = await read_body(request, max_json_bytes if json_body else None)
            return await pool.run(handle, request, route_id, body)
        except ClientDisconnect:
            return _client_gone(request)
        except DecodedBodyTooLarge as error:
            return error_response(error.code, str(error), scope, status=413)
        except (LanceNamespaceError, NotImplementedError) as error:
            answer = spec_error(error, operation, backend)
            message = public_message(answer, operation.name, scope)
            return error_response(answer.code, scrub(message, known_secrets()), scope)
        except BodyTooLarge as error:
            return error_response(ErrorCode.INVALID_INPUT, str(error), scope, status=413)
        except BadRequest as error:
            return error_response(ErrorCode.INVALID_INPUT, str(error), scope)
        except ValidationError as error:
            return error_response(
                ErrorCode.INVALID_INPUT, _validation_message(operation, error), scope
            )
        except Exception as error:
            message = public_message(error, operation.name, scope)
            return error_response(ErrorCode.INTERNAL, message, scope)

    endpoint.__name__ = operation.name
    return endpoint


# ---------------------------------------------------------------------------------------------
# Access
# ---------------------------------------------------------------------------------------------


def _refuse_unconfined_location(
    namespace: LanceNamespace, operation: Operation, model: BaseModel
) -> None:
    """13 for a location the caller chose, on a served namespace of another kind under a
    policy. Such a namespace (pylance's ``DirectoryNamespace``, say) puts a table where its
    caller says, and this server confines only its own namespaces' locations
    (``rules/locations.py``): a grant on one namespace would reach any table's data."""
    if getattr(model, "location", None):
        raise InvalidInputError(
            f"{operation.name}: location is not allowed here: the server confines the locations "
            f"of its own namespaces only, not of a served {type(namespace).__name__} under an "
            "access policy; leave location out and the namespace places the table"
        )


# The operations a batch_commit_tables entry may carry, by field, and what each is checked as.
_BATCH_COMMIT_ENTRIES = {
    "declare_table": "declare_table",
    "create_table_version": "create_table_version",
    "delete_table_versions": "batch_delete_table_versions",
    "deregister_table": "deregister_table",
}


def _check_access(
    access: AccessControl, principal: Principal, operation: Operation, model: BaseModel
) -> Denial | None:
    """The policy's answer for every object the request names: the route's (or the body's) id,
    a rename's destination, each entry of a batch."""
    name = operation.name
    if name == "list_all_tables" and not split_identifier(getattr(model, "id", None)):
        return None  # the whole catalog: the listing shows only what the caller may see
    if name == "batch_create_table_versions":
        entries = getattr(model, "entries", None) or []
        ids = [split_identifier(entry.id) for entry in entries]
        return access.check_all(principal, "create_table_version", ids)
    if name == "batch_commit_tables":
        for entry in getattr(model, "operations", None) or []:
            for field, checked_as in _BATCH_COMMIT_ENTRIES.items():
                inner = getattr(entry, field, None)
                if inner is not None:
                    target = split_identifier(getattr(inner, "id", None))
                    denial = access.check(principal, checked_as, target)
                    if denial is not None:
                        return denial
        return None
    object_id = split_identifier(getattr(model, "id", None))
    denial = access.check(principal, name, object_id)
    if denial is None and name == "rename_table":
        new_namespace = getattr(model, "new_namespace_id", None)
        destination = (
            *(object_id[:-1] if new_namespace is None else split_identifier(new_namespace)),
            str(getattr(model, "new_table_name", "")),
        )
        denial = access.check(principal, name, destination)
    return denial


async def read_body(request: Request, limit: int | None) -> bytes:
    """The request body, refused (413, code 13) once it passes ``limit`` (JSON bodies; data
    bodies are bounded by ``BodyLimitMiddleware`` alone): by its Content-Length before a byte
    is read, else as it arrives."""
    if limit is not None:
        message = f"The JSON request body is larger than the server's limit of {limit} bytes"
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            raise BodyTooLarge(message)
    chunks: list[bytes] = []
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if limit is not None and received > limit:
            raise BodyTooLarge(message)
        chunks.append(chunk)
    return b"".join(chunks)


def _client_gone(request: Request) -> Response:
    """A caller that hung up mid-request: one INFO line; the answer reaches no one."""
    client = request.scope.get("client")
    logger.info(
        "%s %s: the client%s closed the connection before its request arrived",
        request.method,
        request.url.path,
        f" {client[0]}:{client[1]}" if client else "",
    )
    note(request.scope, code="gone")
    return Response(status_code=499)


def _refused(denial: Denial, scope: Scope) -> Response:
    note(scope, denied=denial.needed)
    return error_response(denial.code, denial.message, scope, status=denial.status)


# ---------------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------------


def parse_id(route_id: str, delimiter: str) -> list[str]:
    """A route's object id: the delimiter alone is the root namespace."""
    if route_id == delimiter:
        return []
    return route_id.split(delimiter)


def _raw_route_pattern(operation: Operation) -> re.Pattern[str] | None:
    """The operation's route as a regex over the raw (still percent-encoded) path."""
    if not operation.has_id:
        return None
    pattern = ""
    for literal, name in re.findall(r"([^{]*)(?:\{(\w+)\})?", operation.path):
        pattern += re.escape(literal)
        if name:
            pattern += "(?P<id>.*)" if name == "id" else f"(?P<{name}>[^/]+)"
    return re.compile(pattern + "$")


def _route_id(request: Request, raw_route: re.Pattern[str] | None) -> str | None:
    """The object id of the route, decoded from the raw path as a form value.

    Lance's Rust client encodes a space as ``+`` and a plus as ``%2B`` (Java's client: ``%20``
    and ``%2B``), so ``+`` decodes to a space; a ``/`` inside an id arrives as ``%2F`` and
    stays part of the id.
    """
    if raw_route is None:
        return None
    raw_path = request.scope.get("raw_path") or request.scope["path"].encode()
    match = raw_route.match(raw_path.decode("latin-1"))
    if match is None:  # a path the router matched only after decoding
        return request.path_params.get("id")
    try:
        return unquote_plus(match.group("id"), errors="strict")
    except UnicodeDecodeError:
        raise BadRequest("The object id in the route is not valid UTF-8") from None


def _request_model(
    operation: Operation, request: Request, route_id: str | None, body: bytes
) -> BaseModel:
    fields: dict[str, Any] = {}
    if operation.body is Body.JSON:
        fields.update(_json_object(body, "request body"))
    elif operation.body is Body.MAP:
        fields["metadata"] = _json_object(body, "metadata")

    model_fields = _query_fields(operation.request)
    query = request.query_params
    for key in query:
        if key == "delimiter" or key not in model_fields:
            continue  # parameters of other spec versions are ignored, as JSON fields are
        fields[key] = _query_value(key, model_fields[key], query.getlist(key))
    if operation.name == "create_table":
        _create_table_headers(request, fields, model_fields)

    for name in operation.path_fields:
        value = request.path_params[name]
        if fields.get(name) not in (None, value):
            raise BadRequest(f"The body names {name} {fields[name]!r}, the route {value!r}")
        fields[name] = value

    if route_id is not None:
        delimiter = query.get("delimiter") or DEFAULT_DELIMITER
        fields["id"] = _reconcile_id(fields.get("id"), route_id, delimiter)
    return validate_in_slices(operation.request, fields)


# Lists longer than this are validated a slice at a time. pydantic's validator holds the
# interpreter lock for the whole of one call, and one call over the largest JSON body's
# thousands of entries took 40 ms on an idle machine (850 ms on a loaded one): time in which
# the event loop, and so every other caller, waits. Between slices the loop gets its turn.
VALIDATION_SLICE = 200


def validate_in_slices(model: type[BaseModel], fields: dict[str, Any]) -> BaseModel:
    """``model.model_validate(fields)``, with its long lists validated a slice at a time (the
    same rules, the same errors, each entry's position counted from the list's start)."""
    long_lists: dict[str, tuple[str, list[Any], Any]] = {}
    for name, info in model.model_fields.items():
        key = info.alias or name
        value = fields.get(key)
        if isinstance(value, list) and len(value) > VALIDATION_SLICE:
            long_lists[name] = (key, value, info.annotation)
    if not long_lists:
        return model.model_validate(fields)
    shell = model.model_validate({**fields, **{key: [] for key, _, _ in long_lists.values()}})
    for name, (key, value, annotation) in long_lists.items():
        adapter = _adapter(annotation)
        items: list[Any] = []
        for start in range(0, len(value), VALIDATION_SLICE):
            try:
                items.extend(adapter.validate_python(value[start : start + VALIDATION_SLICE]))
            except ValidationError as error:
                raise _shifted(model, error, key, start) from None
            time.sleep(0)  # hand the interpreter lock to the loop now, not 5 ms from now
        shell.__dict__[name] = items  # validated above; assignment would validate it again
    return shell


@functools.cache
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def _shifted(model: type[BaseModel], error: ValidationError, key: str, start: int) -> Exception:
    """A slice's validation error, located in the whole request (``entries.4201.version``)."""
    details: list[Any] = []
    for problem in error.errors(include_url=False):
        loc = problem["loc"]
        if loc and isinstance(loc[0], int):
            loc = (start + loc[0], *loc[1:])
        detail = {"type": problem["type"], "loc": (key, *loc), "input": problem["input"]}
        if "ctx" in problem:
            detail["ctx"] = problem["ctx"]
        details.append(detail)
    try:
        return ValidationError.from_exception_data(model.__name__, details)
    except (TypeError, KeyError, ValueError):  # a custom error type pydantic cannot rebuild
        return BadRequest(f"Invalid {model.__name__}: {key}: {error}")


def _reconcile_id(given: object, route_id: str, delimiter: str) -> list[str]:
    """The request's id: the route's, or the body's when both name the same object.

    They name the same object when the body's id, joined by the delimiter, is the route's
    (``["a$b"]`` and ``["a", "b"]`` both travel as ``a$b``); otherwise the spec's 400. An empty
    body id counts as absent: Lance's Java client always sends one (``"id": []``).
    """
    parts = parse_id(route_id, delimiter)
    if given is None or given == [] or given == parts:
        return parts
    if isinstance(given, list) and all(isinstance(part, str) for part in given):
        if delimiter.join(given) == route_id or (not given and route_id == delimiter):
            return given
    elif isinstance(given, str) and given == route_id:
        return parts
    raise BadRequest(f"The body names id {given!r}, the route names {parts!r}")


def _json_object(body: bytes, what: str) -> dict[str, Any]:
    """The JSON object in ``body``; an empty body is refused, as by Lance's own server."""
    if not body.strip():
        raise BadRequest(f"The {what} must be a JSON object ({{}} when every field is optional)")
    if nests_deeper_than(body, MAX_JSON_DEPTH):
        logger.warning("refused a %s nested deeper than %d levels", what, MAX_JSON_DEPTH)
        raise BadRequest(f"The {what} is nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise BadRequest(f"Malformed JSON in the {what}: {error}") from None
    if not isinstance(value, dict):
        raise BadRequest(f"The {what} must be a JSON object, not {type(value).__name__}")
    return value


def _query_fields(model: type[BaseModel]) -> dict[str, Any]:
    """Request fields by their wire name (alias), with their annotations."""
    return {(info.alias or name): info.annotation for name, info in model.model_fields.items()}


def _query_value(key: str, annotation: object, values: list[str]) -> object:
    kind = wire_kind(annotation)
    value = values[-1]
    if kind == "list":
        # repeated parameters, or one comma-separated value
        return values if len(values) > 1 else [part for part in value.split(",") if part]
    if kind == "bool":
        lowered = value.lower()
        if lowered not in ("true", "false"):
            raise BadRequest(f"Query parameter {key} must be true or false, not {value!r}")
        return lowered == "true"
    if kind == "int":
        try:
            return int(value)
        except ValueError:
            raise BadRequest(f"Query parameter {key} must be an integer, not {value!r}") from None
    if kind == "dict":
        return _json_object(value.encode(), f"query parameter {key}")
    return value


def _create_table_headers(
    request: Request, fields: dict[str, Any], model_fields: dict[str, Any]
) -> None:
    """CreateTable's older header form: ``x-lance-table-properties`` (a JSON map)."""
    properties = request.headers.get("x-lance-table-properties")
    if properties and "properties" in model_fields and "properties" not in fields:
        fields["properties"] = _json_object(properties.encode(), "x-lance-table-properties")


def _validation_message(operation: Operation, error: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(part) for part in problem['loc']) or 'request'}: {problem['msg']}"
        for problem in error.errors(include_url=False, include_input=False)
    )
    return f"Invalid {operation.request_model}: {problems}"


# ---------------------------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------------------------


def _plain(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def _context_headers(result: object) -> dict[str, str]:
    """Response ``context`` entries named ``header.<name>`` travel as response headers."""
    context = getattr(result, "context", None) or {}
    return {
        key[len("header.") :]: str(value)
        for key, value in context.items()
        if key.startswith("header.") and len(key) > len("header.")
    }


def _render(operation: Operation, result: Any) -> Response:
    """The response, without any secret the server was configured with (``redaction.shareable``:
    static keys, secrets and tokens never leave; credentials vended for one caller may)."""
    secrets = known_secrets()
    headers = {
        name: value for name, value in _context_headers(result).items() if value not in secrets
    }
    reply = operation.reply
    if reply is Reply.EMPTY:
        return Response(status_code=200, headers=headers)
    if reply is Reply.ARROW_FILE:
        data = result if isinstance(result, (bytes, bytearray)) else result.data
        return Response(bytes(data), media_type=ARROW_FILE, headers=headers)
    if reply is Reply.INTEGER:
        count = result if isinstance(result, int) else getattr(result, "count", None)
        if count is None and isinstance(result, dict):
            count = result.get("count")
        if count is None:
            raise TypeError(f"{type(result).__name__} answered no count")
        return JSONResponse(int(count), headers=headers)
    if reply is Reply.TEXT:
        return JSONResponse(shareable(str(result), secrets), headers=headers)
    if reply is Reply.MAP:
        metadata = getattr(result, "metadata", None)
        if metadata is None and isinstance(result, dict):
            metadata = result.get("metadata", result)
        return JSONResponse(shareable(dict(metadata or {}), secrets), headers=headers)
    if result is None:
        return JSONResponse({}, headers=headers)
    return JSONResponse(shareable(_plain(result), secrets), headers=headers)
