"""A Spark data source for Lance tables, by name through a catalog or by URI.

::

    from lance_metastore.spark import register
    register(spark)
    (df.write.format("lance").option("impl", "hive3").option("uri", "thrift://...")
        .mode("append").save("hive$sales$orders"))
    spark.read.format("lance").option("impl", "glue").load("sales$orders")

Built on Spark 4's Python Data Source API: no JVM jars. Read docs/spark.md for options,
save modes, SQL and limitations. ``sql_conf`` gives the settings for SQL through lance-spark's
catalog over our REST server; it imports no Spark 4 module, so it also serves a Spark 3.5
session (the data source is imported on first use).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from ..rules.extras import requires_extra
from .sql import sql_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "FILTER_PUSHDOWN_CONF",
    "ChangeResult",
    "LanceDataSource",
    "LanceTable",
    "MergeBuilder",
    "local_session",
    "register",
    "sql_conf",
    "use_in_this_thread",
]

# Names whose modules need pyspark 4's data source API: imported when first asked for, so
# that sql_conf also serves a Spark 3.5 session.
_LAZY = {
    "LanceDataSource": "source",
    "LanceTable": "table",
    "ChangeResult": "table",
    "MergeBuilder": "table",
}

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

# Lance's Rust log at its default level prints a line per task on a first write ("No existing
# dataset ... it will be created") into Spark's progress output. This module is imported before
# Lance in the driver and in every Python worker (the source unpickles from here), so a default
# set now reaches Lance's logger in each; a LANCE_LOG the user set wins.
LANCE_LOG_DEFAULT = "error"
os.environ.setdefault("LANCE_LOG", LANCE_LOG_DEFAULT)


def register(spark: SparkSession, *, filter_pushdown: bool = True) -> None:
    """Register format ``"lance"`` with a SparkSession.

    ``filter_pushdown`` also turns on Spark's Python filter pushdown for the session (off by
    default in Spark, and a reader that pushes filters fails while it is off); with False the
    session setting is left alone and reads must set option ``pushdown=false`` if it is off.
    """
    with requires_extra("spark"):
        from .source import LanceDataSource

    if filter_pushdown:
        spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    # Reads plan about one partition per core: record this session's parallelism on a
    # subclass, which Spark pickles by value along with the attribute.
    source = type(
        "_SessionLanceDataSource",
        (LanceDataSource,),
        {"default_partitions": _parallelism(spark), "__module__": __name__},
    )
    spark.dataSource.register(source)
    use_in_this_thread(spark)


LOOPBACK = "127.0.0.1"


def local_session(
    cores: int = 2, *, app_name: str = "lance-metastore", conf: dict[str, str] | None = None
) -> SparkSession:
    """A ``local[cores]`` SparkSession on loopback with format ``"lance"`` registered.

    ``register`` gets a session whose JVM already runs, so it cannot choose where Spark binds:
    Spark reads ``SPARK_LOCAL_IP`` when its JVM starts, and without it a host name that
    resolves to a loopback address makes Spark pick another interface, with a warning. This
    helper starts the JVM itself, so it sets ``SPARK_LOCAL_IP=127.0.0.1`` first unless it is
    already set (a local session needs nothing beyond loopback; a cluster session must not
    use it: its driver must be reachable). Its Python workers run this interpreter (it has
    lance-metastore) unless ``PYSPARK_PYTHON`` says otherwise. ``conf`` adds session settings.
    """
    with requires_extra("spark"):
        from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    settings = {"spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK}
    for key, value in {**settings, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def use_in_this_thread(spark: SparkSession) -> None:
    """Make ``spark`` the active session of the calling thread.

    Spark finds Python data sources through the JVM thread's active session; a driver thread
    that did not create the session has none, and ``format("lance")`` then fails with
    DATA_SOURCE_NOT_FOUND. Call this at the start of each thread that runs jobs.
    """
    jvm = getattr(spark, "_jvm", None)
    session = getattr(spark, "_jsparkSession", None)
    if jvm is not None and session is not None:  # classic Spark (not Spark Connect)
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(session)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    with requires_extra("spark"):
        return getattr(importlib.import_module(f".{module}", __name__), name)


def _parallelism(spark: SparkSession) -> int:
    from .reader import DEFAULT_PARTITIONS

    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect has no SparkContext
        try:
            return max(1, int(str(spark.conf.get("spark.default.parallelism"))))
        except Exception:
            return DEFAULT_PARTITIONS
