"""Server load benchmark: ``lance-metastore serve`` with 1 and 2 replicas of 1 and 2 workers,
under 50, 200 and 1,000 concurrent keep-alive clients on loopback.

Run from the repository root, in the project's venv::

    python benchmarks/bench_server_load.py [--clients 50,200,1000] [--seconds 5]
                                           [--replicas 1,2] [--workers 1,2] [--json out.json]
                                           [--backend dir|glue|hms-2.3|hms-3.1|hms-4]
                                           [--impl IMPL --prop K=V ...]

By default the catalog is pylance's DirectoryNamespace on a local directory (``--backend
dir``), which isolates the server's own cost; its appends are Lance's own commits.
``--backend glue`` (the tests' Glue emulator) or ``hms-2.3``, ``hms-3.1``, ``hms-4`` (a local
metastore) serve catalog-managed tables, so every append is a managed commit through the
catalog; ``--impl glue|hive2|hive3 --prop ...`` serves a catalog of your own (catalog-managed
unless ``--prop managed_by=storage``). Each client is one keep-alive connection (raw HTTP/1.1
over asyncio streams, so the client costs little next to the server), spread over the
replicas in turn, sending a mixed workload back to back for ``--seconds``: 8 of 10 requests
describe a table, 1 lists the namespace's tables, 1 appends two rows (an Arrow IPC body) to
the client's group's table.

Printed per configuration: requests per second, p50 and p99 latency of all requests and p99
of the describes alone (reads must not wait for appends stuck on a table lock), errors (any
answer but 200, or a broken connection), and the load average before and after. The
per-caller limits are raised for the run (every client comes from 127.0.0.1); the connection
limit too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import add_tests_to_path, format_table, write_json

TABLES = 8
CONNECT_SECONDS = 120.0  # at most, for every client's connection before the clock starts


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def arrow_rows() -> bytes:
    table = pa.table({"id": pa.array([1, 2], pa.int64())})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def start_replica(impl: str, props: dict[str, str], workers: int, log: Path) -> tuple[Any, str]:
    command = [sys.executable, "-m", "lance_metastore.cli", "--impl", impl]
    for key, value in props.items():
        command += ["--prop", f"{key}={value}"]
    command += [
        "serve", "--port", "0", "--workers", str(workers),
        "--max-connections", "4096", "--max-connections-per-client", "4096",
        "--max-in-flight-per-client", "4096", "--max-in-flight-per-principal", "4096",
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        env={**os.environ, "RUST_LOG": "error"},
    )
    url = process.stdout.readline().strip()  # type: ignore[union-attr]
    if not url.startswith("http"):
        process.kill()
        raise RuntimeError(f"serve did not start: {log.read_text()[-2000:]}")
    return process, url


def request_bytes(method: str, path: str, body: bytes = b"", kind: str = "json") -> bytes:
    content_type = "application/json" if kind == "json" else "application/vnd.apache.arrow.stream"
    head = f"{method} {path} HTTP/1.1\r\nHost: bench\r\n"
    if method == "POST":
        head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


async def read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    if length:
        await reader.readexactly(length)
    return status


async def client(
    index: int,
    url: str,
    db: list[str],
    window: Window,
    rows: bytes,
    latencies: list[tuple[str, float]],
    errors: list[str],
) -> None:
    host, port = url.removeprefix("http://").split(":")
    table = "$".join([*db, f"t{index % TABLES}"])
    mix = [("describe", request_bytes("POST", f"/v1/table/{table}/describe", b"{}"))] * 8 + [
        ("list", request_bytes("GET", f"/v1/namespace/{'$'.join(db)}/table/list?limit=100")),
        ("append", request_bytes("POST", f"/v1/table/{table}/insert", rows, kind="arrow")),
    ]
    try:
        reader, writer = await asyncio.open_connection(host, int(port), limit=1 << 20)
    except OSError as error:
        errors.append(f"connect: {error}")
        return
    finally:
        window.connected += 1
    await window.go.wait()
    turn = index
    try:
        while time.monotonic() < window.stop:
            kind, request = mix[turn % len(mix)]
            turn += 1
            started = time.perf_counter()
            writer.write(request)
            status = await read_response(reader)
            latencies.append((kind, time.perf_counter() - started))
            if status != 200:
                errors.append(str(status))
    except (OSError, asyncio.IncompleteReadError) as error:
        errors.append(f"connection: {type(error).__name__}")
    finally:
        writer.close()


class Window:
    """The measured window: it opens once every client has connected (or tried to), so the
    time to open 1,000 connections on a loaded machine is not counted as serving time."""

    def __init__(self) -> None:
        self.connected = 0
        self.go = asyncio.Event()
        self.stop = 0.0


def percentile_ms(ordered: list[float], fraction: float) -> float | None:
    """The ``fraction`` percentile of sorted seconds, in ms (None without samples)."""
    if not ordered:
        return None
    if fraction == 0.5:
        return statistics.median(ordered) * 1e3
    return ordered[int(fraction * (len(ordered) - 1))] * 1e3


async def run_load(urls: list[str], db: list[str], clients: int, seconds: float) -> dict[str, Any]:
    rows = arrow_rows()
    latencies: list[tuple[str, float]] = []
    errors: list[str] = []
    window = Window()
    tasks = [
        asyncio.create_task(client(i, urls[i % len(urls)], db, window, rows, latencies, errors))
        for i in range(clients)
    ]
    connecting = time.monotonic()
    while window.connected < clients and time.monotonic() - connecting < CONNECT_SECONDS:
        await asyncio.sleep(0.02)
    started = time.monotonic()
    window.stop = started + seconds
    window.go.set()
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - started
    ordered = sorted(seconds for _, seconds in latencies)
    describes = sorted(seconds for kind, seconds in latencies if kind == "describe")
    return {
        "requests": len(latencies),
        "per_second": len(latencies) / elapsed,
        "p50_ms": percentile_ms(ordered, 0.5),
        "p99_ms": percentile_ms(ordered, 0.99),
        "describe_p50_ms": percentile_ms(describes, 0.5),
        "describe_p99_ms": percentile_ms(describes, 0.99),
        "errors": len(errors),
        "connect_seconds": started - connecting,
        "error_kinds": sorted(set(errors))[:5],
    }


def prepare(impl: str, props: dict[str, str], db: list[str]) -> None:
    """The bench namespace and its tables, written once through the namespace itself."""
    from lance_namespace import connect

    import lance_metastore  # noqa: F401 - registers the aliases

    namespace = connect(impl, props)
    from lance_namespace import CreateNamespaceRequest, CreateTableRequest

    namespace.create_namespace(CreateNamespaceRequest(id=db))
    for index in range(TABLES):
        namespace.create_table(CreateTableRequest(id=[*db, f"t{index}"]), arrow_rows())


def catalog(
    stack: contextlib.ExitStack, backend: str, work: Path
) -> tuple[str, dict[str, str], list[str]]:
    """The implementation, properties and bench namespace of ``backend``, its server started
    (and stopped with ``stack``); tables catalog-managed."""
    root = str(work / "lake")
    if backend == "glue":
        add_tests_to_path()
        from support.glue_emulator import GlueEmulator

        glue = stack.enter_context(GlueEmulator())
        props = {
            "endpoint": glue.endpoint,
            "region": glue.region,
            "access_key_id": glue.access_key_id,
            "secret_access_key": glue.secret_access_key,
        }
        return "glue", {**props, "root": root, "managed_by": "impl"}, ["bench"]
    if backend.startswith("hms-"):
        from lance_metastore.hive.local import LocalMetastore

        version = backend.removeprefix("hms-")
        metastore = stack.enter_context(LocalMetastore(work / backend, version=version))
        props = {"uri": metastore.uri, "root": root, "managed_by": "impl"}
        if version.startswith("2"):
            return "hive2", props, ["bench"]
        return "hive3", props, ["hive", "bench"]
    raise ValueError(f"unknown backend {backend!r}: dir, glue, hms-2.3, hms-3.1 or hms-4")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", default="50,200,1000")
    parser.add_argument("--replicas", default="1,2")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--backend", default="dir")
    parser.add_argument("--impl", default="dir")
    parser.add_argument("--prop", action="append", default=[])
    parser.add_argument("--json")
    args = parser.parse_args()
    os.environ.setdefault("RUST_LOG", "error")  # Lance's warnings as the tables are made
    work = Path(tempfile.mkdtemp(prefix="bench-server-load-"))
    with contextlib.ExitStack() as stack:
        impl, props, db = args.impl, dict(prop.split("=", 1) for prop in args.prop), ["bench"]
        if args.backend != "dir":
            impl, props, db = catalog(stack, args.backend, work)
        elif impl == "dir":
            props.setdefault("root", str(work / "lake"))
        else:
            props.setdefault("managed_by", "impl")
        prepare(impl, props, db)
        managed = impl != "dir" and props.get("managed_by", "impl") == "impl"
        shown = args.backend if args.backend != "dir" else impl
        print(f"catalog: {shown}; appends are {'managed' if managed else 'storage'} commits")
        run_all(args, impl, props, db, work)


def run_all(
    args: argparse.Namespace, impl: str, props: dict[str, str], db: list[str], work: Path
) -> None:
    """Every configuration, then the table."""
    print(f"load average before: {load()} (cores: {os.cpu_count()})")
    rows: list[list[str]] = []
    results: list[dict[str, Any]] = []
    for replicas in (int(n) for n in args.replicas.split(",")):
        for workers in (int(n) for n in args.workers.split(",")):
            servers = [
                start_replica(impl, props, workers, work / f"serve-{replicas}-{workers}-{i}.log")
                for i in range(replicas)
            ]
            try:
                time.sleep(2 + workers)  # every worker up
                urls = [url for _, url in servers]
                asyncio.run(run_load(urls, db, 10, 1.0))  # warm
                for clients in (int(n) for n in args.clients.split(",")):
                    outcome = asyncio.run(run_load(urls, db, clients, args.seconds))
                    outcome.update(replicas=replicas, workers=workers, clients=clients)
                    outcome["load"] = load()
                    results.append(outcome)
                    rows.append(
                        [
                            str(replicas),
                            str(workers),
                            str(clients),
                            f"{outcome['per_second']:.0f}",
                            f"{outcome['p50_ms']:.1f}" if outcome["p50_ms"] else "-",
                            f"{outcome['p99_ms']:.1f}" if outcome["p99_ms"] else "-",
                            f"{outcome['describe_p99_ms']:.1f}"
                            if outcome["describe_p99_ms"]
                            else "-",
                            str(outcome["errors"]),
                            outcome["load"],
                        ]
                    )
                    print(rows[-1], outcome["error_kinds"], flush=True)
            finally:
                for process, _ in servers:
                    process.terminate()
                for process, _ in servers:
                    process.wait(60)
    print()
    print(
        format_table(
            [
                "replicas",
                "workers",
                "clients",
                "req/s",
                "p50 ms",
                "p99 ms",
                "describe p99 ms",
                "errors",
                "load",
            ],
            rows,
        )
    )
    print(f"load average after: {load()}")
    if args.json:
        write_json(args.json, results)


if __name__ == "__main__":
    main()
