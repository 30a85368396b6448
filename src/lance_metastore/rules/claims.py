"""Claims: two racing declares or registers at one location, and exactly one wins.

The catalog cannot say "create this entry unless another entry has this location": Glue and
Hive Metastore make a *name* unique, never a location. So the check "no entry overlaps this
location" and the entry's creation are made atomic by a claim on the location, held only
while they run: take the claim, check the catalog for an overlapping entry, create the
entry, release the claim. A request that cannot take the claim lost the race to one that is
about to create an entry there (or inside or around it), and answers 5.

Claims live in the server's own **claim store**, ``<root>/.lance-metastore/claims``, never
at the location: a refused request writes nothing into anyone's table, read-only data can be
registered, and a server needs no credentials for the data's store to declare. A claim is
named by the SHA-256 of the location's canonical text, so every server sharing the root
arbitrates one location through one name. A root on a store without conditional writes
(``gs``, ``az``, ``hdfs``) has no claim store: there the Hive Metastore's lock claims the
location (``_location_claim``); on Glue only the catalog check guards it. A claim store the
server cannot write answers 17 naming the claim store (docs/locations.md).

A claim can be left by a process that died holding it. Taking such a claim over must itself
be a race exactly one taker wins, judged on one clock:

- **local root**: an ``flock`` on the claim file: exclusive on the location's own, shared on
  each of its ancestors', so nested locations conflict (an inner and an outer racer cannot
  both win) while sibling tables do not. The kernel releases a dead holder's locks: no age
  to judge, no clock. Within one process a table of held files decides first (on NFS, Linux
  emulates ``flock`` with per-process locks). Claim files are never removed (unlinking one
  would let a second holder lock a fresh file of the same name).
- **S3 root**: the claim object is created with ``If-None-Match: *`` (of two racing puts
  exactly one succeeds, the other gets 412) and carries a random token, so every claim has
  its own ETag. A claim whose age reaches :data:`STALE_SECONDS` (a lease), measured on the
  store's clock alone (the ``Date`` of the ``HeadObject`` answer minus its
  ``LastModified``, less one second: both stamps are whole seconds, so their difference can
  exceed the true age by almost a second), is taken over with ``If-Match`` on the ETag just
  read: exactly one taker's write succeeds. A release deletes it with ``If-Match`` on its
  own ETag, so a holder slower than the lease never deletes the claim of the request that
  took it over, and a holder past half its lease refuses to write (``claimed``'s
  ``within_lease``: 14, retry) before the request that may take it over could. A put whose
  answer was lost and which botocore sent again finds its own object (its ETag is the MD5 of
  the token): the claim is still ours. A 409 (a write racing another, which AWS says to retry)
  is retried. Each store is probed once per process: one that ignores ``If-None-Match`` (some
  S3-compatible stores and proxies) would hand every racer the claim, so it answers 17.
  S3 claims are exclusive on the location's own name only: nested locations racing on an
  S3 root are guarded by the catalog check alone.
"""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import errno
import fcntl
import hashlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from lance_namespace.errors import (
    ConcurrentModificationError,
    ServiceUnavailableError,
    TableAlreadyExistsError,
)

from .config import s3_flag, s3_option
from .locations import CLAIM_STORE, Location

logger = logging.getLogger(__name__)

# The claim store's place under the root: ``<root>/.lance-metastore/claims``.
STORE = CLAIM_STORE
# The stores that can hold claims (a catalog may claim others itself:
# CatalogCore._location_claim, the Hive Metastore's lock).
CLAIMED_SCHEMES = ("file", "s3")
# How long an S3 claim holds before another request may take it over (its lease).
STALE_SECONDS = 60.0
# ``Date`` and ``LastModified`` are whole seconds, each truncated: their difference exceeds
# the true age by up to (not including) this much, so it is taken off before judging a lease.
_STAMP_RESOLUTION_SECONDS = 1.0
# Attempts at an S3 claim (a claim released or taken over meanwhile, a 409 of a write that
# raced another, is tried again), and the pause after a 409, growing with each attempt.
_ATTEMPTS = 3
_CONFLICT_PAUSE_SECONDS = 0.05

# The local claim files this process holds: path -> -1 (exclusive) or the number of shared
# holders; and the lock guarding the table.
_HELD: dict[str, int] = {}
_HELD_LOCK = threading.Lock()

