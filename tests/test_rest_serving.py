"""The server under load and bad input (issue 41): the event loop only moves bytes, so one
caller's large JSON body does not stall the others; a malformed Arrow body is the caller's
error; a caller that hangs up is one INFO line. Everything runs on 127.0.0.1, bounded in
rounds and in time."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import lance
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lance.namespace import DirectoryNamespace
from lance_namespace import CreateNamespaceRequest
from lance_namespace.errors import InvalidInputError
from support.harness import Harness
from support.hostile import SERVER_STACKS
from support.serving import serve_cli, unreachable_glue

from lance_metastore.rest import RestServer
from lance_metastore.rest.arrow_bodies import arrow_body
from lance_metastore.rest.offload import DEFAULT_MAX_JSON_BYTES

DATA = pa.table({"id": pa.array(range(100), pa.int64()), "name": [f"n{i}" for i in range(100)]})


def ipc_stream(table: pa.Table, batches: int = 1) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=max(1, table.num_rows // batches)):
            writer.write_batch(batch)
    return sink.getvalue()


def error_of(response: httpx.Response) -> tuple[int, int]:
    body = response.json()
    assert set(body) == {"error", "code"}, body
    return response.status_code, body["code"]


@pytest.fixture
def dir_server(tmp_path: Path) -> Iterator[RestServer]:
    with RestServer(DirectoryNamespace(root=str(tmp_path / "dir"))) as server:
        yield server


# ---------------------------------------------------------------------------------------------
# The event loop only moves bytes (item 1)
# ---------------------------------------------------------------------------------------------


def largest_json_body(limit: int) -> bytes:
    """A batch_create_table_versions body just under ``limit`` bytes, of many small entries
    (what costs the parser and the validator the most per byte)."""
    entry = {
        "id": ["db", "t"],
        "version": 1,
        "manifest_path": "db/t.lance/_versions/1.manifest-staging",
        "manifest_size": 1,
    }
    per_entry = len(json.dumps(entry)) + 2
    entries = [dict(entry, version=i) for i in range(limit // per_entry)]
    body = json.dumps({"entries": entries}).encode()
    while len(body) > limit:
        entries = entries[: -max(1, (len(body) - limit) // per_entry)]
        body = json.dumps({"entries": entries}).encode()
    return body


def describe_latencies(http: httpx.Client, table: str, rounds: int) -> list[float]:
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        response = http.post(f"/v1/table/{table}/describe", json={})
        seconds.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text
    return seconds


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]


def test_the_largest_json_body_does_not_stall_another_callers_describe(dir_server: RestServer):
    """While one caller sends the largest JSON body the limit allows, over and over, another
    caller's describe_table stays close to its idle latency: the median within 50 ms, the p99
    within a bound loose enough for a shared 2-core machine (the issue's goal is p99 within
    50 ms on an idle one). Before the fix a 6 MB body stalled every other caller for seconds."""
    body = largest_json_body(DEFAULT_MAX_JSON_BYTES)
    assert 0.99 * DEFAULT_MAX_JSON_BYTES < len(body) <= DEFAULT_MAX_JSON_BYTES
    with httpx.Client(base_url=dir_server.url, timeout=30) as http:
        assert http.post("/v1/namespace/db/create", json={}).status_code == 200
        assert http.post("/v1/table/db$t/create", content=ipc_stream(DATA)).status_code == 200
        describe_latencies(http, "db$t", 20)  # warm
        idle = describe_latencies(http, "db$t", 150)

        stop = threading.Event()
        sent: list[int] = []

        def heavy() -> None:
            with httpx.Client(base_url=dir_server.url, timeout=60) as other:
                while not stop.is_set():
                    answer = other.post("/v1/table/version/batch-create", content=body)
                    sent.append(answer.status_code)

        sender = threading.Thread(target=heavy, daemon=True)
        sender.start()
        try:
            time.sleep(0.2)
            loaded = describe_latencies(http, "db$t", 150)
        finally:
            stop.set()
            sender.join(60)
    # parsed and validated whole, then refused by the namespace (no staging manifests exist)
    assert sent and all(400 <= status < 500 and status != 413 for status in sent), sent
    idle_median, loaded_median = statistics.median(idle), statistics.median(loaded)
    print(
        f"describe idle median {idle_median * 1e3:.1f} ms p99 {p99(idle) * 1e3:.1f} ms; beside "
        f"the largest JSON bodies median {loaded_median * 1e3:.1f} ms p99 "
        f"{p99(loaded) * 1e3:.1f} ms ({len(sent)} bodies)"
    )
    # On the loop, every describe waited for the body being parsed (the median rose by the
    # parse time, ~100 ms here for 1 MiB, seconds for the old 256 MiB limit); off it, a
    # describe waits only for the interpreter lock between slices of the parse.
    assert loaded_median - idle_median < 0.100  # +5 ms on a quiet machine, +51 ms at load 20
    # p99 is at the mercy of this shared machine (load 20 seen); the old stall was 2.3-17 s
    assert p99(loaded) - p99(idle) < 3.0


def test_changes_waiting_on_a_table_lock_leave_reads_their_threads(
    hive_metastore_uri: str, tmp_path: Path
):
    """Reads and changes have a pool each: with every change thread of the server waiting for
    a Hive table lock another client holds (managed appends through the server), describes
    and listings are answered at once, and the appends land once the lock is released. With
    one shared pool the describes waited for the lock's timeout (30 s)."""
    from lance_namespace import connect
    from pymetastore.hive_metastore import ThriftHiveMetastore, ttypes
    from support.hive_locks import exclusive_table_lock
    from support.waiting import wait_until
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    from lance_metastore import Hive2Namespace

    namespace = Hive2Namespace(uri=hive_metastore_uri, root=str(tmp_path), managed_by="impl")
    db = f"pools_{os.urandom(4).hex()}"
    namespace.create_namespace(CreateNamespaceRequest(id=[db]))
    table_id = [db, "t"]
    lance.write_dataset(DATA, namespace_client=namespace, table_id=table_id, mode="create")
    host, port = hive_metastore_uri.removeprefix("thrift://").rsplit(":", 1)
    transport = TTransport.TBufferedTransport(TSocket.TSocket(host, int(port)))
    transport.open()
    other = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
    held = other.lock(exclusive_table_lock(db, "t"))
    assert held.state == ttypes.LockState.ACQUIRED
    errors: list[BaseException] = []
    try:
        with RestServer(namespace, worker_threads=2) as server:
            changes = server.app.state.pools.changes

            def append() -> None:
                try:
                    client = connect("rest", {"uri": server.url})
                    lance.write_dataset(
                        DATA, namespace_client=client, table_id=table_id, mode="append"
                    )
                except BaseException as error:
                    errors.append(error)

            writers = [threading.Thread(target=append) for _ in range(3)]
            for writer in writers:
                writer.start()
            wait_until(lambda: changes.busy == 2, 60, "both change threads waiting on the lock")
            with httpx.Client(base_url=server.url, timeout=30) as http:
                started = time.monotonic()
                for _ in range(5):
                    assert http.post(f"/v1/table/{db}$t/describe", json={}).status_code == 200
                    assert http.get(f"/v1/namespace/{db}/table/list").status_code == 200
                answered = time.monotonic() - started
                exposition = http.get("/metrics").text
            assert changes.busy == 2  # the appends still wait
            waiting = re.search(
                r'^lance_rest_pool_calls\{pool="changes"\} (\S+)$', exposition, re.M
            )
            assert waiting is not None and float(waiting.group(1)) >= 2, exposition[-2000:]
            other.unlock(ttypes.UnlockRequest(lockid=held.lockid))
            for writer in writers:
                writer.join(120)
    finally:
        transport.close()
    assert answered < 10.0, answered  # milliseconds idle; the lock's timeout is 30 s
    assert errors == [] and not any(writer.is_alive() for writer in writers)
    dataset = lance.dataset(namespace_client=namespace, table_id=table_id)
    assert dataset.count_rows() == 4 * len(DATA)


