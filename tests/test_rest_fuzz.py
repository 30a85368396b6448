"""Fuzzing the REST server with schemathesis, from the OpenAPI document it serves.

The server serves our Glue namespace on the Glue emulator (a real catalog behind it, no JVM).
For every route, a bounded number of generated requests (valid and invalid) over loopback:
no 5xx but 503 (an unreachable catalog), every error in the spec's error body, and the server
still answers after the run. Bounded: ``FUZZ_EXAMPLES`` examples per route, no shrinking.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from support.examples import examples
from support.harness import GlueHarness

from lance_metastore.rest import OPERATIONS, RestServer
from lance_metastore.rest.operations import ARROW_STREAM

FUZZ_EXAMPLES = int(os.environ.get("LANCE_METASTORE_FUZZ_EXAMPLES", "6"))


@schemathesis.serializer(ARROW_STREAM)
def arrow_stream(ctx: Any, value: Any) -> bytes:
    """Generated bodies of the data routes go out as they are: mostly not Arrow at all."""
    return value if isinstance(value, bytes) else str(value).encode()


@pytest.fixture(scope="module")
def fuzzed_server(glue_emulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestServer]:
    glue_emulator.reset()
    harness = GlueHarness(
        root=Path(tmp_path_factory.mktemp("fuzz")) / "lake", emulator=glue_emulator
    )
    namespace = harness.connect()
    namespace.create_namespace({"id": ["sales"]})
    namespace.declare_table({"id": ["sales", "orders"]})
    with RestServer(namespace) as server:
        yield server


@pytest.fixture(scope="module")
def rest_schema(fuzzed_server: RestServer) -> Any:
    return schemathesis.openapi.from_url(f"{fuzzed_server.url}/openapi.json")


def check(case: schemathesis.Case) -> None:
    response = case.call(timeout=30)
    status = response.status_code
    assert status < 500 or status == 503, (case.method, case.formatted_path, status, response.text)
    if status >= 400:
        body = response.json()
        assert set(body) == {"error", "code"} and isinstance(body["code"], int), body
        assert "Traceback" not in body["error"]


# schemathesis' own pytest plugin does not load under pytest 9; hypothesis drives it instead
@pytest.mark.parametrize("operation", [operation.name for operation in OPERATIONS])
def test_fuzz(rest_schema: Any, operation: str) -> None:
    strategy = rest_schema.find_operation_by_id(operation).as_strategy()

    @given(case=strategy)
    @settings(
        max_examples=examples(FUZZ_EXAMPLES),
        phases=[Phase.explicit, Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def fuzz(case: schemathesis.Case) -> None:
        check(case)

    fuzz()


def test_alive_after_fuzzing(fuzzed_server: RestServer) -> None:
    assert httpx.get(f"{fuzzed_server.url}/health").json() == {"status": "ok"}
    listed = httpx.get(f"{fuzzed_server.url}/v1/namespace/sales/table/list").json()
    assert "tables" in listed
