"""Faults survived: metastores dying in the middle of a run, and bounded, jittered retries.

- A Hive Metastore dies while four threads share one namespace object: first the server the
  client prefers (the namespace fails over to the second ``uri`` without a single failed
  call), then the last one (SIGKILL;
  calls answer ServiceUnavailable, quickly) until it is started again on the same data. Nothing
  that was registered is lost, nothing half-written becomes visible, the same object recovers.
- Glue answers throttling, 5xx and slow reads while four threads share one namespace: every
  single fault is retried away; an outage answers ServiceUnavailable once the bounded retry
  budget is spent; afterwards the same object carries on, and nothing registered is lost.
- Calls whose connection drops are retried a bounded number of times, with jittered backoff,
  then answer ServiceUnavailable.

Each Glue error code under an injected fault is proven in test_glue.py, a Spark write failing
half-way in test_spark.py; the README's reliability table lists them all.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from support.connections import our_connections_to
from support.glue_emulator import glue_endpoint_from_env
from support.manifests import staging_path
from support.tcp_front import TcpFront
from support.waiting import wait_until

from lance_metastore import Hive2Namespace
from lance_metastore.hive.local import thrift_client
from lance_metastore.hive.namespace import RECONNECT_BACKOFF
from lance_metastore.rules.retries import Backoff

DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
WORKERS = 4
# Between a worker's calls: four workers still make ~20 calls a second (ample to meet every
# fault, and the run lasts as long: its waits are retry budgets), but no longer take a whole
# core from the tests running beside this one (the Glue run: 31 s CPU before, 6 s after).
PACE_SECONDS = 0.2


def unique(prefix: str = "db") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Outcome:
    finished: float  # time.monotonic()
    operation: str
    table: str
    error: BaseException | None


# ---------------------------------------------------------------------------------------------
# The TCP front (test support) itself
# ---------------------------------------------------------------------------------------------


def test_tcp_front_forwards_then_dies_like_a_server(hive_metastore_uri):
    port = int(hive_metastore_uri.rsplit(":", 1)[1])
    with TcpFront("127.0.0.1", port) as front:
        with thrift_client("127.0.0.1", front.port) as client:
            assert "default" in client.get_all_databases()
            assert front.open_connections() == 1
            front.kill()
            with pytest.raises((OSError, EOFError, Exception)):
                client.get_all_databases()
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", front.port), 2):
            pass
        front.start()  # the same port again
        with thrift_client("127.0.0.1", front.port) as client:
            assert "default" in client.get_all_databases()


# ---------------------------------------------------------------------------------------------
# A metastore dies in the middle of a run
# ---------------------------------------------------------------------------------------------


def run_workers(
    ns: Any, db: list[str], datasets: Path, stop: threading.Event
) -> tuple[list[Outcome], list[threading.Thread]]:
    """Threads that register tables (declared, or written with pylance first) and read them."""
    outcomes: list[Outcome] = []
    lock = threading.Lock()

    def steps(table: str, index: int) -> list[tuple[str, Callable[[], object]]]:
        table_id = {"id": [*db, table]}
        if index % 3 == 2:
            location = str(datasets / f"{table}.lance")
            lance.write_dataset(DATA, location)
            register = ("register", lambda: ns.register_table({**table_id, "location": location}))
        else:
            register = ("declare", lambda: ns.declare_table(table_id))
        return [
            register,
            ("describe", lambda: ns.describe_table(table_id)),
            ("exists", lambda: ns.table_exists(table_id)),
            ("list", lambda: ns.list_tables({"id": db, "limit": 5})),
        ]

    def work(worker: int) -> None:
        index = 0
        while not stop.is_set():
            table = f"t_{worker}_{index}"
            for operation, call in steps(table, index):
                error: BaseException | None = None
                try:
                    call()
                except BaseException as caught:  # recorded, judged by the test
                    error = caught
                with lock:
                    outcomes.append(Outcome(time.monotonic(), operation, table, error))
                stop.wait(PACE_SECONDS)
                if error is not None:
                    break
            index += 1

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(WORKERS)]
    for thread in threads:
        thread.start()
    return outcomes, threads


def assert_nothing_lost(ns: Any, db: list[str], outcomes: list[Outcome]) -> None:
    """Every registration that succeeded is listed and readable; one that failed (its reply may
    have been lost with the server) is absent or complete; nothing else appeared."""
    registering = [o for o in outcomes if o.operation in ("declare", "register")]
    landed = {o.table for o in registering if o.error is None}
    listed = set(ns.list_tables({"id": db}).tables)
    assert landed <= listed
    assert listed <= {o.table for o in registering}
    for table in listed:
        described = ns.describe_table({"id": [*db, table]})
        assert described.location.endswith(f"{table}.lance")
        if int(table.rsplit("_", 1)[1]) % 3 == 2:
            assert lance.dataset(described.location).count_rows() == len(DATA)


def window(outcomes: list[Outcome], start: float, end: float) -> list[Outcome]:
    return [o for o in list(outcomes) if start <= o.finished < end]


def calls_since(outcomes: list[Outcome], start: float, count: int) -> bool:
    """At least ``count`` calls finished since ``start`` (the workers got on with it)."""
    return len(window(outcomes, start, float("inf"))) >= count


def every_worker_since(outcomes: list[Outcome], start: float) -> bool:
    """Each worker finished a call since ``start``: a call in flight then is over."""
    workers = {o.table.split("_")[1] for o in window(outcomes, start, float("inf"))}
    return len(workers) == WORKERS


def failed_since(outcomes: list[Outcome], start: float) -> bool:
    return any(o.error for o in window(outcomes, start, float("inf")))


def assert_only_namespace_errors(outcomes: list[Outcome], codes: set[ErrorCode]) -> None:
    errors = [o for o in outcomes if o.error is not None]
    strays = [o for o in errors if not isinstance(o.error, LanceNamespaceError)]
    assert not strays, strays[:3]
    assert {o.error.code for o in errors} <= codes, errors[:3]


def test_metastore_dies_mid_run_fails_over_then_recovers(spare_metastore, tmp_path):
    if not spare_metastore.is_running():
        spare_metastore.start()
    front = TcpFront("127.0.0.1", spare_metastore.port)
    front.start()
    settings = {"client.pool-size": str(WORKERS), "client.socket-timeout-sec": "20"}
    ns = Hive2Namespace(uri=f"{front.uri},{spare_metastore.uri}", root=str(tmp_path), **settings)
    db = unique()
    ns.create_namespace({"id": [db]})
    stop = threading.Event()
    outcomes, threads = run_workers(ns, [db], tmp_path / "datasets", stop)
    try:
        wait_until(lambda: calls_since(outcomes, 0, 20), 60, "20 calls before the first fault")
        front_killed = time.monotonic()
        front.kill()  # the preferred metastore dies: fail over to the second URI
        wait_until(
            lambda: calls_since(outcomes, front_killed, 20), 60, "20 calls on the second URI"
        )
        metastore_killed = time.monotonic()
        spare_metastore.kill()  # SIGKILL: no metastore left
        wait_until(
            lambda: failed_since(outcomes, metastore_killed + 0.5), 30, "a call failing fast"
        )
        spare_metastore.start()  # the same data, the same port
        restarted = time.monotonic()
        wait_until(
            lambda: calls_since(outcomes, restarted + 0.5, 20), 60, "20 calls after the restart"
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a worker hung"

    assert_only_namespace_errors(outcomes, {ErrorCode.SERVICE_UNAVAILABLE})

    # Before the first fault: no error.
    assert not [o for o in window(outcomes, 0, front_killed) if o.error]
    # Fail-over: every call carries on through the second URI. Reads are retried; a
    # registration in flight when its server died is read back there and finished.
    fail_over = window(outcomes, front_killed, metastore_killed)
    assert not [o for o in fail_over if o.error]
    assert len(fail_over) > 10
    # No metastore at all: ServiceUnavailable, and quickly (no call waits its socket timeout).
    outage = window(outcomes, metastore_killed + 0.5, restarted)
    assert outage and all(o.error for o in outage if o.finished < restarted - 0.5)
    # Back: the same object works again, with no error.
    after = window(outcomes, restarted + 0.5, float("inf"))
    assert [o for o in after if o.error] == []
    assert len(after) > 10

    assert_nothing_lost(ns, [db], outcomes)

    # One pool, no leak: nothing is left on the dead front, at most the pool size elsewhere.
    assert 1 <= ns.pool.open_connections <= WORKERS
    assert our_connections_to(front.port) in (0, None)
    ns.close()
    assert ns.pool.open_connections == 0


# ---------------------------------------------------------------------------------------------
# Glue answers throttling, 5xx and slowly in the middle of a run, then not at all
# ---------------------------------------------------------------------------------------------

TRANSIENT_FAULTS = [
    ("ThrottlingException", 400),
    ("InternalServiceException", 500),
    ("ServiceUnavailableException", 503),
]
READS = ["GetTable", "GetTables", "GetDatabase"]


@pytest.mark.skipif(glue_endpoint_from_env() is not None, reason="injects faults in the emulator")
def test_glue_faults_mid_run_are_retried_then_reported(glue, tmp_path):
    # A bounded budget: 3 retries (botocore's standard mode: full-jitter exponential backoff,
    # at most 1 + 2 + 4 s) and a 2 s read timeout per attempt.
    ns = glue.connect(max_retries="3", read_timeout_sec="2")
    budget = 7 + 4 * 2 + 2
    db = ["sales"]
    ns.create_namespace({"id": db})
    stop = threading.Event()
    outcomes, threads = run_workers(ns, db, tmp_path / "datasets", stop)
    emulator = glue.emulator
    try:
        wait_until(lambda: calls_since(outcomes, 0, 10), 60, "10 calls before the faults")
        flaky = time.monotonic()
        for round_ in range(12):  # one fault at a time: every one of them is retried away
            error_code, status = TRANSIENT_FAULTS[round_ % 3]
            emulator.inject_fault("*", error_code, status, times=1)
            if round_ % 4 == 3:  # a read held past the read timeout: retried too
                emulator.inject_delay(READS[round_ % 3], 2.5, times=1)
            wait_until(lambda: emulator.pending_faults() == 0, 30, f"a call meeting fault {round_}")
            met = time.monotonic()  # the next fault only once the call that met this one is over
            wait_until(lambda m=met: every_worker_since(outcomes, m), 60, "every worker past it")
        wait_until(lambda: calls_since(outcomes, flaky, 11), 60, "11 calls during the faults")
        outage = time.monotonic()
        emulator.inject_fault("*", "ServiceUnavailableException", 503, times=10**6)
        wait_until(lambda: failed_since(outcomes, outage), budget + 10, "a call failing")
        emulator.clear_faults()
        back = time.monotonic()
        # calls that began in the outage may fail until their retry budget is spent
        wait_until(
            lambda: calls_since(outcomes, back + budget, 10),
            2 * budget + 30,
            "10 calls after the outage and the retry budget",
        )
    finally:
        stop.set()
        emulator.clear_faults()
        for thread in threads:
            thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a worker hung"

    assert_only_namespace_errors(outcomes, {ErrorCode.SERVICE_UNAVAILABLE})
    assert not [o for o in window(outcomes, 0, outage) if o.error], "a transient fault escaped"
    assert len(window(outcomes, flaky, outage)) > 10
    failed = [o for o in window(outcomes, outage, back + budget) if o.error]
    assert failed, "the outage was not noticed"
    after = window(outcomes, back + budget, float("inf"))
    assert after and not [o for o in after if o.error]
    assert_nothing_lost(ns, db, outcomes)
    ns.close()


@pytest.mark.skipif(glue_endpoint_from_env() is not None, reason="injects faults in the emulator")
def test_glue_changes_whose_reply_was_lost_are_not_reported_as_failures(glue, tmp_path):
    """The server applies a change, then answers 500 (or the reply is lost): botocore retries,
    and the retry meets the change itself. That is a success, not "already exists" or a
    conflict; for a commit, a conflict would make Lance write the same rows again."""
    emulator = glue.emulator
    raw = emulator.client("glue")
    ns = glue.connect(max_retries="2", managed_by="impl")

    emulator.inject_fault("CreateDatabase", "InternalServiceException", 500, after_apply=True)
    ns.create_namespace({"id": ["sales"], "properties": {"team": "a"}})
    assert raw.get_database(Name="sales")["Database"]["Parameters"]["team"] == "a"
    with pytest.raises(LanceNamespaceError) as caught:  # a real duplicate is still refused
        ns.create_namespace({"id": ["sales"]})
    assert caught.value.code == ErrorCode.NAMESPACE_ALREADY_EXISTS

    emulator.inject_fault("CreateTable", "InternalServiceException", 500, after_apply=True)
    ns.declare_table({"id": ["sales", "orders"]})
    assert ns.list_tables({"id": ["sales"]}).tables == ["orders"]
    with pytest.raises(LanceNamespaceError) as caught:
        ns.declare_table({"id": ["sales", "orders"]})
    assert caught.value.code == ErrorCode.TABLE_ALREADY_EXISTS

    table_id = ["sales", "events"]
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")
    emulator.inject_fault("UpdateTable", "InternalServiceException", 500, after_apply=True)
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="append")
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 2 * len(DATA)
    versions = ns.list_table_versions({"id": table_id}).versions
    assert [v.version for v in versions] == [1, 2]

    # The same through the API: the commit took effect, so it answers success, not 14.
    location = ns.describe_table({"id": table_id}).location
    manifest = staging_path(location, 3)
    emulator.inject_fault("UpdateTable", "InternalServiceException", 500, after_apply=True)
    ns.create_table_version({"id": table_id, "version": 3, "manifest_path": manifest})
    assert ns.describe_table({"id": table_id}).properties["version"] == "3"
    with pytest.raises(LanceNamespaceError) as caught:  # a real conflict is still one
        ns.create_table_version({"id": table_id, "version": 3, "manifest_path": manifest})
    assert caught.value.code == ErrorCode.CONCURRENT_MODIFICATION
    emulator.clear_faults()


# ---------------------------------------------------------------------------------------------
# Retries: bounded, with jittered backoff, then the right code
# ---------------------------------------------------------------------------------------------


class DroppingServer:
    """Accepts every connection and resets it at once; records when each one arrived."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.arrivals: list[float] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self.arrivals.append(time.monotonic())
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            connection.close()

    def close(self) -> None:
        self._listener.close()


