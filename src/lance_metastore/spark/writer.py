"""Spark's batch writer for the ``lance`` data source: tasks write fragments, the driver commits.

The flow of one Spark write job, one module per step:

1. Planning (driver, :func:`.plan.plan_write`): resolve the table in the catalog, apply the
   save mode, declare the table if it does not exist yet, and fix the Arrow schema.
2. Tasks (executors, :meth:`LanceWriter.write` -> :func:`.fragments.write_task`): each writes
   its rows as Lance data files and returns the fragments' metadata as its commit message,
   recording each finished file in the job's ledger.
3. Commit (driver, :meth:`LanceWriter.commit` -> :mod:`.commit`): one Lance commit
   (``Append``, ``Overwrite`` or ``Merge``) against the version read at planning, so the job
   is atomic; then the catalog columns are synced to the new schema.
4. Abort (driver, :meth:`LanceWriter.abort`): delete every data file the job's messages and
   ledger name, and deregister the table if this job declared it, leaving the catalog as it
   was.

This class only wires Spark's writer interface to those steps.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from .commit import commit_job, delete_job_files, lance_operation
from .fragments import (
    JobLedger,
    LanceCommitMessage,
    commit_messages,
    fragments_of,
    remove_empty_local_dirs,
    write_task,
)
from .plan import OP_APPEND, OP_CREATE, OP_SKIP, WritePlan, deregister


class LanceWriter(DataSourceArrowWriter):
    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    # pyspark's Arrow writer takes record batches where its base class declares rows.
    def write(self, iterator: Iterator[pa.RecordBatch]) -> LanceCommitMessage:  # type: ignore[override]
        plan = self.plan
        if plan.operation == OP_SKIP:
            return LanceCommitMessage()
        return write_task(
            iterator,
            plan.location,
            plan.job_id,
            plan.schema,
            plan.names,
            # A merged schema is new to the table: write its ids afresh.
            fresh_ids=plan.operation != OP_APPEND or plan.merge_schema,
            max_rows_per_file=plan.max_rows_per_file,
            max_rows_per_group=plan.max_rows_per_group,
            data_storage_version=plan.data_storage_version,
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        plan = self.plan
        if plan.operation == OP_SKIP:
            return
        ours = commit_messages(messages)
        fragments = fragments_of(ours)
        if plan.operation == OP_APPEND and not fragments:
            JobLedger(plan.location, plan.job_id).remove()
            return  # nothing to add: no new version
        commit_job(
            plan,
            ours,
            lance_operation(plan, fragments),
            plan.read_version,
            undo=lambda: self.abort(messages),
            # An overwrite with the same columns leaves the catalog's list as it is.
            sync_columns=plan.columns_change,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        plan = self.plan
        if plan.operation == OP_SKIP:
            return
        ledger = JobLedger(plan.location, plan.job_id)
        if ledger.committing():
            # Spark aborts after a commit that failed with its outcome unknown (see
            # .commit): the commit may still land, so nothing is deleted or deregistered.
            ledger.remove()
            return
        ledger.mark_aborted()
        delete_job_files(plan, messages)
        ledger.remove(keep_marker=True)
        ledger.collect_garbage()
        if plan.declared:
            deregister(plan.location)
        if plan.operation == OP_CREATE:
            remove_empty_local_dirs(plan.location, ["data"])
