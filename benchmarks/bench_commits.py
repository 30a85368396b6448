"""Catalog-managed commits: commits/s with 1, 4 and 8 writers and catalog calls per commit.

    python benchmarks/bench_commits.py [--commits 24] [--repeats 3] [--backends ...]

In one run, on a table with ``managed_by=impl`` per backend:

- ``glue``: the Glue emulator (moto's server; ``UpdateTable`` checks ``VersionId``);
- ``hms-2.3``, ``hms-3.1``, ``hms-4``: ``Hive3Namespace`` on a real local Hive Metastore of that
  release (2.3 and 3.1: the table lock; 4: one conditional ``alter_table_req``);

each with 1, 4 and 8 writer threads (each its own namespace object) appending small batches
through pylance. The configurations alternate (every backend and writer count once per repeat
round), so a slow moment of this shared machine hits them all alike. Printed per configuration:
the median commits/s of the repeats, the ratio to the fastest backend at that writer count,
every commit that failed (Lance gives up after 30 s of lost races: "Too many concurrent
writers"; the version history and row count are checked after each run), and the catalog calls
per landed commit, counted at the client (every Thrift message sent; every Glue API call): all
of them (Lance's own reads included) and those made inside ``create_table_version`` (the
commit itself: its read of the table and the compare-and-set, lost races included). The load
average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

os.environ.setdefault("RUST_LOG", "error")

import botocore.client
import lance
import pyarrow as pa
from lance_namespace import connect
from thrift.protocol import TBinaryProtocol

import lance_metastore  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

ROWS = pa.table({"id": pa.array(range(100), pa.int64()), "v": [f"r{i}" for i in range(100)]})
WRITERS = (1, 4, 8)
calls: collections.Counter[str] = collections.Counter()
_calls_lock = threading.Lock()
_in_commit = threading.local()
COMMIT = "(commit)"


def _count(name: str) -> None:
    with _calls_lock:
        calls[name] += 1
        if getattr(_in_commit, "active", False):
            calls[COMMIT] += 1


def install_call_counters() -> None:
    """Count every catalog call at the client: Thrift messages sent, Glue API calls made."""
    write_message_begin = TBinaryProtocol.TBinaryProtocol.writeMessageBegin

    def counting_write(self, name, kind, seqid):  # type: ignore[no-untyped-def]
        _count(name)
        return write_message_begin(self, name, kind, seqid)

    TBinaryProtocol.TBinaryProtocol.writeMessageBegin = counting_write
    make_api_call = botocore.client.BaseClient._make_api_call

    def counting_call(self, operation_name, api_params):  # type: ignore[no-untyped-def]
        _count(operation_name)
        return make_api_call(self, operation_name, api_params)

    botocore.client.BaseClient._make_api_call = counting_call

    from lance_metastore.operations.catalog import CatalogNamespace

    create_table_version = CatalogNamespace.create_table_version

    def marked(self, request):  # type: ignore[no-untyped-def]
        _in_commit.active = True
        try:
            return create_table_version(self, request)
        finally:
            _in_commit.active = False

    CatalogNamespace.create_table_version = marked


def appends(ns, table_id: list[str], count: int, landed: list[int], failed: list[str]) -> None:
    for _ in range(count):
        try:
            lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="append")
            landed.append(1)
        except Exception as error:
            failed.append(f"{type(error).__name__}: {str(error)[:200]}")


def run_once(impl: str, props: dict, db: list[str], name: str, writers: int, total: int):
    """One run: ``writers`` threads share ``total`` appends on a new table; checked after."""
    ns = connect(impl, props)
    table_id = [*db, name]
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    each = max(1, total // writers)
    landed: list[int] = []
    failed: list[str] = []
    namespaces = [connect(impl, props) for _ in range(writers)]
    threads = [
        threading.Thread(target=appends, args=(own, table_id, each, landed, failed))
        for own in namespaces
    ]
    with _calls_lock:
        calls.clear()
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    with _calls_lock:
        counted = dict(calls)
    versions = [v.version for v in ns.list_table_versions({"id": table_id}).versions]
    rows = lance.dataset(namespace_client=ns, table_id=table_id).count_rows()
    exact = versions == list(range(1, len(landed) + 2)) and rows == (len(landed) + 1) * len(ROWS)
    for own in (ns, *namespaces):
        own.close()
    return {
        "rate": len(landed) / seconds,
        "landed": len(landed),
        "failed": failed,
        "exact": exact,
        "all_calls": (sum(counted.values()) - counted.get(COMMIT, 0)) / max(len(landed), 1),
        "commit_calls": counted.get(COMMIT, 0) / max(len(landed), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=24, help="appends per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backends", default="glue,hms-2.3,hms-3.1,hms-4")
    args = parser.parse_args()

    from support.glue_emulator import GlueEmulator

    from lance_metastore.hive.local import LocalMetastore

    install_call_counters()
    print(f"load average at start: {os.getloadavg()}")
    backends: dict[str, tuple[str, dict, list[str]]] = {}
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        root = Path(scratch)
        for backend in args.backends.split(","):
            if backend == "glue":
                glue = stack.enter_context(GlueEmulator())
                props = {
                    "endpoint": glue.endpoint,
                    "region": glue.region,
                    "access_key_id": glue.access_key_id,
                    "secret_access_key": glue.secret_access_key,
                    "root": str(root / "glue"),
                }
                backends[backend] = ("glue", props, ["bench"])
            else:
                version = backend.removeprefix("hms-")
                metastore = stack.enter_context(LocalMetastore(root / backend, version=version))
                props = {"uri": metastore.uri, "root": str(root / backend)}
                backends[backend] = ("hive3", props, ["hive", "bench"])
        for impl, props, db in backends.values():
            connect(impl, props).create_namespace({"id": db, "mode": "exist_ok"})

        results: dict[tuple[str, int], list[dict]] = collections.defaultdict(list)
        for repeat in range(args.repeats):
            for writers in WRITERS:
                for backend, (impl, props, db) in backends.items():
                    managed = {**props, "managed_by": "impl"}
                    name = f"w{writers}_r{repeat}"
                    results[backend, writers].append(
                        run_once(impl, managed, db, name, writers, args.commits)
                    )

        print(
            f"{args.commits} appends per run, {args.repeats} repeats, medians; "
            "calls are per landed commit"
        )
        header = (
            f"{'backend':8} {'writers':>7} {'commits/s':>10} {'vs best':>8} "
            f"{'failed':>7} {'calls':>6} {'in commit':>10}  history"
        )
        print(header)
        failures = 0
        for writers in WRITERS:
            medians = {
                backend: statistics.median(r["rate"] for r in results[backend, writers])
                for backend in backends
            }
            best = max(medians.values())
            for backend in backends:
                runs = results[backend, writers]
                failed = sum(len(r["failed"]) for r in runs)
                failures += failed + sum(not r["exact"] for r in runs)
                print(
                    f"{backend:8} {writers:7} {medians[backend]:10.1f} "
                    f"{medians[backend] / best:8.2f} {failed:7} "
                    f"{statistics.median(r['all_calls'] for r in runs):6.1f} "
                    f"{statistics.median(r['commit_calls'] for r in runs):10.1f}  "
                    f"{'exact' if all(r['exact'] for r in runs) else 'WRONG'}"
                )
                for run in runs:
                    for message in run["failed"][:3]:
                        print(f"    failed: {message}")
    print(f"load average at end: {os.getloadavg()}")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