def test_every_operation_runs_on_the_pool_of_what_it_may_wait_on() -> None:
    """Describes and listings on the catalog pool, scans of rows and statistics on their own,
    everything that needs more than ``read`` on the changes pool; nothing unknown reads."""
    from lance_metastore.rest.access import OPERATION_PRIVILEGES, Privilege
    from lance_metastore.rest.offload import SCANS, Pools, WorkerPool
    from lance_metastore.rest.operations import OPERATIONS

    pools = Pools(catalog=WorkerPool(1), scans=WorkerPool(1), changes=WorkerPool(1))
    kinds = {pools.catalog: "catalog", pools.scans: "scans", pools.changes: "changes"}
    for operation in OPERATIONS:
        kind = kinds[pools.of(operation.name)]
        privilege = OPERATION_PRIVILEGES[operation.name].privilege
        if privilege > Privilege.READ:
            assert kind == "changes", operation.name
        else:
            assert kind == ("scans" if operation.name in SCANS else "catalog"), operation.name
    assert {op.name for op in OPERATIONS} >= SCANS
    assert kinds[pools.of("describe_table")] == "catalog"
    assert kinds[pools.of("query_table")] == "scans"
    assert kinds[pools.of("create_table_version")] == "changes"
    assert kinds[pools.of("an_operation_of_a_later_spec")] == "changes"


