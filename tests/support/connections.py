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


def port_of(uri: str) -> int:
    """The port of the first URI of a comma-separated list (thrift://, http://, ...)."""
    return int(urlparse(uri.split(",")[0].strip()).port)


def our_connections_to(port: int) -> int | None:
    """ESTABLISHED TCP connections from this process to ``port`` (None without procfs)."""
    if not os.path.isdir("/proc/self/fd"):
        return None
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port and inode in inodes:
                count += 1
    return count
