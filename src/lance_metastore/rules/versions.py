"""Catalog-managed versions (``managed_by=impl``), the rules shared by every backend.

The catalog is the commit arbiter: its table parameters hold the latest committed version
(``version``, as the Glue table definition spec says) and where that version's manifest is.
A commit is a compare-and-set of those parameters, which each backend makes atomic its own
way (Glue: UpdateTable with VersionId; Hive: an exclusive table lock around read-check-alter).

Older versions are not copied into the catalog: Lance writes every committed manifest under
``_versions/`` itself, so their records are derived from storage and capped at the catalog's
version. Deleting version records (``batch_delete_table_versions``) hides them from listings
and never deletes data.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lance_namespace import TableVersion
from lance_namespace.errors import ConcurrentModificationError, InvalidInputError

from . import locations
from .tables import VERSION_KEY

MANIFEST_PATH_KEY = "lance.manifest_path"
MANIFEST_SIZE_KEY = "lance.manifest_size"
MANIFEST_ETAG_KEY = "lance.manifest_e_tag"
NAMING_SCHEME_KEY = "lance.naming_scheme"
COMMITTED_AT_KEY = "lance.committed_at_ms"
DELETED_KEY = "lance.deleted_versions"

U64_MAX = 2**64 - 1

# Together these identify one commit: its version, its manifest (a unique staging path per
# writer), its commit time and the deleted-records list it wrote.
COMMIT_KEYS = (VERSION_KEY, MANIFEST_PATH_KEY, COMMITTED_AT_KEY, DELETED_KEY)


def current_version(parameters: Mapping[str, str]) -> int:
    """The latest committed version in the catalog; 0 when nothing was committed yet."""
    value = parameters.get(VERSION_KEY, "").strip()
    return int(value) if value.isdigit() else 0


def already_applied(now: Mapping[str, str], written: Mapping[str, str]) -> bool:
    """Whether the catalog holds exactly the commit ``written``: after a reply was lost.

    A conditional update whose first attempt took effect but whose reply never arrived is
    refused as a conflict when it is retried. Reporting that conflict would make Lance commit
    the same data again as the next version, so a refused update is read back and, if the
    catalog shows this very commit, reported as the success it was.
    """
    return all(now.get(key) == written.get(key) for key in COMMIT_KEYS)


# Every parameter that describes the table's committed versions.
VERSION_STATE_KEYS = (
    VERSION_KEY,
    MANIFEST_PATH_KEY,
    MANIFEST_SIZE_KEY,
    MANIFEST_ETAG_KEY,
    NAMING_SCHEME_KEY,
    COMMITTED_AT_KEY,
    DELETED_KEY,
)


def never_behind(adopted: Mapping[str, str], catalog: Mapping[str, str]) -> dict[str, str]:
    """``adopted`` (parameters that name a version read from storage), but with the catalog's
    version state when the catalog is at that version or later: a commit the catalog has
    recorded may not have reached its final manifest name yet, so storage can be behind, and
    going back would drop it."""
    if current_version(catalog) < current_version(adopted):
        return dict(adopted)
    kept = {key: value for key, value in adopted.items() if key not in VERSION_STATE_KEYS}
    kept.update({key: catalog[key] for key in VERSION_STATE_KEYS if key in catalog})
    return kept


def check_next(target: str, latest: int, version: int) -> None:
    """A commit must take the version after the latest: a taken one is a conflict (14), a gap
    a bad request (13)."""
    if version <= latest:
        raise ConcurrentModificationError(
            f"Version {version} of {target} is already committed (latest is {latest})"
        )
    if version != latest + 1:
        raise InvalidInputError(
            f"Version {version} of {target} would leave a gap: the latest committed version "
            f"is {latest}"
        )


def check_consecutive(target: str, numbers: Iterable[int]) -> None:
    """The versions one request commits must follow each other (n, n+1, ...): a repeated or
    skipped number is a malformed request (13), judged before the catalog is read, so it is
    never answered as a conflict (14) that Lance would retry."""
    ordered = list(numbers)
    for before, after in itertools.pairwise(ordered):
        if after != before + 1:
            raise InvalidInputError(
                f"A commit to {target} of versions {ordered} refused: the versions of one "
                "request must be consecutive, each once"
            )


NAMING_SCHEMES = ("V1", "V2")


def check_scheme(target: str, requested: str | None, recorded: str | None) -> str | None:
    """The naming scheme a commit records: the table's own. A commit may name it (or none),
    never another one: two schemes in one ``_versions/`` make Lance refuse the table ("Found
    multiple manifest naming schemes"), and an unknown one names no manifest at all (13)."""
    if requested is not None and requested not in NAMING_SCHEMES:
        raise InvalidInputError(
            f"Naming scheme {requested!r} of a commit to {target} refused: it must be one of "
            f"{', '.join(NAMING_SCHEMES)}"
        )
    if requested is not None and recorded is not None and requested != recorded:
        raise InvalidInputError(
            f"Naming scheme {requested!r} of a commit to {target} refused: the table's "
            f"manifests are named by scheme {recorded!r}"
        )
    return requested or recorded


def manifest_name(version: int, naming_scheme: str | None) -> str:
    """File name of a committed manifest under ``_versions/``, as Lance names it."""
    if (naming_scheme or "V2").upper() == "V1":
        return f"{version}.manifest"
    return f"{U64_MAX - version:020d}.manifest"


def store_path(location: str) -> str:
    """The path of a location inside its object store, as Lance reports manifest paths: the
    key of its one parsed value (13 for text today's rules refuse)."""
    return locations.stored(location, "Table").key.lstrip("/")


@dataclass(frozen=True)
class Commit:
    version: int
    manifest_path: str
    manifest_size: int | None
    e_tag: str | None
    naming_scheme: str | None

    def parameters(self, current: Mapping[str, str]) -> dict[str, str]:
        """The table's parameters after this commit."""
        updated = dict(current)
        updated[VERSION_KEY] = str(self.version)
        updated[MANIFEST_PATH_KEY] = self.manifest_path
        updated[COMMITTED_AT_KEY] = str(int(time.time() * 1000))
        for key, value in (
            (MANIFEST_SIZE_KEY, self.manifest_size),
            (MANIFEST_ETAG_KEY, self.e_tag),
            (NAMING_SCHEME_KEY, self.naming_scheme),
        ):
            if value is None:
                updated.pop(key, None)
            else:
                updated[key] = str(value)
        return updated


def latest_record(parameters: Mapping[str, str]) -> TableVersion | None:
    version = current_version(parameters)
    if version == 0 or not parameters.get(MANIFEST_PATH_KEY):
        return None
    size = parameters.get(MANIFEST_SIZE_KEY, "")
    stamp = parameters.get(COMMITTED_AT_KEY, "")
    return TableVersion(
        version=version,
        manifest_path=parameters[MANIFEST_PATH_KEY],
        manifest_size=int(size) if size.isdigit() else None,
        e_tag=parameters.get(MANIFEST_ETAG_KEY) or None,
        timestamp_millis=int(stamp) if stamp.isdigit() else None,
    )


def older_record(
    location: str, version: int, naming_scheme: str | None, timestamp_millis: int | None
) -> TableVersion:
    prefix = store_path(location).rstrip("/")
    return TableVersion(
        version=version,
        manifest_path=f"{prefix}/_versions/{manifest_name(version, naming_scheme)}",
        timestamp_millis=timestamp_millis,
    )


# Deleted version records: "1-5,9-9" ranges kept in a table parameter.


def deleted_ranges(parameters: Mapping[str, str]) -> list[tuple[int, int]]:
    ranges = []
    for part in parameters.get(DELETED_KEY, "").split(","):
        if "-" in part:
            start, _, end = part.partition("-")
            if start.isdigit() and end.isdigit():
                ranges.append((int(start), int(end)))
    return ranges


def is_deleted(version: int, ranges: Iterable[tuple[int, int]]) -> bool:
    return any(start <= version <= end for start, end in ranges)


def with_deleted(parameters: Mapping[str, str], ranges: Iterable[tuple[int, int]]) -> str:
    merged: list[tuple[int, int]] = []
    for start, end in sorted([*deleted_ranges(parameters), *ranges]):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return ",".join(f"{s}-{e}" for s, e in merged)


def inclusive_range(start: int, end_exclusive: int, latest: int) -> tuple[int, int]:
    """A request's [start, end) range (end -1: through the latest) as an inclusive one."""
    end = latest if end_exclusive == -1 else end_exclusive - 1
    if start < 0 or end < start:
        raise InvalidInputError(f"Invalid version range [{start}, {end_exclusive})")
    return start, end
