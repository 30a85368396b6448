"""The claim on a location (rules/claims.py): of racing takers exactly one wins, also when
they race to take over a claim its holder left behind (issue 38).

Local claims run against the file system, across threads and processes (a holder killed
with SIGKILL leaves its marker); S3 claims against the Glue emulator's S3 and moto's server
as shipped: both honour ``If-None-Match``/``If-Match`` on ``PutObject``/``DeleteObject``, but
only the emulator makes the check and the write one step, as AWS does, so races are asserted
there alone.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lance_namespace.errors import ConcurrentModificationError, ServiceUnavailableError

from lance_metastore.rules import claims
from lance_metastore.rules.locations import Location

TAKERS = 6


def _race(take: Callable[[], claims.Release]) -> list[claims.Release]:
    """``TAKERS`` threads call ``take`` at once; the releases of those that won."""
    barrier = threading.Barrier(TAKERS)
    won: list[claims.Release] = []
    errors: list[BaseException] = []

    def taker() -> None:
        barrier.wait()
        try:
            won.append(take())
        except claims.ClaimTaken:
            pass
        except BaseException as error:  # surfaced below, not swallowed by the thread
            errors.append(error)

    threads = [threading.Thread(target=taker) for _ in range(TAKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    return won


# ---------------------------------------------------------------------------------------------
# Local files
# ---------------------------------------------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys, time
    from lance_metastore.rules import claims
    from lance_metastore.rules.locations import Location
    at = lambda text: Location.parse(text, None, "t")
    claims.claim(at(sys.argv[1]), at(sys.argv[2]), {})
    print("held", flush=True)
    time.sleep(600)
    """
)


def _store(root: Path | str) -> Location:
    store = claims.store_under(Location.parse(str(root), None, "root"))
    assert store is not None
    return store


