"""Reading: partitions of whole fragments and row ranges, one Lance scanner each.

Planning happens on the driver: the table is resolved once (catalog ``describe_table``, then
the dataset at a pinned version), the partitions list fragment ids and row ranges, and each
task opens that same version, so a read sees one snapshot even while writers commit.

A read makes about one partition per core (Spark's default parallelism, recorded when the
source is registered; option ``partitions``), balanced by rows, because every task of a Python
data source has a fixed cost. A partition holds *pieces*: whole fragments (read together by
one scanner) or a row range of one fragment. Without a filter a range is ``offset``/``limit``
over the fragment's rows; with a pushed filter it is a ``_rowaddr`` range (physical rows),
because ``offset``/``limit`` count rows after filtering.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ..rules.errors import is_lance_missing
from .options import OptionError, ResolvedTable, Target, int_option
from .types import castable, conform, spark_arrow_schema, spark_type_or_none

if TYPE_CHECKING:
    from lance import LanceDataset
    from lance.fragment import LanceFragment
    from pyspark.sql.datasource import Filter

DEFAULT_BATCH_SIZE = 256 * 1024
DEFAULT_BATCH_BYTES = 16 * 1024 * 1024
# Each Spark task of a Python data source costs tens of milliseconds (measured: a 10-partition
# scan of 10M rows took ~0.5 s longer than a 2-partition one at local[2]), so a read makes
# about as many partitions as Spark has cores, never smaller than this.
MIN_ROWS_PER_PARTITION = 128 * 1024
DEFAULT_PARTITIONS = 2
# Option ``row_address=true`` adds this column: each row's physical address in the dataset
# (fragment id << 32 | row offset), which row-level changes use to find the rows they touch.
ROW_ADDRESS = "_rowaddr"


@dataclass(frozen=True)
class Snapshot:
    """A table at one version, as the driver resolved it."""

    location: ResolvedTable
    version: int
    schema: pa.Schema


class LancePartition(InputPartition):
    """Pieces of a Lance dataset: ``(fragment_id, start, end)``; ``start is None`` = whole."""

    def __init__(
        self, pieces: list[tuple[int, int | None, int | None]], version: int | None = None
    ) -> None:
        super().__init__(None)
        self.pieces = pieces
        # Set by the streaming source, whose partitions read different versions.
        self.version = version


def fragment_of(dataset: LanceDataset, fragment_id: int) -> LanceFragment:
    """A fragment of the version the work was planned from (so it exists there)."""
    fragment = dataset.get_fragment(fragment_id)
    assert fragment is not None
    return fragment


def open_dataset(
    location: ResolvedTable, version: int | str | None = None, asof: Any = None
) -> LanceDataset:
    """The table's dataset; a catalog-managed table (``managed_versioning``) is opened through
    its catalog, which alone knows its versions (their manifests keep staging names); so is
    one whose credentials the catalog vended, so Lance refreshes them before they expire."""
    import lance

    if (location.managed_versioning or location.vended) and location.table_id is not None:
        return lance.dataset(
            version=version,
            asof=asof,
            namespace_client=location.namespace(),
            table_id=list(location.table_id),
        )
    return lance.dataset(
        location.uri,
        version=version,
        asof=asof,
        storage_options=location.storage_options,
    )


def resolve_location(target: Target) -> ResolvedTable:
    """Find the table's dataset: ask the catalog, or take the path as it is."""
    if target.impl is None:
        return ResolvedTable(uri=target.path, storage_options=target.storage_options)
    from lance_namespace import DescribeTableRequest

    ns = target.namespace()
    response = ns.describe_table(DescribeTableRequest(id=list(target.table_id or ())))
    if not response.location:
        raise OptionError(f"The catalog gives no location for table {target.name!r}")
    return ResolvedTable(
        uri=response.location,
        storage_options=dict(response.storage_options or {}) or None,
        impl=target.impl,
        properties=dict(target.properties),
        table_id=target.table_id,
        managed_versioning=bool(response.managed_versioning),
    )


