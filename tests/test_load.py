"""Load: one namespace object shared by 16 threads running a mixed workload, on every backend.

Each round is bounded twice, by wall time and by a cap on every thread's operations, and runs
twice in a row: the second round must not open more connections than the first. A 17th
thread samples the connections all along. Afterwards the end state is checked exactly (what
was registered is listed, what was dropped is gone, no appended row and no managed version is
lost), and the connections are counted by the kernel (tests/support/connections.py): on Hive
what the pool says is open is what is open, never more than its size; on Glue botocore's pool
bounds them; ``close()`` gives every connection back, and the namespace's threads too.

Catalog-managed appends: four threads append now and then to one shared table, and every
thread to a table of its own. A writer that loses the race for a version is told so (code 14)
by the namespace and Lance retries its commit: no error of any kind may reach the threads, and
every append must land as the next version. The shared appends are staggered on purpose:
Lance backs off exponentially between retries and gives up after 30 s ("Too many concurrent
writers"), which four appends started at the same instant on this loaded 2-core machine
sometimes reach; that is Lance's retry policy, not the catalog's.
"""

from __future__ import annotations

import collections
import gc
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from support.connections import CLOSE_WAIT, ESTABLISHED, our_connections_to, port_of
from support.harness import Harness, HiveHarness

from lance_metastore.rules.locations import unqualified

THREADS = 16
ROUNDS = 2
ROUND_SECONDS = 2.5  # wall time of one round; operations in flight then finish
MAX_STEPS = 60  # per thread and round, whichever comes first
JOIN_GRACE = 90.0  # beyond the deadline; a commit may wait 30 s for a Hive table lock
SHARED_WRITERS = 4  # threads that also append to the one shared managed table
HIVE_POOL_SIZE = 3
GLUE_POOL_SIZE = 32  # botocore's max_pool_connections (src/lance_metastore/glue/aws.py)
SLACK = 2  # connections a closing/opening race may show beyond a pool's bound
SETTLE_SECONDS = 10.0  # for closed sockets and finished threads to disappear

DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})
ROWS = DATA.num_rows

TableId = tuple[str, ...]


def code_of(call: Callable[[dict[str, Any]], Any], request: dict[str, Any]) -> ErrorCode:
    with pytest.raises(LanceNamespaceError) as caught:
        call(request)
    return caught.value.code


def paged(call: Callable[[dict[str, Any]], Any], ns_id: list[str], field_name: str, limit: int):
    """Every name of a listing, page by page; each page sorted and after the previous one."""
    names: list[str] = []
    token = None
    for _ in range(10_000):
        page = call({"id": ns_id, "limit": limit, "page_token": token})
        chunk = list(getattr(page, field_name))
        assert len(chunk) <= limit, (ns_id, chunk)
        names += chunk
        token = page.page_token
        if not token:
            break
    assert names == sorted(set(names)), f"listing of {ns_id} not sorted or repeats: {names}"
    return names


@dataclass
class Ledger:
    """What one thread did, and so what the catalog must show afterwards."""

    own: list[TableId] = field(default_factory=list)  # its namespaces, one per round
    live: dict[TableId, int | None] = field(default_factory=dict)  # rows; None: declared only
    locations: dict[TableId, str] = field(default_factory=dict)
    dropped: list[tuple[TableId, str, bool]] = field(default_factory=list)  # data deleted?
    managed: dict[TableId, int] = field(default_factory=dict)  # own managed table -> appends
    shared_appends: int = 0
    scratch: list[TableId] = field(default_factory=list)  # created, then dropped
    ops: collections.Counter[str] = field(default_factory=collections.Counter)
    slowest: dict[str, float] = field(default_factory=dict)  # operation -> longest seconds


