"""The implementations this package provides, by alias (pyproject.toml publishes the same as
``lance_namespace.impls`` entry points). Plain data, importing nothing: the package registers
them with lance_namespace the moment lance_namespace is imported (``lance_metastore/__init__``).
"""

from __future__ import annotations

ALIASES: dict[str, str] = {
    "glue": "lance_metastore.GlueNamespace",
    "hive3": "lance_metastore.Hive3Namespace",
    "hive2": "lance_metastore.Hive2Namespace",
}