def resolve_snapshot(target: Target, options: Mapping[str, str]) -> Snapshot:
    """The table at the version the options ask for (``version``, ``as_of``), else the latest."""
    location = resolve_location(target)
    version: int | str | None = None
    raw_version = (options.get("version") or "").strip()
    if raw_version:
        version = int(raw_version) if raw_version.isdigit() else raw_version  # number or tag
    asof = None
    raw_asof = (options.get("as_of") or "").strip()
    if raw_asof:
        if version is not None:
            raise OptionError("Options 'version' and 'as_of' are exclusive; give one")
        try:
            asof = dt.datetime.fromisoformat(raw_asof.replace("Z", "+00:00"))
        except ValueError:
            raise OptionError(
                f"Option 'as_of' must be an ISO timestamp, got {raw_asof!r}"
            ) from None
        if asof.tzinfo is None:
            asof = asof.replace(tzinfo=dt.timezone.utc)
        # Lance compares with its version timestamps, naive datetimes in local time.
        asof = asof.astimezone().replace(tzinfo=None)
    try:
        dataset = open_dataset(location, version, asof)
    except Exception as error:
        if version is not None or asof is not None:
            try:
                latest = open_dataset(location)
            except Exception:
                latest = None
            if latest is not None:
                wanted = f"version {version!r}" if version is not None else f"as_of {raw_asof!r}"
                raise OptionError(
                    f"Table {location.name!r} has no {wanted}: {error}. "
                    f"Its latest version is {latest.version}"
                ) from error
        if is_lance_missing(error):
            raise FileNotFoundError(
                f"Table {location.name!r} has no Lance dataset at {location.uri!r} yet "
                "(declared but never written?)"
                if location.table_id
                else f"No Lance dataset at {location.uri!r}"
            ) from error
        raise
    return Snapshot(location, int(dataset.version), dataset.schema)


def open_existing(location: ResolvedTable, version: int | None = None) -> LanceDataset | None:
    """The table's dataset, or None when it has none yet (declared but never written)."""
    try:
        return open_dataset(location, version)
    except Exception as error:
        if is_lance_missing(error):
            return None
        raise


def select_columns(
    snapshot: Snapshot, options: Mapping[str, str], schema: StructType | None
) -> list[str]:
    """The dataset columns to read, in output order (the ``columns`` option or a schema)."""
    by_lower = {name.lower(): name for name in snapshot.schema.names}
    if schema is not None:
        wanted = [f.name for f in schema]
    elif (options.get("columns") or "").strip():
        wanted = [c.strip() for c in options["columns"].split(",") if c.strip()]
    else:
        return list(snapshot.schema.names)
    missing = [w for w in wanted if w.lower() not in by_lower]
    if missing:
        raise OptionError(
            f"Table {snapshot.location.name!r} has no column(s) {missing}; "
            f"its columns are {snapshot.schema.names}"
        )
    return [by_lower[w.lower()] for w in wanted]