def test_json_bodies_have_their_own_limit(tmp_path: Path):
    """A JSON body over the JSON limit is 413/13 (by Content-Length, or as it streams), while
    an Arrow data body of the same size, under the body limit, goes through."""
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    with (
        RestServer(namespace, max_json_bytes=10_000) as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        big = json.dumps({"properties": {"k": "v" * 20_000}}).encode()
        assert error_of(http.post("/v1/namespace/a/create", content=big)) == (413, 13)

        def chunks() -> Iterator[bytes]:
            yield b'{"properties": {"k": "'
            for _ in range(30):
                yield b"v" * 1000
            yield b'"}}'

        refused = http.post("/v1/namespace/a/create", content=chunks())
        assert error_of(refused) == (413, 13)
        assert "JSON request body" in refused.json()["error"]
        assert http.post("/v1/namespace/a/create", json={}).status_code == 200
        data = ipc_stream(pa.table({"x": pa.array(range(5000), pa.int64())}))
        assert len(data) > 10_000
        assert http.post("/v1/table/a$t/create", content=data).status_code == 200


# ---------------------------------------------------------------------------------------------
# Bad input stays bad input (item 6)
# ---------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=2000)
@given(data=st.data(), batches=st.integers(1, 4), lazy=st.booleans())
def test_any_cut_of_an_arrow_stream_is_invalid_input_or_a_valid_prefix(
    data: st.DataObject, batches: int, lazy: bool
):
    """A stream cut anywhere, or with bytes flipped, is refused as invalid input (code 13),
    or reads as a stream of whole batches: never another error."""
    whole = ipc_stream(DATA, batches)
    cut = data.draw(st.integers(1, len(whole) - 1), label="cut")
    body = bytearray(whole[:cut])
    if data.draw(st.booleans(), label="flip"):
        position = data.draw(st.integers(0, len(body) - 1), label="position")
        body[position] ^= data.draw(st.integers(1, 255), label="mask")
    try:
        reader = arrow_body(bytes(body), 1 << 30, lazy=lazy)
        if isinstance(reader, pa.RecordBatchReader):
            reader.read_all()
    except InvalidInputError:
        pass
    except pa.ArrowException as error:  # pyarrow re-raises a generator's error as its own
        assert "not a valid Arrow IPC stream" in str(error), error


def test_a_truncated_or_malformed_arrow_body_is_400_code_13(glue: Harness, dir_server: RestServer):
    """The issue's case (a truncated body answered 500/18) on our namespace, which reads rows
    lazily, and on pylance's DirectoryNamespace, which takes bytes."""
    namespace = glue.connect()
    db = glue.db(glue.unique())
    namespace.create_namespace(CreateNamespaceRequest(id=db))
    whole = ipc_stream(DATA, 2)
    schema_end = len(ipc_stream(DATA.slice(0, 0)))
    bad = {
        "truncated mid-batch": whole[: len(whole) - 100],
        "truncated in the schema": whole[:20],
        "garbage after the schema": whole[: schema_end - 8] + b"\xff" * 64,
    }
    prefix = "$".join(db)
    with RestServer(namespace) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        assert http.post(f"/v1/table/{prefix}$t/create", content=whole).status_code == 200
        for url, client in ((server.url, http), (dir_server.url, None)):
            with httpx.Client(base_url=url, timeout=60) as own:
                use = client or own
                if client is None:
                    use.post("/v1/namespace/db/create", json={})
                table = f"{prefix}$t" if client is not None else "db$t"
                new = f"{prefix}$fresh" if client is not None else "db$fresh"
                for why, body in bad.items():
                    for target in (f"/v1/table/{table}/insert", f"/v1/table/{new}/create"):
                        answer = use.post(target, content=body)
                        assert error_of(answer) == (400, 13), (why, target, answer.text)
                        assert "not a valid Arrow IPC stream" in answer.json()["error"]
        count = http.post(f"/v1/table/{prefix}$t/count_rows", json={})
        assert count.json() == DATA.num_rows  # nothing half-written


def test_a_client_gone_mid_request_is_one_info_line(
    dir_server: RestServer, caplog: pytest.LogCaptureFixture
):
    """A client that closes its connection halfway through its body: one INFO line naming the
    route, no traceback, no ERROR; the server goes on serving."""
    host, port = dir_server.url.removeprefix("http://").split(":")
    caplog.set_level(logging.INFO, logger="lance_metastore.rest")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/namespace/gone/create HTTP/1.1\r\nHost: x\r\n"
            b'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"properties": '
        )
        time.sleep(0.2)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
        "closed the connection" in record.getMessage() for record in caplog.records
    ):
        time.sleep(0.05)
    with httpx.Client(base_url=dir_server.url, timeout=30) as http:
        assert http.get("/v1/namespace/$/list").status_code == 200
    ours = [r for r in caplog.records if r.name.startswith("lance_metastore.rest")]
    gone = [r for r in ours if "closed the connection" in r.getMessage()]
    assert len(gone) == 1, [r.getMessage() for r in ours]
    assert gone[0].levelno == logging.INFO and gone[0].exc_info is None
    assert "/v1/namespace/gone/create" in gone[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@settings(max_examples=40, deadline=5000)
@given(
    versions=st.lists(
        st.one_of(st.integers(0, 10**6), st.text(max_size=3), st.none()),
        min_size=0,
        max_size=700,
    )
)
def test_validating_in_slices_is_validating_whole(versions: list[object]):
    """Long lists are validated a slice at a time (the lock goes back to the loop between
    slices): the same model, or the same errors at the same positions, as one call."""
    from pydantic import ValidationError

    from lance_metastore.rest.app import validate_in_slices
    from lance_metastore.rest.operations import OPERATIONS

    model = next(op for op in OPERATIONS if op.name == "batch_create_table_versions").request
    entry = {"id": ["db", "t"], "manifest_path": "p", "manifest_size": 1}
    fields = {"entries": [dict(entry, version=version) for version in versions]}
    try:
        whole = model.model_validate(fields)
    except ValidationError as error:
        with pytest.raises(ValidationError) as sliced:
            validate_in_slices(model, fields)
        assert [(e["loc"], e["type"]) for e in sliced.value.errors()] == [
            (e["loc"], e["type"]) for e in error.errors()
        ]
    else:
        assert validate_in_slices(model, fields) == whole


# ---------------------------------------------------------------------------------------------
# Observable (item 4)
# ---------------------------------------------------------------------------------------------


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus' text format (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                total += found.value
    return total


def test_metrics_count_requests_catalog_calls_and_connections(glue: Harness):
    """/metrics in Prometheus' format: requests by operation, status and code, their latency,
    the catalog primitives each made, open connections and in-flight requests."""
    namespace = glue.connect()
    db = glue.db(glue.unique())
    prefix = "$".join(db)
    with RestServer(namespace) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        before = http.get("/metrics")
        assert before.status_code == 200
        assert before.headers["content-type"].startswith("text/plain")
        assert http.post(f"/v1/namespace/{prefix}/create", json={}).status_code == 200
        missing = http.post(f"/v1/table/{prefix}$nope/describe", json={})
        assert error_of(missing) == (404, 4)
        text = http.get("/metrics").text
    old = before.text
    for labels, delta in (
        ({"operation": "create_namespace", "status": "200", "code": "-"}, 1),
        ({"operation": "describe_table", "status": "404", "code": "4"}, 1),
    ):
        name = "lance_rest_requests_total"
        assert sample(text, name, **labels) - sample(old, name, **labels) == delta, labels
    count = "lance_rest_request_seconds_count"
    assert sample(text, count, operation="describe_table") >= 1
    calls = "lance_catalog_calls_total"
    backend = type(namespace).__name__
    assert sample(text, calls, backend=backend, call="get_table") > sample(
        old, calls, backend=backend, call="get_table"
    )
    assert sample(text, "lance_catalog_call_seconds_count", backend=backend) >= 1
    assert sample(text, "lance_rest_open_connections") >= 1
    assert sample(text, "lance_rest_in_flight_requests") >= 1  # the scrape itself


def test_metrics_answer_loopback_or_the_metrics_token(tmp_path: Path):
    """Without a token only loopback callers may scrape (a caller through another address is
    refused); with one, the token is needed and enough. Probes need no credentials even when
    every other route does."""
    from lance_metastore.rest import create_app

    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    app = create_app(namespace, auth_token="caller-token", metrics_token="scrape-token")
    with RestServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        assert error_of(http.get("/metrics"))[0] == 401
        wrong = http.get("/metrics", headers={"Authorization": "Bearer caller-token"})
        assert error_of(wrong)[0] == 401
        right = http.get("/metrics", headers={"Authorization": "Bearer scrape-token"})
        assert right.status_code == 200 and "lance_rest_requests_total" in right.text
        assert http.get("/health").status_code == 200
        assert http.get("/ready").json() == {"status": "ready"}
        assert error_of(http.get("/v1/namespace/$/list"))[0] == 401

    from starlette.testclient import TestClient

    remote = TestClient(create_app(namespace), client=("203.0.113.9", 5000))
    assert error_of(remote.get("/metrics")) == (403, 15)
    local = TestClient(create_app(namespace), client=("127.0.0.1", 5000))
    assert local.get("/metrics").status_code == 200


def test_ready_says_whether_the_catalog_answers(glue: Harness, tmp_path: Path):
    """/ready is 200 while the catalog answers and 503 when it cannot be reached, within its
    bound; /health stays 200: the process is alive either way."""
    with (
        RestServer(glue.connect()) as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        assert http.get("/ready").json() == {"status": "ready"}
    unreachable = unreachable_glue(tmp_path)
    with RestServer(unreachable) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        started = time.monotonic()
        answer = http.get("/ready")
        assert answer.status_code == 503, answer.text
        assert answer.json()["status"] == "unavailable"
        assert "never-shown-secret-value" not in answer.text
        assert time.monotonic() - started < 10
        assert http.get("/health").status_code == 200


# ---------------------------------------------------------------------------------------------
# Fair under hostile callers (item 2)
# ---------------------------------------------------------------------------------------------


def connection_closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (bytes it sends are skipped)."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:
            return True
    return False


@pytest.mark.parametrize("stack", SERVER_STACKS)
@pytest.mark.parametrize("part", ["headers", "body"])
def test_a_request_trickling_in_is_closed_at_the_request_deadline(
    tmp_path: Path, part: str, stack: str
):
    """A byte every 0.2 s keeps the pause timeouts (5 s) from firing; the total deadline for
    a request (1 s) closes it anyway, while another caller is served meanwhile."""
    from lance_metastore.rest import ClientLimits

    limits = ClientLimits(header_timeout=5, body_timeout=5, request_timeout=1.0)
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    with RestServer(namespace, limits=limits, **SERVER_STACKS[stack]) as server:
        host, port = server.url.removeprefix("http://").split(":")
        head = (
            b"POST /v1/namespace/slow/create HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
        )
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            if part == "body":
                sock.sendall(head)
            started = time.monotonic()
            trickle = head if part == "headers" else b" " * 200
            closed = False
            for byte in trickle:
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    closed = True
                    break
                if connection_closed_within(sock, 0.2):
                    closed = True
                    break
                if time.monotonic() - started > 6:
                    break
            elapsed = time.monotonic() - started
            with httpx.Client(base_url=server.url, timeout=10) as http:
                assert http.get("/v1/namespace/$/list").status_code == 200
        assert closed and elapsed < 4, elapsed


class HeldNamespace(DirectoryNamespace):
    """pylance's DirectoryNamespace whose describe_namespace waits for ``release`` (so a test
    holds requests in flight for as long as it needs)."""

    release = threading.Event()

    def describe_namespace(self, request):  # type: ignore[no-untyped-def]
        self.release.wait(30)
        return super().describe_namespace(request)


def test_one_principal_over_its_in_flight_limit_is_429_while_others_are_served(tmp_path: Path):
    """alice holds her limit of requests in flight; her next is 429 with code 21 and
    Retry-After, at once; bob's requests meet their deadline meanwhile; so does a caller
    from another connection of alice's once hers finish."""
    from lance_metastore.rest import AccessControl, BearerTokens, create_app

    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"alice": "alice-token", "bob": "bob-token"}))
    tokens.chmod(0o600)
    access = AccessControl([BearerTokens(file=str(tokens))])
    namespace = HeldNamespace(root=str(tmp_path / "dir"))
    HeldNamespace.release.clear()
    app = create_app(namespace, access=access, max_in_flight_per_principal=3)
    alice = {"Authorization": "Bearer alice-token"}
    bob = {"Authorization": "Bearer bob-token"}
    with RestServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.post("/v1/namespace/db/create", json={}, headers=alice).status_code == 200
        held = []

        def hold() -> None:
            with httpx.Client(base_url=server.url, timeout=30) as own:
                held.append(own.post("/v1/namespace/db/describe", json={}, headers=alice))

        holders = [threading.Thread(target=hold) for _ in range(3)]
        for thread in holders:
            thread.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            text = http.get("/metrics").text
            if sample(text, "lance_rest_in_flight_requests") >= 4:  # 3 held + this scrape
                break
            time.sleep(0.05)
        try:
            started = time.monotonic()
            refused = http.post("/v1/namespace/db/list", json={}, headers=alice)
            assert time.monotonic() - started < 2
            assert error_of(refused) == (429, 21)
            assert refused.headers["retry-after"] == "1"
            for _ in range(5):
                started = time.monotonic()
                answer = http.get("/v1/namespace/$/list", headers=bob)
                assert answer.status_code == 200
                assert time.monotonic() - started < 2
        finally:
            HeldNamespace.release.set()
            for thread in holders:
                thread.join(30)
        assert [answer.status_code for answer in held] == [200, 200, 200]
        assert http.get("/v1/namespace/$/list", headers=alice).status_code == 200
        text = http.get("/metrics").text
        assert sample(text, "lance_rest_refusals_total", reason="principal_in_flight") >= 1