_PRECONDITION_FAILED = ("PreconditionFailed", "412")
_CONFLICT = ("ConditionalRequestConflict", "409")
_MISSING = ("NoSuchKey", "404", "NotFound")

Release = Callable[[], None]


class ClaimTaken(Exception):
    """Another request holds the claim on this location."""


def store_under(root: Location | None) -> Location | None:
    """The claim store of a catalog whose root is ``root`` (None: no root, no store)."""
    if root is None or root.scheme not in CLAIMED_SCHEMES:
        return None
    return Location(root.scheme, root.authority, (*root.segments, *STORE))


def claim_name(location: Location) -> str:
    """The name of ``location``'s claim in the store: the SHA-256 of its canonical text."""
    return hashlib.sha256(str(location).encode()).hexdigest()


@contextlib.contextmanager
def claimed(
    location: Location,
    store: Location | None,
    storage_options: Mapping[str, str],
    what: str,
    *,
    stale_after: float = STALE_SECONDS,
) -> Iterator[Callable[[], None]]:
    """Hold the claim on ``location`` in ``store`` for the block; 5 if another request holds
    it. ``stale_after``: the S3 lease (a local claim ends only with its holder).

    The block gets ``within_lease``, to call just before it writes what the claim guards: an
    S3 claim held longer than half its lease may be taken over by another request before the
    write lands (checks that searched a large catalog, a slow or retried catalog call), so
    past that it answers 14 and the caller retries with a fresh claim."""
    started = time.monotonic()
    try:
        release = claim(location, store, storage_options, stale_after=stale_after)
    except ClaimTaken:
        raise TableAlreadyExistsError(
            f"{what}: another request is placing a table at this location"
        ) from None
    leased = store is not None and store.scheme in CLAIMED_SCHEMES and not store.local

    def within_lease() -> None:
        held = time.monotonic() - started
        if leased and held > stale_after / 2:
            raise ConcurrentModificationError(
                f"{what}: the checks under the location's claim took {held:.0f} s, more than "
                f"half its {stale_after:g} s lease; retry"
            )

    try:
        yield within_lease
    finally:
        release()


def claim(
    location: Location,
    store: Location | None,
    options: Mapping[str, str],
    *,
    stale_after: float = STALE_SECONDS,
) -> Release:
    """Take the claim on ``location`` in ``store``; its release. ClaimTaken if another request
    holds it (or, locally, a claim on a location inside or around it)."""
    if store is None or store.scheme not in CLAIMED_SCHEMES:
        return lambda: None
    location = location.real()  # one name per place, whichever link spells it
    if store.local:
        return _claim_local(store.key, location)
    return _claim_s3(store, location, options, stale_after)


def _unavailable_store(store: str, error: OSError) -> ServiceUnavailableError:
    reason = errno.errorcode.get(error.errno or 0, "OSError")
    return ServiceUnavailableError(
        f"Cannot take a location claim: the claim store {store} is not writable ({reason}); "
        "the server needs write access to <root>/.lance-metastore/claims"
    )


# --------------------------------------------------------------------------------------------
# Local files: flock in the claim store
# --------------------------------------------------------------------------------------------


def _chain(location: Location) -> list[Location]:
    """``location``'s ancestors, shallowest first, then ``location`` itself."""
    return [
        Location(location.scheme, location.authority, location.segments[:n])
        for n in range(len(location.segments) + 1)
    ]


def _claim_local(store: str, location: Location) -> Release:
    """A shared ``flock`` on the claim file of every ancestor and an exclusive one on the
    location's own: two claims conflict exactly when one location holds the other (siblings
    share their ancestors' shared locks). Taken shallowest first, without waiting."""
    try:
        os.makedirs(store, exist_ok=True)
    except OSError as error:
        raise _unavailable_store(store, error) from None
    chain = _chain(location)
    held: list[tuple[str, int, int]] = []
    try:
        for index, place in enumerate(chain):
            mode = fcntl.LOCK_EX if index == len(chain) - 1 else fcntl.LOCK_SH
            path = os.path.join(store, claim_name(place))
            held.append((path, _lock_file(store, path, mode), mode))
    except BaseException:
        _release_local(held)
        raise
    return lambda: _release_local(held)


