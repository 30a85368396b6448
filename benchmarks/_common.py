"""Helpers shared by the catalog benchmarks (Glue now, Hive later).

- :func:`add_tests_to_path`: make ``tests/support`` importable (the emulators live there).
- :class:`ServerProcess`: run a test server (an emulator class with ``start``/``stop`` or a
  context manager) in a child process, so its request threads do not share the benchmark's
  GIL; the child reports the attributes the benchmark needs (endpoint, credentials, ...).
- :func:`timed`, :func:`summarize`, :func:`ratio`, :func:`verdict`: timing and statistics.
- :func:`alternate`: fair ordering of the implementations, call by call;
  :func:`cpu_and_wall_rounds`: two contenders alternated, medians and paired ratios.
- :class:`RequestCounter`: count the requests each implementation sends (per boto3 client
  through its ``before-send`` events; any other botocore request, e.g. STS, through a
  process-wide hook), to break an operation down into catalog calls.
- :func:`format_table`, :func:`environment`, :func:`write_json`: reporting.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import math
import multiprocessing
import os
import platform
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"


def add_tests_to_path() -> None:
    """Put the repository's tests dir first on sys.path (``support.*`` becomes importable)."""
    path = str(TESTS)
    if path not in sys.path:
        sys.path.insert(0, path)


# --------------------------------------------------------------------------------------------
# A test server in a child process
# --------------------------------------------------------------------------------------------


def _serve(factory: str, paths: list[str], attributes: list[str], conn: Any) -> None:
    """Child process: start ``module:Class``, send back its attributes, wait for "stop"."""
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    module_name, class_name = factory.split(":")
    server = getattr(importlib.import_module(module_name), class_name)()
    try:
        server.start()
        conn.send({"ok": True, **{name: getattr(server, name) for name in attributes}})
    except BaseException as error:
        conn.send({"ok": False, "error": f"{type(error).__name__}: {error}"})
        raise
    try:
        conn.recv()  # "stop", or EOF when the parent dies
    except EOFError:
        pass
    finally:
        server.stop()


class ServerProcess:
    """A server class (``start()``/``stop()``) running in a spawned child process.

    ``ServerProcess("support.glue_emulator:GlueEmulator", ["endpoint", "region"])`` is a
    context manager whose ``info`` maps each attribute name to the child's value.
    """

    def __init__(self, factory: str, attributes: Sequence[str], timeout: float = 60.0) -> None:
        self.factory = factory
        self.attributes = list(attributes)
        self.timeout = timeout
        self.info: dict[str, Any] = {}
        self._process: Any = None
        self._conn: Any = None

    def start(self) -> ServerProcess:
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self._process = context.Process(
            target=_serve,
            args=(self.factory, [str(TESTS), *sys.path], self.attributes, child),
            daemon=True,
            name=f"bench-server-{self.factory}",
        )
        self._process.start()
        child.close()
        self._conn = parent
        if not parent.poll(self.timeout):
            self.stop()
            raise RuntimeError(f"{self.factory} did not start within {self.timeout}s")
        try:
            reply = parent.recv()
        except EOFError:
            code = self._process.exitcode
            self.stop()
            raise RuntimeError(f"{self.factory}: server process exited (code {code})") from None
        if not reply.pop("ok"):
            self.stop()
            raise RuntimeError(f"{self.factory} failed to start: {reply.get('error')}")
        self.info = reply
        return self

    def stop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError, BrokenPipeError):
                self._conn.send("stop")
            self._conn.close()
            self._conn = None
        if self._process is not None:
            self._process.join(15)
            if self._process.is_alive():
                self._process.terminate()
                self._process.join(5)
            self._process = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def in_process_server(factory: str, attributes: Sequence[str]) -> Iterator[dict[str, Any]]:
    """The same server in this process (its threads then compete with us for the GIL)."""
    add_tests_to_path()
    module_name, class_name = factory.split(":")
    server = getattr(importlib.import_module(module_name), class_name)()
    server.start()
    try:
        yield {name: getattr(server, name) for name in attributes}
    finally:
        server.stop()