@pytest.mark.parametrize("stack", SERVER_STACKS)
def test_one_address_over_its_connection_limit_is_429_on_the_connection(tmp_path: Path, stack: str):
    """Past the per-address connection limit, the address's connection idle longest makes room;
    when every one of them has a request in progress, the new connection reads 429 with code
    21 and Retry-After, then is closed; the requests in progress finish."""
    from lance_metastore.rest import ClientLimits

    limits = ClientLimits(max_connections_per_client=3)
    namespace = HeldNamespace(root=str(tmp_path / "dir"))
    HeldNamespace.release.clear()
    with RestServer(namespace, limits=limits, **SERVER_STACKS[stack]) as server:
        host, port = server.url.removeprefix("http://").split(":")
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.post("/v1/namespace/db/create", json={}).status_code == 200
            idle = [httpx.Client(base_url=server.url, timeout=10) for _ in range(3)]
            for client in idle:
                assert client.get("/v1/namespace/$/list").status_code == 200
            # idle connections make room: a new one is served
            assert http.get("/v1/namespace/$/list").status_code == 200
            for client in idle:
                client.close()
        held: list[int] = []

        def hold() -> None:
            with httpx.Client(base_url=server.url, timeout=30) as own:
                held.append(own.post("/v1/namespace/db/describe", json={}).status_code)

        holders = [threading.Thread(target=hold) for _ in range(3)]
        for thread in holders:
            thread.start()
        try:
            deadline = time.monotonic() + 10
            while established_on(os.getpid(), int(port)) < 3:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(0.3)  # the three requests have arrived and wait in the namespace
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.settimeout(5)
                reply = b""
                while chunk := sock.recv(4096):
                    reply += chunk
        finally:
            HeldNamespace.release.set()
            for thread in holders:
                thread.join(30)
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 429"), reply
        assert b"retry-after: 1" in head.lower()
        assert json.loads(body)["code"] == 21
        assert held == [200, 200, 200]


