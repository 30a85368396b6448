"""The Arrow data path of a Spark write: tasks write Lance data files, the job ledger tracks them.

Kept apart from planning (:mod:`.plan`) and the commit protocol (:mod:`.commit`) because
it runs on executors and touches only storage, never the catalog: each task streams its
Arrow batches into Lance data files under ``<location>/data/`` with
``lance.fragment.write_fragments`` and returns the fragments' metadata as its commit
message; every finished data file is recorded in the job's ledger (:class:`JobLedger`) so
that an abort can delete what a task wrote even when Spark loses the task's message.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from lance_namespace.errors import InvalidInputError
from pyspark.sql.datasource import WriterCommitMessage

from ..rules.locations import Location
from .options import ResolvedTable
from .types import conform, realign

logger = logging.getLogger("lance_metastore.spark")


@dataclass
class LanceCommitMessage(WriterCommitMessage):
    """What one task wrote: its fragments (Lance JSON) and their data files."""

    fragments: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    rows: int = 0
    seconds: float = 0.0


def _file_session(location: ResolvedTable) -> Any:
    from lance.file import LanceFileSession

    return LanceFileSession(location.uri.rstrip("/") + "/data", location.storage_options)


def delete_files(location: ResolvedTable, files: list[str]) -> None:
    """Delete data files (paths relative to ``<location>/data``); missing ones are fine."""
    if not files:
        return
    session = _file_session(location)
    for path in files:
        with contextlib.suppress(OSError):
            session.delete_file(path)


def remove_empty_local_dirs(location: ResolvedTable, subdirs: list[str] | None = None) -> None:
    """Drop empty local directories the job left (object stores have none): ``subdirs`` of
    the table, innermost first, or by default ``data`` and the table directory itself."""
    try:  # as Lance opens it: a relative dataset path is the working directory's
        where = Location.parse(location.uri, os.getcwd(), "Table")
    except InvalidInputError:
        return  # text the location rules refuse is never acted on
    if not where.local:
        return
    path = where.key
    targets = [os.path.join(path, d) for d in subdirs] if subdirs else []
    if subdirs is None:
        targets = [os.path.join(path, "data"), path]
    for directory in targets:
        with contextlib.suppress(OSError):
            os.rmdir(directory)


JOBS_DIR = "_spark_jobs"
_ABORTED = "_ABORTED"
# Written before the job's commit, removed once its outcome is known: while it is there, an
# abort deletes nothing (the commit may still land, in flight on a catalog's server).
_COMMITTING = "_COMMITTING"


class JobLedger:
    """Which data files a write job's tasks wrote, kept next to the data until the job ends.

    Two things Spark does make ``abort``'s commit messages insufficient (both observed with
    a UDF failing in one task at local[2]): a task whose write succeeded can be aborted on the
    JVM side, so ``abort`` gets ``None`` for it; and the tasks of a failed job are not
    interrupted (``spark.job.interruptOnCancel`` is off by default), so a task can still
    start, write and finish seconds *after* ``abort`` returned.

    So every task records its files, as each one is finished, in
    ``<table>/_spark_jobs/<job id>/<attempt>.json``. ``abort`` writes an ``_ABORTED`` marker,
    deletes what the records and messages name, and removes the records; it keeps the marker,
    which tasks check before they write and after: a straggler writes nothing, or deletes
    what it wrote. ``commit`` removes its job's records; every commit and abort also removes
    the markers (and any files recorded next to them) of aborted jobs older than an hour.
    """

    MARKER_TTL_SECONDS = 3600

    def __init__(self, location: ResolvedTable, job_id: str) -> None:
        self.location = location
        self.job_id = job_id
        self.prefix = f"{JOBS_DIR}/{job_id}"

    def _session(self) -> Any:
        from lance.file import LanceFileSession

        return LanceFileSession(self.location.uri.rstrip("/"), self.location.storage_options)

    def _relative(self, path: str) -> str:
        index = path.find(JOBS_DIR + "/")
        return path[index:] if index >= 0 else path

    def _upload(self, name: str, text: str) -> None:
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            handle.write(text)
        try:
            self._session().upload_file(handle.name, f"{self.prefix}/{name}")
        finally:
            os.unlink(handle.name)

    def put(self, name: str, files: list[str]) -> None:
        self._upload(name, json.dumps({"files": files}))

    def _list(self, prefix: str) -> list[str]:
        try:
            return [self._relative(p) for p in self._session().list(prefix)]
        except OSError:
            return []

    def files(self) -> list[str]:
        """Every data file the job's records name."""
        return sorted(self._files_in(self._list(self.prefix)))

    def _files_in(self, paths: list[str]) -> set[str]:
        import tempfile

        session = self._session()
        found: set[str] = set()
        for path in paths:
            if not path.endswith(".json"):
                continue
            with tempfile.TemporaryDirectory() as tmp:
                local = os.path.join(tmp, "entry.json")
                try:
                    session.download_file(path, local)
                    with open(local) as handle:
                        found.update(json.load(handle).get("files", []))
                except (OSError, ValueError):
                    continue
        return found

    def aborted(self) -> bool:
        try:
            return bool(self._session().contains(f"{self.prefix}/{_ABORTED}"))
        except OSError:
            return False

    def mark_committing(self) -> None:
        """Record that the job's commit starts (raises if storage refuses: no commit then)."""
        self._upload(_COMMITTING, "committing\n")

    def committing(self) -> bool:
        """Whether the job's commit started and its outcome is unknown (True if unsure)."""
        try:
            return bool(self._session().contains(f"{self.prefix}/{_COMMITTING}"))
        except OSError:
            return True

    def clear_committing(self) -> None:
        """The commit's outcome is known: an abort may undo the job again."""
        self.remove(_COMMITTING)

    def mark_aborted(self) -> None:
        try:
            self._upload(_ABORTED, "aborted\n")
        except OSError as error:
            logger.warning("could not mark job %s aborted: %s", self.job_id, error)

    def remove(self, name: str | None = None, *, keep_marker: bool = False) -> None:
        """Delete one task's record, or (``None``) the job's records (and marker)."""
        if name is not None:
            paths = [f"{self.prefix}/{name}"]
        else:
            paths = self._list(self.prefix)
            if keep_marker:
                paths = [p for p in paths if not p.endswith("/" + _ABORTED)]
        self._delete(paths)
        if name is None and not keep_marker:
            remove_empty_local_dirs(self.location, [self.prefix, JOBS_DIR])

    def _delete(self, paths: list[str]) -> None:
        session = self._session()
        for path in paths:
            with contextlib.suppress(OSError):
                session.delete_file(path)

    def collect_garbage(self) -> None:
        """Remove aborted jobs' leftovers older than the marker TTL (never a live job's)."""
        now = time.time()
        by_job: dict[str, list[str]] = {}
        for path in self._list(JOBS_DIR):
            parts = path.split("/")
            if len(parts) >= 3:
                by_job.setdefault(parts[1], []).append(path)
        for job_id, paths in by_job.items():
            if job_id == self.job_id or not any(p.endswith("/" + _ABORTED) for p in paths):
                continue
            started = _job_started(job_id)
            if started is None or now - started < self.MARKER_TTL_SECONDS:
                continue
            delete_files(self.location, sorted(self._files_in(paths)))
            self._delete(paths)
            remove_empty_local_dirs(self.location, [f"{JOBS_DIR}/{job_id}"])
        remove_empty_local_dirs(self.location, [JOBS_DIR])


