"""Glue catalog benchmark: our GlueNamespace against lance-namespace-impls' GlueNamespace.

Run from the repository root, in the project's venv (needs the ``test`` and ``bench`` extras:
moto[server] and lance-namespace-impls)::

    python benchmarks/bench_glue.py [--tables 1000] [--repeat 3] [--json out.json]

One run starts ONE Glue emulator (``tests/support/glue_emulator.py``: moto's real server on
127.0.0.1 plus the catalog extensions) and points both implementations at it:

- ours: ``lance_namespace.connect("glue", props)`` after ``import lance_metastore``;
- peer: ``lance_namespace_impls.glue.GlueNamespace(**props)``;

with the same properties (endpoint, region, static keys, root, max_retries=5,
retry_mode=standard). Each implementation works in databases of its own, created through
its own ``create_namespace``, so neither sees the other's tables.

By default the emulator runs in a spawned child process, so its request threads and the
benchmark do not take turns on one GIL; ``--in-process-server`` runs it in this process.
Every request is a real HTTP round trip to moto: the server caches nothing.

What is measured (each call timed alone with ``time.perf_counter``; requests built before):

- create_namespace / describe_namespace / drop_namespace: ``--namespaces`` databases each;
  list_namespaces of the root: ``--namespace-lists`` calls (2 x --namespaces + 2
  databases listed, the same for both);
- declare_table: one call per table, ``--tables`` tables, no location given: both read the
  database (its LocationUri, set at creation, is the base of the table location) and create
  the Glue table;
- describe_table: every table once, ``--repeat`` passes; then ``--hot`` describes
  of one table;
- list_tables, whole: one call without limit returns all the tables (``--whole-lists``
  calls per repeat), each implementation listing its own database; and again with both
  listing the same two databases alternately, since the tables differ (the peer stores a
  placeholder column and SerDe info, so its GetTables responses are larger);
- list_tables, paged: ``limit=100``, following ``page_token`` to the end (``--traversals``
  per repeat). The peer ignores ``limit`` and ``page_token`` (checked at run time): its one
  call returns every table and no token. So its "page" is the whole listing, and three rows
  are reported: every call (ours: one per page, of which only the first calls Glue, the
  others are served from ours' short-lived listing snapshot; peer: one per traversal), the
  first page (time to the first 100 names), and the full traversal (time to all names);
- with ``--s3-tables M`` (default 100; 0 skips): declare_table and describe_table of M
  declared-only tables whose location is on the emulator's S3 (``s3://``; both get the same
  ``storage.*`` options). This exposes work that only happens for object-store locations.

Fairness: both clients are warmed up first (client creation, botocore's per-operation models,
our STS account lookup happen there, not in timed calls). Calls are interleaved one by one,
and the order is rotated on every call (ours first, then peer first, ...), so neither always
meets a freshly used connection or server state; both databases grow in lockstep. Garbage is
collected between phases, never during them.

Differences in call shape (both do the same catalog work unless stated):

- the peer returns ``CreateNamespaceResponse()`` without properties; ours reads the database
  back to return its stored properties (one of the extra calls reported below);
- ours' create_namespace first checks whether the name exists as a database or as a catalog
  (it maps child catalogs to namespaces as well); the peer just calls CreateDatabase;
- ours lists child catalogs too in list_namespaces (GetCatalogs); the peer lists databases;
- ours returns listings sorted; the peer in Glue's order;
- the peer declares tables with a placeholder column and table_type=LANCE; ours with no
  columns and table_type=lance (both EXTERNAL_TABLE);
- the peer raises RuntimeError where ours raises lance_namespace errors (no error path is
  timed here).

Request counts: a separate, untimed pass counts the requests each implementation sends per
operation: Glue requests by a ``before-send.glue`` handler on each implementation's boto3
client (per HTTP attempt), other botocore requests (ours' STS GetCallerIdentity) by a
process-wide hook. Requests that Lance's Rust object store sends (S3, for s3:// locations)
are not botocore requests and are not counted.

Reading the output: ratio = ours / peer of the median (and mean) latency per call; below 1.0
ours is faster. "paired" is the median over rounds of ours/peer, each round having run both
back to back, so load on a shared machine mostly cancels out. A row is "SLOWER" when its
paired ratio (the median ratio where calls do not pair up) exceeds 1 + ``--tolerance``
(default 0.05, the run-to-run noise band), "faster" below 1 - tolerance, "tie" in between
(means are shown but not used: one stalled call moves them). The target check passes when
no row is SLOWER. A second table gives the client-side CPU per call (``time.thread_time`` of
the calling thread), which the server and other load on the machine do not affect: it
separates our own Python overhead from round trips.

Note: importing ``lance_namespace_impls`` re-registers the alias "glue" to the peer; the
script imports it before ``lance_metastore`` and checks that "glue" resolves to ours.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    RequestCounter,
    ServerProcess,
    alternate,
    describe_calls,
    environment,
    fmt_ratio,
    format_table,
    in_process_server,
    ms,
    paired_ratio,
    per_call,
    ratio,
    settle,
    summarize,
    timed,
    verdict,
    write_json,
)

os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

IMPLS = ("ours", "peer")
PAGE_LIMIT = 100
EMULATOR = "support.glue_emulator:GlueEmulator"
EMULATOR_ATTRIBUTES = ("endpoint", "region", "access_key_id", "secret_access_key")
S3_BUCKET = "bench-lake"


# --------------------------------------------------------------------------------------------
# Connecting
# --------------------------------------------------------------------------------------------


def connect_both(props: dict[str, str]) -> dict[str, Any]:
    """Ours through lance_namespace.connect("glue"), the peer through its class."""
    # The peer's package registers "glue" for itself on import; ours must register last.
    import lance_namespace
    from lance_namespace_impls.glue import GlueNamespace as PeerGlueNamespace

    import lance_metastore

    ours = lance_namespace.connect("glue", dict(props))
    if not isinstance(ours, lance_metastore.GlueNamespace):
        raise SystemExit(
            f'lance_namespace.connect("glue") built {type(ours).__module__}.'
            f"{type(ours).__name__}, not lance_metastore.GlueNamespace: the alias was "
            "re-registered by another package imported after lance_metastore"
        )
    return {"ours": ours, "peer": PeerGlueNamespace(**props)}


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass
class Row:
    key: str
    label: str
    samples: dict[str, list[float]] = field(default_factory=lambda: {i: [] for i in IMPLS})
    cpu: dict[str, list[float]] = field(default_factory=lambda: {i: [] for i in IMPLS})
    note: str = ""

    def add(self, impl: str, seconds: float, cpu_seconds: float) -> None:
        self.samples[impl].append(seconds)
        self.cpu[impl].append(cpu_seconds)

    def result(self, tolerance: float) -> dict[str, Any]:
        stats = {impl: summarize(self.samples[impl]) for impl in IMPLS}
        by_median = ratio(stats["ours"].get("median_ms", 0), stats["peer"].get("median_ms", 0))
        by_mean = ratio(stats["ours"].get("mean_ms", 0), stats["peer"].get("mean_ms", 0))
        by_total = ratio(stats["ours"].get("total_ms", 0), stats["peer"].get("total_ms", 0))
        by_pairs = paired_ratio(self.samples["ours"], self.samples["peer"])
        cpu = {impl: summarize(self.cpu[impl]) for impl in IMPLS}
        headline = by_median if math.isnan(by_pairs) else by_pairs
        return {
            "label": self.label,
            "note": self.note,
            **stats,
            "ratio_median": by_median,
            "ratio_paired": by_pairs,
            "ratio_mean": by_mean,
            "ratio_total": by_total,
            "verdict": verdict(headline, tolerance),
            "samples_ms": {impl: [round(x * 1e3, 4) for x in self.samples[impl]] for impl in IMPLS},
            "client_cpu": {
                **cpu,
                "ratio_median": ratio(
                    cpu["ours"].get("median_ms", 0), cpu["peer"].get("median_ms", 0)
                ),
                "ratio_mean": ratio(cpu["ours"].get("mean_ms", 0), cpu["peer"].get("mean_ms", 0)),
            },
        }


class Bench:
    def __init__(self, args: argparse.Namespace, info: dict[str, Any]) -> None:
        self.args = args
        self.info = info
        self.run_id = uuid.uuid4().hex[:6]
        self.root = Path(tempfile.mkdtemp(prefix="bench-glue-"))
        self.rows: dict[str, Row] = {}
        self.notes: list[str] = []
        self.calls: dict[str, dict[str, Any]] = {}
        self.warmup_requests: dict[str, dict[str, int]] = {}
        self.counter = RequestCounter()
        self.props = {
            "endpoint": info["endpoint"],
            "region": info["region"],
            "access_key_id": info["access_key_id"],
            "secret_access_key": info["secret_access_key"],
            "root": str(self.root / "root"),
            "max_retries": "5",
            "retry_mode": "standard",
        }
        self.ns = connect_both(self.props)

    # -- helpers ---------------------------------------------------------------------------

    def row(self, key: str, label: str, note: str = "") -> Row:
        if key not in self.rows:
            self.rows[key] = Row(key, label, note=note)
        return self.rows[key]

    def db_name(self, impl: str, what: str) -> str:
        return f"bench_{self.run_id}_{impl}_{what}"

    def interleave(self, row: Row, count: int, call: Callable[[str, int], Any]) -> None:
        """``count`` rounds; each round times ``call(impl, i)`` once per impl, order rotated."""
        for i in range(count):
            for impl in alternate(i, IMPLS):
                seconds, cpu, _ = timed(lambda impl=impl, i=i: call(impl, i))
                row.add(impl, seconds, cpu)

    def create_database(self, impl: str, name: str, location: str) -> None:
        from lance_namespace import CreateNamespaceRequest

        self.ns[impl].create_namespace(
            CreateNamespaceRequest(id=[name], properties={"location": location})
        )

    # -- phases ----------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Build the clients and touch every operation once, counting one-time requests."""
        from lance_namespace import (
            CreateNamespaceRequest,
            DeclareTableRequest,
            DescribeNamespaceRequest,
            DescribeTableRequest,
            DropNamespaceRequest,
            ListNamespacesRequest,
            ListTablesRequest,
        )

        for impl in IMPLS:
            self.counter.attach(impl, self.ns[impl].glue)
        with self.counter.watch_other_services():
            for impl in IMPLS:
                ns = self.ns[impl]
                with self.counter.measure(impl) as sent:
                    db = self.db_name(impl, "warmup")
                    self.create_database(impl, db, str(self.root / db))
                    ns.describe_namespace(DescribeNamespaceRequest(id=[db]))
                    ns.list_namespaces(ListNamespacesRequest())
                    for t in range(5):
                        ns.declare_table(DeclareTableRequest(id=[db, f"w{t}"]))
                    for _ in range(3):
                        for t in range(5):
                            ns.describe_table(DescribeTableRequest(id=[db, f"w{t}"]))
                        ns.list_tables(ListTablesRequest(id=[db]))
                        traverse(ns, db, 2)
                    scratch = self.db_name(impl, "scratch")
                    ns.create_namespace(CreateNamespaceRequest(id=[scratch]))
                    ns.drop_namespace(DropNamespaceRequest(id=[scratch]))
                self.warmup_requests[impl] = dict(sorted(sent.items()))
        self.counter.detach_all()

    def namespace_ops(self) -> None:
        from lance_namespace import (
            CreateNamespaceRequest,
            DescribeNamespaceRequest,
            DropNamespaceRequest,
            ListNamespacesRequest,
        )

        count = self.args.namespaces
        names = {impl: [self.db_name(impl, f"ns{i}") for i in range(count)] for impl in IMPLS}
        properties = {"description": "benchmark namespace"}
        settle()
        creates = {
            impl: [CreateNamespaceRequest(id=[n], properties=properties) for n in names[impl]]
            for impl in IMPLS
        }
        self.interleave(
            self.row("create_namespace", "create_namespace"),
            count,
            lambda impl, i: self.ns[impl].create_namespace(creates[impl][i]),
        )
        settle()
        describes = {
            impl: [DescribeNamespaceRequest(id=[n]) for n in names[impl]] for impl in IMPLS
        }
        self.interleave(
            self.row("describe_namespace", "describe_namespace"),
            count,
            lambda impl, i: self.ns[impl].describe_namespace(describes[impl][i]),
        )
        settle()
        listed: dict[str, int] = {}

        def list_root(impl: str, i: int) -> None:
            listed[impl] = len(self.ns[impl].list_namespaces(ListNamespacesRequest()).namespaces)

        self.interleave(
            self.row("list_namespaces", "list_namespaces (root)"),
            self.args.namespace_lists,
            list_root,
        )
        if listed["ours"] != listed["peer"]:
            self.notes.append(f"list_namespaces returned different counts: {listed}")
        self.rows["list_namespaces"].note = f"{listed['ours']} databases listed"
        settle()
        drops = {impl: [DropNamespaceRequest(id=[n]) for n in names[impl]] for impl in IMPLS}
        self.interleave(
            self.row("drop_namespace", "drop_namespace (empty)"),
            count,
            lambda impl, i: self.ns[impl].drop_namespace(drops[impl][i]),
        )

    def table_ops(self) -> None:
        from lance_namespace import DeclareTableRequest, DescribeTableRequest

        n, repeat = self.args.tables, self.args.repeat
        dbs = {impl: self.db_name(impl, "tables") for impl in IMPLS}
        for impl in IMPLS:
            self.create_database(impl, dbs[impl], str(self.root / dbs[impl]))
        tables = [f"t_{i:05d}" for i in range(n)]

        settle()
        declares = {
            impl: [DeclareTableRequest(id=[dbs[impl], t]) for t in tables] for impl in IMPLS
        }
        locations: dict[str, str] = {}

        def declare(impl: str, i: int) -> None:
            locations[impl] = self.ns[impl].declare_table(declares[impl][i]).location

        self.interleave(self.row("declare_table", f"declare_table ({n} tables)"), n, declare)
        for impl in IMPLS:
            expected = str(self.root / dbs[impl] / f"{tables[-1]}.lance")
            if locations[impl] != expected:
                self.notes.append(f"{impl} declared at {locations[impl]!r}, not {expected!r}")

        describes = {
            impl: [DescribeTableRequest(id=[dbs[impl], t]) for t in tables] for impl in IMPLS
        }
        row = self.row("describe_table", f"describe_table (all {n}, x{repeat})")
        for _ in range(repeat):
            settle()
            self.interleave(
                row, n, lambda impl, i: self.ns[impl].describe_table(describes[impl][i])
            )
            for impl in IMPLS:  # the next pass visits the tables in the opposite order
                describes[impl].reverse()
        settle()
        hot = {impl: DescribeTableRequest(id=[dbs[impl], tables[0]]) for impl in IMPLS}
        self.interleave(
            self.row("describe_table_hot", f"describe_table (one table, x{self.args.hot})"),
            self.args.hot,
            lambda impl, i: self.ns[impl].describe_table(hot[impl]),
        )
        self.list_ops(dbs, n)

    def list_ops(self, dbs: dict[str, str], n: int) -> None:
        from lance_namespace import ListTablesRequest

        repeat = self.args.repeat
        whole = {impl: ListTablesRequest(id=[dbs[impl]]) for impl in IMPLS}
        sizes: dict[str, set[int]] = {impl: set() for impl in IMPLS}

        def list_whole(impl: str, i: int) -> None:
            sizes[impl].add(len(self.ns[impl].list_tables(whole[impl]).tables))

        settle()
        self.interleave(
            self.row("list_tables_whole", f"list_tables (whole, {n} tables)"),
            self.args.whole_lists * repeat,
            list_whole,
        )
        for impl in IMPLS:
            if sizes[impl] != {n}:
                self.notes.append(f"{impl} whole list_tables returned {sizes[impl]} names")

        # The tables differ (the peer stores a placeholder column and SerDe info, so its
        # GetTables responses are larger): list the same databases with both, too.
        same = [ListTablesRequest(id=[dbs[impl]]) for impl in IMPLS]
        counts: set[int] = set()

        def list_same(impl: str, i: int) -> None:
            counts.add(len(self.ns[impl].list_tables(same[(i // 2) % 2]).tables))

        settle()
        self.interleave(
            self.row(
                "list_tables_whole_same",
                f"list_tables (whole, {n}, same databases)",
                note="both list ours' and the peer's database alternately",
            ),
            self.args.whole_lists * repeat,
            list_same,
        )
        if counts != {n}:
            self.notes.append(f"listing the same databases returned {counts} names")

        per_call = self.row("list_tables_page_call", f"list_tables(limit={PAGE_LIMIT}) per call")
        first = self.row("list_tables_first_page", f"list_tables(limit={PAGE_LIMIT}) first page")
        full = self.row("list_tables_traversal", f"list_tables(limit={PAGE_LIMIT}) all pages")
        shapes: dict[str, tuple[int, int]] = {}
        settle()
        for i in range(self.args.traversals * repeat):
            for impl in alternate(i, IMPLS):
                times, pages = traverse(self.ns[impl], dbs[impl], PAGE_LIMIT)
                names = [name for page in pages for name in page]
                if len(names) != n or len(set(names)) != n:
                    self.notes.append(f"{impl} paged listing returned {len(names)} names")
                shapes[impl] = (len(times), max(len(page) for page in pages))
                for seconds, cpu in times:
                    per_call.add(impl, seconds, cpu)
                first.add(impl, *times[0])
                full.add(impl, sum(t[0] for t in times), sum(t[1] for t in times))
        pages = {impl: shapes[impl][0] for impl in IMPLS}
        per_call.note = (
            f"calls per traversal: ours {pages['ours']} (largest page {shapes['ours'][1]}), "
            f"peer {pages['peer']} (largest page {shapes['peer'][1]})"
        )
        self.peer_pages = pages["peer"]
        if pages["peer"] == 1 and n > PAGE_LIMIT:
            note = (
                f"peer ignores limit/page_token: one call returns all {n} names and no "
                "token, so its 'page' is its whole listing"
            )
            first.note = full.note = "peer: whole listing (no paging)"
            self.notes.append(note)

    def s3_ops(self) -> None:
        """Declared-only tables on the emulator's S3: object-store locations."""
        from lance_namespace import DeclareTableRequest, DescribeTableRequest

        count, repeat = self.args.s3_tables, self.args.repeat
        import boto3

        boto3.client(
            "s3",
            endpoint_url=self.info["endpoint"],
            region_name=self.info["region"],
            aws_access_key_id=self.info["access_key_id"],
            aws_secret_access_key=self.info["secret_access_key"],
        ).create_bucket(Bucket=S3_BUCKET)
        props = {
            **self.props,
            "storage.aws_endpoint": self.info["endpoint"],
            "storage.aws_region": self.info["region"],
            "storage.aws_access_key_id": self.info["access_key_id"],
            "storage.aws_secret_access_key": self.info["secret_access_key"],
            "storage.allow_http": "true",
        }
        ns = connect_both(props)
        saved, self.ns = self.ns, ns
        try:
            dbs = {impl: self.db_name(impl, "s3") for impl in IMPLS}
            for impl in IMPLS:
                self.create_database(impl, dbs[impl], f"s3://{S3_BUCKET}/{dbs[impl]}")
                # warm-up: client, models, and Lance's object store for this bucket
                ns[impl].declare_table(DeclareTableRequest(id=[dbs[impl], "warm"]))
                for _ in range(3):
                    ns[impl].describe_table(DescribeTableRequest(id=[dbs[impl], "warm"]))
            tables = [f"s_{i:05d}" for i in range(count)]
            settle()
            declares = {
                impl: [DeclareTableRequest(id=[dbs[impl], t]) for t in tables] for impl in IMPLS
            }
            self.interleave(
                self.row("declare_table_s3", f"declare_table (s3://, {count} tables)"),
                count,
                lambda impl, i: ns[impl].declare_table(declares[impl][i]),
            )
            describes = {
                impl: [DescribeTableRequest(id=[dbs[impl], t]) for t in tables] for impl in IMPLS
            }
            row = self.row(
                "describe_table_s3",
                f"describe_table (s3://, declared only, all {count}, x{repeat})",
                note="ours also tries to open the Lance dataset on S3 (not counted below)",
            )
            for _ in range(repeat):
                settle()
                self.interleave(
                    row, count, lambda impl, i: ns[impl].describe_table(describes[impl][i])
                )
            self.s3_ns, self.s3_dbs = ns, dbs
        finally:
            self.ns = saved

    def count_requests(self) -> None:
        """Untimed: requests per call of each operation, for each implementation."""
        from lance_namespace import (
            CreateNamespaceRequest,
            DeclareTableRequest,
            DescribeNamespaceRequest,
            DescribeTableRequest,
            DropNamespaceRequest,
            ListNamespacesRequest,
            ListTablesRequest,
        )

        k = 3
        for impl in IMPLS:
            self.counter.attach(impl, self.ns[impl].glue)
        results: dict[str, dict[str, Any]] = {}

        def record(key: str, impl: str, calls: int, fn: Callable[[], Any]) -> None:
            with self.counter.measure(impl) as sent:
                fn()
            results.setdefault(key, {})[impl] = per_call(sent, calls)

        with self.counter.watch_other_services():
            for impl in IMPLS:
                ns = self.ns[impl]
                names = [self.db_name(impl, f"count{i}") for i in range(k)]
                record(
                    "create_namespace",
                    impl,
                    k,
                    lambda ns=ns, names=names: [
                        ns.create_namespace(CreateNamespaceRequest(id=[n])) for n in names
                    ],
                )
                record(
                    "describe_namespace",
                    impl,
                    k,
                    lambda ns=ns, names=names: [
                        ns.describe_namespace(DescribeNamespaceRequest(id=[n])) for n in names
                    ],
                )
                record(
                    "list_namespaces",
                    impl,
                    k,
                    lambda ns=ns: [ns.list_namespaces(ListNamespacesRequest()) for _ in range(k)],
                )
                db = names[0]
                record(
                    "declare_table",
                    impl,
                    k,
                    lambda ns=ns, db=db: [
                        ns.declare_table(DeclareTableRequest(id=[db, f"c{i}"])) for i in range(k)
                    ],
                )
                record(
                    "describe_table",
                    impl,
                    k,
                    lambda ns=ns, db=db: [
                        ns.describe_table(DescribeTableRequest(id=[db, f"c{i}"])) for i in range(k)
                    ],
                )
                big = self.db_name(impl, "tables")
                record(
                    "list_tables_whole",
                    impl,
                    1,
                    lambda ns=ns, big=big: ns.list_tables(ListTablesRequest(id=[big])),
                )
                record(
                    "list_tables_whole_same",
                    impl,
                    2,
                    lambda ns=ns: [
                        ns.list_tables(ListTablesRequest(id=[self.db_name(other, "tables")]))
                        for other in IMPLS
                    ],
                )
                record(
                    "list_tables_first_page",
                    impl,
                    1,
                    lambda ns=ns, big=big: ns.list_tables(
                        ListTablesRequest(id=[big], limit=PAGE_LIMIT)
                    ),
                )
                record(
                    "list_tables_traversal",
                    impl,
                    1,
                    lambda ns=ns, big=big: traverse(ns, big, PAGE_LIMIT),
                )
                # drop_namespace needs empty databases: names[1:] hold no tables
                record(
                    "drop_namespace",
                    impl,
                    k - 1,
                    lambda ns=ns, names=names: [
                        ns.drop_namespace(DropNamespaceRequest(id=[n])) for n in names[1:]
                    ],
                )
            if getattr(self, "s3_ns", None) is not None:
                for impl in IMPLS:
                    self.counter.attach(f"{impl}-s3", self.s3_ns[impl].glue)
                    ns, db = self.s3_ns[impl], self.s3_dbs[impl]
                    with self.counter.measure(f"{impl}-s3") as sent:
                        for i in range(k):
                            ns.declare_table(DeclareTableRequest(id=[db, f"count{i}"]))
                    results.setdefault("declare_table_s3", {})[impl] = per_call(sent, k)
                    with self.counter.measure(f"{impl}-s3") as sent:
                        for i in range(k):
                            ns.describe_table(DescribeTableRequest(id=[db, f"count{i}"]))
                    results.setdefault("describe_table_s3", {})[impl] = per_call(sent, k)
        self.counter.detach_all()
        # traversal: also per page call
        traversal = results["list_tables_traversal"]
        pages = {"ours": -(-self.args.tables // PAGE_LIMIT), "peer": self.peer_pages}
        results["list_tables_page_call"] = {
            impl: {key: value / pages[impl] for key, value in traversal[impl].items()}
            for impl in IMPLS
        }
        results["describe_table_hot"] = results["describe_table"]
        self.calls = results

    # -- run and report --------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        self.warm_up()
        self.namespace_ops()
        self.table_ops()
        if self.args.s3_tables:
            self.s3_ops()
        self.count_requests()
        elapsed = time.perf_counter() - started
        tolerance = self.args.tolerance
        results = {key: row.result(tolerance) for key, row in self.rows.items()}
        for key, result in results.items():
            result["requests_per_call"] = self.calls.get(key)
        slower = [key for key, result in results.items() if result["verdict"] == "SLOWER"]
        return {
            "config": {
                "tables": self.args.tables,
                "repeat": self.args.repeat,
                "namespaces": self.args.namespaces,
                "namespace_lists": self.args.namespace_lists,
                "hot_describes": self.args.hot,
                "whole_lists_per_repeat": self.args.whole_lists,
                "traversals_per_repeat": self.args.traversals,
                "s3_tables": self.args.s3_tables,
                "page_limit": PAGE_LIMIT,
                "tolerance": tolerance,
                "server": "in-process" if self.args.in_process_server else "child process",
                "endpoint": self.info["endpoint"],
            },
            "environment": environment(),
            "results": results,
            "warmup_requests": self.warmup_requests,
            "notes": self.notes,
            "target": {
                "statement": "no operation slower than the peer",
                "passed": not slower,
                "slower": slower,
            },
            "elapsed_seconds": elapsed,
        }

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def traverse(ns: Any, db: str, limit: int) -> tuple[list[tuple[float, float]], list[list[str]]]:
    """Follow page_token to the end: ((wall, CPU) seconds of each call, names of each call)."""
    from lance_namespace import ListTablesRequest

    times: list[tuple[float, float]] = []
    pages: list[list[str]] = []
    token = None
    while True:
        request = ListTablesRequest(id=[db], limit=limit, page_token=token)
        seconds, cpu, response = timed(lambda request=request: ns.list_tables(request))
        times.append((seconds, cpu))
        pages.append(list(response.tables))
        token = response.page_token
        if not token:
            return times, pages
        if len(pages) > 100_000:
            raise RuntimeError("paging does not end")


def report(data: dict[str, Any]) -> str:
    results = data["results"]
    headers = [
        "operation",
        "calls",
        "ours mean",
        "ours p50",
        "ours p95",
        "peer mean",
        "peer p50",
        "peer p95",
        "ratio p50",
        "paired",
        "ratio mean",
        "ours total",
        "peer total",
        "verdict",
    ]
    rows = []
    for result in results.values():
        ours, peer = result["ours"], result["peer"]
        rows.append(
            [
                result["label"],
                str(ours["n"]) if ours["n"] == peer["n"] else f"{ours['n']}/{peer['n']}",
                ms(ours.get("mean_ms")),
                ms(ours.get("median_ms")),
                ms(ours.get("p95_ms")),
                ms(peer.get("mean_ms")),
                ms(peer.get("median_ms")),
                ms(peer.get("p95_ms")),
                fmt_ratio(result["ratio_median"]),
                fmt_ratio(result["ratio_paired"]),
                fmt_ratio(result["ratio_mean"]),
                ms(ours.get("total_ms")),
                ms(peer.get("total_ms")),
                result["verdict"],
            ]
        )
    cfg = data["config"]
    lines = [
        f"Glue benchmark: ours (lance_metastore) vs peer (lance_namespace_impls 0.4.x), "
        f"{cfg['tables']} tables, repeat {cfg['repeat']}, emulator ({cfg['server']}) at "
        f"{cfg['endpoint']}, {data['environment']['cpus']} CPUs",
        "Latencies in ms per call; ratio = ours/peer (< 1.0: ours faster). ratio p50: of the "
        "medians; paired: median of per-round ours/peer (both ran back to back);",
        f"verdict: paired ratio (else ratio p50) beyond a +/-{cfg['tolerance']:.0%} noise band.",
        "",
        format_table(headers, rows),
        "",
        "Requests per call (untimed pass; Glue via before-send on each client, others via a "
        "botocore hook):",
    ]
    call_rows = []
    for result in results.values():
        calls = result.get("requests_per_call") or {}
        call_rows.append(
            [
                result["label"],
                describe_calls(calls.get("ours") or {}),
                describe_calls(calls.get("peer") or {}),
            ]
        )
    lines.append(format_table(["operation", "ours", "peer"], call_rows))
    cpu_rows = []
    for result in results.values():
        cpu = result["client_cpu"]
        cpu_rows.append(
            [
                result["label"],
                ms(cpu["ours"].get("median_ms")),
                ms(cpu["peer"].get("median_ms")),
                fmt_ratio(cpu["ratio_median"]),
                ms(cpu["ours"].get("mean_ms")),
                ms(cpu["peer"].get("mean_ms")),
                fmt_ratio(cpu["ratio_mean"]),
            ]
        )
    lines += [
        "",
        "Client-side CPU per call, ms (the calling thread's time.thread_time: not the server,",
        "not other load on the machine, not Lance's own threads):",
        format_table(
            ["operation", "ours p50", "peer p50", "ratio p50", "ours mean", "peer mean", "ratio"],
            cpu_rows,
        ),
    ]
    lines.append("")
    for impl in IMPLS:
        warm = data["warmup_requests"].get(impl, {})
        lines.append(f"warm-up requests ({impl}, one-time and steady): {dict(warm)}")
    notes = [f"- {note}" for note in data["notes"]]
    notes += [
        f"- {r['label']}: {r['note']}" for r in results.values() if r.get("note") and r["note"]
    ]
    if notes:
        lines += ["", "Notes:", *notes]
    target = data["target"]
    status = "PASS" if target["passed"] else "FAIL"
    detail = (
        ""
        if target["passed"]
        else " (slower: "
        + ", ".join(f"{results[k]['label']} x{_headline(results[k]):.2f}" for k in target["slower"])
        + ")"
    )
    lines += [
        "",
        f"Target check: no operation slower than the peer: {status}{detail}",
        f"Elapsed: {data['elapsed_seconds']:.1f}s",
    ]
    return "\n".join(lines)


def _headline(result: dict[str, Any]) -> float:
    paired = result["ratio_paired"]
    return result["ratio_median"] if math.isnan(paired) else paired


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark lance_metastore's GlueNamespace against lance-namespace-impls' "
        "on one local Glue emulator.",
    )
    parser.add_argument("--tables", type=int, default=1000, help="tables to declare (1000)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="passes of describe and list phases (3)"
    )
    parser.add_argument("--namespaces", type=int, default=100, help="namespaces created (100)")
    parser.add_argument(
        "--namespace-lists", type=int, default=50, help="list_namespaces calls (50)"
    )
    parser.add_argument("--hot", type=int, default=500, help="describes of one table (500)")
    parser.add_argument(
        "--whole-lists", type=int, default=10, help="whole list_tables calls per repeat (10)"
    )
    parser.add_argument("--traversals", type=int, default=5, help="paged traversals per repeat (5)")
    parser.add_argument(
        "--s3-tables", type=int, default=100, help="declared tables on s3:// (100; 0 skips)"
    )
    parser.add_argument(
        "--tolerance", type=float, default=0.05, help="noise band of the verdict (0.05)"
    )
    parser.add_argument(
        "--in-process-server",
        action="store_true",
        help="run the emulator in this process instead of a child process",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    for name in ("tables", "repeat", "namespaces", "namespace_lists", "hot", "whole_lists"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.traversals < 1 or args.s3_tables < 0:
        parser.error("--traversals must be >= 1 and --s3-tables >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.in_process_server:
        server: Any = in_process_server(EMULATOR, EMULATOR_ATTRIBUTES)
    else:
        server = ServerProcess(EMULATOR, EMULATOR_ATTRIBUTES)
    with server as started:
        info = started if isinstance(started, dict) else started.info
        bench = Bench(args, info)
        try:
            data = bench.run()
        finally:
            bench.cleanup()
    print(report(data))
    if args.json:
        write_json(args.json, data)
        print(f"JSON written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
