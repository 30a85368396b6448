"""No secret the server was configured with leaves it (issue 21, item 2).

Every backend is served with static storage keys and a session token among its ``storage.*``
options; every answer that could carry them is read raw off the wire. In-process, where the
caller configured the namespace, ``describe_table`` keeps the options.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import httpx
import lance
import pyarrow as pa
import pytest
from lance_namespace import DescribeTableRequest
from support.harness import Harness
from support.rest import RestHarness

from lance_metastore.rules.redaction import (
    VENDED_CREDENTIALS_MARKER,
    shareable,
    shareable_storage_options,
)

SECRET_OPTIONS = {
    "storage.aws_access_key_id": "AKIDlmtServedKeyId4471",
    "storage.aws_secret_access_key": "lmtServedSecretKey-9f3c-NeverAnswered",
    "storage.aws_session_token": "lmtServedSessionToken-77aa-NeverAnswered",
}
PUBLIC_OPTIONS = {
    "storage.aws_region": "us-east-1",
    "storage.allow_http": "true",
    "storage.aws_endpoint": "http://127.0.0.1:9",
}
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
ARROW = {"content-type": "application/vnd.apache.arrow.stream"}


def _stream(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _unprefixed(options: dict[str, str]) -> dict[str, str]:
    return {key.removeprefix("storage."): value for key, value in options.items()}


@pytest.fixture
def served(backend: Harness) -> Iterator[RestHarness]:
    harness = RestHarness(root=backend.root, inner=backend)
    try:
        yield harness
    finally:
        harness.close()


def test_no_configured_secret_in_any_answer(backend: Harness, served: RestHarness):
    url = served.server(**SECRET_OPTIONS, **PUBLIC_OPTIONS).url
    db = backend.db(backend.unique("sec"))
    ns, declared, written = "$".join(db), "$".join([*db, "declared"]), "$".join([*db, "written"])
    requests = [
        ("POST", f"/v1/namespace/{ns}/create", {"json": {}}),
        ("POST", f"/v1/namespace/{ns}/describe", {"json": {}}),
        ("POST", f"/v1/table/{declared}/declare", {"json": {}}),
        ("POST", f"/v1/table/{declared}/create-empty", {"json": {}}),  # answers 5: exists
        ("POST", f"/v1/table/{written}/create", {"content": _stream(ROWS), "headers": ARROW}),
        ("POST", f"/v1/table/{written}/describe", {"json": {}}),
        ("POST", f"/v1/table/{written}/describe", {"json": {"vend_credentials": True}}),
        (
            "POST",
            f"/v1/table/{written}/describe",
            {"json": {}, "params": {"with_table_uri": "true"}},
        ),
        ("POST", f"/v1/table/{declared}/describe", {"json": {}}),
        ("GET", f"/v1/namespace/{ns}/table/list", {}),
        ("POST", f"/v1/table/{written}/stats", {"json": {}}),
        ("POST", f"/v1/table/{written}/version/list", {}),
        ("POST", f"/v1/table/{written}/explain_plan", {"json": {"query": {"k": 1, "vector": {}}}}),
        ("POST", f"/v1/table/{written}/nowhere", {"json": {}}),
        ("POST", f"/v1/table/{ns}$missing/describe", {"json": {}}),
    ]
    with httpx.Client(base_url=url, timeout=120) as client:
        answers = [(path, client.request(method, path, **kw)) for method, path, kw in requests]
    for path, response in answers:
        carried = [v for v in SECRET_OPTIONS.values() if v in response.text]
        assert not carried, f"{path} answered {response.status_code} carrying {carried}"
        assert not any(v in str(response.headers) for v in SECRET_OPTIONS.values()), path
    described = [r.json() for p, r in answers if p.endswith("/describe") and "table" in p]
    declared_answer = answers[2][1].json()
    for answer in [*described[:3], declared_answer]:
        # what the client receives: exactly the options that are not secret
        assert answer.get("storage_options") == _unprefixed(PUBLIC_OPTIONS), answer


def test_clients_read_through_the_server_without_the_secrets(backend: Harness, served: RestHarness):
    """pylance's REST client opens and reads the table with what the server gave it."""
    served.server(**SECRET_OPTIONS, **PUBLIC_OPTIONS)
    client = served.connect(**SECRET_OPTIONS, **PUBLIC_OPTIONS)
    table_id = [*backend.db(backend.unique("sec")), "orders"]
    client.create_namespace({"id": table_id[:-1]})
    lance.write_dataset(ROWS, namespace_client=client, table_id=table_id, mode="create")
    described = client.describe_table(DescribeTableRequest(id=table_id))
    assert described.storage_options == _unprefixed(PUBLIC_OPTIONS)
    assert lance.dataset(namespace_client=client, table_id=table_id).count_rows() == 3


def test_in_process_answers_keep_the_configured_options(backend: Harness):
    """The caller configured the namespace itself, so its own answers may hold its options."""
    namespace = backend.connect(**SECRET_OPTIONS, **PUBLIC_OPTIONS)
    table_id = [*backend.db(backend.unique("sec")), "declared"]
    namespace.create_namespace({"id": table_id[:-1]})
    declared = namespace.declare_table({"id": table_id})
    expected = _unprefixed({**SECRET_OPTIONS, **PUBLIC_OPTIONS})
    assert declared.storage_options == expected
    assert namespace.describe_table({"id": table_id}).storage_options == expected


def test_vended_credentials_may_leave_configured_ones_never():
    """The exemption issue 26 plugs into: options marked as vended for one caller and one
    table pass with their credentials; a configured secret never does, vended or not."""
    configured = [SECRET_OPTIONS["storage.aws_secret_access_key"]]
    vended = {
        "aws_access_key_id": "ASIAvendedForOneCaller",
        "aws_secret_access_key": "vended-short-lived-secret",
        "aws_session_token": "vended-session-token",
        "aws_region": "us-east-1",
        VENDED_CREDENTIALS_MARKER: "1893456000000",
    }
    assert shareable_storage_options(vended, configured) == vended
    leaking = {**vended, "aws_secret_access_key": configured[0]}
    assert "aws_secret_access_key" not in shareable_storage_options(leaking, configured)
    static = {key: value for key, value in vended.items() if key != VENDED_CREDENTIALS_MARKER}
    assert shareable_storage_options(static, configured) == {"aws_region": "us-east-1"}
    # anywhere else in an answer: a configured value is dropped from maps, scrubbed from text
    answer = {"properties": {"k": configured[0]}, "note": f"key {configured[0]} used"}
    assert shareable(answer, configured) == {"properties": {}, "note": "key *** used"}
