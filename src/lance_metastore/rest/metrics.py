"""``/metrics``, ``/health`` and ``/ready``: what an operator scrapes and probes.

Metrics go through the maintained ``prometheus-client``. With several worker processes
(``serve --workers N``) each worker writes its values to files under
``PROMETHEUS_MULTIPROC_DIR`` (set by ``serve`` before the workers start) and a scrape, whichever
worker answers it, adds up every worker's files; otherwise the process's own registry answers.

What is measured (every name starts ``lance_``):

- ``rest_requests_total{operation,status,code}`` and ``rest_request_seconds{operation}``: each
  answered request (``code`` is the spec's error code, ``-`` for a success);
- ``rest_in_flight_requests``, ``rest_open_connections``, ``rest_refusals_total{reason}``
  (connection limit, read timeouts, per-caller limits);
- ``catalog_calls_total{backend,call,outcome}`` and ``catalog_call_seconds{backend,call}``:
  each catalog primitive (a Glue or metastore round trip) whatever operation made it;
- ``commit_events_total{event}``: managed-commit conflicts (answered 14), retries made at
  once by the server, versions adopted from storage;
- ``vending_cache_total{result}`` (hit, miss) and ``outside_call_seconds{call,outcome}`` (STS).

``/metrics`` answers only loopback callers unless the server was given a metrics token, which
callers then present as ``Authorization: Bearer <token>`` from anywhere. ``/health`` says the
process answers; ``/ready`` that the catalog answered a small listing within a bound, the
verdict kept for a couple of seconds so probes cost the catalog nothing much.
"""

from __future__ import annotations

import hmac
import os
import time
from typing import Any

from lance_namespace import ListNamespacesRequest
from lance_namespace.errors import ErrorCode, LanceNamespaceError

from ..rules import observe
from ..rules.extras import requires_extra
from ..rules.loopback import is_loopback
from .offload import WorkerPool
from .security import ASGIApp, Message, Receive, Scope, Send, note, noted
from .statuses import http_status

with requires_extra("server"):
    import anyio
    from prometheus_client import (
        CONTENT_TYPE_LATEST,
        REGISTRY,
        CollectorRegistry,
        Counter,
        Gauge,
        Histogram,
        generate_latest,
    )
    from prometheus_client import multiprocess as prometheus_multiprocess
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

REQUESTS = Counter(
    "lance_rest_requests",
    "Requests answered, by operation, HTTP status and spec error code (- for success)",
    ["operation", "status", "code"],
)
REQUEST_SECONDS = Histogram(
    "lance_rest_request_seconds",
    "Time from a request's arrival to its answer, by operation",
    ["operation"],
    buckets=LATENCY_BUCKETS,
)
IN_FLIGHT = Gauge(
    "lance_rest_in_flight_requests", "Requests being worked on", multiprocess_mode="livesum"
)
POOL_CALLS = Gauge(
    "lance_rest_pool_calls",
    "Calls handed to a worker pool and not finished (running or waiting for a thread), by pool",
    ["pool"],
    multiprocess_mode="livesum",
)
OPEN_CONNECTIONS = Gauge(
    "lance_rest_open_connections", "Open client connections", multiprocess_mode="livesum"
)
REFUSALS = Counter(
    "lance_rest_refusals",
    "Connections or requests refused before the application saw them, by reason",
    ["reason"],
)
CATALOG_CALLS = Counter(
    "lance_catalog_calls",
    "Catalog primitives called (Glue or metastore round trips), by backend, call and outcome",
    ["backend", "call", "outcome"],
)
CATALOG_SECONDS = Histogram(
    "lance_catalog_call_seconds",
    "Latency of catalog primitives, by backend and call",
    ["backend", "call"],
    buckets=LATENCY_BUCKETS,
)
COMMIT_EVENTS = Counter(
    "lance_commit_events",
    "Managed commits: conflicts answered 14, retries made at once, versions adopted",
    ["event"],
)
VENDING_CACHE = Counter(
    "lance_vending_cache", "Credential vending answers, from the cache or not", ["result"]
)
OUTSIDE_SECONDS = Histogram(
    "lance_outside_call_seconds",
    "Latency of calls to other services (STS AssumeRole), by call and outcome",
    ["call", "outcome"],
    buckets=LATENCY_BUCKETS,
)

_EVENTS = {
    "commit_conflict": (COMMIT_EVENTS, "conflict"),
    "commit_retry": (COMMIT_EVENTS, "retry"),
    "commit_adoption": (COMMIT_EVENTS, "adoption"),
    "vending_hit": (VENDING_CACHE, "hit"),
    "vending_miss": (VENDING_CACHE, "miss"),
}


