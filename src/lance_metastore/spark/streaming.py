"""Structured Streaming: a sink that writes each micro-batch exactly once, and a source that
reads the rows each new version of an append-only table adds.

Sink. Tasks write Lance fragments as a batch write does (:class:`~.writer.LanceWriter`); the
driver commits each micro-batch as ONE Lance commit whose transaction properties record the
streaming query's id and the batch id. Spark replays a micro-batch whose end it did not record
in its checkpoint (the driver or a worker died after the sink committed, before Spark wrote its
commit log). Before committing, the sink reads the transaction properties of the table's recent
versions: a version of this query with this batch id or a later one means the batch is already
in the table, and the replay's files are deleted instead of committed.

The query's identity is the id Spark keeps in ``<checkpointLocation>/metadata`` (stable across
restarts from that checkpoint, new for a new checkpoint), or option ``query_id``.

Source. Offsets are table versions. A micro-batch from version ``s`` to ``e`` reads the
fragments of version ``e`` that version ``s`` did not have; every version in between must
only have appended (or changed no rows), else the query fails, naming the version.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition, WriterCommitMessage
from pyspark.sql.types import StructType

from .options import OptionError, int_option
from .reader import LanceReader, Snapshot, open_dataset, open_existing

try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pyspark 4.0: no Arrow stream writers (stream_writer refuses)
    from pyspark.sql.datasource import (  # type: ignore[assignment]
        DataSourceStreamWriter as DataSourceStreamArrowWriter,
    )

from .commit import commit_job, delete_job_files
from .fragments import (
    JobLedger,
    commit_messages,
    delete_files,
    fragments_of,
    remove_empty_local_dirs,
    written_files,
)
from .plan import OP_SKIP, WritePlan, deregister
from .writer import LanceWriter

if TYPE_CHECKING:
    from lance import LanceDataset

logger = logging.getLogger("lance_metastore.spark")

# Keys of the transaction properties each streamed micro-batch's commit carries.
QUERY_ID_PROPERTY = "spark.streaming.query_id"
BATCH_ID_PROPERTY = "spark.streaming.batch_id"
# How many recent versions a commit reads back to recognise a replayed micro-batch.
DEFAULT_REPLAY_LOOKBACK = 1000


def streaming_query_id(options: Mapping[str, str]) -> str:
    """The identity of the streaming query writing: option ``query_id``, else the id Spark
    stored in the checkpoint's ``metadata`` file."""
    explicit = (options.get("query_id") or "").strip()
    if explicit:
        return explicit
    checkpoint = (options.get("checkpointlocation") or "").strip()
    if not checkpoint:
        raise OptionError(
            "A Lance streaming sink needs option 'checkpointLocation' on writeStream (or option "
            "'query_id', a name unique to this query) to recognise micro-batches Spark replays "
            "after a failure"
        )
    try:
        from pyarrow import fs

        filesystem, path = fs.FileSystem.from_uri(_as_uri(checkpoint))
        with filesystem.open_input_stream(path.rstrip("/") + "/metadata") as stream:
            query_id = json.loads(stream.read().decode()).get("id")
    except Exception as error:
        raise OptionError(
            f"Cannot read the streaming query's id from {checkpoint!r}/metadata ({error}); "
            "set option 'query_id' to a name unique to this query"
        ) from error
    if not query_id:
        raise OptionError(f"No query id in {checkpoint!r}/metadata; set option 'query_id'")
    return str(query_id)


def _as_uri(path: str) -> str:
    """A checkpoint location as a URI; a relative path is relative to the working directory,
    as Spark resolves it (the local file system's working directory is the JVM's, which is
    the driver's and, in local mode, its Python workers')."""
    return path if "://" in path else "file://" + os.path.abspath(path)


def committed_batch(dataset: LanceDataset, query_id: str, lookback: int) -> int | None:
    """The last batch id of ``query_id`` among the table's latest ``lookback`` versions."""
    latest = int(dataset.version)
    for version in range(latest, max(0, latest - lookback), -1):
        try:
            transaction = dataset.read_transaction(version)
        except Exception:  # a version without a readable transaction file
            continue
        properties = (transaction.transaction_properties or {}) if transaction else {}
        if properties.get(QUERY_ID_PROPERTY) == query_id:
            return int(properties.get(BATCH_ID_PROPERTY, -1))
    return None


