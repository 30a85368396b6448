"""Lance Namespace's generated models without its generated REST client's start-up cost.

``lance_namespace`` (and so every process of ours: the CLI, the REST server, Spark tasks,
commit workers) imports its request and response models from the generated package
``lance_namespace_urllib3_client``. That package's ``__init__`` also imports every generated
REST API class, and pydantic builds a validator for each of their 366 ``validate_call``
methods at import: about 1.2 s of CPU in every process (measured on lance-namespace 0.13.0;
``benchmarks/bench_startup.py``), for classes nothing here calls (Lance's ``RestNamespace`` is
Lance's own, in Rust).

:func:`defer_client_package_init` registers the package with its real file, path and spec but
without running its ``__init__`` yet: its submodules (``.models``, ``.api.table_api``, ...)
import as usual, and the first lookup of any other top-level name (``ApiClient``,
``TableApi``, ``__version__``) runs the real ``__init__`` then, so every user of the package
sees it whole. Nothing is done when the package is already imported or not installed.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

CLIENT_PACKAGE = "lance_namespace_urllib3_client"


def defer_client_package_init() -> None:
    """Import :data:`CLIENT_PACKAGE` lazily: its ``__init__`` runs on first use of a name it
    defines, not when ``lance_namespace`` imports its models."""
    defer_package_init(CLIENT_PACKAGE)


def defer_package_init(name: str, after: Callable[[types.ModuleType], None] | None = None) -> None:
    """Register package ``name`` so that its ``__init__`` runs on first use of a name it
    defines (its submodules import as usual meanwhile), then ``after(package)``. If the
    package is imported already, ``after`` runs now."""
    if name in sys.modules:
        if after is not None:
            after(sys.modules[name])
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed (its importer then says so) or not a package
    package = importlib.util.module_from_spec(spec)
    package.__getattr__ = _whole_package_on_first_use(package, spec, after)  # type: ignore[method-assign]
    sys.modules[name] = package


def _whole_package_on_first_use(
    package: types.ModuleType,
    spec: importlib.machinery.ModuleSpec,
    after: Callable[[types.ModuleType], None] | None = None,
) -> Any:
    """The package's ``__getattr__`` (PEP 562): runs the real ``__init__`` once (then
    ``after``), and answers from what it defined."""
    lock = threading.RLock()
    state = {"initialized": False}

    def __getattr__(name: str) -> Any:
        with lock:
            if not state["initialized"]:
                state["initialized"] = True  # lookups made by the ``__init__`` itself miss
                assert spec.loader is not None
                try:
                    spec.loader.exec_module(package)
                    if after is not None:
                        after(package)
                except BaseException:
                    state["initialized"] = False  # the next use meets the same error
                    raise
                if name in package.__dict__:
                    return package.__dict__[name]
        raise AttributeError(f"module {spec.name!r} has no attribute {name!r}")

    return __getattr__
