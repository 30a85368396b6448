"""Slow and many clients: read timeouts and connection limits for uvicorn's HTTP/1.1 server.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive``, but a new
connection that never finishes its request headers, or a request whose body stops arriving,
stays open forever, and nothing bounds how many connections are open. :class:`ClientLimits`
adds both, to either of uvicorn's HTTP/1.1 protocols (httptools, the fast C parser, when it is
installed; h11, pure Python, otherwise or when asked), the same rules for both:

- ``header_timeout``: a new connection has this long to deliver its first request's headers
  (later requests on a kept-alive connection are bounded by uvicorn's keep-alive timeout);
- ``body_timeout``: while a request body arrives, at most this long may pass without a byte
  (time the application itself takes to read does not count);
- ``request_timeout``: a request's headers and body together must arrive within this long of
  its first byte, however steadily they trickle (the two timeouts above bound pauses only);
- ``max_connections_per_client``: past it, the connection of that address that has waited
  longest without a request in progress is closed to make room, and when all of them have a
  request in progress the new one is answered 429 with code 21 and ``Retry-After`` and
  closed, so one address cannot take every slot;
- ``max_connections_per_principal``: a connection belongs to the principal its first
  authenticated request proves (``fairness.PrincipalConnections`` tells it); a principal's
  connection past this many is answered 429 with code 21 and ``Retry-After`` and closed, so
  one principal, from however many addresses, cannot take every slot either;
- ``max_connections``: past it, the connection that has waited longest without a request in
  progress (still sending headers, or idle between requests) is closed to make room; when
  every connection has a request in progress, the new one is closed. So clients that open
  connections and say nothing cannot lock out those that do send requests.

What the rules need from the protocol is only where the client is in its current request
(:class:`Reading`): h11 says it (``their_state``), httptools' parser callbacks are followed.
"""

from __future__ import annotations

import asyncio
import enum
import importlib.util
import itertools
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..rules.extras import requires_extra
from . import metrics
from .fairness import CONNECTION_KEY, RETRY_AFTER_SECONDS, throttled_body
from .security import ASGIApp, Receive, Scope, Send

with requires_extra("server"):
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger("lance_metastore.rest")

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_KEEP_ALIVE_TIMEOUT = 5
DEFAULT_MAX_CONNECTIONS = 512
DEFAULT_REQUEST_TIMEOUT = 60.0
DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 128
DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL = 128

# The HTTP/1.1 implementations (``http``): "auto" is httptools when installed, else h11.
HTTP_IMPLEMENTATIONS = ("auto", "h11", "httptools")


