"""The Hive Metastore releases a local metastore can run, and fetching them with Maven.

Hive Metastore 2.3 ships in the pyspark wheel and needs no download. The standalone metastore
of Hive 3.1 and 4.x, with its dependencies, comes from Maven Central: :func:`fetch_release`
writes a small pom naming it and runs ``mvn dependency:copy-dependencies`` once, into the user
cache (``$XDG_CACHE_HOME/lance-metastore/hms/<version>/lib``, or ``$LANCE_METASTORE_HMS_CACHE``).
A finished download is marked complete, so an interrupted one is never taken for a release.

Release notes that shaped the choices below:

- Hive 4.1 and 4.2 publish no ``hive-standalone-metastore-server`` to Maven Central (only its
  common and client parts), and 4.2 targets Java 21: 4.0.1 is the newest 4.x that runs here.
- The Hadoop dependencies of the 4.x server are optional in its pom, so they are named here.
- ``jdk.tools`` (pulled by old Hadoop poms, a JDK 8 ``tools.jar``) does not exist on Java 9+.
- Janino runs the short boot script (see :mod:`lance_metastore.hive.local`), as it does for 2.3
  from the pyspark wheel.
- S3 (``s3://``, ``s3a://`` locations): a metastore checks and creates a table's directory
  through Hadoop's FileSystem, so it needs Hadoop's S3A file system (``hadoop-aws``, with the
  AWS SDK it names) of the same version as its ``hadoop-common``. The 3.1.3 standalone pom
  builds against Hadoop 3.1.0 but leaves ``hadoop-common`` optional (without it Maven picks
  2.6.0 through a metrics reporter, whose S3A has no endpoint or path-style settings), so
  :meth:`HiveRelease.with_s3` resolves the release again with ``hadoop-common`` and
  ``hadoop-aws`` 3.1.0 in one pom (one version of each jar), cached apart (``3.1.3+s3``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from xml.sax.saxutils import escape

__all__ = [
    "DEFAULT_VERSION",
    "RELEASES",
    "HiveRelease",
    "MavenNotFoundError",
    "ReleaseFetchError",
    "cache_dir",
    "fetch_release",
    "release",
]

DEFAULT_VERSION = "2.3"
CACHE_ENV = "LANCE_METASTORE_HMS_CACHE"
_COMPLETE_MARKER = ".complete"
_JANINO = "org.codehaus.janino:janino:3.1.12"
_NEVER_NEEDED = ("jdk.tools:jdk.tools",)


class ReleaseFetchError(RuntimeError):
    """A Hive Metastore release could not be fetched (offline, or an artifact is missing)."""


class MavenNotFoundError(ReleaseFetchError):
    """No ``mvn`` on PATH to fetch a release with."""


@dataclass(frozen=True)
class HiveRelease:
    """One Hive Metastore release a local metastore can run.

    ``key`` is what users type (``--version 3.1``), ``version`` the exact release.
    ``artifacts`` (``group:artifact:version``) are fetched from Maven Central with their
    dependencies; an empty tuple means the release ships with pyspark. ``lone_jars`` are
    fetched without theirs (a jar needed for a few classes, whose own dependencies are not).
    """

    key: str
    version: str
    artifacts: tuple[str, ...] = ()
    lone_jars: tuple[str, ...] = ()
    # group:artifact (``*`` for any) of dependencies the metastore never loads.
    exclusions: tuple[str, ...] = ()
    # Hadoop's S3A file system for this release (empty: S3 locations are not supported).
    s3_artifacts: tuple[str, ...] = ()
    # Names the cache directory of a variant of the release (``s3``), empty for the plain one.
    flavour: str = ""

    @property
    def supports_s3(self) -> bool:
        """Whether :meth:`with_s3` can give this release an S3 file system."""
        return bool(self.s3_artifacts) or self.flavour == "s3"

    def with_s3(self) -> HiveRelease:
        """This release with Hadoop's S3A file system, so tables may live on ``s3://``."""
        if self.flavour == "s3":
            return self
        if not self.s3_artifacts:
            supported = ", ".join(k for k, r in RELEASES.items() if r.s3_artifacts)
            raise ValueError(
                f"a local Hive Metastore {self.key} cannot hold s3:// locations here; "
                f"use version {supported}"
            )
        return replace(
            self, artifacts=(*self.artifacts, *self.s3_artifacts), s3_artifacts=(), flavour="s3"
        )

    @property
    def bundled(self) -> bool:
        """Whether it runs from the pyspark wheel's jars (no download)."""
        return not self.artifacts

    @property
    def standalone(self) -> bool:
        """Whether it is Hive's standalone metastore (3.0+: catalogs, ``metastore.*`` conf)."""
        return not self.bundled


