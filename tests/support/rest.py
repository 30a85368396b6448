"""The behaviour suite through the REST server: a harness that wraps another backend's harness.

``RestHarness.connect()`` serves the wrapped backend's namespace with our REST server (on a
thread, 127.0.0.1, OS-chosen port) and returns pylance's own REST client for it
(``lance_namespace.connect("rest", ...)``, Lance's Rust ``RestNamespace``). Everything that
judges the outcome (snapshots, raw catalog reads, the name oracle) stays with the wrapped
harness, so the suite checks the same catalog state as in-process.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from lance.namespace import RestNamespace
from lance_namespace import LanceNamespace

from lance_metastore.rest import OPERATIONS, RestServer
from support.harness import Harness


class RequestAsGiven(dict):
    """A request passed exactly as the caller wrote it.

    pylance's ``RestNamespace`` calls ``request.model_dump()`` and hands the result to its Rust
    client, which validates it itself; the suite's plain-dict requests (including malformed
    ones, such as ``{"id": 42}``) go through unchanged this way, as Lance's Rust core passes
    requests to a Python namespace.
    """

    def model_dump(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return dict(self)


class RestClient(RestNamespace):
    """pylance's REST client, also accepting the suite's plain-dict requests."""


def _accepting_dicts(method: Any, response: Any) -> Any:
    """The client's method, taking dict requests too; where pylance's client returns the
    server's response as a plain dict (the table-version operations), it comes back as the
    spec's response model built from exactly that dict, as in-process."""

    @functools.wraps(method)
    def call(self: RestNamespace, request: Any = None, *args: Any) -> Any:
        if isinstance(request, dict) and not hasattr(request, "model_dump"):
            request = RequestAsGiven(request)
        result = method(self, request, *args)
        if isinstance(result, dict) and response is not None:
            return response.from_dict(result)
        return result

    return call


for _operation in OPERATIONS:
    if hasattr(RestNamespace, _operation.name):
        _method = getattr(RestNamespace, _operation.name)
        setattr(RestClient, _operation.name, _accepting_dicts(_method, _operation.response))


@dataclass
class RestHarness(Harness):
    """``inner``'s backend, reached through the REST server."""

    inner: Harness | None = None
    servers: dict[str, RestServer] = field(default_factory=dict)
    conditional_updates: bool = True  # the wrapped harness's (managed-commit tests read it)

    def __post_init__(self) -> None:
        assert self.inner is not None
        inner = self.inner
        self.name = "rest"
        self.label = f"rest-{inner.label or inner.name}"
        self.conditional_updates = getattr(inner, "conditional_updates", True)
        self.supports_cascade = inner.supports_cascade
        self.odd_names = inner.odd_names
        self.bad_names = inner.bad_names
        self.max_name_length = inner.max_name_length

    def server(self, **overrides: str) -> RestServer:
        """The server over the wrapped namespace built with ``overrides`` (one per set).

        A served namespace confines the locations its callers set; the suite places datasets
        "elsewhere" in the test's own directory (beside ``root``), so the server allows that
        directory (``allowed_locations``) unless ``overrides`` say otherwise.
        """
        key = json.dumps(overrides, sort_keys=True)
        if key not in self.servers:
            properties = {"allowed_locations": str(self.root.parent), **overrides}
            self.servers[key] = RestServer(self.inner.connect(**properties)).start()
        return self.servers[key]

    def connect(self, **overrides: str) -> LanceNamespace:
        return RestClient(uri=self.server(**overrides).url)

    def properties(self) -> dict[str, str]:
        return {"uri": self.server().url}

    def namespace_class(self) -> type[LanceNamespace]:
        return RestNamespace

    def client_target(self) -> tuple[str, dict[str, str]]:
        return "rest", self.properties()

    def close(self) -> None:
        for server in self.servers.values():
            server.stop()
        self.servers.clear()

    # Everything below is judged by the wrapped harness, with the catalog's own client.
    def reset(self) -> None:
        self.inner.reset()

    def db(self, name: str) -> list[str]:
        return self.inner.db(name)

    def unique(self, prefix: str = "db") -> str:
        return self.inner.unique(prefix)

    def create_foreign_table(self, *args: Any, **kwargs: Any) -> None:
        self.inner.create_foreign_table(*args, **kwargs)

    def drop_foreign_table(self, db: list[str], name: str) -> None:
        self.inner.drop_foreign_table(db, name)

    def snapshot(self) -> dict[str, Any]:
        return self.inner.snapshot()

    def accepts_name(self, name: str) -> bool:
        return self.inner.accepts_name(name)

    def files(self) -> dict[str, int]:
        return self.inner.files()

    def columns(self, db: list[str], name: str) -> list[tuple[str, str]]:
        return self.inner.columns(db, name)

    def raw_parameters(self, db: list[str], name: str) -> dict[str, Any]:
        return self.inner.raw_parameters(db, name)


REST_BACKENDS = ["glue", "hive2", "hive3"]


@pytest.fixture(params=REST_BACKENDS, ids=[f"rest-{name}" for name in REST_BACKENDS])
def rest_backend(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """A backend reached through our REST server by pylance's REST client: a suite module
    that imports this as ``backend`` runs all its tests that way."""
    inner = request.getfixturevalue(request.param)
    inner.reset()
    harness = RestHarness(root=inner.root, inner=inner)
    try:
        yield harness
    finally:
        harness.close()