def _lock_file(store: str, path: str, mode: int) -> int:
    """An open descriptor of the claim file ``path`` holding a ``mode`` lock (the process's
    table first: on NFS, Linux emulates ``flock`` per process). ClaimTaken if held."""
    with _HELD_LOCK:
        count = _HELD.get(path, 0)
        if count < 0 or (count > 0 and mode == fcntl.LOCK_EX):
            raise ClaimTaken
        _HELD[path] = -1 if mode == fcntl.LOCK_EX else count + 1
    try:
        try:
            handle = os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as error:
            raise _unavailable_store(store, error) from None
        try:
            fcntl.flock(handle, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            raise ClaimTaken from None
        except BaseException:
            os.close(handle)
            raise
        return handle
    except BaseException:
        _forget(path, mode)
        raise


def _forget(path: str, mode: int) -> None:
    with _HELD_LOCK:
        count = _HELD.get(path, 0)
        if mode == fcntl.LOCK_EX or count <= 1:
            _HELD.pop(path, None)
        else:
            _HELD[path] = count - 1


def _release_local(held: list[tuple[str, int, int]]) -> None:
    # The files stay (one per location ever claimed, a few bytes of inode): unlinking one
    # would let a second holder lock a fresh file of the same name.
    for path, handle, mode in reversed(held):
        os.close(handle)
        _forget(path, mode)
    held.clear()


# --------------------------------------------------------------------------------------------
# S3: conditional writes, a lease judged on the store's clock
# --------------------------------------------------------------------------------------------


def _claim_s3(
    store: Location, location: Location, options: Mapping[str, str], stale_after: float
) -> Release:
    client = _s3_client(options)
    bucket, key = store.authority, f"{store.key}/{claim_name(location)}"
    where = f"s3://{bucket}/{key.rsplit('/', 1)[0]}"
    _require_conditional_writes(client, bucket, store.key, where)
    for attempt in range(_ATTEMPTS):
        token = uuid.uuid4().hex.encode()  # every claim its own ETag
        try:
            etag = client.put_object(Bucket=bucket, Key=key, Body=token, IfNoneMatch="*")["ETag"]
            return _s3_release(client, bucket, key, etag)
        except Exception as error:
            code = _code(error)
            if code in _CONFLICT:  # raced a release or another write: AWS says retry
                time.sleep(_CONFLICT_PAUSE_SECONDS * (attempt + 1))
                continue
            if code not in _PRECONDITION_FAILED:
                raise _unavailable(where, code, error) from None
        held = _s3_marker(client, bucket, key)
        if held is None:
            continue  # released meanwhile: claim it afresh
        etag, age = held
        if _is_ours(etag, token):  # our put landed, its answer was lost and the retry saw it
            return _s3_release(client, bucket, key, etag)
        if age is None or age - _STAMP_RESOLUTION_SECONDS < stale_after:
            raise ClaimTaken
        try:
            etag = client.put_object(Bucket=bucket, Key=key, Body=token, IfMatch=etag)["ETag"]
            return _s3_release(client, bucket, key, etag)
        except Exception as error:
            code = _code(error)
            if code in _MISSING:
                continue  # released meanwhile: claim it afresh
            if code not in _PRECONDITION_FAILED and code not in _CONFLICT:
                raise _unavailable(where, code, error) from None
        held = _s3_marker(client, bucket, key)  # lost the takeover, unless a retry of ours won
        if held is not None and _is_ours(held[0], token):
            return _s3_release(client, bucket, key, held[0])
        raise ClaimTaken
    raise ClaimTaken


def _is_ours(etag: str, token: bytes) -> bool:
    """Whether the claim object is the one we wrote: a single-part object's ETag is the MD5 of
    its body (not with SSE-KMS or SSE-C; then the object counts as another request's)."""
    return etag.strip('"') == hashlib.md5(token, usedforsecurity=False).hexdigest()


# Stores whose conditional writes were probed, by endpoint and bucket: this process checks each
# once (a probe is three requests).
_PROBED: set[tuple[str, str]] = set()
_PROBED_LOCK = threading.Lock()


def _require_conditional_writes(client: Any, bucket: str, prefix: str, where: str) -> None:
    """17 unless the store refuses a second ``If-None-Match: *`` put of one object (412): a
    store or proxy that drops the header would hand every racer the claim, silently."""
    probed = (str(client.meta.endpoint_url), bucket)
    with _PROBED_LOCK:
        if probed in _PROBED:
            return
    key = f"{prefix}/probe-{uuid.uuid4().hex}"
    try:
        client.put_object(Bucket=bucket, Key=key, Body=b"probe", IfNoneMatch="*")
        try:
            client.put_object(Bucket=bucket, Key=key, Body=b"probe", IfNoneMatch="*")
            honoured = False
        except Exception as error:
            code = _code(error)
            if code not in _PRECONDITION_FAILED and code not in _CONFLICT:
                raise _unavailable(where, code, error) from None
            honoured = True
    except ServiceUnavailableError:
        raise
    except Exception as error:
        raise _unavailable(where, _code(error), error) from None
    finally:
        with contextlib.suppress(Exception):
            client.delete_object(Bucket=bucket, Key=key)
    if not honoured:
        raise ServiceUnavailableError(
            f"The claim store at {where} ignores conditional writes (If-None-Match): claims "
            "on its locations could not be exclusive; use a store that honours them (AWS S3 "
            "does), or set shared_locations=true to place tables without claims"
        )
    with _PROBED_LOCK:
        _PROBED.add(probed)


def _s3_marker(client: Any, bucket: str, key: str) -> tuple[str, float | None] | None:
    """The marker's ETag and age on the store's own clock (the answer's ``Date`` minus the
    marker's ``LastModified``; None without a ``Date``: never judged stale); None if gone."""
    try:
        head = client.head_object(Bucket=bucket, Key=key)
    except Exception as error:
        code = _code(error)
        if code in _MISSING:
            return None
        raise _unavailable(f"s3://{bucket}/{key.rsplit('/', 1)[0]}", code, error) from None
    date = head.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    return str(head["ETag"]), store_age(date, head["LastModified"])


def store_age(date: str | None, last_modified: datetime.datetime) -> float | None:
    """Seconds from ``last_modified`` to the answer's ``Date`` header, both on the store's
    clock; None without a readable ``Date``. An HTTP date is GMT: one without a zone
    (``-0000``, or two values joined by a proxy, of which the first is read) is taken as UTC."""
    if not date:
        return None
    try:
        now = email.utils.parsedate_to_datetime(date)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if now.tzinfo is None:
        now = now.replace(tzinfo=datetime.timezone.utc)
    if last_modified.tzinfo is None:
        last_modified = last_modified.replace(tzinfo=datetime.timezone.utc)
    return (now - last_modified).total_seconds()


def _s3_release(client: Any, bucket: str, key: str, etag: str) -> Release:
    def release() -> None:
        try:
            client.delete_object(Bucket=bucket, Key=key, IfMatch=etag)
        except Exception as error:
            # 412: our lease ran out and another request took the claim over: it is theirs.
            # 404: gone already. Anything else (the store cannot reach or lacks conditional
            # deletes): the marker stays and its lease runs out.
            if _code(error) not in (*_PRECONDITION_FAILED, *_MISSING):
                logger.warning("Could not release the claim at s3://%s/%s", bucket, key)

    return release


def _code(error: BaseException) -> str:
    return str(getattr(error, "response", {}).get("Error", {}).get("Code", ""))


def _unavailable(store: str, code: str, error: BaseException) -> ServiceUnavailableError:
    return ServiceUnavailableError(
        f"Cannot take a location claim in the claim store {store} "
        f"({code or type(error).__name__}): the server needs write access to "
        "<root>/.lance-metastore/claims"
    )


def _s3_client(options: Mapping[str, str]) -> Any:
    """A boto3 S3 client from Lance's storage options (object_store's key names)."""
    from .aws_sessions import aws_session
    from .extras import requires_extra

    with requires_extra("aws"):
        import boto3  # noqa: F401  (the extra's check)
    endpoint = s3_option(options, "endpoint")
    if endpoint and "://" not in endpoint:
        endpoint = ("http://" if s3_flag(options, "allow_http") else "https://") + endpoint
    kwargs: dict[str, Any] = {
        "endpoint_url": endpoint,
        "region_name": s3_option(options, "region"),
        "aws_access_key_id": s3_option(options, "access_key_id"),
        "aws_secret_access_key": s3_option(options, "secret_access_key"),
        "aws_session_token": s3_option(options, "session_token"),
    }
    return aws_session().client("s3", **{k: v for k, v in kwargs.items() if v})
