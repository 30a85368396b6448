"""Row-level changes from PySpark, in the shape of Delta's ``DeltaTable``.

::

    from lance_metastore.spark import LanceTable

    orders = LanceTable.for_name(spark, "hive$sales$orders", impl="hive3", uri="thrift://...")
    orders.delete("status = 'cancelled'")
    orders.update("id = 7", {"amount": "amount * 2"})
    (orders.merge(changes_df, on="id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute())

Each change is ONE Lance commit (through the catalog when it manages the table's versions)
against the version the change read. The heavy work runs in Spark tasks: the table is read
with each row's address (``_rowaddr``); the rows a change touches are grouped by fragment
and each task writes its fragments' deletion files (``LanceFragment.delete_rows``); rows
to write (updated or inserted) are written as new fragments by tasks too. The driver only
commits the resulting metadata (``LanceOperation.Delete`` / ``Update`` / ``Append``). A
failed job commits nothing and deletes the data files it wrote; a concurrent writer whose
change Lance cannot rebase over makes the commit fail with ConcurrentModificationError (14)
and nothing changes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from lance_namespace.errors import InvalidInputError, TableColumnNotFoundError

from .commit import commit_operation, undo_allowed
from .fragments import JobLedger, LanceCommitMessage, fragments_of
from .options import ResolvedTable, parse_target
from .plan import OP_APPEND, WritePlan
from .reader import ROW_ADDRESS, Snapshot, fragment_of, open_dataset, resolve_snapshot
from .types import target_schema
from .writer import LanceWriter

if TYPE_CHECKING:
    from lance import LanceOperation
    from lance.fragment import FragmentMetadata
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

_MESSAGE_SCHEMA = "message string"


@dataclass(frozen=True)
class ChangeResult:
    """What one change did: the version it committed (None: nothing to change), the table rows
    it removed (deleted, or replaced by their updated values) and the rows it wrote (updated
    or inserted)."""

    version: int | None
    deleted: int
    written: int


class LanceTable:
    """A Lance table, by catalog name or path, for row-level changes and reads."""

    def __init__(self, spark: SparkSession, options: Mapping[str, str]) -> None:
        self.spark = spark
        self.options = {str(k): str(v) for k, v in options.items()}
        self.target = parse_target(self.options)

    @classmethod
    def for_name(cls, spark: SparkSession, name: str, **options: str) -> LanceTable:
        """The table ``name`` (a ``$``-joined id) of the catalog that option ``impl`` names;
        the options are the data source's (docs/spark.md)."""
        if not options.get("impl"):
            raise InvalidInputError(
                f"LanceTable.for_name({name!r}) needs option 'impl' (glue, hive2, hive3, ...); "
                "use LanceTable.for_path for a dataset URI"
            )
        return cls(spark, {**options, "path": name})

    @classmethod
    def for_path(cls, spark: SparkSession, uri: str, **options: str) -> LanceTable:
        """The Lance dataset at ``uri``, with no catalog."""
        if options.get("impl"):
            raise InvalidInputError("LanceTable.for_path takes no 'impl'; use for_name")
        return cls(spark, {**options, "path": uri})

    @property
    def name(self) -> str:
        return self.target.name

    def to_df(self, columns: Sequence[str] | None = None) -> DataFrame:
        """The table's latest version as a DataFrame; ``columns`` reads only those."""
        reader = self.spark.read.format("lance").options(**self.options)
        if columns:
            reader = reader.option("columns", ",".join(columns))
        return reader.load()

    # -- changes --------------------------------------------------------------------------------

    def delete(self, condition: str | None = None) -> ChangeResult:
        """Delete the rows where the Spark SQL ``condition`` holds (all rows if None)."""
        snapshot, target = self._snapshot_and_rows()
        doomed = target if condition is None else target.filter(_condition(condition))
        return _Change(self, snapshot, doomed.select(ROW_ADDRESS), None).run(
            predicate=condition or "true"
        )

    def update(self, condition: str | None, set: Mapping[str, str]) -> ChangeResult:
        """Set columns to Spark SQL expressions (over the row's columns) where ``condition``
        holds (all rows if None)."""
        from pyspark.sql import functions as F

        snapshot, target = self._snapshot_and_rows()
        assignments = _assignments(snapshot, set, "update")
        matched = target if condition is None else target.filter(_condition(condition))
        columns = [
            F.expr(assignments[name]).alias(name) if name in assignments else F.col(name)
            for name in snapshot.schema.names
        ]
        return _Change(self, snapshot, matched.select(ROW_ADDRESS, *columns), None).run()

    def merge(self, source: DataFrame, on: str | Sequence[str]) -> MergeBuilder:
        """Merge ``source`` into the table. ``on``: column names present in both (equality
        on each), or a Spark SQL condition over ``target.<col>`` and ``source.<col>``."""
        return MergeBuilder(self, source, on)

    def _snapshot_and_rows(self) -> tuple[Snapshot, DataFrame]:
        """The table's current version, pinned, and its rows with their addresses."""
        snapshot = resolve_snapshot(self.target, self.options)
        options = {**self.options, "version": str(snapshot.version), "row_address": "true"}
        options.pop("as_of", None)
        options.pop("columns", None)
        rows = self.spark.read.format("lance").options(**options).load()
        return snapshot, rows