RELEASES: dict[str, HiveRelease] = {
    "2.3": HiveRelease("2.3", "2.3"),
    "3.1": HiveRelease(
        "3.1",
        "3.1.3",
        ("org.apache.hive:hive-standalone-metastore:3.1.3",),
        # The Hadoop the 3.1.3 pom builds against (its hadoop.version), and its S3A, which
        # brings com.amazonaws:aws-java-sdk-bundle:1.11.271.
        s3_artifacts=(
            "org.apache.hadoop:hadoop-common:3.1.0",
            "org.apache.hadoop:hadoop-aws:3.1.0",
        ),
    ),
    "4": HiveRelease(
        "4",
        "4.0.1",
        (
            "org.apache.hive:hive-standalone-metastore-server:4.0.1",
            "org.apache.hadoop:hadoop-common:3.3.6",
            "org.apache.hadoop:hadoop-hdfs-client:3.3.6",
        ),
        # The server's file handling names HDFS's SnapshotException, which lives here.
        lone_jars=("org.apache.hadoop:hadoop-hdfs:3.3.6",),
        # A shaded copy of Hadoop's client API (hadoop-common has the classes), gRPC and the
        # Kotlin HTTP client of optional exporters: 32 MiB a metastore never loads.
        exclusions=(
            "org.apache.hadoop:hadoop-client-api",
            "io.grpc:*",
            "com.squareup.okhttp3:*",
            "org.jetbrains.kotlin:*",
        ),
    ),
}


def release(version: str) -> HiveRelease:
    """The release for a ``--version`` value: ``2.3``, ``3.1`` or ``4`` (``3``/``4.0`` too)."""
    aliases = {"2": "2.3", "3": "3.1", "3.1.3": "3.1", "4.0": "4", "4.0.1": "4"}
    key = aliases.get(str(version).strip(), str(version).strip())
    if key not in RELEASES:
        raise ValueError(
            f"unknown Hive Metastore version {version!r}; choose one of {', '.join(RELEASES)}"
        )
    return RELEASES[key]


