"""The ``lance`` data source: Spark's entry points, delegating to the reader and writer."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

from lance_namespace.errors import LanceNamespaceError
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import LongType, StructType

from ..rules.extras import MissingExtraError
from .options import OptionError, bool_option, parse_target
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

Method = TypeVar("Method", bound=Callable[..., Any])

# Errors whose message says what to do: the person needs that line, not our frames.
ACTIONABLE_ERRORS = (LanceNamespaceError, OptionError, MissingExtraError)


def one_line_errors(method: Method) -> Method:
    """Make an actionable error the first line Spark shows after its own prefix.

    These methods run in the Python worker Spark starts to plan a read or write, which sends
    the error to the driver formatted with its traceback unless ``SPARK_HIDE_TRACEBACK`` is
    set (pyspark.util.handle_worker_exception). For our own actionable errors the traceback
    is dropped and that variable set in this planning worker, so the text after Spark's
    prefix is ``ErrorClass: message``; any other error keeps its whole traceback.
    """

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except ACTIONABLE_ERRORS as error:
            os.environ.setdefault("SPARK_HIDE_TRACEBACK", "1")
            raise error.with_traceback(None) from None

    return wrapper  # type: ignore[return-value]


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

    @one_line_errors
    def schema(self) -> StructType:
        snapshot = self._resolve()
        schema = spark_schema(snapshot.schema, _select_columns(snapshot, self.options, None))
        if bool_option(self.options, "row_address", False):
            schema = schema.add(ROW_ADDRESS, LongType(), nullable=False)
        return schema

    @one_line_errors
    def reader(self, schema: StructType) -> DataSourceReader:
        snapshot = self._resolve()
        pushdown = bool_option(self.options, "pushdown", True) and pushdown_supported()
        cls = FilteringLanceReader if pushdown else LanceReader
        return cls(snapshot, schema, self.options, self.default_partitions)

    @one_line_errors
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return LanceWriter(plan_write(self.options, schema, overwrite))

    @one_line_errors
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """Append mode appends each micro-batch; complete mode (``overwrite``) replaces."""
        return stream_writer(plan_write(self.options, schema, overwrite), self.options, overwrite)

    @one_line_errors
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return LanceStreamReader(self._resolve(), schema, self.options)