class MergeBuilder:
    """Clauses of a merge; ``execute()`` runs it as one commit."""

    def __init__(self, table: LanceTable, source: Any, on: str | Sequence[str]) -> None:
        self.table = table
        self.source = source
        self.on = on
        self.matched: tuple[str, Mapping[str, str] | None] | None = None
        self.insert = False

    def _set_matched(self, action: str, assignments: Mapping[str, str] | None) -> MergeBuilder:
        if self.matched is not None:
            raise InvalidInputError("A merge takes one when_matched_* clause")
        self.matched = (action, assignments)
        return self

    def when_matched_update_all(self) -> MergeBuilder:
        """Matched table rows take the source row's values (columns matched by name)."""
        return self._set_matched("update_all", None)

    def when_matched_update(self, set: Mapping[str, str]) -> MergeBuilder:
        """Matched table rows get these columns set to Spark SQL expressions over
        ``target.<col>`` and ``source.<col>``."""
        return self._set_matched("update", dict(set))

    def when_matched_delete(self) -> MergeBuilder:
        return self._set_matched("delete", None)

    def when_not_matched_insert_all(self) -> MergeBuilder:
        """Source rows that match no table row are inserted (columns matched by name)."""
        self.insert = True
        return self

    def execute(self) -> ChangeResult:
        from pyspark.sql import functions as F

        if self.matched is None and not self.insert:
            raise InvalidInputError("A merge needs at least one when_* clause")
        table = self.table
        snapshot, rows = table._snapshot_and_rows()
        names = snapshot.schema.names
        source_columns = {c.lower(): c for c in self.source.columns}
        target = rows.alias("target")
        source = self.source.alias("source")
        joined = source.join(target, _join_condition(self.on, names, source_columns), "left")
        matched = F.col(f"target.{ROW_ADDRESS}").isNotNull()

        def from_source(name: str) -> Column:
            column = source_columns.get(name.lower())
            if column is None:
                raise TableColumnNotFoundError(
                    f"The merge source has no column {name!r} of table {table.name!r} "
                    f"(source columns: {self.source.columns})"
                )
            return F.col(f"source.`{column}`")

        action, assignments = self.matched or ("none", None)
        if action == "update_all":
            matched_values = {name: from_source(name) for name in names}
        elif action == "update":
            given = _assignments(snapshot, assignments or {}, "when_matched_update")
            matched_values = {
                name: F.expr(given[name]) if name in given else F.col(f"target.`{name}`")
                for name in names
            }
        else:
            matched_values = {}
        inserted_values = {name: from_source(name) for name in names} if self.insert else {}

        # One row per source row: the table row it replaces or deletes (if any), and the row to
        # write (if any); rows with neither are dropped.
        keep_matched = F.lit(action in ("update_all", "update"))
        write = F.when(matched, keep_matched).otherwise(F.lit(self.insert))
        removes = matched if action != "none" else F.lit(False)
        columns = []
        for name in names:
            value = F.lit(None)
            if matched_values:
                value = F.when(matched, matched_values[name])
                if inserted_values:
                    value = value.otherwise(inserted_values[name])
            elif inserted_values:
                value = F.when(~matched, inserted_values[name])
            columns.append(value.alias(name))
        removed = F.when(removes, F.col(f"target.{ROW_ADDRESS}")).alias(ROW_ADDRESS)
        if not matched_values and not inserted_values:  # when_matched_delete alone
            changes = joined.select(removed).filter(F.col(ROW_ADDRESS).isNotNull())
            return _Change(table, snapshot, changes, None).run()
        changes = joined.select(removed, write.alias("_write"), *columns).filter(
            F.col(ROW_ADDRESS).isNotNull() | F.col("_write")
        )
        return _Change(table, snapshot, changes, "_write").run()


