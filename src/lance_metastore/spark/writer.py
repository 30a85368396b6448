"""Writing: tasks write Lance fragments, the driver commits them once.

The flow of one Spark write job:

1. Planning (driver, :func:`plan_write`): resolve the table in the catalog, apply the save
   mode, declare the table if it does not exist yet, open the dataset to learn its version,
   schema and storage format, and fix the Arrow schema every task writes with.
2. Tasks (executors, :meth:`LanceWriter.write`): each writes its rows as Lance data files
   straight into ``<location>/data/`` with ``lance.fragment.write_fragments`` and returns the
   fragments' metadata (JSON) as its commit message. Each finished data file is also
   recorded in the job's ledger (:class:`JobLedger`). A task whose input fails deletes the
   files it wrote before re-raising the original error.
3. Commit (driver, :meth:`LanceWriter.commit`): one Lance commit (``Append`` or ``Overwrite``)
   against the version read at planning, so the job is atomic: readers see all of it or none.
   Then the catalog columns are synced to the new schema.
4. Abort (driver, :meth:`LanceWriter.abort`): delete every data file the job's messages and
   ledger name, and deregister the table if this job declared it, leaving the catalog as it
   was.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from .options import Location, OptionError, Target, bool_option, int_option, parse_target
from .reader import _not_found, open_dataset
from .types import conform, realign, target_schema

if TYPE_CHECKING:
    from lance import LanceDataset

logger = logging.getLogger("lance_metastore.spark")

APPEND, OVERWRITE, ERROR_IF_EXISTS, IGNORE = "append", "overwrite", "errorifexists", "ignore"
_SAVE_MODES = {
    "append": APPEND,
    "overwrite": OVERWRITE,
    "errorifexists": ERROR_IF_EXISTS,
    "error": ERROR_IF_EXISTS,
    "default": ERROR_IF_EXISTS,
    "ignore": IGNORE,
}

# What the commit does.
OP_APPEND, OP_OVERWRITE, OP_CREATE, OP_SKIP = "append", "overwrite", "create", "skip"


@dataclass
class LanceCommitMessage(WriterCommitMessage):
    """What one task wrote: its fragments (Lance JSON) and their data files."""

    fragments: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    rows: int = 0
    seconds: float = 0.0


@dataclass
class WritePlan:
    """Everything the tasks and the commit need, fixed on the driver at planning."""

    location: Location
    operation: str
    schema: pa.Schema
    names: list[str]
    read_version: int | None = None
    declared: bool = False
    data_storage_version: str | None = None
    max_rows_per_file: int = 1024 * 1024
    max_rows_per_group: int | None = None
    # mergeSchema: the table gains the data's new (nullable) columns in the append's commit.
    merge_schema: bool = False
    # Whether the commit changes the table's columns (then the catalog's are synced).
    columns_change: bool = True
    job_id: str = field(default_factory=lambda: new_job_id())


def save_mode(options: Mapping[str, str], overwrite: bool) -> str:
    if overwrite:
        return OVERWRITE
    raw = (options.get("save_mode") or APPEND).strip().lower().replace("_", "")
    mode = _SAVE_MODES.get(raw)
    if mode is None:
        raise OptionError(
            f"Option 'save_mode' must be one of append, overwrite, errorifexists, ignore; "
            f"got {options.get('save_mode')!r}"
        )
    return mode


def _try_open(location: Location) -> Any:
    try:
        return open_dataset(location)
    except Exception as error:
        if _not_found(error):
            return None
        raise


def plan_write(options: Mapping[str, str], schema: StructType, overwrite: bool) -> WritePlan:
    """Resolve the table, apply the save mode, declare the table when it is new."""
    target = parse_target(options)
    mode = save_mode(options, overwrite)
    if target.impl is None:
        location = Location(uri=target.path, storage_options=target.storage_options)
        dataset = _try_open(location)
        exists = dataset is not None
        declared = False
    else:
        location, exists, declared = _catalog_table(target)
        dataset = _try_open(location) if (exists or declared) else None
    try:
        if exists and mode == ERROR_IF_EXISTS:
            raise FileExistsError(
                f"Table {location.name!r} already exists (save_mode errorifexists); use "
                "mode('append') or mode('overwrite'), or option('save_mode', 'ignore')"
            )
        if exists and mode == IGNORE:
            return WritePlan(location, OP_SKIP, pa.schema([]), [])
        storage_version = options.get("data_storage_version") or None
        if dataset is None:
            operation, existing, read_version = OP_CREATE, None, None
        else:
            operation = OP_APPEND if mode in (APPEND,) else OP_OVERWRITE
            existing, read_version = dataset.schema, int(dataset.version)
            storage_version = storage_version or _storage_version(dataset)
        merge = False
        if operation == OP_APPEND and bool_option(options, "mergeschema", False):
            arrow_schema, merge = merged_schema(schema, dataset, options, repr(location.name))
        else:
            arrow_schema = target_schema(
                schema, existing, append=operation == OP_APPEND, where=repr(location.name)
            )
        if operation != OP_APPEND:
            arrow_schema = with_compression(arrow_schema, compression_option(options))
        incoming = {f.name.lower(): f.name for f in schema}
        names = [incoming[name.lower()] for name in arrow_schema.names]
        return WritePlan(
            location=location,
            operation=operation,
            schema=arrow_schema,
            names=names,
            read_version=read_version,
            declared=declared,
            data_storage_version=storage_version,
            max_rows_per_file=int_option(options, "max_rows_per_file", 1024 * 1024) or 1024 * 1024,
            max_rows_per_group=int_option(options, "max_rows_per_group", None),
            merge_schema=merge,
            columns_change=existing is None or not _same_columns(arrow_schema, existing),
        )
    except BaseException:
        if declared:
            _deregister(location)
        raise


def _same_columns(new: pa.Schema, old: pa.Schema) -> bool:
    """Same names and types in the same order (what the catalog's column list shows)."""
    return [(f.name, f.type) for f in new] == [(f.name, f.type) for f in old]


def merged_schema(
    schema: StructType, dataset: Any, options: Mapping[str, str], where: str
) -> tuple[pa.Schema, bool]:
    """The table's schema plus the data's new columns (nullable, at the end), for an append
    with ``mergeSchema``; and whether there are any. Missing columns are still an error.

    Tasks write the new schema's field ids afresh (0, 1, ... in pre-order), so the table's
    own ids must be exactly those: true unless columns were dropped or altered in place.
    """
    existing = dataset.schema
    known = {name.lower() for name in existing.names}
    added = [f for f in schema if f.name.lower() not in known]
    kept = StructType([f for f in schema if f.name.lower() in known])
    base = target_schema(kept, existing, append=True, where=where)
    if not added:
        return base, False
    ids = _field_ids(dataset.lance_schema)
    if ids != list(range(len(ids))):
        raise OptionError(
            f"Cannot add columns {[f.name for f in added]} to {where} with mergeSchema: its "
            "columns were dropped or changed before, so new data files cannot line up with "
            "its field ids. Add the columns with pylance's add_columns, then append"
        )
    new_fields = target_schema(StructType(added), None, append=False, where=where)
    tagged = with_compression(pa.schema(list(new_fields)), compression_option(options))
    return pa.schema(list(base) + list(tagged), metadata=existing.metadata), True


def _field_ids(lance_schema: Any) -> list[int]:
    ids: list[int] = []

    def walk(fields: Any) -> None:
        for lance_field in fields:
            ids.append(int(lance_field.id()))
            walk(lance_field.children())

    walk(lance_schema.fields())
    return ids


COMPRESSION_KEY = "lance-encoding:compression"
COMPRESSIONS = ("lz4", "zstd", "none", "fsst", "default")
DEFAULT_COMPRESSION = "lz4"


def compression_option(options: Mapping[str, str]) -> str:
    value = (options.get("compression") or DEFAULT_COMPRESSION).strip().lower()
    if value not in COMPRESSIONS:
        raise OptionError(
            f"Option 'compression' must be one of {', '.join(COMPRESSIONS)}, got {value!r}"
        )
    return value


def with_compression(schema: pa.Schema, compression: str) -> pa.Schema:
    """Tag the top-level string and binary columns with a Lance compression scheme.

    Lance's default for strings (FSST plus general compression) costs ~3x lz4's encoding
    time for a modest size gain; lz4 plays the role snappy plays for Spark's Parquet. The
    tag lives in the table's schema, so later appends by any Lance writer encode alike.
    ``default`` leaves Lance's choice.
    """
    if compression == "default":
        return schema
    fields = []
    for arrow_field in schema:
        t = arrow_field.type
        if (
            pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_binary(t)
            or (pa.types.is_large_binary(t))
        ):
            metadata = dict(arrow_field.metadata or {})
            metadata[COMPRESSION_KEY.encode()] = compression.encode()
            arrow_field = arrow_field.with_metadata(metadata)  # type: ignore[arg-type]
        fields.append(arrow_field)
    return pa.schema(fields, metadata=schema.metadata)  # type: ignore[arg-type]  # stubs: invariant


def _storage_version(dataset: Any) -> str | None:
    try:
        return str(dataset.data_storage_version)
    except Exception:
        return None


def _catalog_table(target: Target) -> tuple[Location, bool, bool]:
    """(location, existed, declared by us): describe the table, declare it if missing."""
    from lance_namespace import DeclareTableRequest, DescribeTableRequest
    from lance_namespace.errors import TableNotFoundError

    ns = target.namespace()
    table_id = list(target.table_id or ())
    try:
        response = ns.describe_table(DescribeTableRequest(id=table_id))
        existed, declared = True, False
    except TableNotFoundError:
        response = ns.declare_table(DeclareTableRequest(id=table_id))
        existed, declared = False, True
    if not response.location:
        raise OptionError(f"The catalog gives no location for table {target.name!r}")
    location = Location(
        uri=response.location,
        storage_options=dict(response.storage_options or {}) or None,
        impl=target.impl,
        properties=dict(target.properties),
        table_id=target.table_id,
        managed_versioning=bool(getattr(response, "managed_versioning", False)),
    )
    return location, existed, declared


def commit_operation(
    location: Location,
    operation: Any,
    read_version: int | None,
    properties: Mapping[str, str] | None = None,
) -> LanceDataset:
    """One Lance commit of ``operation`` on the table (through its catalog when the catalog
    manages its versions), recording ``properties`` in the commit's transaction.

    A conflict with a concurrent writer that Lance cannot rebase over raises the namespace
    spec's ConcurrentModificationError (14); nothing was committed then.
    """
    import lance
    from lance.commit import CommitConflictError
    from lance_namespace.errors import ConcurrentModificationError

    kwargs: dict[str, Any] = {}
    if location.managed_versioning:
        kwargs = {
            "namespace_client": location.namespace(),
            "table_id": list(location.table_id or ()),
            "namespace_client_managed_versioning": True,
        }
    transaction: Any = operation
    if properties:
        transaction = lance.Transaction(
            read_version or 0, operation, transaction_properties=dict(properties)
        )
    try:
        return lance.LanceDataset.commit(
            location.uri,
            transaction,
            read_version=read_version,
            storage_options=location.storage_options,
            **kwargs,
        )
    except CommitConflictError as error:
        raise ConcurrentModificationError(
            f"Table {location.name!r} changed while this write ran (it read version "
            f"{read_version}), and the changes conflict: {error}. Nothing was committed; "
            "run it again"
        ) from error


def _deregister(location: Location) -> None:
    """Undo this job's declaration: remove the catalog entry (never any data)."""
    from lance_namespace import DeregisterTableRequest

    ns = location.namespace()
    try:
        ns.deregister_table(DeregisterTableRequest(id=list(location.table_id or ())))
    except Exception as error:  # the job's own error matters more
        logger.warning("could not deregister %s after a failed write: %s", location.name, error)


def _file_session(location: Location) -> Any:
    from lance.file import LanceFileSession

    return LanceFileSession(location.uri.rstrip("/") + "/data", location.storage_options)


def delete_files(location: Location, files: list[str]) -> None:
    """Delete data files (paths relative to ``<location>/data``); missing ones are fine."""
    if not files:
        return
    session = _file_session(location)
    for path in files:
        with contextlib.suppress(OSError):
            session.delete_file(path)


def _remove_empty_local_dirs(location: Location, subdirs: list[str] | None = None) -> None:
    """Drop empty local directories the job left (object stores have none): ``subdirs`` of
    the table, innermost first, or by default ``data`` and the table directory itself."""
    uri = location.uri
    if "://" in uri and not uri.startswith("file://"):
        return
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    targets = [os.path.join(path, d) for d in subdirs] if subdirs else []
    if subdirs is None:
        targets = [os.path.join(path, "data"), path]
    for directory in targets:
        with contextlib.suppress(OSError):
            os.rmdir(directory)


JOBS_DIR = "_spark_jobs"
_ABORTED = "_ABORTED"


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

    def __init__(self, location: Location, job_id: str) -> None:
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
            _remove_empty_local_dirs(self.location, [self.prefix, JOBS_DIR])

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
            _remove_empty_local_dirs(self.location, [f"{JOBS_DIR}/{job_id}"])
        _remove_empty_local_dirs(self.location, [JOBS_DIR])


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
        self.recorder.add([f.path for f in fragment.data_files()])


class LanceWriter(DataSourceArrowWriter):
    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    # -- tasks (executors) --------------------------------------------------------------------

    # pyspark's Arrow writer takes record batches where its base class declares rows.
    def write(self, iterator: Iterator[pa.RecordBatch]) -> LanceCommitMessage:  # type: ignore[override]
        plan = self.plan
        if plan.operation == OP_SKIP:
            return LanceCommitMessage()
        from lance.fragment import write_fragments

        started = time.perf_counter()
        failures: list[BaseException] = []
        rows = 0

        def batches() -> Iterator[pa.RecordBatch]:
            nonlocal rows
            try:
                for batch in iterator:
                    if batch.num_rows == 0:
                        continue
                    rows += batch.num_rows
                    yield conform(realign(batch), plan.schema, plan.names)
            except Exception as error:  # the input failed: end the stream, clean up, re-raise
                failures.append(error)

        ledger = JobLedger(plan.location, plan.job_id)
        if ledger.aborted():  # a straggler of a job that already failed: write nothing
            raise RuntimeError(f"the write job on {plan.location.name!r} was aborted")
        recorder = _TaskRecorder(ledger)
        tracker = _FileTracker(recorder)
        try:
            fragments = write_fragments(
                pa.RecordBatchReader.from_batches(plan.schema, batches()),
                plan.location.uri,
                schema=plan.schema,
                # A merged schema is new to the table: write its ids afresh.
                mode="append"
                if plan.operation == OP_APPEND and not plan.merge_schema
                else "overwrite",
                max_rows_per_file=plan.max_rows_per_file,
                max_rows_per_group=plan.max_rows_per_group or 1024,
                data_storage_version=plan.data_storage_version,
                storage_options=plan.location.storage_options,
                progress=tracker if _ProgressBase is not object else None,
            )
        except BaseException:
            recorder.close()
            self._undo_task(ledger, recorder, [])
            if failures:
                raise failures[0] from None
            raise
        files = [f.path for fragment in fragments for f in fragment.data_files()]
        if failures:
            recorder.close()
            self._undo_task(ledger, recorder, files)
            raise failures[0]
        recorder.close(files)
        if files and ledger.aborted():
            self._undo_task(ledger, recorder, files)
            raise RuntimeError(f"the write job on {plan.location.name!r} was aborted")
        return LanceCommitMessage(
            fragments=[json.dumps(fragment.to_json()) for fragment in fragments],
            files=files,
            rows=rows,
            seconds=time.perf_counter() - started,
        )

    def _undo_task(self, ledger: JobLedger, recorder: _TaskRecorder, files: list[str]) -> None:
        delete_files(self.plan.location, sorted(set(files) | set(recorder.files)))
        if recorder.files or files:
            ledger.remove(recorder.name)

    # -- driver ------------------------------------------------------------------------------

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        plan = self.plan
        if plan.operation == OP_SKIP:
            return
        import lance
        from lance.fragment import FragmentMetadata

        ours = [m for m in messages if isinstance(m, LanceCommitMessage)]
        fragments = [FragmentMetadata.from_json(text) for m in ours for text in m.fragments]
        if plan.operation == OP_APPEND and not fragments:
            JobLedger(plan.location, plan.job_id).remove()
            return  # nothing to add: no new version
        try:
            self._commit(lance, self.operation(fragments))
        except BaseException:
            # An error after the manifest was written (a lost response) must not delete
            # files a committed version references: check before undoing.
            if not self._committed(ours):
                self.abort(messages)
            raise
        ledger = JobLedger(plan.location, plan.job_id)
        ledger.remove()
        ledger.collect_garbage()
        if plan.location.table_id is not None and plan.columns_change:
            # An overwrite with the same columns leaves the catalog's list as it is.
            self._sync_columns()

    def operation(self, fragments: list[Any]) -> Any:
        """The Lance operation that adds ``fragments`` as the plan says."""
        import lance

        plan = self.plan
        if plan.operation != OP_APPEND:
            return lance.LanceOperation.Overwrite(plan.schema, fragments)
        if plan.merge_schema:
            # One commit adds the columns and the rows: the table's fragments (as read at
            # planning; Lance refuses the commit if a concurrent one changed them) and ours.
            dataset = open_dataset(plan.location, plan.read_version)
            existing = [f.metadata for f in dataset.get_fragments()]
            return lance.LanceOperation.Merge(existing + fragments, plan.schema)
        return lance.LanceOperation.Append(fragments)

    def _commit(
        self, lance: Any, operation: Any, properties: Mapping[str, str] | None = None
    ) -> LanceDataset:
        return commit_operation(self.plan.location, operation, self.plan.read_version, properties)

    def _committed(self, messages: list[LanceCommitMessage]) -> bool:
        """Whether the latest version references this job's files (True if unsure)."""
        ours = {f for m in messages for f in m.files}
        if not ours:
            return False
        try:
            dataset = open_dataset(self.plan.location)
        except Exception as error:
            return not _not_found(error)
        if self.plan.read_version is not None and dataset.version <= self.plan.read_version:
            return False
        try:
            for fragment in dataset.get_fragments():
                if any(f.path in ours for f in fragment.metadata.data_files()):
                    return True
        except Exception:
            return True
        return False

    def _sync_columns(self) -> None:
        """Catalog columns from the schema just committed: passing it means the namespace
        does not open the dataset again (for a managed table, through the catalog)."""
        ns = self.plan.location.namespace()
        try:
            sync = getattr(ns, "sync_table_columns", None)
            if callable(sync):
                sync(list(self.plan.location.table_id or ()), schema=self.plan.schema)
        except Exception as error:
            # The data is committed; a stale column list is not worth failing the job for.
            logger.warning(
                "could not sync catalog columns of %s: %s", self.plan.location.name, error
            )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        plan = self.plan
        if plan.operation == OP_SKIP:
            return
        ledger = JobLedger(plan.location, plan.job_id)
        ledger.mark_aborted()
        files = {f for m in messages if isinstance(m, LanceCommitMessage) for f in m.files}
        files.update(ledger.files())
        delete_files(plan.location, sorted(files))
        ledger.remove(keep_marker=True)
        ledger.collect_garbage()
        if plan.declared:
            _deregister(plan.location)
        if plan.operation == OP_CREATE:
            _remove_empty_local_dirs(plan.location, ["data"])
