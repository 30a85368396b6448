"""Catalog-managed commits: commits/s per backend, sequential and concurrent, with a profile.

    python benchmarks/bench_commits.py [--commits 40] [--repeats 3] [--writers 1,2,4]
        [--warmup 40] [--backends glue,hms-2.3,hms-3.1,hms-4] [--profile hms-2.3]

Each commit is what pylance does for an append to a table declared ``managed_by=impl``:
``lance.write_dataset(..., namespace_client=ns, mode="append")``, which calls the namespace's
``describe_table``, ``list_table_versions`` (the latest version) and ``create_table_version``
(the commit routine) around writing the data and the staging manifest. Backends:

- ``glue``: the Glue emulator (moto's server, in a child process; ``UpdateTable`` checks
  ``VersionId``);
- ``hms-2.3``, ``hms-3.1``, ``hms-4``: ``Hive3Namespace`` on a real local Hive Metastore of that
  release (2.3 and 3.1: the table lock; 4: one conditional ``alter_table_req``).

Every writer is a long-lived namespace object (one per writer thread, kept across runs, as a
service's or a job's client is). Before any timing, every backend's writers make ``--warmup``
appends: the metastores' JVMs compile their hot paths during the first hundred or so calls,
and a run timed before that measures the JIT, not the commit. Then each run is ``--commits``
appends to a new table shared by 1, 2 or 4 writer threads; the runs alternate (every backend
and writer count once per repeat round), so a slow moment of this shared machine hits all of
them alike. Printed per configuration: the median commits/s of the repeats (and the slowest
and fastest), every commit that failed (the history and row count are checked after each
run), the catalog calls per landed commit counted at the client (all of them, and those made
inside ``create_table_version``: the commit itself, lost races included), and the CPU per
commit of this process (Lance, the namespace) and of the catalog server (the JVM, or the
emulator's process). CPU per commit is the figure that holds on a loaded machine; commits/s
is wall time. ``cpu-bound/s`` is 1000 / (client + server ms): a sequential writer's commits
wait for each other's calls, so on an idle machine with a core each for client and server
this is about the rate it reaches (contention inflates CPU time: on a loaded machine it
understates it). The load average is printed with every round.

``--profile BACKEND``: after the table, one writer makes ``--commits`` sequential appends on
that backend with cProfile running inside the namespace calls Lance makes (they run in
Lance's threads), and prints where a commit's time goes: each namespace operation, each
catalog call (count and median latency), the rest (Lance's own writes), then the profile.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import io
import os
import pstats
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("RUST_LOG", "error")

import botocore.client
import lance
import pyarrow as pa
from _common import ServerProcess, add_tests_to_path
from lance_namespace import connect
from thrift.protocol import TBinaryProtocol

import lance_metastore  # noqa: F401
from lance_metastore.hive.local import LocalMetastore
from lance_metastore.hive.namespace import _HiveNamespace
from lance_metastore.operations.catalog import CatalogNamespace

ROWS = pa.table({"id": pa.array(range(100), pa.int64()), "v": [f"r{i}" for i in range(100)]})
NAMESPACE_CALLS = ("describe_table", "list_table_versions", "create_table_version")
EMULATOR = "support.glue_emulator:GlueEmulator"
EMULATOR_ATTRIBUTES = ["endpoint", "region", "access_key_id", "secret_access_key"]


# --------------------------------------------------------------------------------------------
# Counting catalog calls at the client
# --------------------------------------------------------------------------------------------


class CallLog:
    """Every catalog call (a Thrift message sent, a Glue API call made), whether it was made
    inside the commit, and the latency of those that wait for their reply (the Hive
    namespace's ``_call``; a lock's release is sent without waiting)."""

    COMMIT = "(commit)"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: collections.Counter[str] = collections.Counter()
        self.seconds: dict[str, list[float]] = collections.defaultdict(list)
        self.local = threading.local()

    def clear(self) -> None:
        with self.lock:
            self.counts.clear()
            self.seconds.clear()

    def snapshot(self) -> collections.Counter[str]:
        with self.lock:
            return collections.Counter(self.counts)

    def count(self, name: str) -> None:
        with self.lock:
            self.counts[name] += 1
            if getattr(self.local, "in_commit", False):
                self.counts[self.COMMIT] += 1

    def timed(self, name: str, call: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            return call()
        finally:
            seconds = time.perf_counter() - start
            with self.lock:
                self.seconds[name].append(seconds)

    def install(self) -> None:
        """Wrap the places every catalog call goes through, and ``create_table_version``."""
        log = self
        write_message_begin = TBinaryProtocol.TBinaryProtocol.writeMessageBegin

        def counted_message(self, name, kind, seqid):  # type: ignore[no-untyped-def]
            log.count(name)
            return write_message_begin(self, name, kind, seqid)

        TBinaryProtocol.TBinaryProtocol.writeMessageBegin = counted_message  # type: ignore[method-assign]
        hive_call = _HiveNamespace._call

        def timed_call(self, method, *args, **kwargs):  # type: ignore[no-untyped-def]
            return log.timed(method, lambda: hive_call(self, method, *args, **kwargs))

        _HiveNamespace._call = timed_call  # type: ignore[method-assign]
        make_api_call = botocore.client.BaseClient._make_api_call

        def counted_api_call(self, operation_name, api_params):  # type: ignore[no-untyped-def]
            log.count(operation_name)
            return log.timed(
                operation_name, lambda: make_api_call(self, operation_name, api_params)
            )

        botocore.client.BaseClient._make_api_call = counted_api_call  # type: ignore[method-assign]
        create_table_version = CatalogNamespace.create_table_version

        def marked(self, request=None):  # type: ignore[no-untyped-def]
            log.local.in_commit = True
            try:
                return create_table_version(self, request)
            finally:
                log.local.in_commit = False

        CatalogNamespace.create_table_version = marked  # type: ignore[method-assign]


CALLS = CallLog()


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------


@dataclass
class Backend:
    name: str
    impl: str
    props: dict[str, str]
    db: list[str]
    server_pid: int
    writers: list[Any] = field(default_factory=list)


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def start_backends(names: list[str], root: Path, stack: ExitStack) -> dict[str, Backend]:
    backends: dict[str, Backend] = {}
    for name in names:
        if name == "glue":
            glue = stack.enter_context(ServerProcess(EMULATOR, EMULATOR_ATTRIBUTES))
            props = {
                "endpoint": glue.info["endpoint"],
                "region": glue.info["region"],
                "access_key_id": glue.info["access_key_id"],
                "secret_access_key": glue.info["secret_access_key"],
                "root": str(root / "glue"),
            }
            assert glue._process is not None
            backends[name] = Backend(name, "glue", props, ["bench"], glue._process.pid)
        else:
            version = name.removeprefix("hms-")
            metastore = stack.enter_context(LocalMetastore(root / name, version=version))
            assert metastore.pid is not None
            props = {"uri": metastore.uri, "root": str(root / name)}
            backends[name] = Backend(name, "hive3", props, ["hive", "bench"], metastore.pid)
    for backend in backends.values():
        connect(backend.impl, backend.props).create_namespace({"id": backend.db})
    return backends


def managed(backend: Backend) -> Any:
    return connect(backend.impl, {**backend.props, "managed_by": "impl"})


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------


def appends(ns: Any, table_id: list[str], count: int, landed: list[int], failed: list[str]) -> None:
    for _ in range(count):
        try:
            lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="append")
            landed.append(1)
        except Exception as error:
            failed.append(f"{type(error).__name__}: {str(error)[:200]}")


def new_table(backend: Backend, name: str) -> list[str]:
    table_id = [*backend.db, name]
    lance.write_dataset(ROWS, namespace_client=backend.writers[0], table_id=table_id, mode="create")
    return table_id


def warm_up(backend: Backend, count: int) -> None:
    """Every writer appends (untimed) until the backend has served ``count`` appends."""
    table_id = new_table(backend, "warmup")
    each = max(1, count // len(backend.writers))
    failed: list[str] = []
    for ns in backend.writers:
        appends(ns, table_id, each, [], failed)
    if failed:
        raise RuntimeError(f"{backend.name}: warm-up failed: {failed[0]}")


def run_once(backend: Backend, name: str, writers: int, total: int) -> dict[str, Any]:
    """One run: ``writers`` threads share ``total`` appends on a new table; checked after."""
    table_id = new_table(backend, name)
    each = max(1, total // writers)
    landed: list[int] = []
    failed: list[str] = []
    threads = [
        threading.Thread(target=appends, args=(ns, table_id, each, landed, failed))
        for ns in backend.writers[:writers]
    ]
    CALLS.clear()
    server_before, client_before = process_cpu(backend.server_pid), own_cpu()
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    server_cpu = process_cpu(backend.server_pid) - server_before
    client_cpu = own_cpu() - client_before
    counted = CALLS.snapshot()
    ns = backend.writers[0]
    versions = [v.version for v in ns.list_table_versions({"id": table_id}).versions]
    rows = lance.dataset(namespace_client=ns, table_id=table_id).count_rows()
    exact = versions == list(range(1, len(landed) + 2)) and rows == (len(landed) + 1) * len(ROWS)
    per = max(len(landed), 1)
    in_commit = counted.pop(CallLog.COMMIT, 0)
    return {
        "rate": len(landed) / seconds,
        "landed": len(landed),
        "failed": failed,
        "exact": exact,
        "all_calls": sum(counted.values()) / per,
        "commit_calls": in_commit / per,
        "by_call": {call: count / per for call, count in counted.items()},
        "client_ms": 1000 * client_cpu / per,
        "server_ms": 1000 * server_cpu / per,
    }


def load() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


# --------------------------------------------------------------------------------------------
# Profile
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def profiled_namespace_calls(profile: cProfile.Profile) -> Iterator[dict[str, list[float]]]:
    """Profile (and time) the namespace calls Lance makes, in whichever thread it makes them
    (one at a time: the writer is sequential)."""
    spent: dict[str, list[float]] = collections.defaultdict(list)
    originals = {name: getattr(CatalogNamespace, name) for name in NAMESPACE_CALLS}

    def wrap(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(self, request=None):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            profile.enable()
            try:
                return original(self, request)
            finally:
                profile.disable()
                spent[name].append(time.perf_counter() - start)

        return call

    for name, original in originals.items():
        setattr(CatalogNamespace, name, wrap(name, original))
    try:
        yield spent
    finally:
        for name, original in originals.items():
            setattr(CatalogNamespace, name, original)


def profile_commits(backend: Backend, count: int) -> None:
    table_id = new_table(backend, "profiled")
    ns = backend.writers[0]
    profile = cProfile.Profile()
    CALLS.clear()
    with profiled_namespace_calls(profile) as spent:
        start = time.perf_counter()
        appends(ns, table_id, count, [], [])
        seconds = time.perf_counter() - start
    per_commit = 1000 * seconds / count
    print(f"\nprofile: {backend.name}, {count} sequential appends, load {load()}")
    print(f"  {per_commit:6.1f} ms per append ({count / seconds:.1f}/s), of which:")
    in_namespace = 0.0
    for name in NAMESPACE_CALLS:
        total = 1000 * sum(spent[name]) / count
        in_namespace += total
        print(f"  {total:6.1f} ms  {name} ({len(spent[name]) / count:.1f} per append)")
    print(f"  {per_commit - in_namespace:6.1f} ms  Lance outside the namespace (data, manifest)")
    print("  catalog calls per append, median latency (-: sent without waiting for it):")
    for call, number in sorted(CALLS.snapshot().items()):
        if call == CallLog.COMMIT:
            continue
        times = CALLS.seconds.get(call)
        latency = f"{1000 * statistics.median(times):6.2f} ms" if times else "     -"
        print(f"    {call:40} {number / count:4.1f} x {latency}")
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text)
    stats.sort_stats("cumulative").print_stats(30)
    print("\n".join("  " + line for line in text.getvalue().strip().splitlines()[3:]))


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=40, help="appends per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--writers", default="1,2,4", help="writer threads per run, a list")
    parser.add_argument("--warmup", type=int, default=40, help="untimed appends per backend")
    parser.add_argument("--backends", default="glue,hms-2.3,hms-3.1,hms-4")
    parser.add_argument("--profile", default="", help="a backend to profile (none by default)")
    args = parser.parse_args()
    writer_counts = [int(w) for w in args.writers.split(",")]
    names = args.backends.split(",")
    if args.profile and args.profile not in names:
        parser.error(f"--profile {args.profile}: not among --backends")

    add_tests_to_path()
    CALLS.install()
    print(f"load average (1/5/15 min) at start: {load()}")
    results: dict[tuple[str, int], list[dict[str, Any]]] = collections.defaultdict(list)
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        backends = start_backends(names, Path(scratch), stack)
        for backend in backends.values():
            backend.writers = [managed(backend) for _ in range(max(writer_counts))]
            stack.callback(lambda b=backend: [ns.close() for ns in b.writers])
        for backend in backends.values():
            warm_up(backend, args.warmup)
        print(f"warmed up ({args.warmup} appends per backend); load {load()}")
        for repeat in range(args.repeats):
            for writers in writer_counts:
                for backend in backends.values():
                    results[backend.name, writers].append(
                        run_once(backend, f"w{writers}_r{repeat}", writers, args.commits)
                    )
            print(f"round {repeat + 1}/{args.repeats} done; load {load()}")

        print(
            f"\n{args.commits} appends per run, {args.repeats} repeats, medians (commits/s: "
            "slowest-fastest run too); calls and CPU per landed commit"
        )
        print(
            f"{'backend':8} {'writers':>7} {'commits/s':>10} {'range':>11} {'failed':>6} "
            f"{'calls':>6} {'in commit':>9} {'client ms':>9} {'server ms':>9} "
            f"{'cpu-bound/s':>11}  history"
        )
        failures = 0
        for writers in writer_counts:
            for backend in backends:
                runs = results[backend, writers]
                rates = [r["rate"] for r in runs]
                failed = sum(len(r["failed"]) for r in runs)
                failures += failed + sum(not r["exact"] for r in runs)
                client_ms = statistics.median(r["client_ms"] for r in runs)
                server_ms = statistics.median(r["server_ms"] for r in runs)
                print(
                    f"{backend:8} {writers:7} {statistics.median(rates):10.1f} "
                    f"{f'{min(rates):.1f}-{max(rates):.1f}':>11} {failed:6} "
                    f"{statistics.median(r['all_calls'] for r in runs):6.1f} "
                    f"{statistics.median(r['commit_calls'] for r in runs):9.1f} "
                    f"{client_ms:9.1f} {server_ms:9.1f} {1000 / (client_ms + server_ms):11.1f}  "
                    f"{'exact' if all(r['exact'] for r in runs) else 'WRONG'}"
                )
                for run in runs:
                    for message in run["failed"][:3]:
                        print(f"    failed: {message}")
        print(f"\ncatalog calls per commit with {writer_counts[0]} writer(s), median of the runs:")
        for backend in backends:
            runs = results[backend, writer_counts[0]]
            calls = sorted({call for r in runs for call in r["by_call"]})
            medians = {c: statistics.median(r["by_call"].get(c, 0.0) for r in runs) for c in calls}
            print(f"  {backend:8} " + ", ".join(f"{c} {n:.1f}" for c, n in medians.items()))
        if args.profile:
            profile_commits(backends[args.profile], args.commits)
    print(f"\nload average (1/5/15 min) at end: {load()}")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
