"""The server under load (issue 41): what the other suites leave unproven.

- A flood of JWTs naming key ids the issuer's set lacks, while the issuer's key-set endpoint
  has stopped answering: every refetch they start waits on its own thread, never on a request
  worker, so another caller's requests meet their deadline and the flood is answered 401 (or
  429 with code 21 past its address's limit), at once.
- The commit and vending counters of ``/metrics`` move when what they count happens: a real
  conflict between two writers (a retry made at once, then 14), a version written around the
  catalog (adopted), a credential vended once from STS then from the cache.

Everything runs on 127.0.0.1 against real servers (the Glue emulator, moto's STS), bounded by
deadlines, not sleeps.
"""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import lance
import pyarrow as pa
from lance.namespace import DirectoryNamespace
from lance_namespace import connect
from support.access_kit import AUDIENCE, ISSUER, SigningKey, jwks
from support.harness import Harness
from support.waiting import wait_until
from test_vending import s3_lake, vending_properties  # noqa: F401 - s3_lake is a fixture

from lance_metastore.rest import AccessControl, JwtBearer, RestServer
from lance_metastore.rules import versions

ROWS = pa.table({"id": pa.array([1, 2], pa.int64())})


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus' text format, summed over the labels not given
    (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                total += found.value
    return total


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]


# ---------------------------------------------------------------------------------------------
# Unknown key ids against an issuer that stopped answering (item 2)
# ---------------------------------------------------------------------------------------------


class StalledIssuer:
    """A JWKS endpoint on 127.0.0.1 that answers its first fetch with ``key``'s set, then reads
    every later request and never answers it (until the fetcher hangs up). Counts the fetches,
    those waiting now, and the most that ever waited at once."""

    def __init__(self, key: SigningKey) -> None:
        self.body = json.dumps(jwks(key)).encode()
        self.fetches = 0
        self.waiting = 0
        self.most_waiting = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/jwks.json"

    @contextlib.contextmanager
    def running(self) -> Iterator[StalledIssuer]:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._closed.set()
            self._listener.close()
            thread.join(10)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            connection.settimeout(30)
            with contextlib.suppress(OSError):
                connection.recv(4096)
            with self._lock:
                self.fetches += 1
                first = self.fetches == 1
                if not first:
                    self.waiting += 1
                    self.most_waiting = max(self.most_waiting, self.waiting)
            if first:
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                head += b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(self.body)
                connection.sendall(head + self.body)
                return
            try:  # stalled: nothing is sent; wait for the fetcher to give up
                while not self._closed.is_set():
                    try:
                        if not connection.recv(4096):
                            break
                    except TimeoutError:
                        continue
                    except OSError:
                        break
            finally:
                with self._lock:
                    self.waiting -= 1


def unknown_kid_token(signer: SigningKey, number: int) -> str:
    """A well-formed token whose key id the issuer's set lacks (a new one each time)."""
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "iat": now, "exp": now + 600}
    return jwt.encode(claims, signer.private, algorithm="RS256", headers={"kid": f"k{number}"})


FLOODERS = 8
FETCH_SECONDS = 4.0  # how long each refetch waits for the stalled issuer


