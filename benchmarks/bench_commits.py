"""Catalog-managed commits: throughput and cost per commit, against Lance's own storage commit.

    python benchmarks/bench_commits.py [--commits 40] [--verify-writers 8 --verify-appends 20]

In one run, for each backend (the Glue emulator, which checks VersionId; a local Hive
Metastore 2.3 with its lock manager on), on a table with ``managed_by=impl``:

- commits per second with 1 writer and with 4 writers (threads, each with its own namespace
  object, appending small batches through pylance);
- the cost per commit compared with Lance's own storage commit (``lance.write_dataset`` append
  by path) on local disk, printed as a ratio;
- a correctness run: N writers x M appends; the row count must equal the appends that landed,
  the version history must have no gaps, and every failed append must be a code-14 conflict.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("RUST_LOG", "error")

import lance
import pyarrow as pa
from lance_namespace import connect

import lance_metastore  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

ROWS = pa.table({"id": pa.array(range(100), pa.int64()), "v": [f"r{i}" for i in range(100)]})


def appends(ns, table_id: list[str], count: int, landed: list[int], conflicts: list[int]) -> None:
    for _ in range(count):
        try:
            lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="append")
            landed.append(1)
        except Exception as error:  # a lost race surfaces as code 14 (possibly wrapped)
            if "oncurrent" in str(error) or getattr(error, "code", None) == 14:
                conflicts.append(1)
            else:
                raise


def run_writers(impl: str, props: dict, table_id: list[str], writers: int, each: int):
    landed: list[int] = []
    conflicts: list[int] = []
    threads = [
        threading.Thread(
            target=appends, args=(connect(impl, props), table_id, each, landed, conflicts)
        )
        for _ in range(writers)
    ]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, len(landed), len(conflicts)


def storage_baseline(root: Path, commits: int) -> float:
    location = str(root / "baseline.lance")
    lance.write_dataset(ROWS, location)
    start = time.perf_counter()
    for _ in range(commits):
        lance.write_dataset(ROWS, location, mode="append")
    return (time.perf_counter() - start) / commits


def bench_backend(name: str, impl: str, props: dict, args, baseline: float) -> list[str]:
    ns = connect(impl, {**props, "managed_by": "impl"})
    db = ["hive", "bench"] if impl == "hive3" else ["bench"]
    ns.create_namespace({"id": db, "mode": "exist_ok"})
    lines = []
    for writers in (1, 4):
        table_id = [*db, f"w{writers}"]
        lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
        each = max(1, args.commits // writers)
        seconds, landed, conflicts = run_writers(
            impl, {**props, "managed_by": "impl"}, table_id, writers, each
        )
        per_commit = seconds / max(landed, 1)
        lines.append(
            f"{name:6} {writers} writer(s): {landed / seconds:7.1f} commits/s, "
            f"{per_commit * 1000:7.1f} ms/commit, {conflicts:3} conflicts retried-out, "
            f"cost vs storage commit: {per_commit / baseline:5.2f}x"
        )
    table_id = [*db, "verify"]
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    seconds, landed, conflicts = run_writers(
        impl, {**props, "managed_by": "impl"}, table_id, args.verify_writers, args.verify_appends
    )
    versions = [v.version for v in ns.list_table_versions({"id": table_id}).versions]
    rows = lance.dataset(namespace_client=ns, table_id=table_id).count_rows()
    expected = 1 + landed
    ok = versions == list(range(1, expected + 1)) and rows == expected * len(ROWS)
    ok = ok and landed + conflicts == args.verify_writers * args.verify_appends
    lines.append(
        f"{name:6} verify {args.verify_writers}x{args.verify_appends}: {landed} landed, "
        f"{conflicts} code-14, versions 1..{versions[-1] if versions else 0} without gaps, "
        f"{rows} rows -> {'OK' if ok else 'FAILED'} ({seconds:.1f} s)"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--verify-writers", type=int, default=8)
    parser.add_argument("--verify-appends", type=int, default=20)
    parser.add_argument("--backends", default="glue,hive2")
    args = parser.parse_args()

    from support.glue_emulator import GlueEmulator

    from lance_metastore.hms_local import LocalMetastore

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        baseline = storage_baseline(root, args.commits)
        print(f"Lance storage commit on local disk: {baseline * 1000:.1f} ms/commit")
        lines: list[str] = []
        backends = args.backends.split(",")
        if "glue" in backends:
            with GlueEmulator() as glue:
                props = {
                    "endpoint": glue.endpoint,
                    "region": glue.region,
                    "access_key_id": glue.access_key_id,
                    "secret_access_key": glue.secret_access_key,
                    "root": str(root / "glue"),
                }
                lines += bench_backend("glue", "glue", props, args, baseline)
        hive = [b for b in backends if b.startswith("hive")]
        if hive:
            with LocalMetastore(root / "hms") as metastore:
                for impl in hive:
                    props = {"uri": metastore.uri, "root": str(root / impl)}
                    lines += bench_backend(impl, impl, props, args, baseline)
        print("\n".join(lines))
        if any(line.endswith(")") and "FAILED" in line for line in lines):
            sys.exit(1)


if __name__ == "__main__":
    main()