def _holder(location: Location, store: Location) -> subprocess.Popen[str]:
    """Another process holding the claim on ``location`` (until killed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(location), str(store)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "held"
    return process


def test_local_racing_claims_exactly_one_wins(tmp_path: Path):
    store = _store(tmp_path)
    for round_ in range(5):
        location = Location.parse(str(tmp_path / f"r{round_}" / "t.lance"), None, "t")
        won = _race(lambda location=location: claims.claim(location, store, {}))
        assert len(won) == 1
        won[0]()
        assert not (tmp_path / f"r{round_}").exists()  # the location is never touched
        claims.claim(location, store, {})()  # released: the next claim wins


def test_nested_racers_conflict_and_siblings_do_not(tmp_path: Path):
    """An outer and an inner location racing (declares in two namespaces under one allowed
    prefix): exactly one wins. Two sibling tables never conflict."""
    store = _store(tmp_path)
    for round_ in range(5):
        outer = Location.parse(str(tmp_path / f"r{round_}" / "x"), None, "t")
        takers = [outer, outer.child("y.lance")] * (TAKERS // 2)

        def take(takers: list[Location] = takers) -> claims.Release:
            return claims.claim(takers.pop(), store, {})  # list.pop is atomic

        won = _race(take)
        assert len(won) == 1
        won[0]()
    parent = Location.parse(str(tmp_path / "db"), None, "t")
    first = claims.claim(parent.child("a.lance"), store, {})
    claims.claim(parent.child("b.lance"), store, {})()
    with pytest.raises(claims.ClaimTaken):
        claims.claim(parent, store, {})
    first()


def test_a_claim_never_writes_at_the_location(tmp_path: Path):
    """Read-only data is claimed (the claim lives in the store); an unwritable store answers
    17 naming the claim store, not the data."""
    data = tmp_path / "ro" / "t.lance"
    data.mkdir(parents=True)
    os.chmod(data, 0o555)
    try:
        location = Location.parse(str(data), None, "t")
        claims.claim(location, _store(tmp_path / "root"), {})()
        assert list(data.iterdir()) == []
        plain = tmp_path / "plain"  # no directory can be made at the location (even as root)
        plain.write_text("")
        claims.claim(Location.parse(str(plain / "t.lance"), None, "t"), _store(tmp_path), {})()
        blocked = tmp_path / "a-file"  # the store cannot be made below a file (even as root)
        blocked.write_text("")
        with pytest.raises(ServiceUnavailableError, match="claim store") as caught:
            claims.claim(location, _store(blocked), {})
        assert str(data) not in str(caught.value)
    finally:
        os.chmod(data, 0o755)


def test_a_dead_holders_local_claim_is_taken_over_by_exactly_one(tmp_path: Path):
    """A holder in another process excludes every taker while it lives; killed (SIGKILL, its
    claim file left behind), its claim is free without any clock, and of several takers
    racing for it exactly one wins."""
    store = _store(tmp_path)
    location = Location.parse(str(tmp_path / "db" / "t.lance"), None, "t")
    holder = _holder(location, store)
    try:
        with pytest.raises(claims.ClaimTaken):
            claims.claim(location, store, {})
    finally:
        holder.kill()
        holder.wait(30)
    assert Path(store.key, claims.claim_name(location)).exists()  # left behind
    won = _race(lambda: claims.claim(location, store, {}))
    assert len(won) == 1
    with pytest.raises(claims.ClaimTaken):  # still held by the winner
        claims.claim(location, store, {})
    won[0]()
    claims.claim(location, store, {})()


def test_a_link_planted_as_a_claim_file_is_never_followed(tmp_path: Path):
    store = _store(tmp_path)
    location = Location.parse(str(tmp_path / "t.lance"), None, "t")
    os.makedirs(store.key)
    target = tmp_path / "elsewhere"
    os.symlink(target, os.path.join(store.key, claims.claim_name(location)))
    with pytest.raises(ServiceUnavailableError, match="claim store"):
        claims.claim(location, store, {})
    assert not target.exists()


# ---------------------------------------------------------------------------------------------
# S3 (the Glue emulator and moto's server as shipped)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(params=["emulator", "stock"])
def s3(request: pytest.FixtureRequest) -> tuple[Any, dict[str, str], str]:
    """An S3 client, the storage options naming the endpoint, and a fresh bucket: the Glue
    emulator's S3 (moto's, with conditional writes atomic as AWS documents) and moto's server
    as shipped, where a race's outcome is not asserted (see ``_atomic``)."""
    server = request.getfixturevalue(
        "glue_emulator" if request.param == "emulator" else "stock_moto"
    )
    bucket = f"claims-{uuid.uuid4().hex[:8]}"
    client = server.client("s3")
    client.create_bucket(Bucket=bucket)
    options = {
        "aws_endpoint": server.endpoint,
        "allow_http": "true",
        "aws_region": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    return client, options, bucket


def _atomic(request: pytest.FixtureRequest) -> None:
    """Races need conditional writes that are atomic: moto's server as shipped checks the
    condition and writes in two steps, so two racers can both succeed there."""
    if request.node.callspec.params.get("s3") == "stock":
        pytest.skip("moto's server checks If-Match/If-None-Match and writes in two steps")


def _marker(bucket: str, location: Location) -> dict[str, str]:
    store = _store(f"s3://{bucket}/lake")
    return {"Bucket": bucket, "Key": f"{store.key}/{claims.claim_name(location)}"}


def test_s3_racing_claims_exactly_one_wins(s3, request):
    _atomic(request)
    client, options, bucket = s3
    store = _store(f"s3://{bucket}/lake")
    for round_ in range(3):
        location = Location.parse(f"s3://{bucket}/lake/db/r{round_}.lance", None, "t")
        won = _race(lambda location=location: claims.claim(location, store, options))
        assert len(won) == 1
        won[0]()
        assert "Contents" not in client.list_objects_v2(Bucket=bucket, Prefix="lake/")


def test_an_s3_claim_of_a_foreign_bucket_is_made_in_the_store(s3):
    """A location in a bucket the server has no access to is claimed in its own store."""
    client, options, bucket = s3
    location = Location.parse("s3://someone-elses/data/t.lance", None, "t")
    release = claims.claim(location, _store(f"s3://{bucket}/lake"), options)
    client.head_object(**_marker(bucket, location))
    release()


def test_a_stale_s3_claim_is_taken_over_by_exactly_one(s3, request):
    """A claim older than the lease, on the store's clock (its ``Date`` minus the claim's
    ``LastModified``), is taken over by a write conditional on the ETag read: of several
    takers exactly one wins; a fresh claim is never taken over."""
    _atomic(request)
    client, options, bucket = s3
    store = _store(f"s3://{bucket}/lake")
    location = Location.parse(f"s3://{bucket}/lake/db/t.lance", None, "t")
    client.put_object(**_marker(bucket, location), Body=b"left by a dead process")
    with pytest.raises(claims.ClaimTaken):  # fresh under the real lease
        claims.claim(location, store, options)
    time.sleep(2.1)  # LastModified and Date have whole seconds
    won = _race(lambda: claims.claim(location, store, options, stale_after=1.0))
    assert len(won) == 1
    with pytest.raises(claims.ClaimTaken):  # the winner's claim is fresh
        claims.claim(location, store, options, stale_after=60.0)
    won[0]()
    assert "Contents" not in client.list_objects_v2(Bucket=bucket, Prefix="lake/")


def test_a_claim_is_never_judged_older_than_it_is_across_a_second_boundary(s3):
    """``Date`` and ``LastModified`` are whole seconds: a claim made at x.9 and read at
    (x+1).1 shows a difference of one second after 0.2 s. The lease is judged on that
    difference less one second, so a claim younger than its lease is never taken over,
    whichever side of a second boundary it was written and read on."""
    _client, options, bucket = s3
    store = _store(f"s3://{bucket}/lake")
    for round_ in range(3):
        location = Location.parse(f"s3://{bucket}/lake/db/tick{round_}.lance", None, "t")
        while time.time() % 1.0 < 0.75:  # write just before a second boundary
            time.sleep(0.05)
        release = claims.claim(location, store, options)
        deadline = time.monotonic() + 0.45  # read until just after it (younger than 0.5 s)
        while time.monotonic() < deadline:
            with pytest.raises(claims.ClaimTaken):
                claims.claim(location, store, options, stale_after=0.5)
        release()


def _emulated(request: pytest.FixtureRequest) -> Any:
    """The Glue emulator behind the ``s3`` fixture (its fault hooks), or skip on stock moto."""
    if request.node.callspec.params.get("s3") != "emulator":
        pytest.skip("needs the emulator's storage hooks")
    return request.getfixturevalue("glue_emulator")


def test_a_store_that_ignores_conditional_writes_answers_17(s3, request):
    """A store (or proxy) that drops If-None-Match would hand every racer the claim: the
    store is probed before its first claim and refused, naming why."""
    emulator = _emulated(request)
    client, options, bucket = s3
    location = Location.parse(f"s3://{bucket}/lake/db/t.lance", None, "t")
    with (
        emulator.ignoring_conditional_writes(),
        pytest.raises(ServiceUnavailableError, match="ignores conditional writes"),
    ):
        claims.claim(location, _store(f"s3://{bucket}/lake"), options)
    assert "Contents" not in client.list_objects_v2(Bucket=bucket, Prefix="lake/")


def test_a_claim_whose_answer_was_lost_is_still_ours(s3, request):
    """S3 applied the claim's put and its answer was lost (500): botocore sends it again, the
    retry meets the object it wrote (412), and that object is recognised as ours by its ETag,
    not taken for another request's claim that would block the location for the lease."""
    emulator = _emulated(request)
    client, options, bucket = s3
    store = _store(f"s3://{bucket}/lake")
    location = Location.parse(f"s3://{bucket}/lake/db/lost.lance", None, "t")
    claims.claim(Location.parse(f"s3://{bucket}/lake/db/x.lance", None, "t"), store, options)()
    with emulator.storage_fault(
        "PUT", r"/claims/[0-9a-f]{64}$", 500, "InternalError", times=1, after_apply=True
    ) as fault:
        release = claims.claim(location, store, options)
    assert fault.met == 1
    with pytest.raises(claims.ClaimTaken):  # held: by us
        claims.claim(location, store, options)
    release()
    claims.claim(location, store, options)()  # released: free again
    assert "Contents" not in client.list_objects_v2(Bucket=bucket, Prefix="lake/")


def test_a_claim_held_past_half_its_lease_refuses_to_write(s3, tmp_path):
    """Another request may take over an S3 claim once its lease runs out: a holder whose checks
    took more than half the lease answers 14 (retry) before it writes. Local claims hold until
    released: no lease."""
    _client, options, bucket = s3
    location = Location.parse(f"s3://{bucket}/lake/db/slow.lance", None, "t")
    store = _store(f"s3://{bucket}/lake")
    with claims.claimed(location, store, options, "Cannot declare", stale_after=0.4) as within:
        within()  # at once: fine
        time.sleep(0.25)
        with pytest.raises(ConcurrentModificationError, match=r"half its 0\.4 s lease"):
            within()
    local = Location.parse(str(tmp_path / "t.lance"), None, "t")
    with claims.claimed(local, _store(tmp_path), {}, "Cannot declare", stale_after=0.4) as within:
        time.sleep(0.25)
        within()


@pytest.mark.parametrize(
    ("date", "age"),
    [
        ("Sat, 28 Nov 2026 17:44:02 GMT", 2.0),
        ("Sat, 28 Nov 2026 17:44:02 -0000", 2.0),  # no zone: GMT, as HTTP dates are
        ("Sat, 28 Nov 2026 18:44:02 +0100", 2.0),
        ("Sat, 28 Nov 2026 17:44:02 GMT, Sat, 28 Nov 2026 17:44:03 GMT", 2.0),  # joined
        ("", None),
        (None, None),
        ("yesterday", None),
        ("Sat, 28 Nov 2026 17:44:02 +99999999999999999999", None),  # overflows: unreadable
    ],
)
def test_a_claims_age_is_read_from_the_stores_date(date: str | None, age: float | None) -> None:
    written = datetime.datetime(2026, 11, 28, 17, 44, 0, tzinfo=datetime.timezone.utc)
    assert claims.store_age(date, written) == age


def test_a_holder_past_its_lease_never_releases_the_takers_claim(s3):
    _client, options, bucket = s3
    store = _store(f"s3://{bucket}/lake")
    location = Location.parse(f"s3://{bucket}/lake/db/slow.lance", None, "t")
    slow = claims.claim(location, store, options)
    time.sleep(2.1)
    taker = claims.claim(location, store, options, stale_after=1.0)
    slow()  # conditional on its own ETag: the taker's claim stays
    with pytest.raises(claims.ClaimTaken):
        claims.claim(location, store, options)
    taker()
    claims.claim(location, store, options)()


# ---------------------------------------------------------------------------------------------
# Stores without a claim of their own, on Hive: the metastore's lock (HMS 2.3)
# ---------------------------------------------------------------------------------------------


def _hive_claim(client: Any, location: Location) -> claims.Release:
    """The Hive namespace's claim on ``location``, taken: its release (ClaimTaken on 5)."""
    from lance_namespace.errors import TableAlreadyExistsError

    claim = client._location_claim(location, "Cannot declare")
    try:
        claim.__enter__()
    except TableAlreadyExistsError:
        raise claims.ClaimTaken from None
    return lambda: claim.__exit__(None, None, None)


@pytest.mark.parametrize("flavour", ["hive2", "hive3_hms31", "hive3_hms4"])
def test_hive_claims_other_stores_through_its_lock_exactly_one_wins(
    request: pytest.FixtureRequest, flavour: str
):
    """hdfs/gs/az locations get no storage claim; on Hive the metastore's EXCLUSIVE lock,
    named after the canonical location, is the claim: of racing takers (each its own
    client) exactly one wins, and a released claim can be taken again (HMS 2.3, 3.1, 4.0)."""
    lake = "hdfs://namenode/lake"  # a root without a claim store: the metastore's lock
    harness = request.getfixturevalue(flavour)
    clients = [harness.connect(root=lake) for _ in range(TAKERS)]
    try:
        for round_ in range(3):
            text = f"hdfs://namenode/lake/r{round_}-{uuid.uuid4().hex}"
            location = Location.parse(text, None, "t")
            free = list(clients)

            def take(location: Location = location, free: list[Any] = free) -> claims.Release:
                return _hive_claim(free.pop(), location)  # list.pop is atomic

            won = _race(take)
            assert len(won) == 1
            won[0]()
            _hive_claim(clients[0], location)()  # released: free again
        other = Location.parse("gs://bucket/lake/t.lance", None, "t")
        first = _hive_claim(clients[0], other)
        with pytest.raises(claims.ClaimTaken):
            _hive_claim(clients[1], other)
        first()
        # A local root: its claim store arbitrates (rules/claims.py), no lock
        local = Location.parse("/nowhere/t.lance", None, "t")
        stored = [harness.connect(root="/nowhere") for _ in range(2)]
        _hive_claim(stored[0], local)
        _hive_claim(stored[1], local)()
        for client in stored:
            client.close()
    finally:
        for client in clients:
            client.close()
