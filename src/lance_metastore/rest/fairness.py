"""Fair shares: no one caller holds all of the server's request workers.

Every request in progress holds one of the server's worker threads (``offload.py``) or waits
for one. A caller that keeps many requests in flight (slow ones, or just many) would take
every thread and every other caller would wait behind it. So each caller may have at most so
many requests in progress: counted per client address before authentication (so callers who
never authenticate cannot crowd out those who do), and per principal after it (so one
principal's many addresses count as one). A request over either limit is answered at once,
429 with the spec's code 21 (throttled) and ``Retry-After``; nothing else is affected.

Connections are limited per client address and per principal in ``connections.py`` (the same
answer, then the connection is closed). A connection learns its principal here: the first of its
requests that authenticates names it (:class:`PrincipalConnections`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Protocol

from . import metrics
from .access import ANONYMOUS
from .security import ASGIApp, Receive, Scope, Send, note, principal_of

THROTTLED = 21
DEFAULT_PER_ADDRESS_IN_FLIGHT = 64
DEFAULT_PER_PRINCIPAL_IN_FLIGHT = 24  # over all pools (32 threads each by default): room left
RETRY_AFTER_SECONDS = 1
# The scope key under which the connection layer puts the connection a request came on.
CONNECTION_KEY = "lance_metastore.connection"


def throttled_body(message: str) -> bytes:
    return json.dumps({"error": message, "code": THROTTLED}).encode()


async def send_throttled(send: Send, message: str, close: bool = False) -> None:
    """429 with code 21 and ``Retry-After`` (``close``: and the connection closes after it)."""
    body = throttled_body(message)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class InFlightLimit:
    """At most ``limit`` requests in progress per key (``key_of(scope)``; None: not counted).
    The event loop is the only writer, so a plain counter is exact."""

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        key_of: Callable[[Scope], str | None],
        what: str,
        exempt: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        if limit <= 0:
            raise ValueError(f"the in-flight limit must be positive, not {limit}")
        self.app = app
        self.limit = limit
        self.key_of = key_of
        self.what = what
        self.exempt = exempt
        self.in_flight: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = self.key_of(scope) if scope["type"] == "http" else None
        if key is None or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        if self.in_flight[key] >= self.limit:
            note(scope, code=THROTTLED, operation="throttled")
            metrics.refused(f"{self.what.replace(' ', '_')}_in_flight")
            await send_throttled(
                send,
                f"Too many requests in progress for this {self.what} (at most {self.limit}); "
                f"retry after {RETRY_AFTER_SECONDS} s",
            )
            return
        self.in_flight[key] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight[key] -= 1
            if not self.in_flight[key]:
                del self.in_flight[key]


def client_address(scope: Scope) -> str | None:
    client = scope.get("client")
    return str(client[0]) if client else None


def principal_name(scope: Scope) -> str | None:
    """The admitted principal (None for anonymous callers: their address counts)."""
    principal = principal_of(scope)
    return None if principal is ANONYMOUS else str(principal.name)


class PrincipalConnection(Protocol):
    """What the connection layer (``connections.py``) puts in a request's scope."""

    principal: str | None

    def identify(self, principal: str) -> int | None:
        """The connection belongs to ``principal``; the limit it goes past, if it does."""
        ...


class PrincipalConnections:
    """Tells a connection its principal at the first of its requests that authenticates; a
    connection past its principal's connection limit is answered 429 with code 21 and
    ``Retry-After`` and closed (the count and the limit are the connection layer's). Requests
    that come without a connection in their scope (another server, a test client) pass."""

    def __init__(self, app: ASGIApp, exempt: set[str] | frozenset[str] = frozenset()) -> None:
        self.app = app
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection: PrincipalConnection | None = scope.get(CONNECTION_KEY)
        if connection is not None and connection.principal is None:
            name = principal_name(scope)
            over = None
            if name is not None and scope["path"] not in self.exempt:
                over = connection.identify(name)
            if over is not None:
                note(scope, code=THROTTLED, operation="throttled")
                metrics.refused("connections_per_principal")
                await send_throttled(
                    send,
                    f"Too many connections for this principal (at most {over}); "
                    f"retry after {RETRY_AFTER_SECONDS} s",
                    close=True,
                )
                return
        await self.app(scope, receive, send)