def new_job_id() -> str:
    """``<unix seconds>-<random>``: unique, and tells garbage collection the job's age."""
    return f"{int(time.time())}-{uuid.uuid4().hex[:16]}"


def _job_started(job_id: str) -> float | None:
    head = job_id.split("-", 1)[0]
    return float(head) if head.isdigit() else None


class _TaskRecorder:
    """A task's side of the ledger: Lance's progress hook reports each finished data file;
    a background thread records the list (Lance calls the hook on its own runtime's threads,
    where blocking storage I/O is not allowed)."""

    def __init__(self, ledger: JobLedger) -> None:
        self.ledger = ledger
        self.name = f"{uuid.uuid4().hex}.json"
        self.files: list[str] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._recorded = 0
        self._thread: threading.Thread | None = None

    def add(self, files: list[str]) -> None:
        with self._lock:
            self.files.extend(files)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="lance-spark-ledger", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                snapshot, closed = list(self.files), self._closed
            if len(snapshot) > self._recorded:
                try:
                    self.ledger.put(self.name, snapshot)
                    self._recorded = len(snapshot)
                except Exception as error:
                    logger.warning("could not record written files: %s", error)
            if closed:
                return

    def close(self, files: list[str] | None = None) -> None:
        """Stop the thread and record the final list (from this, a normal Python thread)."""
        with self._lock:
            self._closed = True
            thread = self._thread
            if files is not None:
                self.files = sorted(set(self.files) | set(files))
        if thread is not None:
            self._wake.set()
            thread.join(timeout=60)
        if files and len(self.files) > self._recorded:
            self.ledger.put(self.name, list(self.files))
            self._recorded = len(self.files)