class Worker:
    """One of the 16 threads: its own objects, plus the shared namespace and managed table."""

    def __init__(self, load: Load, index: int, round_: int, ledger: Ledger) -> None:
        self.load, self.ns, self.backend = load, load.ns, load.backend
        self.index, self.round, self.ledger = index, round_, ledger
        self.own: TableId = tuple(self.backend.db(f"w{index:02d}_r{round_}"))
        self.step = 0

    def name(self, prefix: str) -> str:
        return f"{prefix}{self.index:02d}_{self.round}_{self.step}"

    def run(self, deadline: float) -> None:
        mix = [
            self.namespaces,
            self.declare,
            self.write,
            self.list_shared,
            self.register,
            self.managed_append,
            self.retire,
            self.declare,
            self.scratch,
            self.list_shared,
            self.register,
            self.write,
            self.retire,
            self.managed_append,
        ]
        if self.index % (THREADS // SHARED_WRITERS) == 0:
            mix[5] = self.shared_append
        self.ns.create_namespace({"id": list(self.own)})
        self.ledger.own.append(self.own)
        self.ledger.ops["create_namespace"] += 1
        while self.step < MAX_STEPS and time.monotonic() < deadline:
            operation = mix[(self.step + self.index) % len(mix)]
            began = time.monotonic()
            operation()
            took = time.monotonic() - began
            name = operation.__name__
            self.ledger.ops[name] += 1
            self.ledger.slowest[name] = max(self.ledger.slowest.get(name, 0.0), took)
            self.step += 1

    # Namespaces ------------------------------------------------------------------------------

    def namespaces(self) -> None:
        ns, own = self.ns, list(self.own)
        ns.namespace_exists({"id": own})
        ns.describe_namespace({"id": own})
        ns.create_namespace({"id": list(self.load.shared), "mode": "exist_ok"})
        names = paged(ns.list_namespaces, list(self.load.parent), "namespaces", limit=4)
        assert self.own[-1] in names and self.load.shared[-1] in names, names

    def scratch(self) -> None:
        scratch = self.backend.db(self.name("s"))
        team = f"team{self.index}"
        self.ns.create_namespace({"id": scratch, "properties": {"owner_team": team}})
        assert self.ns.describe_namespace({"id": scratch}).properties["owner_team"] == team
        self.ns.drop_namespace({"id": scratch})
        self.ledger.scratch.append(tuple(scratch))

    # Tables ----------------------------------------------------------------------------------

    def declare(self) -> None:
        """A declared table in the shared namespace, which the others list meanwhile.

        Every other one gets a URL location: describing a table declared on an object store
        probes it for data on the namespace's background threads, which close() must stop.
        """
        table_id = (*self.load.shared, self.name("d"))
        request: dict[str, Any] = {"id": list(table_id)}
        if self.step % 2:
            request["location"] = (self.backend.root / "urls" / f"{table_id[-1]}.lance").as_uri()
        declared = self.ns.declare_table(request)
        assert declared.location.endswith(f"{table_id[-1]}.lance"), declared.location
        self.ns.table_exists({"id": list(table_id)})
        described = self.ns.describe_table({"id": list(table_id)}).location
        # Hive reads file: URLs back as paths (it qualifies local paths itself): no probe there.
        assert unqualified(described) == unqualified(declared.location)
        self.load.probed |= "://" in described
        self.ledger.live[table_id] = None
        self.ledger.locations[table_id] = described

    def list_shared(self) -> None:
        shared = self.load.shared
        names = paged(self.ns.list_tables, list(shared), "tables", limit=5)
        mine = {t[-1] for t in self.ledger.live if t[:-1] == shared}
        assert mine <= set(names), sorted(mine - set(names))
        assert self.load.shared_managed[-1] in names

    def register(self) -> None:
        """A dataset written by pylance on its own, then registered in the thread's namespace."""
        name = self.name("g")
        location = str(self.backend.root / "registered" / f"{name}.lance")
        lance.write_dataset(DATA, location)
        table_id = (*self.own, name)
        self.ns.register_table({"id": list(table_id), "location": location})
        assert self.ns.describe_table({"id": list(table_id)}).location == location
        self.ledger.live[table_id] = ROWS
        self.ledger.locations[table_id] = location

    def write(self) -> None:
        """An append through the namespace to the thread's own (storage-managed) table."""
        table_id = (*self.own, "events")
        if table_id not in self.ledger.live:
            declared = self.ns.declare_table({"id": list(table_id)})
            self.ledger.live[table_id] = 0
            self.ledger.locations[table_id] = declared.location
        self._append(table_id)
        self.ledger.live[table_id] = (self.ledger.live[table_id] or 0) + ROWS

    def shared_append(self) -> None:
        """A catalog-managed append to the one table the shared writers take turns on."""
        self._append(self.load.shared_managed)
        self.ledger.shared_appends += 1

    def managed_append(self) -> None:
        """A catalog-managed append to the thread's own managed table."""
        table_id = (*self.own, "ledger")
        if table_id not in self.ledger.managed:
            properties = {"managed_by": "impl"}
            declared = self.ns.declare_table({"id": list(table_id), "properties": properties})
            assert declared.managed_versioning is True
            self.ledger.managed[table_id] = 0
        self._append(table_id)
        self.ledger.managed[table_id] += 1

    def _append(self, table_id: TableId) -> None:
        lance.write_dataset(DATA, namespace_client=self.ns, table_id=list(table_id), mode="append")

    def retire(self) -> None:
        """Drop or deregister the oldest table this thread registered or declared."""
        candidates = [t for t in self.ledger.live if t[-1] != "events"]
        if not candidates:
            self.register()
            return
        table_id = candidates[0]
        rows = self.ledger.live.pop(table_id)
        if self.step % 2:
            response = self.ns.drop_table({"id": list(table_id)})
            self.ledger.dropped.append((table_id, response.location, bool(rows)))
        else:
            response = self.ns.deregister_table({"id": list(table_id)})
            self.ledger.dropped.append((table_id, response.location, False))
        assert response.location == self.ledger.locations[table_id]


@dataclass
class Sample:
    """The largest counts a monitoring thread saw while a round ran."""

    kernel: int = 0  # this process's connections to the catalog (kernel's count), less baseline
    pool: int = 0  # what the Hive pool said was open
    samples: int = 0
    background: set[str] = field(default_factory=set)  # the namespace's own threads seen


class Load:
    def __init__(self, backend: Harness, ns: Any) -> None:
        self.backend, self.ns = backend, ns
        self.shared: TableId = tuple(backend.db("shared"))
        self.parent: TableId = self.shared[:-1]
        self.shared_managed: TableId = (*self.shared, "ledger")
        self.ledgers = [Ledger() for _ in range(THREADS)]
        self.errors: list[str] = []
        self.probed = False  # whether a table on an object store (a URL) was described
        self._errors_lock = threading.Lock()

    def round(self, round_: int, monitor: Callable[[], None]) -> tuple[float, int]:
        """Run the 16 threads until the deadline or their caps; return (seconds, operations)."""
        barrier = threading.Barrier(THREADS + 1)
        deadline_box: list[float] = []
        stop = threading.Event()

        def work(index: int) -> None:
            worker = Worker(self, index, round_, self.ledgers[index])
            try:
                barrier.wait(timeout=60)
                worker.run(deadline_box[0])
            except BaseException as error:  # every failure is reported, none stops the others
                with self._errors_lock:
                    self.errors.append(
                        f"thread {index} round {round_} step {worker.step}: {error!r}\n"
                        + "".join(traceback.format_exception(error)[-6:])
                    )

        def watch() -> None:
            while not stop.is_set():
                monitor()
                stop.wait(0.01)

        before = sum(sum(ledger.ops.values()) for ledger in self.ledgers)
        threads = [
            threading.Thread(target=work, args=(i,), name=f"load-{i}") for i in range(THREADS)
        ]
        watcher = threading.Thread(target=watch, name="load-monitor")
        for thread in threads:
            thread.start()
        watcher.start()
        started = time.monotonic()
        deadline_box.append(started + ROUND_SECONDS)
        barrier.wait(timeout=60)
        for thread in threads:
            thread.join(max(0.0, started + ROUND_SECONDS + JOIN_GRACE - time.monotonic()))
        elapsed = time.monotonic() - started
        stop.set()
        watcher.join(10)
        hung = [t.name for t in [*threads, watcher] if t.is_alive()]
        assert not hung, f"threads still running {elapsed:.0f} s after the round began: {hung}"
        after = sum(sum(ledger.ops.values()) for ledger in self.ledgers)
        return elapsed, after - before

    def verify(self) -> None:
        """The catalog holds exactly what the threads left, with every row and version."""
        ns = self.ns
        expected_shared = {self.shared_managed[-1]}
        for ledger in self.ledgers:
            by_namespace: dict[TableId, set[str]] = {own: set() for own in ledger.own}
            for table_id in ledger.live:
                by_namespace.setdefault(table_id[:-1], set()).add(table_id[-1])
            for table_id in ledger.managed:
                by_namespace[table_id[:-1]].add(table_id[-1])
            expected_shared |= by_namespace.pop(self.shared, set())
            for own, names in by_namespace.items():
                assert paged(ns.list_tables, list(own), "tables", limit=7) == sorted(names)

            for table_id, rows in ledger.live.items():
                described = ns.describe_table({"id": list(table_id), "check_declared": True})
                assert described.location == ledger.locations[table_id], table_id
                if rows is None:
                    assert described.is_only_declared is True, table_id
                elif table_id[-1] == "events":  # written through the namespace
                    dataset = lance.dataset(namespace_client=ns, table_id=list(table_id))
                    assert dataset.count_rows() == rows, table_id
                else:
                    assert lance.dataset(described.location).count_rows() == rows, table_id

            for table_id, location, data_deleted in ledger.dropped:
                missing = code_of(ns.table_exists, {"id": list(table_id)})
                assert missing == ErrorCode.TABLE_NOT_FOUND, table_id
                if data_deleted:
                    assert not Path(location).exists(), location
                elif table_id[:-1] != self.shared:  # deregistered data stays
                    assert Path(location, "_versions").is_dir(), location

            for table_id, appends in ledger.managed.items():
                self.verify_managed(table_id, appends)

            for scratch in ledger.scratch:
                missing = code_of(ns.namespace_exists, {"id": list(scratch)})
                assert missing == ErrorCode.NAMESPACE_NOT_FOUND, scratch

        assert paged(ns.list_tables, list(self.shared), "tables", limit=9) == sorted(
            expected_shared
        )
        namespaces = set(paged(ns.list_namespaces, list(self.parent), "namespaces", limit=11))
        owns = {own[-1] for ledger in self.ledgers for own in ledger.own}
        scratches = {s[-1] for ledger in self.ledgers for s in ledger.scratch}
        assert owns | {self.shared[-1]} <= namespaces and not scratches & namespaces
        shared_appends = sum(ledger.shared_appends for ledger in self.ledgers)
        self.verify_managed(self.shared_managed, 1 + shared_appends)

    def verify_managed(self, table_id: TableId, appends: int) -> None:
        """Versions 1..appends, no gap, and every appended row."""
        ns = self.ns
        listed: list[int] = []
        token = None
        while True:
            page = ns.list_table_versions({"id": list(table_id), "limit": 4, "page_token": token})
            listed += [v.version for v in page.versions]
            token = page.page_token
            if not token:
                break
        assert listed == list(range(1, appends + 1)), (table_id, listed)
        assert ns.describe_table({"id": list(table_id)}).properties["version"] == str(appends)
        dataset = lance.dataset(namespace_client=ns, table_id=list(table_id))
        assert dataset.count_rows() == ROWS * appends, table_id


def settle(condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` holds within SETTLE_SECONDS (sockets and threads end async)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_sixteen_threads_share_one_namespace(backend: Harness):
    """16 threads, one namespace object, two bounded rounds: no error, nothing lost, no leak."""
    hive = isinstance(backend, HiveHarness)
    states: tuple[str, ...] = (ESTABLISHED,)
    if hive:
        port = port_of(backend.uri)
        bound = HIVE_POOL_SIZE
        ns = backend.connect(**{"client.pool-size": str(HIVE_POOL_SIZE)})
    else:
        endpoint = backend.properties().get("endpoint")
        if endpoint is None:
            pytest.skip("connections to real AWS Glue cannot be told apart from others")
        port = port_of(endpoint)
        bound = GLUE_POOL_SIZE + SLACK
        # The emulator's HTTP server hangs up after every response (werkzeug's development
        # server has no keep-alive): a socket botocore failed to close would sit in CLOSE_WAIT.
        states = (ESTABLISHED, CLOSE_WAIT)
        ns = backend.connect()

    gc.collect()  # clients of earlier tests, unreferenced, would close their sockets mid-test
    baseline_threads = set(threading.enumerate())
    baseline = our_connections_to(port, states)
    if baseline is None:
        pytest.skip("no procfs: connections cannot be counted")

    def counted() -> int:
        return (our_connections_to(port, states) or 0) - baseline

    sample = Sample()

    def monitor() -> None:
        sample.kernel = max(sample.kernel, counted())
        if hive:
            sample.pool = max(sample.pool, ns.pool.open_connections)
        sample.samples += 1
        sample.background |= {
            t.name for t in threading.enumerate() if t.name.startswith("lance-metastore")
        }

    load = Load(backend, ns)
    ns.create_namespace({"id": list(load.shared)})
    ns.declare_table({"id": list(load.shared_managed), "properties": {"managed_by": "impl"}})
    lance.write_dataset(
        DATA, namespace_client=ns, table_id=list(load.shared_managed), mode="append"
    )

    after_round: list[int] = []
    report: list[str] = []
    for round_ in range(1, ROUNDS + 1):
        elapsed, operations = load.round(round_, monitor)
        assert not load.errors, "\n".join(load.errors[:5])
        now = counted()
        after_round.append(now)
        report.append(
            f"{backend.label} round {round_}: {operations} operations in {elapsed:.1f} s, "
            f"max {sample.kernel} connections so far (pool said {sample.pool}, "
            f"{sample.samples} samples), {now} after"
        )
        assert sample.samples, "the monitoring thread took no sample"
        assert sample.kernel <= bound, report
        assert now <= bound, report
        if hive:
            assert sample.pool <= HIVE_POOL_SIZE, report
            assert now == ns.pool.open_connections, report  # the kernel agrees with the pool
    assert after_round[1] <= after_round[0] + SLACK, report  # no growth from round to round

    began = time.monotonic()
    load.verify()
    report.append(f"{backend.label} end state verified in {time.monotonic() - began:.1f} s")
    ops = collections.Counter()
    for ledger in load.ledgers:
        ops.update(ledger.ops)
    slowest: dict[str, float] = {}
    for ledger in load.ledgers:
        for name, took in ledger.slowest.items():
            slowest[name] = round(max(slowest.get(name, 0.0), took), 2)
    threads = sorted(sample.background)
    print("\n".join(report), dict(ops), slowest, f"background threads: {threads}", sep="\n")

    ns.close()
    if hive:
        assert ns.pool.open_connections == 0
    assert settle(lambda: counted() == 0), f"{counted()} connections left open after close()"
    assert sample.background or not load.probed, "no background probe ran"

    def leftover() -> set[threading.Thread]:
        # Lance calls the namespace from its own (Rust) threads; Python lists those it sees as
        # dummy threads, forever: they are Lance's, not threads this library started.
        return {
            t
            for t in set(threading.enumerate()) - baseline_threads
            if not isinstance(t, threading._DummyThread)
        }

    assert settle(lambda: not leftover()), f"threads left after close(): {leftover()}"
