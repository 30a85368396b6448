"""Slow and many clients: read timeouts and a connection limit for uvicorn's HTTP/1.1 server.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive``, but a new
connection that never finishes its request headers, or a request whose body stops arriving,
stays open forever, and nothing bounds how many connections are open. :class:`ClientLimits`
adds both, in uvicorn's own h11 protocol (the HTTP implementation this project installs):

- ``header_timeout``: a new connection has this long to deliver its first request's headers
  (later requests on a kept-alive connection are bounded by uvicorn's keep-alive timeout);
- ``body_timeout``: while a request body arrives, at most this long may pass without a byte
  (time the application itself takes to read does not count);
- ``max_connections``: past it, the connection that has waited longest without a request in
  progress (still sending headers, or idle between requests) is closed to make room; when
  every connection has a request in progress, the new one is closed. So clients that open
  connections and say nothing cannot lock out those that do send requests.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from ..rules.extras import requires_extra

with requires_extra("server"):
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger("lance_metastore.rest")

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_KEEP_ALIVE_TIMEOUT = 5
DEFAULT_MAX_CONNECTIONS = 512


@dataclass(frozen=True)
class ClientLimits:
    """How long the server waits for a client, and how many it holds at once."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    keep_alive_timeout: int = DEFAULT_KEEP_ALIVE_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "keep_alive_timeout", "max_connections"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")

    def protocol(self) -> type[H11Protocol]:
        """uvicorn's h11 protocol class, enforcing these limits (``uvicorn.Config(http=...)``)."""
        return type("LimitedH11Protocol", (LimitedH11Protocol,), {"limits": self})


class LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header timeout, a body timeout and a connection limit."""

    limits: ClientLimits = ClientLimits()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._read_timer: asyncio.TimerHandle | None = None
        self._last_activity = self.loop.time()
        self._arm(self.limits.header_timeout)
        if len(self.connections) > self.limits.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._last_activity = self.loop.time()
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            self._arm(self.limits.body_timeout)
        elif state is not h11.IDLE:  # the request has arrived, or the connection ends
            self._disarm()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(seconds, self._read_timed_out)

    def _disarm(self) -> None:
        if getattr(self, "_read_timer", None) is not None:
            self._read_timer.cancel()  # type: ignore[union-attr]
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        if self.flow.read_paused:  # the application is behind, not the client
            self._arm(self.limits.body_timeout)
            return
        state = self.conn.their_state
        if state is h11.IDLE or state is h11.SEND_BODY:
            logger.debug("closing %s: no request data within the read timeout", self.client)
            self.transport.close()

    def _waiting(self) -> bool:
        """No request in progress: still sending headers, or idle between requests."""
        return self.cycle is None or self.cycle.response_complete

    def _make_room(self) -> None:
        others: list[Any] = [
            other
            for other in self.connections
            if other is not self and isinstance(other, LimitedH11Protocol) and other._waiting()
        ]
        if not others:
            logger.warning("connection limit %d reached: refusing", self.limits.max_connections)
            self.transport.close()
            return
        oldest = min(others, key=lambda other: other._last_activity)
        logger.debug("connection limit reached: closing the idle connection of %s", oldest.client)
        oldest.transport.close()
        self.connections.discard(oldest)  # counted out now, not when the loop gets to it
