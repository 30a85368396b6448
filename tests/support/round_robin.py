"""A loopback load balancer for tests: each new client connection goes to the next server of
a list, in turn, and its bytes are forwarded both ways until either side closes.

Per connection, as a TCP (layer 4) balancer does: a keep-alive client stays on one replica
for the life of its connection, and a client with several connections spreads over them.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from urllib.parse import urlsplit


class RoundRobin:
    """``with RoundRobin([url, ...]) as front: front.url``."""

    def __init__(self, urls: list[str]) -> None:
        self.targets = [
            (urlsplit(url).hostname or "127.0.0.1", urlsplit(url).port or 80) for url in urls
        ]
        self._next = itertools.cycle(range(len(self.targets)))
        self.connections = [0] * len(self.targets)  # how many each target was given
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="round-robin", daemon=True)

    def __enter__(self) -> RoundRobin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        self._listener.close()
        self._thread.join(5)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            index = next(self._next)
            self.connections[index] += 1
            try:
                upstream = socket.create_connection(self.targets[index], timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Bytes from ``source`` to ``sink`` until ``source`` ends; then both are shut."""
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (sink, source):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