class _Change:
    """Runs one change: ``changes`` has ``_rowaddr`` (a table row to remove, or null) and,
    unless it is a pure delete, the table's columns (a row to write). ``write_flag`` names a
    boolean column saying which rows to write (None: every row with columns)."""

    def __init__(self, table: LanceTable, snapshot: Snapshot, changes: Any, write_flag: str | None):
        self.table = table
        self.snapshot = snapshot
        self.changes = changes
        self.write_flag = write_flag

    def run(self, predicate: str | None = None) -> ChangeResult:
        from pyspark import StorageLevel

        names = self.snapshot.schema.names
        writes = len(self.changes.columns) > 1
        changes = self.changes.persist(StorageLevel.MEMORY_AND_DISK) if writes else self.changes
        writer: LanceWriter | None = None
        messages: list[LanceCommitMessage] = []
        committing = False
        try:
            updated, removed, deleted = self._delete_rows(changes)
            if writes:
                rows = changes
                if self.write_flag is not None:
                    rows = rows.filter(rows[self.write_flag])
                rows = rows.select(*[rows[f"`{n}`"] for n in names])
                writer = LanceWriter(self._plan(rows.schema))
                messages = self._write_rows(rows, writer)
            new_fragments = fragments_of(messages)
            written = sum(m.rows for m in messages)
            if not updated and not removed and not new_fragments:
                return ChangeResult(None, 0, 0)
            operation = self._operation(updated, removed, new_fragments, predicate)
            committing = True
            dataset = commit_operation(
                self.snapshot.location, operation, self.snapshot.version, None
            )
        except BaseException as error:
            # Before the commit, or a commit refused for sure: undo; else its outcome is
            # unknown (it may land yet) and the files stay.
            if (
                writer is not None
                and messages
                and (not committing or undo_allowed(error, writer.plan, messages))
            ):
                writer.abort(list(messages))
            raise
        finally:
            if writes:
                changes.unpersist()
        if writer is not None:
            JobLedger(writer.plan.location, writer.plan.job_id).remove()
        return ChangeResult(int(dataset.version), deleted, written)

    def _plan(self, spark_schema: StructType) -> WritePlan:
        location = self.snapshot.location
        dataset = open_dataset(location, self.snapshot.version)
        schema = target_schema(spark_schema, dataset.schema, append=True, where=repr(location.name))
        incoming = {f.name.lower(): f.name for f in spark_schema}
        return WritePlan(
            location=location,
            operation=OP_APPEND,
            schema=schema,
            names=[incoming[n.lower()] for n in schema.names],
            read_version=self.snapshot.version,
            data_storage_version=str(dataset.data_storage_version),
        )

    def _delete_rows(self, changes: DataFrame) -> tuple[list[FragmentMetadata], list[int], int]:
        """Deletion files for the rows to remove, written by tasks grouped by fragment:
        (fragments with new deletion files, fragments left empty, rows removed)."""
        from lance.fragment import FragmentMetadata
        from pyspark.sql import functions as F

        addresses = changes.select(ROW_ADDRESS).filter(F.col(ROW_ADDRESS).isNotNull())
        by_fragment = addresses.repartition(
            self.table.spark.sparkContext.defaultParallelism,
            F.shiftright(F.col(ROW_ADDRESS), 32),
        )
        task = _delete_task(self.snapshot.location, self.snapshot.version, self.table.name)
        results = [
            json.loads(r[0]) for r in by_fragment.mapInArrow(task, _MESSAGE_SCHEMA).collect()
        ]
        updated = [
            FragmentMetadata.from_json(r["fragment"]) for r in results if r["fragment"] is not None
        ]
        removed = [int(r["id"]) for r in results if r["fragment"] is None]
        return updated, removed, sum(int(r["rows"]) for r in results)

    def _write_rows(self, rows: DataFrame, writer: LanceWriter) -> list[LanceCommitMessage]:
        def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            message = writer.write(batches)
            text = json.dumps(
                {"fragments": message.fragments, "files": message.files, "rows": message.rows}
            )
            yield pa.RecordBatch.from_pydict({"message": [text]})

        messages = []
        for row in rows.mapInArrow(task, _MESSAGE_SCHEMA).collect():
            fields = json.loads(row[0])
            messages.append(
                LanceCommitMessage(fields["fragments"], fields["files"], int(fields["rows"]))
            )
        return messages

    def _operation(
        self,
        updated: list[FragmentMetadata],
        removed: list[int],
        new: list[FragmentMetadata],
        predicate: str | None,
    ) -> LanceOperation.BaseOperation:
        import lance

        if not updated and not removed:
            return lance.LanceOperation.Append(new)
        if not new and predicate is not None:
            return lance.LanceOperation.Delete(updated, removed, predicate)
        return lance.LanceOperation.Update(
            removed_fragment_ids=removed, updated_fragments=updated, new_fragments=new
        )