def cache_dir() -> Path:
    """Where fetched releases live: ``$LANCE_METASTORE_HMS_CACHE`` or the user cache."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "lance-metastore" / "hms"


def release_dir(chosen: HiveRelease) -> Path:
    name = f"{chosen.version}+{chosen.flavour}" if chosen.flavour else chosen.version
    return cache_dir() / name


def cached_lib(chosen: HiveRelease) -> Path | None:
    """The jars directory of a completely fetched release, or None."""
    lib = release_dir(chosen) / "lib"
    return lib if (release_dir(chosen) / _COMPLETE_MARKER).is_file() else None


def fetch_release(
    chosen: HiveRelease,
    *,
    quiet: bool = True,
    offline: bool = False,
    maven_repository: Path | None = None,
) -> Path:
    """The directory holding every jar of ``chosen``, fetched with Maven on first use.

    Concurrent callers (several test sessions) wait for one download instead of racing.
    ``offline`` uses only Maven's local repository (``maven_repository``, default
    ``~/.m2/repository``), never the network.
    """
    if chosen.bundled:
        raise ValueError(f"Hive Metastore {chosen.key} ships with pyspark; nothing to fetch")
    found = cached_lib(chosen)
    if found is not None:
        return found
    target = release_dir(chosen)
    target.mkdir(parents=True, exist_ok=True)
    with _exclusive(target / ".fetch.lock"):
        found = cached_lib(chosen)
        if found is not None:
            return found
        mvn = shutil.which("mvn")
        if mvn is None:
            raise MavenNotFoundError(
                f"Hive Metastore {chosen.version} is fetched from Maven Central with Maven, "
                "and there is no `mvn` on PATH: install it (apt-get install maven) or run "
                "scripts/setup.sh"
            )
        with tempfile.TemporaryDirectory(dir=target, prefix="fetch-") as work:
            staging = Path(work) / "lib"
            pom = Path(work) / "pom.xml"
            pom.write_text(_pom(chosen))
            command = [
                mvn,
                "-B",
                *(["-q"] if quiet else []),
                *(["-o"] if offline else []),
                *([f"-Dmaven.repo.local={maven_repository}"] if maven_repository else []),
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}",
            ]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise ReleaseFetchError(_explain_failure(chosen, result.stdout + result.stderr))
            lib = target / "lib"
            if lib.exists():
                shutil.rmtree(lib)
            staging.rename(lib)
        (target / _COMPLETE_MARKER).write_text(chosen.version + "\n")
        return lib


def release_size(chosen: HiveRelease) -> int:
    """Bytes of the fetched jars (0 when not fetched)."""
    lib = cached_lib(chosen)
    return sum(p.stat().st_size for p in lib.iterdir()) if lib else 0


def _pom(chosen: HiveRelease) -> str:
    def exclusion(group: str, artifact: str) -> str:
        return (
            f"<exclusion><groupId>{escape(group)}</groupId>"
            f"<artifactId>{escape(artifact)}</artifactId></exclusion>"
        )

    never = "".join(exclusion(*item.split(":")) for item in (*_NEVER_NEEDED, *chosen.exclusions))
    dependencies = []
    wanted = [(c, never) for c in (*chosen.artifacts, _JANINO)]
    wanted += [(c, exclusion("*", "*")) for c in chosen.lone_jars]
    for coordinates, exclusions in wanted:
        group, artifact, version = coordinates.split(":")
        dependencies.append(
            f"    <dependency><groupId>{escape(group)}</groupId>"
            f"<artifactId>{escape(artifact)}</artifactId><version>{escape(version)}</version>"
            f"<exclusions>{exclusions}</exclusions></dependency>"
        )
    body = "\n".join(dependencies)
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>lance-metastore.local</groupId>\n"
        f"  <artifactId>hive-metastore-{escape(chosen.version)}</artifactId>\n"
        "  <version>1</version>\n  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{body}\n  </dependencies>\n</project>\n"
    )


_MISSING_ARTIFACT = re.compile(
    r"(?:Could not (?:find|resolve|transfer) artifact|Failure to find|"
    r"Could not resolve dependencies for project)\s+(\S+)"
)


def _explain_failure(chosen: HiveRelease, output: str) -> str:
    missing = _MISSING_ARTIFACT.search(output)
    what = missing.group(1) if missing else ", ".join(chosen.artifacts)
    offline = any(
        hint in output
        for hint in ("UnknownHost", "Could not transfer", "Connection refused", "offline mode")
    )
    reason = "Maven Central is unreachable (offline?)" if offline else "Maven failed"
    tail = "\n".join(line for line in output.splitlines() if "ERROR" in line)[-2000:]
    return (
        f"could not fetch Hive Metastore {chosen.version}: {reason}; missing artifact {what}. "
        f"Maven said:\n{tail or output[-2000:]}"
    )


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> int:
    """``python -m lance_metastore.hive.distributions [VERSION ...]``: fetch releases ahead of
    time (CI, scripts/setup.sh), so a test session never pays the download inside a test timeout.
    ``3.1+s3`` is 3.1 with Hadoop's S3A (the test suite's HMS 3.1); no argument fetches all."""
    import sys

    keys = (argv if argv is not None else sys.argv[1:]) or [
        *(key for key, chosen in RELEASES.items() if not chosen.bundled),
        *(f"{key}+s3" for key, chosen in RELEASES.items() if chosen.s3_artifacts),
    ]
    for key in keys:
        base, _, flavour = key.partition("+")
        try:
            chosen = release(base).with_s3() if flavour == "s3" else release(key)
        except ValueError as error:
            print(error, file=sys.stderr)
            return 2
        if chosen.bundled:
            print(f"Hive Metastore {chosen.version}: ships with pyspark, nothing to fetch")
            continue
        try:
            lib = fetch_release(chosen)
        except ReleaseFetchError as error:
            print(error, file=sys.stderr)
            return 1
        size = release_size(chosen) / 2**20
        print(f"Hive Metastore {key}: {lib} ({size:.0f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
