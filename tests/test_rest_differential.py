"""Differential test: the same HTTP requests to pylance's own REST server (``RestAdapter("dir")``,
Rust) and to ours serving pylance's ``DirectoryNamespace`` (Python), the same answers.

Both serve the same directory implementation, so every difference is one of the servers. Status
codes and error codes must be equal; success bodies equal once the parts that differ by nature
are normalised (each server has its own root directory, and a table directory carries a hash
prefix). Error messages are not compared: the spec fixes the code, not the text.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from lance.namespace import DirectoryNamespace, RestAdapter

from lance_metastore.rest import RestServer

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})
MORE = pa.table({"id": pa.array([3, 4], pa.int64()), "name": ["C", "D"]})


def stream(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


ARROW = {"content-type": "application/vnd.apache.arrow.stream"}

# (method, path, keyword arguments of httpx.request): one scenario, run in order on both.
SCENARIO: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/v1/namespace/sales/create", {"json": {"properties": {"team": "data"}}}),
    ("POST", "/v1/namespace/sales/create", {"json": {}}),
    ("POST", "/v1/namespace/sales/create", {"json": {"mode": "exist_ok"}}),
    ("POST", "/v1/namespace/sales/exists", {"json": {}}),
    ("POST", "/v1/namespace/nowhere/exists", {"json": {}}),
    ("POST", "/v1/namespace/sales/describe", {"json": {}}),
    ("POST", "/v1/namespace/nowhere/describe", {"json": {}}),
    ("POST", "/v1/namespace/sales$eu/create", {"json": {}}),
    ("POST", "/v1/namespace/hr/create", {}),
    ("GET", "/v1/namespace/$/list", {}),
    ("GET", "/v1/namespace/$/list", {"params": {"limit": 1}}),
    ("GET", "/v1/namespace/sales/list", {}),
    ("GET", "/v1/namespace/nowhere/list", {}),
    ("POST", "/v1/table/sales$declared/declare", {"json": {}}),
    ("POST", "/v1/table/sales$declared/declare", {"json": {}}),
    ("POST", "/v1/table/nowhere$t/declare", {"json": {}}),
    ("POST", "/v1/table/sales$declared/exists", {"json": {}}),
    ("POST", "/v1/table/sales$missing/exists", {"json": {}}),
    ("POST", "/v1/table/sales$orders/create", {"content": stream(ROWS), "headers": ARROW}),
    ("POST", "/v1/table/sales$orders/create", {"content": stream(ROWS), "headers": ARROW}),
    ("POST", "/v1/table/sales$orders/insert", {"content": stream(ROWS), "headers": ARROW}),
    (
        "POST",
        "/v1/table/sales$orders/insert",
        {"content": stream(ROWS), "headers": ARROW, "params": {"mode": "overwrite"}},
    ),
    (
        "POST",
        "/v1/table/sales$orders/merge_insert",
        {
            "content": stream(MORE),
            "headers": ARROW,
            "params": {
                "on": "id",
                "when_matched_update_all": "true",
                "when_not_matched_insert_all": "true",
            },
        },
    ),
    ("POST", "/v1/table/sales$missing/insert", {"content": stream(ROWS), "headers": ARROW}),
    ("POST", "/v1/table/sales$orders/count_rows", {"json": {}}),
    ("POST", "/v1/table/sales$orders/count_rows", {"json": {"predicate": "id > 2"}}),
    ("POST", "/v1/table/sales$orders/describe", {"json": {}}),
    ("POST", "/v1/table/sales$orders/describe", {"json": {}, "params": {"with_table_uri": "true"}}),
    ("POST", "/v1/table/sales$missing/describe", {"json": {}}),
    (
        "POST",
        "/v1/table/sales$orders/update",
        {"json": {"predicate": "id = 1", "updates": [["name", "'z'"]]}},
    ),
    ("POST", "/v1/table/sales$orders/delete", {"json": {"predicate": "id = 2"}}),
    (
        "POST",
        "/v1/table/sales$orders/query",
        {"json": {"k": 10, "vector": {}, "filter": "id >= 3"}},
    ),
    ("GET", "/v1/namespace/sales/table/list", {}),
    ("GET", "/v1/namespace/sales/table/list", {"params": {"limit": 1}}),
    ("GET", "/v1/namespace/nowhere/table/list", {}),
    ("POST", "/v1/namespace/sales/drop", {"json": {}}),
    ("POST", "/v1/table/sales$declared/deregister", {"json": {}}),
    ("POST", "/v1/table/sales$declared/deregister", {"json": {}}),
    ("POST", "/v1/table/sales$orders/drop", {}),
    ("POST", "/v1/table/sales$orders/drop", {}),
    # malformed requests
    ("POST", "/v1/namespace/sales/describe", {"json": {"id": ["other"]}}),
    ("GET", "/v1/namespace/$/list", {"params": {"limit": "ten"}}),
    (
        "POST",
        "/v1/namespace/x/create",
        {"content": b"{not json", "headers": {"content-type": "application/json"}},
    ),
    ("POST", "/v1/namespace/hr/drop", {"json": {}}),
    ("POST", "/v1/namespace/hr/exists", {"json": {}}),
]


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[str, str]]:
    adapter = RestAdapter("dir", {"root": str(tmp_path / "theirs")}, port=0)
    adapter.start()
    try:
        with RestServer(DirectoryNamespace(root=str(tmp_path / "ours"))) as ours:
            yield f"http://127.0.0.1:{adapter.port}", ours.url
    finally:
        adapter.stop()


def normalised(value: Any) -> Any:
    """Each server's root directory, table hash prefixes and commit-specific values removed;
    a page token compared by its presence (ours are sealed by the server, docs/security.md)."""
    if isinstance(value, dict):
        return {
            key: ("<token>" if key == "page_token" and item else normalised(item))
            for key, item in value.items()
            if key not in ("e_tag", "timestamp_millis", "manifest_size")
        }
    if isinstance(value, list):
        return [normalised(item) for item in value]
    if isinstance(value, str):
        value = re.sub(r"/(theirs|ours)(?=/|$)", "/ROOT", value)
        return re.sub(r"\b[0-9a-f]{8}_", "HASH_", value)
    return value


def answer(response: httpx.Response) -> tuple[int, Any]:
    content_type = response.headers.get("content-type", "")
    if response.status_code >= 400:
        return response.status_code, response.json()["code"]
    if "arrow" in content_type:
        table = pa.ipc.open_file(pa.BufferReader(response.content)).read_all()
        return response.status_code, table.sort_by("id").to_pydict()
    if not response.content:
        return response.status_code, None
    return response.status_code, normalised(response.json())


def test_same_requests_same_answers(servers: tuple[str, str]):
    theirs, ours = servers
    differences = []
    with (
        httpx.Client(base_url=theirs, timeout=60) as a,
        httpx.Client(base_url=ours, timeout=60) as b,
    ):
        for method, path, kwargs in SCENARIO:
            expected = answer(a.request(method, path, **kwargs))
            got = answer(b.request(method, path, **kwargs))
            if expected != got:
                differences.append((method, path, kwargs.get("params"), expected, got))
    assert not differences, "\n".join(map(str, differences))


def test_known_differences(servers: tuple[str, str]):
    """Where ours answers differently on purpose: unknown routes and wrong methods carry the
    spec's error body (Lance's server sends none), and a JSON body is read whatever its
    Content-Type (Lance's server wants application/json)."""
    theirs, ours = servers
    with httpx.Client(base_url=theirs) as a, httpx.Client(base_url=ours) as b:
        for method, path in [("GET", "/v1/nothing"), ("GET", "/v1/namespace/x/describe")]:
            assert a.request(method, path).status_code == b.request(method, path).status_code
            assert a.request(method, path).content == b""
            assert b.request(method, path).json()["code"] == 13
        plain = {"content": b"{}", "headers": {"content-type": "text/plain"}}
        assert a.post("/v1/namespace/n/create", **plain).status_code == 400
        assert b.post("/v1/namespace/n/create", **plain).status_code == 200
