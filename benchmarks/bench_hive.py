"""Hive benchmark: our Hive2Namespace/Hive3Namespace against lance-namespace-impls' ones.

Run from the repository root, in the project's venv::

    python benchmarks/bench_hive.py [--tables 1000] [--threads 8] [--json out.json]

The peer, ``lance_namespace_impls.hive2.Hive2Namespace`` and ``.hive3.Hive3Namespace``, needs
the package ``hive-metastore-client``, which pins thrift 0.13 (we use 0.25 through
pymetastore). It works with thrift 0.25 when installed without its dependencies, for
benchmarking only::

    pip install --no-deps hive-metastore-client

One run starts ONE local Hive Metastore 2.3 (``lance_metastore.hive.local.LocalMetastore``, the
jars of the pyspark wheel, Derby, in a temporary directory; a separate JVM, so it does not share
our GIL) and points all four namespaces at it. Hive3 runs in the default catalog ``hive`` (HMS
2.3 has no other). Each namespace works in a database of its own, created with its own
``create_namespace``; both sides' tables are declared in the same way (no location given).

Measured, per Hive level, ours and peer interleaved call by call with the order rotated each
call (``_common.alternate``), every call timed alone with ``time.perf_counter``, requests built
before timing:

- declare_table: ``--tables`` calls;
- describe_table: every table once (mean / median / p95);
- list_tables of the whole database (``--tables`` tables): ``--lists`` calls each; ours also
  paged with ``limit=100``, following ``page_token`` to the end (the peer ignores paging);
- ``--threads`` threads sharing ONE namespace object, ``--thread-describes`` describes each:
  errors by type, and wall time.

Connections: ours keeps a pool (``client.pool-size``, default 3) per namespace object; the peer
opens a Thrift connection per call. Both numbers are reported for the describe phase.

Targets (printed with the verdict): describe mean <= 1/3 of the peer's; listing the whole
database >= 10x faster (peer median / ours median); the threaded run without errors (ours).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import random
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # the benchmarks dir is put on sys.path just above
    alternate,
    environment,
    fmt_ratio,
    format_table,
    ms,
    ratio,
    settle,
    summarize,
    write_json,
)

LABELS = ("ours", "peer")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(wall seconds, result) of one call (``_common.timed``'s shape has changed over time)."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


# ---------------------------------------------------------------------------------------------
# Implementations
# ---------------------------------------------------------------------------------------------


def load_peer() -> tuple[Any, Any, str | None]:
    """The peer's classes, or a reason why they cannot run."""
    try:
        from lance_namespace_impls import hive2, hive3
    except ImportError as error:
        return None, None, f"lance-namespace-impls is not installed: {error}"
    if not (hive2.HIVE_AVAILABLE and hive3.HIVE_AVAILABLE):
        return None, None, "hive-metastore-client is missing: pip install --no-deps it"
    return hive2.Hive2Namespace, hive3.Hive3Namespace, None