def _delete_task(
    location: ResolvedTable, version: int, name: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A task: the row addresses of its partition (whole fragments, thanks to the
    repartition) -> one deletion file per fragment, as JSON messages."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        offsets: dict[int, list[int]] = {}
        for batch in batches:
            # Row addresses are never null.
            for address in cast("list[int]", batch.column(0).to_pylist()):
                offsets.setdefault(address >> 32, []).append(address & 0xFFFFFFFF)
        if not offsets:
            return
        dataset = open_dataset(location, version)
        out = []
        for fragment_id, rows in offsets.items():
            if len(set(rows)) != len(rows):
                raise InvalidInputError(
                    f"Several source rows match the same row of {name!r} (fragment "
                    f"{fragment_id}); a merge must match each table row at most once"
                )
            metadata = fragment_of(dataset, fragment_id).delete_rows(rows)
            out.append(
                json.dumps(
                    {
                        "id": fragment_id,
                        "fragment": None if metadata is None else json.dumps(metadata.to_json()),
                        "rows": len(rows),
                    }
                )
            )
        yield pa.RecordBatch.from_pydict({"message": out})

    return task


def _condition(condition: str) -> Column:
    from pyspark.sql import functions as F

    if not isinstance(condition, str) or not condition.strip():
        raise InvalidInputError(f"A condition must be a Spark SQL expression, got {condition!r}")
    return F.expr(condition)


def _assignments(snapshot: Snapshot, assignments: Mapping[str, str], what: str) -> dict[str, str]:
    """``{column: expression}`` with the table's column names (matched case-insensitively)."""
    if not assignments:
        raise InvalidInputError(f"{what} needs at least one column to set")
    by_lower = {n.lower(): n for n in snapshot.schema.names}
    resolved = {}
    for name, expression in assignments.items():
        column = by_lower.get(str(name).lower())
        if column is None:
            raise TableColumnNotFoundError(
                f"Table {snapshot.location.name!r} has no column {name!r}; its columns are "
                f"{snapshot.schema.names}"
            )
        if not isinstance(expression, str) or not expression.strip():
            raise InvalidInputError(f"The value of {name!r} must be a Spark SQL expression")
        resolved[column] = expression
    return resolved


def _join_condition(on: str | Sequence[str], names: list[str], source: dict[str, str]) -> Column:
    from pyspark.sql import functions as F

    by_lower = {n.lower(): n for n in names}
    keys = [on] if isinstance(on, str) and on.lower() in by_lower else on
    if isinstance(keys, str):
        return F.expr(keys)
    if not keys:
        raise InvalidInputError("merge needs 'on': key columns or a condition")
    condition = None
    for key in keys:
        column, source_column = by_lower.get(str(key).lower()), source.get(str(key).lower())
        if column is None or source_column is None:
            raise TableColumnNotFoundError(
                f"Merge key {key!r} must be a column of both the table ({names}) and the "
                f"source ({list(source.values())})"
            )
        equal = F.col(f"target.`{column}`") == F.col(f"source.`{source_column}`")
        condition = equal if condition is None else condition & equal
    assert condition is not None  # keys is not empty
    return condition
