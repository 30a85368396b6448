"""Where tables live: the one rule that resolves a location, and the one that confines it.

Every operation that takes a location (declare, register, a namespace's location property,
default table locations) passes it through :func:`resolve`:

- a URI (``scheme://authority/path``) keeps its authority; its scheme is lower-cased and its
  path normalised (``.``, ``..``, duplicate and trailing slashes); a ``..`` above the
  authority is refused;
- ``file:/x``, ``file:///x`` and ``file://localhost/x`` are the URI ``file:///x`` (a local
  path compared as ``/x``);
- an absolute local path is normalised the same way;
- a relative path resolves against the namespace's configured ``root``; without one it is
  refused (never the process's working directory);
- anything else (``s3:bucket``, ``file://host/x``, ``s3://`` without a bucket) is refused
  with the reason.

Confinement (:class:`LocationPolicy`) then requires a location a caller sets to lie under an
allowed prefix, compared on whole path segments (``/lake/a`` holds ``/lake/a/t`` but not
``/lake/ab``). Every refusal is InvalidInputError (code 13), raised before anything is
written to the catalog or touched in storage. This module imports nothing from the package:
it is a leaf every other module may use.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from lance_namespace.errors import InvalidInputError

# The schemes a confined namespace accepts unless ``allowed_schemes`` says otherwise.
DEFAULT_SCHEMES: tuple[str, ...] = ("file", "s3", "s3a", "gs", "az", "hdfs")

# Schemes naming the same store: compared as one (``s3a://b/x`` is ``s3://b/x``).
_SAME_STORE = {"s3a": "s3", "s3n": "s3"}

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$", re.DOTALL)

# The key of a drop's answer (its properties) saying why the table's data was kept.
DATA_KEPT_KEY = "data_kept"

# Reads the catalog's own locations that may hold a location (only when needed).
CatalogPrefixes = Callable[[], Iterable[str | None]]

CONFINEMENT_RULE = (
    "a location must lie under the namespace's root, its database's or the warehouse's "
    "location, or an allowed_locations prefix"
)


def check_text(location: object, what: str) -> str:
    """The location as a non-empty string without control characters (13 otherwise)."""
    if location is None:
        raise InvalidInputError(f"{what} has no location")
    if not isinstance(location, str) or not location.strip():
        raise InvalidInputError(f"{what}: location must be a non-empty string")
    if any(ord(ch) < 32 for ch in location):
        raise InvalidInputError(f"{what}: location contains a control character")
    return location.strip()


def _normal_path(path: str, location: str, what: str) -> str:
    """``path`` (absolute) without ``.``, ``..``, duplicate or trailing slashes."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise InvalidInputError(f"{what}: location {location!r} climbs above its root")
            parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def resolve(location: object, root: str | None, what: str) -> str:
    """The normalised absolute form of ``location``; relative ones resolve against ``root``.

    ``root`` is the namespace's configured root (None when not configured). ``what`` names
    the object for the error message.
    """
    text = check_text(location, what)
    match = _SCHEME.match(text)
    if match is None:
        if text.startswith("/"):
            return _normal_path(text, text, what)
        if root is None:
            raise InvalidInputError(
                f"{what}: location {text!r} is relative and the namespace has no root to "
                "resolve it against: give an absolute location or configure the root property"
            )
        return resolve(join(resolve(root, None, "root"), text), None, what)
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == "file":
        if rest.startswith("//"):
            authority, _, path = rest[2:].partition("/")
            if authority not in ("", "localhost"):
                raise InvalidInputError(
                    f"{what}: location {text!r} names a host: file locations are local paths"
                )
            rest = "/" + path
        if not rest.startswith("/"):
            raise InvalidInputError(f"{what}: location {text!r} is not an absolute file path")
        return "file://" + _normal_path(rest, text, what)
    if not rest.startswith("//"):
        raise InvalidInputError(
            f"{what}: location {text!r} is neither an absolute path nor a URI "
            "(scheme://bucket-or-host/path)"
        )
    authority, _, path = rest[2:].partition("/")
    if not authority:
        raise InvalidInputError(f"{what}: location {text!r} names no bucket or host")
    normal = _normal_path("/" + path, text, what)
    return f"{scheme}://{authority}{'' if normal == '/' else normal}"


def join(base: str, *names: str) -> str:
    """``base`` (a local path or URI) with child names appended."""
    if base == "/":
        return "/" + "/".join(names)
    return "/".join([base.rstrip("/"), *names])


