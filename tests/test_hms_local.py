"""A real local Hive Metastore 2.3 (from the pyspark jars): lifecycle, Lance tables, table locks.

One metastore serves the whole module; the tests that kill and stop it run last.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pymetastore.hive_metastore.ttypes import (
    AlreadyExistsException,
    CheckLockRequest,
    Database,
    FieldSchema,
    LockComponent,
    LockLevel,
    LockRequest,
    LockResponse,
    LockState,
    LockType,
    SerDeInfo,
    ShowLocksRequest,
    StorageDescriptor,
    Table,
    UnlockRequest,
)

from lance_metastore.hive import class_archive
from lance_metastore.hive import local as hms_local
from lance_metastore.hive.local import (
    FAST_LOCK_EXPIRY,
    STATE_FILE,
    JavaNotFoundError,
    LocalMetastore,
    MetastoreAlreadyRunningError,
    MetastoreStartError,
    find_pyspark_jars,
    java_executable,
)

LANCE_FILTER = 'hive_filter_field_params__table_type like "(?i)lance"'


def _java_missing() -> str | None:
    try:
        java_executable()
    except JavaNotFoundError as error:
        return str(error)
    return None


pytestmark = pytest.mark.skipif(_java_missing() is not None, reason=str(_java_missing()))


@pytest.fixture(scope="module")
def metastore(java: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalMetastore]:
    with LocalMetastore(tmp_path_factory.mktemp("hms")) as hms:
        yield hms


def _create_database(client, name: str) -> None:
    with contextlib.suppress(AlreadyExistsException):
        client.create_database(Database(name=name, description="test", parameters={}))


def _create_table(client, db: str, name: str, location: Path | str, table_type: str | None) -> None:
    parameters = {"EXTERNAL": "TRUE"}
    if table_type is not None:
        parameters["table_type"] = table_type
    sd = StorageDescriptor(
        cols=[FieldSchema(name="id", type="bigint", comment="")],
        location=location if isinstance(location, str) else location.as_uri(),
        serdeInfo=SerDeInfo(name=name, parameters={}),
        parameters={},
    )
    table = Table(
        tableName=name,
        dbName=db,
        owner="tester",
        sd=sd,
        partitionKeys=[],
        parameters=parameters,
        tableType="EXTERNAL_TABLE",
    )
    client.create_table(table)


def _table_lock(db: str, table: str) -> LockRequest:
    component = LockComponent(
        type=LockType.EXCLUSIVE, level=LockLevel.TABLE, dbname=db, tablename=table
    )
    return LockRequest(component=[component], user="tester", hostname=socket.gethostname())


def test_started_metastore_keeps_its_state_in_the_data_dir(metastore: LocalMetastore) -> None:
    assert metastore.port > 0
    assert metastore.uri == f"thrift://127.0.0.1:{metastore.port}"
    assert metastore.pid is not None
    assert metastore.is_running()
    data_dir = metastore.data_dir
    state = json.loads((data_dir / STATE_FILE).read_text())
    assert (state["pid"], state["port"]) == (metastore.pid, metastore.port)
    assert metastore.log_path.parent == data_dir
    assert "Started the new metaserver" in metastore.log_path.read_text()
    assert (data_dir / "metastore_db").is_dir()
    assert (data_dir / "derby.log").is_file()
    assert not (Path.cwd() / "derby.log").exists()
    assert (data_dir / "conf" / "hive-site.xml").is_file()


def test_lance_tables_are_found_by_a_case_insensitive_parameter_filter(
    metastore: LocalMetastore, tmp_path: Path
) -> None:
    with metastore.client() as client:
        _create_database(client, "filters")
        _create_table(client, "filters", "upper", tmp_path / "upper", "LANCE")
        _create_table(client, "filters", "lower", tmp_path / "lower", "lance")
        _create_table(client, "filters", "iceberg", tmp_path / "iceberg", "ICEBERG")
        _create_table(client, "filters", "plain", tmp_path / "plain", None)

        table = client.get_table("filters", "upper")
        assert table.tableType == "EXTERNAL_TABLE"
        # No statistics parameters added behind the client's back.
        assert table.parameters.keys() - {"transient_lastDdlTime"} == {"EXTERNAL", "table_type"}
        found = client.get_table_names_by_filter("filters", LANCE_FILTER, -1)
        assert sorted(found) == ["lower", "upper"]


def test_exclusive_table_lock_makes_a_second_request_wait(
    metastore: LocalMetastore, tmp_path: Path
) -> None:
    with metastore.client() as first, metastore.client() as second:
        _create_database(first, "locks")
        _create_table(first, "locks", "orders", tmp_path / "orders", "LANCE")

        held: LockResponse = first.lock(_table_lock("locks", "orders"))
        assert held.state == LockState.ACQUIRED
        waiting: LockResponse = second.lock(_table_lock("locks", "orders"))
        assert waiting.state == LockState.WAITING
        assert second.check_lock(CheckLockRequest(lockid=waiting.lockid)).state == (
            LockState.WAITING
        )

        first.unlock(UnlockRequest(lockid=held.lockid))
        assert second.check_lock(CheckLockRequest(lockid=waiting.lockid)).state == (
            LockState.ACQUIRED
        )
        second.unlock(UnlockRequest(lockid=waiting.lockid))
        assert not first.show_locks(ShowLocksRequest()).locks


def test_a_lock_whose_holder_stops_heartbeating_expires(java: str, tmp_path: Path) -> None:
    with (
        LocalMetastore(tmp_path / "hms", hive_conf=FAST_LOCK_EXPIRY) as hms,
        hms.client() as client,
    ):
        _create_database(client, "expiry")
        _create_table(client, "expiry", "orders", tmp_path / "orders", "LANCE")
        abandoned = client.lock(_table_lock("expiry", "orders"))
        assert abandoned.state == LockState.ACQUIRED

        deadline = time.monotonic() + 30
        while client.show_locks(ShowLocksRequest()).locks:
            assert time.monotonic() < deadline, "the abandoned lock never expired"
            time.sleep(0.2)
        fresh = client.lock(_table_lock("expiry", "orders"))
        assert fresh.state == LockState.ACQUIRED


def test_from_data_dir_finds_the_running_metastore(metastore: LocalMetastore) -> None:
    found = LocalMetastore.from_data_dir(metastore.data_dir)
    assert (found.pid, found.port, found.uri) == (metastore.pid, metastore.port, metastore.uri)
    assert found.is_running()
    status = found.status()
    assert status.running and status.process_alive and status.responding
    assert status.pid == metastore.pid


def test_from_data_dir_without_a_metastore(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no local metastore"):
        LocalMetastore.from_data_dir(tmp_path)


def test_a_second_start_on_the_same_data_dir_is_refused(metastore: LocalMetastore) -> None:
    with pytest.raises(MetastoreAlreadyRunningError, match="already runs"):
        LocalMetastore(metastore.data_dir).start()
    with pytest.raises(MetastoreAlreadyRunningError):
        metastore.start()
    assert metastore.is_running()


def test_kill_then_restart_keeps_the_data(metastore: LocalMetastore, tmp_path: Path) -> None:
    with metastore.client() as client:
        _create_database(client, "survivor")
        _create_table(client, "survivor", "kept", tmp_path / "kept", "LANCE")
    port, pid = metastore.port, metastore.pid

    metastore.kill()
    assert not metastore.is_running()
    assert not LocalMetastore.from_data_dir(metastore.data_dir).is_running()

    metastore.restart()
    assert metastore.port == port
    assert metastore.pid != pid
    with metastore.client() as client:
        assert "survivor" in client.get_all_databases()
        assert client.get_table_names_by_filter("survivor", LANCE_FILTER, -1) == ["kept"]
        lock = client.lock(_table_lock("survivor", "kept"))
        assert lock.state == LockState.ACQUIRED
        client.unlock(UnlockRequest(lockid=lock.lockid))


def test_a_metastore_can_be_stopped_through_its_data_dir(metastore: LocalMetastore) -> None:
    pid = metastore.pid
    assert pid is not None
    LocalMetastore.from_data_dir(metastore.data_dir).stop()  # as `lance-metastore hms stop` would
    assert not metastore.is_running()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    recorded = LocalMetastore.from_data_dir(metastore.data_dir)
    assert recorded.pid is None
    assert recorded.port == metastore.port
    assert not recorded.status().running
    metastore.stop()  # stopping a stopped metastore is a no-op


def test_start_on_a_busy_port_fails_clearly(java: str, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(MetastoreStartError, match=f"port {port} is in use"):
            LocalMetastore(tmp_path, port=port).start()


def test_an_os_chosen_port_taken_before_the_jvm_binds_it_is_replaced(
    java: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket() as busy:
        busy.bind(("", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        ports = iter([taken])
        real_free_port = hms_local._free_port
        monkeypatch.setattr(
            hms_local, "_free_port", lambda host: next(ports, None) or real_free_port(host)
        )
        with LocalMetastore(tmp_path) as metastore:
            assert metastore.port not in (0, taken)
            assert metastore.is_running()
        assert "Address already in use" in metastore.log_path.read_text()


def test_a_jvm_that_dies_at_startup_reports_its_log(java: str, tmp_path: Path) -> None:
    metastore = LocalMetastore(tmp_path, heap="1k")
    with pytest.raises(MetastoreStartError, match="exited") as raised:
        metastore.start(timeout=60)
    assert "heap" in str(raised.value).lower()
    assert not metastore.is_running()


def test_missing_java_names_the_package_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match="openjdk-17-jre-headless"):
        java_executable()
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match="Java 17"):
        java_executable()


def test_pyspark_ships_hive_metastore_and_derby() -> None:
    jars = find_pyspark_jars()
    assert any(jars.glob("hive-metastore-2.3.*.jar"))
    assert any(jars.glob("derby-*.jar"))


# --------------------------------------------------------------------------------------------
# Releases (the metastores themselves run in the session fixtures hms31_uri and hms4_uri)
# --------------------------------------------------------------------------------------------


def test_unknown_version_is_refused(tmp_path):
    from lance_metastore.hive.local import LocalMetastore, MetastoreError

    with pytest.raises(MetastoreError, match="unknown Hive Metastore version '9'"):
        LocalMetastore(tmp_path, version="9")


def test_version_is_recorded_for_later_processes(hms4_uri, tmp_path_factory):
    from lance_metastore.hive.local import LocalMetastore

    data_dirs = [p for p in tmp_path_factory.getbasetemp().iterdir() if p.name.startswith("hms4")]
    found = LocalMetastore.from_data_dir(data_dirs[0])
    assert (found.version, found.release_version, found.uri) == ("4", "4.0.1", hms4_uri)
    assert found.status().running and found.status().version == "4"
    assert "version='4'" in repr(found)


def test_a_data_dir_keeps_its_release(hms31_uri, tmp_path_factory):
    from lance_metastore.hive.local import LocalMetastore, MetastoreError

    data_dir = next(
        p for p in tmp_path_factory.getbasetemp().iterdir() if p.name.startswith("hms3.1")
    )
    with pytest.raises(MetastoreError, match=r"holds a Hive Metastore 3\.1 database"):
        LocalMetastore(data_dir, version="4").start()


def test_hms31_creates_and_alters_s3_tables_through_s3a(hms31_uri, stock_moto) -> None:
    """The 3.1 fixture runs with Hadoop's S3A on moto's S3 (``s3_endpoint``): the metastore
    checks and creates a new table's directory on S3 (for ``s3://`` and ``s3a://``), where
    without S3A it answers ``No FileSystem for scheme "s3"``."""
    bucket = f"hms-{os.urandom(4).hex()}"
    stock_moto.client("s3").create_bucket(Bucket=bucket)
    host, port = hms31_uri.removeprefix("thrift://").rsplit(":", 1)
    with hms_local.thrift_client(host, int(port)) as client:
        _create_database(client, "on_s3")
        for scheme in ("s3", "s3a"):
            _create_table(client, "on_s3", scheme, f"{scheme}://{bucket}/lake/{scheme}", "lance")
            table = client.get_table("on_s3", scheme)
            assert table.sd.location == f"{scheme}://{bucket}/lake/{scheme}"
            table.parameters["version"] = "2"
            client.alter_table("on_s3", scheme, table)
            assert client.get_table("on_s3", scheme).parameters["version"] == "2"
            client.drop_table("on_s3", scheme, False)
    listed = stock_moto.client("s3").list_objects_v2(Bucket=bucket, Prefix="lake/")
    assert {o["Key"] for o in listed.get("Contents", [])} == {"lake/s3/", "lake/s3a/"}


def test_s3_settings_are_hadoops_s3a_and_kept_private(tmp_path: Path) -> None:
    from lance_metastore.hive.local import MetastoreError, s3_site_properties

    on_premises = s3_site_properties("http://127.0.0.1:9000", ("key-id", "the-secret"))
    assert on_premises["fs.s3.impl"] == on_premises["fs.s3a.impl"]
    assert on_premises["fs.s3a.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert on_premises["fs.s3a.path.style.access"] == "true"
    assert on_premises["fs.s3a.connection.ssl.enabled"] == "false"
    assert on_premises["fs.s3a.secret.key"] == "the-secret"
    assert "fs.s3a.endpoint" not in s3_site_properties("")  # AWS itself: Hadoop's default
    assert "fs.s3a.access.key" not in s3_site_properties("")  # Hadoop's credential chain

    metastore = LocalMetastore(
        tmp_path,
        version="3.1",
        s3_endpoint="http://127.0.0.1:9000",
        s3_credentials=("key-id", "the-secret"),
    )
    metastore._port = 1
    metastore._write_conf()
    metastore._write_state()
    for written in (metastore.conf_dir / "core-site.xml", tmp_path / STATE_FILE):
        assert "the-secret" in written.read_text()
        assert written.stat().st_mode & 0o777 == 0o600
    found = LocalMetastore.from_data_dir(tmp_path)
    assert (found.s3_endpoint, found.s3_credentials) == (
        metastore.s3_endpoint,
        ("key-id", "the-secret"),
    )
    assert "the-secret" not in repr(found)
    for version in ("2.3", "4"):
        with pytest.raises(
            MetastoreError, match=r"cannot hold s3:// locations here; use version 3\.1"
        ):
            LocalMetastore(tmp_path / version, version=version, s3_endpoint="")


def test_offline_fetch_names_the_missing_artifact(tmp_path, monkeypatch):
    from lance_metastore.hive.distributions import HiveRelease, ReleaseFetchError, fetch_release

    monkeypatch.setenv("LANCE_METASTORE_HMS_CACHE", str(tmp_path / "cache"))
    missing = HiveRelease("x", "0.0-none", ("org.apache.hive:hive-standalone-metastore:0.0-none",))
    with pytest.raises(ReleaseFetchError) as caught:
        fetch_release(missing, offline=True)  # Maven's own repository, never the network
    message = str(caught.value)
    assert "hive-standalone-metastore" in message and "0.0-none" in message
    assert not (tmp_path / "cache" / "0.0-none" / "lib").exists()  # nothing half-fetched kept


@pytest.mark.parametrize("uri_fixture", ["hive_metastore_uri", "hms31_uri", "hms4_uri"])
def test_every_release_listens_on_loopback_only(uri_fixture: str, request) -> None:
    """HMS 2.3 and 3.1 have no bind setting (their Thrift server asks for every interface):
    the launcher's bind guard puts them on the metastore's host; 4.0 binds there itself."""
    if os.environ.get("LANCE_METASTORE_TEST_HMS_URI") and uri_fixture == "hive_metastore_uri":
        pytest.skip("an external metastore is configured")
    port = int(request.getfixturevalue(uri_fixture).rsplit(":", 1)[1])
    addresses = hms_local.listening_addresses(port)
    if addresses is None:
        pytest.skip("the kernel does not list listening sockets here (not Linux)")
    assert addresses == ["127.0.0.1"]


def test_the_bind_guard_is_used_only_where_the_release_cannot_bind(tmp_path: Path) -> None:
    def command(version: str, host: str) -> list[str]:
        metastore = LocalMetastore(tmp_path / f"{version}-{host}", host=host, version=version)
        return metastore._command("java", tmp_path)

    for version in ("2.3", "3.1"):
        guarded = command(version, "127.0.0.1")
        assert "-Dlance.metastore.bind.host=127.0.0.1" in guarded
        assert "--add-opens=java.base/java.net=ALL-UNNAMED" in guarded
        assert "setSocketFactory" in guarded[-1]
        everywhere = command(version, "0.0.0.0")  # asked for every interface: no guard
        assert not any("bind.host" in arg or "setSocketFactory" in arg for arg in everywhere)
    assert not any("setSocketFactory" in arg for arg in command("4", "127.0.0.1"))


def _mapped_files(pid: int) -> set[str]:
    with open(f"/proc/{pid}/maps") as maps:
        return {line.split(maxsplit=5)[5].strip() for line in maps if len(line.split()) == 6}


def test_the_first_start_records_a_class_archive_that_later_starts_map(
    java: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start without an archive records one; a clean stop (here through the data directory,
    as `lance-metastore hms stop` does) puts it in the cache; the next start maps it."""
    monkeypatch.setenv("LANCE_METASTORE_HMS_CACHE", str(tmp_path / "cache"))
    archives = tmp_path / "cache" / "class-archives"
    first = LocalMetastore(tmp_path / "first")
    with first:
        assert any("-XX:ArchiveClassesAtExit=" in arg for arg in _cmdline(first.pid))
        LocalMetastore.from_data_dir(first.data_dir).stop()
    [archive] = archives.iterdir()
    assert archive.suffix == ".jsa" and archive.stat().st_size > 1_000_000
    assert not (first.data_dir / class_archive.PENDING_NAME).exists()

    with LocalMetastore(tmp_path / "second") as second:
        assert f"-XX:SharedArchiveFile={archive}" in _cmdline(second.pid)
        assert str(archive) in _mapped_files(second.pid)
        with second.client() as client:
            _create_database(client, "after_archive")
            assert "after_archive" in client.get_all_databases()
        log = second.log_path.read_text()
    assert " INFO [main] metastore.HiveMetaStore: " in log  # this project's log layout, not Hive's
    assert list(archives.iterdir()) == [archive]


