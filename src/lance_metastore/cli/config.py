"""Configuration of the ``lance-metastore`` command: flags, environment, profiles.

The command needs an implementation (``impl``) and the string properties of that namespace.
They come from three layers, highest precedence first:

1. command-line flags: ``--impl``, ``--prop key=value`` and the shorthands ``--uri``, ``--root``,
   ``--region``, ``--endpoint``, ``--catalog-id``;
2. environment variables: ``LANCE_METASTORE_IMPL``, the shorthands ``LANCE_METASTORE_URI``,
   ``LANCE_METASTORE_ROOT``, ``LANCE_METASTORE_REGION``, ``LANCE_METASTORE_ENDPOINT``,
   ``LANCE_METASTORE_CATALOG_ID``, and any property as ``LANCE_METASTORE_PROP_<NAME>`` (see
   :func:`env_property_name`);
3. a profile of the TOML config file (``--config``, else ``LANCE_METASTORE_CONFIG``, else
   ``~/.config/lance-metastore/config.toml``), chosen by ``--profile``, else
   ``LANCE_METASTORE_PROFILE``, else the file's ``default_profile``, else a profile named
   ``default`` if there is one.

Each property is taken whole from the highest layer that sets it. Nothing here opens a
connection; :func:`resolve` only computes what to connect with, and remembers where every
value came from so ``lance-metastore config`` can show it (secrets masked).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover - exercised on Python 3.10 only
    try:
        import tomli as _toml
    except ImportError:
        _toml = None

from ..impls import ALIASES, UnknownImplError, namespace_class
from ..redaction import masked, secret_values

ENV_PREFIX = "LANCE_METASTORE_"
ENV_IMPL = "LANCE_METASTORE_IMPL"
ENV_PROFILE = "LANCE_METASTORE_PROFILE"
ENV_CONFIG = "LANCE_METASTORE_CONFIG"
ENV_PROP_PREFIX = "LANCE_METASTORE_PROP_"
ENV_HMS_DATA_DIR = "LANCE_METASTORE_HMS_DATA_DIR"

DEFAULT_CONFIG = Path("~/.config/lance-metastore/config.toml")

# The shorthand flags and environment variables, and the property each one sets.
SHORTHANDS: dict[str, str] = {
    "uri": "uri",
    "root": "root",
    "region": "region",
    "endpoint": "endpoint",
    "catalog_id": "catalog_id",
}


class ConfigError(Exception):
    """The configuration is unusable (bad file, unknown profile, malformed ``key=value``)."""


@dataclass
class Resolved:
    """What to connect with, and where each piece came from."""

    impl: str | None
    impl_source: str | None
    properties: dict[str, str] = field(default_factory=dict)
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


def parse_assignment(text: str, what: str = "--prop") -> tuple[str, str]:
    """``key=value`` (the value may contain ``=``; whitespace around the key is dropped)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep:
        # Not echoed: a mistyped `secret_access_key:...` would otherwise print the secret.
        raise ConfigError(f"{what} expects key=value; got an argument without '='")
    if not key:
        raise ConfigError(f"{what} expects key=value; got an empty key")
    return key, value


def parse_assignments(items: Iterable[str], what: str = "--prop") -> dict[str, str]:
    result: dict[str, str] = {}
    for item in items:
        key, value = parse_assignment(item, what)
        result[key] = value
    return result


def load_toml(path: Path) -> dict[str, Any]:
    if _toml is None:  # pragma: no cover - Python 3.10 without tomli
        raise ConfigError(
            f"reading {path} needs the 'tomli' package on Python < 3.11 (pip install tomli)"
        )
    try:
        with path.open("rb") as handle:
            return _toml.load(handle)
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror or error}") from None
    except _toml.TOMLDecodeError as error:
        raise ConfigError(f"invalid TOML in config file {path}: {error}") from None


def _stringify(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ConfigError(f"{where}: expected a string, number or boolean, got {type(value).__name__}")


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


def config_path(flag: str | None, env: Mapping[str, str]) -> tuple[Path, bool]:
    """The config file to read, and whether it was named explicitly (then it must exist)."""
    if flag:
        return Path(flag).expanduser(), True
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG]).expanduser(), True
    return DEFAULT_CONFIG.expanduser(), False