def scheme_of(location: str) -> str:
    """The scheme of a resolved location: ``file`` for local paths."""
    match = _SCHEME.match(location)
    return match.group(1).lower() if match else "file"


def _parts(location: str, real: bool) -> tuple[str, str, list[str]]:
    """(store, authority, path segments) of a resolved location; local paths are resolved
    through symbolic links when ``real``, so a link under a prefix cannot lead out of it."""
    match = _SCHEME.match(location)
    if match is None or match.group(1).lower() == "file":
        path = location if match is None else match.group(2).lstrip("/")
        path = os.path.realpath("/" + path) if real else path
        return "file", "", [p for p in path.split("/") if p]
    scheme = match.group(1).lower()
    authority, _, path = match.group(2)[2:].partition("/")
    return _SAME_STORE.get(scheme, scheme), authority.lower(), [p for p in path.split("/") if p]


def is_under(location: str, prefix: str, *, real: bool = False) -> bool:
    """Whether resolved ``location`` is ``prefix`` or lies below it, on whole segments."""
    store, authority, segments = _parts(location, real)
    prefix_store, prefix_authority, prefix_segments = _parts(prefix, real)
    return (store, authority) == (prefix_store, prefix_authority) and segments[
        : len(prefix_segments)
    ] == prefix_segments


def overlap(first: str, second: str) -> bool:
    """Whether one of two resolved locations holds the other (deleting one touches both)."""
    return is_under(first, second) or is_under(second, first)


def parse_prefixes(value: str) -> tuple[str, ...]:
    """The ``allowed_locations`` property: a comma list of absolute prefixes."""
    prefixes = tuple(p.strip() for p in value.split(",") if p.strip())
    try:
        return tuple(resolve(p, None, "prefix") for p in prefixes)
    except InvalidInputError as error:
        raise ValueError(str(error)) from None


def parse_schemes(value: str) -> frozenset[str]:
    """The ``allowed_schemes`` property: a comma list of URI schemes (``file`` for paths)."""
    schemes = frozenset(s.strip().lower() for s in value.split(",") if s.strip())
    if not schemes:
        raise ValueError("must name at least one scheme")
    for scheme in schemes:
        if not re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme):
            raise ValueError(f"{scheme!r} is not a URI scheme")
    return schemes


@dataclass(frozen=True)
class LocationPolicy:
    """Which locations a caller may set: under ``root``, the ``extra`` prefixes or the
    catalog's own locations, with a scheme from ``schemes``. Enforced only when ``enforced``
    (``confine_locations=true``; always through ``lance-metastore serve``)."""

    root: str | None
    extra: tuple[str, ...] = ()
    schemes: frozenset[str] = frozenset(DEFAULT_SCHEMES)
    enforced: bool = False

    def allows(self, location: str, catalog_prefixes: CatalogPrefixes = tuple) -> bool:
        """Whether resolved ``location`` may be used (always, when confinement is off).

        ``catalog_prefixes`` is called only when root and ``extra`` do not hold the
        location: it reads the catalog's own locations (database, warehouse).
        """
        if not self.enforced:
            return True
        if scheme_of(location) not in self.schemes:
            return False
        fixed = [self.root, *self.extra] if self.root else list(self.extra)
        if any(is_under(location, prefix, real=True) for prefix in fixed):
            return True
        return any(
            is_under(location, prefix, real=True) for prefix in _resolved(catalog_prefixes())
        )

    def check(self, location: str, catalog_prefixes: CatalogPrefixes, what: str) -> None:
        """13 naming the rule unless :meth:`allows`."""
        if self.allows(location, catalog_prefixes):
            return
        scheme = scheme_of(location)
        if scheme not in self.schemes:
            raise InvalidInputError(
                f"{what}: location {location!r} uses scheme {scheme!r}; this namespace allows "
                f"only {', '.join(sorted(self.schemes))} (property allowed_schemes)"
            )
        raise InvalidInputError(f"{what}: location {location!r} is not allowed: {CONFINEMENT_RULE}")


def _resolved(prefixes: Iterable[str | None]) -> Iterator[str]:
    """The catalog's stored locations that read as prefixes (others grant nothing)."""
    for prefix in prefixes:
        if prefix:
            try:
                yield resolve(prefix, None, "catalog location")
            except InvalidInputError:
                continue
