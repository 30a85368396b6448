"""A TCP front for a server: a second address that forwards to it and can be killed.

Hive Metastore high availability is several metastore servers over one backing database,
listed in the client's ``uri``. The local metastore keeps its data in embedded Derby, which one
JVM at a time may open (and the pyspark wheel has no Derby network server), so a second
metastore over the same data cannot be started here. A ``TcpFront`` stands in for it: a
listener on its own port whose connections are forwarded, byte for byte, to the real
metastore. ``kill()`` is what the client sees when that server dies: every open connection is
reset and the port refuses new ones.

``hold(method)`` orders a race deterministically: the next request for that Thrift method
that passes through the front is held, unsent, until released (see :class:`HeldCall`); the
metastore itself is unchanged. Requests are recognised by their Thrift binary message header,
read from the first bytes a client sends after a reply (a Thrift client waits for each reply
before its next request).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
from collections.abc import Iterator


class HeldCall:
    """A Thrift call held at the front: ``reached`` is set when it arrives, and it goes on to
    the metastore on ``release()`` (or after ``timeout`` seconds, so a failed test cannot
    hang a connection)."""

    def __init__(self, method: str, timeout: float) -> None:
        self.method = method
        self.timeout = timeout
        self.reached = threading.Event()
        self._released = threading.Event()

    def hold(self) -> None:
        self.reached.set()
        self._released.wait(self.timeout)

    def release(self) -> None:
        self._released.set()


def thrift_method(message: bytes) -> str | None:
    """The method name of a Thrift binary-protocol message (strict or old header)."""
    if len(message) < 8:
        return None
    first = struct.unpack("!i", message[:4])[0]
    if first < 0:  # strict: version and type, then the name's length
        (length,) = struct.unpack("!i", message[4:8])
        start = 8
    else:  # old header: the name's length first
        length, start = first, 4
    if not 0 < length <= 256 or len(message) < start + length:
        return None
    return message[start : start + length].decode("ascii", "replace")


class TcpFront:
    """Forwards ``127.0.0.1:<port>`` to ``target``; ``kill()`` resets everything at once."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._holds: list[HeldCall] = []
        self.port = 0

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def __enter__(self) -> TcpFront:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def start(self) -> None:
        """Listen (again, on the same port once it had one) and forward."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    @contextlib.contextmanager
    def hold(self, method: str, timeout: float = 60.0) -> Iterator[HeldCall]:
        """Hold the next ``method`` call sent through this front until the block's
        ``release()`` or its end."""
        held = HeldCall(method, timeout)
        with self._lock:
            self._holds.append(held)
        try:
            yield held
        finally:
            with self._lock:
                if held in self._holds:
                    self._holds.remove(held)
            held.release()

    def _take_hold(self, request: bytes) -> HeldCall | None:
        method = thrift_method(request)
        with self._lock:
            for held in self._holds:
                if held.method == method:
                    self._holds.remove(held)
                    return held
        return None

    def open_connections(self) -> int:
        with self._lock:
            return len(self._sockets) // 2

    def kill(self) -> None:
        """Stop listening and reset every forwarded connection (RST, as a dead host would)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # killed
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # killed meanwhile
                    client.close()
                    upstream.close()
                    return
                self._sockets.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        request_starts = True  # the next bytes from the client begin a new request
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            try:
                while True:
                    for key, _ in selector.select():
                        data = key.fileobj.recv(65536)
                        if not data:
                            return
                        if key.fileobj is client and request_starts:
                            held = self._take_hold(data)
                            if held is not None:
                                held.hold()
                        request_starts = key.fileobj is upstream
                        peers[key.fileobj].sendall(data)
            except (OSError, ValueError):
                return
            finally:
                with self._lock:
                    self._sockets.difference_update(peers)
                for sock in peers:
                    with contextlib.suppress(OSError):
                        sock.close()
