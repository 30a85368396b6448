"""A thread-safe pool of Thrift connections to one or more Hive Metastores.

Connections are opened on demand up to ``size``, reused across calls and threads, and thrown
away when a call breaks them. ``uris`` is a fail-over list: a new connection tries the server
that last worked first, then the others in order. Every connection, first or replacement,
authenticates the same way (:mod:`.transport`: plain, TLS or Kerberos).
"""

from __future__ import annotations

import logging
import queue
import select
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import urlparse

from ..rules.extras import requires_extra
from .transport import (
    PLAIN,
    AuthenticationFailed,
    KerberosUnavailable,
    Security,
    open_transport,
)

with requires_extra("hive"):
    from pymetastore.hive_metastore import ThriftHiveMetastore
    from thrift.protocol import TBinaryProtocol
    from thrift.protocol.TProtocol import TProtocolException
    from thrift.Thrift import TException
    from thrift.transport import TSocket, TTransport

logger = logging.getLogger("lance_metastore.hive")


class _RefusedConnectionFilter(logging.Filter):
    """Thrift logs every refused connection at ERROR; the pool reports it in its own error
    (naming each server it tried), so the raw line is only noise before the clean message."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Could not connect to any of")


logging.getLogger(TSocket.__name__).addFilter(_RefusedConnectionFilter())


@dataclass(frozen=True)
class Server:
    host: str
    port: int

    def __str__(self) -> str:
        return f"thrift://{self.host}:{self.port}"


def parse_uris(value: str) -> list[Server]:
    """``thrift://host:port[,thrift://host:port...]`` -> servers, or ValueError."""
    servers = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        parsed = urlparse(item)
        if parsed.scheme != "thrift" or not parsed.hostname:
            raise ValueError(f"expected thrift://host:port, got {item!r}")
        try:
            port = 9083 if parsed.port is None else parsed.port
        except ValueError:
            raise ValueError(f"invalid port in {item!r}") from None
        if port == 0:
            raise ValueError(f"invalid port in {item!r}")
        servers.append(Server(parsed.hostname, port))
    if not servers:
        raise ValueError("no metastore URI given")
    return servers


class Connection:
    """One open Thrift connection and its generated client."""

    def __init__(self, server: Server, timeout_sec: float, security: Security = PLAIN) -> None:
        self.server = server
        self.transport, self._socket = open_transport(
            server.host, server.port, timeout_sec, security
        )
        # Thrift's C codec where installed (the thrift wheel builds it): encoding and decoding
        # a Table in pure Python holds the GIL long enough to slow every other writer thread.
        # Secured transports keep the pure-Python codec they were proven with.
        codec = (
            TBinaryProtocol.TBinaryProtocolAccelerated
            if security == PLAIN
            else TBinaryProtocol.TBinaryProtocol
        )
        protocol = codec(self.transport)
        self.client = ThriftHiveMetastore.Client(protocol)
        # Reads the reply of a call sent without waiting for it (ConnectionPool.send_only).
        self.unread: Callable[[Connection], None] | None = None

    def read_unread(self) -> bool:
        """Read the reply of the call sent last without waiting for it, if any; False when
        that found the connection broken."""
        unread, self.unread = self.unread, None
        if unread is None:
            return True
        try:
            unread(self)
        except Exception as error:
            logger.warning("reply of a metastore call sent without waiting: %s", error)
            return _leaves_connection_usable(error)
        return True

    def is_stale(self) -> bool:
        """Whether this idle connection is closed, here or by the server (e.g. a restart).

        Between calls nothing may be readable: readiness means end-of-stream or an error.
        """
        handle = self._socket.handle
        if handle is None:
            return True
        try:
            if hasattr(select, "poll"):
                poller = select.poll()
                poller.register(handle, select.POLLIN | select.POLLERR | select.POLLHUP)
                return bool(poller.poll(0))
            return bool(select.select([handle], [], [handle], 0)[0])
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        # plain try: close may run from a finalizer at interpreter exit, when module globals
        # such as ``contextlib`` are already gone
        try:  # noqa: SIM105
            self.transport.close()
        except Exception:
            pass