def request_on(sock: socket.socket, path: str, token: str) -> bytes:
    """One keep-alive GET on ``sock``: the whole answer (by its Content-Length)."""
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    )
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += sock.recv(4096) or b"!"
    head, _, body = reply.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(4096)
    return head + b"\r\n\r\n" + body


@pytest.mark.parametrize("stack", SERVER_STACKS)
def test_one_principal_over_its_connection_limit_is_429_while_others_are_served(
    tmp_path: Path, stack: str
):
    """alice keeps her limit of 2 connections open (keep-alive); the first request on her
    third is 429 with code 21 and Retry-After, then that connection is closed, while her two
    and bob's two connections (from the same address: not an address limit) are served; once
    one of hers closes, a new one of hers is served."""
    from lance_metastore.rest import AccessControl, BearerTokens, ClientLimits

    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"alice": "alice-token", "bob": "bob-token"}))
    tokens.chmod(0o600)
    access = AccessControl([BearerTokens(file=str(tokens))])
    namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
    limits = ClientLimits(max_connections_per_principal=2)
    listing = "/v1/namespace/$/list"
    with RestServer(namespace, access=access, limits=limits, **SERVER_STACKS[stack]) as server:
        host, port = server.url.removeprefix("http://").split(":")

        def connect() -> socket.socket:
            return socket.create_connection((host, int(port)), timeout=10)

        alices = [connect() for _ in range(2)]
        bobs = [connect() for _ in range(2)]
        try:
            for sock in alices + bobs:
                token = "alice-token" if sock in alices else "bob-token"
                assert request_on(sock, listing, token).startswith(b"HTTP/1.1 200")
            with connect() as third:
                reply = request_on(third, listing, "alice-token")
                head, _, body = reply.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 429"), reply
                assert b"retry-after: 1" in head.lower()
                assert json.loads(body)["code"] == 21
                assert connection_closed_within(third, 5)
            for _ in range(3):  # the others are unaffected, on their kept-alive connections
                for sock in alices + bobs:
                    token = "alice-token" if sock in alices else "bob-token"
                    assert request_on(sock, listing, token).startswith(b"HTTP/1.1 200")
            alices.pop().close()
            deadline = time.monotonic() + 10
            while True:  # the server sees the close, then alice has room again
                with connect() as again:
                    if request_on(again, listing, "alice-token").startswith(b"HTTP/1.1 200"):
                        break
                assert time.monotonic() < deadline
                time.sleep(0.05)
        finally:
            for sock in alices + bobs:
                sock.close()
        metrics = httpx.get(server.url + "/metrics", timeout=10).text
        assert sample(metrics, "lance_rest_refusals_total", reason="connections_per_principal") >= 1


