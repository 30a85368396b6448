"""Small namespaces for the REST server's own tests, loadable by class path from the CLI.

They are real ``LanceNamespace`` implementations (not stand-ins for ours): the server must serve
any namespace, including one that implements almost nothing or one that fails unexpectedly.
"""

from __future__ import annotations

import time
from pathlib import Path

from lance_namespace import (
    DescribeNamespaceRequest,
    DescribeNamespaceResponse,
    LanceNamespace,
    ListNamespacesRequest,
    ListNamespacesResponse,
)


class BareNamespace(LanceNamespace):
    """Implements nothing but its id: every operation answers the spec's unsupported error."""

    def __init__(self, **properties: str) -> None:
        self.properties = properties

    def namespace_id(self) -> str:
        return "BareNamespace"


class SlowNamespace(BareNamespace):
    """Answers describe_namespace after ``delay`` seconds (for graceful-shutdown tests); creates
    the file ``started_file`` (when given) as the call starts, so a test knows it is in flight."""

    def describe_namespace(self, request: DescribeNamespaceRequest) -> DescribeNamespaceResponse:
        if self.properties.get("started_file"):
            Path(self.properties["started_file"]).touch()
        time.sleep(float(self.properties.get("delay", "2")))
        return DescribeNamespaceResponse(properties={"slow": "yes"})

    def list_namespaces(self, request: ListNamespacesRequest) -> ListNamespacesResponse:
        return ListNamespacesResponse(namespaces=[])


class BrokenNamespace(BareNamespace):
    """Fails with a plain exception whose text must never reach a client."""

    SECRET = "s3cr3t-internal-detail"

    def describe_namespace(self, request: DescribeNamespaceRequest) -> DescribeNamespaceResponse:
        raise RuntimeError(f"boom at /srv/app.py line 12 with {self.SECRET}")

    def list_namespaces(self, request: ListNamespacesRequest) -> ListNamespacesResponse:
        return {"namespaces": ["from", "a", "dict"]}  # type: ignore[return-value]