# --------------------------------------------------------------------------------------------
# Timing and statistics
# --------------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of this thread, result) of one call.

    Wall time comes from ``time.perf_counter``. The calling thread's CPU time
    (``time.thread_time``) is the client-side cost alone: the server, in another process,
    and other load on the machine do not count in it.
    """
    cpu_start = time.thread_time()
    start = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - start
    return wall, time.thread_time() - cpu_start, result


def settle() -> None:
    """Between phases: collect garbage now, so a collection does not land in a timed call."""
    gc.collect()


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """Seconds in, a summary in milliseconds out (``total_ms`` is the sum of the samples)."""
    values = sorted(samples)
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "mean_ms": statistics.fmean(values) * 1e3,
        "median_ms": statistics.median(values) * 1e3,
        "p95_ms": percentile(values, 0.95) * 1e3,
        "min_ms": values[0] * 1e3,
        "max_ms": values[-1] * 1e3,
        "total_ms": math.fsum(values) * 1e3,
    }


def ratio(ours: float, peer: float) -> float:
    """ours / peer: below 1.0 means ours is faster."""
    if not peer or math.isnan(peer) or math.isnan(ours):
        return math.nan
    return ours / peer


def paired_ratio(ours: Sequence[float], peer: Sequence[float]) -> float:
    """Median over rounds of ours[i] / peer[i]: each round ran both back to back, so a load
    spike on the machine tends to hit both sides of a pair; NaN if the counts differ."""
    if not ours or len(ours) != len(peer):
        return math.nan
    return statistics.median(o / p for o, p in zip(ours, peer, strict=True) if p > 0)


def verdict(value: float, tolerance: float) -> str:
    """ "SLOWER" above the noise band 1 +/- tolerance, "faster" below it, "tie" within it,
    "n/a" without data."""
    if math.isnan(value):
        return "n/a"
    if value > 1.0 + tolerance:
        return "SLOWER"
    if value < 1.0 - tolerance:
        return "faster"
    return "tie"


def alternate(index: int, names: Sequence[str]) -> list[str]:
    """The order in which to run the implementations for call ``index``: rotated each time,
    so none is always first (warm server caches, connection reuse) or always second."""
    shift = index % len(names)
    return [*names[shift:], *names[:shift]]


def cpu_and_wall_rounds(
    contenders: Sequence[str],
    measure: Callable[[str], tuple[float, float]],
    rounds: int,
    repeat: int,
    describe: Callable[[dict[str, float]], str],
) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Two contenders measured ``rounds`` times each per repeat, in :func:`alternate` order.

    ``measure(name)`` answers (CPU seconds, wall seconds) of one run. Each repeat gives the
    medians of each side (``<name>_cpu_s``, ``<name>_wall_s``) and the :func:`paired_ratio` of
    the first contender to the second (``cpu_ratio``, ``wall_ratio``), printed with
    ``describe``; the answer is the medians over repeats, and the repeats."""
    first, second = contenders
    repeats: list[dict[str, float]] = []
    for _ in range(repeat):
        cpu: dict[str, list[float]] = {name: [] for name in contenders}
        wall: dict[str, list[float]] = {name: [] for name in contenders}
        for index in range(rounds):
            for name in alternate(index, list(contenders)):
                used, took = measure(name)
                cpu[name].append(used)
                wall[name].append(took)
        figures = {f"{name}_cpu_s": statistics.median(cpu[name]) for name in contenders}
        figures |= {f"{name}_wall_s": statistics.median(wall[name]) for name in contenders}
        figures["cpu_ratio"] = paired_ratio(cpu[first], cpu[second])
        figures["wall_ratio"] = paired_ratio(wall[first], wall[second])
        repeats.append(figures)
        print(f"repeat {len(repeats)}: {describe(figures)}")
    result = {key: statistics.median(r[key] for r in repeats) for key in repeats[0]}
    return result, repeats


# --------------------------------------------------------------------------------------------
# Counting catalog requests
# --------------------------------------------------------------------------------------------


