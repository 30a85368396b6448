"""boto3 sessions that share one botocore data loader.

Every new boto3 session reads and parses the service models (Glue's alone is over a megabyte
of JSON) before its first client: about a quarter of a second, paid by every namespace object,
every credential vendor and every Spark task that connects. botocore's loader caches what it
has read, so one loader shared by all the sessions of a process reads each model once. The
loader holds only the models botocore ships, never a credential; each session keeps its own
credentials, region and configuration.
"""

from __future__ import annotations

import functools
from typing import Any

from .extras import requires_extra

with requires_extra("aws"):
    import boto3
    import botocore.session
    from botocore.credentials import Credentials
    from botocore.loaders import Loader, create_loader


@functools.cache  # two threads racing on the first call build two loaders: harmless
def _shared_loader() -> Loader:
    return create_loader()


def aws_session(credentials: Credentials | None = None, **kwargs: Any) -> boto3.Session:
    """``boto3.Session(**kwargs)`` on a botocore session that uses the process's loader;
    ``credentials`` (refreshable ones, say, which boto3's arguments cannot carry) sign its
    clients when given."""
    core = botocore.session.get_session()
    core.register_component("data_loader", _shared_loader())
    if credentials is not None:
        core._credentials = credentials  # type: ignore[attr-defined]  # botocore has no setter
    return boto3.Session(botocore_session=core, **kwargs)
