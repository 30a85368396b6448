"""Connections of this process, counted by the kernel rather than by the client that owns them.

A pool's own count of its connections only says what the pool believes; a leak is exactly a
connection the pool has forgotten. These helpers read the kernel's socket tables (procfs) so a
test can compare the two.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from urllib.parse import urlparse

# TCP states as /proc/net/tcp spells them.
ESTABLISHED = "01"
CLOSE_WAIT = "08"  # the server closed its end and this process has not closed its own yet


def port_of(uri: str) -> int:
    """The port of the first URI of a comma-separated list (thrift://, http://, ...)."""
    return int(urlparse(uri.split(",")[0].strip()).port)


def our_connections_to(port: int, states: tuple[str, ...] = (ESTABLISHED,)) -> int | None:
    """TCP connections from this process to ``port``, ESTABLISHED ones unless ``states`` says
    otherwise (None without procfs).

    Adding CLOSE_WAIT counts sockets a server hung up on that this process still holds: what
    a client that forgets to close leaves behind when the server does not keep connections.
    """
    if not os.path.isdir("/proc/self/fd"):
        return None
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    # Distinct sockets, not lines: the kernel writes these tables a page per read, and while
    # connections open and close between two reads a line can come out twice.
    counted = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if state in states and int(remote.rsplit(":", 1)[1], 16) == port and inode in inodes:
                counted.add(inode)
    return len(counted)
