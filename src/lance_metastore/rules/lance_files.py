"""What a drop deletes: only what Lance wrote under a table's location.

Lance keeps a dataset in a fixed set of children of its directory (``_versions/`` manifests,
``data/`` fragments, ``_indices/``, ``_transactions/``, ``_deletions/``, ``_refs/`` tags and
branches, ``tree/`` branch contents, and the legacy ``_latest.manifest``). A drop deletes those
and nothing else: a foreign file beside them (a Parquet file, a README someone put there) stays,
and so does the directory that holds it. Lance's own ``LanceDataset.drop`` removes the whole
prefix, which is why it is not used. Local children that are symbolic links are never followed
(Lance writes none). The location is a :class:`~.locations.Location`, so the key prefix deleted
is exactly the one the catalog checked and vended.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Mapping

from .locations import Location

logger = logging.getLogger(__name__)

# Every child Lance writes in a dataset's directory (pylance 14: tags, branches, indexes).
LANCE_DIRECTORIES = frozenset(
    {"_versions", "data", "_indices", "_transactions", "_deletions", "_refs", "tree"}
)
LANCE_FILES = frozenset({"_latest.manifest"})


def drop_lance_files(location: Location, storage_options: Mapping[str, str]) -> list[str]:
    """Delete Lance's children of ``location``; the names of the foreign ones left there."""
    if location.local:
        return _drop_local(location.key)
    if location.scheme == "s3":
        return _drop_s3(location, storage_options)
    from pyarrow import fs

    filesystem, base = fs.FileSystem.from_uri(str(location))
    kept: list[str] = []
    for info in filesystem.get_file_info(fs.FileSelector(base, allow_not_found=True)):
        name = info.path.rstrip("/").rsplit("/", 1)[-1]
        if info.type == fs.FileType.Directory and name in LANCE_DIRECTORIES:
            filesystem.delete_dir(info.path)
        elif info.type == fs.FileType.File and name in LANCE_FILES:
            filesystem.delete_file(info.path)
        else:
            kept.append(name)
    return sorted(kept)


def _drop_local(directory: str) -> list[str]:
    try:
        children = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except FileNotFoundError:
        return []
    kept: list[str] = []
    for child in children:
        if child.is_symlink():
            kept.append(child.name)
        elif child.is_dir() and child.name in LANCE_DIRECTORIES:
            shutil.rmtree(child.path)
        elif child.is_file() and child.name in LANCE_FILES:
            os.unlink(child.path)
        else:
            kept.append(child.name)
    if not kept:
        with contextlib.suppress(OSError):  # something arrived meanwhile: it stays
            os.rmdir(directory)
    return kept


def _drop_s3(location: Location, storage_options: Mapping[str, str]) -> list[str]:
    """On S3, by key: every key under ``<prefix>/`` whose first part is Lance's is deleted
    (in batches of 1,000); nothing else is written (no directory markers)."""
    from .claims import _s3_client

    client = _s3_client(storage_options)
    prefix = location.key + "/"
    doomed: list[str] = []
    kept: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=location.authority, Prefix=prefix
    ):
        for item in page.get("Contents", []):
            rest = item["Key"][len(prefix) :]
            first, separator, _ = rest.partition("/")
            if (separator and first in LANCE_DIRECTORIES) or (
                not separator and first in LANCE_FILES
            ):
                doomed.append(item["Key"])
            else:
                kept.add(first)
    for start in range(0, len(doomed), 1000):
        batch = [{"Key": key} for key in doomed[start : start + 1000]]
        client.delete_objects(Bucket=location.authority, Delete={"Objects": batch, "Quiet": True})
    return sorted(kept)