def resolved_implementation(option: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` of a serve option whose ``choices`` are ``auto``, the pure-Python default and
    the C module: ``auto`` becomes the C module when it is installed, else the default."""
    if value not in choices:
        raise ValueError(f"{option} must be one of {', '.join(choices)}, not {value!r}")
    if value == "auto":
        default, native = choices[1], choices[2]
        return native if importlib.util.find_spec(native) else default
    return value


def http_implementation(http: str = "auto") -> str:
    """``http`` resolved: ``auto`` becomes ``httptools`` when it is installed, else ``h11``."""
    return resolved_implementation("http", http, HTTP_IMPLEMENTATIONS)


@dataclass(frozen=True)
class ClientLimits:
    """How long the server waits for a client, and how many it holds at once."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    keep_alive_timeout: int = DEFAULT_KEEP_ALIVE_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    max_connections_per_client: int = DEFAULT_MAX_CONNECTIONS_PER_CLIENT
    max_connections_per_principal: int = DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL

    def __post_init__(self) -> None:
        for name in (
            "header_timeout",
            "body_timeout",
            "keep_alive_timeout",
            "max_connections",
            "request_timeout",
            "max_connections_per_client",
            "max_connections_per_principal",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")

    def protocol(self, http: str = "auto") -> type[asyncio.Protocol]:
        """uvicorn's HTTP/1.1 protocol class (``http``: see :func:`http_implementation`),
        enforcing these limits (``uvicorn.Config(http=...)``). Each call makes a class of its
        own: its connections are one server's, counted together."""
        if http_implementation(http) == "httptools":
            base: type[Any] = _httptools_protocol()
        else:
            base = LimitedH11Protocol
        return type(base.__name__, (base,), {"limits": self, "principals": Counter()})


# Which connection was active last: a sequence, not the loop's clock (uvloop's ticks once per
# loop iteration, in milliseconds, so a burst of connections would all tie).
_ACTIVITY = itertools.count()


class Reading(enum.Enum):
    """Where the client is in its current request."""

    HEADERS = "headers"  # no request yet, or its headers are arriving
    BODY = "body"  # the headers arrived, the body is arriving
    ARRIVED = "arrived"  # the whole request arrived (or the connection is ending)


class _Tagged:
    """The application, with the connection each request came on in its scope (for
    ``fairness.PrincipalConnections``). A plain call, no extra coroutine per request."""

    __slots__ = ("app", "connection")

    def __init__(self, app: ASGIApp, connection: LimitedConnection | None) -> None:
        self.app = app
        self.connection = connection

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Any:
        scope[CONNECTION_KEY] = self.connection
        return self.app(scope, receive, send)


class LimitedConnection:
    """The limits, over a uvicorn HTTP/1.1 protocol (a mixin: it comes first in the bases)."""

    limits: ClientLimits = ClientLimits()
    principals: Counter[str] = Counter()  # open connections by principal, of one server
    # set by uvicorn's protocols
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    connections: set[Any]
    client: tuple[str, int] | None
    flow: Any
    cycle: Any
    app: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app = _Tagged(self.app, self)
        self.principal: str | None = None
        self._lost = False
        self._read_timer: asyncio.TimerHandle | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def reading(self) -> Reading:
        """Where the client is in its current request (the protocol says)."""
        raise NotImplementedError

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        metrics.OPEN_CONNECTIONS.inc()
        self._last_activity = next(_ACTIVITY)
        self._arm(self.limits.header_timeout)
        same_address = self._same_address()
        if len(same_address) > self.limits.max_connections_per_client:
            self._make_room(same_address, per_client=True)
        elif len(self.connections) > self.limits.max_connections:
            self._make_room(self.connections)

    def connection_lost(self, exc: Exception | None) -> None:
        metrics.OPEN_CONNECTIONS.dec()
        self._lost = True
        if isinstance(self.app, _Tagged):
            self.app.connection = None  # no cycle left behind for the collector
        self._disarm()
        self._end_deadline()
        if self.principal is not None:
            self.principals[self.principal] -= 1
            if not self.principals[self.principal]:
                del self.principals[self.principal]
        super().connection_lost(exc)  # type: ignore[misc]

    def identify(self, principal: str) -> int | None:
        """This connection belongs to ``principal`` (its first authenticated request says so;
        later calls change nothing). Returns None, or the per-principal limit this connection
        goes past: it must then be answered 429 and closed."""
        if self.principal is not None or self._lost:
            return None
        self.principal = principal
        self.principals[principal] += 1
        limit = self.limits.max_connections_per_principal
        if self.principals[principal] > limit:
            logger.warning("connection limit per principal (%d) reached by %s", limit, principal)
            return limit
        return None

    def _same_address(self) -> list[Any]:
        """Open connections from this connection's client address, this one included."""
        address = self.client[0] if self.client else None
        return [
            other
            for other in self.connections
            if isinstance(other, LimitedConnection)
            and (other.client[0] if other.client else None) == address
        ]

    def _throttle(self) -> None:
        """429 with code 21 and ``Retry-After`` on the connection itself, then close it."""
        logger.warning(
            "connection limit per client (%d) reached by %s: refusing",
            self.limits.max_connections_per_client,
            self.client[0] if self.client else "-",
        )
        metrics.refused("connections_per_client")
        body = throttled_body(
            "Too many connections from this address "
            f"(at most {self.limits.max_connections_per_client}); retry after "
            f"{RETRY_AFTER_SECONDS} s"
        )
        head = (
            "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nretry-after: {RETRY_AFTER_SECONDS}\r\n"
            "connection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()
        self.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        self._last_activity = next(_ACTIVITY)
        # a request's first bytes: all of it must arrive within the request timeout
        starts = self._deadline is None and self.reading() is Reading.HEADERS
        super().data_received(data)  # type: ignore[misc]
        reading = self.reading()
        if reading is Reading.ARRIVED:  # the request has arrived, or the connection ends
            self._disarm()
            self._end_deadline()
            return
        if starts:
            self._deadline = self.loop.call_later(
                self.limits.request_timeout, self._request_timed_out
            )
        if reading is Reading.BODY:
            self._arm(self.limits.body_timeout)

    def _end_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _request_timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.reading() is Reading.ARRIVED:
            return
        if self.flow.read_paused:  # the application is behind, not the client
            self._deadline = self.loop.call_later(self.limits.body_timeout, self._request_timed_out)
            return
        logger.info(
            "closing %s: its request did not arrive whole within %g s",
            self.client[0] if self.client else "-",
            self.limits.request_timeout,
        )
        metrics.refused("request_timeout")
        self.transport.close()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(seconds, self._read_timed_out)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        if self.flow.read_paused:  # the application is behind, not the client
            self._arm(self.limits.body_timeout)
            return
        reading = self.reading()
        if reading is not Reading.ARRIVED:
            logger.debug("closing %s: no request data within the read timeout", self.client)
            metrics.refused("header_timeout" if reading is Reading.HEADERS else "body_timeout")
            self.transport.close()

    def _waiting(self) -> bool:
        """No request in progress: still sending headers, or idle between requests."""
        return self.cycle is None or self.cycle.response_complete

    def _make_room(self, among: Any, per_client: bool = False) -> None:
        """Close the connection of ``among`` that has waited longest without a request in
        progress; when every one has a request in progress, refuse this one (over the
        per-client limit: 429 with code 21 on the connection first)."""
        others: list[Any] = [
            other
            for other in among
            if other is not self and isinstance(other, LimitedConnection) and other._waiting()
        ]
        if not others:
            if per_client:
                self._throttle()
                return
            logger.warning("connection limit %d reached: refusing", self.limits.max_connections)
            metrics.refused("connection_limit")
            self.transport.close()
            return
        oldest = min(others, key=lambda other: other._last_activity)
        logger.debug("connection limit reached: closing the idle connection of %s", oldest.client)
        metrics.refused("idle_closed_for_room")
        oldest.transport.close()
        self.connections.discard(oldest)  # counted out now, not when the loop gets to it


class LimitedH11Protocol(LimitedConnection, H11Protocol):
    """uvicorn's h11 protocol with the limits."""

    conn: h11.Connection

    def reading(self) -> Reading:
        state = self.conn.their_state
        if state is h11.IDLE:
            return Reading.HEADERS
        return Reading.BODY if state is h11.SEND_BODY else Reading.ARRIVED


_HTTPTOOLS_PROTOCOL: list[type[Any]] = []


def _httptools_protocol() -> type[Any]:
    """uvicorn's httptools protocol with the limits (made once, when first asked for: httptools
    is optional)."""
    if _HTTPTOOLS_PROTOCOL:
        return _HTTPTOOLS_PROTOCOL[0]
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class LimitedHttpToolsProtocol(LimitedConnection, HttpToolsProtocol):
        """uvicorn's httptools protocol with the limits. httptools has no state to ask, so
        its parser's callbacks are followed: a message begins (headers arriving), its headers
        are complete (body arriving), it is complete (arrived); once its answer is sent, the
        connection waits for the next request's headers again."""

        _reading = Reading.HEADERS

        def reading(self) -> Reading:
            return self._reading

        def on_message_begin(self) -> None:
            self._reading = Reading.HEADERS
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._reading = Reading.BODY
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._reading = Reading.ARRIVED
            super().on_message_complete()

        def on_response_complete(self) -> None:
            if self._reading is Reading.ARRIVED:
                self._reading = Reading.HEADERS
            super().on_response_complete()

        def send_400_response(self, msg: str) -> None:
            self._reading = Reading.ARRIVED  # the connection ends
            super().send_400_response(msg)

    _HTTPTOOLS_PROTOCOL.append(LimitedHttpToolsProtocol)
    return LimitedHttpToolsProtocol
