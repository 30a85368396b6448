"""Lance tables in AWS Glue Data Catalog and Apache Hive Metastore.

Importing this package registers the aliases ``glue``, ``hive2`` and ``hive3`` with
``lance_namespace``, so ``lance_namespace.connect("glue", {...})`` (and lancedb's
``connect_namespace``) work as well as the class paths. :func:`connect` does the same without
that registration step, and names the known aliases when an impl is misspelt.

The backends are optional parts (extras ``glue`` and ``hive``): each is imported when its class
is first asked for, so importing this package needs neither, and a backend whose extra is
missing answers one line naming it (:mod:`lance_metastore.rules.extras`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .rules.client_models import defer_client_package_init

# Before lance_namespace imports its models: see the module for the second of start-up it saves.
defer_client_package_init()

from lance_namespace import register_namespace_impl  # noqa: E402

from .impls import ALIASES, connect  # noqa: E402

if TYPE_CHECKING:
    from .glue import GlueNamespace
    from .hive import Hive2Namespace, Hive3Namespace

__all__ = ["ALIASES", "GlueNamespace", "Hive2Namespace", "Hive3Namespace", "connect"]
__version__ = "0.1.0"

# The public classes, by the module that holds each (imported on first use).
_BACKENDS = {
    "GlueNamespace": ".glue",
    "Hive2Namespace": ".hive",
    "Hive3Namespace": ".hive",
}

for _alias, _class_path in ALIASES.items():
    register_namespace_impl(_alias, _class_path)  # a class path string: imports nothing


def __getattr__(name: str) -> Any:
    module = _BACKENDS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    backend = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = backend  # later lookups skip this function
    return backend


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
