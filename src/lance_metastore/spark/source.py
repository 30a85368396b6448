"""The ``lance`` data source: Spark's entry points, delegating to the reader and writer."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import LongType, StructType

from .options import bool_option, parse_target
from .plan import plan_write
from .reader import (
    DEFAULT_PARTITIONS,
    ROW_ADDRESS,
    FilteringLanceReader,
    LanceReader,
    Snapshot,
    pushdown_supported,
    resolve_snapshot,
)
from .reader import select_columns as _select_columns
from .streaming import LanceStreamReader, stream_writer
from .types import spark_schema
from .writer import LanceWriter


class LanceDataSource(DataSource):
    """Lance tables by catalog name (option ``impl``) or by dataset URI.

    See docs/spark.md for the options. The table is resolved (catalog, then dataset version)
    when Spark asks for the schema and again whenever it plans a read: a temporary view keeps
    this instance for its lifetime, and every read Spark plans again for it (a new set of
    pushed filters, say) must see the writes made since the view was created.
    """

    # Spark's default parallelism, set on the class that register() makes for a session.
    default_partitions: int = DEFAULT_PARTITIONS

    @classmethod
    def name(cls) -> str:
        return "lance"

    def _resolve(self) -> Snapshot:
        return resolve_snapshot(parse_target(self.options), self.options)

    def schema(self) -> StructType:
        snapshot = self._resolve()
        schema = spark_schema(snapshot.schema, _select_columns(snapshot, self.options, None))
        if bool_option(self.options, "row_address", False):
            schema = schema.add(ROW_ADDRESS, LongType(), nullable=False)
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        snapshot = self._resolve()
        pushdown = bool_option(self.options, "pushdown", True) and pushdown_supported()
        cls = FilteringLanceReader if pushdown else LanceReader
        return cls(snapshot, schema, self.options, self.default_partitions)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return LanceWriter(plan_write(self.options, schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """Append mode appends each micro-batch; complete mode (``overwrite``) replaces."""
        return stream_writer(plan_write(self.options, schema, overwrite), self.options, overwrite)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return LanceStreamReader(self._resolve(), schema, self.options)
