"""Sorted, paginated listings with opaque page tokens.

A page token records the last name returned ("keyset" paging), so a listing never repeats or
skips a name that existed throughout, whatever changes in between. It also names a snapshot
of the sorted listing kept for a short while in the namespace object: paging through 1,000
tables then costs one catalog round of calls instead of one per page. An expired or unknown
snapshot is simply fetched again and continued after the last name.

A caller never reads a token: it is sealed (encrypted, then authenticated with HMAC-SHA256)
under a per-process key, bound to the caller it was issued to
(:func:`~lance_metastore.rules.visibility.viewer`). A token that was changed, forged, issued by
another server, or replayed by another caller answers the same 13 ("Invalid page_token").
Listings of catalog objects (:meth:`Pager.objects`) judge each object by its id, a tuple of
names (never joined text split again), against the caller's visibility before they cut a page
(:mod:`~lance_metastore.rules.visibility`), so neither a page nor its token depends on
objects the caller may not see; an object whose name holds the delimiter, which no id form can
address, is listed to nobody.

The key is random for each process unless ``LANCE_METASTORE_PAGE_TOKEN_SECRET`` is set: give
every replica or worker behind one address the same secret, so a token issued by one is
accepted by the next.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import hmac
import json
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence

from lance_namespace.errors import InvalidInputError

from .errors import register_secrets
from .identifiers import DELIMITER, Path
from .json_nesting import nests_deeper_than
from .visibility import NAMESPACE, TABLE, current, viewer

SNAPSHOT_SECONDS = 60.0
SNAPSHOT_SLOTS = 64
SECRET_ENV = "LANCE_METASTORE_PAGE_TOKEN_SECRET"
MAX_TOKEN_CHARS = 4096  # far above any token we issue (a name is at most a few hundred bytes)
_VERSION = b"\x01"
_TOKEN_TEXT = re.compile(r"[A-Za-z0-9_-]+")
_NONCE_BYTES = 16
_TAG_BYTES = 16


class _Keys:
    """The encryption and authentication keys, derived once from the server's secret."""

    def __init__(self, secret: bytes) -> None:
        self.encrypt = hmac.digest(secret, b"lance-metastore page token encryption", "sha256")
        self.authenticate = hmac.digest(secret, b"lance-metastore page token mac", "sha256")


_keys: _Keys | None = None
_keys_lock = threading.Lock()


def _server_keys() -> _Keys:
    global _keys
    with _keys_lock:
        if _keys is None:
            configured = os.environ.get(SECRET_ENV)
            if configured:
                register_secrets([configured])
                _keys = _Keys(configured.encode())
            else:
                _keys = _Keys(os.urandom(32))
        return _keys


def use_token_secret(secret: str | None) -> None:
    """Seal tokens with ``secret`` from now on (None: a new random key, as at start); tokens
    sealed before no longer open."""
    global _keys
    with _keys_lock:
        if secret:
            register_secrets([secret])
        _keys = _Keys(secret.encode() if secret else os.urandom(32))


def _keystream(key: bytes, nonce: bytes, length: int) -> bytes:
    """HMAC-SHA256 in counter mode: a pseudo-random stream for this nonce."""
    blocks = (length + 31) // 32
    return b"".join(
        hmac.digest(key, nonce + counter.to_bytes(4, "big"), "sha256") for counter in range(blocks)
    )[:length]


def _xor(data: bytes, stream: bytes) -> bytes:
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")).to_bytes(len(data), "big")


def _tag(key: bytes, sealed: bytes, reader: str) -> bytes:
    message = sealed + b"\x00" + reader.encode("utf-8", "surrogatepass")
    return hmac.digest(key, message, "sha256")[:_TAG_BYTES]


def seal(payload: bytes, reader: str) -> str:
    """``payload`` encrypted and authenticated for ``reader``, as URL-safe text."""
    keys = _server_keys()
    nonce = os.urandom(_NONCE_BYTES)
    stream = _keystream(keys.encrypt, nonce, len(payload))
    body = _VERSION + nonce + _xor(payload, stream)
    sealed = body + _tag(keys.authenticate, body, reader)
    return base64.urlsafe_b64encode(sealed).decode().rstrip("=")


