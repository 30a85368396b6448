"""The REST server itself: wire format, errors, security, data operations, shutdown, the CLI.

Raw HTTP (httpx) where the wire is the point, pylance's Rust REST client and lancedb where a
real client is. The namespace behind the server is pylance's ``DirectoryNamespace`` or one of the
small namespaces in ``support/rest_namespaces.py``; our catalogs through the server are covered
by test_rest_behaviour.py.
"""

from __future__ import annotations

import datetime
import io
import json
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import lance
import lance_namespace
import pyarrow as pa
import pytest
from lance.namespace import DirectoryNamespace
from lance_namespace import (
    CountTableRowsRequest,
    CreateNamespaceRequest,
    CreateTableRequest,
    DeleteFromTableRequest,
    DescribeTableRequest,
    InsertIntoTableRequest,
    ListTablesRequest,
    MergeInsertIntoTableRequest,
    QueryTableRequest,
    UpdateTableRequest,
)
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from support.cli_env import refused_in_process
from support.rest_namespaces import BareNamespace, BrokenNamespace
from support.serving import unreachable_glue

from lance_metastore.rest import OPERATIONS, RestServer, create_app, http_status

DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})
SUPPORT = str(Path(__file__).parent / "support")


def ipc_stream(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


@pytest.fixture
def dir_server(tmp_path: Path) -> Iterator[RestServer]:
    with RestServer(DirectoryNamespace(root=str(tmp_path / "dir"))) as server:
        yield server


@pytest.fixture
def http(dir_server: RestServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=dir_server.url, timeout=30) as client:
        yield client


def error_of(response: httpx.Response) -> tuple[int, int]:
    body = response.json()
    assert set(body) == {"error", "code"}, body
    assert isinstance(body["error"], str) and body["error"]
    return response.status_code, body["code"]


# ---------------------------------------------------------------------------------------------
# Routes and the wire format
# ---------------------------------------------------------------------------------------------


def test_every_operation_of_the_interface_has_a_route():
    routed = {operation.name for operation in OPERATIONS}
    interface = {
        name
        for name in dir(lance_namespace.LanceNamespace)
        if not name.startswith("_") and name != "namespace_id"
    }
    assert routed == interface
    # the deprecated create_empty_table keeps its older route, served by declare_table
    assert {op.name: op.method_name for op in OPERATIONS}["create_empty_table"] == "declare_table"


def test_create_empty_is_declare(http: httpx.Client):
    http.post("/v1/namespace/sales/create", json={})
    created = http.post("/v1/table/sales$t/create-empty", json={})
    assert created.status_code == 200 and created.json()["location"]
    assert http.get("/v1/namespace/sales/table/list").json() == {"tables": ["t"]}
    assert error_of(http.post("/v1/table/sales$t/create-empty", json={})) == (409, 5)


def test_status_of_every_error_code():
    expected = {0: 406, 1: 404, 2: 409, 3: 409, 4: 404, 5: 409, 6: 404, 7: 409, 8: 404, 9: 409}
    expected |= {10: 404, 11: 404, 12: 404, 13: 400, 14: 409, 15: 403, 16: 401, 17: 503}
    expected |= {18: 500, 19: 409, 20: 400, 21: 429, 22: 404, 23: 409}
    assert {code: http_status(code) for code in ErrorCode} == expected


def test_health(http: httpx.Client):
    response = http.get("/health")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_namespace_and_table_routes(http: httpx.Client):
    assert http.post("/v1/namespace/sales/create", json={}).status_code == 200
    assert error_of(http.post("/v1/namespace/sales/create", json={})) == (409, 2)
    exists = http.post("/v1/namespace/sales/exists", json={})
    assert exists.status_code == 200 and exists.content == b""
    assert error_of(http.post("/v1/namespace/nope/exists", json={})) == (404, 1)
    assert http.get("/v1/namespace/$/list").json() == {"namespaces": ["sales"]}
    declared = http.post("/v1/table/sales$t/declare", json={})
    assert declared.status_code == 200 and "location" in declared.json()
    assert http.get("/v1/namespace/sales/table/list").json() == {"tables": ["t"]}
    described = http.post("/v1/table/sales$t/describe?with_table_uri=true", json={})
    assert described.json()["table_uri"].startswith("file://")
    assert error_of(http.post("/v1/table/sales$zz/describe", json={})) == (404, 4)
    assert error_of(http.post("/v1/namespace/sales/drop", json={})) == (409, 3)
    dropped = http.post("/v1/table/sales$t/drop")
    assert dropped.status_code == 200 and dropped.json()["id"] == ["sales", "t"]
    assert error_of(http.post("/v1/table/sales$t/drop")) == (404, 4)


def test_other_delimiter_and_paging(http: httpx.Client):
    for name in ["c", "a", "b"]:
        http.post(f"/v1/namespace/{name}/create", json={})
    first = http.get("/v1/namespace/::/list", params={"delimiter": "::", "limit": 2}).json()
    assert first["namespaces"] == ["a", "b"] and first["page_token"]
    rest = http.get("/v1/namespace/$/list", params={"page_token": first["page_token"]}).json()
    assert rest["namespaces"] == ["c"]
    http.post("/v1/namespace/a::inner/create", params={"delimiter": "::"}, json={})
    assert http.get("/v1/namespace/a/list").json()["namespaces"] == ["inner"]


@pytest.mark.parametrize(
    ("request_args", "why"),
    [
        ({"content": b"{not json"}, "malformed JSON"),
        ({"content": b"[1, 2]"}, "not an object"),
        ({"content": b"\xff\xfe"}, "not UTF-8"),
        ({"json": {"id": 42}}, "id not a list"),
        ({"json": {"id": ["other"]}}, "id differs from the route"),
        ({"json": {"mode": 7}}, "wrong field type"),
        ({"json": {"properties": ["x"]}}, "wrong field type"),
    ],
)
def test_malformed_requests_are_400_code_13(http: httpx.Client, request_args, why):
    response = http.post("/v1/namespace/sales/create", **request_args)
    assert error_of(response) == (400, 13), why
    assert http.get("/v1/namespace/$/list").json() == {"namespaces": []}  # nothing changed


def test_bad_query_values_are_400_code_13(http: httpx.Client):
    for query in [{"limit": "ten"}, {"include_declared": "maybe"}, {"limit": "1.5"}]:
        assert error_of(http.get("/v1/namespace/$/table/list", params=query)) == (400, 13)
    assert error_of(http.get("/v1/namespace/$/list", params={"limit": "ten"})) == (400, 13)
    assert error_of(http.post("/v1/table/a$b/describe?check_declared=yes", json={})) == (400, 13)


def test_unknown_routes_and_methods(http: httpx.Client):
    assert error_of(http.get("/nothing")) == (404, 13)
    assert error_of(http.post("/v1/table/t/no_such_action", json={})) == (404, 13)
    assert error_of(http.get("/v1/namespace/sales/describe")) == (405, 13)


def test_ids_with_odd_characters_reach_the_namespace(http: httpx.Client):
    # a space travels as + (pylance's client) or %20 (Java's); a plus as %2B
    assert http.post("/v1/namespace/with+space/create", json={}).status_code == 200
    assert http.post("/v1/namespace/with%20space/exists", json={}).status_code == 200
    assert http.post("/v1/namespace/one%2Btwo/create", json={}).status_code == 200
    listed = http.get("/v1/namespace/$/list").json()["namespaces"]
    assert sorted(listed) == ["one+two", "with space"]
    assert error_of(http.post("/v1/namespace/%FF/create", json={})) == (400, 13)  # not UTF-8
    # a slash or a line break in an id reaches the namespace, which judges it
    assert http.post("/v1/namespace/a%2Fb/exists", json={}).status_code == 404
    assert http.post("/v1/namespace/a%0Ab/exists", json={}).status_code == 404


def test_an_unimplemented_operation_is_406_code_0():
    with RestServer(BareNamespace()) as server, httpx.Client(base_url=server.url) as http:
        for operation in OPERATIONS:
            path = operation.path.replace("{id}", "a$b").replace("{index_name}", "i")
            kwargs: dict = {"json": {}}
            if operation.body.value == "none":
                kwargs = {}
            elif operation.body.value == "arrow":
                kwargs = {"content": ipc_stream(DATA)}
            elif operation.body.value == "map":
                kwargs = {"json": {"k": "v"}}
            response = http.request(operation.method, path, **kwargs)
            try:  # a request missing a required field is refused before the namespace
                fields = {"id": ["a", "b"], "index_name": "i"} if operation.has_id else {}
                operation.request.model_validate(
                    {k: v for k, v in fields.items() if k in operation.request.model_fields}
                )
                expected = (406, 0)
            except ValueError:
                expected = (400, 13)
            assert error_of(response) == expected, operation.name


def test_unexpected_errors_never_leak(caplog: pytest.LogCaptureFixture):
    with RestServer(BrokenNamespace()) as server, httpx.Client(base_url=server.url) as http:
        with caplog.at_level(logging.ERROR, logger="lance_metastore.rest"):
            response = http.post("/v1/namespace/x/describe", json={})
        assert error_of(response) == (500, 18)
        assert BrokenNamespace.SECRET not in response.text
        assert "Traceback" not in response.text and "line 12" not in response.text
        assert any("describe_namespace" in r.getMessage() for r in caplog.records)
        # a namespace returning a plain dict is read as its fields (the server pages a foreign
        # namespace's listing itself, in name order: see rest/listings.py)
        assert http.get("/v1/namespace/$/list").json() == {"namespaces": ["a", "dict", "from"]}
        assert http.get("/health").status_code == 200


def test_openapi_document_names_every_route(http: httpx.Client):
    document = http.get("/openapi.json").json()
    routes = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    assert routes == {(operation.method, operation.path) for operation in OPERATIONS}
    assert "DescribeTableRequest" in document["components"]["schemas"]


# ---------------------------------------------------------------------------------------------
# Security
# ---------------------------------------------------------------------------------------------


TOKEN = "tok-" + "x" * 40


def test_bearer_token(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    with (
        caplog.at_level(logging.INFO, logger="lance_metastore.rest.audit"),
        RestServer(namespace, auth_token=TOKEN) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        assert http.get("/health").status_code == 200  # liveness stays open
        for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}]:
            response = http.post("/v1/namespace/a/create", json={}, headers=headers)
            assert error_of(response) == (401, 16)
            assert response.headers["www-authenticate"].startswith("Bearer")
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert http.post("/v1/namespace/a/create", json={}, headers=good).status_code == 200

        client = lance_namespace.connect("rest", {"uri": server.url})
        with pytest.raises(LanceNamespaceError) as refused:
            client.list_namespaces(lance_namespace.ListNamespacesRequest(id=[]))
        assert refused.value.code == ErrorCode.UNAUTHENTICATED
        authed = lance_namespace.connect(
            "rest", {"uri": server.url, "header.Authorization": f"Bearer {TOKEN}"}
        )
        assert authed.list_namespaces(lance_namespace.ListNamespacesRequest(id=[])).namespaces
    lines = [r.getMessage() for r in caplog.records if r.name == "lance_metastore.rest.audit"]
    assert lines and all(TOKEN not in line for line in lines)
    admitted = "identity=bearer:token op=create_namespace id=a status=200"
    assert any(admitted in line for line in lines)
    assert any(
        "identity=anonymous op=create_namespace id=a status=401 code=16" in line for line in lines
    ) or any("status=401 code=16" in line for line in lines)


def test_audit_line_per_request(http: httpx.Client, caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.INFO, logger="lance_metastore.rest.audit"):
        http.post("/v1/namespace/sales/create", json={})
        http.post("/v1/table/sales$t/describe", json={})
        http.post("/v1/namespace/evil%0Aline/create", content=b"{")
    lines = [r.getMessage() for r in caplog.records if r.name == "lance_metastore.rest.audit"]
    assert len(lines) == 3
    first, second, third = lines
    for line in lines:
        fields = dict(part.split("=", 1) for part in line.split(" ") if "=" in part)
        assert set(fields) >= {"time", "client", "identity", "op", "id", "status", "code", "ms"}
        datetime.datetime.fromisoformat(fields["time"])
        assert fields["client"].startswith("127.0.0.1:")
    assert "op=create_namespace id=sales status=200 code=-" in first
    assert "op=describe_table id=sales$t status=404 code=4" in second
    assert "\n" not in third and 'id="evil\\nline"' in third and "code=13" in third


def test_body_limit(tmp_path: Path):
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    with (
        RestServer(namespace, max_body_bytes=1000) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        big = json.dumps({"properties": {"k": "v" * 2000}}).encode()
        assert error_of(http.post("/v1/namespace/a/create", content=big)) == (413, 13)

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies as it streams
            yield b'{"properties": {"k": "'
            for _ in range(20):
                yield b"v" * 100
            yield b'"}}'

        assert error_of(http.post("/v1/namespace/a/create", content=chunks())) == (413, 13)
        assert http.get("/v1/namespace/$/list").json() == {"namespaces": []}
        assert http.post("/v1/namespace/a/create", json={}).status_code == 200


def test_keeps_serving_after_garbage(dir_server: RestServer, http: httpx.Client):
    host, port = dir_server.url.removeprefix("http://").split(":")
    for garbage in [
        b"\x00\x01\x02 not http at all\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        b"POST /v1/namespace/a/create HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{",
        b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
    ]:
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(garbage)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(5)
            try:
                reply = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                reply = b""
            assert b"Traceback" not in reply
    assert http.get("/health").status_code == 200


def certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate it signed for 127.0.0.1: (ca, cert, key)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def build(subject: str, key, issuer: str, issuer_key, ca: bool):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_cert = build("test CA", ca_key, "test CA", ca_key, ca=True)
    cert = build("localhost", key, "test CA", ca_key, ca=False)
    paths = directory / "ca.pem", directory / "cert.pem", directory / "key.pem"
    paths[0].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def test_tls(tmp_path: Path):
    ca, cert, key = certificates(tmp_path)
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    with RestServer(namespace, tls_cert=str(cert), tls_key=str(key)) as server:
        assert server.url.startswith("https://")
        trust = ssl.create_default_context(cafile=str(ca))
        with httpx.Client(base_url=server.url, verify=trust) as http:
            assert http.post("/v1/namespace/a/create", json={}).status_code == 200
        with pytest.raises(httpx.ConnectError):
            httpx.get(server.url + "/health")  # not trusted without the certificate
        # pylance's Rust client trusts the system roots: SSL_CERT_FILE names our CA
        code = (
            f"import lance_namespace as n; c = n.connect('rest', {{'uri': {server.url!r}}}); "
            "print(c.list_namespaces(n.ListNamespacesRequest(id=[])).namespaces)"
        )
        run = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "SSL_CERT_FILE": str(ca)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.stdout.strip() == "['a']", run.stderr


# ---------------------------------------------------------------------------------------------
# Data operations (Arrow IPC bodies), with pylance's REST client, against DirectoryNamespace
# ---------------------------------------------------------------------------------------------


def test_data_operations_through_the_rest_client(dir_server: RestServer):
    ns = lance_namespace.connect("rest", {"uri": dir_server.url})
    ns.create_namespace(CreateNamespaceRequest(id=["sales"]))
    table = ["sales", "orders"]
    created = ns.create_table(CreateTableRequest(id=table), ipc_stream(DATA))
    assert created.version == 1
    inserted = ns.insert_into_table(InsertIntoTableRequest(id=table), ipc_stream(DATA))
    assert inserted.num_inserted_rows == 3
    assert ns.count_table_rows(CountTableRowsRequest(id=table)).count == 6
    changes = pa.table({"id": pa.array([3, 4], pa.int64()), "name": ["C", "D"]})
    ns.merge_insert_into_table(
        MergeInsertIntoTableRequest(
            id=table, on=["id"], when_matched_update_all=True, when_not_matched_insert_all=True
        ),
        ipc_stream(changes),
    )
    ns.update_table(UpdateTableRequest(id=table, predicate="id = 1", updates=[["name", "'z'"]]))
    ns.delete_from_table(DeleteFromTableRequest(id=table, predicate="id = 2"))
    result = ns.query_table(
        QueryTableRequest(id=table, k=100, vector={}, columns={"column_names": ["id", "name"]})
    )
    read = pa.ipc.open_file(pa.BufferReader(result.data)).read_all().sort_by("id")
    assert read.to_pydict() == {"id": [1, 1, 3, 3, 4], "name": ["z", "z", "C", "C", "D"]}
    location = ns.describe_table(DescribeTableRequest(id=table)).location
    assert lance.dataset(location).count_rows() == 5
    assert ns.list_tables(ListTablesRequest(id=["sales"])).tables == ["orders"]


def test_pylance_and_lancedb_through_the_server(dir_server: RestServer):
    ns = lance_namespace.connect("rest", {"uri": dir_server.url})
    ns.create_namespace(CreateNamespaceRequest(id=["lake"]))
    table_id = ["lake", "events"]
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="append")
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="overwrite")
    assert lance.dataset(namespace_client=ns, table_id=table_id).to_table().equals(DATA)

    import lancedb

    db = lancedb.connect_namespace("rest", {"uri": dir_server.url})
    db.create_table("scores", DATA, namespace_path=["lake"])
    table = db.open_table("scores", namespace_path=["lake"])
    table.add(DATA)
    assert table.count_rows() == 6
    assert db.list_tables(namespace_path=["lake"]).tables == ["events", "scores"]


# ---------------------------------------------------------------------------------------------
# Embedding and the command line
# ---------------------------------------------------------------------------------------------


def test_app_factory_serves_any_namespace(tmp_path: Path):
    app = create_app(DirectoryNamespace(root=str(tmp_path / "dir")), max_body_bytes=10_000)
    with RestServer(app) as server, httpx.Client(base_url=server.url) as client:
        assert client.post("/v1/namespace/a/create", json={}).status_code == 200
        assert client.get("/v1/namespace/$/list").json() == {"namespaces": ["a"]}
        assert client.post("/v1/namespace/b/create", content=b"x" * 20_000).status_code == 413


def cli(*args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lance_metastore.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": SUPPORT + os.pathsep + os.environ.get("PYTHONPATH", ""),
            **env,
        },
    )


