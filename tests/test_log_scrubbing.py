"""No secret in the AWS SDK's DEBUG output, however an application turns that output on.

The scrubbing is a filter on our loggers and the AWS SDK's (``errors.guard_library_logs``),
not a process-wide record factory: these tests turn botocore's DEBUG logging on the two ways
applications do (``boto3.set_stream_logger('')`` and a plain ``logging.basicConfig`` root
handler), run Glue and STS calls with real-looking credentials against the moto server, and
read what the handlers wrote.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import boto3
import pytest
from support.harness import GlueHarness

from lance_metastore import GlueNamespace

# Shaped like real AWS credentials (moto accepts any); each distinctive, so a leak shows.
CREDENTIALS = {
    "access_key_id": "AKIAQ3EGRUSCRUBTEST7",
    "secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYscrubTEST1",
    "session_token": "IQoJb3JpZ2luX2VjEJr//////////scrubTESTtoken",
    "assume_role_external_id": "scrub-test-external-id-4242",
}
ROLE_ARN = "arn:aws:iam::123456789012:role/scrub-test"


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Leave the handlers and levels of the root logger and those the tests set as they were."""
    root = logging.getLogger()
    names = ("", "botocore", "boto3", "botocore.endpoint", "botocore.auth")
    kept = {name: logging.getLogger(name) for name in names}
    saved = {name: (lg.handlers[:], lg.level) for name, lg in kept.items()}
    try:
        yield
    finally:
        for name, lg in kept.items():
            handlers, level = saved[name]
            lg.handlers[:] = handlers
            lg.setLevel(level)
        root.setLevel(saved[""][1])


def _glue_calls(glue: GlueHarness) -> list[str]:
    """Calls that sign Glue requests and assume a role through STS (its answer carries fresh
    credentials), with the secrets configured; the assumed role's secret and token."""
    ns = GlueNamespace(
        **{
            **glue.properties(),
            **CREDENTIALS,
            "assume_role_arn": ROLE_ARN,
            "catalog_id": glue.emulator.account_id,
            "max_retries": "1",
        }
    )
    ns.create_namespace({"id": ["db"]})
    ns.declare_table({"id": ["db", "t"]})
    ns.describe_table({"id": ["db", "t"]})
    ns.list_tables({"id": ["db"]})
    assumed = ns._aws_session().get_credentials().get_frozen_credentials()
    ns.close()
    return [assumed.secret_key, assumed.token]


def _assert_clean(output: str, assumed: list[str], answers: bool = True) -> None:
    """No configured secret in ``output``, nor the assumed role's (whose STS answer it holds
    when ``answers``: botocore.parsers' records reach its handler)."""
    assert "botocore" in output and "Authorization" in output, "botocore logged nothing"
    assert not answers or "<AssumeRoleResponse" in output, "botocore logged no STS answer"
    leaks = [name for name, value in CREDENTIALS.items() if value in output]
    assert leaks == [], f"secrets in botocore's DEBUG output: {leaks}"
    assert not [value for value in assumed if value in output], "the assumed role's secret"


@pytest.mark.usefixtures("root_logging")
def test_basic_config_root_handler_gets_no_secret(glue: GlueHarness):
    stream = io.StringIO()
    logging.basicConfig(
        stream=stream, level=logging.DEBUG, force=True, format="%(name)s %(message)s"
    )
    assumed = _glue_calls(glue)
    _assert_clean(stream.getvalue(), assumed)


@pytest.mark.usefixtures("root_logging")
def test_boto3_stream_logger_gets_no_secret(glue: GlueHarness, capsys):
    for handler in logging.getLogger().handlers[:]:  # only boto3's handler writes
        logging.getLogger().removeHandler(handler)
    boto3.set_stream_logger("")  # a StreamHandler on the root logger, DEBUG
    assumed = _glue_calls(glue)
    _assert_clean(capsys.readouterr().err, assumed)


@pytest.mark.usefixtures("root_logging")
def test_handler_on_a_botocore_child_logger_gets_no_secret(glue: GlueHarness, capsys):
    """A handler set on one of botocore's own module loggers, ahead of propagation."""
    boto3.set_stream_logger("botocore.endpoint")
    boto3.set_stream_logger("botocore.auth")
    assumed = _glue_calls(glue)
    _assert_clean(capsys.readouterr().err, assumed, answers=False)


def test_other_libraries_logging_is_untouched():
    """The scrubbing leaves the process's record factory and unrelated loggers alone."""
    assert logging.getLogRecordFactory() is logging.LogRecord
    assert logging.getLogger("some.application").filters == []
