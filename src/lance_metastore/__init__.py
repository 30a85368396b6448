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

from .rules.client_models import defer_client_package_init, defer_package_init

# Before lance_namespace imports its models: see the module for the second of start-up it saves.
defer_client_package_init()

if TYPE_CHECKING:
    from .glue import GlueNamespace
    from .hive import Hive2Namespace, Hive3Namespace
    from .impls import ALIASES, connect

__all__ = ["ALIASES", "GlueNamespace", "Hive2Namespace", "Hive3Namespace", "connect"]
__version__ = "0.1.0"

# The public names, by the module that holds each (imported on first use): importing this
# package imports neither a backend nor lance_namespace itself, so `lance-metastore --version`
# answers at once.
_LAZY = {
    "GlueNamespace": ".glue",
    "Hive2Namespace": ".hive",
    "Hive3Namespace": ".hive",
    "connect": ".impls",
    "ALIASES": ".impls",
}


def _register_aliases(lance_namespace: Any) -> None:
    """Our aliases in lance_namespace's registry (class path strings: imports nothing)."""
    from .rules.impl_aliases import ALIASES

    for alias, class_path in ALIASES.items():
        lance_namespace.register_namespace_impl(alias, class_path)


# lance_namespace's own __init__ (its whole model package) runs when a name of it is first used,
# not when a module of ours imports `lance_namespace.errors`; our aliases are registered then
# (at once if it is imported already).
defer_package_init("lance_namespace", after=_register_aliases)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
