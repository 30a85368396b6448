"""Lance tables in AWS Glue Data Catalog and Apache Hive Metastore.

Importing this package registers the aliases ``glue``, ``hive2`` and ``hive3`` with
``lance_namespace``, so ``lance_namespace.connect("glue", {...})`` (and lancedb's
``connect_namespace``) work as well as the class paths. :func:`connect` does the same without
that registration step, and names the known aliases when an impl is misspelt.
"""

from __future__ import annotations

from lance_namespace import register_namespace_impl

from .glue import GlueNamespace
from .hive import Hive2Namespace, Hive3Namespace
from .impls import ALIASES, connect

__all__ = ["ALIASES", "GlueNamespace", "Hive2Namespace", "Hive3Namespace", "connect"]
__version__ = "0.1.0"

for _alias, _class_path in ALIASES.items():
    register_namespace_impl(_alias, _class_path)
