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
compare-and-set and its copy makes the copy itself (either copy holds the same manifest). The
final name is only ever written while free; one that holds another writer's manifest (a commit
around the catalog) is never overwritten, and the catalog's commit then yields to it.
This matters beyond speed: the Lance inside
lance-spark 0.4.0 finalizes a staging name it is handed and then fails on ``put_if_exists``
("not supported for namespace-backed stores"), so a Spark job racing another writer failed.
A commit is acknowledged only once its final name holds its manifest: until then a writer
committing by path (around the catalog) could take that name, and the version would be theirs.
So when storage refuses the writer's copy (after a few tries), the commit is not acknowledged:
its outcome is unknown (the catalog recorded it; it stands if a reader's copy succeeds before
anyone takes the name, else the name's holder is the version), and nothing acknowledged can be
replaced. A reader whose copy fails is answered the staging name.
A staging manifest is deleted only one commit later, once its final copy exists: a
reader handed the staging name just before the copy can still read it.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING

from lance_namespace import TableVersion
from lance_namespace.errors import InvalidInputError

from . import locations, versions
from .config import s3_flag, s3_option
from .retries import Backoff

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem, S3FileSystem

logger = logging.getLogger(__name__)

# What follows ``<final name>-`` in a staging manifest's name: Lance writes a UUID there.
_STAGING_TOKEN = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]*")


def versions_prefix(location: str) -> str:
    """``<location's path in its store>/_versions/``: the one directory whose manifests a
    table's commits may name."""
    return f"{versions.store_path(location).strip('/')}/_versions/"


def staging_problem(
    location: str, version: int, naming_scheme: str | None, manifest_path: str
) -> str | None:
    """Why ``manifest_path`` is not this table's own staging manifest of ``version``, or None.

    A commit may only name ``<table>/_versions/<final name of version>-<token>``, as Lance
    writes it, in canonical form: the path inside the table's store, every segment a real
    name (no empty, ``.`` or ``..`` segment), under this table's ``_versions/`` and nowhere
    else (not another table's directory, not a final manifest, not another version's)."""
    path = manifest_path[1:] if manifest_path.startswith("/") else manifest_path
    segments = path.split("/")
    if any(part in ("", ".", "..") for part in segments) or "\\" in path:
        return "it is not in canonical form (empty, '.' or '..' segments)"
    prefix = versions_prefix(location)
    if not path.startswith(prefix) or "/" in path[len(prefix) :]:
        return f"it is not under the table's own {prefix!r}"
    name = path[len(prefix) :]
    schemes = [naming_scheme] if naming_scheme else ["V2", "V1"]
    for scheme in schemes:
        final = versions.manifest_name(version, scheme)
        token = name[len(final) + 1 :] if name.startswith(f"{final}-") else ""
        if _STAGING_TOKEN.fullmatch(token):
            return None
    wanted = " or ".join(f"{versions.manifest_name(version, s)}-<uuid>" for s in schemes)
    return f"a commit of version {version} names its staging manifest {wanted}"


def is_own_manifest(location: str, record: TableVersion) -> bool:
    """Whether ``record`` names one of this table's own manifests of its version: the
    staging manifest a commit recorded, or the final name (either naming scheme)."""
    if staging_problem(location, record.version, None, record.manifest_path) is None:
        return True
    return record.manifest_path in {
        versions.older_record(location, record.version, scheme, None).manifest_path
        for scheme in ("V2", "V1")
    }


def check_staging(
    target: str, location: str, version: int, naming_scheme: str | None, manifest_path: str
) -> None:
    """InvalidInputError (13) unless ``manifest_path`` is the table's own staging manifest
    of ``version`` (see :func:`staging_problem`)."""
    problem = staging_problem(location, version, naming_scheme, manifest_path)
    if problem is not None:
        raise InvalidInputError(
            f"Manifest path {manifest_path!r} of version {version} of {target} refused: {problem}"
        )


# A committing writer's copy of its manifest to the final name: tries, and the pause between.
FINALIZE_ATTEMPTS = 3
FINALIZE_BACKOFF = Backoff(base=0.2, cap=1.0)

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