# ---------------------------------------------------------------------------------------------
# Many processes (item 3)
# ---------------------------------------------------------------------------------------------


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def established_on(pid: int, port: int) -> int:
    """Established TCP connections process ``pid`` holds on local port ``port``."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, inode = fields[1], fields[3], fields[9]
        if state == "01" and int(local.rsplit(":", 1)[1], 16) == port and inode in inodes:
            count += 1
    return count


def test_workers_share_the_port_and_sighup_and_sigterm_reach_every_one(tmp_path: Path):
    """serve --workers 2: connections land on both workers; a token added to the tokens file
    is accepted by both after one SIGHUP to the server; SIGTERM lets both finish their
    in-flight requests, then the server exits 0. /metrics adds up both workers."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"alice": "alice-token"}))
    tokens.chmod(0o600)
    started = tmp_path / "started"
    process = serve_cli(
        "--impl", "rest_namespaces.SlowNamespace", "--prop", "delay=2",
        "--prop", f"started_file={started}",
        "serve", "--port", "0", "--workers", "2", "--tokens-file", str(tokens),
        "--max-in-flight-per-principal", "1000",
    )  # fmt: skip
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), process.stderr.read()
        port = int(url.rsplit(":", 1)[1])
        deadline = time.monotonic() + 60
        while len(children_of(process.pid)) < 2:
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.1)
        workers = children_of(process.pid)
        health_deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < health_deadline
            time.sleep(0.2)
        clients: list[httpx.Client] = []
        try:
            # the kernel spreads connections over the workers waiting in accept; a worker
            # still starting takes none yet, so connect until each holds one (bounded)
            spread_deadline = time.monotonic() + 60
            while len(clients) < 12 or not all(established_on(w, port) for w in workers):
                assert time.monotonic() < spread_deadline and len(clients) < 200, [
                    established_on(worker, port) for worker in workers
                ]
                clients.append(httpx.Client(base_url=url, timeout=30))
                assert error_of(clients[-1].get("/v1/namespace/$/list"))[0] == 401
                if len(clients) >= 12:
                    time.sleep(0.05)
            tokens.write_text(json.dumps({"alice": "alice-token", "bob": "bob-token"}))
            process.send_signal(signal.SIGHUP)
            bob = {"Authorization": "Bearer bob-token"}
            reload_deadline = time.monotonic() + 20
            for client in clients:  # every connection, so every worker
                while client.get("/v1/namespace/$/list", headers=bob).status_code != 200:
                    assert time.monotonic() < reload_deadline
                    time.sleep(0.1)
            text = clients[0].get("/metrics").text  # both workers' counts, whichever answers
            answered = sample(text, "lance_rest_requests_total", operation="list_namespaces")
            assert answered >= len(clients)

            outcome: list[int] = []

            def slow(client: httpx.Client) -> None:
                answer = client.post("/v1/namespace/x/describe", json={}, headers=bob)
                outcome.append(answer.status_code)

            callers = [threading.Thread(target=slow, args=(client,)) for client in clients]
            for caller in callers:
                caller.start()
            while not started.exists():
                assert time.monotonic() < reload_deadline + 30
                time.sleep(0.05)
            time.sleep(0.3)
            process.send_signal(signal.SIGTERM)
            for caller in callers:
                caller.join(60)
            assert outcome == [200] * len(clients)
            assert process.wait(60) == 0, process.stderr.read()[-3000:]
            assert all(not Path(f"/proc/{worker}").exists() for worker in workers)
        finally:
            for client in clients:
                client.close()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_audit_lines_as_json_carry_the_same_fields(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """--log-format json: one JSON object per request with the text line's fields; a crafted
    id cannot forge a second line."""
    from lance_metastore.rest import create_app

    caplog.set_level(logging.INFO, logger="lance_metastore.rest.audit")
    app = create_app(DirectoryNamespace(root=str(tmp_path / "dir")), audit_json=True)
    with RestServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.post("/v1/namespace/db/create", json={}).status_code == 200
        http.post("/v1/table/db$a%0Aforged/describe", json={})
    lines = [r.getMessage() for r in caplog.records if r.name == "lance_metastore.rest.audit"]
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    first, second = (json.loads(line) for line in lines)
    assert set(first) == {"time", "client", "identity", "op", "id", "status", "code", "ms"}
    assert first["op"] == "create_namespace" and first["status"] == 200 and first["code"] is None
    assert second["id"] == "db$a\nforged" and second["status"] == 404
