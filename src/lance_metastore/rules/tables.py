"""What makes a catalog table a Lance table, written once for every backend.

The rules come from the Glue table definition spec and apply to Hive as well:
``table_type=lance`` (any case when reading; we write lower case), ``managed_by`` of
``storage`` (default) or ``impl``, and ``version`` which is only meaningful for ``impl``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    # The catalog's own object as it was read (Glue's Table, the metastore's Thrift Table):
    # every write starts from it and changes only what we own (see operations/commits.py).
    raw: Any = field(default=None, repr=False)

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


# Parameters a commit or registration owns; every other parameter belongs to whoever wrote it
# (a data steward, Athena, Lake Formation) and is kept by every write.
OWN_PARAMETER_PREFIX = "lance."


# Set by the conditional write that fences a declared entry about to be removed (the undo of a
# failed create or Spark job), to the time it was set (seconds since the epoch). While fresh,
# the entry is being removed: reads and writes answer 404 (see operations/commits.py).
REMOVING_KEY = "lance.removing"
# A fence older than this was left by an undo that died between its fence and its removal (an
# undo that lives lifts its own fence): the entry is a table again, and the next write through
# the commit routine lifts the fence, conditionally. Far beyond any one catalog call.
FENCE_SECONDS = 600.0
# Clock difference between servers a fence set "in the future" may show.
FENCE_SKEW_SECONDS = 60.0


def fence_now() -> str:
    """The value of a fence set now."""
    return str(int(time.time()))


def fenced(parameters: Mapping[str, str]) -> bool:
    """Whether an entry is being removed: it holds a fence younger than FENCE_SECONDS. One
    that cannot be read as a time, or set further ahead than FENCE_SKEW_SECONDS of clock
    difference explains (``inf``, a day ahead), is stale: a fence never outlives its bound."""
    value = parameters.get(REMOVING_KEY)
    if value is None:
        return False
    try:
        since = float(value)
    except ValueError:
        return False
    age = time.time() - since
    return math.isfinite(since) and -FENCE_SKEW_SECONDS <= age < FENCE_SECONDS


def is_own_parameter(key: str) -> bool:
    """Whether a table parameter is ours to set and replace (registration, commits)."""
    return key.lower() in (TABLE_TYPE_KEY, MANAGED_BY_KEY, VERSION_KEY) or key.startswith(
        OWN_PARAMETER_PREFIX
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
    # What a commit records (the version, its manifest, ...) is ours alone: a caller's value
    # would make the table open whatever manifest it names (another table's, even).
    for key in params:
        if is_own_parameter(key.lower()) and key.lower() not in (TABLE_TYPE_KEY, MANAGED_BY_KEY):
            raise InvalidInputError(
                f"Table property {key!r} is recorded by the catalog's commits and cannot be set"
            )
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
    params[TABLE_TYPE_KEY] = LANCE_TABLE_TYPE
    params[MANAGED_BY_KEY] = owner
    return params


def join_location(base: str, *names: str) -> str:
    """Join a storage root (local path or URI) with child names."""
    return locations.join(base, *names)