class RequestCounter:
    """Requests sent by each implementation, by ``service:Operation``, per attempt.

    ``attach(label, client)`` registers a ``before-send`` handler on a boto3 client (fires once
    per HTTP attempt, retries included). ``watch_other_services()`` additionally counts, for
    the ``current`` label, requests of any other botocore client (e.g. an STS client built
    inside the implementation) through a process-wide hook on botocore's Endpoint.
    """

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = {}
        self.current: str | None = None
        self._attached: list[tuple[Any, str, str]] = []
        self._services: set[str] = set()

    def attach(self, label: str, client: Any, service: str = "glue") -> None:
        unique_id = f"bench-counter-{label}-{id(client)}"
        self.counts.setdefault(label, Counter())
        self._services.add(service)

        def on_send(event_name: str = "", **_: Any) -> None:
            # event_name: before-send.<service>.<Operation>
            operation = event_name.rsplit(".", 1)[-1]
            self.counts[label][f"{service}:{operation}"] += 1

        event = f"before-send.{service}"
        client.meta.events.register(event, on_send, unique_id=unique_id)
        self._attached.append((client, event, unique_id))

    def detach_all(self) -> None:
        for client, event, unique_id in self._attached:
            client.meta.events.unregister(event, unique_id=unique_id)
        self._attached.clear()

    @contextlib.contextmanager
    def watch_other_services(self) -> Iterator[None]:
        import botocore.endpoint

        original = botocore.endpoint.Endpoint._do_get_response
        counter = self

        def counting(endpoint: Any, request: Any, operation_model: Any, context: Any) -> Any:
            service = operation_model.service_model.endpoint_prefix
            if counter.current is not None and service not in counter._services:
                counter.counts.setdefault(counter.current, Counter())[
                    f"{service}:{operation_model.name}"
                ] += 1
            return original(endpoint, request, operation_model, context)

        botocore.endpoint.Endpoint._do_get_response = counting  # type: ignore[method-assign]
        try:
            yield
        finally:
            botocore.endpoint.Endpoint._do_get_response = original  # type: ignore[method-assign]

    @contextlib.contextmanager
    def measure(self, label: str) -> Iterator[Counter[str]]:
        """Yield a Counter that, on exit, holds the requests ``label`` sent inside the block."""
        before = Counter(self.counts.setdefault(label, Counter()))
        delta: Counter[str] = Counter()
        previous, self.current = self.current, label
        try:
            yield delta
        finally:
            self.current = previous
            delta.update(self.counts[label])
            delta.subtract(before)
            for key in [k for k, v in delta.items() if v <= 0]:
                del delta[key]


def per_call(counts: Counter[str], calls: int) -> dict[str, float]:
    """Requests per operation call, by ``service:Operation``."""
    return {key: counts[key] / calls for key in sorted(counts)}


def describe_calls(breakdown: dict[str, float]) -> str:
    """``GetDatabase x2 + CreateTable x1 = 3`` (the service prefix dropped for Glue)."""
    if not breakdown:
        return "none = 0"
    parts = []
    for key, value in breakdown.items():
        name = key.split(":", 1)[1] if key.startswith("glue:") else key
        parts.append(f"{name} x{_number(value)}")
    return " + ".join(parts) + f" = {_number(sum(breakdown.values()))}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        out = [cells[0].ljust(widths[0])]
        out += [cell.rjust(widths[i]) for i, cell in enumerate(cells[1:], start=1)]
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def ms(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.2f}" if value < 1000 else f"{value:.0f}"


def fmt_ratio(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.2f}" if value >= 0.01 else f"{value:.4f}"


def environment() -> dict[str, Any]:
    """What the numbers were measured on."""
    from importlib import metadata

    versions = {}
    for package in (
        "lance-metastore",
        "lance-namespace",
        "lance-namespace-impls",
        "boto3",
        "botocore",
        "moto",
        "pylance",
    ):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "packages": versions,
    }


def write_json(path: str, data: Any) -> None:
    def default(value: Any) -> Any:
        if isinstance(value, float) and math.isnan(value):
            return None
        return str(value)

    text = json.dumps(_nan_to_none(data), indent=2, sort_keys=False, default=default)
    Path(path).write_text(text + "\n", encoding="utf-8")


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_to_none(v) for v in value]
    return value
