"""Catalog-managed commits (managed_by=impl): the catalog arbitrates, no writer loses a commit.

Runs on every backend: Glue (the emulator checks VersionId) and Hive (the metastore's lock
manager is on). moto's server as shipped ignores VersionId on UpdateTable, so no catalog can
arbitrate concurrent commits there: the concurrent-writer tests skip on it.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from support.examples import sized
from support.harness import Harness

from lance_metastore.rules.versions import manifest_name

ROWS = pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]})


@pytest.fixture
def managed(backend: Harness):
    """A namespace whose new tables are catalog-managed by default (namespace property)."""
    ns = backend.connect(managed_by="impl")
    db = backend.db("commits")
    ns.create_namespace({"id": db})
    return ns, [*db, "events"]


def test_declared_managed_table_then_append(backend: Harness):
    ns = backend.connect()
    db = backend.db("declared")
    ns.create_namespace({"id": db})
    declared = ns.declare_table({"id": [*db, "t"], "properties": {"managed_by": "impl"}})
    assert declared.managed_versioning is True
    lance.write_dataset(ROWS, namespace_client=ns, table_id=[*db, "t"], mode="append")
    lance.write_dataset(ROWS, namespace_client=ns, table_id=[*db, "t"], mode="append")
    assert ns.describe_table({"id": [*db, "t"]}).properties["version"] == "2"


def manifests_of(location: str) -> list[str]:
    return sorted(p.name for p in Path(location, "_versions").iterdir())


def test_commits_name_their_final_manifest_and_reads_write_nothing(managed):
    """The committing namespace moves the manifest to Lance's final name itself (Lance cannot
    tell a namespace-backed store that it moved it): every answer names the final manifest,
    and opening the table writes nothing (no copy of the staging manifest per read)."""
    ns, table_id = managed
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="append")
    location = ns.describe_table({"id": table_id}).location
    final = {n: f"_versions/{manifest_name(n, 'V2')}" for n in (1, 2)}
    latest = ns.describe_table_version({"id": table_id}).version
    assert latest.manifest_path.endswith(final[2]), latest
    listed = ns.list_table_versions({"id": table_id}).versions
    assert [v.manifest_path.endswith(final[v.version]) for v in listed] == [True, True]
    newest = ns.list_table_versions({"id": table_id, "descending": True, "limit": 1})
    assert newest.versions[0].manifest_path == latest.manifest_path
    before = manifests_of(location)
    for _ in range(3):
        assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 4
        lance.dataset(namespace_client=ns, table_id=table_id, version=1).to_table()
    assert manifests_of(location) == before


def test_versions_removed_by_cleanup_are_not_listed(managed):
    """cleanup_old_versions deletes old manifests without telling the catalog: the listing
    and describe_table_version follow storage, not the catalog's count."""
    ns, table_id = managed
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    for _ in range(2):
        lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="append")
    dataset = lance.dataset(namespace_client=ns, table_id=table_id)
    dataset.cleanup_old_versions(older_than=datetime.timedelta(0))
    assert [v.version for v in ns.list_table_versions({"id": table_id}).versions] == [3]
    gone = {"id": table_id, "version": 1}
    assert code_of(ns.describe_table_version, gone) == ErrorCode.TABLE_VERSION_NOT_FOUND
    assert ns.describe_table_version({"id": table_id}).version.version == 3
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 6


def code_of(call, *args) -> ErrorCode:
    with pytest.raises(LanceNamespaceError) as caught:
        call(*args)
    return caught.value.code


def test_pylance_commits_through_the_catalog(backend: Harness, managed):
    ns, table_id = managed
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="append")
    described = ns.describe_table({"id": table_id})
    assert described.managed_versioning is True
    assert described.properties["version"] == "2"
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 4
    listed = ns.list_table_versions({"id": table_id}).versions
    assert [v.version for v in listed] == [1, 2]
    newest = ns.list_table_versions({"id": table_id, "limit": 1, "descending": True})
    assert [v.version for v in newest.versions] == [2]
    assert ns.describe_table_version({"id": table_id}).version.version == 2
    assert ns.describe_table_version({"id": table_id, "version": 1}).version.version == 1
    missing = {"id": table_id, "version": 9}
    assert code_of(ns.describe_table_version, missing) == ErrorCode.TABLE_VERSION_NOT_FOUND


