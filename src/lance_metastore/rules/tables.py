"""What makes a catalog table a Lance table, written once for every backend.

The rules come from the Glue table definition spec and apply to Hive as well:
``table_type=lance`` (any case when reading; we write lower case), ``managed_by`` of
``storage`` (default) or ``impl``, and ``version`` which is only meaningful for ``impl``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import overload

from lance_namespace.errors import InvalidInputError

from . import locations
from .schema import CatalogColumn

TABLE_TYPE_KEY = "table_type"
LANCE_TABLE_TYPE = "lance"
MANAGED_BY_KEY = "managed_by"
MANAGED_BY_STORAGE = "storage"
MANAGED_BY_IMPL = "impl"
VERSION_KEY = "version"
EXTERNAL_TABLE = "EXTERNAL_TABLE"
LANCE_SUFFIX = ".lance"


@dataclass
class TableEntry:
    """A catalog table as the shared rules see it, whatever the backend."""

    name: str
    location: str | None
    parameters: dict[str, str] = field(default_factory=dict)
    table_type: str | None = EXTERNAL_TABLE
    has_columns: bool = False
    # The catalog's columns, kept so that parameter-only updates do not drop them.
    columns: list[CatalogColumn] | None = None
    # The backend's token for a conditional update (Glue VersionId); None where unsupported.
    version_token: str | None = None

    @property
    def is_lance(self) -> bool:
        return is_lance_table(self.table_type, self.parameters)

    @property
    def managed_by(self) -> str:
        return managed_by(self.parameters)

    def holds_registration(self, sent: TableEntry) -> bool:
        """Whether this catalog entry is the table ``sent`` registered: same location, and
        every parameter sent is there (catalogs add their own, e.g. Hive's DDL time).

        Used after a create whose outcome is unknown (the connection or the reply was lost).
        """
        return self.location == sent.location and all(
            self.parameters.get(key) == value for key, value in sent.parameters.items()
        )


def _lookup(parameters: Mapping[str, str], key: str) -> str | None:
    if key in parameters:
        return parameters[key]
    for name, value in parameters.items():
        if name.lower() == key:
            return value
    return None


def is_lance_table(table_type: str | None, parameters: Mapping[str, str] | None) -> bool:
    """EXTERNAL_TABLE with ``table_type=lance`` in any case (and nothing else: " lance" is not
    Lance, as neither the spec nor the metastore's listing filter take it for one)."""
    if (table_type or "").upper() != EXTERNAL_TABLE:
        return False
    value = _lookup(parameters or {}, TABLE_TYPE_KEY)
    return value is not None and value.lower() == LANCE_TABLE_TYPE


def managed_by(parameters: Mapping[str, str]) -> str:
    value = _lookup(parameters, MANAGED_BY_KEY)
    return (value or MANAGED_BY_STORAGE).strip().lower()


def table_parameters(
    properties: Mapping[str, str] | None, default_managed_by: str = MANAGED_BY_STORAGE
) -> dict[str, str]:
    """The catalog parameters of a new Lance table, from the request's properties.

    Refuses properties that contradict being a Lance table, so a bad request changes nothing.
    """
    params = dict(properties or {})
    for key, value in params.items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise InvalidInputError(f"Table properties must map names to strings: {key!r}")
        if any(ord(ch) < 32 for ch in key):
            raise InvalidInputError(f"Table property name {key!r} contains a control character")
    declared_type = _lookup(params, TABLE_TYPE_KEY)
    if declared_type is not None and declared_type.strip().lower() != LANCE_TABLE_TYPE:
        raise InvalidInputError(
            f"Property {TABLE_TYPE_KEY}={declared_type!r} contradicts a Lance table"
        )
    for key in [k for k in params if k.lower() in (TABLE_TYPE_KEY, MANAGED_BY_KEY)]:
        del params[key]
    requested = _lookup(properties or {}, MANAGED_BY_KEY)
    owner = (requested if requested is not None else default_managed_by).strip().lower()
    if owner not in (MANAGED_BY_STORAGE, MANAGED_BY_IMPL):
        raise InvalidInputError(
            f"Property {MANAGED_BY_KEY}={requested!r} must be "
            f"{MANAGED_BY_STORAGE!r} or {MANAGED_BY_IMPL!r}"
        )
    version = _lookup(params, VERSION_KEY)
    if version is not None and not version.strip().isdigit():
        raise InvalidInputError(f"Property {VERSION_KEY}={version!r} must be a whole number")
    params[TABLE_TYPE_KEY] = LANCE_TABLE_TYPE
    params[MANAGED_BY_KEY] = owner
    return params


@overload
def plain_location(location: str) -> str: ...
@overload
def plain_location(location: str | None) -> str | None: ...
def plain_location(location: str | None) -> str | None:
    """``file:/x`` and ``file:///x`` (as Hive qualifies local paths) become ``/x``."""
    if location and location.startswith("file:"):
        rest = location[len("file:") :]
        if rest.startswith("//"):
            rest = rest[2:]
            if not rest.startswith("/"):  # file://host/path: keep it a URI
                return location
        return rest
    return location


def join_location(base: str, *names: str) -> str:
    """Join a storage root (local path or URI) with child names."""
    return locations.join(base, *names)


def default_table_location(base: str, table: str) -> str:
    """``<base>/<table>.lance``: the layout Lance's own directory namespace uses."""
    return join_location(base, table + LANCE_SUFFIX)


def check_location(location: str | None, what: str) -> str:
    """A stored location as text (13 when missing or malformed); see :mod:`locations`."""
    return locations.check_text(location, what)
