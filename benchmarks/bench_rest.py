"""REST server benchmark: the same namespace in-process vs through ``lance-metastore serve``.

Run from the repository root, in the project's venv (``test`` extra: moto[server])::

    python benchmarks/bench_rest.py [--backend glue|dir] [--tables 100] [--calls 200]
                                    [--repeat 3] [--seconds 3] [--json out.json]

Contenders, both on the same catalog:

- in-process: the namespace object in this process (``lance_namespace.connect("glue", ...)``,
  or pylance's ``DirectoryNamespace`` with ``--backend dir``);
- REST: pylance's Rust REST client (``lance_namespace.connect("rest", {"uri": ...})``) talking
  over loopback to ``lance-metastore serve`` in a child process (audit log on, written to a
  file), which serves the same namespace.

With ``--backend glue`` (default) the catalog is the Glue emulator (moto's server) in a child
process; with ``--backend dir`` it is a local directory, which isolates the server's own cost.

Measured, per repeat (medians of the repeats are reported):

- describe_table of one of ``--tables`` tables, and list_tables with ``limit=100``: ``--calls``
  calls per contender, alternated call by call (the order rotates every call); the added cost
  per call is median(REST) - median(in-process) (goal: at most 2 ms on loopback);
- requests per second of describe_table with 1 and 16 concurrent clients for ``--seconds``
  each (each client a thread with its own connection), REST and in-process alternated by
  repeat.

- the server's peak memory under decompression bombs (``--bomb-only`` runs just this): a
  second ``serve`` with ``--max-body-mb 1`` gets ``--bombs`` bodies of ~58 KB of zstd Arrow IPC
  that decode to 1 GiB each (``tests/support/hostile.py``), to ``create`` and ``insert``; its
  peak resident memory (``VmHWM``) before and after is reported, next to the peak of a child
  process that decodes one bomb whole (what the server did before it had a decoded limit).

- the cost of authentication and the policy (``--auth-only`` runs just this): three ``serve``
  children on the same catalog, without auth, with ``--tokens-file`` and ``--policy-file``, and
  with ``--jwt-jwks`` (RS256) and ``--policy-file`` (``--principals`` principals, two grants
  each), each called by pylance's REST client with its credentials, alternated call by call:
  describe_table and list_tables; the added cost per call is median(auth) - median(open) (goal:
  under 0.2 ms), next to the same checks timed in-process (no network) per call. Vended
  describe_table (issue 26) is measured on the same pattern by ``benchmarks/bench_vending.py``.

The load average is printed before and after: on a shared machine, read the ratios, which
both sides of a pair share, more than the absolute numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    TESTS,
    ServerProcess,
    add_tests_to_path,
    alternate,
    environment,
    fmt_ratio,
    format_table,
    ms,
    settle,
    summarize,
    write_json,
)

EMULATOR_ATTRIBUTES = ("endpoint", "region", "access_key_id", "secret_access_key")
DB = "bench"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (cores: {os.cpu_count()})"


def start_server(
    impl: str, props: dict[str, str], audit_log: Path, *serve_options: str
) -> tuple[subprocess.Popen, str]:
    """``lance-metastore serve`` in a child process; returns it and the URL it printed."""
    command = [sys.executable, "-m", "lance_metastore.cli", "--impl", impl]
    for key, value in props.items():
        command += ["--prop", f"{key}={value}"]
    command += ["serve", "--port", "0", *serve_options]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=audit_log.open("w"),
        text=True,
        env={**os.environ, "RUST_LOG": "error"},
    )
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise RuntimeError(f"serve did not start: {audit_log.read_text()[-2000:]}")
    return process, url


def connect_pair(impl: str, props: dict[str, str], url: str) -> dict[str, Callable[[], Any]]:
    from lance_namespace import connect

    import lance_metastore  # noqa: F401 - registers the aliases

    def in_process() -> Any:
        return connect(impl, props)

    def rest() -> Any:
        return connect("rest", {"uri": url})

    return {"in-process": in_process, "REST": rest}


def latency(
    factories: dict[str, Callable[[], Any]], calls: int, tables: int
) -> dict[str, dict[str, list[float]]]:
    """Per operation and contender: the wall time of each call, alternated call by call."""
    from lance_namespace import DescribeTableRequest, ListTablesRequest

    clients = {name: factory() for name, factory in factories.items()}
    requests = {
        "describe_table": lambda i: (
            "describe_table",
            DescribeTableRequest(id=[DB, f"t{i % tables:04d}"]),
        ),
        "list_tables (limit 100)": lambda i: ("list_tables", ListTablesRequest(id=[DB], limit=100)),
    }
    samples: dict[str, dict[str, list[float]]] = {}
    for label, make in requests.items():
        for client in clients.values():  # warm: connections, caches, first-call costs
            for i in range(5):
                method, request = make(i)
                getattr(client, method)(request)
        settle()
        samples[label] = {name: [] for name in clients}
        for i in range(calls):
            method, request = make(i)
            for name in alternate(i, list(clients)):
                call = getattr(clients[name], method)
                start = time.perf_counter()
                call(request)
                samples[label][name].append(time.perf_counter() - start)
    return samples


def throughput(factory: Callable[[], Any], clients: int, seconds: float, tables: int) -> float:
    """describe_table calls per second, ``clients`` threads each with its own client."""
    from lance_namespace import DescribeTableRequest

    own = [factory() for _ in range(clients)]
    for client in own:
        client.describe_table(DescribeTableRequest(id=[DB, "t0000"]))
    counts = [0] * clients
    errors: list[BaseException] = []
    stop = threading.Event()
    barrier = threading.Barrier(clients + 1)

    def work(index: int) -> None:
        client = own[index]
        barrier.wait()
        i = index
        try:
            while not stop.is_set():
                client.describe_table(DescribeTableRequest(id=[DB, f"t{i % tables:04d}"]))
                counts[index] += 1
                i += clients
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    settle()
    barrier.wait()
    started = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return sum(counts) / elapsed


_DECODE_WHOLE = """
import sys
import pyarrow.ipc as ipc
sys.path.insert(0, sys.argv[1])
from support.hostile import decompression_bomb, peak_rss_mib
body = decompression_bomb(1024)
before = peak_rss_mib("self")
table = ipc.open_stream(body).read_all()
print(peak_rss_mib("self") - before)
"""


def bomb_memory(impl: str, props: dict[str, str], workdir: Path, bombs: int) -> dict[str, Any]:
    """Peak RSS of a ``serve --max-body-mb 1`` child before and after ``bombs`` 1 GiB bombs."""
    import httpx

    add_tests_to_path()
    from support.hostile import decompression_bomb, peak_rss_mib

    body = decompression_bomb(1024)
    server, url = start_server(impl, props, workdir / "audit-bomb.log", "--max-body-mb", "1")
    try:
        with httpx.Client(base_url=url, timeout=120) as http:
            table = f"{DB}$bombed"
            target = http.post(f"/v1/table/{DB}$t0000/describe", json={})
            assert target.status_code == 200, target.text
            before = peak_rss_mib(server.pid)
            statuses = set()
            started = time.perf_counter()
            for i in range(bombs):
                route = f"/v1/table/{table}/create" if i % 2 else f"/v1/table/{DB}$t0000/insert"
                statuses.add(http.post(route, content=body).status_code)
            seconds = (time.perf_counter() - started) / bombs
            after = peak_rss_mib(server.pid)
    finally:
        server.terminate()
        server.wait(60)
    decode = subprocess.run(
        [sys.executable, "-c", _DECODE_WHOLE, str(TESTS)],
        capture_output=True,
        text=True,
        check=True,
    )
    return {
        "bombs": bombs,
        "body_bytes": len(body),
        "decoded_bytes": 1 << 30,
        "statuses": sorted(statuses),
        "server_peak_rss_before_mib": before,
        "server_peak_rss_after_mib": after,
        "ms_per_bomb": seconds * 1000,
        "decode_whole_peak_growth_mib": float(decode.stdout.strip()),
    }


def print_bomb_report(report: dict[str, Any]) -> None:
    print(
        f"\ndecompression bombs: {report['bombs']} bodies of {report['body_bytes']} bytes "
        f"decoding to 1 GiB each, answered {report['statuses']} in "
        f"{report['ms_per_bomb']:.1f} ms each"
    )
    growth = report["server_peak_rss_after_mib"] - report["server_peak_rss_before_mib"]
    print(
        format_table(
            ["", "peak RSS MiB"],
            [
                ["server before", f"{report['server_peak_rss_before_mib']:.0f}"],
                ["server after", f"{report['server_peak_rss_after_mib']:.0f}"],
                ["server growth", f"{growth:.0f}"],
                ["decoding one whole", f"+{report['decode_whole_peak_growth_mib']:.0f}"],
            ],
        )
    )


def auth_cost(
    impl: str,
    props: dict[str, str],
    workdir: Path,
    calls: int,
    repeat: int,
    tables: int,
    principals: int,
) -> dict[str, Any]:
    """Per call, what authentication and the policy add: the same server without auth, with
    bearer tokens + policy, with JWT + policy (pylance's REST client, alternated call by call)."""
    add_tests_to_path()
    from lance_namespace import DescribeTableRequest, ListTablesRequest, connect
    from support.access_kit import AUDIENCE, ISSUER, SigningKey, jwks, policy_file, private_file

    key = SigningKey("bench-key")
    names = ["bench"] + [f"p{n:04d}" for n in range(principals - 1)]
    secrets = {name: f"tok-{name}-{'x' * 32}" for name in names}
    tokens = private_file(workdir / "tokens.json", secrets)
    grants = [(name, [DB], "read") for name in names]
    grants += [(name, ["other"], "write") for name in names]
    policy = policy_file(workdir / "policy.json", grants)
    jwks_file = private_file(workdir / "jwks.json", jwks(key))
    with_policy = ("--policy-file", str(policy))
    setups: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
        "open": ((), {}),
        "bearer+policy": (
            ("--tokens-file", str(tokens), *with_policy),
            {"header.Authorization": f"Bearer tok-bench-{'x' * 32}"},
        ),
        "jwt+policy": (
            (
                *("--jwt-jwks", str(jwks_file), "--jwt-issuer", ISSUER),
                *("--jwt-audience", AUDIENCE, *with_policy),
            ),
            {"header.Authorization": f"Bearer {key.token('bench', exp=int(time.time()) + 86400)}"},
        ),
    }
    servers, clients = [], {}
    try:
        for name, (options, headers) in setups.items():
            server, url = start_server(impl, props, workdir / f"audit-{name}.log", *options)
            servers.append(server)
            clients[name] = connect("rest", {"uri": url, **headers})
        requests = {
            "describe_table": lambda i: (
                "describe_table",
                DescribeTableRequest(id=[DB, f"t{i % tables:04d}"]),
            ),
            "list_tables (limit 100)": lambda i: (
                "list_tables",
                ListTablesRequest(id=[DB], limit=100),
            ),
        }
        medians: dict[str, dict[str, list[float]]] = {
            label: {name: [] for name in clients} for label in requests
        }
        for run in range(repeat):
            for label, make in requests.items():
                samples: dict[str, list[float]] = {name: [] for name in clients}
                for i in range(5):  # warm
                    for client in clients.values():
                        method, request = make(i)
                        getattr(client, method)(request)
                settle()
                for i in range(calls):
                    method, request = make(i)
                    for name in alternate(i, list(clients)):
                        call = getattr(clients[name], method)
                        start = time.perf_counter()
                        call(request)
                        samples[name].append(time.perf_counter() - start)
                for name, values in samples.items():
                    medians[label][name].append(summarize(values)["median_ms"])
            print(f"auth repeat {run + 1}/{repeat} done, load {load()}", flush=True)
    finally:
        for server in servers:
            server.terminate()
            server.wait(60)
    return {"latency": medians, "in_process_us": _checks_in_process(tokens, policy, key)}