def test_an_unknown_kid_flood_over_a_stalled_key_set_never_holds_other_callers(tmp_path: Path):
    """One caller (from 127.0.0.2) floods the server with tokens naming unknown key ids, each
    of which would start a refetch of the key set; the issuer has stopped answering, so each
    refetch runs its full deadline. Meanwhile another caller's requests are all answered,
    their median far below one fetch's deadline (the p99 below it, loosely: this machine is
    shared); a refetch was waiting while they were served; the issuer was asked about once
    per deadline, however many unknown kids came; every flood request was answered 401 (code
    16) or 429 (code 21), none waited for a fetch either. Before the fix each unknown-kid
    request held a worker for the fetch and authenticated callers stalled 18 s."""
    alice_key = SigningKey("key-1")
    signer = SigningKey("key-1")  # a key the issuer never published; its kid varies below
    issuer = StalledIssuer(alice_key)
    with issuer.running():
        scheme = JwtBearer(
            issuer=ISSUER,
            audience=AUDIENCE,
            jwks=issuer.url,
            refetch_seconds="0",  # every unknown kid may start a fetch: the worst case
            fetch_timeout_seconds=str(FETCH_SECONDS),
        )
        assert issuer.fetches == 1
        namespace = DirectoryNamespace(root=str(tmp_path / "dir"))
        alice = {"Authorization": f"Bearer {alice_key.token()}"}
        with (
            RestServer(namespace, access=AccessControl([scheme])) as server,
            httpx.Client(base_url=server.url, headers=alice, timeout=30) as http,
        ):
            beside_a_fetch = 0  # alice's requests answered while a refetch waited

            def timed_lists(rounds: int) -> list[float]:
                nonlocal beside_a_fetch
                seconds = []
                for _ in range(rounds):
                    waiting = issuer.waiting
                    started = time.perf_counter()
                    answer = http.get("/v1/namespace/$/list")
                    seconds.append(time.perf_counter() - started)
                    assert answer.status_code == 200, answer.text
                    beside_a_fetch += bool(waiting and issuer.waiting)
                return seconds

            timed_lists(10)  # warm; alice's token is verified once and remembered
            idle = timed_lists(60)

            stop = threading.Event()
            answers: list[tuple[int, int, float]] = []  # status, code, seconds
            lock = threading.Lock()

            def flood(index: int) -> None:
                transport = httpx.HTTPTransport(local_address="127.0.0.2")
                with httpx.Client(base_url=server.url, transport=transport, timeout=30) as own:
                    number = index
                    while not stop.is_set():
                        number += FLOODERS
                        token = unknown_kid_token(signer, number)
                        started = time.perf_counter()
                        answer = own.get(
                            "/v1/namespace/$/list", headers={"Authorization": f"Bearer {token}"}
                        )
                        seconds = time.perf_counter() - started
                        with lock:
                            answers.append((answer.status_code, answer.json()["code"], seconds))

            flooders = [threading.Thread(target=flood, args=(i,)) for i in range(FLOODERS)]
            flooding = time.monotonic()
            for thread in flooders:
                thread.start()
            try:
                wait_until(lambda: issuer.waiting >= 1, 30, "a refetch waiting on the issuer")
                loaded = timed_lists(100)
                # the flood goes on across more than one fetch deadline
                wait_until(lambda: issuer.fetches >= 3, 4 * FETCH_SECONDS, "a second refetch")
                loaded += timed_lists(40)
            finally:
                stop.set()
                for thread in flooders:
                    thread.join(60)
            flooded = time.monotonic() - flooding
    assert not any(thread.is_alive() for thread in flooders)
    print(
        f"alice's list idle p99 {p99(idle) * 1e3:.1f} ms, under the flood median "
        f"{statistics.median(loaded) * 1e3:.1f} ms p99 {p99(loaded) * 1e3:.1f} ms max "
        f"{max(loaded) * 1e3:.0f} ms; {len(answers)} flood requests, {issuer.fetches - 1} "
        f"refetches"
    )
    assert beside_a_fetch >= len(loaded) // 2, (beside_a_fetch, len(loaded))
    # one fetch at a time (a fetch ending as the next starts may overlap it for a moment)
    assert issuer.most_waiting <= 2
    assert issuer.fetches - 1 <= flooded / FETCH_SECONDS + 1, (issuer.fetches, flooded)
    # A request waiting for a fetch would take up to 4 s. The median is what the machine's
    # load moves least; the p99 bound is loose for that load.
    assert statistics.median(loaded) < FETCH_SECONDS / 8, statistics.median(loaded)
    assert p99(loaded) < FETCH_SECONDS, p99(loaded)
    statuses = {(status, code) for status, code, _ in answers}
    assert (401, 16) in statuses and statuses <= {(401, 16), (429, 21)}, statuses
    flood_seconds = [seconds for _, _, seconds in answers]
    assert statistics.median(flood_seconds) < FETCH_SECONDS / 8, statistics.median(flood_seconds)
    assert p99(flood_seconds) < FETCH_SECONDS, p99(flood_seconds)


# ---------------------------------------------------------------------------------------------
# Commit and vending counters (item 4)
# ---------------------------------------------------------------------------------------------


def commit_counts(text: str) -> dict[str, float]:
    return {
        event: sample(text, "lance_commit_events_total", event=event)
        for event in ("conflict", "retry", "adoption")
    }


