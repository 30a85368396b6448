"""Serve any ``LanceNamespace`` over the Lance Namespace REST spec.

``create_app(namespace)`` builds the ASGI app; ``serve(namespace, host, port)`` runs it until
SIGTERM (the ``lance-metastore serve`` command); ``RestServer(namespace)`` runs it on a thread
for tests and embedding. Clients: ``lance_namespace.connect("rest", {"uri": url})``, lancedb's
``connect_namespace("rest", ...)``, Lance's Java client, lance-spark with ``impl=rest``.
"""

from __future__ import annotations

from ..rules.loopback import is_loopback
from .access import OPERATION_PRIVILEGES, AccessControl, Policy, Privilege
from .app import MAX_JSON_DEPTH, create_app
from .arrow_bodies import DECODED_LIMIT_FACTOR, DecodedBodyTooLarge
from .auth import (
    ApiKeys,
    Authenticator,
    BearerTokens,
    InvalidCredentials,
    JwtBearer,
    Principal,
    authenticator_from,
)
from .connections import ClientLimits
from .operations import OPERATIONS, Operation
from .security import DEFAULT_MAX_BODY_BYTES, read_token_file
from .server import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    ExposureError,
    RestServer,
    check_exposure,
    serve,
)
from .statuses import http_status

__all__ = [
    "DECODED_LIMIT_FACTOR",
    "DEFAULT_HOST",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_PORT",
    "MAX_JSON_DEPTH",
    "OPERATIONS",
    "OPERATION_PRIVILEGES",
    "AccessControl",
    "ApiKeys",
    "Authenticator",
    "BearerTokens",
    "ClientLimits",
    "DecodedBodyTooLarge",
    "ExposureError",
    "InvalidCredentials",
    "JwtBearer",
    "Operation",
    "Policy",
    "Principal",
    "Privilege",
    "RestServer",
    "authenticator_from",
    "check_exposure",
    "create_app",
    "http_status",
    "is_loopback",
    "read_token_file",
    "serve",
]
