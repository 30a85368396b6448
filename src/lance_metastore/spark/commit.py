"""The commit protocol of a Spark write: one Lance commit on the driver, then the catalog.

Kept apart from the data path (:mod:`.fragments`) because it is where a write becomes
visible and where failures must be undone exactly: one Lance commit (through the catalog
when the catalog manages the table's versions) against the version read at planning, so
readers see all of a job or none of it; after it, the job's ledger is cleared and the
catalog's columns follow the new schema.

On failure the job is undone (its data files deleted, a table it declared deregistered) only
when the failure proves nothing will reference them: the commit was refused (a conflict, 14,
or an invalid input, 13) and no version after the one the job read references the job's
files. Any other failure (a client timeout, a lost reply, an unavailable catalog or store)
leaves the commit's outcome unknown: it may be in flight on the catalog's server and land
later. Then nothing is deleted, not by the commit nor by the abort Spark calls after it (the
job's ``_COMMITTING`` marker says so across processes); files no version ever references are
left to Lance's ``cleanup_old_versions``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import WriterCommitMessage

from ..rules.errors import classify_lance_error, is_lance_missing
from .fragments import (
    JobLedger,
    LanceCommitMessage,
    commit_messages,
    delete_files,
    written_files,
)
from .options import ResolvedTable
from .plan import OP_APPEND, WritePlan
from .reader import open_dataset

if TYPE_CHECKING:
    from lance import LanceDataset

logger = logging.getLogger("lance_metastore.spark")


def commit_operation(
    location: ResolvedTable,
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
    catalog's columns up to the plan's schema. If the commit is refused for sure,
    ``undo`` runs before the error is re-raised; if its outcome is unknown, nothing is
    undone and the job's marker keeps Spark's abort from deleting anything either."""
    ledger = JobLedger(plan.location, plan.job_id)
    ledger.mark_committing()
    try:
        dataset = commit_operation(plan.location, operation, read_version, properties)
    except BaseException as error:
        if undo_allowed(error, plan, messages):
            ledger.clear_committing()
            undo()
        raise
    ledger.remove()
    ledger.collect_garbage()
    if plan.location.table_id is not None and sync_columns:
        sync_catalog_columns(plan)
    return dataset


def undo_allowed(error: BaseException, plan: WritePlan, messages: list[LanceCommitMessage]) -> bool:
    """Whether a failed commit may be undone (its files deleted): only when it was refused
    for sure (14 or 13: nothing was or will be committed by it) and no version after the one
    the job read references its files. A timeout, a lost reply or an unavailable service
    leaves the outcome unknown: the commit may still land on the server, so nothing is
    deleted (Lance's ``cleanup_old_versions`` removes files no version references)."""
    from lance_namespace.errors import (
        ConcurrentModificationError,
        InvalidInputError,
        LanceNamespaceError,
    )

    kind = type(error) if isinstance(error, LanceNamespaceError) else classify_lance_error(error)
    refused = issubclass(kind, (ConcurrentModificationError, InvalidInputError))
    if refused and not committed(plan, messages):
        return True
    logger.warning(
        "write to %s: the commit's outcome is unknown (%s); the job's data files are kept, "
        "as a version may still reference them",
        plan.location.name,
        type(error).__name__,
    )
    return False


def committed(plan: WritePlan, messages: list[LanceCommitMessage]) -> bool:
    """Whether any version after the one the job read references this job's files (True if
    unsure): then the commit landed and only its reply was lost, and nothing may be deleted.

    Every version after the read one is checked, newest first, not only the latest: a commit
    whose reply was lost can be followed at once by another writer's (an overwrite, a
    compaction, a delete) that no longer references the job's files, while time travel to the
    job's own version still needs them."""
    ours = written_files(messages)
    if not ours:
        return False
    try:
        dataset = open_dataset(plan.location)
    except Exception as error:
        return not is_lance_missing(error)
    first = (plan.read_version or 0) + 1
    try:
        for version in range(int(dataset.version), first - 1, -1):
            try:
                snapshot = (
                    dataset if version == dataset.version else dataset.checkout_version(version)
                )
            except Exception as error:
                if is_lance_missing(error):
                    continue  # removed by cleanup: it references nothing any more
                return True
            for fragment in snapshot.get_fragments():
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
