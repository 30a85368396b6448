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
Hive namespace. The first session resolves the jars through Spark's own package resolution
into one Ivy cache per machine (515 MB, once); ``fetch_jars`` then writes down the jar
files it resolved, and every later session loads those files directly (``spark.jars``): no
Ivy resolution, no network, no resolution report in the output.

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

from ..rules.redaction import secret_name_pattern

__all__ = [
    "LANCE_SPARK_BUILDS",
    "LanceSparkBuild",
    "default_ivy_dir",
    "fetch_jars",
    "jars_fetched",
    "lance_spark_build",
    "sql_conf",
]

IVY_DIR_ENV = "LANCE_METASTORE_IVY_DIR"
# Spark hides the value of every setting whose name or value matches ``spark.redaction.regex``
# (UI, logs, event logs, ``SET``). Spark's own pattern misses header names such as X-Api-Key or
# Authorization and storage options such as azure_storage_account_key, so the settings carry
# the project's one secret rule (``lance_metastore.rules.redaction``) instead.
REDACTION_REGEX = secret_name_pattern()

# lance-spark's classes since the connector moved to the org.lance group (0.1 and later).
ORG_LANCE_CATALOG = "org.lance.spark.LanceNamespaceSparkCatalog"
ORG_LANCE_EXTENSIONS = "org.lance.spark.extensions.LanceSparkSessionExtensions"
# An empty placeholder jar some Guava versions depend on; Ivy cannot fetch it.
IVY_UNFETCHABLE = ("com.google.guava:listenablefuture",)


@dataclass(frozen=True)
class LanceSparkBuild:
    """One lance-spark artifact and the class names it ships."""

    spark: str  # the Spark minor version it is built for, "3.5"
    coordinates: str  # Maven group:artifact:version; Spark resolves its dependencies
    catalog_class: str = ORG_LANCE_CATALOG
    extensions: str | None = ORG_LANCE_EXTENSIONS  # its SQL parser (MERGE, OPTIMIZE, ...)
    excludes: tuple[str, ...] = IVY_UNFETCHABLE

    @property
    def version(self) -> str:
        return self.coordinates.rsplit(":", 1)[1]


# The builds this project tests, by Spark minor version: the newest lance-spark that Maven
# Central serves to its machines. No org.lance build for Spark 4.x (or Scala 2.13) is served
# here, so Spark 3.5 is the SQL runtime and the Python data source serves Spark 4; a user on
# another Spark names a build with ``sql_conf(..., packages=...)``.
LANCE_SPARK_BUILDS: dict[str, LanceSparkBuild] = {
    "3.5": LanceSparkBuild(spark="3.5", coordinates="org.lance:lance-spark-3.5_2.12:0.4.0"),
}


def default_ivy_dir() -> Path:
    """The per-machine Ivy cache for lance-spark's jars (``$LANCE_METASTORE_IVY_DIR``, else
    ``$XDG_CACHE_HOME/lance-metastore/ivy``, else ``~/.cache/lance-metastore/ivy``)."""
    configured = os.environ.get(IVY_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "lance-metastore" / "ivy"


def lance_spark_build(
    spark_version: str | None = None, packages: str | None = None
) -> LanceSparkBuild:
    """The lance-spark build for ``spark_version`` (default: the installed pyspark's), or the
    build named by ``packages`` (Maven coordinates, any Spark: untested by this project)."""
    if packages is not None:
        if packages.count(":") != 2 or not all(packages.split(":")):
            raise InvalidInputError(
                f"lance-spark build {packages!r} must be Maven coordinates group:artifact:version"
            )
        return LanceSparkBuild(spark=spark_version or "", coordinates=packages)
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
            f"{_supported()}. Run the SQL session on one of those (scripts/setup.sh "
            "makes .venv-sql with pyspark 3.5), name another build with packages=, or use "
            "the Python data source (lance_metastore.spark.register) on Spark 4"
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
    packages: str | None = None,
    ivy_dir: str | os.PathLike[str] | None = None,
) -> dict[str, str]:
    """Spark settings (a dict of strings) for lance-spark's catalog ``catalog`` on ``uri``.

    ``uri``: the REST server (``http://`` or ``https://``). ``token``: the server's bearer
    token, sent as ``Authorization: Bearer <token>`` on every request; ``headers``: more
    request headers. ``storage_options``: options Lance's JVM writer and reader need to reach
    the tables' storage (e.g. ``aws_endpoint``, ``aws_region``, keys) when the server's
    namespace does not hand them out. ``spark_version``: the Spark the settings are for
    (default: the installed pyspark). ``packages``: another lance-spark build's Maven
    coordinates (untested here; its classes must be org.lance's). ``ivy_dir``: where Spark
    caches the jars (default ``default_ivy_dir()``). Apply them before the session starts.
    """
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidInputError(f"REST server URI {uri!r} must be an http:// or https:// URL")
    if not catalog or not catalog.replace("_", "").isalnum():
        raise InvalidInputError(f"Spark catalog name {catalog!r} must be letters, digits or _")
    build = lance_spark_build(spark_version, packages)
    cache = Path(ivy_dir) if ivy_dir else default_ivy_dir()
    prefix = f"spark.sql.catalog.{catalog}"
    conf = _jar_settings(build, cache)
    conf.update(
        {
            prefix: build.catalog_class,
            f"{prefix}.impl": "rest",
            f"{prefix}.uri": uri.rstrip("/"),
            "spark.redaction.regex": REDACTION_REGEX,
        }
    )
    if build.extensions:
        conf["spark.sql.extensions"] = build.extensions
    all_headers = dict(headers or {})
    if token is not None:
        if not token or any(c in token for c in "\r\n"):
            raise InvalidInputError("The REST server's bearer token must be one non-empty line")
        all_headers["Authorization"] = f"Bearer {token}"
    for name, value in all_headers.items():
        conf[f"{prefix}.headers.{name}"] = value
    for key, value in (storage_options or {}).items():
        conf[f"{prefix}.{key}"] = str(value)
    return conf


