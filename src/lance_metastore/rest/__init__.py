"""Serve any ``LanceNamespace`` over the Lance Namespace REST spec.

``create_app(namespace)`` builds the ASGI app; ``serve(namespace, host, port)`` runs it until
SIGTERM (the ``lance-metastore serve`` command); ``RestServer(namespace)`` runs it on a thread
for tests and embedding. Clients: ``lance_namespace.connect("rest", {"uri": url})``, lancedb's
``connect_namespace("rest", ...)``, Lance's Java client, lance-spark with ``impl=rest``.
"""

from __future__ import annotations

from .app import create_app, http_status
from .operations import OPERATIONS, Operation
from .security import DEFAULT_MAX_BODY_BYTES, read_token_file
from .server import DEFAULT_HOST, DEFAULT_PORT, RestServer, serve

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_PORT",
    "OPERATIONS",
    "Operation",
    "RestServer",
    "create_app",
    "http_status",
    "read_token_file",
    "serve",
]
