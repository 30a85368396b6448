"""What the REST server tests start: ``lance-metastore serve`` as a process, and a catalog that
cannot be reached."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from lance_metastore import GlueNamespace

SUPPORT = str(Path(__file__).parent)


def serve_cli(*args: str) -> subprocess.Popen[str]:
    """``lance-metastore ARGS`` in a child process that can import test support (the
    namespaces of ``rest_namespaces``)."""
    return subprocess.Popen(
        [sys.executable, "-m", "lance_metastore.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SUPPORT + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )


def unreachable_glue(root: Path) -> GlueNamespace:
    """A Glue namespace whose endpoint is a loopback port nothing listens on (one attempt per
    call), with a secret that must never show."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there once closed
    return GlueNamespace(
        region="us-east-1",
        endpoint=f"http://127.0.0.1:{port}",
        access_key_id="AKIAEXAMPLEEXAMPLE",
        secret_access_key="never-shown-secret-value",
        root=str(root),
        max_retries="1",
    )
