"""The event loop only moves bytes: everything else a request needs runs on a bounded pool.

Parsing a JSON body, validating the request model, opening an Arrow IPC body, the namespace
call itself (it blocks on Glue, a metastore, STS or Lance's object store), trimming a listing to
what the caller may see and encoding the answer all run in one hop on a worker thread, so the
loop stays free to read other callers' requests and to write their answers. One hop, not one
per step: each hop costs about 0.1 ms of scheduling, and the steps of one request run in
order anyway.

The pool is bounded (``threads``): past it, requests wait for a thread, in arrival order, on
the loop (which costs nothing while they wait). Metadata reads, scans and changes have a pool each
(:class:`Pools`): a change may hold its thread while it waits on the catalog (a Hive Metastore
table lock polled until the writer before it is done, a lost conditional write retried), and a
scan of a large table for seconds; a burst of either would otherwise hold every thread while
describes and listings, which every client makes first and which wait on nothing, queued
behind them. A thread holds the interpreter lock only while
it runs Python; parsing in C (``json.loads``, pydantic's validator) holds it for the length of
one call, which is why JSON bodies have their own, small limit (:data:`DEFAULT_MAX_JSON_BYTES`):
the largest body it allows parses in a few milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..rules.extras import requires_extra
from .access import reads_only

with requires_extra("server"):
    import anyio
    import anyio.to_thread

T = TypeVar("T")

DEFAULT_WORKER_THREADS = 32
# JSON request bodies (every operation but the data ones, whose Arrow bodies have the body
# limit). 1 MiB holds some 7,000 version entries of a batch commit (real ones carry a few
# hundred); json.loads of 1 MiB holds the interpreter lock ~5 ms on an idle machine, of 4 MiB
# ~20 ms idle and ~300 ms on this loaded 2-core machine, stalling every other caller as long.
DEFAULT_MAX_JSON_BYTES = 1024 * 1024


class WorkerPool:
    """At most ``threads`` blocking calls at once, each on a thread of anyio's pool."""

    def __init__(self, threads: int = DEFAULT_WORKER_THREADS, calls: Any = None) -> None:
        """``calls``: a gauge (``inc``, ``dec``) of the calls handed over and not finished."""
        if threads <= 0:
            raise ValueError(f"threads must be positive, not {threads}")
        self.threads = threads
        self._limiter: anyio.CapacityLimiter | None = None
        self._calls = calls

    async def run(
        self, function: Callable[..., T], *args: object, abandon_on_cancel: bool = False
    ) -> T:
        """``function(*args)`` on a worker thread (context variables go along).
        ``abandon_on_cancel``: a cancelled caller stops waiting (the thread runs on)."""
        if self._limiter is None:  # made on the loop that serves: anyio binds it there
            self._limiter = anyio.CapacityLimiter(self.threads)
        if self._calls is not None:
            self._calls.inc()
        try:
            return await anyio.to_thread.run_sync(
                function, *args, limiter=self._limiter, abandon_on_cancel=abandon_on_cancel
            )
        finally:
            if self._calls is not None:
                self._calls.dec()

    @property
    def busy(self) -> int:
        """Threads running a call now."""
        return 0 if self._limiter is None else int(self._limiter.borrowed_tokens)

    @property
    def waiting(self) -> int:
        """Calls waiting for a thread."""
        return 0 if self._limiter is None else int(self._limiter.statistics().tasks_waiting)


# Reads that scan rows, statistics or the version history: seconds on a large table.
SCANS = frozenset(
    {
        "query_table",
        "count_table_rows",
        "explain_table_query_plan",
        "analyze_table_query_plan",
        "get_table_stats",
        "describe_table_index_stats",
        "describe_transaction",
    }
)


@dataclass(frozen=True)
class Pools:
    """The server's pools, by what a call may wait on: ``catalog`` for the metadata reads
    every client makes before anything else (describes, listings, existence checks, the
    versions, tags, branches and indexes of a table), ``scans`` for reads of rows and
    statistics (:data:`SCANS`), ``changes`` for everything that needs more than the ``read``
    privilege (writes, creates, schema changes), which may wait on the catalog's locks."""

    catalog: WorkerPool
    scans: WorkerPool
    changes: WorkerPool

    def of(self, operation: str) -> WorkerPool:
        """The pool that runs ``operation`` (a spec operation's name; one the privilege table
        does not know counts as a change)."""
        if not reads_only(operation):
            return self.changes
        return self.scans if operation in SCANS else self.catalog
