"""A TCP front for a server: a second address that forwards to it and can be killed.

Hive Metastore high availability is several metastore servers over one backing database,
listed in the client's ``uri``. The local metastore keeps its data in embedded Derby, which one
JVM at a time may open (and the pyspark wheel has no Derby network server), so a second
metastore over the same data cannot be started here. A ``TcpFront`` stands in for it: a
listener on its own port whose connections are forwarded, byte for byte, to the real
metastore. ``kill()`` is what the client sees when that server dies: every open connection is
reset and the port refuses new ones.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading


class TcpFront:
    """Forwards ``127.0.0.1:<port>`` to ``target``; ``kill()`` resets everything at once."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
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
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            try:
                while True:
                    for key, _ in selector.select():
                        data = key.fileobj.recv(65536)
                        if not data:
                            return
                        peers[key.fileobj].sendall(data)
            except (OSError, ValueError):
                return
            finally:
                with self._lock:
                    self._sockets.difference_update(peers)
                for sock in peers:
                    with contextlib.suppress(OSError):
                        sock.close()
