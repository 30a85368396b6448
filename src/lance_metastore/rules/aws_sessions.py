"""boto3 sessions that share one botocore data loader.

Every new boto3 session reads and parses the service models (Glue's alone is over a megabyte
of JSON) before its first client: about a quarter of a second, paid by every namespace object,
every credential vendor and every Spark task that connects. botocore's loader caches what it
has read, so one loader shared by all the sessions of a process reads each model once. The
loader holds only the models botocore ships, never a credential; each session keeps its own
credentials, region and configuration.
"""

from __future__ import annotations

import threading
from typing import Any

from .extras import requires_extra

with requires_extra("aws"):
    import boto3
    import botocore.session
    from botocore.loaders import Loader, create_loader

_loader: Loader | None = None
_loader_lock = threading.Lock()


def _shared_loader() -> Loader:
    global _loader
    with _loader_lock:
        if _loader is None:
            _loader = create_loader()
        return _loader


def aws_session(**kwargs: Any) -> boto3.Session:
    """``boto3.Session(**kwargs)`` on a botocore session that uses the process's loader."""
    core = botocore.session.get_session()
    core.register_component("data_loader", _shared_loader())
    return boto3.Session(botocore_session=core, **kwargs)
