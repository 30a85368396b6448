"""Namespaces of one backend reached one way, in-process or through our REST server, with
locations confined: what the location tests attack on every backend and both paths."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from lance_namespace import LanceNamespace

from .harness import Harness
from .rest import RestHarness

# The ways a caller reaches a namespace: the fixtures' params.
VIAS = ("in-process", "rest")


class Access:
    """One backend's confined namespaces, reached ``via`` one of :data:`VIAS`."""

    def __init__(self, backend: Harness, via: str) -> None:
        self.backend = backend
        self.via = via
        # The REST harness allows its test directory unless told otherwise; here only root.
        self.rest = RestHarness(root=backend.root, inner=backend) if via == "rest" else None

    def connect(self, **overrides: str | None) -> LanceNamespace:
        if self.rest is not None:
            return self.rest.connect(**{"allowed_locations": None, **overrides})
        return self.backend.connect(confine_locations="true", **overrides)

    def close(self) -> None:
        if self.rest is not None:
            self.rest.close()


@contextlib.contextmanager
def confined_access(backend: Harness, via: str) -> Iterator[Access]:
    """An :class:`Access`, its REST server stopped at the end."""
    chosen = Access(backend, via)
    try:
        yield chosen
    finally:
        chosen.close()
