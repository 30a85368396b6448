"""The one commit routine: every write of an existing Lance table's catalog entry.

A catalog-managed table (``managed_by=impl``) has its latest version in its catalog entry, and
the catalog arbitrates each commit. Every change of such an entry, and of any Lance table's
entry, goes through :meth:`CommitOps._write_entry` below, with one set of rules:

1. **Read** the entry as the catalog holds it (the backend's object, kept whole).
2. **Catch up** (version commits): a writer that committed straight to storage, around the
   catalog (lance-spark 0.4.0's ``OPTIMIZE``, pylance by path), left storage ahead; the catalog
   first adopts storage's latest version, so no final manifest name is ever taken twice.
3. **Change** the entry: a pure function of the entry read. It raises the refusals that do
   not depend on timing: a taken version (14, Lance rebases), a gap or a foreign manifest (13).
4. **Keep** what others wrote: the change returns only our fields (our parameters, the
   location, the columns); a column's comment the catalog holds survives unless Lance gives
   one; the backend writes them onto the object it read, so everything else stays.
5. **Write if unchanged**: the backend's one conditional write (Glue ``UpdateTable`` with the
   ``VersionId`` read; HMS 4 ``alter_table_req`` expecting the revision read; HMS 2/3 the
   table's exclusive lock, asked for before step 1, then ``alter_table``, after a re-read and
   compare when the lock was granted only after step 1).
6. **Refused?** Read the entry again. If it holds this very write, the write took effect and
   only its reply was lost: done. If nothing moved at all (a lock timed out), 14. Otherwise
   apply the change again to the entry as it is now (step 2): a taken version then answers 14
   at once; a column sync or a record deletion simply lands on the newer entry. Bounded:
   :data:`COMMIT_RETRY_SECONDS` for version commits (well inside Lance's own 30 s retry
   window), :data:`CONFLICT_RETRY_SECONDS` for writes that must not fail because of commits.
7. **Finalize** (version commits): copy each committed staging manifest to its final name if
   that name is free, and delete the previous latest version's staging manifest (see
   :mod:`..rules.manifests`). A final name holding another writer's manifest (committed around
   the catalog after step 2) makes the catalog adopt storage's versions, and the commit 14.
   A commit is acknowledged only once its final name holds its manifest: when storage refuses
   the copy, the commit answers 17 with its outcome unknown (the catalog keeps the record; a
   reader's copy may still finalize it), never an acknowledgment a writer by path could undo.

Callers: ``create_table_version``, ``batch_create_table_versions``, ``batch_commit_tables``
and ``batch_delete_table_versions`` (:meth:`_commit_versions`), column syncs after every
schema change, Spark's and the CLI's (:meth:`_record_columns`), and register overwrite
(:meth:`_reregister`), each paced by its :class:`Kind`. A failed create's undo fences the
entry it removes (:meth:`_remove_untouched`). A backend supplies only ``_catalog_get_table``
and ``_catalog_write_table``.

Atomicity: one write covers one table entry. A batch whose operations all fall on one table is
one write, all or nothing. A batch over several tables is refused (see :mod:`.batches`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from lance_namespace import DeregisterTableRequest, TableVersion
from lance_namespace.errors import (
    ConcurrentModificationError,
    InvalidInputError,
    ServiceUnavailableError,
)

from ..rules import locations, manifests, observe, tables, versions
from ..rules.identifiers import Path, describe
from ..rules.requests import RequestInput, coerce_request, request_id
from ..rules.retries import Backoff
from ..rules.schema import CatalogColumn, catalog_columns, keep_comments
from ..rules.tables import TableEntry
from .core import CatalogCore

logger = logging.getLogger("lance_metastore")

# A version commit refused by a write that left its version free is made again on the fresh
# entry for this long (Lance's own retry window for a commit is 30 s).
COMMIT_RETRY_SECONDS = 10.0
REMOVING_KEY = tables.REMOVING_KEY
# A write that must not fail because of commits (a column sync, a register overwrite) is made
# again for up to this long: longer than a burst of commits keeps a table busy, bounded.
CONFLICT_RETRY_SECONDS = 60.0
CONFLICT_BACKOFF = Backoff(base=0.01, cap=0.5)

Change = Callable[[TableEntry], TableEntry]


@dataclass(frozen=True)
class Written:
    """What a write did: the entry it was based on and the entry as written (the same object
    when there was nothing to write)."""

    before: TableEntry
    after: TableEntry


@dataclass(frozen=True)
class VersionCommit:
    """One version a commit adds (a create_table_version request, or a batch entry)."""

    version: int
    manifest_path: str
    manifest_size: int | None = None
    e_tag: str | None = None
    naming_scheme: str | None = None

    @classmethod
    def of(cls, request: Any) -> VersionCommit:
        if getattr(request, "branch", None):
            from lance_namespace.errors import UnsupportedOperationError

            raise UnsupportedOperationError("Branches are not supported by catalog commits")
        if request.version is None or request.version < 1 or not request.manifest_path:
            raise InvalidInputError("A commit needs a version >= 1 and a manifest_path")
        return cls(
            request.version,
            request.manifest_path,
            request.manifest_size,
            request.e_tag,
            request.naming_scheme,
        )


@dataclass(frozen=True)
class RecordDeletion:
    """Version records a commit hides (``[start, end)`` ranges; end -1: through the latest)."""

    ranges: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, request: Any) -> RecordDeletion:
        return cls(tuple((r.start_version, r.end_version) for r in request.ranges or ()))


Step = VersionCommit | RecordDeletion


@dataclass(frozen=True)
class Kind:
    """How the routine paces one kind of write: which tables it applies to, whether it
    catches up with storage first (step 2), and how it treats a lost race (step 6)."""

    managed: bool  # catalog-managed tables only (13 otherwise)
    catch_up: bool  # adopt versions committed around the catalog before the change
    patience: float  # lost races are retried for this long
    eager: bool  # retry at once, and answer 14 at once when nothing moved (Lance retries)

    def gives_up(self, entry: TableEntry, current: TableEntry, deadline: float) -> bool:
        """After a refused write, with the entry as it is now: answer the conflict (14)?
        A refusal without cause (nothing moved: a lock that timed out) ends an eager write
        at once; any write ends at its deadline."""
        return (self.eager and current == entry) or time.monotonic() > deadline

    def pause(self, tries: int) -> None:
        """Before the next try: none for an eager write; otherwise a jittered backoff, so a
        column sync in a loop never starves the commits."""
        if not self.eager:
            time.sleep(CONFLICT_BACKOFF.delay(tries))


# Version commits (catching up with storage first) and record deletions.
COMMIT = Kind(managed=True, catch_up=True, patience=COMMIT_RETRY_SECONDS, eager=True)
DELETION = Kind(managed=True, catch_up=False, patience=COMMIT_RETRY_SECONDS, eager=True)
# A managed entry adopting storage's versions after a commit yielded to them.
ADOPTION = Kind(managed=True, catch_up=False, patience=COMMIT_RETRY_SECONDS, eager=False)
# Column syncs and register overwrites: must not fail because commits are busy.
EDIT = Kind(managed=False, catch_up=False, patience=CONFLICT_RETRY_SECONDS, eager=False)


def _owned_equal(a: TableEntry, b: TableEntry) -> bool:
    """Whether two entries agree on everything a write of ours sets."""
    return (
        a.parameters == b.parameters
        and a.location == b.location
        and (b.columns is None or a.columns == b.columns)
    )


def _holds(current: TableEntry, written: TableEntry) -> bool:
    """Whether the catalog holds exactly the write ``written``: after a refusal of a retried
    write whose first attempt took effect but whose reply was lost. For a version commit the
    commit keys identify it (a unique staging manifest and commit time); reporting its
    refusal would make Lance commit the same data again as the next version."""
    return (
        versions.already_applied(current.parameters, written.parameters)
        and current.location == written.location
        and (written.columns is None or current.columns == written.columns)
    )


def _keeping_comments(entry: TableEntry, updated: TableEntry) -> TableEntry:
    """``updated`` with the column comments ``entry`` holds that Lance gives none for (step 4)."""
    if updated.columns is None:
        return updated
    return dataclasses.replace(updated, columns=keep_comments(updated.columns, entry.columns))


def _same_place(a: str | None, b: str | None) -> bool:
    """Whether two stored locations name one place as Lance opens it (``/x``, ``file:///x``,
    ``/x/``; ``s3a://`` and ``s3://``; a local path and a link to it): compared parsed, never as
    text."""

    def parsed(text: str | None) -> locations.Location | None:
        if not text:
            return None
        try:
            return locations.stored(text, "Location")
        except InvalidInputError:
            pass
        try:
            return locations.lenient(text)
        except InvalidInputError:
            return None  # text no reading makes a place of is no place

    place, other = parsed(a), parsed(b)
    return place is not None and other is not None and place.same(other)


class CommitOps(CatalogCore):
    """The commit routine and the writes built on it."""

    # ----------------------------------------------------------------------------------------
    # The routine
    # ----------------------------------------------------------------------------------------

    def _write_entry(self, path: Path, name: str, change: Change, kind: Kind = EDIT) -> Written:
        """Apply ``change`` to the table's entry through one conditional write (steps 1-6 of
        the module's rules, as ``kind`` paces them); the entry it was based on and the one
        written. A managed table's writes run inside the backend's commit scope (the HMS 2/3
        table lock, taken before the first read)."""
        if not kind.managed:
            return self._write_entry_in_scope(path, name, change, kind)
        with self._catalog_commit_scope(path, name):
            return self._write_entry_in_scope(path, name, change, kind)

    def _write_entry_in_scope(self, path: Path, name: str, change: Change, kind: Kind) -> Written:
        read = self._require_managed_table if kind.managed else self._require_lance_table
        deadline = time.monotonic() + kind.patience
        self._await_removal(path, name, kind, deadline)
        entry = read(path, name)
        tries = 0
        while True:
            if kind.catch_up:
                entry = self._caught_up_with_storage(path, entry)
            # ``read`` answers 404 for an entry being removed (a fresh fence); a stale fence
            # (its undo died) is lifted by this write, conditionally as any.
            updated = _keeping_comments(entry, change(entry))
            if REMOVING_KEY in updated.parameters:
                kept = {k: v for k, v in updated.parameters.items() if k != REMOVING_KEY}
                updated = dataclasses.replace(updated, parameters=kept)
            if _owned_equal(entry, updated):
                return Written(entry, entry)
            try:
                self._catalog_write_table(path, entry, updated)
                return Written(entry, updated)
            except ConcurrentModificationError:
                self._await_removal(path, name, kind, deadline)
                current = read(path, name)
                if _holds(current, updated) and not _holds(entry, updated):
                    logger.info(
                        "write of %s took effect before its reply was lost",
                        describe((*path, name)),
                    )
                    return Written(entry, updated)
                if kind.gives_up(entry, current, deadline):
                    raise
                observe.event("commit_retry")
            kind.pause(tries)
            tries += 1
            entry = current

    def _await_removal(self, path: Path, name: str, kind: Kind, deadline: float) -> None:
        """A patient write (a column sync after rows were written by path) onto an entry being
        removed waits, within its deadline, for the undo to decide: the undo judges storage
        under its fence, so rows written before that keep the entry (unfenced, and the write
        lands); otherwise the entry goes and the write answers 404. An eager write (a
        version commit) answers 404 at once."""
        tries = 0
        while not kind.eager and time.monotonic() < deadline:
            entry = self._catalog_get_table(path, name)
            if entry is None or not tables.fenced(entry.parameters):
                return
            time.sleep(CONFLICT_BACKOFF.delay(tries))
            tries += 1

    # ----------------------------------------------------------------------------------------
    # Version commits: create_table_version, the batches, record deletions
    # ----------------------------------------------------------------------------------------

    def _require_managed_table(self, path: Path, name: str) -> TableEntry:
        entry = self._require_lance_table(path, name)
        if not self._managed_versioning(entry):
            raise InvalidInputError(
                f"Table {describe((*path, name))} is managed by storage: Lance commits its "
                "versions itself; declare it with managed_by=impl for catalog-managed commits"
            )
        return entry

    def _commit_versions(
        self, path: Path, name: str, steps: Sequence[Step]
    ) -> list[TableVersion | int]:
        """Commit ``steps`` (versions and record deletions, in order) to one table in one
        conditional write; per step, the finalized record of its version or the number of
        records it deleted. Every conflict (14) a commit answers is counted here, whichever
        step found it: a version already taken, a lost race, storage ahead, a manifest taken."""
        try:
            return self._commit_steps(path, name, steps)
        except ConcurrentModificationError:
            observe.event("commit_conflict")
            raise

    def _commit_steps(
        self, path: Path, name: str, steps: Sequence[Step]
    ) -> list[TableVersion | int]:
        """What :meth:`_commit_versions` does, uncounted."""
        target = f"table {describe((*path, name))}"
        versions.check_consecutive(
            target, [s.version for s in steps if isinstance(s, VersionCommit)]
        )
        outcome: list[TableVersion | int] = []

        def change(entry: TableEntry) -> TableEntry:
            outcome.clear()
            location = self._manifests_at(path, entry) or ""
            parameters = dict(entry.parameters)
            latest = versions.current_version(parameters)
            if not latest and any(isinstance(s, VersionCommit) for s in steps):
                latest = self._versions_of_creation(path, entry)
            for step in steps:
                if isinstance(step, VersionCommit):
                    versions.check_next(target, latest, step.version)
                    scheme = versions.check_scheme(
                        target, step.naming_scheme, self._scheme_of(location, parameters, latest)
                    )
                    manifests.check_staging(
                        target, location, step.version, scheme, step.manifest_path
                    )
                    commit = versions.Commit(
                        step.version,
                        step.manifest_path,
                        step.manifest_size,
                        step.e_tag,
                        scheme,
                    )
                    parameters = commit.parameters(parameters)
                    latest = step.version
                    record = versions.latest_record(parameters)
                    assert record is not None
                    outcome.append(record)
                else:
                    parameters, count = self._deleted(path, target, entry, parameters, step)
                    outcome.append(count)
            return dataclasses.replace(entry, parameters=parameters, columns=None)

        adds = any(isinstance(s, VersionCommit) for s in steps)
        written = self._write_entry(path, name, change, COMMIT if adds else DELETION)
        records = [r for r in outcome if isinstance(r, TableVersion)]
        if not records:
            return outcome
        try:
            done = self._finalize(path, written.before, written.after.parameters, records)
        except manifests.ManifestTaken as taken:
            self._yield_to_storage(path, name, written.after)
            if taken.standing:
                # A batch whose earlier versions are final stands in part: neither refused
                # (14 would have Lance commit those rows again) nor acknowledged.
                numbers = ", ".join(str(v) for v in taken.standing)
                raise ServiceUnavailableError(
                    f"Commit to {target} partly applied: version {numbers} stands, but {taken}; "
                    "read the table's latest version before writing the rest again"
                ) from None
            raise ConcurrentModificationError(
                f"Commit to {target} refused: {taken}; retry on the latest version"
            ) from None
        except manifests.ManifestNotFinal as refused:
            # Not acknowledged: until its final name holds its manifest, a writer by path may
            # take the version. The catalog keeps the record (versions never move back): the
            # first reader whose copy succeeds finalizes it, unless that name is taken first.
            numbers = ", ".join(str(r.version) for r in records)
            raise ServiceUnavailableError(
                f"Commit to {target}: the catalog recorded version {numbers} but {refused}; "
                "its outcome is unknown until storage answers: read the table's latest "
                "version before writing these rows again"
            ) from None
        finalized = iter(done)
        return [next(finalized) if isinstance(r, TableVersion) else r for r in outcome]

    def _manifests_at(self, path: Path, entry: TableEntry) -> str | None:
        """Where the table's manifests are: its stored location parsed by today's rules (13
        when they refuse it), the form every data path acts on; None for an entry without a
        location (nothing to find there)."""
        if not entry.location:
            return None
        return str(self._stored_location(path, entry))

    def _scheme_of(self, location: str, parameters: Mapping[str, str], latest: int) -> str | None:
        """The naming scheme of the table's manifests: the one recorded, else (versions
        written straight to storage, never committed through the catalog) the one storage's
        latest manifest is named by; None while the table has no version."""
        recorded = parameters.get(versions.NAMING_SCHEME_KEY)
        if recorded is not None or not latest or not location:
            return recorded
        for scheme in versions.NAMING_SCHEMES:
            if self._manifests.holds_final(location, latest, scheme):
                return scheme
        return None

    def _yield_to_storage(self, path: Path, name: str, ours: TableEntry) -> None:
        """After a commit whose version's final name turned out to hold another writer's
        manifest (committed around the catalog between the catch-up and the finalize): the
        entry, while it still holds that commit, adopts storage's versions instead, so the
        catalog never names a version whose final manifest is not the one it recorded. The
        commit is then answered 14 (Lance rebases it): it was never acknowledged, and the
        other writer's commit, which was, stays."""
        recorded = ours.parameters.get(versions.MANIFEST_PATH_KEY)

        def change(entry: TableEntry) -> TableEntry:
            if entry.parameters.get(versions.MANIFEST_PATH_KEY) != recorded:
                return entry  # moved on already (a reader's catch-up, another commit)
            location = self._manifests_at(path, entry) or ""
            adopted = self._adopt_latest_version(location, dict(entry.parameters))
            return dataclasses.replace(entry, parameters=adopted, columns=None)

        self._write_entry(path, name, change, ADOPTION)

    def _deleted(
        self,
        path: Path,
        target: str,
        entry: TableEntry,
        parameters: dict[str, str],
        step: RecordDeletion,
    ) -> tuple[dict[str, str], int]:
        """``parameters`` with ``step``'s records hidden, and how many visible records that
        hides. The latest version's record is never hidden (13); versions after it do not
        exist yet and are left alone, so later commits stay listed."""
        latest = versions.current_version(parameters)
        asked = [versions.inclusive_range(start, end, latest) for start, end in step.ranges]
        if any(start <= latest <= end for start, end in asked):
            raise InvalidInputError(f"The latest version ({latest}) of {target} cannot be deleted")
        ranges = [(start, min(end, latest)) for start, end in asked if start <= latest]
        visible = {
            r.version
            for r in self._version_records(path, dataclasses.replace(entry, parameters=parameters))
        }
        count = sum(1 for v in visible if versions.is_deleted(v, ranges))
        deleted = versions.with_deleted(parameters, ranges)
        if deleted == parameters.get(versions.DELETED_KEY, ""):
            return parameters, count
        return {**parameters, versions.DELETED_KEY: deleted}, count

    def _caught_up_with_storage(self, path: Path, entry: TableEntry) -> TableEntry:
        """``entry``, first moved to storage's latest version when storage holds the version
        after the catalog's: a writer committed it straight to storage, around the catalog.

        Committing that number again through the catalog would put two manifests on one final
        name, and one of the two commits would be lost. Once the catalog has adopted storage's
        versions, the commit at hand is a conflict (14), which Lance rebases onto them. A
        concurrent write that wins the adoption's race is simply the entry to go on from."""
        location = self._storage_ahead(path, entry)
        if location is None:
            return entry
        committed = versions.current_version(entry.parameters)
        fresh = self._require_managed_table(path, entry.name)
        if versions.current_version(fresh.parameters) != committed:
            return fresh  # ``entry`` was stale: a commit through the catalog wrote that name
        adopted = self._adopt_latest_version(location, dict(fresh.parameters))
        logger.warning(
            "table %s: storage holds versions after the catalog's %s, committed around it "
            "(up to %s); the catalog adopts them",
            describe((*path, entry.name)),
            committed,
            versions.current_version(adopted),
        )
        # A concurrent writer that wins this race moved the entry: go on from it.
        with contextlib.suppress(ConcurrentModificationError):
            self._catalog_write_table(
                path, fresh, dataclasses.replace(fresh, parameters=adopted, columns=None)
            )
            observe.event("commit_adoption")
        # Read again: the write moved the entry's token (Glue's VersionId, Hive's revision).
        return self._require_managed_table(path, entry.name)

    def _latest_known(self, path: Path, name: str) -> TableEntry:
        """The managed table's entry for an answer about its versions, with the versions
        committed around the catalog, so readers see them right after. A read never writes the
        catalog: storage's versions are answered as they are; the next commit adopts them
        (step 2) through the routine."""
        entry = self._require_managed_table(path, name)
        location = self._storage_ahead(path, entry)
        if location is None:
            return entry
        adopted = self._adopt_latest_version(location, dict(entry.parameters))
        return dataclasses.replace(entry, parameters=adopted)

    def _storage_ahead(self, path: Path, entry: TableEntry) -> str | None:
        """The table's location when storage holds the version after the catalog's latest
        (a writer committed around the catalog), else None."""
        committed = versions.current_version(entry.parameters)
        location = self._manifests_at(path, entry) if committed else None
        if not committed or not location:
            return None
        scheme = entry.parameters.get(versions.NAMING_SCHEME_KEY)
        return location if self._manifests.holds_final(location, committed + 1, scheme) else None

    def _versions_of_creation(self, path: Path, entry: TableEntry) -> int:
        """The versions a managed table's creator wrote straight to storage before its first
        commit through the catalog (lance-spark's ``CREATE TABLE`` writes the empty version 1
        after ``declare_table``): the first commit continues after them."""
        location = self._manifests_at(path, entry)
        if location is None or self._dataset_schema(location) is None:
            return 0
        return int(self._open_dataset(location).version)

    def _finalize(
        self,
        path: Path,
        entry: TableEntry,
        committed: Mapping[str, str],
        records: list[TableVersion],
    ) -> list[TableVersion]:
        """After a write moved ``entry`` to ``committed``: the records of the versions it
        committed, their manifests moved to the final names, and the staging manifest of the
        version that was the latest before deleted (step 7)."""
        location = self._manifests_at(path, entry) or ""
        scheme = committed.get(versions.NAMING_SCHEME_KEY)
        finalized: list[TableVersion] = []
        for record in records:
            try:
                finalized.append(
                    self._manifests.finalize(location, record, scheme, committing=True)
                )
            except manifests.ManifestTaken as taken:
                taken.standing = tuple(int(r.version) for r in finalized)
                raise
        self._manifests.retire(
            location,
            versions.latest_record(entry.parameters),
            entry.parameters.get(versions.NAMING_SCHEME_KEY),
        )
        return finalized

    def _latest_record(self, path: Path, entry: TableEntry) -> TableVersion | None:
        """The latest version's record, naming its final manifest once that exists."""
        location = self._manifests_at(path, entry) or ""
        scheme = entry.parameters.get(versions.NAMING_SCHEME_KEY)
        return self._manifests.answer(location, versions.latest_record(entry.parameters), scheme)

    def _version_records(self, path: Path, entry: TableEntry) -> list[TableVersion]:
        """Every visible version record, ascending.

        Commits are contiguous by construction (each must be latest + 1), so the catalog
        knows the history: 1..latest less the deleted records and the versions whose manifests
        are gone from storage (``cleanup_old_versions`` does not tell the catalog). Older
        manifests are at the names Lance gives committed manifests.
        """
        latest = self._latest_record(path, entry)
        if latest is None:
            return []
        deleted = versions.deleted_ranges(entry.parameters)
        scheme = entry.parameters.get(versions.NAMING_SCHEME_KEY)
        location = self._manifests_at(path, entry) or ""
        present = self._manifests.present(location) if latest.version > 1 else None
        records = [
            versions.older_record(location, number, scheme, None)
            for number in range(1, latest.version)
            if not versions.is_deleted(number, deleted) and (present is None or number in present)
        ]
        if not versions.is_deleted(latest.version, deleted):
            records.append(latest)
        return records

    # ----------------------------------------------------------------------------------------
    # Entry writes that are not commits: columns, register overwrite
    # ----------------------------------------------------------------------------------------

    def _record_columns(
        self,
        path: Path,
        name: str,
        schema: pa.Schema,
        before: TableEntry | None = None,
    ) -> list[CatalogColumn]:
        """Make the catalog's columns mirror ``schema`` after a change that may alter it.

        ``before`` is the entry read before the change: when its columns already match, no
        catalog call is made (appends, merges and most updates keep the schema). Otherwise
        only the columns change, through the routine: a concurrent commit is never undone,
        and a lost race is retried with the schema of the table's latest version then, so the
        columns end up neither failed nor stale, whatever committed in between.
        """
        columns = catalog_columns(schema)
        if before is not None and keep_comments(columns, before.columns) == before.columns:
            return columns
        seen: list[TableEntry] = []

        def change(entry: TableEntry) -> TableEntry:
            nonlocal columns
            if seen and seen[-1] != entry:  # lost a race: a commit may have changed the schema
                latest = self._table_schema(path, entry)
                columns = catalog_columns(latest) if latest is not None else columns
            seen.append(entry)
            return dataclasses.replace(entry, columns=columns)

        written = self._write_entry(path, name, change)
        return list(written.after.columns or columns)

    def _untouched(
        self, path: Path, entry: TableEntry, declared: Mapping[str, str] | None = None
    ) -> bool:
        """Whether a declared entry is still as its declaration left it: the one test of every
        undo of a declaration (a failed create, Spark's failed job). No version recorded, no
        columns, our declared parameters unchanged (when the undoer knows them), and
        storage holds no dataset at its location: a storage-managed writer (pylance with
        ``namespace_client``) writes by path and never touches the entry."""
        if entry.columns or versions.current_version(entry.parameters):
            return False
        if declared is not None and any(
            entry.parameters.get(k) != v for k, v in declared.items() if tables.is_own_parameter(k)
        ):
            return False
        return not entry.location or self._dataset_schema(entry.location) is None

    def _remove_untouched(
        self, path: Path, name: str, declared: Mapping[str, str] | None = None
    ) -> str:
        """Remove a declared entry only while it is untouched (:meth:`_untouched`): "removed",
        "kept" (another writer used it, or the removal failed) or "absent".

        Neither Glue's ``DeleteTable`` nor Hive's ``drop_table`` takes a condition, so the
        entry is first fenced: one conditional write (step 5) of :data:`REMOVING_KEY` on the
        entry judged untouched. A write through the catalog that landed since the entry was
        read refuses the fence (the entry stays); once it is there, the routine writes nothing
        onto the entry (a commit or column sync answers 404 instead of landing). Storage is
        judged again under the fence (a storage-managed writer never writes the entry), and an
        entry found used, or whose removal fails, is unfenced by a conditional write, so no
        fence is left behind by a live undo."""
        current = self._catalog_get_table(path, name)
        if current is None:
            return "absent"
        if not self._untouched(path, current, declared):
            return "kept"
        fence = dataclasses.replace(
            current,
            parameters={**current.parameters, REMOVING_KEY: tables.fence_now()},
            columns=None,
        )
        try:
            self._catalog_write_table(path, current, fence)
        except ConcurrentModificationError:
            return "kept"
        try:
            fenced = self._catalog_get_table(path, name)
            if fenced is None:
                return "absent"
            if REMOVING_KEY not in fenced.parameters:
                return "kept"
            if self._untouched(path, fenced, declared):
                try:
                    self._catalog_delete_table(path, name)
                    return "removed"
                except Exception as error:
                    logger.warning(
                        "could not remove %s: %s; its fence is lifted",
                        describe((*path, name)),
                        error,
                    )
        except Exception:
            # A read or storage check failed under the fence: lift it if it can be read, so a
            # passing fault never hides a table for the fence's lifetime.
            with contextlib.suppress(Exception):
                again = self._catalog_get_table(path, name)
                if again is not None and REMOVING_KEY in again.parameters:
                    self._unfence(path, again)
            raise
        self._unfence(path, fenced)
        return "kept"

    def _unfence(self, path: Path, fenced: TableEntry) -> None:
        """Lift the fence of an entry that stays (one conditional write on the fenced entry)."""
        parameters = {k: v for k, v in fenced.parameters.items() if k != REMOVING_KEY}
        try:
            self._catalog_write_table(
                path, fenced, dataclasses.replace(fenced, parameters=parameters, columns=None)
            )
        except Exception as error:
            logger.warning(
                "could not lift the fence of %s: %s", describe((*path, fenced.name)), error
            )

    def remove_declared_table(self, request: RequestInput = None) -> str:
        """Undo a declaration (a Spark job that declared the table and failed): the entry is
        removed only while untouched, through the fenced removal; "removed", "kept" or
        "absent". Never any data. Not a spec operation: a deregister would take a table
        another writer wrote meanwhile."""
        with self._operation("remove declared table", request_id(request)):
            req = coerce_request(request, DeregisterTableRequest)
            path, name = self._table_path(req.id)
            return self._remove_untouched(path, name)

    def _reregister(
        self, path: Path, entry: TableEntry, columns: list[CatalogColumn]
    ) -> dict[str, str]:
        """Register overwrite: the existing entry takes ``entry``'s location, parameters and
        ``columns``, through the routine; the parameters written. Parameters others wrote
        stay. The same managed dataset registered again never takes the catalog back to an
        older version than it has recorded. The answer names the parameters registered, as a
        registration that creates the entry does."""
        registered: dict[str, str] = {}

        def change(existing: TableEntry) -> TableEntry:
            parameters = dict(entry.parameters)
            if (
                self._managed_versioning(entry)
                and self._managed_versioning(existing)
                and _same_place(existing.location, entry.location)
            ):
                parameters = versions.never_behind(parameters, existing.parameters)
            registered.clear()
            registered.update(parameters)
            others = {
                k: v for k, v in existing.parameters.items() if not tables.is_own_parameter(k)
            }
            return dataclasses.replace(
                existing,
                location=entry.location,
                parameters={**others, **parameters},
                columns=columns,
            )

        self._write_entry(path, entry.name, change)
        return dict(registered)