def test_commit_conflicts_retries_and_adoptions_are_counted(glue: Harness, glue_emulator: Any):
    """Through the server over Glue (the emulator arbitrates on VersionId): writer A's commit
    of version 2 is held at Glue's UpdateTable while writer B commits version 2; released, A's
    update is refused, the server retries at once on the entry B wrote, finds version 2 taken
    and answers 14 (Lance then commits A's rows as version 3): a retry and a conflict, and the
    conflict is a 14 the server answered. Then a version written straight to storage is
    adopted by the next commit through the server (Lance, reading the table through the
    server, already asks for the version after storage's: no conflict)."""
    glue.reset()
    direct = glue.connect(managed_by="impl")
    db = glue.db(glue.unique())
    direct.create_namespace({"id": db})
    table_id = [*db, "events"]
    lance.write_dataset(ROWS, namespace_client=direct, table_id=table_id, mode="create")
    fourteens = {"operation": "create_table_version", "code": "14"}
    with RestServer(glue.connect(managed_by="impl")) as server:
        scrape = server.url + "/metrics"
        client: Any = connect("rest", {"uri": server.url})
        before = httpx.get(scrape, timeout=30).text

        def commits_to_the_table(parameters: dict[str, Any]) -> bool:
            table = parameters.get("TableInput") or {}
            recorded = (table.get("Parameters") or {}).get(versions.MANIFEST_PATH_KEY, "")
            return table.get("Name") == table_id[-1] and "/_versions/" in recorded

        errors: list[BaseException] = []

        def writer_a() -> None:
            try:
                lance.write_dataset(ROWS, namespace_client=client, table_id=table_id, mode="append")
            except BaseException as error:
                errors.append(error)

        with glue_emulator.hold("UpdateTable", when=commits_to_the_table) as hold:
            thread = threading.Thread(target=writer_a)
            thread.start()
            assert hold.reached.wait(60), "writer A's commit never reached Glue"
            lance.write_dataset(ROWS, namespace_client=direct, table_id=table_id, mode="append")
            hold.release()
            thread.join(120)
        assert not thread.is_alive() and errors == [], errors
        assert direct.describe_table({"id": table_id}).properties["version"] == "3"

        def raced() -> str | None:
            text = httpx.get(scrape, timeout=30).text
            moved = {k: v - commit_counts(before)[k] for k, v in commit_counts(text).items()}
            conflicts = sample(text, "lance_rest_requests_total", **fourteens)
            answered = conflicts - sample(before, "lance_rest_requests_total", **fourteens)
            counted = moved["conflict"] >= 1 and moved["retry"] >= 1 and answered >= 1
            return text if counted and moved["adoption"] == 0 else None

        after_race = wait_until(raced, 30, "a retry and a conflict counted, and a 14 answered")

        location = direct.describe_table({"id": table_id}).location
        lance.write_dataset(ROWS, location, mode="append")  # around the catalog: version 4
        lance.write_dataset(ROWS, namespace_client=client, table_id=table_id, mode="append")
        adopted = httpx.get(scrape, timeout=30).text
    assert direct.describe_table({"id": table_id}).properties["version"] == "5"
    assert lance.dataset(namespace_client=direct, table_id=table_id).count_rows() == 10
    first, second = commit_counts(after_race), commit_counts(adopted)
    assert {k: second[k] - first[k] for k in first} == {"conflict": 0, "retry": 0, "adoption": 1}


def test_vending_cache_hits_misses_and_sts_latency_are_counted(glue: Harness, s3_lake):  # noqa: F811
    """Through the server over Glue with moto's STS: declaring a table vends once from STS (a
    miss, one AssumeRole timed); describing it twice answers from the cache (two hits, no
    AssumeRole)."""
    ns = glue.connect(**vending_properties(s3_lake))
    db = glue.db(glue.unique())
    ns.create_namespace({"id": db})
    table = "$".join([*db, "t"])
    with RestServer(ns) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        before = http.get("/metrics").text
        declared = http.post(f"/v1/table/{table}/declare", json={"vend_credentials": True})
        assert declared.status_code == 200, declared.text
        assert declared.json()["storage_options"]["aws_session_token"]
        missed = http.get("/metrics").text
        for _ in range(2):
            described = http.post(f"/v1/table/{table}/describe", json={})
            assert described.status_code == 200, described.text
            assert described.json()["storage_options"] == declared.json()["storage_options"]
        hit = http.get("/metrics").text

    def moved(name: str, **labels: str) -> tuple[float, float]:
        return (
            sample(missed, name, **labels) - sample(before, name, **labels),
            sample(hit, name, **labels) - sample(missed, name, **labels),
        )

    assert moved("lance_vending_cache_total", result="miss") == (1, 0)
    assert moved("lance_vending_cache_total", result="hit") == (0, 2)
    sts = {"call": "sts_assume_role", "outcome": "ok"}
    assert moved("lance_outside_call_seconds_count", **sts) == (1, 0)
    assert moved("lance_outside_call_seconds_sum", **sts)[0] > 0
    assert moved("lance_outside_call_seconds_count", call="sts_assume_role", outcome="error") == (
        0,
        0,
    )


def test_a_failed_sts_call_is_timed_as_an_error(glue: Harness, s3_lake):  # noqa: F811
    """STS unreachable (a closed port on loopback): the declare that needs credentials fails,
    and its AssumeRole is counted under ``outcome="error"``, not as a success or a cache hit."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there once closed
    properties = vending_properties(
        s3_lake, **{"credential_vendor.aws_sts_endpoint": f"http://127.0.0.1:{port}"}
    )
    ns = glue.connect(**properties)
    db = glue.db(glue.unique())
    ns.create_namespace({"id": db})
    table = "$".join([*db, "t"])
    failed = {"call": "sts_assume_role", "outcome": "error"}
    with RestServer(ns) as server, httpx.Client(base_url=server.url, timeout=120) as http:
        before = http.get("/metrics").text
        declared = http.post(f"/v1/table/{table}/declare", json={"vend_credentials": True})
        assert declared.status_code >= 500, declared.text
        after = http.get("/metrics").text
    name = "lance_outside_call_seconds_count"
    assert sample(after, name, **failed) - sample(before, name, **failed) == 1
    ok = {"call": "sts_assume_role", "outcome": "ok"}
    assert sample(after, name, **ok) == sample(before, name, **ok)
    misses = "lance_vending_cache_total"
    assert sample(after, misses, result="miss") - sample(before, misses, result="miss") == 1