class _Borrowed:
    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._connection: Connection | None = None

    def __enter__(self) -> Connection:
        self._connection = self._pool._acquire()
        return self._connection

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._connection is not None
        self._pool._release(self._connection, error)


class ConnectionPool:
    """At most ``size`` connections, shared by every thread of one namespace object."""

    def __init__(
        self, servers: list[Server], size: int, timeout_sec: float, security: Security = PLAIN
    ) -> None:
        self._servers = servers
        self._timeout = timeout_sec
        self._security = security
        self._idle: queue.LifoQueue[Connection] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._preferred = 0
        self._open = 0

    @property
    def open_connections(self) -> int:
        """Connections currently open (idle or in use); tests count them to find leaks."""
        return self._open

    def _connect(self) -> Connection:
        errors = []
        refusals: list[AuthenticationFailed | KerberosUnavailable] = []
        count = len(self._servers)
        for offset in range(count):
            index = (self._preferred + offset) % count
            server = self._servers[index]
            try:
                connection = Connection(server, self._timeout, self._security)
            except (TTransport.TTransportException, OSError) as error:
                errors.append(f"{server}: {error}")
                continue
            except (AuthenticationFailed, KerberosUnavailable) as error:
                # Another server may have the right key or certificate: fail over, but
                # report the refusal, never retried, if no server lets us in.
                refusals.append(error)
                errors.append(str(error))
                continue
            if index != self._preferred:
                logger.warning("metastore fail-over to %s", server)
                self._preferred = index
            with self._lock:
                self._open += 1
            return connection
        if refusals:
            kind = (
                AuthenticationFailed
                if any(isinstance(e, AuthenticationFailed) for e in refusals)
                else KerberosUnavailable
            )
            raise kind("; ".join(errors))
        raise TTransport.TTransportException(
            TTransport.TTransportException.NOT_OPEN,
            "no metastore reachable: " + "; ".join(errors),
        )

    def connection(self) -> _Borrowed:
        """Borrow a connection (``with pool.connection() as c``); a broken one is discarded.

        A class, not ``@contextmanager``: Thrift's exceptions are immutable and contextlib
        assigns ``__traceback__`` when it re-raises them.
        """
        return _Borrowed(self)

    def send_only(
        self, send: Callable[[Connection], None], receive: Callable[[Connection], None]
    ) -> None:
        """A call whose caller need not wait for its reply (a lock's release): ``send`` sends
        it, and the connection goes back to the pool at once; whoever borrows it next reads
        the reply first (``receive``), so the calls on one connection stay in order (the pool
        lends the connection returned last first: usually the same thread's next call)."""
        with self.connection() as connection:
            send(connection)
            connection.unread = receive

    def _acquire(self) -> Connection:
        self._slots.acquire()
        try:
            # Idle connections the server has closed (a restart closes them all) are dropped
            # here, before a call is sent on them: retries alone would run out on a pool of
            # dead connections, and calls that are not retried would fail.
            while True:
                try:
                    connection = self._idle.get_nowait()
                except queue.Empty:
                    break
                if connection.read_unread() and not connection.is_stale():
                    return connection
                self._discard(connection)
            return self._connect()
        except BaseException:
            self._slots.release()
            raise

    def _release(self, connection: Connection, error: BaseException | None) -> None:
        try:
            if error is None or _leaves_connection_usable(error):
                self._idle.put(connection)
            else:
                self._discard(connection)
        finally:
            self._slots.release()

    def _discard(self, connection: Connection) -> None:
        connection.close()
        with self._lock:
            self._open -= 1

    def close(self) -> None:
        """Close idle connections (the pool reopens on demand); borrowed ones close when
        returned broken or at exit."""
        while True:
            try:
                connection = self._idle.get_nowait()
            except queue.Empty:
                return
            self._discard(connection)


def _leaves_connection_usable(error: BaseException) -> bool:
    """Declared Thrift errors arrive as complete replies; anything else may leave the wire dirty."""
    return isinstance(error, TException) and not isinstance(
        error, (TTransport.TTransportException, TProtocolException)
    )
