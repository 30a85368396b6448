"""A Spark job against a kerberized Hive Metastore, run in its own process by
tests/test_hive_secure.py (the realm's krb5.conf is in the environment before the JVM starts,
as on a real cluster's nodes).

Usage: kerberos_spark_job.py URI ROOT PRINCIPAL KEYTAB. The writes name principal and keytab
in their options (every executor logs in by itself); the reads name neither and use the ticket
cache of ``KRB5CCNAME``, which local-mode executors inherit. The catalog-managed table makes
the executors talk to the metastore themselves.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.spark import local_session


def main(uri: str, root: str, principal: str, keytab: str) -> None:
    from lance_namespace import CreateNamespaceRequest, connect
    from pyspark.sql import functions as F

    import lance_metastore  # noqa: F401

    common = {"impl": "hive2", "uri": uri, "root": root, "client.auth": "kerberos"}
    with_keytab = {
        **common,
        "client.kerberos.principal": principal,
        "client.kerberos.keytab": keytab,
    }
    connect("hive2", {k: v for k, v in with_keytab.items() if k != "impl"}).create_namespace(
        CreateNamespaceRequest(id=["krb_spark"], mode="exist_ok")
    )
    spark = local_session("lance-metastore-kerberos-job")
    try:
        frame = spark.range(0, 1000, 1, 4).select(F.col("id"), (F.col("id") % 7).alias("k"))
        frame.write.format("lance").mode("overwrite").options(**with_keytab).save(
            "krb_spark$events"
        )
        back = spark.read.format("lance").options(**common).load("krb_spark$events")
        print(f"rows read back: {back.count()}")
        # managed_by=impl: the catalog keeps the versions, so executors open the table through
        # a namespace of their own, which authenticates from the ticket cache on read.
        managed = {"managed_by": "impl"}
        for start in (0, 500):
            part = spark.range(start, start + 500, 1, 2).select(F.col("id"))
            part.write.format("lance").mode("append").options(**with_keytab, **managed).save(
                "krb_spark$ledger"
            )
        ledger = spark.read.format("lance").options(**common, **managed).load("krb_spark$ledger")
        print(f"managed rows read back: {ledger.count()}")
        first = spark.read.format("lance").options(**common, **managed, version="1")
        print(f"managed version 1 rows: {first.load('krb_spark$ledger').count()}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
