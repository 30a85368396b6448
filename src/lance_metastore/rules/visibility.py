"""Who is listing, and which objects they may see: set once around a call, read by every listing.

A server that serves callers of unequal rights (the REST server with a policy) wraps each call
in :func:`seen_by` with the caller's name and a predicate on canonical ids, and marks the
namespace it serves as *policed* (:meth:`~lance_metastore.rules.paging.Pager.police`). Every
listing pages object ids (tuples, never joined text) and filters them through
:func:`judge` *before* it cuts a page, so page sizes, page tokens and the presence of a next
page never depend on an object the caller may not see; page tokens are sealed for that caller
alone (:mod:`~lance_metastore.rules.paging`).

Fail closed: in a policed namespace, a listing that runs where no :func:`seen_by` is in force
(a thread that did not copy the request's context) sees nothing, never everything. A namespace
no server polices (the library's case) sees everything unless a block says otherwise.

Context variables carry both: a call handed to a worker thread (Starlette's
``run_in_threadpool`` copies the context) sees the caller of the request that made it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar

NAMESPACE = "namespace"
TABLE = "table"
# (canonical id, NAMESPACE or TABLE) -> whether the current caller may see that object
Visible = Callable[[Sequence[str], str], bool]


class _Unset:
    """No :func:`seen_by` block is in force (distinct from one that shows everything)."""


_UNSET = _Unset()
_viewer: ContextVar[str] = ContextVar("lance_metastore_viewer", default="")
_visible: ContextVar[Visible | _Unset | None] = ContextVar(
    "lance_metastore_visible", default=_UNSET
)


@contextlib.contextmanager
def seen_by(viewer: str, visible: Visible | None) -> Iterator[None]:
    """Within this block, listings show only ids ``visible`` accepts (None: all) and page
    tokens are sealed for ``viewer`` (a scheme-qualified principal)."""
    viewer_token = _viewer.set(viewer)
    visible_token = _visible.set(visible)
    try:
        yield
    finally:
        _visible.reset(visible_token)
        _viewer.reset(viewer_token)


def viewer() -> str:
    """Who is listing now ("" outside a server's call: the process itself)."""
    return _viewer.get()


def _nothing(object_id: Sequence[str], kind: str) -> bool:
    return False


def current(policed: bool) -> Visible | None:
    """What the current caller may see (None: everything). Outside any :func:`seen_by`
    block: everything in a namespace no server polices, nothing in one a server does."""
    visible = _visible.get()
    if isinstance(visible, _Unset):
        return _nothing if policed else None
    return visible