def _checks_in_process(tokens: Path, policy: Path, key: Any) -> dict[str, float]:
    """The same checks without a network: authenticate + decide, microseconds per call."""
    import asyncio

    from support.access_kit import AUDIENCE, ISSUER

    from lance_metastore.rest import AccessControl, BearerTokens, JwtBearer

    jwks_file = tokens.parent / "jwks.json"
    bearer = AccessControl([BearerTokens(file=str(tokens))], str(policy))
    signed = AccessControl(
        [JwtBearer(issuer=ISSUER, audience=AUDIENCE, jwks=str(jwks_file))], str(policy)
    )
    cases = {
        "bearer+policy": (bearer, {b"authorization": f"Bearer tok-bench-{'x' * 32}".encode()}),
        "jwt+policy": (signed, {b"authorization": f"Bearer {key.token('bench')}".encode()}),
    }
    loop = asyncio.new_event_loop()
    result = {}
    rounds = 2000
    try:
        for name, (access, headers) in cases.items():

            async def run(access: Any = access, headers: Any = headers) -> None:
                for _ in range(rounds):
                    principal = await access.authenticate(headers)
                    assert access.check(principal, "describe_table", [DB, "t0001"]) is None

            started = time.perf_counter()
            loop.run_until_complete(run())
            result[name] = (time.perf_counter() - started) / rounds * 1e6
    finally:
        loop.close()
    return result