def unseal(token: str, reader: str) -> bytes:
    """The payload :func:`seal` sealed for ``reader``; ValueError for anything else."""
    if len(token) > MAX_TOKEN_CHARS or not _TOKEN_TEXT.fullmatch(token):
        raise ValueError("not token text")
    # strict: the URL-safe alphabet only, and the one spelling seal() writes (a token whose
    # spare bits differ is another token, not the same one)
    raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
    if base64.urlsafe_b64encode(raw).decode().rstrip("=") != token:
        raise ValueError("not as sealed")
    if len(raw) < 1 + _NONCE_BYTES + _TAG_BYTES or raw[:1] != _VERSION:
        raise ValueError("not a token")
    body, tag = raw[:-_TAG_BYTES], raw[-_TAG_BYTES:]
    keys = _server_keys()
    if not hmac.compare_digest(tag, _tag(keys.authenticate, body, reader)):
        raise ValueError("not ours")
    nonce, ciphertext = body[1 : 1 + _NONCE_BYTES], body[1 + _NONCE_BYTES :]
    stream = _keystream(keys.encrypt, nonce, len(ciphertext))
    return _xor(ciphertext, stream)


def check_limit(limit: int | None) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidInputError(f"limit must be a whole number >= 0, got {limit!r}")
    return limit or None  # 0 means "no limit", as in Lance's own namespaces


def encode_token(after: str, snapshot: str) -> str:
    """A token continuing after ``after``, sealed for the current caller."""
    payload = json.dumps({"a": after, "s": snapshot}, separators=(",", ":")).encode()
    return seal(payload, viewer())


def decode_token(token: str) -> tuple[str, str | None]:
    """Return (last name returned, snapshot id) or raise InvalidInputError, the same for a
    malformed token, a changed one and one sealed for another caller."""
    try:
        raw = unseal(token, viewer())
        if nests_deeper_than(raw, 1):  # a token is one flat object
            raise ValueError
        payload = json.loads(raw)
        after = payload["a"]
        snapshot = payload.get("s")
        if not isinstance(after, str) or not (snapshot is None or isinstance(snapshot, str)):
            raise ValueError
        return after, snapshot
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeError):
        raise InvalidInputError(
            "Invalid page_token: not one this server issued to this caller"
        ) from None


# A listing's entry: the text it answers and, for a catalog object, its id (None: a name
# inside one object the caller already sees, such as a table's tag).
_Entry = tuple[str, Path | None]


