"""Hostile clients against the REST server: the adversarial probe's cases (issue 22) kept as
regression tests. Everything runs on 127.0.0.1 against real servers (moto for Glue, Hive
Metastore 2.3 for hive2/hive3, pylance's DirectoryNamespace where the catalog does not
matter), bounded in time (deadlines, not sleeps) and in memory (the bombs are refused before
they are decoded; the one test that measures memory runs the server in its own process).

The location-confinement cases of the probe are in the locations suite.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pyarrow as pa
import pytest
from lance.namespace import DirectoryNamespace
from lance_namespace import CreateNamespaceRequest, TableExistsRequest
from lance_namespace.errors import LanceNamespaceError
from support.cli_env import refused_in_process
from support.harness import Harness
from support.hostile import (
    SERVER_STACKS,
    closed_by_peer,
    decompression_bomb,
    half_open,
    peak_rss_mib,
)

from lance_metastore.rest import (
    MAX_JSON_DEPTH,
    OPERATIONS,
    ClientLimits,
    ExposureError,
    RestServer,
    check_exposure,
    read_token_file,
)
from lance_metastore.rest.arrow_bodies import (
    DecodedBodyTooLarge,
    arrow_body,
    check_decoded_size,
    declared_decoded_bytes,
)
from lance_metastore.rest.disclosure import carries_internals

TOKEN = "hostile-" + "t" * 40
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MIB = 1024 * 1024
SUPPORT = str(Path(__file__).parent / "support")
DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
CATALOGS = ["glue", "hive2", "hive3"]


def ipc_stream(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def error_of(response: httpx.Response) -> tuple[int, int]:
    body = response.json()
    assert set(body) == {"error", "code"}, body
    return response.status_code, body["code"]


@pytest.fixture(params=CATALOGS)
def catalog(request: pytest.FixtureRequest) -> Harness:
    harness = request.getfixturevalue(request.param)
    harness.reset()
    return harness


@pytest.fixture
def dir_server(tmp_path: Path) -> Iterator[RestServer]:
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    with RestServer(namespace, auth_token=TOKEN) as server:
        yield server


def files_under(root: Path) -> set[Path]:
    return {path for path in root.rglob("*") if path.is_file()} if root.exists() else set()


# ---------------------------------------------------------------------------------------------
# Decompression bombs (item 2)
# ---------------------------------------------------------------------------------------------


def test_a_decompression_bomb_is_refused_and_nothing_is_written(catalog: Harness):
    """The probe's bomb: ~58 KB of zstd IPC that decodes to 1 GiB, against a 1 MiB body limit
    (so a 4 MiB decoded limit): 413 with code 13, before anything is decoded or written."""
    namespace = catalog.connect()
    db = catalog.db(catalog.unique())
    namespace.create_namespace(CreateNamespaceRequest(id=db))
    bomb = decompression_bomb(1024)
    assert len(bomb) < MIB
    table = "$".join([*db, "bombed"])
    kept = "$".join([*db, "kept"])
    with (
        RestServer(namespace, auth_token=TOKEN, max_body_bytes=MIB) as server,
        httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as http,
    ):
        assert http.post(f"/v1/table/{kept}/create", content=ipc_stream(DATA)).status_code == 200
        before = files_under(catalog.root)

        refused = http.post(f"/v1/table/{table}/create", content=bomb)
        assert error_of(refused) == (413, 13)
        assert "decodes to more than" in refused.json()["error"]
        with pytest.raises(LanceNamespaceError):
            namespace.table_exists(TableExistsRequest(id=[*db, "bombed"]))

        assert error_of(http.post(f"/v1/table/{kept}/insert", content=bomb)) == (413, 13)
        # a target that does not exist is refused as such, before the body is looked at
        assert error_of(http.post(f"/v1/table/{table}/insert", content=bomb)) == (404, 4)
        assert files_under(catalog.root) == before
        count = http.post(f"/v1/table/{kept}/count_rows", json={})
        assert count.status_code == 200 and count.json() == 3
        # a body within both limits still goes through
        added = http.post(f"/v1/table/{kept}/insert", content=ipc_stream(DATA))
        assert added.status_code == 200 and added.json()["version"] == 2


def test_the_decoded_limit_applies_to_any_namespace_and_is_configurable(tmp_path: Path):
    """A namespace that takes bytes (pylance's DirectoryNamespace) gets them only once the
    declared decoded size is checked; the limit is create_app's ``max_decoded_bytes``."""
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    with (
        RestServer(namespace, max_body_bytes=MIB, max_decoded_bytes=32 * MIB) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        http.post("/v1/namespace/a/create", json={})
        assert error_of(http.post("/v1/table/a$t/create", content=decompression_bomb(64))) == (
            413,
            13,
        )
        assert http.post("/v1/table/a$t/exists", json={}).status_code == 404
        created = http.post("/v1/table/a$t/create", content=decompression_bomb(16))
        assert created.status_code == 200
        assert http.post("/v1/table/a$t/count_rows", json={}).json() == 2 * MIB
        garbage = http.post("/v1/table/a$u/create", content=b"not arrow at all")
        assert error_of(garbage) == (400, 13)


@pytest.mark.parametrize("compression", [None, "zstd", "lz4"])
def test_the_decoded_size_is_read_from_the_stream_without_decoding(compression: str | None):
    """Strings, lists and dictionaries, compressed or not: the declared size is exact, so the
    limit holds to the byte (what decoding allocates for the buffers)."""
    table = pa.table(
        {
            "s": ["a", "bb", None] * 1000,
            "d": pa.array(["x", "y", "x"] * 1000).dictionary_encode(),
            "l": [[1, 2]] * 3000,
        }
    )
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    body = sink.getvalue()
    declared = sum(
        declared_decoded_bytes(message) for message in pa.ipc.MessageReader.open_stream(body)
    )
    assert table.nbytes <= declared <= table.nbytes + 64  # 64: the dictionary's own validity
    check_decoded_size(body, declared)
    with pytest.raises(DecodedBodyTooLarge):
        check_decoded_size(body, declared - 1)
    reader = arrow_body(body.to_pybytes(), declared, lazy=True)
    assert reader.read_all().equals(table)


def serve_process(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lance_metastore.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": SUPPORT + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "RUST_LOG": "error",
        },
    )


def stop(process: subprocess.Popen[str]) -> str:
    """Terminate ``process`` and return its stderr."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.stderr.read() if process.stderr else ""


def test_bombs_leave_the_server_memory_flat(glue: Harness, tmp_path: Path):
    """Measured on ``lance-metastore serve`` in its own process: three 1 GiB bombs move its
    peak resident memory by far less than one of them would (the probe saw +1 GB each)."""
    glue.reset()
    namespace = glue.connect()
    db = glue.db(glue.unique())
    namespace.create_namespace(CreateNamespaceRequest(id=db))
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    props = [
        arg for key, value in glue.properties().items() for arg in ("--prop", f"{key}={value}")
    ]
    process = serve_process(
        "--impl", "glue", *props, "serve", "--port", "0", "--max-body-mb", "1",
        "--auth-token-file", str(token_file),
    )  # fmt: skip
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), stop(process)
        table = "$".join([*db, "t"])
        with httpx.Client(base_url=url, headers=AUTH, timeout=120) as http:
            assert http.post(f"/v1/table/{table}/create", content=ipc_stream(DATA)).is_success
            baseline = peak_rss_mib(process.pid)
            bomb = decompression_bomb(1024)
            for _ in range(3):
                assert error_of(http.post(f"/v1/table/{table}/insert", content=bomb)) == (413, 13)
            grown = peak_rss_mib(process.pid) - baseline
        assert grown < 128, f"peak RSS grew by {grown:.0f} MiB"
    finally:
        stop(process)


# ---------------------------------------------------------------------------------------------
# Slow and many clients (item 3)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", SERVER_STACKS)
def test_half_open_connections_neither_lock_out_callers_nor_stay_open(tmp_path: Path, stack: str):
    """300 connections that never finish their headers: an authenticated caller is still
    answered, and the server closes every one of them after its header timeout."""
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    limits = ClientLimits(header_timeout=2, max_connections=1000)
    with (
        RestServer(namespace, auth_token=TOKEN, limits=limits, **SERVER_STACKS[stack]) as server,
        half_open(server.url, 300) as sockets,
    ):
        answer = httpx.get(server.url + "/v1/namespace/$/list", headers=AUTH, timeout=120)
        assert answer.status_code == 200 and answer.json() == {"namespaces": []}
        deadline = time.monotonic() + 60
        still_open = [sock for sock in sockets if not closed_by_peer(sock, deadline)]
        assert not still_open


@pytest.mark.parametrize("stack", SERVER_STACKS)
def test_past_the_connection_limit_the_longest_idle_connection_makes_room(
    tmp_path: Path, stack: str
):
    """With 50 connections allowed and a long header timeout, 300 silent connections cannot
    hold the server: each new one closes the one idle longest, and a caller gets through."""
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    limits = ClientLimits(header_timeout=600, max_connections=50)
    with (
        RestServer(namespace, auth_token=TOKEN, limits=limits, **SERVER_STACKS[stack]) as server,
        half_open(server.url, 300) as sockets,
    ):
        answer = httpx.get(server.url + "/v1/namespace/$/list", headers=AUTH, timeout=120)
        assert answer.status_code == 200
        deadline = time.monotonic() + 30
        oldest = sockets[:250]
        assert all(closed_by_peer(sock, deadline) for sock in oldest)
        newest = sockets[-10:]
        assert not any(closed_by_peer(sock, time.monotonic() + 0.2) for sock in newest)


@pytest.mark.parametrize("stack", SERVER_STACKS)
def test_a_body_that_stops_arriving_is_closed_after_the_body_timeout(tmp_path: Path, stack: str):
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    limits = ClientLimits(body_timeout=1)
    with RestServer(namespace, limits=limits, **SERVER_STACKS[stack]) as server:
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(
                b"POST /v1/namespace/slow/create HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
            )
            assert closed_by_peer(sock, time.monotonic() + 30)
        listed = httpx.get(server.url + "/v1/namespace/$/list", timeout=60)
        assert listed.json() == {"namespaces": []}  # the cut request changed nothing


def test_client_limits_are_validated():
    with pytest.raises(ValueError, match="header_timeout"):
        ClientLimits(header_timeout=0)
    with pytest.raises(ValueError, match="max_connections"):
        ClientLimits(max_connections=0)


# ---------------------------------------------------------------------------------------------
# Safe defaults (item 4)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "192.168.0.5"])
def test_serving_beyond_loopback_needs_auth_or_insecure(host: str):
    with pytest.raises(ExposureError, match="--insecure"):
        check_exposure(host, None, insecure=False)
    check_exposure(host, TOKEN, insecure=False)
    check_exposure(host, None, insecure=True)
    with pytest.raises(ExposureError):  # refused before a socket is bound
        RestServer(DirectoryNamespace(root="/nonexistent-never-used"), host=host)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_needs_no_auth(host: str):
    check_exposure(host, None, insecure=False)


def test_cli_serve_refuses_an_open_network_server():
    refused = refused_in_process(
        "--impl", "support.rest_namespaces.BareNamespace", "serve", "--host", "0.0.0.0"
    )
    assert "without authentication" in refused.stderr and "--insecure" in refused.stderr


def test_token_files_others_can_write_are_refused(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    for mode in (0o622, 0o602, 0o666):
        token_file.chmod(mode)
        with pytest.raises(ValueError, match="can be changed by other users"):
            read_token_file(str(token_file))
    token_file.chmod(0o600)
    warnings: list[str] = []
    assert read_token_file(str(token_file), warnings.append) == TOKEN and not warnings
    token_file.chmod(0o644)
    assert read_token_file(str(token_file), warnings.append) == TOKEN
    assert len(warnings) == 1 and "readable by other users" in warnings[0]
    assert TOKEN not in warnings[0]


def test_cli_serve_refuses_a_writable_token_file_and_warns_about_a_readable_one(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o666)
    refused = refused_in_process(
        "--impl", "support.rest_namespaces.BareNamespace", "serve", "--port", "0",
        "--auth-token-file", str(token_file),
    )  # fmt: skip
    assert "can be changed by other users" in refused.stderr
    token_file.chmod(0o640)
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o640
    process = serve_process(
        "--impl", "rest_namespaces.BareNamespace", "serve", "--port", "0",
        "--auth-token-file", str(token_file),
    )  # fmt: skip
    url = process.stdout.readline().strip()
    stderr = stop(process)
    assert url.startswith("http://127.0.0.1:"), stderr
    assert "readable by other users" in stderr and TOKEN not in stderr


def test_cli_serve_warns_about_a_readable_policy_file(tmp_path: Path):
    """The policy names who may see what: like a token file, one others can read is a warning
    at the start (once, not at every reload)."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    policy = tmp_path / "policy.json"
    grant = {"principal": "bearer:token", "namespace": [], "privilege": "read"}
    policy.write_text(json.dumps({"grants": [grant]}))
    policy.chmod(0o644)
    process = serve_process(
        "--impl", "rest_namespaces.BareNamespace", "serve", "--port", "0",
        "--auth-token-file", str(token_file), "--policy-file", str(policy),
    )  # fmt: skip
    url = process.stdout.readline().strip()
    stderr = stop(process)
    assert url.startswith("http://127.0.0.1:"), stderr
    assert f"The policy file {policy} is readable by other users" in stderr


# ---------------------------------------------------------------------------------------------
# Internals stay in (item 5)
# ---------------------------------------------------------------------------------------------

# What the probe found in error bodies.
PROBE_INTERNALS = [
    "MetaException(message:Put request failed : INSERT INTO TABLE_PARAMS (PARAM_VALUE,TBL_ID,"
    "PARAM_KEY) VALUES (?,?,?) )",
    "org.apache.thrift.transport.TTransportException: java.net.ConnectException: "
    "Connection refused (Connection refused)",
    "Got exception: java.net.UnknownHostException db-internal-7.corp.example",
    "LanceError(IO): Generic LocalFileSystem error: Unable to open file /srv/lake/x.lance",
    "Failed to open /home/svc/lake/t.lance/_versions (os error 13)",
    "\tat org.apache.hadoop.hive.metastore.ObjectStore.createTable(ObjectStore.java:1203)",
]
PLAIN_MESSAGES = [
    "Table sales$orders not found",
    "Namespace sales already exists",
    "Invalid input for create table sales$t: property value too long",
    "Column 'x' does not exist in table sales$t",
    "Cannot write to table a$b: schema mismatch",
]


@pytest.mark.parametrize("message", PROBE_INTERNALS)
def test_internals_are_recognised(message: str):
    assert carries_internals(message)


@pytest.mark.parametrize("message", PLAIN_MESSAGES)
def test_plain_messages_pass(message: str):
    assert not carries_internals(message)


def test_an_unreachable_catalog_answers_a_generic_503_naming_the_object(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    import lance_metastore

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there once closed
    namespace = lance_metastore.Hive2Namespace(
        uri=f"thrift://127.0.0.1:{port}", root=str(tmp_path), **{"client.retries": "1"}
    )
    with (
        caplog.at_level(logging.WARNING, logger="lance_metastore.rest"),
        RestServer(namespace) as server,
        httpx.Client(base_url=server.url, timeout=120) as http,
    ):
        response = http.post("/v1/namespace/sales/describe", json={})
    assert error_of(response) == (503, 17)
    message = response.json()["error"]
    assert "'sales'" in message and "describe_namespace" in message
    assert str(port) not in message and "127.0.0.1" not in message
    reference = message.rsplit("ref ", 1)[1].rstrip(")")
    logged = [r.getMessage() for r in caplog.records if reference in r.getMessage()]
    assert len(logged) == 1 and str(port) in logged[0]


def test_catalog_sql_never_reaches_the_client(catalog: Harness, caplog: pytest.LogCaptureFixture):
    """A property the metastore's database cannot store (Hive keeps values in a 4000-character
    column) made the probe's server answer with the failed INSERT; every error body now names
    the object, and the metastore's text stays in the server log."""
    namespace = catalog.connect()
    db = catalog.db(catalog.unique())
    namespace.create_namespace(CreateNamespaceRequest(id=db))
    table = "$".join([*db, "t"])
    with (
        caplog.at_level(logging.WARNING, logger="lance_metastore.rest"),
        RestServer(namespace) as server,
        httpx.Client(base_url=server.url, timeout=120) as http,
    ):
        response = http.post(
            f"/v1/table/{table}/declare", json={"properties": {"comment": "x" * 300_000}}
        )
    if response.status_code == 200:
        return  # this catalog stores it (Glue): nothing to hide
    body = response.json()
    assert not carries_internals(body["error"]), body
    assert "TABLE_PARAMS" not in body["error"] and "Exception" not in body["error"]
    assert repr(table) in body["error"] and "declare_table" in body["error"]
    reference = body["error"].rsplit("ref ", 1)[1].rstrip(")")
    logged = [r.getMessage() for r in caplog.records if reference in r.getMessage()]
    assert len(logged) == 1 and len(logged[0]) > len(body["error"])


def test_deeply_nested_json_is_400_code_13_with_one_log_line(
    dir_server: RestServer, caplog: pytest.LogCaptureFixture
):
    just_enough = json.dumps({"properties": {}, "x": json.loads("[" * 60 + "]" * 60)})
    too_deep = {
        "past the limit": "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
        "past the parser": '{"a":' * 100_000 + "1" + "}" * 100_000,
    }
    with httpx.Client(base_url=dir_server.url, headers=AUTH, timeout=60) as http:
        ok = http.post("/v1/namespace/fine/create", content=just_enough)
        assert ok.status_code in (200, 400) and ok.json().get("code") != 18
        for why, body in too_deep.items():
            caplog.clear()
            with caplog.at_level(logging.DEBUG, logger="lance_metastore.rest"):
                response = http.post("/v1/namespace/deep/create", content=body)
            assert error_of(response) == (400, 13), why
            assert "nested deeper than" in response.json()["error"]
            lines = [r for r in caplog.records if r.name == "lance_metastore.rest"]
            assert len(lines) == 1 and lines[0].exc_info is None, why
        assert http.get("/v1/namespace/$/list").json()["namespaces"] in ([], ["fine"])


# ---------------------------------------------------------------------------------------------
# What held in the probe, kept that way
# ---------------------------------------------------------------------------------------------


def test_every_route_and_method_but_health_needs_the_token(dir_server: RestServer):
    paths = {op.path.replace("{id}", "a$b").replace("{index_name}", "i") for op in OPERATIONS}
    paths |= {"/", "/v1", "/v1/namespace/%2e%2e/list", "/v1/table/a%24b/describe"}
    paths |= {"/v1/table/..%2F..%2Fx/drop", "/health/x", "/HEALTH"}
    with httpx.Client(base_url=dir_server.url, timeout=60) as http:
        for path in sorted(paths):
            for method in ("GET", "POST", "HEAD", "OPTIONS", "DELETE", "PUT"):
                response = http.request(method, path)
                assert response.status_code == 401, (method, path)
        assert http.get("/health").status_code == 200


TRAVERSAL_NAMES = {"dots": "..", "slash": "a/b", "nul": "a\x00b", "long": "x" * 1000, "up": "../x"}


@pytest.mark.parametrize("name", list(TRAVERSAL_NAMES.values()), ids=list(TRAVERSAL_NAMES))
def test_traversal_names_are_refused_and_change_nothing(catalog: Harness, name: str):
    namespace = catalog.connect()
    db = catalog.db(catalog.unique())
    namespace.create_namespace(CreateNamespaceRequest(id=db))
    before = files_under(catalog.root)
    with (
        RestServer(namespace, auth_token=TOKEN) as server,
        httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as http,
    ):
        route = "/v1/table/" + quote("$".join([*db, name]), safe="$")
        status, code = error_of(http.post(f"{route}/declare", json={}))
        assert (status, code) in ((400, 13), (404, 1)), (status, code)
        assert files_under(catalog.root) == before


def test_body_limits_hold_for_sized_and_chunked_bodies(tmp_path: Path):
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    with (
        RestServer(namespace, max_body_bytes=64 * 1024) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        big = b"{" + b" " * 100_000 + b"}"
        assert error_of(http.post("/v1/namespace/a/create", content=big)) == (413, 13)

        def chunks() -> Iterator[bytes]:
            yield b"{"
            for _ in range(100):
                yield b" " * 1024
            yield b"}"

        assert error_of(http.post("/v1/namespace/a/create", content=chunks())) == (413, 13)
        assert http.get("/v1/namespace/$/list").json() == {"namespaces": []}


def test_the_audit_log_never_carries_a_token(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    with (
        caplog.at_level(logging.INFO, logger="lance_metastore.rest.audit"),
        RestServer(namespace, auth_token=TOKEN) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        for header in (f"Bearer {TOKEN}", f"Bearer {TOKEN}x", TOKEN, f"Basic {TOKEN}"):
            http.post("/v1/namespace/a/exists", json={}, headers={"Authorization": header})
    assert len(caplog.records) == 4
    assert all(TOKEN not in record.getMessage() for record in caplog.records)
