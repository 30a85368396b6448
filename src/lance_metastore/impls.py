"""Which class an ``impl`` names, and the one way to build a namespace from it.

An impl is one of our aliases (:data:`ALIASES`, also published as ``lance_namespace.impls``
entry points so other tools can find them), an alias another package publishes under that
entry-point group, one of ``lance_namespace``'s native aliases (``dir``, ``rest``), or a class
path ``pkg.mod.Class``. (Aliases registered at run time with ``register_namespace_impl`` live in
a private table of ``lance_namespace``; use their class path here.) The command line and
the Spark data source both connect through :func:`connect`, and every message that lists the
implementations (``--help``, a misspelt impl, a missing one) takes the list from
:func:`impl_choices`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from difflib import get_close_matches
from functools import lru_cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from lance_namespace.errors import InvalidInputError

from .rules.impl_aliases import ALIASES as ALIASES

if TYPE_CHECKING:
    from lance_namespace import LanceNamespace

ENTRY_POINT_GROUP = "lance_namespace.impls"


class UnknownImplError(InvalidInputError):
    """The impl is neither a known alias nor an importable LanceNamespace class."""


@lru_cache(maxsize=1)
def _published() -> dict[str, str]:
    """Aliases other installed packages publish (``module:Class`` becomes ``module.Class``)."""
    return {
        point.name: point.value.replace(":", ".") for point in entry_points(group=ENTRY_POINT_GROUP)
    }


def known_aliases() -> dict[str, str]:
    """Every alias this process can resolve, and the class path each one names."""
    import lance_namespace

    return {**lance_namespace.NATIVE_IMPLS, **_published(), **ALIASES}


def impl_choices() -> str:
    """The implementations, ours first, as every message and ``--help`` lists them."""
    others = sorted(set(known_aliases()) - set(ALIASES))
    return ", ".join([*sorted(ALIASES), *others]) + " or a class path pkg.mod.Class"


def class_path_of(impl: str) -> str:
    """The class path an impl names; raises :class:`UnknownImplError` for a misspelt alias."""
    impl = impl.strip()
    aliases = known_aliases()
    if impl in aliases:
        return aliases[impl]
    if "." not in impl:
        hint = get_close_matches(impl, list(aliases), n=1)
        suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise UnknownImplError(f"unknown impl {impl!r}{suggestion}: give one of {impl_choices()}")
    return impl


def namespace_class(impl: str) -> type[LanceNamespace]:
    """The LanceNamespace class an impl names, imported."""
    from lance_namespace import LanceNamespace

    class_path = class_path_of(impl)
    module_name, _, class_name = class_path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UnknownImplError(
            f"cannot import {module_name!r} for impl {impl!r}: {error}"
        ) from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise UnknownImplError(f"module {module_name!r} has no class {class_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, LanceNamespace)):
        raise UnknownImplError(f"{class_path} is not a LanceNamespace implementation")
    return cls


def connect(
    impl: str | None = None,
    properties: Mapping[str, Any] | None = None,
    *,
    profile: str | None = None,
    config: str | os.PathLike[str] | None = None,
) -> LanceNamespace:
    """A namespace of the implementation ``impl`` configured with ``properties``.

    With ``profile`` (or without ``impl``) the settings are resolved as the command line
    resolves them (:mod:`lance_metastore.rules.profiles`): ``impl`` and ``properties`` win over the
    environment's ``LANCE_METASTORE_*`` variables, which win over the profile of the config
    file (``config``, else ``LANCE_METASTORE_CONFIG``, else
    ``~/.config/lance-metastore/config.toml``); the implementation comes from the profile when
    not given. With ``impl`` and no profile, exactly ``properties`` are used.

    The class is built directly (not through ``lance_namespace.connect``), so its errors keep
    their spec codes.
    """
    given = {str(key): value for key, value in (properties or {}).items()}
    if impl and profile is None:
        return namespace_class(impl)(**given)
    from .rules.profiles import ProfileError, resolve

    resolved = resolve(
        impl=impl,
        properties=given,
        profile=profile,
        config=config,
        declared_properties=declared_properties,
    )
    if not resolved.impl:
        where = f"profile {resolved.profile!r}" if resolved.profile else "no profile"
        raise ProfileError(
            f"no implementation chosen ({where}): pass impl= ({impl_choices()}), set "
            "LANCE_METASTORE_IMPL, or set impl in the profile"
        )
    return namespace_class(resolved.impl)(**resolved.properties)


def declared_properties(impl: str | None) -> tuple[list[str], frozenset[str]]:
    """(property names, secret property names) the implementation declares, if it is ours."""
    if impl is None or not ALIASES.get(impl, impl).startswith("lance_metastore."):
        return [], frozenset()
    try:
        cls = namespace_class(impl)
    except (UnknownImplError, ImportError):
        return [], frozenset()
    props = getattr(cls, "PROPERTIES", ())
    names = [p.name for p in props]
    secrets = frozenset(p.name for p in props if getattr(p, "secret", False))
    return names, secrets
