"""Spark settings that put lance-spark's SQL catalog on a Lance Namespace REST server.

::

    from pyspark.sql import SparkSession
    from lance_metastore.spark import sql_conf

    builder = SparkSession.builder.master("local[2]")
    for key, value in sql_conf("http://127.0.0.1:2333", token="...").items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sql("SELECT * FROM lance.sales.orders WHERE amount > 10").show()

lance-spark is the Lance project's own Spark connector (JVM jars on Maven Central). Spark has no
Python catalog plugin, so SQL on our catalogs goes through it: its catalog speaks the REST spec
to ``lance-metastore serve`` (or ``lance_metastore.rest.RestServer``), which serves a Glue or
Hive namespace. The jars are fetched by Spark itself (``spark.jars.packages``) into one Ivy
cache per machine, so the download (about 270 MB) happens once.

A lance-spark build targets one Spark minor version and one Scala version; ``sql_conf`` picks
the build for the Spark it runs under (or the one named) and says so plainly when none exists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from lance_namespace.errors import InvalidInputError, UnsupportedOperationError

__all__ = [
    "LANCE_SPARK_BUILDS",
    "LanceSparkBuild",
    "default_ivy_dir",
    "lance_spark_build",
    "sql_conf",
]

IVY_DIR_ENV = "LANCE_METASTORE_IVY_DIR"
# Spark hides the values of matching settings in its UI, logs and event logs; its default
# pattern misses the Authorization header, which carries the server's token.
REDACTION_REGEX = r"(?i)secret|password|token|access[.]?key|authorization"


@dataclass(frozen=True)
class LanceSparkBuild:
    """One lance-spark artifact and the class names it ships."""

    spark: str  # the Spark minor version it is built for, "3.5"
    coordinates: str  # Maven group:artifact:version of the bundle (all non-Spark deps inside)
    catalog_class: str
    extensions: str | None  # session extensions class, for builds that ship one
    # The bundle holds these modules already; its POM still names them, so Spark would fetch
    # a second copy of each (and listenablefuture is an empty placeholder jar).
    bundled: tuple[str, ...] = ()

    @property
    def version(self) -> str:
        return self.coordinates.rsplit(":", 1)[1]


# The builds that Maven Central serves to this project's machines, by Spark minor version.
# Newer lance-spark releases (group org.lance, builds for Spark 4.0-4.2, session extensions,
# VERSION AS OF, ALTER TABLE) are published upstream but are not served here; add them to this
# table when they are, and the Spark 4 session of the Python data source can serve SQL too.
LANCE_SPARK_BUILDS: dict[str, LanceSparkBuild] = {
    "3.5": LanceSparkBuild(
        spark="3.5",
        coordinates="com.lancedb:lance-spark-bundle-3.5_2.12:0.0.14",
        catalog_class="com.lancedb.lance.spark.LanceNamespaceSparkCatalog",
        extensions=None,
        bundled=(
            "com.lancedb:lance-core",
            "com.lancedb:lance-namespace-core",
            "com.lancedb:lance-namespace-apache-client",
            "com.google.guava:listenablefuture",
        ),
    ),
}


def default_ivy_dir() -> Path:
    """The per-machine Ivy cache for lance-spark's jars (``$LANCE_METASTORE_IVY_DIR``, else
    ``$XDG_CACHE_HOME/lance-metastore/ivy``, else ``~/.cache/lance-metastore/ivy``)."""
    configured = os.environ.get(IVY_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "lance-metastore" / "ivy"


def lance_spark_build(spark_version: str | None = None) -> LanceSparkBuild:
    """The lance-spark build for ``spark_version`` (default: the installed pyspark's)."""
    if spark_version is None:
        try:
            import pyspark
        except ImportError:
            raise UnsupportedOperationError(
                "Spark SQL through lance-spark needs pyspark; install pyspark "
                f"{_supported()} or pass spark_version"
            ) from None
        spark_version = pyspark.__version__
    minor = ".".join(str(spark_version).split(".")[:2])
    build = LANCE_SPARK_BUILDS.get(minor)
    if build is None:
        raise UnsupportedOperationError(
            f"No lance-spark build for Spark {spark_version}: builds exist for Spark "
            f"{_supported()}. Run the SQL session on one of those (scripts/setup.sh --sql "
            "makes .venv-sql with pyspark 3.5); the Python data source "
            "(lance_metastore.spark.register) serves Spark 4"
        )
    return build


def sql_conf(
    uri: str,
    catalog: str = "lance",
    *,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    storage_options: Mapping[str, str] | None = None,
    spark_version: str | None = None,
    ivy_dir: str | os.PathLike[str] | None = None,
) -> dict[str, str]:
    """Spark settings (a dict of strings) for lance-spark's catalog ``catalog`` on ``uri``.

    ``uri``: the REST server (``http://`` or ``https://``). ``token``: the server's bearer
    token, sent as ``Authorization: Bearer <token>`` on every request; ``headers``: more
    request headers. ``storage_options``: options Lance's JVM writer and reader need to reach
    the tables' storage (e.g. ``aws_endpoint``, ``aws_region``) when the server's namespace
    does not hand them out. ``spark_version``: the Spark the settings are for (default: the
    installed pyspark). ``ivy_dir``: where Spark caches the jars (default
    ``default_ivy_dir()``). Settings must be applied before the session starts.
    """
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidInputError(f"REST server URI {uri!r} must be an http:// or https:// URL")
    if not catalog or not catalog.replace("_", "").isalnum():
        raise InvalidInputError(f"Spark catalog name {catalog!r} must be letters, digits or _")
    build = lance_spark_build(spark_version)
    prefix = f"spark.sql.catalog.{catalog}"
    conf = {
        "spark.jars.packages": build.coordinates,
        "spark.jars.ivy": str(Path(ivy_dir) if ivy_dir else default_ivy_dir()),
        prefix: build.catalog_class,
        f"{prefix}.impl": "rest",
        f"{prefix}.uri": uri.rstrip("/"),
    }
    if build.bundled:
        conf["spark.jars.excludes"] = ",".join(build.bundled)
    if build.extensions:
        conf["spark.sql.extensions"] = build.extensions
    all_headers = dict(headers or {})
    if token is not None:
        if not token or any(c in token for c in "\r\n"):
            raise InvalidInputError("The REST server's bearer token must be one non-empty line")
        all_headers["Authorization"] = f"Bearer {token}"
    for name, value in all_headers.items():
        conf[f"{prefix}.headers.{name}"] = value
    if all_headers or storage_options:
        conf["spark.redaction.regex"] = REDACTION_REGEX
    for key, value in (storage_options or {}).items():
        conf[f"{prefix}.{key}"] = str(value)
    return conf


def _supported() -> str:
    return ", ".join(f"{minor}.x" for minor in sorted(LANCE_SPARK_BUILDS))


def jars_fetched(spark_version: str | None = None, ivy_dir: str | None = None) -> bool:
    """Whether the Ivy cache already holds the lance-spark bundle for this Spark."""
    build = lance_spark_build(spark_version)
    group, artifact, version = build.coordinates.split(":")
    jar = Path(ivy_dir or default_ivy_dir()) / "jars" / f"{group}_{artifact}-{version}.jar"
    return jar.is_file()


def fetch_jars(ivy_dir: str | None = None) -> None:
    """Fetch lance-spark's jars into the Ivy cache by starting (and stopping) a local Spark
    session with them, as a first SQL session would; does nothing when they are there."""
    if jars_fetched(ivy_dir=ivy_dir):
        return
    from pyspark.sql import SparkSession

    conf = sql_conf("http://127.0.0.1:2333", ivy_dir=ivy_dir)
    builder = SparkSession.builder.master("local[1]").appName("lance-spark-fetch")
    builder = builder.config("spark.ui.enabled", "false")
    builder = builder.config("spark.driver.host", "127.0.0.1")
    builder = builder.config("spark.driver.bindAddress", "127.0.0.1")
    for key in ("spark.jars.packages", "spark.jars.ivy", "spark.jars.excludes"):
        if key in conf:
            builder = builder.config(key, conf[key])
    builder.getOrCreate().stop()
