"""Staging manifest paths as Lance names them, for tests that commit versions by hand.

A commit may only name its table's own staging manifest of its version
(``<table path in its store>/_versions/<final name>-<uuid>``); these build such paths
independently of the namespace's own manifest rule, which tests/test_commit_routine.py
checks. A location's path in its store is read by the one location parser.
"""

from __future__ import annotations

import uuid
from typing import Any

from lance_metastore.rules.locations import Location

U64_MAX = 2**64 - 1


def final_name(version: int, scheme: str = "V2") -> str:
    return f"{version}.manifest" if scheme == "V1" else f"{U64_MAX - version:020d}.manifest"


def store_path(location: str) -> str:
    """A location's path inside its object store, as Lance reports manifest paths: the key
    of the one parsed value (the manifest naming above stays independent of the library)."""
    return Location.parse(location, None, "test").key.lstrip("/")


def staging_path(location: str, version: int, scheme: str = "V2") -> str:
    return (
        f"{store_path(location).rstrip('/')}/_versions/{final_name(version, scheme)}-{uuid.uuid4()}"
    )


def staging_of(ns: Any, table_id: list[str], version: int, scheme: str = "V2") -> str:
    """A fresh staging path for ``version`` of the table ``ns`` describes (no file written)."""
    return staging_path(ns.describe_table({"id": table_id}).location, version, scheme)
