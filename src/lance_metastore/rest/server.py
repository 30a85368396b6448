"""Running the app: ``serve`` for the command line (blocks, stops cleanly on SIGTERM) and
``RestServer`` for tests and embedding (a context manager, on a background thread).

Both bind the socket themselves before uvicorn starts, so port 0 gives an OS-chosen port whose
URL is known (and printed) before the first request can arrive.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any, TextIO

from lance_namespace import LanceNamespace

from ..rules.extras import requires_extra
from ..rules.loopback import is_loopback
from .access import AccessControl
from .app import access_with_token, create_app
from .connections import ClientLimits, http_implementation, resolved_implementation
from .fairness import DEFAULT_PER_ADDRESS_IN_FLIGHT, DEFAULT_PER_PRINCIPAL_IN_FLIGHT
from .offload import DEFAULT_MAX_JSON_BYTES, DEFAULT_WORKER_THREADS
from .security import AUDIT_LOGGER, DEFAULT_MAX_BODY_BYTES

with requires_extra("server"):
    import uvicorn

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 2333  # the spec's default port
# How long SIGTERM waits for in-flight requests before closing them.
GRACEFUL_SHUTDOWN_SECONDS = 30


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: the OS chooses)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say
    # so, and with Nagle on every keep-alive response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class ExposureError(ValueError):
    """A server that would answer anyone on the network, unauthenticated, unasked."""


def check_exposure(host: str, authentication: object, insecure: bool) -> None:
    """Refuse to serve beyond loopback without authentication (``authentication``: a token, an
    :class:`AccessControl`, anything true when callers must authenticate), unless ``insecure``."""
    if isinstance(authentication, AccessControl):
        authentication = authentication.authenticates
    if authentication or insecure or is_loopback(host):
        return
    raise ExposureError(
        f"Refusing to serve on {host} without authentication: anyone who reaches it could "
        "read, change and drop every table. Configure authentication (--auth-token-file, "
        "--tokens-file, --api-keys-file, --jwt-jwks or --auth-scheme), or pass --insecure "
        "to serve it unauthenticated anyway"
    )


# The event loops (``loop``): "auto" is uvloop when installed, else asyncio's own.
LOOP_IMPLEMENTATIONS = ("auto", "asyncio", "uvloop")


def loop_implementation(loop: str = "auto") -> str:
    """``loop`` resolved: ``auto`` becomes ``uvloop`` when it is installed, else ``asyncio``."""
    return resolved_implementation("loop", loop, LOOP_IMPLEMENTATIONS)


def url_of(sock: socket.socket, tls: bool) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}"


def _config(
    app: Any,
    tls_cert: str | None,
    tls_key: str | None,
    log_level: str,
    limits: ClientLimits | None = None,
    http: str = "auto",
    loop: str = "auto",
) -> uvicorn.Config:
    """uvicorn's configuration. ``http`` (h11, httptools) and ``loop`` (asyncio, uvloop):
    ``auto`` takes the C implementations when installed (about a third less of the server's
    own CPU per request, see benchmarks/bench_rest_overhead.py); the limits hold on either."""
    if bool(tls_cert) != bool(tls_key):
        raise ValueError("TLS needs both a certificate and its key (--tls-cert and --tls-key)")
    limits = limits or ClientLimits()
    return uvicorn.Config(
        app,
        http=limits.protocol(http_implementation(http)),
        loop=loop_implementation(loop),
        timeout_keep_alive=limits.keep_alive_timeout,
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        log_config=None,  # the host application's logging decides; the audit log replaces
        access_log=False,  # uvicorn's access log
        log_level=log_level,
        server_header=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        lifespan="off",
    )


def audit_to(stream: TextIO) -> None:
    """Send the audit log, one bare line per request, to ``stream`` (only there)."""
    audit = logging.getLogger(AUDIT_LOGGER)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    audit.handlers = [handler]
    audit.setLevel(logging.INFO)
    audit.propagate = False


class _Server(uvicorn.Server):
    """uvicorn's server, except that SIGTERM, once in-flight requests have finished, ends
    ``serve`` normally (exit status 0) instead of being raised again to kill the process."""

    def handle_exit(self, sig: int, frame: object) -> None:
        super().handle_exit(sig, frame)  # type: ignore[arg-type]
        captured = getattr(self, "_captured_signals", None)
        if sig == signal.SIGTERM and captured and captured[-1] == sig:
            captured.pop()


def serve(
    namespace: LanceNamespace,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    auth_token: str | None = None,
    access: AccessControl | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_decoded_bytes: int | None = None,
    max_json_bytes: int = DEFAULT_MAX_JSON_BYTES,
    worker_threads: int = DEFAULT_WORKER_THREADS,
    limits: ClientLimits | None = None,
    insecure: bool = False,
    metrics_token: str | None = None,
    audit_json: bool = False,
    max_in_flight_per_client: int = DEFAULT_PER_ADDRESS_IN_FLIGHT,
    max_in_flight_per_principal: int = DEFAULT_PER_PRINCIPAL_IN_FLIGHT,
    on_ready: Callable[[str], None] = print,
    audit_stream: TextIO | None = None,
    log_level: str = "warning",
    listen_fd: int | None = None,
    http: str = "auto",
    loop: str = "auto",
) -> None:
    """Serve ``namespace`` until SIGTERM or SIGINT; in-flight requests finish first.

    ``listen_fd``: serve on this inherited listening socket (a worker of :func:`serve_workers`)
    instead of binding ``host:port``.

    ``on_ready`` receives the URL once the socket listens (the CLI prints it as its first line).
    ``audit_stream``: write the audit lines there (else they go to the ``AUDIT_LOGGER`` logger
    as the application configured it). ``limits``: timeouts and the connection limits.
    ``http``, ``loop``: uvicorn's HTTP/1.1 implementation and event loop (``_config``).
    ``access`` (or its short form ``auth_token``): who may call and do what; SIGHUP re-reads
    its files while connections stay open. Beyond loopback without authentication it refuses
    to start (:class:`ExposureError`) unless ``insecure``. The other keywords are those of
    :func:`~lance_metastore.rest.app.create_app`.
    """
    if access is None:
        access = access_with_token(auth_token)
    elif auth_token:
        raise ValueError("Pass auth_token or access, not both")
    check_exposure(host, access, insecure)
    if audit_stream is not None:
        audit_to(audit_stream)
    app = create_app(
        namespace,
        access=access,
        max_body_bytes=max_body_bytes,
        max_decoded_bytes=max_decoded_bytes,
        max_json_bytes=max_json_bytes,
        worker_threads=worker_threads,
        metrics_token=metrics_token,
        audit_json=audit_json,
        max_in_flight_per_client=max_in_flight_per_client,
        max_in_flight_per_principal=max_in_flight_per_principal,
    )
    config = _config(app, tls_cert, tls_key, log_level, limits, http, loop)
    sock = bind(host, port) if listen_fd is None else socket.socket(fileno=listen_fd)
    previous = signal.signal(signal.SIGHUP, _reload_on_signal(access))
    try:
        on_ready(url_of(sock, tls=bool(tls_cert)))
        _Server(config).run(sockets=[sock])
    finally:
        signal.signal(signal.SIGHUP, previous)
        sock.close()


# Signals a supervisor passes on to every worker: SIGHUP re-reads the authentication and policy
# files in each; SIGTERM and SIGINT let each finish its in-flight requests, then stop.
FORWARDED_SIGNALS = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)
# A worker that fails sooner than this after its start is not started again: the next would
# fail the same way (a bad setting, an unreachable catalog at start).
WORKER_START_SECONDS = 5.0


def serve_workers(
    worker_command: list[str],
    workers: int,
    host: str,
    port: int,
    *,
    tls: bool = False,
    on_ready: Callable[[str], None] = print,
) -> int:
    """Serve with ``workers`` processes sharing one listening socket, until SIGTERM or SIGINT.

    This process binds ``host:port``, then starts each worker as ``worker_command`` plus
    ``--listen-fd N`` (the socket, inherited): the kernel hands each new connection to one of
    the workers waiting in ``accept``. Each worker is a whole server (its own namespace,
    catalog connections, thread pool and limits: the per-caller limits hold per worker).
    SIGHUP, SIGTERM and SIGINT are passed on to every worker; a worker that dies otherwise is
    started again. Metrics: every worker writes to files in one directory
    (``PROMETHEUS_MULTIPROC_DIR``), and a scrape of any worker adds them all up. Returns the
    exit status: 0 when every worker stopped cleanly.
    """
    import os
    import shutil
    import subprocess
    import tempfile
    import time

    from .metrics import MULTIPROCESS_DIR_ENV

    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    sock = bind(host, port)
    metrics_dir = tempfile.mkdtemp(prefix="lance-metastore-metrics-")
    env = {**os.environ, MULTIPROCESS_DIR_ENV: metrics_dir}
    stopping: list[int] = []
    children: list[subprocess.Popen[bytes]] = []

    started_at: dict[int, float] = {}
    gone: set[int] = set()

    def start() -> subprocess.Popen[bytes]:
        child = subprocess.Popen(
            [*worker_command, "--listen-fd", str(sock.fileno())],
            pass_fds=(sock.fileno(),),
            stdout=subprocess.DEVNULL,  # each worker prints the URL; this process did
            env=env,
        )
        started_at[child.pid] = time.monotonic()
        return child

    def forward(signum: int, frame: object) -> None:
        if signum != signal.SIGHUP:
            stopping.append(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
    try:
        children.extend(start() for _ in range(workers))
        on_ready(url_of(sock, tls=tls))
        while True:
            for index, child in enumerate(children):
                status = child.poll()
                if status is None or child.pid in gone:
                    continue
                gone.add(child.pid)
                _worker_gone(child.pid, metrics_dir)
                if status and time.monotonic() - started_at[child.pid] < WORKER_START_SECONDS:
                    stopping.append(signal.SIGTERM)  # it cannot start: neither will another
                    forward(signal.SIGTERM, None)
                if not stopping:
                    logging.getLogger("lance_metastore.rest").warning(
                        "worker %d exited with %s; starting another", child.pid, status
                    )
                    children[index] = start()
            if stopping and all(child.poll() is not None for child in children):
                break
            time.sleep(0.1)
        return max((abs(child.returncode or 0) for child in children), default=0)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
        sock.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)


def _worker_gone(pid: int, metrics_dir: str) -> None:
    """A stopped worker's live gauges (connections, in flight) no longer count."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid, metrics_dir)  # type: ignore[no-untyped-call]


