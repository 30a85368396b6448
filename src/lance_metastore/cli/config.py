"""Configuration of the ``lance-metastore`` command: its flags over the library's one rule.

The command needs an implementation (``impl``) and the string properties of that namespace.
Flags (``--impl``, ``--prop key=value`` and the shorthands ``--uri``, ``--root``, ``--region``,
``--endpoint``, ``--catalog-id``) are the explicit layer of :mod:`lance_metastore.rules.profiles`,
which adds the environment and a profile of the config file (``--config``, ``--profile``)
exactly as :func:`lance_metastore.connect` and the Spark option ``profile`` do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..impls import declared_properties
from ..rules.profiles import (
    SHORTHANDS,
    ProfileError,
    Resolved,
    env_property_name,
)
from ..rules.profiles import resolve as resolve_settings

ENV_HMS_DATA_DIR = "LANCE_METASTORE_HMS_DATA_DIR"

# A usage or configuration error of the command (exit code 2): the library's profile error.
ConfigError = ProfileError

__all__ = [
    "ENV_HMS_DATA_DIR",
    "ConfigError",
    "Resolved",
    "env_property_name",
    "parse_assignment",
    "parse_assignments",
    "resolve",
]


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


def resolve(
    *,
    impl: str | None,
    profile: str | None,
    config: str | None,
    props: Iterable[str] = (),
    shorthands: Mapping[str, str | None] | None = None,
    env: Mapping[str, str] | None = None,
) -> Resolved:
    """The flags as the explicit layer of :func:`lance_metastore.rules.profiles.resolve`."""
    properties: dict[str, str] = {}
    sources: dict[str, str] = {}
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
    return resolve_settings(
        impl=impl,
        impl_source="flag --impl",
        declared_properties=declared_properties,
        properties=properties,
        sources=sources,
        profile=profile,
        config=config,
        env=env,
    )