def _supported() -> str:
    return ", ".join(f"{minor}.x" for minor in sorted(LANCE_SPARK_BUILDS))


def _jar_list(build: LanceSparkBuild, ivy_dir: Path) -> Path:
    """The file in which ``fetch_jars`` writes down the jars the build resolved to."""
    return ivy_dir / "lance-metastore" / (build.coordinates.replace(":", "_") + ".jars")


def _cached_jars(build: LanceSparkBuild, ivy_dir: Path) -> list[str] | None:
    """The build's jar files when ``fetch_jars`` resolved them and all are still there."""
    listing = _jar_list(build, ivy_dir)
    if not listing.is_file():
        return None
    jars = [line for line in listing.read_text().splitlines() if line]
    if not jars or not all(Path(jar).is_file() for jar in jars):
        return None
    return jars


def _jar_settings(build: LanceSparkBuild, ivy_dir: Path) -> dict[str, str]:
    """Load the cached jar files directly, or else have Spark resolve the build."""
    jars = _cached_jars(build, ivy_dir)
    if jars is not None:
        return {"spark.jars": ",".join(jars)}
    conf = {"spark.jars.packages": build.coordinates, "spark.jars.ivy": str(ivy_dir)}
    if build.excludes:
        conf["spark.jars.excludes"] = ",".join(build.excludes)
    return conf


def jars_fetched(
    spark_version: str | None = None,
    ivy_dir: str | os.PathLike[str] | None = None,
    packages: str | None = None,
) -> bool:
    """Whether the Ivy cache holds every jar of the lance-spark build (sessions start offline)."""
    build = lance_spark_build(spark_version, packages)
    return _cached_jars(build, Path(ivy_dir) if ivy_dir else default_ivy_dir()) is not None


def fetch_jars(
    ivy_dir: str | os.PathLike[str] | None = None, packages: str | None = None
) -> list[str]:
    """Resolve lance-spark's jars into the Ivy cache (Spark's own package resolution, in a
    local session started and stopped here) and write down the files; the list of jar files.
    Does nothing but read that list when it is there."""
    build = lance_spark_build(packages=packages)
    cache = Path(ivy_dir) if ivy_dir else default_ivy_dir()
    jars = _cached_jars(build, cache)
    if jars is not None:
        return jars
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[1]").appName("lance-spark-fetch")
    builder = builder.config("spark.ui.enabled", "false")
    builder = builder.config("spark.driver.host", "127.0.0.1")
    builder = builder.config("spark.driver.bindAddress", "127.0.0.1")
    for key, value in _jar_settings(build, cache).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        # SparkSubmit puts the files it resolved into spark.jars (file: URLs).
        resolved = spark.sparkContext.getConf().get("spark.jars", "")
    finally:
        spark.stop()
    jars = [
        entry.removeprefix("file://").removeprefix("file:")
        for entry in resolved.split(",")
        if entry.strip()
    ]
    if not jars:
        raise UnsupportedOperationError(
            f"Spark resolved no jars for lance-spark build {build.coordinates}"
        )
    listing = _jar_list(build, cache)
    listing.parent.mkdir(parents=True, exist_ok=True)
    staging = listing.with_suffix(".tmp")
    staging.write_text("\n".join(jars) + "\n")
    staging.replace(listing)
    return jars