try:
    from lance.progress import FragmentWriteProgress as _ProgressBase
except ImportError:  # pragma: no cover - older pylance
    _ProgressBase = object  # type: ignore[assignment,misc]


class _FileTracker(_ProgressBase):
    """Lance's progress hook: hands every finished data file to the task's recorder."""

    def __init__(self, recorder: _TaskRecorder) -> None:
        self.recorder = recorder

    @property
    def files(self) -> list[str]:
        return self.recorder.files

    def begin(self, fragment: Any, **kwargs: Any) -> None:
        pass

    def complete(self, fragment: Any, **kwargs: Any) -> None:
        self.recorder.add([f.path for f in fragment.files])


def write_task(
    batches: Iterator[pa.RecordBatch],
    location: ResolvedTable,
    job_id: str,
    schema: pa.Schema,
    names: list[str],
    *,
    fresh_ids: bool,
    max_rows_per_file: int,
    max_rows_per_group: int | None,
    data_storage_version: str | None,
) -> LanceCommitMessage:
    """One task's write: conform ``batches`` to ``schema`` (taking columns ``names``), write
    them as Lance data files and return their fragments. ``fresh_ids``: number the schema's
    field ids afresh (a new table, an overwrite, or a merged schema) rather than take the
    table's. An input that fails, or a job aborted meanwhile, leaves no file behind."""
    from lance.fragment import write_fragments

    started = time.perf_counter()
    failures: list[BaseException] = []
    rows = 0

    def conformed() -> Iterator[pa.RecordBatch]:
        nonlocal rows
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                rows += batch.num_rows
                yield conform(realign(batch), schema, names)
        except Exception as error:  # the input failed: end the stream, clean up, re-raise
            failures.append(error)

    ledger = JobLedger(location, job_id)
    if ledger.aborted():  # a straggler of a job that already failed: write nothing
        raise RuntimeError(f"the write job on {location.name!r} was aborted")
    recorder = _TaskRecorder(ledger)
    tracker = _FileTracker(recorder)

    def undo(files: list[str]) -> None:
        delete_files(location, sorted(set(files) | set(recorder.files)))
        if recorder.files or files:
            ledger.remove(recorder.name)

    try:
        fragments = write_fragments(
            pa.RecordBatchReader.from_batches(schema, conformed()),
            location.uri,
            schema=schema,
            mode="overwrite" if fresh_ids else "append",
            max_rows_per_file=max_rows_per_file,
            max_rows_per_group=max_rows_per_group or 1024,
            data_storage_version=data_storage_version,
            storage_options=location.storage_options,
            progress=tracker if _ProgressBase is not object else None,
        )
    except BaseException:
        recorder.close()
        undo([])
        if failures:
            raise failures[0] from None
        raise
    files = [f.path for fragment in fragments for f in fragment.files]
    if failures:
        recorder.close()
        undo(files)
        raise failures[0]
    recorder.close(files)
    if files and ledger.aborted():
        undo(files)
        raise RuntimeError(f"the write job on {location.name!r} was aborted")
    return LanceCommitMessage(
        fragments=[json.dumps(fragment.to_json()) for fragment in fragments],
        files=files,
        rows=rows,
        seconds=time.perf_counter() - started,
    )


def commit_messages(messages: list[WriterCommitMessage | None]) -> list[LanceCommitMessage]:
    """The tasks' messages this data source wrote (Spark passes ``None`` for lost ones)."""
    return [m for m in messages if isinstance(m, LanceCommitMessage)]


def written_files(messages: list[LanceCommitMessage]) -> set[str]:
    """Every data file the tasks' messages name."""
    return {f for m in messages for f in m.files}


def fragments_of(messages: list[LanceCommitMessage]) -> list[Any]:
    """The Lance fragments the tasks' messages carry."""
    from lance.fragment import FragmentMetadata

    return [FragmentMetadata.from_json(text) for m in messages for text in m.fragments]