def test_a_taken_version_is_a_conflict(managed):
    ns, table_id = managed
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    taken = {"id": table_id, "version": 1, "manifest_path": "x/_versions/1.manifest"}
    assert code_of(ns.create_table_version, taken) == ErrorCode.CONCURRENT_MODIFICATION
    gap = {"id": table_id, "version": 5, "manifest_path": "x/_versions/5.manifest"}
    assert code_of(ns.create_table_version, gap) == ErrorCode.INVALID_INPUT
    assert ns.describe_table({"id": table_id}).properties["version"] == "1"


def test_versions_written_around_the_catalog_are_adopted_not_overwritten(managed):
    """A writer that commits straight to storage leaves storage ahead of the catalog
    (lance-spark 0.4.0's OPTIMIZE does so on managed tables). The catalog adopts storage's
    versions: a commit that asks for a number storage holds is a conflict (14) instead of a
    second manifest on that name, a reader through the catalog sees the new version right
    after, and every version keeps its rows."""
    ns, table_id = managed
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="append")
    location = ns.describe_table({"id": table_id}).location
    lance.dataset(location).optimize.compact_files()  # around the catalog
    compacted = lance.dataset(location).version  # Lance 14 commits the compaction in two
    assert compacted > 2
    assert ns.describe_table({"id": table_id}).properties["version"] == "2"

    # A writer that read version 2 asks for version 3, which storage holds.
    taken = {"id": table_id, "version": 3, "manifest_path": f"{location}/_versions/3.manifest-x"}
    assert code_of(ns.create_table_version, taken) == ErrorCode.CONCURRENT_MODIFICATION
    assert ns.describe_table({"id": table_id}).properties["version"] == str(compacted)
    on_storage = lance.dataset(location, version=compacted)  # its own manifest, intact
    assert on_storage.count_rows() == 4 and len(on_storage.get_fragments()) == 1

    more = pa.table({"id": pa.array([3], pa.int64()), "v": ["c"]})
    lance.write_dataset(more, namespace_client=ns, table_id=table_id, mode="append")
    after = compacted + 1
    latest = lance.dataset(namespace_client=ns, table_id=table_id)
    assert latest.version == after and lance.dataset(location).version == after
    assert sorted(latest.to_table()["id"].to_pylist()) == [1, 1, 2, 2, 3]
    assert len(latest.get_fragments()) == 2  # on top of the compaction's one fragment

    lance.dataset(location).optimize.compact_files()  # around the catalog again
    again = lance.dataset(location).version
    assert again > after
    # pylance opening the table by name sees it at once (no commit in between)
    assert lance.dataset(namespace_client=ns, table_id=table_id).version == again
    # a read never writes the catalog: the next commit adopts storage's versions
    assert ns.describe_table({"id": table_id}).properties["version"] == str(after)
    listed = ns.list_table_versions({"id": table_id}).versions
    assert [v.version for v in listed] == list(range(1, again + 1))


def test_paging_and_deleting_version_records(managed):
    ns, table_id = managed
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    for _ in range(4):
        lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="append")
    first = ns.list_table_versions({"id": table_id, "limit": 2, "descending": True})
    rest = ns.list_table_versions(
        {"id": table_id, "page_token": first.page_token, "descending": True}
    )
    assert [v.version for v in first.versions + rest.versions] == [5, 4, 3, 2, 1]
    deleted = ns.batch_delete_table_versions(
        {"id": table_id, "ranges": [{"start_version": 1, "end_version": 3}]}
    )
    assert deleted.deleted_count == 2
    assert [v.version for v in ns.list_table_versions({"id": table_id}).versions] == [3, 4, 5]
    latest = {"id": table_id, "ranges": [{"start_version": 4, "end_version": -1}]}
    assert code_of(ns.batch_delete_table_versions, latest) == ErrorCode.INVALID_INPUT
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 10


