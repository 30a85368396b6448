"""What ``serve`` adds to one ``describe_table``: the in-process call against the same call
through the server, keep-alive, and where the server's own time goes.

Run from the repository root, in the project's venv::

    python benchmarks/bench_rest_overhead.py [--backend hive2|glue|dir] [--calls 300]
                                             [--repeat 5] [--profile SECONDS] [--json out.json]

The catalog: a local Hive Metastore 2.3 (``--backend hive2``, the default, as issue 41 measured;
a JVM of its own), the Glue emulator (moto's server, a child process) or a local directory
(pylance's DirectoryNamespace, ``dir``). Contenders, called in turn, the order rotating every
call (``_common.alternate``), every call timed alone:

- ``in-process``: the namespace object in this process;
- ``REST <http>+<loop>``: ``lance-metastore serve --http H --loop L`` in a child process (audit
  log on, to a file; the limits at their defaults) over the same catalog, called by a raw
  HTTP/1.1 client on one kept-alive loopback connection (a prebuilt request on a socket, the
  answer read by its Content-Length: the client costs some 20 us, not an HTTP library's
  100-300 us). The stacks: ``h11+asyncio`` (pure Python, before) and ``httptools+uvloop``.
- ``/health`` on each server: the HTTP floor (no body, no thread hop, no catalog).
- ``in-process, handed over``: the same call in this process with the server's thread
  structure and no HTTP: the calling thread hands it to an event loop (uvloop) on a thread of
  its own, which runs it on a worker thread, as ``serve`` does, and hands the answer back.
  What this adds over ``in-process`` is the price of the thread handoffs alone (on a 2-core
  machine whose metastore JVM also wants the cores, each wake-up waits for one); REST over it
  is the server's own code and HTTP.

Reported: the median per call of each repeat, and over the repeats the median of those; what
REST adds over in-process (goal, issue 41: at most 0.5 ms), the ratios, and the load average
before and after (read the ratios on a shared machine: both sides of a pair share the load).

``--profile SECONDS``: afterwards, ``py-spy`` samples the httptools+uvloop server's process
(all threads, native frames off) while the client calls describe_table back to back for that
long; the samples are grouped by where their innermost frame runs (event loop, HTTP parser,
ASGI framework, thread hop, this project, catalog client, ...), one table per thread kind.
"""

from __future__ import annotations

import argparse
import collections
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # the benchmarks dir is put on sys.path just above
    ServerProcess,
    alternate,
    environment,
    fmt_ratio,
    format_table,
    settle,
    write_json,
)

DB = "bench"
TABLES = 20
STACKS = {"h11+asyncio": ("h11", "asyncio"), "httptools+uvloop": ("httptools", "uvloop")}
EMULATOR_ATTRIBUTES = ("endpoint", "region", "access_key_id", "secret_access_key")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (cores: {os.cpu_count()})"