class PrometheusListener:
    """Reports of the library (``observe.py``) as Prometheus metrics."""

    def catalog_call(self, backend: str, call: str, seconds: float, ok: bool) -> None:
        CATALOG_CALLS.labels(backend, call, "ok" if ok else "error").inc()
        CATALOG_SECONDS.labels(backend, call).observe(seconds)

    def event(self, name: str) -> None:
        counter, label = _EVENTS.get(name, (None, ""))
        if counter is not None:
            counter.labels(label).inc()

    def timing(self, name: str, seconds: float, ok: bool) -> None:
        OUTSIDE_SECONDS.labels(name, "ok" if ok else "error").observe(seconds)


def install() -> None:
    """Send the library's reports to these metrics (idempotent)."""
    observe.listen(PrometheusListener())


def refused(reason: str) -> None:
    REFUSALS.labels(reason).inc()


class MetricsMiddleware:
    """Counts and times every request, from the facts the endpoints noted for the audit line
    (the operation, the spec code); the outermost layer, so refusals are counted too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        IN_FLIGHT.inc()
        try:
            await self.app(scope, receive, recording_send)
        finally:
            IN_FLIGHT.dec()
            operation = noted(scope, "operation") or "unrouted"
            code = noted(scope, "code")
            REQUESTS.labels(operation, str(status), "-" if code is None else str(code)).inc()
            REQUEST_SECONDS.labels(operation).observe(time.perf_counter() - started)


def exposition() -> tuple[bytes, str]:
    """The metrics text: every worker's when several share the port."""
    if os.environ.get(MULTIPROCESS_DIR_ENV):
        registry = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def metrics_endpoint(token: str | None) -> Any:
    """``/metrics``: loopback callers only, or (with ``token``) callers presenting it."""
    expected = f"Bearer {token}".encode() if token else None

    async def metrics(request: Request) -> Response:
        note(request.scope, operation="metrics")
        if expected is not None:
            presented = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(presented, expected):
                return _refusal(16, "The metrics need the metrics token", request)
        else:
            client = request.scope.get("client")
            if not client or not is_loopback(client[0]):
                return _refusal(15, "The metrics answer loopback callers only", request)
        body, content_type = exposition()
        return Response(body, media_type=content_type)

    return metrics


def _refusal(code: int, message: str, request: Request) -> Response:
    note(request.scope, code=code)
    return JSONResponse({"error": message, "code": code}, status_code=http_status(code))


class Readiness:
    """``/ready``: the catalog answered a one-entry listing of the root within ``bound_seconds``
    (503 otherwise); the verdict is reused for ``cache_seconds``, and concurrent probes wait
    for one check."""

    def __init__(
        self,
        namespace: Any,
        pool: WorkerPool,
        bound_seconds: float = 2.0,
        cache_seconds: float = 2.0,
    ) -> None:
        self.namespace = namespace
        self.pool = pool
        self.bound_seconds = bound_seconds
        self.cache_seconds = cache_seconds
        self._verdict: tuple[float, bool, str] | None = None
        self._lock: anyio.Lock | None = None

    async def endpoint(self, request: Request) -> Response:
        note(request.scope, operation="ready")
        ready, why = await self.check()
        return JSONResponse(
            {"status": "ready" if ready else "unavailable", **({} if ready else {"reason": why})},
            status_code=200 if ready else 503,
        )

    async def check(self) -> tuple[bool, str]:
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            now = time.monotonic()
            if self._verdict is not None and now - self._verdict[0] < self.cache_seconds:
                return self._verdict[1], self._verdict[2]
            ready, why = await self._probe()
            self._verdict = (time.monotonic(), ready, why)
            return ready, why

    async def _probe(self) -> tuple[bool, str]:
        request = ListNamespacesRequest(id=[], limit=1)
        try:
            with anyio.fail_after(self.bound_seconds):
                await self.pool.run(self.namespace.list_namespaces, request, abandon_on_cancel=True)
        except TimeoutError:
            return False, f"the catalog did not answer within {self.bound_seconds:g} s"
        except LanceNamespaceError as error:
            if error.code in (ErrorCode.SERVICE_UNAVAILABLE, ErrorCode.INTERNAL):
                return False, f"the catalog failed a listing (code {int(error.code)})"
            return True, ""  # it answered, if only to refuse
        except Exception:
            return False, "the catalog failed a listing"
        return True, ""
