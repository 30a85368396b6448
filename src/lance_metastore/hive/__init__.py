"""The Apache Hive Metastore backend.

:class:`Hive2Namespace` and :class:`Hive3Namespace` (:mod:`.namespace`) over the Thrift
transport (:mod:`.transport`) and connection pool (:mod:`.pool`); local metastores for tests,
demos and development (:mod:`.local`) and the Hive releases they run (:mod:`.distributions`).
"""

from __future__ import annotations

from .namespace import Hive2Namespace, Hive3Namespace

__all__ = ["Hive2Namespace", "Hive3Namespace"]
