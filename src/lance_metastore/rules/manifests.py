"""Committed manifests on storage: a catalog commit finalizes its staging manifest.

Lance writes the manifest of a catalog-managed commit under a unique staging name
(``_versions/<n>.manifest-<uuid>``) and asks the catalog to record it (``create_table_version``).
Once the catalog's compare-and-set has made that version the latest, the manifest belongs at
the name Lance gives committed manifests (``_versions/<n>.manifest``). Lance cannot tell a
namespace-backed store that a manifest moved (its ``put_if_exists`` is unsupported), so if the
namespace leaves this to Lance, every open of the table copies the staging manifest again and
logs a warning, and commits racing on the table pay for it in every attempt. So the namespace
does it, as Lance's own ``DirectoryNamespace`` does: it copies the manifest once, right after
its compare-and-set, and from then on names the final path in every answer.

Every answer names a final manifest whenever it can: a reader that asks between the writer's
compare-and-set and its copy makes the copy itself (the version is committed once the catalog
records it, so either copy holds the same manifest). This matters beyond speed: the Lance inside
lance-spark 0.4.0 finalizes a staging name it is handed and then fails on ``put_if_exists``
("not supported for namespace-backed stores"), so a Spark job racing another writer failed.
Only when the copy cannot be made (storage refuses it) is the staging name answered.
A staging manifest is deleted only one commit later, once its final copy exists: a
reader handed the staging name just before the copy can still read it.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING

from lance_namespace import TableVersion

from . import versions
from .config import s3_flag, s3_option

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem, S3FileSystem

logger = logging.getLogger(__name__)

# Staging manifests whose final copy was seen, per namespace object (a staging name is unique
# to one commit, so a table dropped and made again at the same place cannot be mistaken).
_KNOWN_FINAL_LIMIT = 4096


def _s3_filesystem(options: Mapping[str, str]) -> S3FileSystem:
    """An S3 filesystem from Lance's storage options (object_store's key names)."""
    from pyarrow import fs

    endpoint = s3_option(options, "endpoint")
    scheme = None
    if endpoint and "://" in endpoint:
        scheme, endpoint = endpoint.split("://", 1)
    elif endpoint and s3_flag(options, "allow_http"):
        scheme = "http"
    return fs.S3FileSystem(
        access_key=s3_option(options, "access_key_id"),
        secret_key=s3_option(options, "secret_access_key"),
        session_token=s3_option(options, "session_token"),
        region=s3_option(options, "region"),
        endpoint_override=endpoint,
        scheme=scheme,  # type: ignore[arg-type]  # None is pyarrow's default; its stubs omit it
        force_virtual_addressing=s3_flag(options, "virtual_hosted_style"),
    )


class ManifestFiles:
    """Finds and writes a table's committed manifests on its storage."""

    def __init__(self, storage_options: Mapping[str, str]) -> None:
        self._options = dict(storage_options)
        self._filesystems: dict[str, FileSystem] = {}
        self._known_final: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    # -- paths ----------------------------------------------------------------------------------

    @staticmethod
    def _is_staging_of(location: str, record: TableVersion) -> bool:
        """Whether ``record`` names a staging manifest in this table's ``_versions/``."""
        prefix = f"{versions.store_path(location).strip('/')}/_versions/"
        path = record.manifest_path.lstrip("/")
        if not path.startswith(prefix):
            return False
        name = path[len(prefix) :]
        number, separator, _ = name.partition(".manifest-")
        return bool(separator) and number.isdigit() and "/" not in name

    def _filesystem(self, location: str) -> tuple[FileSystem, str]:
        """The filesystem holding ``location`` and the location's path within it."""
        from pyarrow import fs

        if "://" not in location or location.startswith("file://"):
            local = location.removeprefix("file://")
            return fs.LocalFileSystem(), os.path.abspath(local)
        scheme, rest = location.split("://", 1)
        bucket = rest.split("/", 1)[0]
        key = f"{scheme}://{bucket}"
        with self._lock:
            filesystem = self._filesystems.get(key)
        if filesystem is None:
            if scheme in ("s3", "s3a"):
                filesystem = _s3_filesystem(self._options)
            else:
                filesystem, _ = fs.FileSystem.from_uri(location)
            with self._lock:
                self._filesystems[key] = filesystem
        return filesystem, rest.rstrip("/")

    def _files(
        self, location: str, record: TableVersion, naming_scheme: str | None
    ) -> tuple[FileSystem, str, str]:
        """The filesystem, the staging manifest and the final manifest of ``record``."""
        filesystem, root = self._filesystem(location)
        directory = f"{root}/_versions"
        staging = f"{directory}/{record.manifest_path.rsplit('/', 1)[1]}"
        final = f"{directory}/{versions.manifest_name(record.version, naming_scheme)}"
        return filesystem, staging, final

    def _is_final(self, filesystem: FileSystem, final: str, record: TableVersion) -> bool:
        """Whether ``record``'s manifest has its final copy (known, or seen on storage)."""
        with self._lock:
            if record.manifest_path in self._known_final:
                return True
        if filesystem.get_file_info(final).type.name != "File":
            return False
        self._remember(record)
        return True

    @staticmethod
    def _final_record(
        location: str, record: TableVersion, naming_scheme: str | None
    ) -> TableVersion:
        directory = f"{versions.store_path(location).rstrip('/')}/_versions"
        return TableVersion(
            version=record.version,
            manifest_path=f"{directory}/{versions.manifest_name(record.version, naming_scheme)}",
            manifest_size=record.manifest_size,
            timestamp_millis=record.timestamp_millis,
            metadata=record.metadata,
        )

    def _remember(self, record: TableVersion) -> None:
        with self._lock:
            self._known_final[record.manifest_path] = None
            self._known_final.move_to_end(record.manifest_path)
            while len(self._known_final) > _KNOWN_FINAL_LIMIT:
                self._known_final.popitem(last=False)

    # -- operations -----------------------------------------------------------------------------

    def finalize(
        self, location: str, record: TableVersion, naming_scheme: str | None
    ) -> TableVersion:
        """Copy a committed staging manifest to its final name; the record to answer.

        ``record`` is always one the catalog has recorded (the writer's, right after its
        compare-and-set, or the latest a reader was answered), so the final name is either
        free or already holds a copy of the same manifest: it is never given anything else.
        """
        if not self._is_staging_of(location, record):
            return record
        try:
            filesystem, staging, final = self._files(location, record, naming_scheme)
            self._copy(filesystem, staging, final)
        except Exception as error:  # Lance finalizes it itself; nothing is lost
            logger.info(
                "manifest of version %s left at its staging name: %s", record.version, error
            )
            return record
        self._remember(record)
        return self._final_record(location, record, naming_scheme)

    @staticmethod
    def _copy(filesystem: FileSystem, source: str, target: str) -> None:
        from pyarrow import fs

        if isinstance(filesystem, fs.LocalFileSystem):
            # Readers must never see a partial file: write aside, then link (fails if taken).
            aside = f"{target}.{uuid.uuid4().hex}.tmp"
            filesystem.copy_file(source, aside)
            try:
                os.link(aside, target)
            except FileExistsError:
                pass  # a reader's Lance finalized the same manifest first
            finally:
                os.unlink(aside)
        else:
            filesystem.copy_file(source, target)  # one atomic server-side copy

    def holds_final(self, location: str, version: int, naming_scheme: str | None) -> bool:
        """Whether storage holds ``version`` under its final manifest name (False when it
        cannot be read: the commit then goes on, as it did before this check)."""
        try:
            filesystem, root = self._filesystem(location)
            final = f"{root}/_versions/{versions.manifest_name(version, naming_scheme)}"
            return bool(filesystem.get_file_info(final).type.name == "File")
        except Exception as error:
            logger.debug("could not look for version %s of %s: %s", version, location, error)
            return False

    def present(self, location: str) -> set[int] | None:
        """The versions whose manifest (final or staging) is on storage; None when the
        ``_versions/`` directory cannot be listed (then nobody can say, and nothing is hidden).

        ``cleanup_old_versions`` deletes manifests without telling the catalog, so the
        catalog's own count of versions can name some that are gone."""
        from pyarrow import fs

        try:
            filesystem, root = self._filesystem(location)
            listed = filesystem.get_file_info(fs.FileSelector(f"{root}/_versions"))
        except Exception as error:
            logger.debug("could not list the manifests of %s: %s", location, error)
            return None
        found = set()
        for info in listed:
            stem = info.base_name.split(".manifest", 1)[0]
            if ".manifest" in info.base_name and stem.isdigit():
                number = int(stem)
                found.add(versions.U64_MAX - number if number > 2**63 else number)
        return found

    def retire(self, location: str, record: TableVersion | None, naming_scheme: str | None) -> None:
        """Delete the staging manifest of a version that is no longer the latest, if its final
        copy exists (every answer for an older version names the final manifest)."""
        if record is None or not self._is_staging_of(location, record):
            return
        try:
            filesystem, staging, final = self._files(location, record, naming_scheme)
            if self._is_final(filesystem, final, record):
                filesystem.delete_file(staging)
        except Exception as error:  # an untidy directory, nothing more
            logger.debug("staging manifest of version %s kept: %s", record.version, error)

    def answer(
        self, location: str, record: TableVersion | None, naming_scheme: str | None
    ) -> TableVersion | None:
        """The record to answer for the latest (committed) version: its final manifest,
        copied there now if the committing writer has not done so yet."""
        if record is None or not self._is_staging_of(location, record):
            return record
        try:
            filesystem, _, final = self._files(location, record, naming_scheme)
            if not self._is_final(filesystem, final, record):
                return self.finalize(location, record, naming_scheme)
        except Exception as error:
            logger.debug("could not look for the final manifest: %s", error)
            return record
        return self._final_record(location, record, naming_scheme)
