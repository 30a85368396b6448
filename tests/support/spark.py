"""A local SparkSession for tests, examples and benchmarks: local[2], loopback only, no UI.

Python workers must run the interpreter that has this project installed, so
``PYSPARK_PYTHON`` (and the driver's) are set to ``sys.executable`` before the JVM starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any


def local_session(
    app_name: str = "lance-metastore-tests",
    cores: int = 2,
    conf: Mapping[str, str] | None = None,
) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.default.parallelism", str(cores))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "2g")
        # Workers fork from a daemon that has the heavy imports done (docs/spark.md).
        .config("spark.python.daemon.module", "lance_metastore.spark.daemon")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from lance_metastore.spark import register

    register(spark)
    return spark


def plan_nodes(df: Any) -> list[str]:
    """Names of the nodes of ``df``'s physical plan (after it ran, its final plan)."""
    names = []
    stack = [df._jdf.queryExecution().executedPlan()]
    while stack:
        node = stack.pop()
        names.append(str(node.nodeName()))
        children = node.children().iterator()
        while children.hasNext():
            stack.append(children.next())
        if node.nodeName() == "AdaptiveSparkPlan":
            stack.append(node.executedPlan())
    return names


def scan_rows(df: Any) -> int:
    """Rows the data source's scan produced in ``df``'s last execution (Spark's own metric)."""
    total = 0
    stack = [df._jdf.queryExecution().executedPlan()]
    while stack:
        node = stack.pop()
        if node.nodeName().startswith("BatchScan"):
            metric = node.metrics().get("numOutputRows")
            if metric.isDefined():
                total += int(metric.get().value())
        children = node.children().iterator()
        while children.hasNext():
            stack.append(children.next())
        # Adaptive plans hide their final plan behind a wrapper.
        if node.nodeName() == "AdaptiveSparkPlan":
            stack.append(node.executedPlan())
    return total
