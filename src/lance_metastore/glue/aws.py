"""AWS clients for the Glue backend: credentials, assumed roles that renew, retries.

Credentials, in order: assume ``assume_role_arn`` (its source credentials being the static
keys or the default chain), else static keys (with ``session_token``), else ``profile_name``,
else boto3's default chain. Assumed-role credentials are botocore ``RefreshableCredentials``:
they are renewed through STS before they expire, in whichever thread needs them first.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from ..rules.aws_sessions import aws_session
from ..rules.config import Settings
from ..rules.errors import guard_library_logs, register_secrets
from ..rules.extras import requires_extra

with requires_extra("aws"):
    import boto3
    from botocore.config import Config
    from botocore.credentials import RefreshableCredentials
    from botocore.utils import parse_timestamp

if TYPE_CHECKING:  # the stub packages of boto3-stubs[glue,sts] (dev only)
    from mypy_boto3_glue import GlueClient
    from mypy_boto3_sts import STSClient

logger = logging.getLogger("lance_metastore.glue")

DEFAULT_SESSION_NAME = "lance-metastore"
# AssumeRole's DurationSeconds range (botocore refuses anything shorter before sending).
STS_MIN_DURATION, STS_MAX_DURATION = 900, 43200


def _source_session(settings: Settings) -> boto3.Session:
    """The session whose credentials sign Glue calls, or the STS call that assumes a role."""
    kwargs: dict[str, Any] = {}
    if settings["access_key_id"]:
        kwargs["aws_access_key_id"] = settings["access_key_id"]
        kwargs["aws_secret_access_key"] = settings["secret_access_key"]
        if settings["session_token"]:
            kwargs["aws_session_token"] = settings["session_token"]
    elif settings["profile_name"]:
        kwargs["profile_name"] = settings["profile_name"]
    if settings["region"]:
        kwargs["region_name"] = settings["region"]
    return aws_session(**kwargs)


def _client_config(settings: Settings) -> Config:
    return Config(
        retries={"max_attempts": settings["max_retries"], "mode": settings["retry_mode"]},
        connect_timeout=settings["connect_timeout_sec"],
        read_timeout=settings["read_timeout_sec"],
        max_pool_connections=32,
        user_agent_extra="lance-metastore",
    )


def _sts_client(settings: Settings) -> STSClient:
    region = settings["assume_role_region"] or settings["region"]
    kwargs: dict[str, Any] = {"config": _client_config(settings)}
    if region:
        kwargs["region_name"] = region
    endpoint = sts_endpoint(settings)
    if endpoint:
        kwargs["endpoint_url"] = endpoint
    return _guarded(_source_session(settings).client("sts", **kwargs))


_Client = TypeVar("_Client")


def _guarded(client: _Client) -> _Client:
    """``client``, once the loggers of the modules it imported scrub registered secrets."""
    guard_library_logs()
    return client


def sts_endpoint(settings: Settings) -> str | None:
    """``sts_endpoint``, else a custom Glue ``endpoint`` (compatible servers serve both)."""
    endpoint: str | None = settings["sts_endpoint"] or settings["endpoint"]
    return endpoint


def assumed_role_credentials(settings: Settings) -> RefreshableCredentials:
    """Credentials of ``assume_role_arn`` that STS renews ahead of their expiry."""
    sts = _sts_client(settings)
    duration = int(settings["assume_role_timeout_sec"])
    session_name = settings["assume_role_session_name"] or _default_session_name()

    def fetch() -> dict[str, str]:
        kwargs: dict[str, Any] = {
            "RoleArn": settings["assume_role_arn"],
            "RoleSessionName": session_name,
            "DurationSeconds": min(max(duration, STS_MIN_DURATION), STS_MAX_DURATION),
        }
        if settings["assume_role_external_id"]:
            kwargs["ExternalId"] = settings["assume_role_external_id"]
        credentials = sts.assume_role(**kwargs)["Credentials"]
        register_secrets(
            [
                credentials["AccessKeyId"],
                credentials["SecretAccessKey"],
                credentials["SessionToken"],
            ]
        )
        expiration: datetime | str = credentials["Expiration"]
        if not isinstance(expiration, datetime):
            expiration = parse_timestamp(expiration)
        # STS grants at least 15 minutes; a shorter timeout still renews when it runs out.
        renew_at = datetime.now(timezone.utc) + timedelta(seconds=duration)
        expiry_time = min(expiration.astimezone(timezone.utc), renew_at).isoformat()
        logger.info(
            "assumed role %s (session %s) until %s",
            settings["assume_role_arn"],
            session_name,
            expiry_time,
        )
        return {
            "access_key": credentials["AccessKeyId"],
            "secret_key": credentials["SecretAccessKey"],
            "token": credentials["SessionToken"],
            "expiry_time": expiry_time,
        }

    credentials = RefreshableCredentials.create_from_metadata(
        metadata=fetch(), refresh_using=fetch, method="sts-assume-role"
    )
    # botocore renews 15 minutes (advisory) / 10 minutes (mandatory) before expiry; short
    # sessions need proportionally shorter margins or they would renew on every call.
    # (Private attributes that botocore's stubs do not declare.)
    advisory, mandatory = min(15 * 60, duration // 4), min(10 * 60, duration // 8)
    credentials._advisory_refresh_timeout = advisory  # type: ignore[attr-defined]
    credentials._mandatory_refresh_timeout = mandatory  # type: ignore[attr-defined]
    return credentials


def _default_session_name() -> str:
    host = socket.gethostname().split(".")[0][:32] or "host"
    return f"{DEFAULT_SESSION_NAME}-{host}-{os.getpid()}"[:64]


def glue_session(settings: Settings) -> boto3.Session:
    """The session that signs Glue calls; clients built from one share its credentials (an
    assumed role is assumed once per session, not once per client)."""
    if not settings["assume_role_arn"]:
        return _source_session(settings)
    return aws_session(assumed_role_credentials(settings), region_name=settings["region"])


def glue_client(
    settings: Settings, session: boto3.Session | None = None, attempts: int | None = None
) -> GlueClient:
    """A Glue client; ``attempts`` overrides ``max_retries`` (1: a single try, for probes
    whose first answer decides)."""
    config = _client_config(settings)
    if attempts is not None:
        config = config.merge(Config(retries={"total_max_attempts": attempts, "mode": "standard"}))
    kwargs: dict[str, Any] = {"config": config}
    if settings["region"]:
        kwargs["region_name"] = settings["region"]
    if settings["endpoint"]:
        kwargs["endpoint_url"] = settings["endpoint"]
    return _guarded((session or glue_session(settings)).client("glue", **kwargs))


def caller_account(settings: Settings) -> str:
    """The account id of the identity that signs Glue calls (the default root catalog)."""
    role = settings["assume_role_arn"] or ""
    match = re.fullmatch(r"arn:[^:]+:iam::(\d{12}):role/.+", role)
    if match:
        return match.group(1)  # the role's own account: no second AssumeRole needed
    sts = _sts_client(settings) if not settings["assume_role_arn"] else None
    if sts is None:
        session = glue_session(settings)
        kwargs: dict[str, Any] = {"config": _client_config(settings)}
        region = settings["assume_role_region"] or settings["region"]
        if region:
            kwargs["region_name"] = region
        endpoint = sts_endpoint(settings)
        if endpoint:
            kwargs["endpoint_url"] = endpoint
        sts = _guarded(session.client("sts", **kwargs))
    return sts.get_caller_identity()["Account"]
