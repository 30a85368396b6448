"""Many replicas over one catalog (issue 41, item 3): 2 replicas x 2 workers of ``serve``
behind a loopback round-robin balancer, 32 clients (threads, each with its own keep-alive
client: pylance's REST client) for a bounded time: 28 append to catalog-managed tables (their
own and one they share), 4 declare, rename and drop. Every acknowledged commit must be in the
catalog: its recorded version is the count of acknowledged commits, its versions are 1..N with
no gap, and every row is in the table; both replicas then stop cleanly on SIGTERM.

Heavy (four server processes, a catalog, Lance writers): the full tier only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance_namespace import (
    DeclareTableRequest,
    DropTableRequest,
    ListNamespacesRequest,
    RenameTableRequest,
    connect,
)
from support.harness import Harness
from support.round_robin import RoundRobin
from support.waiting import wait_until

pytestmark = pytest.mark.slow

ROWS = pa.table({"id": pa.array([1, 2], pa.int64())})
CLIENTS = 32
CHURNERS = 4  # declare, rename, drop
WRITERS = CLIENTS - CHURNERS  # append
SECONDS = 20.0
LANCE_GAVE_UP = "Too many concurrent writers"


def start_replica(harness: Harness) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "lance_metastore.cli", "--impl", harness.name]
    for key, value in {**harness.properties(), "managed_by": "impl"}.items():
        command += ["--prop", f"{key}={value}"]
    command += ["serve", "--port", "0", "--workers", "2", "--max-in-flight-per-client", "512"]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "RUST_LOG": "error"},
    )
    url = process.stdout.readline().strip()  # type: ignore[union-attr]
    assert url.startswith("http://"), "serve did not start"
    return process, url


def test_two_replicas_of_two_workers_lose_no_commit_on_glue(glue: Harness):
    two_replicas_of_two_workers_lose_no_commit(glue)


def test_two_replicas_of_two_workers_lose_no_commit_on_hms_2_3(hive2: Harness):
    two_replicas_of_two_workers_lose_no_commit(hive2)


def test_two_replicas_of_two_workers_lose_no_commit_on_hms_4(hive3_hms4: Harness):
    two_replicas_of_two_workers_lose_no_commit(hive3_hms4)


def two_replicas_of_two_workers_lose_no_commit(harness: Harness) -> None:
    harness.reset()
    if not getattr(harness, "conditional_updates", True):
        pytest.skip("this catalog cannot arbitrate concurrent commits")
    direct = harness.connect(managed_by="impl")
    db = harness.db(harness.unique("replicas"))
    direct.create_namespace({"id": db})
    replicas = [start_replica(harness) for _ in range(2)]
    try:
        with RoundRobin([url for _, url in replicas]) as front:
            for process, url in replicas:  # every worker up before the clock starts

                def answers(process: subprocess.Popen[str] = process, url: str = url) -> bool:
                    assert process.poll() is None, "a replica exited"
                    try:
                        connect("rest", {"uri": url}).list_namespaces(ListNamespacesRequest(id=[]))
                    except Exception:
                        return False
                    return True

                wait_until(answers, 60, f"the replica at {url} to answer", interval=0.2)
            acknowledged: dict[str, int] = {}
            failures: list[str] = []
            lock = threading.Lock()
            stop = time.monotonic() + SECONDS

            def writer(index: int) -> None:
                client: Any = connect("rest", {"uri": front.url})
                table = [*db, f"t{index}"]
                shared = [*db, "shared"]
                try:
                    lance.write_dataset(
                        ROWS, namespace_client=client, table_id=table, mode="create"
                    )
                except Exception as error:
                    failures.append(f"create {table}: {error}")
                    return
                count = {"/".join(table): 1}
                turn = 0
                while time.monotonic() < stop:
                    target = shared if turn % 3 == 2 else table
                    turn += 1
                    try:
                        lance.write_dataset(
                            ROWS, namespace_client=client, table_id=target, mode="append"
                        )
                    except OSError as error:
                        if LANCE_GAVE_UP in str(error):
                            continue  # Lance's own retry window; nothing was acknowledged
                        failures.append(f"append {target}: {error}")
                        continue
                    key = "/".join(target)
                    count[key] = count.get(key, 0) + 1
                with lock:
                    for key, value in count.items():
                        acknowledged[key] = acknowledged.get(key, 0) + value

            churned: list[int] = []

            def churn(index: int) -> None:
                client: Any = connect("rest", {"uri": front.url})
                turn = 0
                while time.monotonic() < stop:
                    turn += 1
                    declared, renamed = f"d{index}_{turn}", f"r{index}_{turn}"
                    try:
                        # storage-managed: Glue renames those, and refuses a managed one
                        client.declare_table(
                            DeclareTableRequest(
                                id=[*db, declared], properties={"managed_by": "storage"}
                            )
                        )
                        client.rename_table(
                            RenameTableRequest(id=[*db, declared], new_table_name=renamed)
                        )
                        client.drop_table(DropTableRequest(id=[*db, renamed]))
                    except Exception as error:
                        failures.append(f"churn {index} turn {turn}: {error}")
                        return
                with lock:
                    churned.append(turn)

            lance.write_dataset(
                ROWS, namespace_client=direct, table_id=[*db, "shared"], mode="create"
            )
            acknowledged["/".join([*db, "shared"])] = 1
            threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
            threads += [threading.Thread(target=churn, args=(i,)) for i in range(CHURNERS)]
            assert len(threads) == CLIENTS
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(SECONDS + 120)
            assert not any(thread.is_alive() for thread in threads)
            assert failures == []
            assert all(count > 0 for count in front.connections), front.connections
            assert len(churned) == CHURNERS and all(churned), churned
            assert len(acknowledged) == WRITERS + 1  # each writer's table and the shared one

        for key, commits in acknowledged.items():
            table_id = key.split("/")
            versions = [
                v.version
                for v in direct.list_table_versions({"id": table_id, "limit": 10_000}).versions
            ]
            assert sorted(versions) == list(range(1, commits + 1)), (key, commits, versions)
            # the catalog's own record of the latest version: no commit beyond the acknowledged
            recorded = direct.describe_table({"id": table_id}).properties["version"]
            assert recorded == str(commits), (key, commits, recorded)
            rows = lance.dataset(namespace_client=direct, table_id=table_id).count_rows()
            assert rows == 2 * commits, (key, rows, commits)
        leftovers = direct.list_tables({"id": db}).tables
        assert sorted(leftovers) == sorted(["shared", *(f"t{i}" for i in range(WRITERS))])
    finally:
        for process, _ in replicas:
            process.send_signal(signal.SIGTERM)
        for process, _ in replicas:
            try:
                assert process.wait(60) == 0
            finally:
                if process.poll() is None:
                    process.kill()