class RawClient:
    """One kept-alive HTTP/1.1 connection; a call sends prebuilt bytes and reads the answer
    by its Content-Length."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.address = (host, int(port))
        self.connect()

    def connect(self) -> None:
        """A new connection (the server closes one idle past its keep-alive timeout, 5 s)."""
        self.sock = socket.create_connection(self.address, timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def receive(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk

    @staticmethod
    def request(method: str, path: str, body: bytes = b"") -> bytes:
        head = f"{method} {path} HTTP/1.1\r\nHost: bench\r\n"
        if body or method == "POST":
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        return head.encode() + b"\r\n" + body

    def call(self, request: bytes) -> bytes:
        self.sock.sendall(request)
        data = self.buffer
        while (end := data.find(b"\r\n\r\n")) < 0:
            data += self.receive()
        head = data[:end]
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"the server answered {head[:200]!r}")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        body_end = end + 4 + length
        while len(data) < body_end:
            data += self.receive()
        self.buffer = data[body_end:]
        return data[end + 4 : body_end]

    def close(self) -> None:
        self.sock.close()


def start_server(
    impl: str, props: dict[str, str], http: str, loop: str, log: Path
) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "lance_metastore.cli", "--impl", impl]
    for key, value in props.items():
        command += ["--prop", f"{key}={value}"]
    command += ["serve", "--port", "0", "--http", http, "--loop", loop]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        env={**os.environ, "RUST_LOG": "error"},
    )
    url = (process.stdout.readline() if process.stdout else "").strip()
    if not url.startswith("http"):
        process.kill()
        raise RuntimeError(f"serve did not start: {log.read_text()[-2000:]}")
    return process, url


def prepare(namespace: Any) -> None:
    from lance_namespace import CreateNamespaceRequest, DeclareTableRequest

    namespace.create_namespace(CreateNamespaceRequest(id=[DB]))
    for i in range(TABLES):
        namespace.declare_table(DeclareTableRequest(id=[DB, f"t{i:04d}"]))


class HandedOver:
    """Calls run the way ``serve`` runs them, without HTTP: from the calling thread to an
    event loop on its own thread, from there to a worker thread, and back."""

    def __init__(self) -> None:
        import asyncio
        import concurrent.futures
        import threading

        import uvloop

        self.asyncio = asyncio
        self.loop = uvloop.new_event_loop()
        self.workers = concurrent.futures.ThreadPoolExecutor(4)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, function: Any, *args: Any) -> Any:
        async def handed() -> Any:
            return await self.loop.run_in_executor(self.workers, function, *args)

        return self.asyncio.run_coroutine_threadsafe(handed(), self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.workers.shutdown()


def measure(
    namespace: Any, clients: dict[str, RawClient], calls: int, handed: HandedOver
) -> dict[str, dict[str, float]]:
    """Median ms per call of every contender, for describe_table and /health."""
    from lance_namespace import DescribeTableRequest

    def request(i: int) -> Any:
        return DescribeTableRequest(id=[DB, f"t{i % TABLES:04d}"])

    def describe_in_process(i: int) -> Any:
        return namespace.describe_table(request(i))

    def describe_handed_over(i: int) -> Any:
        return handed.call(namespace.describe_table, request(i))

    describes = [
        RawClient.request("POST", f"/v1/table/{DB}$t{i:04d}/describe", b"{}") for i in range(TABLES)
    ]
    health = RawClient.request("GET", "/health")
    contenders: dict[str, Any] = {
        "in-process": describe_in_process,
        "in-process, handed over": describe_handed_over,
    }
    for name, client in clients.items():
        contenders[f"REST {name}"] = lambda i, c=client: c.call(describes[i % TABLES])
        contenders[f"/health {name}"] = lambda i, c=client: c.call(health)
    for i in range(10):  # warm: connections, caches, the server's threads
        for call in contenders.values():
            call(i)
    settle()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for i in range(calls):
        for name in alternate(i, list(contenders)):
            started = time.perf_counter()
            contenders[name](i)
            samples[name].append(time.perf_counter() - started)
    return {
        name: {"median_ms": statistics.median(values) * 1e3} for name, values in samples.items()
    }


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid``, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_call(
    namespace: Any, servers: dict[str, tuple[Any, str]], clients: dict[str, RawClient], calls: int
) -> dict[str, float]:
    """CPU ms per describe_table: of this process during the in-process calls and of each
    server process during its calls (all threads: Lance's and the catalog client's too),
    ``calls`` back to back each. CPU time does not count the time a thread waits for a core,
    so on a loaded machine it says what the server's own path costs better than latency."""
    from lance_namespace import DescribeTableRequest

    request = DescribeTableRequest(id=[DB, "t0001"])
    started = process_cpu_seconds(os.getpid())  # Lance's own threads count too
    for _ in range(calls):
        namespace.describe_table(request)
    result = {"in-process": (process_cpu_seconds(os.getpid()) - started) / calls * 1e3}
    describe = RawClient.request("POST", f"/v1/table/{DB}$t0001/describe", b"{}")
    for name, (process, _) in servers.items():
        clients[name].close()
        clients[name].connect()  # idle longer than the keep-alive timeout meanwhile
        before = process_cpu_seconds(process.pid)
        for _ in range(calls):
            clients[name].call(describe)
        result[f"REST {name}"] = (process_cpu_seconds(process.pid) - before) / calls * 1e3
    return result