def test_storage_managed_tables_keep_lance_commits(backend: Harness):
    ns = backend.connect()
    db = backend.db("plain")
    ns.create_namespace({"id": db})
    lance.write_dataset(ROWS, namespace_client=ns, table_id=[*db, "t"], mode="create")
    assert ns.describe_table({"id": [*db, "t"]}).managed_versioning is False
    assert code_of(ns.list_table_versions, {"id": [*db, "t"]}) == ErrorCode.INVALID_INPUT


def test_register_as_managed_starts_at_the_dataset_version(backend: Harness, tmp_path):
    ns = backend.connect()
    db = backend.db("adopt")
    ns.create_namespace({"id": db})
    location = str(tmp_path / "existing.lance")
    lance.write_dataset(ROWS, location)
    lance.write_dataset(ROWS, location, mode="append")
    ns.register_table(
        {"id": [*db, "t"], "location": location, "properties": {"managed_by": "impl"}}
    )
    lance.write_dataset(ROWS, namespace_client=ns, table_id=[*db, "t"], mode="append")
    assert ns.describe_table({"id": [*db, "t"]}).properties["version"] == "3"
    assert lance.dataset(namespace_client=ns, table_id=[*db, "t"]).count_rows() == 6


def needs_conditional_updates(backend: Harness) -> None:
    if not getattr(backend, "conditional_updates", True):
        pytest.skip(
            f"{backend.label}: UpdateTable ignores VersionId there, so concurrent commits "
            "cannot be arbitrated by the catalog (AWS Glue and the emulator check it)"
        )


# Lance's message when its commit retries ran out of their 30 s window, and how many times a
# writer appends again after it (see test_concurrent_writers_all_land).
LANCE_GAVE_UP = "Too many concurrent writers"
LANCE_WINDOW_RETRIES = 2


def test_concurrent_writers_all_land(backend: Harness, managed):
    """8 threads x 5 appends (2 in the fast tier) through pylance on one managed table: all land,
    none fails, and the history and rows are exact.

    Lance retries a lost race itself (re-read, rebase, next version) inside a fixed 30 s
    window; every attempt must stay short for all writers to get through it, which is why a
    commit moves its own manifest to the final name (see ``manifests.py``). On a loaded
    machine a writer can still run out of that window ("Too many concurrent writers", Lance's
    policy, not the catalog's: CI saw it once on a 2-core machine beside a Spark job); the
    writer then does what a pipeline does, it appends again. The history stays exact: an
    append that reported a failure must not have committed anything."""
    needs_conditional_updates(backend)
    ns, table_id = managed
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    writers, appends = 8, sized(5, 2)
    failures: list[BaseException] = []
    landed = [0] * writers
    gave_up: list[str] = []  # Lance's retry window ran out; appended again

    def append(own: Any) -> None:
        """One append, made again while Lance reports that its retry window ran out."""
        for attempt in range(LANCE_WINDOW_RETRIES + 1):
            try:
                lance.write_dataset(ROWS, namespace_client=own, table_id=table_id, mode="append")
                return
            except OSError as error:
                if LANCE_GAVE_UP not in str(error) or attempt == LANCE_WINDOW_RETRIES:
                    raise
                gave_up.append(str(error))

    def write(index: int) -> None:
        own = backend.connect()
        for _ in range(appends):
            try:
                append(own)
                landed[index] += 1
            except Exception as error:
                failures.append(error)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == [] and landed == [appends] * writers, (landed, failures, gave_up)
    total = 1 + writers * appends
    versions = [v.version for v in ns.list_table_versions({"id": table_id}).versions]
    assert versions == list(range(1, total + 1))
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 2 * total