def load_profile(
    path: Path, explicit_file: bool, profile: str | None, explicit_profile: bool
) -> tuple[str | None, dict[str, str]]:
    """(profile name, its flattened properties including ``impl``) or (None, {})."""
    if not path.is_file():
        if explicit_file:
            raise ConfigError(f"config file {path} does not exist")
        if explicit_profile:
            raise ConfigError(f"profile {profile!r} requested but there is no config file {path}")
        return None, {}
    document = load_toml(path)
    profiles = document.get("profiles", {})
    if not isinstance(profiles, Mapping):
        raise ConfigError(f"{path}: 'profiles' must be a table of [profiles.<name>] tables")
    if profile is None:
        default = document.get("default_profile")
        if default is not None:
            if not isinstance(default, str):
                raise ConfigError(f"{path}: default_profile must be a string")
            profile, explicit_profile = default, True
        elif "default" in profiles:
            profile = "default"
    if profile is None:
        return None, {}
    if profile not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise ConfigError(f"no profile {profile!r} in {path} (profiles: {known})")
    body = profiles[profile]
    if not isinstance(body, Mapping):
        raise ConfigError(f"{path}: profiles.{profile} must be a table")
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


def declared_properties(impl: str | None) -> tuple[list[str], frozenset[str]]:
    """(property names, secret property names) the implementation declares, if it is ours."""
    if impl is None or not ALIASES.get(impl, impl).startswith("lance_metastore."):
        return [], frozenset()
    try:
        cls = namespace_class(impl)
    except UnknownImplError:
        return [], frozenset()
    props = getattr(cls, "PROPERTIES", ())
    names = [p.name for p in props]
    secrets = frozenset(p.name for p in props if getattr(p, "secret", False))
    return names, secrets


def resolve(
    *,
    impl: str | None,
    profile: str | None,
    config: str | None,
    props: Iterable[str] = (),
    shorthands: Mapping[str, str | None] | None = None,
    env: Mapping[str, str] | None = None,
) -> Resolved:
    """Combine flags, environment and profile into the impl and properties to connect with."""
    env = os.environ if env is None else env
    path, explicit_file = config_path(config, env)
    profile_name = profile or env.get(ENV_PROFILE) or None
    chosen, profile_props = load_profile(
        path, explicit_file, profile_name, explicit_profile=profile_name is not None
    )
    profile_impl = profile_props.pop("impl", None)

    # The implementation first: the environment's property names depend on it.
    if impl:
        final_impl, impl_source = impl, "flag --impl"
    elif env.get(ENV_IMPL):
        final_impl, impl_source = env[ENV_IMPL], f"env {ENV_IMPL}"
    elif profile_impl:
        final_impl, impl_source = profile_impl, f"profile {chosen}"
    else:
        final_impl, impl_source = None, None
    declared, secret_names = declared_properties(final_impl)

    properties: dict[str, str] = {}
    sources: dict[str, str] = {}
    for key, value in profile_props.items():
        properties[key], sources[key] = value, f"profile {chosen}"

    for var in sorted(env):
        if var.startswith(ENV_PROP_PREFIX) and len(var) > len(ENV_PROP_PREFIX):
            key = env_property_name(var[len(ENV_PROP_PREFIX) :], declared)
            properties[key], sources[key] = env[var], f"env {var}"
    for short, key in SHORTHANDS.items():
        var = ENV_PREFIX + short.upper()
        if env.get(var):
            properties[key], sources[key] = env[var], f"env {var}"

    flag_props = parse_assignments(props)
    for key, value in flag_props.items():
        properties[key], sources[key] = value, "flag --prop"
    for short, given in (shorthands or {}).items():
        if given is None:
            continue
        key = SHORTHANDS[short]
        flag = "--" + short.replace("_", "-")
        if key in flag_props and flag_props[key] != given:
            raise ConfigError(f"{flag} and --prop {key}=... disagree; give one of them")
        properties[key], sources[key] = given, f"flag {flag}"

    return Resolved(
        impl=final_impl,
        impl_source=impl_source,
        properties=properties,
        sources=sources,
        profile=chosen,
        config_path=path if path.is_file() else None,
        secret_names=secret_names,
    )
