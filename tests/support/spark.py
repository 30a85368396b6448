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
    """The library's ``local_session`` with the tests' settings."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from lance_metastore.spark import local_session as library_session

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(cores),
        "spark.default.parallelism": str(cores),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.driver.memory": "2g",
        # Workers fork from a daemon that has the heavy imports done (docs/spark.md).
        "spark.python.daemon.module": "lance_metastore.spark.daemon",
    }
    spark = library_session(cores, app_name=app_name, conf={**settings, **(conf or {})})
    spark.sparkContext.setLogLevel("ERROR")
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