class Pager:
    """Pages sorted listings and keeps short-lived snapshots of them (thread-safe).

    :meth:`objects` pages catalog objects (namespaces, tables): each is judged by its id
    against the current caller's visibility before the page is cut. :meth:`page` pages names
    inside one object the caller was already allowed (versions, tags, indexes).
    """

    def __init__(self, seconds: float = SNAPSHOT_SECONDS, slots: int = SNAPSHOT_SLOTS) -> None:
        self._seconds = seconds
        self._slots = slots
        self._lock = threading.Lock()
        self._snapshots: OrderedDict[str, tuple[float, Hashable, list[_Entry]]] = OrderedDict()
        self._policed = False

    def police(self) -> None:
        """A server serves this namespace to callers of unequal rights: from now on a listing
        outside any caller's :func:`~lance_metastore.rules.visibility.seen_by` block shows
        nothing (fail closed), not everything."""
        self._policed = True

    def objects(
        self,
        key: Hashable,
        fetch: Callable[[], Iterable[Path]],
        page_token: str | None,
        limit: int | None,
        *,
        kind: str,
        render: Callable[[Path], str],
    ) -> tuple[list[str], str | None]:
        """One page of the catalog objects (``kind``: NAMESPACE or TABLE) whose ids ``fetch``
        produces, each answered as ``render(id)`` and sorted by that text. An object the
        current caller may not see is judged on its id (never on re-split text) and left out
        before the page is cut; the snapshot keeps every id, so callers share it."""
        if kind not in (NAMESPACE, TABLE):
            raise ValueError(f"kind must be {NAMESPACE!r} or {TABLE!r}, not {kind!r}")
        visible = current(self._policed)
        judge = None if visible is None else (lambda object_id: visible(object_id, kind))

        def entries() -> list[_Entry]:
            return [
                (render(object_id), tuple(object_id))
                for object_id in fetch()
                if addressable(object_id)
            ]

        return self._page(key, entries, page_token, limit, False, judge)

    def sees(self, object_id: Sequence[str], kind: str) -> bool:
        """Whether the current caller may see this object (what :meth:`objects` asks of each
        id): for a listing that walks the catalog, to walk only where the caller may look."""
        visible = current(self._policed)
        return visible is None or visible(object_id, kind)

    def page(
        self,
        key: Hashable,
        fetch: Callable[[], Sequence[str]],
        page_token: str | None,
        limit: int | None,
        descending: bool = False,
    ) -> tuple[list[str], str | None]:
        """One page of the sorted names ``fetch`` produces: names inside one object the
        caller is allowed (never catalog objects: those go through :meth:`objects`)."""
        return self._page(
            key, lambda: [(name, None) for name in fetch()], page_token, limit, descending, None
        )

    def _page(
        self,
        key: Hashable,
        fetch: Callable[[], list[_Entry]],
        page_token: str | None,
        limit: int | None,
        descending: bool,
        judge: Callable[[Path], bool] | None,
    ) -> tuple[list[str], str | None]:
        limit = check_limit(limit)
        key = (key, descending)
        after, snapshot_id = decode_token(page_token) if page_token else (None, None)
        entries = self._cached(snapshot_id, key) if snapshot_id else None
        if entries is None:
            entries = sorted(dict(fetch()).items(), reverse=descending)
            snapshot_id = None
        start = 0 if after is None else _first_after(entries, after, descending)
        chosen, more = _take(entries, start, limit, judge)
        if not more:
            return chosen, None
        if snapshot_id is None:
            snapshot_id = self._remember(key, entries)
        return chosen, encode_token(chosen[-1], snapshot_id)

    def _cached(self, snapshot_id: str, key: Hashable) -> list[_Entry] | None:
        with self._lock:
            entry = self._snapshots.get(snapshot_id)
            if entry is None:
                return None
            expires, owner, entries = entry
            if owner != key or expires < time.monotonic():
                self._snapshots.pop(snapshot_id, None)
                return None
            return entries

    def _remember(self, key: Hashable, entries: list[_Entry]) -> str:
        snapshot_id = uuid.uuid4().hex[:16]
        with self._lock:
            self._snapshots[snapshot_id] = (time.monotonic() + self._seconds, key, entries)
            while len(self._snapshots) > self._slots:
                self._snapshots.popitem(last=False)
        return snapshot_id


def addressable(object_id: Sequence[str]) -> bool:
    """Whether a caller can name this object: a name holding the delimiter (a Glue database
    ``pub$secret`` made through the Glue API) is split by every id form, so no call reaches
    it, and a listing that showed it joined would show an id that means another object.
    Listings leave such objects out."""
    return not any(DELIMITER in part for part in object_id)


def _take(
    entries: list[_Entry],
    start: int,
    limit: int | None,
    judge: Callable[[Path], bool] | None,
) -> tuple[list[str], bool]:
    """Up to ``limit`` names from ``start`` on that the caller may see, and whether another
    visible one follows. Hidden names are skipped as they come, so a page costs the names it
    passes, not the whole listing."""
    if judge is None:
        end = len(entries) if limit is None else start + limit
        return [name for name, _ in entries[start:end]], end < len(entries)
    chosen: list[str] = []
    for index in range(start, len(entries)):
        name, object_id = entries[index]
        if object_id is not None and judge(object_id):
            if limit is not None and len(chosen) == limit:
                return chosen, True
            chosen.append(name)
    return chosen, False


def _first_after(entries: list[_Entry], after: str, descending: bool) -> int:
    """Index of the first entry whose name comes after ``after`` in the listing's order."""
    if descending:
        return next((i for i, (name, _) in enumerate(entries) if name < after), len(entries))
    return bisect.bisect_right(entries, after, key=lambda entry: entry[0])
