"""Lance tables in AWS Glue Data Catalog and Apache Hive Metastore.

Importing this package registers the namespace aliases with ``lance_namespace``, so
``lance_namespace.connect("glue", {...})`` works as well as the full class paths.
"""

from __future__ import annotations

from lance_namespace import register_namespace_impl

from .glue import GlueNamespace

__all__ = ["GlueNamespace"]
__version__ = "0.1.0"

_ALIASES = {
    "glue": "lance_metastore.GlueNamespace",
}

for _alias, _class_path in _ALIASES.items():
    register_namespace_impl(_alias, _class_path)
