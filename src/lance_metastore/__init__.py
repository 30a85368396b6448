"""Lance tables in AWS Glue Data Catalog and Apache Hive Metastore.

Importing this package registers the namespace aliases with ``lance_namespace``, so
``lance_namespace.connect("glue", {...})`` works as well as the full class paths.
"""

from __future__ import annotations

from lance_namespace import register_namespace_impl

from .glue import GlueNamespace
from .hive import Hive2Namespace, Hive3Namespace

__all__ = ["GlueNamespace", "Hive2Namespace", "Hive3Namespace"]
__version__ = "0.1.0"

_ALIASES = {
    "glue": "lance_metastore.GlueNamespace",
    "hive3": "lance_metastore.Hive3Namespace",
    "hive2": "lance_metastore.Hive2Namespace",
}

for _alias, _class_path in _ALIASES.items():
    register_namespace_impl(_alias, _class_path)