class ManifestTaken(Exception):
    """The final name of a version the catalog recorded holds a different manifest: a writer
    committed that version straight to storage, around the catalog, after the commit's
    catch-up and before its finalize. The catalog's commit is not the version storage has.
    ``standing``: the versions of the same commit already finalized before (a batch's earlier
    versions), which storage now holds for good."""

    standing: tuple[int, ...] = ()


class ManifestNotFinal(Exception):
    """Storage refused to write a committed manifest's final copy: the commit must not be
    acknowledged (a writer by path could still take the version's final name)."""


def _s3_put_if_absent(options: Mapping[str, str], bucket: str, key: str, body: bytes) -> bool:
    """PutObject with ``If-None-Match: *``: False when the key already exists (S3's
    conditional write, so another writer's manifest is never overwritten)."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    endpoint = s3_option(options, "endpoint")
    if endpoint and "://" not in endpoint:
        endpoint = f"{'http' if s3_flag(options, 'allow_http') else 'https'}://{endpoint}"
    style = "virtual" if s3_flag(options, "virtual_hosted_style") else "path"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=s3_option(options, "region"),
        aws_access_key_id=s3_option(options, "access_key_id"),
        aws_secret_access_key=s3_option(options, "secret_access_key"),
        aws_session_token=s3_option(options, "session_token"),
        config=Config(s3={"addressing_style": style}),  # type: ignore[arg-type]
    )
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
    except ClientError as error:
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status in (409, 412):  # taken (409: a concurrent conditional write in flight)
            return False
        raise
    return True


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
        """Whether ``record`` names a staging manifest in this table's ``_versions/`` (any
        naming scheme: the record was checked when it was committed)."""
        return staging_problem(location, record.version, None, record.manifest_path) is None

    def _filesystem(self, location: str) -> tuple[FileSystem, str]:
        """The filesystem holding ``location`` and the location's path within it."""
        from pyarrow import fs

        where = locations.stored(location, "Table")  # the one parsed value (13 otherwise)
        if where.local:
            return fs.LocalFileSystem(), where.key
        key = f"{where.scheme}://{where.authority}"
        with self._lock:
            filesystem = self._filesystems.get(key)
        if filesystem is None:
            if where.scheme == "s3":
                filesystem = _s3_filesystem(self._options)
            else:
                filesystem, _ = fs.FileSystem.from_uri(str(where))
            with self._lock:
                self._filesystems[key] = filesystem
        return filesystem, f"{where.authority}/{where.key}".rstrip("/")

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
        self,
        location: str,
        record: TableVersion,
        naming_scheme: str | None,
        *,
        committing: bool = False,
    ) -> TableVersion:
        """Copy a committed staging manifest to its final name; the record to answer.

        ``record`` is one the catalog has recorded (the writer's, right after its
        compare-and-set, or the latest a reader was answered). The final name is written only
        if it is free (a link on local disks, S3's ``If-None-Match: *``): a name already taken
        must hold a copy of this very manifest (a reader finalized it first); anything else
        raises :class:`ManifestTaken` (a writer committed the version around the catalog),
        and the name keeps what it holds.

        When storage refuses the copy, a reader is answered the staging name; the
        ``committing`` writer tries a few times, then gets :class:`ManifestNotFinal`: its
        commit is not acknowledged while the final name is free for anyone to take.
        """
        if not self._is_staging_of(location, record):
            return record
        attempts = FINALIZE_ATTEMPTS if committing else 1
        for attempt in range(attempts):
            try:
                filesystem, staging, final = self._files(location, record, naming_scheme)
                if self._retired(filesystem, staging, final, record):
                    self._remember(record)
                    return self._final_record(location, record, naming_scheme)
                published = self._publish(location, filesystem, staging, final)
                break
            except Exception as error:
                # No staging manifest to copy: nothing a reader could open was recorded, and
                # nothing a copy could save (a commit naming a manifest it never wrote).
                missing = isinstance(error, FileNotFoundError)
                if not missing and attempt + 1 < attempts:
                    time.sleep(FINALIZE_BACKOFF.delay(attempt))
                    continue
                if committing and not missing:
                    raise ManifestNotFinal(
                        f"storage refused the final copy of version {record.version}'s "
                        f"manifest ({type(error).__name__})"
                    ) from None
                logger.info(
                    "manifest of version %s left at its staging name: %s", record.version, error
                )
                return record
        if not published and not self._same(filesystem, staging, final):
            raise ManifestTaken(
                f"version {record.version} of {location!r} was committed around the catalog"
            )
        self._remember(record)
        return self._final_record(location, record, naming_scheme)

    @staticmethod
    def _retired(filesystem: FileSystem, staging: str, final: str, record: TableVersion) -> bool:
        """Whether the staging manifest is gone because its final copy was made and the
        staging one retired (another finalize and a later commit ran first): the final name
        holds a file, of the recorded size when the commit gave one. Its name is the answer,
        never the deleted staging path."""
        if filesystem.get_file_info(staging).type.name == "File":
            return False
        info = filesystem.get_file_info(final)
        return bool(
            info.type.name == "File"
            and (record.manifest_size is None or info.size == record.manifest_size)
        )

    def _publish(self, location: str, filesystem: FileSystem, source: str, target: str) -> bool:
        """Write ``source``'s bytes at ``target`` only if ``target`` is free; whether it was.
        Readers never see a partial file."""
        from pyarrow import fs

        if isinstance(filesystem, fs.LocalFileSystem):
            aside = f"{target}.{uuid.uuid4().hex}.tmp"
            filesystem.copy_file(source, aside)
            try:
                os.link(aside, target)  # fails if taken
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(aside)
        if isinstance(filesystem, fs.S3FileSystem):
            bucket, _, key = target.partition("/")
            with filesystem.open_input_stream(source) as stream:
                body = stream.read()
            return _s3_put_if_absent(self._options, bucket, key, body)
        # Other stores have no conditional write here: look first (a narrow race remains).
        if filesystem.get_file_info(target).type.name == "File":
            return False
        filesystem.copy_file(source, target)
        return True

    @staticmethod
    def _same(filesystem: FileSystem, a: str, b: str) -> bool:
        """Whether two manifests hold the same bytes (size first, then content)."""
        if filesystem.get_file_info(a).size != filesystem.get_file_info(b).size:
            return False
        with filesystem.open_input_stream(a) as first, filesystem.open_input_stream(b) as second:
            return bool(first.read() == second.read())

    def holds_final(self, location: str, version: int, naming_scheme: str | None) -> bool:
        """Whether storage holds ``version`` under its final manifest name. Storage that
        cannot be read raises ServiceUnavailableError (17): the commit does not go on blind."""
        try:
            filesystem, root = self._filesystem(location)
            final = f"{root}/_versions/{versions.manifest_name(version, naming_scheme)}"
            return bool(filesystem.get_file_info(final).type.name == "File")
        except Exception as error:
            from lance_namespace.errors import ServiceUnavailableError

            raise ServiceUnavailableError(
                f"Could not look for version {version} of the table at {location!r} "
                f"({type(error).__name__}); retry"
            ) from None

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
        copied there now if the committing writer has not done so yet. A recorded path that
        is not the table's own manifest of that version (written into the entry by another
        tool) is refused (13): answering it would open some other table's data."""
        if record is None:
            return record
        if not is_own_manifest(location, record):
            raise InvalidInputError(
                f"The catalog records manifest {record.manifest_path!r} for version "
                f"{record.version} of the table at {location!r}: not the table's own manifest"
            )
        if not self._is_staging_of(location, record):
            return record
        try:
            filesystem, _, final = self._files(location, record, naming_scheme)
            if not self._is_final(filesystem, final, record):
                return self.finalize(location, record, naming_scheme)
        except ManifestTaken:
            # Storage's version is the one committed around the catalog; the writer whose
            # record this is was answered 14 (or was never answered): storage's is the answer.
            return self._final_record(location, record, naming_scheme)
        except Exception as error:
            logger.debug("could not look for the final manifest: %s", error)
            return record
        return self._final_record(location, record, naming_scheme)
