"""Writing: tasks write Lance fragments, the driver commits them once.

The flow of one Spark write job:

1. Planning (driver, :func:`plan_write`): resolve the table in the catalog, apply the save
   mode, declare the table if it does not exist yet, open the dataset to learn its version,
   schema and storage format, and fix the Arrow schema every task writes with.
2. Tasks (executors, :meth:`LanceWriter.write`): each writes its rows as Lance data files
   straight into ``<location>/data/`` with ``lance.fragment.write_fragments`` and returns the
   fragments' metadata (JSON) as its commit message. A task whose input fails cleans up the
   files it wrote before re-raising the original error.
3. Commit (driver, :meth:`LanceWriter.commit`): one Lance commit (``Append`` or ``Overwrite``)
   against the version read at planning, so the job is atomic: readers see all of it or none.
   Then the catalog columns are synced to the new schema.
4. Abort (driver, :meth:`LanceWriter.abort`): delete every data file the job's tasks reported
   and deregister the table if this job declared it, leaving the catalog as it was.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from .options import Location, OptionError, Target, int_option, parse_target
from .reader import _close, _not_found, open_dataset
from .types import conform, realign, target_schema

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
    prefetch: int = 8
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex)


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
        location, exists, declared = _catalog_table(target, mode)
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
        arrow_schema = target_schema(
            schema, existing, append=operation == OP_APPEND, where=repr(location.name)
        )
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
            prefetch=_prefetch_option(options),
        )
    except BaseException:
        if declared:
            _deregister(location)
        raise


def _prefetch_option(options: Mapping[str, str]) -> int:
    raw = (options.get("prefetch") or "").strip()
    if raw == "":
        return 8
    if not raw.isdigit():
        raise OptionError(f"Option 'prefetch' must be a whole number (0 disables), got {raw!r}")
    return int(raw)


def _storage_version(dataset: Any) -> str | None:
    try:
        return str(dataset.data_storage_version)
    except Exception:
        return None


def _catalog_table(target: Target, mode: str) -> tuple[Location, bool, bool]:
    """(location, existed, declared by us): describe the table, declare it if missing."""
    from lance_namespace import DeclareTableRequest, DescribeTableRequest
    from lance_namespace.errors import TableNotFoundError

    ns = target.namespace()
    table_id = list(target.table_id or ())
    try:
        try:
            response = ns.describe_table(DescribeTableRequest(id=table_id))
            existed, declared = True, False
        except TableNotFoundError:
            response = ns.declare_table(DeclareTableRequest(id=table_id))
            existed, declared = False, True
    finally:
        _close(ns)
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


def _deregister(location: Location) -> None:
    """Undo this job's declaration: remove the catalog entry (never any data)."""
    from lance_namespace import DeregisterTableRequest

    ns = location.namespace()
    try:
        ns.deregister_table(DeregisterTableRequest(id=list(location.table_id or ())))
    except Exception as error:  # the job's own error matters more
        logger.warning("could not deregister %s after a failed write: %s", location.name, error)
    finally:
        _close(ns)


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


def _remove_empty_local_dirs(location: Location) -> None:
    """After undoing a new table's files, drop its empty local directories (object stores
    have no directories)."""
    uri = location.uri
    if "://" in uri and not uri.startswith("file://"):
        return
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    for directory in (os.path.join(path, "data"), path):
        with contextlib.suppress(OSError):
            os.rmdir(directory)


_DONE = object()