def test_writers_racing_past_a_version_committed_around_the_catalog_all_land(
    backend: Harness, managed
):
    """The adoption is a catalog write: 4 writers that meet the same version committed around
    the catalog at once adopt it once, and all their appends land after it, in order."""
    needs_conditional_updates(backend)
    ns, table_id = managed
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="append")
    location = ns.describe_table({"id": table_id}).location
    lance.dataset(location).optimize.compact_files()  # around the catalog
    compacted = lance.dataset(location).version
    writers = 4
    failures: list[BaseException] = []
    start = threading.Barrier(writers)

    def write() -> None:
        own = backend.connect()
        start.wait(timeout=60)
        try:
            lance.write_dataset(ROWS, namespace_client=own, table_id=table_id, mode="append")
        except Exception as error:
            failures.append(error)

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads) and failures == [], failures
    latest = lance.dataset(namespace_client=ns, table_id=table_id)
    assert latest.version == compacted + writers == lance.dataset(location).version
    assert ns.describe_table({"id": table_id}).properties["version"] == str(latest.version)
    assert latest.count_rows() == 2 * (2 + writers)
    assert lance.dataset(location, version=compacted).count_rows() == 4
    versions = [v.version for v in ns.list_table_versions({"id": table_id}).versions]
    assert versions == list(range(1, latest.version + 1))


WORKER = str(Path(__file__).parent / "support" / "commit_worker.py")


def run_worker(backend: Harness, table_id: list[str], appends: int, *flags: str):
    props = json.dumps({**backend.properties(), "managed_by": "impl"})
    return subprocess.Popen(
        [sys.executable, WORKER, backend.name, props, "$".join(table_id), str(appends), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RUST_LOG": "error"},
    )


def test_writer_processes_lose_nothing(backend: Harness, managed):
    needs_conditional_updates(backend)
    ns, table_id = managed
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    # 4 processes (2 in the fast tier: still a race between processes, each costs its imports)
    workers = [run_worker(backend, table_id, sized(5, 2)) for _ in range(sized(4, 2))]
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert all(code == 14 for report in reports for code in report["codes"]), reports
    total = 1 + sum(report["landed"] for report in reports)
    assert [v.version for v in ns.list_table_versions({"id": table_id}).versions] == list(
        range(1, total + 1)
    )
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 2 * total


def test_writer_killed_before_the_catalog_update(backend: Harness, managed):
    ns, table_id = managed
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    victim = run_worker(backend, table_id, 1, "--die-before-catalog-update")
    victim.communicate(timeout=120)
    assert victim.returncode == -signal.SIGKILL
    location = ns.describe_table({"id": table_id}).location
    staged = [p for p in Path(location, "_versions").iterdir() if "manifest-" in p.name]
    assert len(staged) >= 2  # the victim's manifest was written, then it died
    assert ns.describe_table({"id": table_id}).properties["version"] == "1"
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 2
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="append")
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 4
    assert ns.describe_table({"id": table_id}).properties["version"] == "2"


def test_writer_killed_after_the_catalog_update(backend: Harness, managed):
    """A writer dies after its commit is in the catalog, before it moved the manifest to the
    final name. The first answer after it names the final manifest all the same: the answering
    namespace makes the copy (the Lance inside lance-spark 0.4.0, handed a staging name, fails
    its own finalize with "put_if_exists is not supported for namespace-backed stores").
    Nothing is lost."""
    ns, table_id = managed
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="create")
    victim = run_worker(backend, table_id, 1, "--die-after-catalog-update")
    victim.communicate(timeout=120)
    assert victim.returncode == -signal.SIGKILL
    assert ns.describe_table({"id": table_id}).properties["version"] == "2"
    location = ns.describe_table({"id": table_id}).location
    final_name = manifest_name(2, "V2")
    assert not Path(location, "_versions", final_name).exists()  # the state the victim left
    latest = ns.describe_table_version({"id": table_id}).version
    assert latest.manifest_path.endswith(f"/_versions/{final_name}"), latest
    assert Path(location, "_versions", final_name).is_file()
    newest = ns.list_table_versions({"id": table_id, "descending": True, "limit": 1})
    assert newest.versions[0].manifest_path == latest.manifest_path
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 4
    lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="append")
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 6
    assert [v.version for v in ns.list_table_versions({"id": table_id}).versions] == [1, 2, 3]