def first_line(process: subprocess.Popen[str]) -> str:
    line = process.stdout.readline().strip()
    assert line, process.stderr.read()
    return line


def test_cli_serve_prints_url_then_stops_on_sigterm_after_in_flight_requests(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    started = tmp_path / "started"
    process = cli(
        "--impl",
        "rest_namespaces.SlowNamespace",
        "--prop",
        "delay=2",
        "--prop",
        f"started_file={started}",
        "serve",
        "--port",
        "0",
        "--auth-token-file",
        str(token_file),
    )
    try:
        url = first_line(process)
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":2333")
        headers = {"Authorization": f"Bearer {TOKEN}"}
        outcome: dict[str, httpx.Response] = {}

        def slow_call() -> None:
            outcome["slow"] = httpx.post(
                url + "/v1/namespace/x/describe", json={}, headers=headers, timeout=30
            )

        caller = threading.Thread(target=slow_call)
        caller.start()
        deadline = time.monotonic() + 60
        while not started.exists():  # the request is in flight (the namespace sleeps 2 s)
            assert time.monotonic() < deadline and caller.is_alive()
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        caller.join(30)
        assert outcome["slow"].status_code == 200
        assert outcome["slow"].json() == {"properties": {"slow": "yes"}}
        assert process.wait(30) == 0
        stderr = process.stderr.read()
        assert "op=describe_namespace id=x status=200" in stderr and TOKEN not in stderr
        with pytest.raises(httpx.ConnectError):
            httpx.get(url + "/health")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_cli_serve_refuses_bad_settings(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.write_text("\n")
    bare = ("--impl", "support.rest_namespaces.BareNamespace", "serve")
    assert "empty" in refused_in_process(*bare, "--auth-token-file", str(empty)).stderr
    _, cert, _ = certificates(tmp_path)
    assert "--tls-key" in refused_in_process(*bare, "--tls-cert", str(cert)).stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = str(busy.getsockname()[1])
        assert "cannot serve" in refused_in_process(*bare, "--port", port).stderr


def test_listening_socket_lets_asyncio_disable_nagle():
    """asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP; with Nagle on,
    each keep-alive response waited ~40 ms for the client's delayed ACK (measured)."""
    from lance_metastore.rest.server import bind

    with bind("127.0.0.1", 0) as sock:
        assert sock.proto == socket.IPPROTO_TCP


def test_unreachable_catalog_is_503_code_17(tmp_path: Path):
    namespace = unreachable_glue(tmp_path)
    with RestServer(namespace) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        response = http.post("/v1/namespace/sales/describe", json={})
        assert error_of(response) == (503, 17)
        assert "never-shown-secret-value" not in response.text
        assert http.get("/health").status_code == 200


def test_a_server_that_cannot_start_says_why(tmp_path: Path):
    missing = str(tmp_path / "missing.pem")
    server = RestServer(BareNamespace(), tls_cert=missing, tls_key=missing)
    with pytest.raises(RuntimeError, match="did not start"):
        server.start()
