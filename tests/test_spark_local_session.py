"""``lance_metastore.spark.local_session``: a local session that stays on loopback.

Spark picks the driver's address when its JVM starts; ``register`` gets a session whose JVM
already runs, so only a helper that starts the session can set ``SPARK_LOCAL_IP`` first.
"""

from __future__ import annotations

import os
import subprocess
import sys

CODE = """
import os
from lance_metastore.spark import local_session

spark = local_session(1, app_name="loopback-check")
print(os.environ["SPARK_LOCAL_IP"], spark.conf.get("spark.driver.host"), spark.sparkContext.master)
print(spark.range(3).count())
print(spark.conf.get("spark.sql.python.filterPushdown.enabled"))  # set by register()
spark.stop()
"""


def test_a_local_session_binds_loopback_without_the_hostname_warning(
    spark_installed: None, java: str
) -> None:
    """Nothing set by the caller: no "resolves to a loopback address" warning, the driver on
    127.0.0.1, workers on this interpreter, format "lance" registered."""
    dropped = ("SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    env = {name: value for name, value in os.environ.items() if name not in dropped}
    run = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300, env=env
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "resolves to a loopback address" not in run.stderr, run.stderr[-3000:]
    assert run.stdout.split() == ["127.0.0.1", "127.0.0.1", "local[1]", "3", "true"]
