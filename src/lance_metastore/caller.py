"""What the current caller of a served namespace may do, for code below the REST server.

The REST server (``lance_metastore.rest``) authenticates each request, looks up the caller's
privilege on the object it names, and sets :data:`caller_permission` for the duration of the
call (the namespace method runs in a worker thread that inherits it). Credential vending reads
it to narrow what it vends: ``narrowed_permission(configured)`` is never more than the
namespace's own ``credential_vendor.permission`` and never more than the caller's privilege.
Outside a served request (in-process use) the value is ``None`` and nothing is narrowed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

# Storage permissions as Lance's credential_vendor.permission names them, weakest first.
PERMISSIONS = ("read", "write", "admin")

# None: not inside a served request (nothing to narrow); "none": the caller may describe the
# table but not read its data, so no credentials may be vended to it.
caller_permission: ContextVar[str | None] = ContextVar("caller_permission", default=None)


@contextlib.contextmanager
def calling_with(permission: str | None) -> Iterator[None]:
    """Within this block the current caller may be vended at most ``permission`` (read,
    write, admin; ``none``: nothing). The REST server wraps each namespace call in it."""
    token = caller_permission.set(permission)
    try:
        yield
    finally:
        caller_permission.reset(token)


def narrowed_permission(configured: str) -> str | None:
    """The storage permission to vend: the namespace's ``configured`` one narrowed by the
    current caller's (``None``: vend nothing, the caller may not read the table's data)."""
    caller = caller_permission.get()
    if caller is None:
        return configured
    if caller not in PERMISSIONS:
        return None
    return PERMISSIONS[min(PERMISSIONS.index(configured), PERMISSIONS.index(caller))]