class LanceReader(DataSourceReader):
    """Reads one snapshot; Spark pickles it to the executors after planning."""

    def __init__(
        self,
        snapshot: Snapshot,
        schema: StructType,
        options: Mapping[str, str],
        default_partitions: int = DEFAULT_PARTITIONS,
    ) -> None:
        self.snapshot = snapshot
        self.schema = schema
        data_fields = StructType([f for f in schema if f.name != ROW_ADDRESS])
        self.row_address = len(data_fields) < len(schema)
        self.data_schema = data_fields
        self.columns = select_columns(snapshot, options, data_fields)
        for spark_field, name in zip(data_fields, self.columns, strict=True):
            have = spark_type_or_none(snapshot.schema.field(name).type)
            if have is not None and not castable(have, spark_field.dataType):
                raise OptionError(
                    f"Column {spark_field.name!r} of {snapshot.location.name!r} is "
                    f"{have.simpleString()}, not {spark_field.dataType.simpleString()} as the "
                    "given schema says"
                )
        self.batch_size = int_option(options, "batch_size", DEFAULT_BATCH_SIZE)
        self.batch_size_bytes = int_option(options, "batch_size_bytes", DEFAULT_BATCH_BYTES)
        self.partitions_wanted = int_option(options, "partitions", None) or default_partitions
        self.rows_per_partition = int_option(options, "rows_per_partition", None)
        self.filter: str | None = None
        self.pushed: list[str] = []

    # -- planning (driver) --------------------------------------------------------------------

    def partitions(self) -> list[InputPartition]:
        return self.plan(open_dataset(self.snapshot.location, self.snapshot.version))

    def plan(
        self,
        dataset: LanceDataset,
        fragment_ids: set[int] | None = None,
        version: int | None = None,
    ) -> list[InputPartition]:
        """Balanced partitions: about the same number of rows each, fragments kept whole
        where they fit and split into row ranges where a partition boundary falls inside.
        ``fragment_ids`` limits the read to those fragments; ``version`` is recorded in the
        partitions (the streaming source reads a new version in each micro-batch)."""
        # With a filter, ranges are physical row addresses; without, rows as Lance counts them.
        counted = [
            (
                f.fragment_id,
                f.metadata.physical_rows if self.filter else f.metadata.num_rows,
                f.metadata.num_rows,
            )
            for f in dataset.get_fragments()
            if fragment_ids is None or f.fragment_id in fragment_ids
        ]
        fragments = [(fid, span) for fid, span, rows in counted if rows > 0]
        total = sum(span for _, span in fragments)
        if total == 0:
            return [LancePartition([], version)]
        if self.rows_per_partition:
            count = math.ceil(total / self.rows_per_partition)
        else:
            count = min(self.partitions_wanted, math.ceil(total / MIN_ROWS_PER_PARTITION))
        count = max(1, count)
        target = math.ceil(total / count)
        partitions: list[InputPartition] = []
        current: list[tuple[int, int | None, int | None]] = []
        room = target
        for fid, span in fragments:
            start = 0
            while start < span:
                take = min(room, span - start)
                if start == 0 and take == span:
                    current.append((fid, None, None))
                else:
                    current.append((fid, start, start + take))
                start += take
                room -= take
                if room == 0:
                    partitions.append(LancePartition(current, version))
                    current, room = [], target
        if current:
            partitions.append(LancePartition(current, version))
        return partitions

    # -- execution (executors) ----------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        pieces = getattr(partition, "pieces", None)
        if not pieces:
            return iter(())
        version = getattr(partition, "version", None)
        return self._read(pieces, self.snapshot.version if version is None else version)

    def _scan_options(self) -> dict[str, Any]:
        return {
            "columns": self.columns,
            "batch_size": self.batch_size,
            "batch_size_bytes": self.batch_size_bytes,
            "with_row_address": self.row_address,
        }

    def _read(
        self, pieces: Sequence[tuple[int, int | None, int | None]], version: int
    ) -> Iterator[pa.RecordBatch]:
        target = spark_arrow_schema(self.schema)
        names = [*self.columns, ROW_ADDRESS] if self.row_address else self.columns
        dataset = open_dataset(self.snapshot.location, version)
        whole = [fragment_of(dataset, fid) for fid, start, _ in pieces if start is None]
        scanners = []
        if whole:
            scanners.append(
                dataset.scanner(
                    filter=self.filter, fragments=whole, scan_in_order=False, **self._scan_options()
                )
            )
        for fid, start, end in pieces:
            if start is None or end is None:
                continue
            fragment = fragment_of(dataset, fid)
            if self.filter:
                base = fid << 32
                scanners.append(
                    dataset.scanner(
                        filter=f"({self.filter}) AND _rowaddr >= {base + start} "
                        f"AND _rowaddr < {base + end}",
                        fragments=[fragment],
                        **self._scan_options(),
                    )
                )
            else:
                scanners.append(
                    fragment.scanner(offset=start, limit=end - start, **self._scan_options())
                )
        for scanner in scanners:
            for batch in scanner.to_batches():
                if batch.num_rows:
                    yield conform(batch, target, names)


def pushdown_supported() -> bool:
    """Whether this pyspark offers filters to Python data sources (4.1+)."""
    import pyspark.sql.datasource as datasource

    return hasattr(datasource, "EqualTo")


class FilteringLanceReader(LanceReader):
    """A reader that also takes Spark's pushed filters (needs Spark 4.1+ with
    ``spark.sql.python.filterPushdown.enabled=true``, which :func:`register` sets)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        from . import filters as sql_filters

        pairs = zip(self.data_schema, self.columns, strict=True)
        names = {spark_field.name.lower(): column for spark_field, column in pairs}
        schema = self.snapshot.schema
        self.pushed = []
        for spark_filter in filters:
            clause = sql_filters.to_sql(spark_filter, schema, names)
            if clause is None:
                yield spark_filter
            else:
                self.pushed.append(clause)
        self.filter = sql_filters.combine(self.pushed)