def test_a_killed_recording_is_dropped_and_a_damaged_archive_is_ignored(
    java: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANCE_METASTORE_HMS_CACHE", str(tmp_path / "cache"))
    killed = LocalMetastore(tmp_path / "killed")
    killed.start()
    killed.kill()
    assert not (tmp_path / "cache" / "class-archives").exists()
    assert not (killed.data_dir / class_archive.PENDING_NAME).exists()

    # The archive a metastore of the same options would map: the one the killed one named.
    archive = Path(json.loads((killed.data_dir / STATE_FILE).read_text())["class_archive"])
    assert archive.parent == tmp_path / "cache" / "class-archives"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"not a class-data archive" * 1000)
    with LocalMetastore(tmp_path / "damaged") as damaged:  # the JVM starts without it
        assert f"-XX:SharedArchiveFile={archive}" in _cmdline(damaged.pid)
        with damaged.client() as client:
            assert "default" in client.get_all_databases()


def _cmdline(pid: int | None) -> list[str]:
    assert pid is not None
    with open(f"/proc/{pid}/cmdline") as cmdline:
        return cmdline.read().split("\0")


def test_a_cache_that_cannot_take_the_archive_never_fails_a_stop(
    java: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache's parent should be")
    monkeypatch.setenv("LANCE_METASTORE_HMS_CACHE", str(blocker / "cache"))
    metastore = LocalMetastore(tmp_path / "data")
    metastore.start()
    with caplog.at_level("WARNING", logger="lance_metastore.hms_local"):
        metastore.stop()
    assert not metastore.is_running()
    assert "the JVM class-data archive was not kept" in caplog.text
    assert not (metastore.data_dir / class_archive.PENDING_NAME).exists()


def test_keeping_an_archive_deletes_the_long_unused_and_all_but_the_latest_few(
    tmp_path: Path,
) -> None:
    cache, data_dir = tmp_path / "class-archives", tmp_path / "data"
    cache.mkdir()
    data_dir.mkdir()
    now = time.time()
    old = cache / "old.jsa"
    old.write_bytes(b"x")
    os.utime(old, (now, now - (class_archive.UNUSED_DAYS + 1) * 86400))
    recent = [cache / f"recent{n}.jsa" for n in range(class_archive.KEPT_ARCHIVES)]
    for age, archive in enumerate(recent):
        archive.write_bytes(b"x")
        os.utime(archive, (now, now - 60 * (age + 1)))  # recent0 mapped last
    (data_dir / class_archive.PENDING_NAME).write_bytes(b"recorded classes")

    class_archive.keep_recording(data_dir, cache / "new.jsa", stopped_cleanly=True)

    assert (cache / "new.jsa").read_bytes() == b"recorded classes"
    kept = {path.name for path in cache.iterdir()}
    assert kept == {"new.jsa", *(archive.name for archive in recent[:-1])}
    assert not (data_dir / class_archive.PENDING_NAME).exists()


# --------------------------------------------------------------------------------------------
# A database Derby cannot open: the reason in one line
# --------------------------------------------------------------------------------------------

# What Derby 10.14 writes into derby.log when it meets a database that Derby 10.16 made (the
# SQL demo's pyspark 3.5 on the main demo's directory): the cause under two wrappers.
DERBY_OTHER_RELEASE_LOG = """\
----------------------------------------------------------------
Thu Nov 26 10:00:00 UTC 2026:
Booting Derby version The Apache Software Foundation - Apache Derby - 10.14.2.0
ERROR XJ040: Failed to start database '/x/hms/metastore_db' with class loader
 jdk.internal.loader.ClassLoaders$AppClassLoader@5a07e868, see the next exception for details.
Caused by: ERROR XJ001: Java exception: 'ERROR XSLAN: Database at /x/hms/metastore_db has an
Caused by: ERROR XSLAN: Database at /x/hms/metastore_db has an incompatible format with the \
current version of the software.  The database was created by or upgraded by version 10.16.
\tat org.apache.derby.iapi.error.StandardException.newException(Unknown Source)
"""


def test_derby_cause_is_the_innermost_error_in_one_line(tmp_path: Path) -> None:
    log = tmp_path / "derby.log"
    log.write_text("ERROR XBM0A: an earlier start's error\n" + DERBY_OTHER_RELEASE_LOG)
    cause = hms_local.derby_cause(log, offset=len("ERROR XBM0A: an earlier start's error\n"))
    assert cause is not None and "\n" not in cause
    assert cause.startswith("XSLAN: Database at /x/hms/metastore_db has an incompatible format")
    assert "version 10.16" in cause and "--data-dir" in cause
    assert hms_local.derby_cause(tmp_path / "missing.log") is None
    log.write_text("Booting Derby version 10.16\n")
    assert hms_local.derby_cause(log) is None


@pytest.mark.timeout(300)
def test_a_database_derby_cannot_open_says_why_in_one_line(java: str, tmp_path: Path) -> None:
    """A start on a database Derby refuses fails with Derby's reason on one line: no log
    tail, no class-data-sharing ``[cds]`` notices."""
    with LocalMetastore(tmp_path) as metastore:
        assert metastore.is_running()
    # Break the database the way an interrupted creation leaves it.
    (tmp_path / "metastore_db" / "service.properties").unlink()
    with pytest.raises(MetastoreStartError) as raised:
        LocalMetastore(tmp_path).start(timeout=180)
    message = str(raised.value)
    assert "\n" not in message, message
    assert "could not open its Derby database" in message
    assert "XBM0A" in message and "service.properties" in message
    assert "[cds]" not in message
