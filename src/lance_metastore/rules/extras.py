"""The optional parts of the package and the one error for a part that is not installed.

The core (``pip install lance-metastore``) carries only what every backend needs; each backend,
the REST server, Spark and Kerberos come with an extra of the same name (pyproject.toml's
``[project.optional-dependencies]``). Every import of an optional dependency sits inside
:func:`requires_extra`, so using a part without its extra answers one line naming the extra::

    with requires_extra("glue"):
        import boto3
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# The top-level modules each extra installs (pyproject.toml names their distributions).
EXTRA_MODULES: dict[str, frozenset[str]] = {
    "aws": frozenset({"boto3", "botocore"}),
    "glue": frozenset({"boto3", "botocore"}),
    "hive": frozenset({"pymetastore", "thrift"}),
    "server": frozenset({"starlette", "uvicorn", "h11", "jwt"}),
    "spark": frozenset({"pyspark", "pandas"}),
    "sql": frozenset({"pyspark"}),
    "kerberos": frozenset({"puresasl", "kerberos", "gssapi"}),
}

# What each extra serves, for the message.
EXTRA_PURPOSE: dict[str, str] = {
    "aws": "S3 roots and AWS credentials",
    "glue": "the AWS Glue backend (glue, GlueNamespace)",
    "hive": "the Hive Metastore backends (hive2, hive3, Hive2Namespace, Hive3Namespace)",
    "server": "the REST server (lance-metastore serve, lance_metastore.rest)",
    "spark": "PySpark and the local Hive Metastore (lance_metastore.spark, lance-metastore hms)",
    "sql": "Spark SQL through lance-spark (Spark 3.5, in its own environment: .venv-sql)",
    "kerberos": "Kerberos to secured Hive Metastores (client.auth=kerberos)",
}


def install_hint(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'lance-metastore[{extra}]'"


class MissingExtraError(ImportError):
    """An optional part of lance-metastore was used without its extra installed."""

    def __init__(self, extra: str, missing: str) -> None:
        super().__init__(
            f"missing the '{extra}' extra for {EXTRA_PURPOSE[extra]} ({missing} is not "
            f"installed): {install_hint(extra)}",
            name=missing,
        )
        self.extra = extra


@contextmanager
def requires_extra(extra: str) -> Iterator[None]:
    """Turn a missing module of ``extra`` into :class:`MissingExtraError`.

    Only the extra's own modules are translated: any other ImportError is a real fault and
    passes through unchanged.
    """
    try:
        yield
    except ModuleNotFoundError as error:
        top = (error.name or "").partition(".")[0]
        if top not in EXTRA_MODULES[extra]:
            raise
        raise MissingExtraError(extra, top) from None