class ConnectionCounter:
    """Counts Thrift connections opened: ours through the pool, the peer's through its client."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.current: str | None = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        from lance_metastore.hive import pool as _hms_pool

        counter = self
        original_ours = _hms_pool.Connection

        class CountingConnection(original_ours):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                counter.counts["ours"] += 1

        _hms_pool.Connection = CountingConnection  # type: ignore[misc]
        patched_peer = None
        try:
            from hive_metastore_client import HiveMetastoreClient

            original_open = HiveMetastoreClient.open

            def counting_open(client: Any) -> Any:
                counter.counts["peer"] += 1
                return original_open(client)

            HiveMetastoreClient.open = counting_open  # type: ignore[method-assign]
            patched_peer = (HiveMetastoreClient, original_open)
        except ImportError:
            pass
        try:
            yield
        finally:
            _hms_pool.Connection = original_ours  # type: ignore[misc]
            if patched_peer is not None:
                patched_peer[0].open = patched_peer[1]


# ---------------------------------------------------------------------------------------------
# One Hive level: ours vs peer
# ---------------------------------------------------------------------------------------------


def fill(label: str, ns: Any, factory: Callable[[], Any], requests: list[Any]) -> None:
    """Declare the untimed rest: 4 threads sharing our object; a peer object per thread
    (the peer's is not safe to share, see the threaded run)."""
    if not requests:
        return
    queue = list(requests)
    lock = threading.Lock()
    failures: list[BaseException] = []

    def work() -> None:
        own = ns if label == "ours" else factory()
        while True:
            with lock:
                if not queue:
                    return
                request = queue.pop()
            try:
                own.declare_table(request)
            except Exception as error:
                failures.append(error)
                return

    threads = [threading.Thread(target=work, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures or queue:
        raise RuntimeError(f"{label}: could not declare every table: {failures[:1]}")


def run_level(
    level: str,
    namespaces: dict[str, Any],
    factories: dict[str, Callable[[], Any]],
    args: argparse.Namespace,
    connections: ConnectionCounter,
) -> dict[str, Any]:
    from lance_namespace import (
        CreateNamespaceRequest,
        DeclareTableRequest,
        DescribeTableRequest,
        ListTablesRequest,
    )

    prefix = ["hive"] if level == "hive3" else []
    dbs = {label: [*prefix, f"bench_{label}_{level}"] for label in namespaces}
    names = list(namespaces)
    result: dict[str, Any] = {"level": level}

    for label, ns in namespaces.items():
        ns.create_namespace(CreateNamespaceRequest(id=dbs[label]))

    tables = [f"t_{i:05d}" for i in range(args.tables)]

    # declare ----------------------------------------------------------------------------
    # The first --declares tables are timed one by one; the rest are declared untimed, in
    # parallel (HMS 2.3 on Derby takes 40-90 ms per create_table, so timing all 4 x 1,000
    # sequentially would take minutes). Use --declares 1000 to time them all.
    timed_count = min(args.declares, len(tables))
    samples: dict[str, list[float]] = {label: [] for label in names}
    declare = {label: [DeclareTableRequest(id=[*dbs[label], t]) for t in tables] for label in names}
    settle()
    for i in range(timed_count):
        for label in alternate(i, names):
            seconds, _ = timed(
                lambda label=label, i=i: namespaces[label].declare_table(declare[label][i])
            )
            samples[label].append(seconds)
    result["declare"] = {label: summarize(samples[label]) for label in names}
    result["declare_timed"] = timed_count
    for label in names:
        fill(label, namespaces[label], factories[label], declare[label][timed_count:])

    # describe ---------------------------------------------------------------------------
    order = list(range(len(tables)))
    random.Random(7).shuffle(order)
    order = order[: min(args.describes, len(tables))]
    describe = {
        label: [DescribeTableRequest(id=[*dbs[label], t]) for t in tables] for label in names
    }
    samples = {label: [] for label in names}
    before = collections.Counter(connections.counts)
    settle()
    for n, i in enumerate(order):
        for label in alternate(n, names):
            seconds, response = timed(
                lambda label=label, i=i: namespaces[label].describe_table(describe[label][i])
            )
            if not response.location:
                raise RuntimeError(f"{label}: describe of {tables[i]} returned no location")
            samples[label].append(seconds)
    result["describe"] = {label: summarize(samples[label]) for label in names}
    result["describe_count"] = len(order)
    result["describe_connections"] = {
        label: connections.counts[label] - before[label] for label in names
    }

    # list, whole ------------------------------------------------------------------------
    listing = {label: ListTablesRequest(id=dbs[label]) for label in names}
    samples = {label: [] for label in names}
    counts: dict[str, int] = {}
    settle()
    for n in range(args.lists):
        for label in alternate(n, names):
            seconds, response = timed(
                lambda label=label: namespaces[label].list_tables(listing[label])
            )
            samples[label].append(seconds)
            counts[label] = len(response.tables)
    result["list_whole"] = {label: summarize(samples[label]) for label in names}
    result["list_counts"] = counts

    # list, paged (ours; the peer ignores limit and page_token) ----------------------------
    if "ours" in namespaces:
        ours = namespaces["ours"]
        traversals: list[float] = []
        pages: list[float] = []
        settle()
        for _ in range(args.lists):
            token = None
            seen = 0
            started = time.perf_counter()
            while True:
                request = ListTablesRequest(id=dbs["ours"], limit=100, page_token=token)
                seconds, response = timed(lambda request=request: ours.list_tables(request))
                pages.append(seconds)
                seen += len(response.tables)
                token = response.page_token
                if not token:
                    break
            traversals.append(time.perf_counter() - started)
            if seen != args.tables:
                raise RuntimeError(f"ours: paged listing saw {seen} of {args.tables} tables")
        result["list_paged"] = {"page": summarize(pages), "traversal": summarize(traversals)}

    # threads sharing one namespace object -------------------------------------------------
    result["threads"] = {
        label: threaded_describes(namespaces[label], dbs[label], tables, args) for label in names
    }
    return result


def threaded_describes(
    ns: Any, db: list[str], tables: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    from lance_namespace import DescribeTableRequest

    errors: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    done = collections.Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(args.threads)

    def work(worker: int) -> None:
        rng = random.Random(worker)
        requests = [
            DescribeTableRequest(id=[*db, rng.choice(tables)]) for _ in range(args.thread_describes)
        ]
        barrier.wait()
        for request in requests:
            try:
                response = ns.describe_table(request)
                if not response.location:
                    raise RuntimeError("describe returned no location")
                with lock:
                    done["ok"] += 1
            except Exception as error:
                kind = f"{type(error).__name__}"
                with lock:
                    errors[kind] += 1
                    examples.setdefault(kind, _short(error))

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(args.threads)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    deadline = started + args.thread_timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.perf_counter()))
    wall = time.perf_counter() - started
    hung = sum(thread.is_alive() for thread in threads)  # left behind as daemon threads
    total = args.threads * args.thread_describes
    return {
        "calls": total,
        "ok": done["ok"],
        "errors": sum(errors.values()),
        "by_type": dict(errors),
        "examples": examples,
        "hung_threads": hung,
        "wall_s": wall,
        "calls_per_s": done["ok"] / wall if wall else 0.0,
    }


def _short(error: BaseException) -> str:
    text = str(error).replace("\n", " ")
    if not text:
        frames = traceback.extract_tb(error.__traceback__)
        text = f"at {frames[-1].name}" if frames else ""
    return text[:140]


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def report(levels: list[dict[str, Any]], args: argparse.Namespace) -> tuple[str, bool]:
    lines: list[str] = []
    all_met = True
    for data in levels:
        level_lines, met = report_level(data, args)
        lines += level_lines
        all_met &= met
    return "\n".join(lines), all_met


def _stat(data: dict[str, Any], section: str, label: str, key: str) -> float | None:
    values = data[section].get(label)
    return values.get(key) if values else None


def report_level(data: dict[str, Any], args: argparse.Namespace) -> tuple[list[str], bool]:
    lines: list[str] = []
    all_met = True
    level = data["level"]
    has_peer = "peer" in data["describe"]
    lines.append("")
    lines.append(
        f"== {level}: {args.tables} tables per database; {data['declare_timed']} declares "
        f"and {data['describe_count']} describes timed per side; {args.lists} listings =="
    )
    headers = ["operation (ms per call)", "ours", "peer", "ours/peer"]
    rows = []

    def row(name: str, ours: float | None, peer: float | None) -> None:
        r = ratio(ours, peer) if ours is not None and peer is not None else float("nan")
        rows.append([name, ms(ours), ms(peer), fmt_ratio(r)])

    def stat(section: str, label: str, key: str) -> float | None:
        return _stat(data, section, label, key)

    for section, title in (
        ("declare", f"declare_table (x{data['declare_timed']})"),
        ("describe", f"describe_table (x{data['describe_count']})"),
        ("list_whole", f"list_tables, all {args.tables}"),
    ):
        for key in ("mean_ms", "median_ms", "p95_ms"):
            row(f"{title} {key[:-3]}", stat(section, "ours", key), stat(section, "peer", key))
    paged = data.get("list_paged")
    if paged:
        rows.append(
            [
                "list_tables limit=100, per page (median)",
                ms(paged["page"]["median_ms"]),
                "-",
                "-",
            ]
        )
        rows.append(
            [
                "list_tables limit=100, all pages (median)",
                ms(paged["traversal"]["median_ms"]),
                "-",
                "-",
            ]
        )
    lines.append(format_table(headers, rows))

    conns = data["describe_connections"]
    lines.append(
        f"Thrift connections opened for {data['describe_count']} describes: "
        f"ours {conns.get('ours')}, "
        f"peer {conns.get('peer', '-')}"
    )
    lines.append(f"tables listed: {data['list_counts']}")
    for label, threaded in data["threads"].items():
        lines.append(
            f"{args.threads} threads x {args.thread_describes} describes, one {label} object: "
            f"{threaded['ok']}/{threaded['calls']} ok, {threaded['errors']} errors"
            f"{' ' + str(threaded['by_type']) if threaded['errors'] else ''}, "
            f"{threaded['hung_threads']} hung, {threaded['calls_per_s']:.0f} calls/s"
        )
        for kind, example in threaded["examples"].items():
            lines.append(f"    {label} {kind}: {example}")

    # targets
    ours_describe = stat("describe", "ours", "mean_ms")
    ours_list = stat("list_whole", "ours", "median_ms")
    checks: list[tuple[str, str, bool]] = []
    if has_peer:
        describe_ratio = ratio(ours_describe, stat("describe", "peer", "mean_ms"))
        list_speedup = (stat("list_whole", "peer", "median_ms") or 0) / (ours_list or 1)
        checks.append(
            (
                "describe mean <= 1/3 of the peer's",
                f"ours/peer = {describe_ratio:.3f}",
                describe_ratio <= 1 / 3,
            )
        )
        checks.append(
            (
                f"list {args.tables} tables >= 10x faster",
                f"{list_speedup:.1f}x",
                list_speedup >= 10,
            )
        )
    ours_threads = data["threads"]["ours"]
    checks.append(
        (
            f"{args.threads} threads sharing one object, no errors",
            f"{ours_threads['errors']} errors",
            ours_threads["errors"] == 0 and ours_threads["hung_threads"] == 0,
        )
    )
    lines.append("targets:")
    for name, value, met in checks:
        all_met &= met
        lines.append(f"  [{'MET' if met else 'MISSED'}] {name}: {value}")
    return lines, all_met


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1000, help="tables per database")
    parser.add_argument(
        "--declares", type=int, default=250, help="declares timed one by one (rest untimed)"
    )
    parser.add_argument("--describes", type=int, default=300, help="tables described, timed")
    parser.add_argument("--lists", type=int, default=3, help="whole listings per side")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--thread-describes", type=int, default=50, help="describes per thread")
    parser.add_argument(
        "--thread-timeout", type=float, default=30.0, help="seconds before threads count as hung"
    )
    parser.add_argument("--levels", default="hive2,hive3", help="hive2, hive3 or both")
    parser.add_argument("--uri", help="use this metastore instead of starting one")
    parser.add_argument("--json", help="also write the raw results here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # The peer logs every failure at ERROR; its errors are counted and reported below.
    logging.getLogger("lance_namespace_impls").setLevel(logging.CRITICAL)
    logging.getLogger("thrift").setLevel(logging.CRITICAL)  # the peer's failed connects
    peer2, peer3, why_no_peer = load_peer()
    from lance_metastore import Hive2Namespace, Hive3Namespace

    if why_no_peer:
        print(f"peer unavailable ({why_no_peer}); measuring ours only", file=sys.stderr)

    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_hive_")))
        if args.uri:
            uri = args.uri
        else:
            from lance_metastore.hive.local import LocalMetastore

            metastore = LocalMetastore(workdir / "hms")
            print("starting a local Hive Metastore 2.3 ...", file=sys.stderr)
            metastore.start()
            stack.callback(metastore.stop)
            uri = metastore.uri
        connections = ConnectionCounter()
        stack.enter_context(connections.installed())
        levels = []
        for level in [x.strip() for x in args.levels.split(",") if x.strip()]:
            root = str(workdir / "lake" / level)
            ours_cls, peer_cls = (
                (Hive2Namespace, peer2) if level == "hive2" else (Hive3Namespace, peer3)
            )
            factories: dict[str, Callable[[], Any]] = {
                "ours": lambda cls=ours_cls, root=root: cls(uri=uri, root=str(Path(root) / "ours"))
            }
            if peer_cls is not None:
                factories["peer"] = lambda cls=peer_cls, root=root: cls(
                    uri=uri, root=str(Path(root) / "peer")
                )
            namespaces = {label: factory() for label, factory in factories.items()}
            print(f"running {level} ...", file=sys.stderr)
            levels.append(run_level(level, namespaces, factories, args, connections))
            for ns in namespaces.values():
                with contextlib.suppress(Exception):
                    ns.close()
        text, all_met = report(levels, args)
    print(text)
    print(
        f"\nall targets met: {'yes' if all_met else 'NO'}   ({time.perf_counter() - started:.0f} s)"
    )
    if args.json:
        write_json(args.json, {"environment": environment(), "args": vars(args), "levels": levels})
    return 0 if all_met else 1


if __name__ == "__main__":
    raise SystemExit(main())
