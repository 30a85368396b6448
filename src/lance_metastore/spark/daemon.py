"""Spark's Python worker daemon, with this source's imports done once, before it forks.

Spark forks every Python worker (tasks, and the planners that call a data source's
``schema``/``reader``/``writer``) from one daemon process per executor. Each fresh worker
otherwise imports ``lance_namespace`` (its generated REST client alone takes ~1.5 s), pyarrow
and pandas again, which is most of the first query's time in a new session. Set before the
session starts::

    SparkSession.builder.config("spark.python.daemon.module", "lance_metastore.spark.daemon")

Lance itself is not imported here: it is not fork-safe (its runtime threads do not survive a
fork), so each worker imports it after the fork, when it first opens a dataset.
"""

from __future__ import annotations

import contextlib
import importlib

from pyspark.daemon import manager

# pandas: lance and mapInArrow import it in every worker; lance_metastore.spark brings
# lance_namespace, the catalog aliases and the data source. Each is optional here.
for _module in ("pandas", "pyarrow.dataset", "lance_metastore.spark"):
    with contextlib.suppress(ImportError):
        importlib.import_module(_module)

if __name__ == "__main__":
    manager()