def test_dropped_connections_are_retried_with_backoff_then_reported():
    server = DroppingServer()
    try:
        ns = Hive2Namespace(uri=f"thrift://127.0.0.1:{server.port}", **{"client.retries": "3"})
        started = time.monotonic()
        with pytest.raises(LanceNamespaceError) as caught:
            ns.describe_namespace({"id": ["sales"]})
        elapsed = time.monotonic() - started
    finally:
        server.close()
    assert caught.value.code == ErrorCode.SERVICE_UNAVAILABLE
    assert "'sales'" in str(caught.value)
    # 1 attempt + 3 retries, each waiting between half and all of its exponential step.
    assert len(server.arrivals) == 4
    backoff = RECONNECT_BACKOFF
    gaps = [b - a for a, b in zip(server.arrivals, server.arrivals[1:], strict=False)]
    for attempt, gap in enumerate(gaps):
        assert backoff.step(attempt) / 2 - 0.01 <= gap <= backoff.step(attempt) + 0.5, gaps
    assert elapsed <= backoff.total_cap(3) + 1.0
    assert ns.pool.open_connections == 0


def test_backoff_is_exponential_capped_and_jittered():
    backoff = Backoff(base=0.1, cap=2.0, rng=random.Random(7))
    assert [backoff.step(n) for n in range(7)] == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    assert backoff.step(10_000) == 2.0  # no overflow for long waits
    delays = [backoff.delay(3) for _ in range(200)]
    assert all(0.4 <= delay <= 0.8 for delay in delays)
    assert len({round(delay, 6) for delay in delays}) > 150  # spread, not one value
    assert min(delays) < 0.45 and max(delays) > 0.75
    assert backoff.total_cap(3) == pytest.approx(0.7)