# Where a sample's innermost frame runs, by the file's path (first match wins).
PLACES = [
    ("event loop (uvloop, asyncio)", ("uvloop", "asyncio/", "selectors.py")),
    ("HTTP (uvicorn, h11, httptools)", ("uvicorn/", "h11/", "httptools")),
    ("thread hop (anyio, threading, queue)", ("anyio/", "threading.py", "queue.py")),
    ("ASGI framework (starlette)", ("starlette/",)),
    ("metrics (prometheus_client)", ("prometheus_client/",)),
    ("logging (the audit line)", ("logging/",)),
    ("JSON and models", ("json/", "pydantic", "lance_namespace/", "lance_namespace_urllib3")),
    ("catalog client", ("thrift", "pymetastore", "botocore", "boto3", "urllib3", "lance/")),
    ("this project (lance_metastore)", ("lance_metastore/",)),
]
# Steps of a request on the event loop thread: samples with the step on the stack.
STEPS: list[tuple[str, Any]] = [
    ("the ASGI app (middleware, routing, endpoint)", lambda stack: "Starlette.__call__" in stack),
    ("choosing the route (routing.py)", lambda stack: "full_match" in stack),
    ("the audit line", lambda stack: "AuditMiddleware._log" in stack),
    ("authentication", lambda stack: "authenticate" in stack),
    (
        "HTTP parsing and writing, outside the app (uvicorn)",
        lambda stack: "uvicorn/protocols" in stack and "Starlette.__call__" not in stack,
    ),
]


def place_of(frame: str) -> str:
    for place, needles in PLACES:
        if any(needle in frame for needle in needles):
            return place
    return "other"


def profile(pid: int, client: RawClient, seconds: float, workdir: Path) -> dict[str, Any]:
    """py-spy's samples of ``pid`` while ``client`` calls describe_table back to back (samples
    of threads waiting, which py-spy recognises, left out)."""
    out = workdir / "profile.txt"
    command = [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid)]
    command += ["--format", "raw", "--rate", "500", "--duration", str(int(seconds))]
    command += ["--threads", "--output", str(out)]
    spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    request = RawClient.request("POST", f"/v1/table/{DB}$t0001/describe", b"{}")
    client.close()
    client.connect()
    time.sleep(0.5)  # py-spy attaches
    calls = 0
    while spy.poll() is None:
        client.call(request)
        calls += 1
    if spy.returncode != 0 or not out.exists():
        return {"error": (spy.stderr.read() if spy.stderr else "")[-500:]}
    places: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    steps: collections.Counter[str] = collections.Counter()
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        loop_thread = "MainThread" in frames[0] or "asyncio/runners.py" in stack
        thread = "event loop thread" if loop_thread else "worker threads"
        places[thread][place_of(frames[-1])] += int(count)
        if loop_thread:
            steps["all"] += int(count)
            for step, on_stack in STEPS:
                if on_stack(stack):
                    steps[step] += int(count)
    return {
        "calls": calls,
        "seconds": seconds,
        "places": {thread: dict(counts) for thread, counts in places.items()},
        "loop_steps": dict(steps),
    }


def print_profile(report: dict[str, Any]) -> None:
    if "error" in report:
        print(f"\nprofile: py-spy failed: {report['error']}")
        return
    print(
        f"\nprofile of the httptools+uvloop server: {report['calls']} describe_table calls in "
        f"{report['seconds']:g} s (py-spy, busy samples; place = the innermost frame's)"
    )
    for thread, counts in sorted(report["places"].items()):
        total = sum(counts.values()) or 1
        ordered = sorted(counts.items(), key=lambda item: -item[1])
        rows = [[place, str(n), f"{100 * n / total:.0f}%"] for place, n in ordered if n]
        print(f"{thread}:")
        print(format_table(["where", "samples", "share"], rows))
    steps = report["loop_steps"]
    total = steps.get("all", 0) or 1
    rows = [[step, f"{100 * steps.get(step, 0) / total:.0f}%"] for step, _ in STEPS]
    print("event loop thread, by step (a sample counts for every step on its stack):")
    print(format_table(["step", "share"], rows))