# pyspark declares ``write`` on row iterators; its Arrow writers take record batches.
class LanceStreamWriter(LanceWriter, DataSourceStreamArrowWriter):  # type: ignore[misc]
    """Appends (append mode) or replaces (complete mode) the table once per micro-batch.

    The plan is made when the query starts; each commit looks at the table as it is then
    (the table may not exist before the first batch, and other writers may commit between
    batches).
    """

    def __init__(self, plan: WritePlan, query_id: str, lookback: int, complete: bool) -> None:
        super().__init__(plan)
        self.query_id = query_id
        self.lookback = lookback
        # Complete mode: each micro-batch is the whole result and replaces the table.
        self.complete = complete

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        import lance

        plan = self.plan
        ours = commit_messages(messages)
        fragments = fragments_of(ours)
        ledger = JobLedger(plan.location, plan.job_id)
        dataset = open_existing(plan.location)
        if dataset is not None:
            done = committed_batch(dataset, self.query_id, self.lookback)
            if done is not None and done >= batchId:
                logger.info(
                    "micro-batch %s of query %s is already in %s: not written again",
                    batchId,
                    self.query_id,
                    plan.location.name,
                )
                delete_files(plan.location, sorted(written_files(ours)))
                ledger.remove()
                return
        append = not self.complete and dataset is not None
        if append and not fragments:
            ledger.remove()
            return  # an empty micro-batch appends nothing
        operation: lance.LanceOperation.BaseOperation
        if append:
            operation = lance.LanceOperation.Append(fragments)
        else:
            operation = lance.LanceOperation.Overwrite(plan.schema, fragments)
        commit_job(
            plan,
            ours,
            operation,
            int(dataset.version) if dataset is not None else None,
            properties={QUERY_ID_PROPERTY: self.query_id, BATCH_ID_PROPERTY: str(batchId)},
            undo=lambda: self.abort(messages, batchId),
            sync_columns=not append and plan.columns_change,
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        plan = self.plan
        if JobLedger(plan.location, plan.job_id).committing():
            # The batch's commit failed with its outcome unknown (see .commit): keep it all;
            # the ledger's records stay for the query's next micro-batch.
            JobLedger(plan.location, plan.job_id).clear_committing()
            return
        delete_job_files(plan, messages)
        # Later micro-batches of this query write under the same job: no abort marker.
        JobLedger(plan.location, plan.job_id).remove()
        if plan.declared and open_existing(plan.location) is None:
            # The query declared the table and no micro-batch ever landed: undo the entry.
            deregister(plan.location)
            remove_empty_local_dirs(plan.location, ["data"])


def stream_writer(plan: WritePlan, options: Mapping[str, str], complete: bool) -> LanceStreamWriter:
    import pyspark.sql.datasource as datasource

    if not hasattr(datasource, "DataSourceStreamArrowWriter"):
        raise OptionError("The Lance streaming sink needs pyspark 4.1 or later")
    if plan.operation == OP_SKIP:
        raise OptionError("option 'save_mode' does not apply to streaming writes")
    lookback = int_option(options, "replay_lookback", DEFAULT_REPLAY_LOOKBACK)
    return LanceStreamWriter(plan, streaming_query_id(options), lookback or 1, complete)


# --------------------------------------------------------------------------------------------
# Source
# --------------------------------------------------------------------------------------------

# Operations that leave every existing row where it was (a stream of appends may cross them).
_ROW_PRESERVING = {"Append", "CreateIndex", "UpdateConfig", "Project"}


class LanceStreamReader(DataSourceStreamReader):
    """New rows of each version, as micro-batches; offsets are ``{"version": n}``.

    A new query starts at option ``starting_version`` (its rows are not read: the stream
    yields what later versions add), or by default at 0, so the first micro-batch is the
    whole table as of the latest version and later ones what each new version appends.
    """

    def __init__(self, snapshot: Snapshot, schema: StructType, options: Mapping[str, str]):
        self.snapshot = snapshot
        self.schema = schema
        self.batch_reader = LanceReader(snapshot, schema, options)
        self.starting_version = int_option(options, "starting_version", None) or 0

    @property
    def name(self) -> str:
        return self.snapshot.location.name

    def initialOffset(self) -> dict[str, int]:
        return {"version": self.starting_version}

    def latestOffset(
        self, start: dict[str, int] | None = None, limit: Any = None
    ) -> dict[str, int]:
        dataset = open_dataset(self.snapshot.location)
        return {"version": int(dataset.version)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        first, last = int(start["version"]), int(end["version"])
        if last <= first:
            return []
        location = self.snapshot.location
        dataset = open_dataset(location, last)
        self._check_schema(dataset, last)
        if first == 0:
            return self.batch_reader.plan(dataset, None, last)
        self._check_appends_only(dataset, first, last)
        before = {f.fragment_id for f in open_dataset(location, first).get_fragments()}
        added = {f.fragment_id for f in dataset.get_fragments()} - before
        if not added:
            return []
        return self.batch_reader.plan(dataset, added, last)

    def _check_schema(self, dataset: LanceDataset, version: int) -> None:
        if dataset.schema.remove_metadata() != self.snapshot.schema.remove_metadata():
            raise ValueError(
                f"Version {version} of {self.name!r} changed the table's schema; a Lance "
                "stream reads tables whose schema stays the same. Restart the query with a "
                "new checkpoint to read the new schema"
            )

    def _check_appends_only(self, dataset: LanceDataset, first: int, last: int) -> None:
        for version in range(first + 1, last + 1):
            transaction = dataset.read_transaction(version)
            kind = type(transaction.operation).__name__ if transaction else "unknown"
            if kind not in _ROW_PRESERVING:
                raise ValueError(
                    f"Version {version} of {self.name!r} is a {kind}, which deletes or "
                    "rewrites rows; a Lance stream reads append-only tables. Restart the "
                    "query with option 'starting_version' set to this version or later to "
                    "read the appends after it"
                )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.batch_reader.read(partition)
