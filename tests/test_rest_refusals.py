"""Refusals answer the spec's unsupported error through REST: 406 with code 0 (issue 21, item 4).

A differential against pylance's own REST server (``RestAdapter("dir")``): the same requests go
to it and to ours, for every route whose input the implementation behind cannot serve.

- Over the same implementation (pylance's ``DirectoryNamespace`` behind both servers), the
  operations it does not implement raise ``NotImplementedError`` ("Not supported: ... not
  implemented"): pylance 14's server answers those 500 with code 18, ours 406 with code 0 as the
  spec's error table says, naming the operation and the implementation.
- Over our backends (every one, served by ours), each input a catalog cannot serve answers
  406/0 naming the operation and the backend, never 500/18; pylance's server over the directory
  gets the same request, and where it refuses too, its message carries the same words.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from lance.namespace import DirectoryNamespace, RestAdapter
from support.harness import Harness
from support.rest import RestHarness

from lance_metastore.rest import RestServer
from lance_metastore.rules.errors import REFUSAL_PHRASE

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
ARROW = {"content-type": "application/vnd.apache.arrow.stream"}
SCHEMA = base64.b64encode(pa.schema([("id", pa.int64())]).serialize().to_pybytes()).decode()


def _stream(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _setup(ns: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        ("POST", f"/v1/namespace/{ns}/create", {"json": {}}),
        ("POST", f"/v1/table/{ns}$orders/create", {"content": _stream(ROWS), "headers": ARROW}),
        (
            "POST",
            f"/v1/table/{ns}$managed/declare",
            {"json": {"properties": {"managed_by": "impl"}}},
        ),
    ]


# (operation, method, route, request): inputs an implementation may not serve. ``{ns}`` is the
# namespace that holds the table ``orders`` and the catalog-managed table ``managed``.
NOT_IMPLEMENTED_BY_THE_DIRECTORY = [
    ("rename_table", "POST", "/v1/table/{ns}$orders/rename", {"json": {"new_table_name": "r"}}),
    ("refresh_materialized_view", "POST", "/v1/materialized_view/{ns}$mv/refresh", {"json": {}}),
    (
        "alter_table_backfill_columns",
        "POST",
        "/v1/table/{ns}$orders/backfill_column",
        {"json": {"column": "id"}},
    ),
    ("batch_commit_tables", "POST", "/v1/table/batch-commit", {"json": {"operations": []}}),
    (
        "batch_create_table_versions",
        "POST",
        "/v1/table/version/batch-create",
        {"json": {"entries": []}},
    ),
]

NOT_SERVED_BY_OUR_CATALOGS = [
    ("refresh_materialized_view", "POST", "/v1/materialized_view/{ns}$mv/refresh", {"json": {}}),
    (
        "create_materialized_view",
        "POST",
        "/v1/materialized_view/{ns}$mv/create",
        {"json": {"kind": "query", "source_query": "x", "output_schema": SCHEMA}},
    ),
    (
        "alter_table_backfill_columns",
        "POST",
        "/v1/table/{ns}$orders/backfill_column",
        {"json": {"column": "id"}},
    ),
    (
        "describe table",
        "POST",
        "/v1/table/{ns}$orders/describe",
        {"json": {"load_detailed_metadata": True}},
    ),
    ("create namespace", "POST", "/v1/namespace/$/create", {"json": {"mode": "overwrite"}}),
    (
        "create a branch of table",
        "POST",
        "/v1/table/{ns}$managed/branches/create",
        {"json": {"name": "b"}},
    ),
    (
        "commit a batch of table operations",
        "POST",
        "/v1/table/batch-commit",
        {
            "json": {
                "operations": [
                    {"declare_table": {"id": ["{ns}", "one"]}},
                    {"deregister_table": {"id": ["{ns}", "orders"]}},
                ]
            }
        },
    ),
]
# Glue's spec allows only RESTRICT drops.
CASCADE_DROP = (
    "drop namespace",
    "POST",
    "/v1/namespace/{ns}/drop",
    {"json": {"behavior": "Cascade"}},
)


def _filled(value: Any, ns: str, ns_parts: list[str]) -> Any:
    """``{ns}`` replaced: in routes by the joined id, in JSON ids by the id's parts."""
    if isinstance(value, str):
        return value.replace("{ns}", ns)
    if isinstance(value, list):
        if "{ns}" in value:
            return [part for item in value for part in (ns_parts if item == "{ns}" else [item])]
        return [_filled(item, ns, ns_parts) for item in value]
    if isinstance(value, dict):
        return {key: _filled(item, ns, ns_parts) for key, item in value.items()}
    return value


