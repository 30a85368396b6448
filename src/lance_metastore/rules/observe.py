"""What the library reports about its own work, for whoever listens (the REST server's
``/metrics``).

The library depends on no metrics package: its code calls the functions here, which do nothing
(one attribute test) until a listener is installed with :func:`listen`. The REST server
installs one that feeds ``prometheus-client`` (``rest/metrics.py``). It sits with the rules,
the bottom layer, so that every layer may report.

- :func:`timed_primitives`: every ``_catalog_*`` primitive a backend class defines reports its
  latency and outcome, as ``(backend, call)``: the catalog round trips, whatever operation
  made them;
- :func:`event`: things worth counting (``commit_conflict``, ``commit_retry``,
  ``commit_adoption``, ``vending_hit``, ``vending_miss``);
- :func:`timing`: the latency of a named outside call (``sts_assume_role``).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

PRIMITIVE_PREFIX = "_catalog_"


class Listener(Protocol):
    def catalog_call(self, backend: str, call: str, seconds: float, ok: bool) -> None: ...

    def event(self, name: str) -> None: ...

    def timing(self, name: str, seconds: float, ok: bool) -> None: ...


_listener: Listener | None = None


def listen(listener: Listener | None) -> None:
    """Send reports to ``listener`` from now on (None: stop)."""
    global _listener
    _listener = listener


def event(name: str) -> None:
    if _listener is not None:
        _listener.event(name)


def timing(name: str, seconds: float, ok: bool) -> None:
    if _listener is not None:
        _listener.timing(name, seconds, ok)


def timed_primitives(cls: type[T]) -> type[T]:
    """Wrap the ``_catalog_*`` methods ``cls`` itself defines so each call reports its latency
    (called from ``CatalogCore.__init_subclass__``: every backend, once, at class creation)."""
    for name, value in list(vars(cls).items()):
        if (
            name.startswith(PRIMITIVE_PREFIX)
            and inspect.isfunction(value)
            and not inspect.isgeneratorfunction(value)  # its time is spent by its reader
            and not getattr(value, "_timed", False)
        ):
            setattr(cls, name, _timed(value, name[len(PRIMITIVE_PREFIX) :]))
    return cls


def _timed(method: Callable[..., Any], call: str) -> Callable[..., Any]:
    @functools.wraps(method)
    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _listener is None:
            return method(self, *args, **kwargs)
        started = time.perf_counter()
        ok = False
        try:
            result = method(self, *args, **kwargs)
            ok = True
            return result
        finally:
            listener = _listener
            if listener is not None:
                elapsed = time.perf_counter() - started
                listener.catalog_call(type(self).__name__, call, elapsed, ok)

    timed._timed = True  # type: ignore[attr-defined]
    return timed
