"""Connection settings from three layers: explicit options, the environment, a profile.

The one rule every entry point uses (the ``lance-metastore`` command,
:func:`lance_metastore.connect` and the Spark option ``profile``), highest precedence first:

1. explicit options: the CLI's flags, ``connect()``'s arguments, the Spark options;
2. environment variables: ``LANCE_METASTORE_IMPL``, the shorthands ``LANCE_METASTORE_URI``,
   ``LANCE_METASTORE_ROOT``, ``LANCE_METASTORE_REGION``, ``LANCE_METASTORE_ENDPOINT``,
   ``LANCE_METASTORE_CATALOG_ID``, and any property as ``LANCE_METASTORE_PROP_<NAME>`` (see
   :func:`env_property_name`);
3. a profile of the TOML config file (the explicit file, else ``LANCE_METASTORE_CONFIG``, else
   ``~/.config/lance-metastore/config.toml``), chosen by name, else ``LANCE_METASTORE_PROFILE``,
   else the file's ``default_profile``, else a profile named ``default`` if there is one.

Each property is taken whole from the highest layer that sets it. Nothing here opens a
connection; :func:`resolve` computes what to connect with, and remembers where every value
came from so ``lance-metastore config`` can show it (secrets masked). The README's
"Connection settings and profiles" section documents the same rule for people.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lance_namespace.errors import InvalidInputError

if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover - exercised on Python 3.10 only
    try:
        import tomli as _toml
    except ImportError:
        _toml = None

from .redaction import masked, secret_values

ENV_PREFIX = "LANCE_METASTORE_"
ENV_IMPL = "LANCE_METASTORE_IMPL"
ENV_PROFILE = "LANCE_METASTORE_PROFILE"
ENV_CONFIG = "LANCE_METASTORE_CONFIG"
ENV_PROP_PREFIX = "LANCE_METASTORE_PROP_"

DEFAULT_CONFIG = Path("~/.config/lance-metastore/config.toml")

# The shorthand environment variables (and CLI flags), and the property each one sets.
SHORTHANDS: dict[str, str] = {
    "uri": "uri",
    "root": "root",
    "region": "region",
    "endpoint": "endpoint",
    "catalog_id": "catalog_id",
}


class ProfileError(InvalidInputError):
    """The settings are unusable: a bad config file, an unknown profile, no implementation."""


@dataclass
class Resolved:
    """What to connect with, and where each piece came from."""

    impl: str | None
    impl_source: str | None
    properties: dict[str, str] = field(default_factory=dict, repr=False)
    sources: dict[str, str] = field(default_factory=dict)
    profile: str | None = None
    config_path: Path | None = None
    secret_names: frozenset[str] = frozenset()

    def public_properties(self) -> dict[str, str]:
        """The properties with every secret value masked."""
        return masked(self.properties, self.secret_names)

    def secret_values(self) -> list[str]:
        """Every secret value, to scrub from anything printed."""
        return secret_values(self.properties, self.secret_names)


def load_toml(path: Path) -> dict[str, Any]:
    if _toml is None:  # pragma: no cover - Python 3.10 without tomli
        raise ProfileError(
            f"reading {path} needs the 'tomli' package on Python < 3.11 (pip install tomli)"
        )
    try:
        with path.open("rb") as handle:
            return _toml.load(handle)
    except OSError as error:
        raise ProfileError(f"cannot read config file {path}: {error.strerror or error}") from None
    except _toml.TOMLDecodeError as error:
        raise ProfileError(f"invalid TOML in config file {path}: {error}") from None


def _stringify(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ProfileError(f"{where}: expected a string, number or boolean, got {type(value).__name__}")


def flatten(table: Mapping[str, Any], where: str, prefix: str = "") -> dict[str, str]:
    """TOML tables to dotted keys: ``client.pool-size = 3`` and ``[x.storage]`` both work."""
    flat: dict[str, str] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, where, f"{name}."))
        else:
            flat[name] = _stringify(value, f"{where}: {name}")
    return flat


def config_path(
    explicit: str | os.PathLike[str] | None, env: Mapping[str, str]
) -> tuple[Path, bool]:
    """The config file to read, and whether it was named explicitly (then it must exist)."""
    if explicit:
        return Path(explicit).expanduser(), True
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG]).expanduser(), True
    return DEFAULT_CONFIG.expanduser(), False


def load_profile(
    path: Path, explicit_file: bool, profile: str | None, explicit_profile: bool
) -> tuple[str | None, dict[str, str]]:
    """(profile name, its flattened properties including ``impl``) or (None, {})."""
    if not path.is_file():
        if explicit_file:
            raise ProfileError(f"config file {path} does not exist")
        if explicit_profile:
            raise ProfileError(
                f"profile {profile!r} requested but there is no config file {path}: create it "
                f"with a [profiles.{profile}] table, or name another file"
            )
        return None, {}
    document = load_toml(path)
    profiles = document.get("profiles", {})
    if not isinstance(profiles, Mapping):
        raise ProfileError(f"{path}: 'profiles' must be a table of [profiles.<name>] tables")
    if profile is None:
        default = document.get("default_profile")
        if default is not None:
            if not isinstance(default, str):
                raise ProfileError(f"{path}: default_profile must be a string")
            profile = default
        elif "default" in profiles:
            profile = "default"
    if profile is None:
        return None, {}
    if profile not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise ProfileError(f"no profile {profile!r} in {path} (profiles: {known})")
    body = profiles[profile]
    if not isinstance(body, Mapping):
        raise ProfileError(f"{path}: profiles.{profile} must be a table")
    return profile, flatten(body, f"{path} [profiles.{profile}]")


def _normalize_env_name(name: str) -> str:
    return name.lower().replace(".", "_").replace("-", "_")


def env_property_name(suffix: str, declared: Iterable[str]) -> str:
    """The property named by ``LANCE_METASTORE_PROP_<suffix>``.

    The suffix is lower-cased and ``__`` (double underscore) becomes ``.``; a declared property
    of the backend whose name differs only by ``-`` instead of ``_`` is matched too. So
    ``CLIENT__POOL_SIZE`` is ``client.pool-size``, ``CATALOG_ID`` is ``catalog_id`` and
    ``STORAGE__AWS_REGION`` is ``storage.aws_region``.
    """
    name = suffix.lower().replace("__", ".")
    declared = list(declared)
    if name in declared:
        return name
    for candidate in declared:
        if _normalize_env_name(candidate) == _normalize_env_name(name):
            return candidate
    return name


def resolve(
    *,
    impl: str | None = None,
    impl_source: str = "argument impl",
    properties: Mapping[str, str] | None = None,
    sources: Mapping[str, str] | None = None,
    profile: str | None = None,
    config: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    declared_properties: Callable[[str | None], tuple[list[str], frozenset[str]]],
) -> Resolved:
    """Combine explicit options, environment and profile into the impl and properties.

    ``properties`` are the explicit ones; ``sources`` names where each came from (default
    ``argument``), ``impl_source`` likewise for ``impl``. ``declared_properties`` names the
    (property names, secret names) an implementation declares
    (:func:`lance_metastore.impls.declared_properties`; passed in, since rules sit below the
    implementations).
    """
    env = os.environ if env is None else env
    path, explicit_file = config_path(config, env)
    profile_name = profile or env.get(ENV_PROFILE) or None
    chosen, profile_props = load_profile(
        path, explicit_file, profile_name, explicit_profile=profile_name is not None
    )
    profile_impl = profile_props.pop("impl", None)

    # The implementation first: the environment's property names depend on it.
    final_impl: str | None
    if impl:
        final_impl, final_source = impl, impl_source
    elif env.get(ENV_IMPL):
        final_impl, final_source = env[ENV_IMPL], f"env {ENV_IMPL}"
    elif profile_impl:
        final_impl, final_source = profile_impl, f"profile {chosen}"
    else:
        final_impl, final_source = None, None
    declared, secret_names = declared_properties(final_impl)

    resolved: dict[str, str] = {}
    origin: dict[str, str] = {}
    for key, value in profile_props.items():
        resolved[key], origin[key] = value, f"profile {chosen}"
    for var in sorted(env):
        if var.startswith(ENV_PROP_PREFIX) and len(var) > len(ENV_PROP_PREFIX):
            key = env_property_name(var[len(ENV_PROP_PREFIX) :], declared)
            resolved[key], origin[key] = env[var], f"env {var}"
    for short, key in SHORTHANDS.items():
        var = ENV_PREFIX + short.upper()
        if env.get(var):
            resolved[key], origin[key] = env[var], f"env {var}"
    for key, value in (properties or {}).items():
        resolved[key] = value
        origin[key] = (sources or {}).get(key, "argument")

    return Resolved(
        impl=final_impl,
        impl_source=final_source,
        properties=resolved,
        sources=origin,
        profile=chosen,
        config_path=path if path.is_file() else None,
        secret_names=secret_names,
    )