def catalog(backend: str, workdir: Path, stack: Any) -> tuple[str, dict[str, str]]:
    """The catalog to serve: its impl and properties (started here, stopped by ``stack``)."""
    root = str(workdir / "lake")
    if backend == "hive2":
        from lance_metastore.hive.local import LocalMetastore

        metastore = LocalMetastore(workdir / "hms")
        print("starting a local Hive Metastore 2.3 ...", file=sys.stderr, flush=True)
        metastore.start()
        stack.callback(metastore.stop)
        return "hive2", {"uri": metastore.uri, "root": root}
    if backend == "glue":
        emulator = ServerProcess("support.glue_emulator:GlueEmulator", EMULATOR_ATTRIBUTES).start()
        stack.callback(emulator.stop)
        info = emulator.info
        props = {key: info[key] for key in ("endpoint", "region")}
        props |= {"access_key_id": info["access_key_id"], "root": root}
        return "glue", props | {"secret_access_key": info["secret_access_key"]}
    return "dir", {"root": root}


def main() -> None:
    import contextlib

    from lance_namespace import connect

    import lance_metastore  # noqa: F401 - registers the aliases

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["hive2", "glue", "dir"], default="hive2")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", type=float, default=0, metavar="SECONDS")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()

    print(f"load average before: {load()}", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="bench_rest_overhead_"))
    with contextlib.ExitStack() as stack:
        impl, props = catalog(args.backend, workdir, stack)
        namespace = connect(impl, props)
        prepare(namespace)
        servers: dict[str, tuple[subprocess.Popen[str], str]] = {}
        for name, (http, loop) in STACKS.items():
            process, url = start_server(impl, props, http, loop, workdir / f"audit-{http}.log")
            servers[name] = (process, url)
            stack.callback(process.wait, 60)
            stack.callback(process.terminate)
        clients = {name: RawClient(url) for name, (_, url) in servers.items()}
        for client in clients.values():
            stack.callback(client.close)
        handed = HandedOver()
        stack.callback(handed.close)
        repeats: dict[str, list[float]] = collections.defaultdict(list)
        for repeat in range(args.repeat):
            for name, figures in measure(namespace, clients, args.calls, handed).items():
                repeats[name].append(figures["median_ms"])
            print(f"repeat {repeat + 1}/{args.repeat} done, load {load()}", flush=True)
        median = {name: statistics.median(values) for name, values in repeats.items()}
        local = median["in-process"]
        handed_ms = median["in-process, handed over"]
        rows = [["in-process", f"{local:.3f}", "", ""]]
        rows.append(
            ["in-process, handed over", f"{handed_ms:.3f}", f"{handed_ms - local:+.3f}", ""]
        )
        for name in STACKS:
            rest = median[f"REST {name}"]
            added = f"{rest - local:+.3f}"
            rows.append([f"REST {name}", f"{rest:.3f}", added, fmt_ratio(rest / local)])
        for name in STACKS:
            rows.append([f"/health {name}", f"{median[f'/health {name}']:.3f}", "", ""])
        old, new = (median[f"REST {name}"] - local for name in STACKS)
        print(
            f"\n{args.backend}: describe_table, median per call of {args.calls} calls, median of "
            f"{args.repeat} repeats (contenders alternated call by call)"
        )
        print(format_table(["contender", "ms", "adds ms", "REST/in-process"], rows))
        print(
            f"server's own time per describe_table: h11+asyncio {old:.3f} ms, httptools+uvloop "
            f"{new:.3f} ms ({fmt_ratio(new / old) if old > 0 else 'n/a'} of before; goal <= 0.5 ms)"
        )
        print(
            f"of which the thread handoffs alone (no HTTP) {handed_ms - local:.3f} ms; the "
            f"server's code and HTTP on httptools+uvloop {new - (handed_ms - local):.3f} ms"
        )
        cpu = cpu_per_call(namespace, servers, clients, max(args.calls * 3, 1000))
        rows = [[name, f"{ms:.3f}", f"{ms - cpu['in-process']:+.3f}"] for name, ms in cpu.items()]
        print(
            "\nCPU ms per describe_table (the calling process's, all threads: this one "
            "in-process, the server's through REST)"
        )
        print(format_table(["contender", "CPU ms", "REST adds CPU ms"], rows))
        report: dict[str, Any] = {
            "median_ms": median,
            "per_repeat_ms": dict(repeats),
            "cpu_ms_per_call": cpu,
        }
        if args.profile:
            process, _ = servers["httptools+uvloop"]
            report["profile"] = profile(
                process.pid, clients["httptools+uvloop"], args.profile, workdir
            )
            print_profile(report["profile"])
        print(f"\nload average after: {load()}")
        if args.json:
            write_json(args.json, report | {"args": vars(args), "environment": environment()})
            print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
