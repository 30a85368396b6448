"""Sorted, paginated listings with opaque page tokens.

A page token records the last name returned ("keyset" paging), so a listing never repeats or
skips a name that existed throughout, whatever changes in between. It also names a snapshot
of the sorted listing kept for a short while in the namespace object: paging through 1,000
tables then costs one catalog round of calls instead of one per page. An expired or unknown
snapshot is simply fetched again and continued after the last name.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence

from lance_namespace.errors import InvalidInputError

from .json_nesting import nests_deeper_than

SNAPSHOT_SECONDS = 60.0
SNAPSHOT_SLOTS = 64


def check_limit(limit: int | None) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidInputError(f"limit must be a whole number >= 0, got {limit!r}")
    return limit or None  # 0 means "no limit", as in Lance's own namespaces


def encode_token(after: str, snapshot: str) -> str:
    payload = json.dumps({"a": after, "s": snapshot}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


def decode_token(token: str) -> tuple[str, str | None]:
    """Return (last name returned, snapshot id) or raise InvalidInputError."""
    try:
        padded = token + "=" * (-len(token) % 4)
        raw = base64.urlsafe_b64decode(padded.encode())
        if nests_deeper_than(raw, 1):  # a token is one flat object
            raise ValueError
        payload = json.loads(raw)
        after = payload["a"]
        snapshot = payload.get("s")
        if not isinstance(after, str) or not (snapshot is None or isinstance(snapshot, str)):
            raise ValueError
        return after, snapshot
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeError):
        raise InvalidInputError(f"Invalid page_token {token[:64]!r}") from None


class Pager:
    """Pages sorted listings and keeps short-lived snapshots of them (thread-safe)."""

    def __init__(self, seconds: float = SNAPSHOT_SECONDS, slots: int = SNAPSHOT_SLOTS) -> None:
        self._seconds = seconds
        self._slots = slots
        self._lock = threading.Lock()
        self._snapshots: OrderedDict[str, tuple[float, Hashable, list[str]]] = OrderedDict()

    def page(
        self,
        key: Hashable,
        fetch: Callable[[], Sequence[str]],
        page_token: str | None,
        limit: int | None,
        descending: bool = False,
    ) -> tuple[list[str], str | None]:
        """One page of the sorted listing that ``fetch`` produces for ``key``."""
        limit = check_limit(limit)
        key = (key, descending)
        after, snapshot_id = decode_token(page_token) if page_token else (None, None)
        names = self._cached(snapshot_id, key) if snapshot_id else None
        if names is None:
            names = sorted(set(fetch()), reverse=descending)
            snapshot_id = None
        start = 0 if after is None else _first_after(names, after, descending)
        if limit is None or start + limit >= len(names):
            return names[start:], None
        chosen = names[start : start + limit]
        if snapshot_id is None:
            snapshot_id = self._remember(key, names)
        return chosen, encode_token(chosen[-1], snapshot_id)

    def _cached(self, snapshot_id: str, key: Hashable) -> list[str] | None:
        with self._lock:
            entry = self._snapshots.get(snapshot_id)
            if entry is None:
                return None
            expires, owner, names = entry
            if owner != key or expires < time.monotonic():
                self._snapshots.pop(snapshot_id, None)
                return None
            return names

    def _remember(self, key: Hashable, names: list[str]) -> str:
        snapshot_id = uuid.uuid4().hex[:16]
        with self._lock:
            self._snapshots[snapshot_id] = (time.monotonic() + self._seconds, key, names)
            while len(self._snapshots) > self._slots:
                self._snapshots.popitem(last=False)
        return snapshot_id


def _first_after(names: list[str], after: str, descending: bool) -> int:
    """Index of the first name that comes after ``after`` in the listing's order."""
    if descending:
        return next((i for i, name in enumerate(names) if name < after), len(names))
    return bisect.bisect_right(names, after)