def prefetch(iterator: Iterator[Any], depth: int) -> Iterator[Any]:
    """Iterate ``iterator`` in a background thread, up to ``depth`` items ahead.

    Spark converts rows to Arrow on its side of a socket while this task's Lance writer
    encodes: read ahead, Spark's converter keeps going instead of waiting for the socket to be
    drained, and the two overlap. Errors arrive in order, after the items before them.
    """
    if depth <= 0:
        yield from iterator
        return
    items: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def pump() -> None:
        try:
            for item in iterator:
                while not stop.is_set():
                    try:
                        items.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            items.put(_DONE)
        except BaseException as error:
            items.put(_Failure(error))

    thread = threading.Thread(target=pump, name="lance-spark-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = items.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        stop.set()
        thread.join(timeout=5)


@dataclass
class _Failure:
    error: BaseException


try:
    from lance.fragment import FragmentWriteProgress as _ProgressBase
except ImportError:  # pragma: no cover - older pylance
    _ProgressBase = object  # type: ignore[assignment,misc]


class _FileTracker(_ProgressBase):  # type: ignore[misc,valid-type]
    """Records every data file Lance finishes, so a failing task can delete them."""

    def __init__(self) -> None:
        self.files: list[str] = []

    def begin(self, fragment: Any, **kwargs: Any) -> None:
        pass

    def complete(self, fragment: Any, **kwargs: Any) -> None:
        self.files.extend(f.path for f in fragment.data_files())


class LanceWriter(DataSourceArrowWriter):
    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    # -- tasks (executors) --------------------------------------------------------------------

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LanceCommitMessage:
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
                for batch in prefetch(iterator, plan.prefetch):
                    if batch.num_rows == 0:
                        continue
                    rows += batch.num_rows
                    yield conform(realign(batch), plan.schema, plan.names)
            except Exception as error:  # the input failed: end the stream, clean up, re-raise
                failures.append(error)

        tracker = _FileTracker()
        try:
            fragments = write_fragments(
                pa.RecordBatchReader.from_batches(plan.schema, batches()),
                plan.location.uri,
                schema=plan.schema,
                mode="append" if plan.operation == OP_APPEND else "overwrite",
                max_rows_per_file=plan.max_rows_per_file,
                max_rows_per_group=plan.max_rows_per_group or 1024,
                data_storage_version=plan.data_storage_version,
                storage_options=plan.location.storage_options,
                progress=tracker if _ProgressBase is not object else None,
            )
        except BaseException:
            delete_files(plan.location, tracker.files)
            if failures:
                raise failures[0] from None
            raise
        files = [f.path for fragment in fragments for f in fragment.data_files()]
        if failures:
            delete_files(plan.location, sorted(set(files) | set(tracker.files)))
            raise failures[0]
        return LanceCommitMessage(
            fragments=[json.dumps(fragment.to_json()) for fragment in fragments],
            files=files,
            rows=rows,
            seconds=time.perf_counter() - started,
        )

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
            return  # nothing to add: no new version
        try:
            if plan.operation == OP_APPEND:
                operation = lance.LanceOperation.Append(fragments)
            else:
                operation = lance.LanceOperation.Overwrite(plan.schema, fragments)
            self._commit(lance, operation)
        except BaseException:
            self.abort(messages)
            raise
        if plan.location.table_id is not None and plan.operation != OP_APPEND:
            self._sync_columns()

    def _commit(self, lance: Any, operation: Any) -> None:
        plan = self.plan
        kwargs: dict[str, Any] = {}
        ns = None
        if plan.location.managed_versioning:
            ns = plan.location.namespace()
            kwargs = {
                "namespace_client": ns,
                "table_id": list(plan.location.table_id or ()),
                "namespace_client_managed_versioning": True,
            }
        try:
            lance.LanceDataset.commit(
                plan.location.uri,
                operation,
                read_version=plan.read_version,
                storage_options=plan.location.storage_options,
                **kwargs,
            )
        finally:
            if ns is not None:
                _close(ns)

    def _sync_columns(self) -> None:
        ns = self.plan.location.namespace()
        try:
            sync = getattr(ns, "sync_table_columns", None)
            if callable(sync):
                sync(list(self.plan.location.table_id or ()))
        except Exception as error:
            # The data is committed; a stale column list is not worth failing the job for.
            logger.warning(
                "could not sync catalog columns of %s: %s", self.plan.location.name, error
            )
        finally:
            _close(ns)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        plan = self.plan
        if plan.operation == OP_SKIP:
            return
        files = [f for m in messages if isinstance(m, LanceCommitMessage) for f in m.files]
        delete_files(plan.location, files)
        if plan.declared:
            _deregister(plan.location)
        if plan.operation == OP_CREATE:
            _remove_empty_local_dirs(plan.location)
