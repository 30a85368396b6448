"""A Spark data source for Lance tables, by name through a catalog or by URI.

::

    from lance_metastore.spark import register
    register(spark)
    (df.write.format("lance").option("impl", "hive3").option("uri", "thrift://...")
        .mode("append").save("hive$sales$orders"))
    spark.read.format("lance").option("impl", "glue").load("sales$orders")

Built on Spark 4's Python Data Source API: no JVM jars. Read docs/spark.md for options,
save modes, SQL and limitations.
"""

from __future__ import annotations

from typing import Any

from .source import LanceDataSource

__all__ = ["FILTER_PUSHDOWN_CONF", "LanceDataSource", "register"]

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, *, filter_pushdown: bool = True) -> None:
    """Register format ``"lance"`` with a SparkSession.

    ``filter_pushdown`` also turns on Spark's Python filter pushdown for the session (off by
    default in Spark, and a reader that pushes filters fails while it is off); with False the
    session setting is left alone and reads must set option ``pushdown=false`` if it is off.
    """
    if filter_pushdown:
        spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    spark.dataSource.register(LanceDataSource)
