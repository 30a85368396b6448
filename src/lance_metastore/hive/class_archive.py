"""A local metastore's class-data archive: every start after the first loads its classes faster.

A Hive Metastore's JVM spends much of its start-up loading and verifying thousands of classes
from its jars. Java's class-data sharing (a dynamic archive, JDK 13 and later) keeps them ready
to map instead:

- a start without an archive records the classes it loaded into its data directory when the
  JVM exits (``-XX:ArchiveClassesAtExit``);
- :meth:`LocalMetastore.stop <lance_metastore.hive.local.LocalMetastore.stop>` moves that
  recording into the user cache once the JVM stopped cleanly (a killed JVM's half-written file
  is deleted), under a name derived from everything the archive depends on: the ``java``
  binary, the release's jars and the JVM options;
- every later start of the same release on this machine maps it (``-XX:SharedArchiveFile``).

The JVM checks an archive against its own build and class path before using it, and starts
without it when they differ (``-Xshare:auto``), so a stale or damaged archive costs only the
time it would have saved. ``benchmarks/bench_hms_start.py`` on 2 cores, HMS 2.3: 7.96 s of
the JVM's CPU and 6.35 s until the first Thrift call is answered without the archive, 6.12 s
and 4.51 s with it.

An archive records the class path's jars, and only jars can come first: the configuration
directory follows them on the class path.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from .distributions import cache_dir

logger = logging.getLogger("lance_metastore.hms_local")

# The recording of a start without an archive, in the metastore's data directory.
PENDING_NAME = "class-archive.jsa"
# When a new archive is kept, the others are deleted if no start mapped them for this long or
# if more than KEPT_ARCHIVES were mapped since (a release's jars, the JDK or the virtualenv
# changed: the names change with them). Each archive is 50 to 70 MB.
UNUSED_DAYS = 30
KEPT_ARCHIVES = 8


def archive_for(java: str, jars: Path, options: Sequence[str]) -> Path:
    """Where the archive of a JVM run as ``java options... -cp jars/*`` lives (it may not exist
    yet): in the user cache, named by a digest of the binary, every jar and the options."""
    digest = hashlib.sha256()
    binary = Path(java).resolve()
    for path in (binary, binary.parent.parent / "lib" / "server" / "libjvm.so"):
        if path.exists():
            found = path.stat()
            digest.update(f"{path}:{found.st_size}:{found.st_mtime_ns}\n".encode())
    for jar in sorted(jars.glob("*.jar")):
        found = jar.stat()
        digest.update(f"{jar.name}:{found.st_size}:{found.st_mtime_ns}\n".encode())
    for option in options:
        digest.update(f"{option}\n".encode())
    return cache_dir() / "class-archives" / f"{digest.hexdigest()[:32]}.jsa"


def archive_options(archive: Path, data_dir: Path) -> list[str]:
    """The JVM options that map ``archive``, or record one into ``data_dir`` when there is none."""
    if archive.is_file():
        with contextlib.suppress(OSError):
            os.utime(archive)  # in use: see UNUSED_DAYS
        return [f"-XX:SharedArchiveFile={archive}"]
    return [f"-XX:ArchiveClassesAtExit={data_dir / PENDING_NAME}"]


def keep_recording(data_dir: Path, archive: Path, stopped_cleanly: bool) -> None:
    """After the JVM exited: move its recording (if any) to ``archive`` when it stopped cleanly,
    else delete it. The move is atomic, so concurrent starts never map a partial file. A cache
    that cannot take it (read-only, full) only costs the next start its speed: it is logged,
    never raised, so a stop always succeeds."""
    recording = data_dir / PENDING_NAME
    if not recording.exists():
        return
    try:
        if stopped_cleanly and recording.stat().st_size > 0:
            _move_into_cache(recording, archive)
    except OSError as error:
        logger.warning("the JVM class-data archive was not kept in %s: %s", archive.parent, error)
    finally:
        recording.unlink(missing_ok=True)


def _move_into_cache(recording: Path, archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    # Copied next to the archive first: the data directory may be on another file system.
    handle, staging = tempfile.mkstemp(dir=archive.parent, suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as target, recording.open("rb") as source:
            while chunk := source.read(1 << 20):
                target.write(chunk)
        os.replace(staging, archive)
    finally:
        Path(staging).unlink(missing_ok=True)
    _delete_unused(archive.parent)


def _delete_unused(directory: Path) -> None:
    unused_since = time.time() - UNUSED_DAYS * 86400
    archives = []
    for archive in directory.glob("*.jsa"):
        with contextlib.suppress(OSError):
            archives.append((archive.stat().st_mtime, archive))
    archives.sort(reverse=True)  # the most recently mapped first
    for rank, (mapped, archive) in enumerate(archives):
        if rank >= KEPT_ARCHIVES or mapped < unused_since:
            # Pruning is best effort (the next kept archive tries again): a failure here must
            # not read as the new archive not being kept.
            with contextlib.suppress(OSError):
                archive.unlink(missing_ok=True)
