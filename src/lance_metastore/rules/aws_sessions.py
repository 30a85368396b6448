"""boto3 sessions that share what botocore would otherwise build again for each one.

Every new boto3 session reads and parses the service models (Glue's alone is over a megabyte
of JSON) before its first client, and registers botocore's ~130 built-in event handlers, each
checked by introspection: about a quarter of a second, then ~13 ms CPU, paid by every
namespace object, every credential vendor and every Spark task that connects. So the sessions
of a process share two things that hold no credential:

- one botocore loader, which caches each model it has read;
- one emitter holding the built-in handlers, registered once; each session starts from its
  own copy of it (botocore's ``event_hooks``), so a handler registered on one session reaches
  no other.

Each session keeps its own credentials, region and configuration.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from .extras import requires_extra

with requires_extra("aws"):
    import boto3
    import botocore.session
    from botocore import handlers
    from botocore.credentials import Credentials
    from botocore.hooks import EventAliaser, HierarchicalEmitter
    from botocore.loaders import Loader, create_loader


@functools.cache  # two threads racing on the first call build two loaders: harmless
def _shared_loader() -> Loader:
    return create_loader()


@functools.cache  # likewise: two equal emitters, one kept
def _builtin_handlers() -> HierarchicalEmitter:
    """An emitter with botocore's built-in handlers, registered as a new session registers
    them (aliased names, first/last where botocore says). Not by building a session: that
    would also run botocore's session initializers on it, and then again on each copy."""
    emitter = HierarchicalEmitter()
    events = EventAliaser(emitter)
    for spec in handlers.BUILTIN_HANDLERS:
        event_name, handler = spec[0], spec[1]
        if len(spec) == 2:
            events.register(event_name, handler)
        elif spec[2] is handlers.REGISTER_FIRST:
            events.register_first(event_name, handler)
        elif spec[2] is handlers.REGISTER_LAST:
            events.register_last(event_name, handler)
    return emitter


def aws_session(credentials: Credentials | None = None, **kwargs: Any) -> boto3.Session:
    """``boto3.Session(**kwargs)`` on a botocore session that uses the process's loader and a
    copy of its built-in handlers; ``credentials`` (refreshable ones, say, which boto3's
    arguments cannot carry) sign its clients when given."""
    core = botocore.session.Session(
        event_hooks=copy.copy(_builtin_handlers()), include_builtin_handlers=False
    )
    core.register_component("data_loader", _shared_loader())
    if credentials is not None:
        core._credentials = credentials  # type: ignore[attr-defined]  # botocore has no setter
    return boto3.Session(botocore_session=core, **kwargs)