def _reload_on_signal(access: AccessControl) -> Callable[[int, object], None]:
    """A SIGHUP handler that re-reads ``access``'s files on a thread of its own: a JWKS fetch or
    a slow disk never stalls the event loop, and open connections are not touched."""

    def handler(signum: int, frame: object) -> None:
        threading.Thread(target=access.reload, name="lance-rest reload", daemon=True).start()

    return handler


class RestServer:
    """A server on a background thread, for tests and embedding::

        with RestServer(namespace) as server:
            client = lance_namespace.connect("rest", {"uri": server.url})

    ``target`` is a namespace or an app made by ``create_app``; the keyword arguments of
    ``create_app`` apply to a namespace. ``limits``, ``insecure``, ``http`` and ``loop`` are
    those of :func:`serve`.
    """

    def __init__(
        self,
        target: Any,
        host: str = DEFAULT_HOST,
        port: int = 0,
        *,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        log_level: str = "warning",
        limits: ClientLimits | None = None,
        insecure: bool = False,
        http: str = "auto",
        loop: str = "auto",
        **app_options: Any,
    ) -> None:
        if isinstance(target, LanceNamespace):
            check_exposure(
                host, app_options.get("auth_token") or app_options.get("access"), insecure
            )
            self.app = create_app(target, **app_options)
        else:
            self.app = target  # an app: its maker decided how it authenticates
        self._config = _config(self.app, tls_cert, tls_key, log_level, limits, http, loop)
        self._host, self._port, self._tls = host, port, bool(tls_cert)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.url = ""

    def start(self) -> RestServer:
        self._sock = bind(self._host, self._port)
        self.url = url_of(self._sock, self._tls)
        server = self._server = uvicorn.Server(self._config)
        sock = self._sock
        failure: list[BaseException] = []

        def run() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException as error:  # e.g. an unreadable TLS certificate
                failure.append(error)

        self._thread = threading.Thread(target=run, name=f"lance-rest {self.url}", daemon=True)
        self._thread.start()
        while not server.started:
            if not self._thread.is_alive():
                self.stop()
                cause = failure[0] if failure else None
                raise RuntimeError(f"The REST server did not start: {cause}") from cause
            self._thread.join(0.01)
        return self

    def stop(self) -> None:
        """Stop accepting, let in-flight requests finish, then return."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(GRACEFUL_SHUTDOWN_SECONDS + 5)
        if self._sock is not None:
            self._sock.close()
        self._server = self._thread = self._sock = None

    def __enter__(self) -> RestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RestServer({self.url or 'not started'})"