def print_auth_report(report: dict[str, Any], calls: int, repeat: int, principals: int) -> None:
    rows = []
    for label, by_name in report["latency"].items():
        base = statistics.median(by_name["open"])
        for name in ("bearer+policy", "jwt+policy"):
            value = statistics.median(by_name[name])
            added = ms(value - base)
            rows.append([label, name, ms(base), ms(value), added, fmt_ratio(value / base)])
    print(
        f"\nauth and policy ({principals} principals, {2 * principals} grants): median per call "
        f"over {repeat} repeats of {calls} calls, alternated"
    )
    headers = ["operation", "auth", "open ms", "auth ms", "added ms", "auth/open"]
    print(format_table(headers, rows))
    print("in-process authenticate + decide per call (no network):")
    for name, micros in report["in_process_us"].items():
        print(f"  {name}: {micros:.1f} us")


def prepare(impl: str, props: dict[str, str], tables: int) -> None:
    from lance_namespace import connect

    import lance_metastore  # noqa: F401

    namespace = connect(impl, props)
    namespace.create_namespace({"id": [DB]} if impl != "dir" else _model_create())
    for i in range(tables):
        request = {"id": [DB, f"t{i:04d}"]}
        namespace.declare_table(request if impl != "dir" else _model_declare(request))


def _model_create() -> Any:
    from lance_namespace import CreateNamespaceRequest

    return CreateNamespaceRequest(id=[DB])


