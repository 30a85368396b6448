"""The commit protocol of a Spark write: one Lance commit on the driver, then the catalog.

Kept apart from the data path (:mod:`.fragments`) because it is where a write becomes
visible and where failures must be undone exactly: one Lance commit (through the catalog
when the catalog manages the table's versions) against the version read at planning, so
readers see all of a job or none of it; after it, the job's ledger is cleared and the
catalog's columns follow the new schema. On failure, the job's data files are deleted and a
table the job declared is deregistered, unless the commit did land (a lost response).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import WriterCommitMessage

from ..rules.errors import is_lance_missing
from .fragments import (
    JobLedger,
    LanceCommitMessage,
    commit_messages,
    delete_files,
    written_files,
)
from .options import Location
from .plan import OP_APPEND, WritePlan
from .reader import open_dataset

if TYPE_CHECKING:
    from lance import LanceDataset

logger = logging.getLogger("lance_metastore.spark")


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


def lance_operation(plan: WritePlan, fragments: list[Any]) -> Any:
    """The Lance operation that adds ``fragments`` as the plan says."""
    import lance
    from lance.schema import LanceSchema

    if plan.operation != OP_APPEND:
        return lance.LanceOperation.Overwrite(plan.schema, fragments)
    if plan.merge_schema:
        # One commit adds the columns and the rows: the table's fragments (as read at
        # planning; Lance refuses the commit if a concurrent one changed them) and ours.
        dataset = open_dataset(plan.location, plan.read_version)
        existing = [f.metadata for f in dataset.get_fragments()]
        # Merge takes Lance's own schema (a pyarrow one is deprecated); its field ids come out
        # numbered in pre-order, as the tasks wrote them (plan.merged_schema checks the table's).
        schema = LanceSchema.from_pyarrow(plan.schema)
        return lance.LanceOperation.Merge(existing + fragments, schema)
    return lance.LanceOperation.Append(fragments)


def commit_job(
    plan: WritePlan,
    messages: list[LanceCommitMessage],
    operation: Any,
    read_version: int | None,
    *,
    undo: Callable[[], None],
    sync_columns: bool,
    properties: Mapping[str, str] | None = None,
) -> Any:
    """Commit ``operation``, then clear the job's ledger and (``sync_columns``) bring the
    catalog's columns up to the plan's schema. If the commit fails and did not land,
    ``undo`` runs before the error is re-raised."""
    try:
        dataset = commit_operation(plan.location, operation, read_version, properties)
    except BaseException:
        # An error after the manifest was written (a lost response) must not delete
        # files a committed version references: check before undoing.
        if not committed(plan, messages):
            undo()
        raise
    ledger = JobLedger(plan.location, plan.job_id)
    ledger.remove()
    ledger.collect_garbage()
    if plan.location.table_id is not None and sync_columns:
        sync_catalog_columns(plan)
    return dataset


def committed(plan: WritePlan, messages: list[LanceCommitMessage]) -> bool:
    """Whether the latest version references this job's files (True if unsure)."""
    ours = written_files(messages)
    if not ours:
        return False
    try:
        dataset = open_dataset(plan.location)
    except Exception as error:
        return not is_lance_missing(error)
    if plan.read_version is not None and dataset.version <= plan.read_version:
        return False
    try:
        for fragment in dataset.get_fragments():
            if any(f.path in ours for f in fragment.metadata.files):
                return True
    except Exception:
        return True
    return False


def sync_catalog_columns(plan: WritePlan) -> None:
    """Catalog columns from the schema just committed: passing it means the namespace
    does not open the dataset again (for a managed table, through the catalog)."""
    ns = plan.location.namespace()
    try:
        sync = getattr(ns, "sync_table_columns", None)
        if callable(sync):
            sync(list(plan.location.table_id or ()), schema=plan.schema)
    except Exception as error:
        # The data is committed; a stale column list is not worth failing the job for.
        logger.warning("could not sync catalog columns of %s: %s", plan.location.name, error)


def delete_job_files(plan: WritePlan, messages: list[WriterCommitMessage | None]) -> None:
    """Delete every data file the job wrote: those its messages name and those its ledger
    recorded (a task Spark aborted or lost still recorded its files there)."""
    files = written_files(commit_messages(messages))
    files.update(JobLedger(plan.location, plan.job_id).files())
    delete_files(plan.location, sorted(files))
