"""Credential vending: short-lived S3 credentials scoped to one table, handed out with its location.

Configured with the ``credential_vendor.*`` properties of Lance's ``DirectoryNamespace``
(same names, defaults and meanings; ``aws_sts_endpoint`` and the vendor's own static keys are
ours). On ``describe_table``/``declare_table`` with ``vend_credentials`` (unset counts as asked,
as in ``DirectoryNamespace``), the vendor calls STS ``AssumeRole`` into ``aws_role_arn`` with an
inline session policy that allows only the table's prefix, and the answer's ``storage_options``
carry the temporary key, secret, session token and ``expires_at_millis`` (the key Lance's
clients read to refresh them by asking again) beside the configured non-secret options.

Rights: ``credential_vendor.permission`` is the most this namespace ever vends. A server that
knows its caller narrows it for one call with :func:`vending_at_most` (never widens it).

Answers are cached per (table location, rights) and reused while more than a quarter of their
lifetime is left, so a client that refreshes ahead of expiry always gets fresh ones. The
vendor's own credentials never appear in an answer, a log line or a ``repr``.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lance_namespace.errors import (
    InternalError,
    InvalidInputError,
    ServiceUnavailableError,
    ThrottlingError,
)

from . import observe
from .config import Property, Settings, boolean, one_of
from .errors import guard_library_logs
from .extras import requires_extra
from .locations import Location
from .redaction import VENDED_CREDENTIALS_MARKER, VENDOR_PREFIX, looks_secret

if TYPE_CHECKING:  # the stub package of boto3-stubs[sts] (dev only)
    from mypy_boto3_sts import STSClient

logger = logging.getLogger("lance_metastore.credentials")

PREFIX = VENDOR_PREFIX
READ, WRITE, ADMIN = "read", "write", "admin"
# Weakest first: narrowing takes the lower of two.
PERMISSIONS = (READ, WRITE, ADMIN)

# Lance's defaults and bounds (lance-namespace-impls, credentials/aws.rs and dir.rs).
DEFAULT_DURATION_MILLIS = 3_600_000
MIN_DURATION_MILLIS = 900_000  # STS AssumeRole: 15 minutes ...
MAX_DURATION_MILLIS = 43_200_000  # ... to 12 hours
DEFAULT_SESSION_NAME = "lance-credential-vending"

# The storage option names pylance reads (object_store's AWS keys).
ACCESS_KEY_OPTION = "aws_access_key_id"
SECRET_KEY_OPTION = "aws_secret_access_key"
SESSION_TOKEN_OPTION = "aws_session_token"
REGION_OPTION = "aws_region"


def _duration_millis(value: str) -> int:
    try:
        millis = int(str(value).strip())
    except ValueError:
        raise ValueError(f"must be a whole number of milliseconds, got {value!r}") from None
    if not MIN_DURATION_MILLIS <= millis <= MAX_DURATION_MILLIS:
        raise ValueError(
            f"must be between {MIN_DURATION_MILLIS} (15 minutes) and {MAX_DURATION_MILLIS} "
            f"(12 hours), as STS AssumeRole allows; got {millis}"
        )
    return millis


VENDOR_PROPERTIES: tuple[Property, ...] = (
    Property(f"{PREFIX}enabled", "Vend scoped S3 credentials with table locations", boolean, False),
    Property(
        f"{PREFIX}permission",
        "The most ever vended: read, write (adds put and delete) or admin",
        one_of(*PERMISSIONS),
        READ,
    ),
    Property(f"{PREFIX}aws_role_arn", "IAM role that vended credentials assume"),
    Property(f"{PREFIX}aws_external_id", "External id the role's trust policy asks", secret=True),
    Property(f"{PREFIX}aws_region", "Region of the STS client, also vended as aws_region"),
    Property(
        f"{PREFIX}aws_role_session_name",
        "Role session name (shows in CloudTrail)",
        default=DEFAULT_SESSION_NAME,
    ),
    Property(
        f"{PREFIX}aws_duration_millis",
        "Lifetime of vended credentials in ms (15 min to 12 h)",
        _duration_millis,
        DEFAULT_DURATION_MILLIS,
    ),
    # Ours: S3-compatible stores on premises (MinIO, Ceph) serve STS at their own endpoint;
    # and the vendor's own keys when boto3's default chain is not the right source.
    Property(f"{PREFIX}aws_sts_endpoint", "STS endpoint URL (S3-compatible stores on premises)"),
    Property(f"{PREFIX}aws_access_key_id", "Vendor's own key id (else boto3's chain)", secret=True),
    Property(f"{PREFIX}aws_secret_access_key", "Vendor's own secret key", secret=True),
    Property(f"{PREFIX}aws_session_token", "Vendor's own session token", secret=True),
)

# The caller's ceiling for the current call (a server that knows its caller sets it).
_caller_ceiling: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "lance_metastore_vending_ceiling", default=None
)


# A ceiling for a caller who may describe a table but not read it: no credentials at all.
NOTHING = "none"


@contextlib.contextmanager
def vending_at_most(permission: str | None) -> Iterator[None]:
    """Within this block, vend no more than ``permission`` (read, write or admin; ``none``:
    no credentials; None: no narrowing). Blocks nest by narrowing: an inner block never
    widens what an outer one allows. The REST server wraps each call in it with the
    caller's privilege, so a reader gets read-only credentials even from a namespace
    configured to vend write."""
    if permission is not None and permission not in (*PERMISSIONS, NOTHING):
        raise ValueError(f"permission must be one of {', '.join(PERMISSIONS)}, got {permission!r}")
    token = _caller_ceiling.set(narrowed(_caller_ceiling.get(), permission))
    try:
        yield
    finally:
        _caller_ceiling.reset(token)


def narrowed(permission: str | None, ceiling: str | None) -> str | None:
    """The weaker of a permission and a ceiling (``none`` is weakest; None: no limit), for a
    namespace's permission under a caller's ceiling as for nested ceilings."""
    if permission is None or ceiling is None:
        return ceiling if permission is None else permission
    return min(permission, ceiling, key=(NOTHING, *PERMISSIONS).index)


def permission_to_vend(configured: str) -> str | None:
    """What may be vended now: the namespace's ``configured`` permission narrowed by the
    current caller's ceiling (``None``: nothing, the caller may not read the table's data)."""
    allowed = narrowed(configured, _caller_ceiling.get())
    return None if allowed == NOTHING else allowed


def session_policy(bucket: str, prefix: str, permission: str) -> dict[str, Any]:
    """The inline session policy: only objects under ``bucket/prefix/``, with ``permission``'s
    actions. Listing is allowed only for keys under the prefix (the ``s3:prefix`` condition).

    The prefix ends in ``/`` everywhere, so ``db/t`` grants nothing under ``db/t2/``; it comes
    from a :class:`~.locations.Location`, which holds no IAM wildcard (``*``, ``?``) or policy
    variable (``${``), so the policy names exactly the table's prefix. A bucket root (empty
    prefix) is refused: it would grant the whole bucket.
    """
    prefix = prefix.strip("/")
    if not prefix or any(mark in prefix for mark in ("*", "?", "${")):
        raise InvalidInputError(f"Refusing a session policy for prefix {prefix!r} of {bucket}")
    objects = f"arn:aws:s3:::{bucket}/{prefix}/*"
    listed = [f"{prefix}/", f"{prefix}/*"]
    actions = ["s3:GetObject", "s3:GetObjectVersion"]
    if permission in (WRITE, ADMIN):
        # Lance's writers replace and remove their own files (temporary manifests, cleanup).
        actions += ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    if permission == ADMIN:
        actions += ["s3:DeleteObjectVersion"]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{bucket}",
                "Condition": {"StringLike": {"s3:prefix": listed}},
            },
            {
                "Effect": "Allow",
                "Action": "s3:GetBucketLocation",
                "Resource": f"arn:aws:s3:::{bucket}",
            },
            {"Effect": "Allow", "Action": actions, "Resource": objects},
        ],
    }


def vended_location(location: str) -> Location:
    """The stored ``location`` judged by today's rules before credentials are vended for it
    (13 when it fails them: an entry made before them gets no credentials)."""
    try:
        where = Location.parse(location, None, "Table location")
    except InvalidInputError as error:
        raise InvalidInputError(f"Cannot vend credentials for this table: {error}") from None
    if where.scheme == "s3" and not where.segments:
        raise InvalidInputError(
            "Cannot vend credentials for this table: its location is a bucket root"
        )
    return where


@dataclass(frozen=True)
class _Vended:
    options: Mapping[str, str]
    expires_at: float  # seconds since the epoch
    refresh_at: float  # reuse until then


class CredentialVendor:
    """Vends scoped S3 credentials for table locations; one per namespace, thread-safe.

    ``clock`` (seconds since the epoch) is injectable so tests can move time forward.
    """

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self._settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], _Vended] = {}
        self._key_locks: dict[tuple[str, str], threading.Lock] = {}
        self._sts: STSClient | None = None
        if self.enabled and not settings[f"{PREFIX}aws_role_arn"]:
            raise InvalidInputError(
                f"{PREFIX}enabled=true requires {PREFIX}aws_role_arn (the role to assume)"
            )

    def __repr__(self) -> str:
        return (
            f"CredentialVendor(enabled={self.enabled}, permission={self.permission!r}, "
            f"role={self._settings[f'{PREFIX}aws_role_arn']!r})"
        )

    @property
    def enabled(self) -> bool:
        return bool(self._settings[f"{PREFIX}enabled"])

    @property
    def permission(self) -> str:
        """The most this vendor ever vends."""
        return str(self._settings[f"{PREFIX}permission"])

    def storage_options(
        self,
        location: str,
        configured: Mapping[str, str],
        vend_credentials: bool | None,
    ) -> dict[str, str] | None:
        """The ``storage_options`` a describe/declare answer carries for ``location``.

        Without vending (disabled, ``vend_credentials=false``, or not an S3 location) the
        configured options as before. With it: the configured non-secret options (endpoint,
        region, ``allow_http``) plus freshly vended, scoped credentials.
        """
        if not self.enabled or vend_credentials is False:
            return dict(configured) or None
        where = vended_location(location)
        if where.scheme != "s3":
            return dict(configured) or None
        public = {name: value for name, value in configured.items() if not looks_secret(name)}
        permission = permission_to_vend(self.permission)
        if permission is None:
            return public or None
        vended = self._vended(str(where), (where.authority, where.key), permission)
        return {**public, **vended.options}

    def _vended(self, location: str, where: tuple[str, str], permission: str) -> _Vended:
        key = (location, permission)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and self._clock() < cached.refresh_at:
                observe.event("vending_hit")
                return cached
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # one AssumeRole per table and rights, however many callers wait
            with self._lock:
                cached = self._cache.get(key)
            if cached is not None and self._clock() < cached.refresh_at:
                observe.event("vending_hit")  # another caller's AssumeRole answered
                return cached
            observe.event("vending_miss")
            fresh = self._assume(location, *where, permission)
            with self._lock:
                self._cache[key] = fresh
            return fresh

    def _assume(self, location: str, bucket: str, prefix: str, permission: str) -> _Vended:
        settings = self._settings
        kwargs: dict[str, Any] = {
            "RoleArn": settings[f"{PREFIX}aws_role_arn"],
            "RoleSessionName": settings[f"{PREFIX}aws_role_session_name"][:64],
            "DurationSeconds": settings[f"{PREFIX}aws_duration_millis"] // 1000,
            "Policy": json.dumps(session_policy(bucket, prefix, permission)),
        }
        if settings[f"{PREFIX}aws_external_id"]:
            kwargs["ExternalId"] = settings[f"{PREFIX}aws_external_id"]
        started = time.perf_counter()
        try:
            credentials = self._sts_client().assume_role(**kwargs)["Credentials"]
        except Exception as error:
            observe.timing("sts_assume_role", time.perf_counter() - started, ok=False)
            raise _vending_error(error, location) from None
        observe.timing("sts_assume_role", time.perf_counter() - started, ok=True)
        expiration = credentials["Expiration"]
        expires_at = (
            expiration.timestamp()
            if isinstance(expiration, datetime)
            else self._clock() + kwargs["DurationSeconds"]
        )
        issued = self._clock()
        options = {
            ACCESS_KEY_OPTION: credentials["AccessKeyId"],
            SECRET_KEY_OPTION: credentials["SecretAccessKey"],
            SESSION_TOKEN_OPTION: credentials["SessionToken"],
            VENDED_CREDENTIALS_MARKER: str(int(expires_at * 1000)),
        }
        if settings[f"{PREFIX}aws_region"]:
            options[REGION_OPTION] = settings[f"{PREFIX}aws_region"]
        logger.info(
            "vended %s credentials for %s until %s",
            permission,
            location,
            datetime.fromtimestamp(expires_at).isoformat(timespec="seconds"),
        )
        return _Vended(options, expires_at, issued + (expires_at - issued) * 3 / 4)

    def _sts_client(self) -> STSClient:
        with self._lock:
            if self._sts is None:
                with requires_extra("aws"):  # only a vending namespace needs boto3
                    from .aws_sessions import aws_session

                settings = self._settings
                kwargs: dict[str, Any] = {}
                if settings[f"{PREFIX}aws_region"]:
                    kwargs["region_name"] = settings[f"{PREFIX}aws_region"]
                if settings[f"{PREFIX}aws_sts_endpoint"]:
                    kwargs["endpoint_url"] = settings[f"{PREFIX}aws_sts_endpoint"]
                if settings[f"{PREFIX}aws_access_key_id"]:
                    kwargs["aws_access_key_id"] = settings[f"{PREFIX}aws_access_key_id"]
                    kwargs["aws_secret_access_key"] = settings[f"{PREFIX}aws_secret_access_key"]
                    kwargs["aws_session_token"] = settings[f"{PREFIX}aws_session_token"]
                self._sts = aws_session().client("sts", **kwargs)
                # STS's answers (the vended credentials) are logged by botocore at DEBUG.
                guard_library_logs()
            return self._sts


def _vending_error(error: Exception, location: str) -> Exception:
    """STS's refusal as a namespace error that names the table, never a credential."""
    code = ""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        code = str(response.get("Error", {}).get("Code", ""))
    subject = f"Failed to vend credentials for table at {location}"
    if code in ("Throttling", "ThrottlingException", "RequestLimitExceeded"):
        return ThrottlingError(f"{subject}: STS throttled AssumeRole ({code})")
    if type(error).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        return InternalError(f"{subject}: the vendor has no AWS credentials of its own")
    if not code:
        return ServiceUnavailableError(f"{subject}: STS unreachable ({type(error).__name__})")
    return InternalError(f"{subject}: STS refused AssumeRole ({code})")