def _model_declare(request: dict[str, Any]) -> Any:
    from lance_namespace import DeclareTableRequest

    return DeclareTableRequest(**request)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["glue", "dir"], default="glue")
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--bombs", type=int, default=6)
    parser.add_argument("--bomb-only", action="store_true", help="only the bomb memory check")
    parser.add_argument("--auth-only", action="store_true", help="only the auth/policy cost")
    parser.add_argument("--principals", type=int, default=100, help="in the auth files")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()

    print(f"load average before: {load()}")
    workdir = Path(tempfile.mkdtemp(prefix="bench_rest_"))
    emulator = None
    if args.backend == "glue":
        emulator = ServerProcess("support.glue_emulator:GlueEmulator", EMULATOR_ATTRIBUTES).start()
        info = emulator.info
        impl = "glue"
        props = {
            "endpoint": info["endpoint"],
            "region": info["region"],
            "access_key_id": info["access_key_id"],
            "secret_access_key": info["secret_access_key"],
            "root": str(workdir / "lake"),
        }
    else:
        impl, props = "dir", {"root": str(workdir / "lake")}
    server = None
    try:
        prepare(impl, props, args.tables)
        if args.bomb_only:
            bombs = bomb_memory(impl, props, workdir, args.bombs)
            print_bomb_report(bombs)
            if args.json:
                write_json(args.json, {"bombs": bombs, "args": vars(args), "load": load()})
            return
        if args.auth_only:
            auth = auth_cost(
                impl, props, workdir, args.calls, args.repeat, args.tables, args.principals
            )
            print_auth_report(auth, args.calls, args.repeat, args.principals)
            print(f"\nload average after: {load()}")
            if args.json:
                report = {"auth": auth, "args": vars(args), "environment": environment()}
                write_json(args.json, report | {"load": load()})
            return
        server, url = start_server(impl, props, workdir / "audit.log")
        factories = connect_pair(impl, props, url)

        per_repeat: dict[str, dict[str, list[float]]] = {}
        rates: dict[str, dict[str, list[float]]] = {
            f"{n} client{'s' if n > 1 else ''}": {name: [] for name in factories} for n in (1, 16)
        }
        for repeat in range(args.repeat):
            for label, by_name in latency(factories, args.calls, args.tables).items():
                slot = per_repeat.setdefault(label, {name: [] for name in factories})
                for name, samples in by_name.items():
                    slot[name].append(summarize(samples)["median_ms"])
            for clients, label in zip((1, 16), rates, strict=True):
                for name in alternate(repeat, list(factories)):
                    rate = throughput(factories[name], clients, args.seconds, args.tables)
                    rates[label][name].append(rate)
            print(f"repeat {repeat + 1}/{args.repeat} done, load {load()}", flush=True)

        rows, report = [], {"latency": {}, "throughput": {}}
        for label, by_name in per_repeat.items():
            local = statistics.median(by_name["in-process"])
            remote = statistics.median(by_name["REST"])
            rows.append(
                [label, ms(local), ms(remote), ms(remote - local), fmt_ratio(remote / local)]
            )
            report["latency"][label] = {
                "in_process_ms": local,
                "rest_ms": remote,
                "added_ms": remote - local,
                "ratio": remote / local,
                "per_repeat": by_name,
            }
        print(f"\n{args.backend}: median per call over {args.repeat} repeats of {args.calls} calls")
        print(
            format_table(
                ["operation", "in-process ms", "REST ms", "added ms", "REST/in-process"], rows
            )
        )
        rows = []
        for label, by_name in rates.items():
            local = statistics.median(by_name["in-process"])
            remote = statistics.median(by_name["REST"])
            rows.append([label, f"{local:.0f}", f"{remote:.0f}", fmt_ratio(remote / local)])
            report["throughput"][label] = {
                "in_process_rps": local,
                "rest_rps": remote,
                "ratio": remote / local,
                "per_repeat": by_name,
            }
        print(f"\ndescribe_table requests/s, median of {args.repeat} runs of {args.seconds:g} s")
        print(format_table(["clients", "in-process", "REST", "REST/in-process"], rows))
        report["bombs"] = bomb_memory(impl, props, workdir, args.bombs)
        print_bomb_report(report["bombs"])
        report["auth"] = auth_cost(
            impl, props, workdir, args.calls, args.repeat, args.tables, args.principals
        )
        print_auth_report(report["auth"], args.calls, args.repeat, args.principals)
        print(f"\nload average after: {load()}")
        if args.json:
            report |= {"args": vars(args), "environment": environment(), "load": load()}
            write_json(args.json, report)
            print(f"wrote {args.json}")
    finally:
        if server is not None:
            server.terminate()
            server.wait(60)
        if emulator is not None:
            emulator.stop()


if __name__ == "__main__":
    main()