def _ask(
    client: httpx.Client, ns_parts: list[str], cases: list[tuple]
) -> list[tuple[int, Any, str]]:
    ns = "$".join(ns_parts)
    for method, route, kwargs in _setup(ns):
        assert client.request(method, route, **kwargs).status_code == 200, route
    answers = []
    for _, method, route, kwargs in cases:
        response = client.request(
            method, _filled(route, ns, ns_parts), **_filled(kwargs, ns, ns_parts)
        )
        body = response.json() if response.content else {}
        answers.append((response.status_code, body.get("code"), body.get("error", "")))
    return answers


@pytest.fixture
def lances_server(tmp_path: Path) -> Iterator[str]:
    adapter = RestAdapter(
        "dir", {"root": str(tmp_path / "theirs"), "manifest_enabled": "true"}, port=0
    )
    adapter.start()
    try:
        yield f"http://127.0.0.1:{adapter.port}"
    finally:
        adapter.stop()


def test_what_the_directory_does_not_implement(lances_server: str, tmp_path: Path):
    directory = DirectoryNamespace(root=str(tmp_path / "ours"), manifest_enabled="true")
    with (
        RestServer(directory) as ours,
        httpx.Client(base_url=lances_server, timeout=60) as a,
        httpx.Client(base_url=ours.url, timeout=60) as b,
    ):
        theirs = _ask(a, ["sales"], NOT_IMPLEMENTED_BY_THE_DIRECTORY)
        mine = _ask(b, ["sales"], NOT_IMPLEMENTED_BY_THE_DIRECTORY)
    for (operation, *_), their, our in zip(
        NOT_IMPLEMENTED_BY_THE_DIRECTORY, theirs, mine, strict=True
    ):
        # pylance's server: a refusal, but answered as a fault (its deviation from the spec)
        assert their[:2] == (500, 18) and their[2].startswith(REFUSAL_PHRASE), (operation, their)
        assert our[:2] == (406, 0), (operation, our)
        assert our[2].startswith(f"{REFUSAL_PHRASE}: {operation} on DirectoryNamespace"), our


def test_what_our_catalogs_cannot_serve(backend: Harness, lances_server: str):
    cases = list(NOT_SERVED_BY_OUR_CATALOGS)
    if not backend.supports_cascade:
        cases.append(CASCADE_DROP)
    served = RestHarness(root=backend.root, inner=backend)
    backend_name = backend.namespace_class().__name__
    try:
        with (
            httpx.Client(base_url=lances_server, timeout=60) as a,
            httpx.Client(base_url=served.server().url, timeout=120) as b,
        ):
            theirs = _ask(a, ["sales"], cases)
            mine = _ask(b, backend.db(backend.unique("ref")), cases)
    finally:
        served.close()
    for (operation, *_), their, our in zip(cases, theirs, mine, strict=True):
        assert our[:2] == (406, 0), (operation, our)
        assert our[2].startswith(f"{REFUSAL_PHRASE}: {operation}"), (operation, our)
        assert f" on {backend_name}" in our[2], (operation, our)
        if their[2].startswith(REFUSAL_PHRASE):  # refused by Lance's server too
            assert their[1] in (0, 18), (operation, their)
