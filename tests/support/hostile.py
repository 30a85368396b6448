"""What a hostile client sends, for the hostile-client suite and ``benchmarks/bench_rest.py``.

- :func:`decompression_bomb`: a small zstd-compressed Arrow IPC stream that decodes to about
  ``decoded_mib`` MiB of zeros, built without ever holding more than one 8 MiB batch;
- :func:`half_open`: sockets that start a request and never finish its headers;
- :func:`peak_rss_mib`: a process's peak resident memory (Linux ``VmHWM``);
- :data:`SERVER_STACKS`: the HTTP parser and event loop a server runs on, both of them: the
  connection limits are written once over either (``rest/connections.py``).
"""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.ipc as ipc

BATCH_ROWS = 1 << 20  # one int64 column: 8 MiB per batch

# ``RestServer(..., **SERVER_STACKS[name])``: pure Python (what a server without the C
# extensions runs), and the C parser and loop (what ``auto`` picks when they are installed).
SERVER_STACKS = {
    "h11-asyncio": {"http": "h11", "loop": "asyncio"},
    "httptools-uvloop": {"http": "httptools", "loop": "uvloop"},
}


def decompression_bomb(decoded_mib: int = 1024) -> bytes:
    """An Arrow IPC stream of ``decoded_mib`` MiB of int64 zeros, zstd-compressed (about
    280 bytes per decoded MiB on the wire): one 8 MiB batch compressed once, its message
    repeated."""
    zeros = pa.py_buffer(bytes(8 * BATCH_ROWS))
    batch = pa.record_batch({"id": pa.Array.from_buffers(pa.int64(), BATCH_ROWS, [None, zeros])})
    options = ipc.IpcWriteOptions(compression="zstd")
    empty, one = io.BytesIO(), io.BytesIO()
    with ipc.new_stream(empty, batch.schema, options=options):
        pass
    with ipc.new_stream(one, batch.schema, options=options) as writer:
        writer.write_batch(batch)
    schema_message, end_of_stream = empty.getvalue()[:-8], empty.getvalue()[-8:]
    batch_message = one.getvalue()[len(schema_message) : -8]
    return schema_message + batch_message * max(1, decoded_mib // 8) + end_of_stream


@contextmanager
def half_open(
    url: str, count: int, path: str = "/v1/namespace/$/list"
) -> Iterator[list[socket.socket]]:
    """``count`` connections to ``url``, each having sent a request line and one header but not
    the blank line that ends the headers; closed on exit."""
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1", parts.port or 80)
    partial = f"GET {path} HTTP/1.1\r\nHost: {address[0]}\r\n".encode()
    with ExitStack() as stack:
        sockets = []
        for _ in range(count):
            sock = stack.enter_context(socket.create_connection(address, timeout=30))
            sock.sendall(partial)
            sockets.append(sock)
        yield sockets


def closed_by_peer(sock: socket.socket, deadline: float) -> bool:
    """Whether the server closes ``sock`` before ``deadline`` (``time.monotonic()``), reading
    and discarding whatever it sends first."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        sock.settimeout(remaining)
        try:
            if not sock.recv(4096):
                return True
        except TimeoutError:
            return False
        except ConnectionError:
            return True


def peak_rss_mib(pid: int | str) -> float:
    """The peak resident set size of process ``pid`` (or ``"self"``) so far, in MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")
