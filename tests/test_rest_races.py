"""Eight REST clients racing through ``lance-metastore serve`` for a bounded time.

The server runs as the CLI runs it (a subprocess, ``--port 0``), over a backend whose tables
are catalog-managed (``managed_by=impl``), so every commit and every catalog write is
arbitrated by the catalog. Eight pylance REST clients (Lance's Rust ``RestNamespace``) mix,
for ``RUN_SECONDS``:

- appends (``insert_into_table``) to two shared tables that are never dropped;
- schema changes of the shared tables (``alter_table_add_columns`` of a nullable column, then
  ``alter_table_drop_columns``): each is a commit followed by the server's column sync, the
  conditional catalog write the REST spec has no route of its own for; appends leave the added
  column out, which a nullable column allows;
- creates (``create_table`` with data) and drops of tables of their own, then an append to the
  dropped table, which must answer 4 (TableNotFound).

Afterwards: no 5xx in the server's access log and no code 17/18 at a client; every append that
returned is in its table; the catalog's version is each shared table's latest; the catalog's
columns mirror the final schema; the server still answers.
"""

from __future__ import annotations

import functools
import io
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import lance
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from lance.namespace import RestNamespace
from lance_namespace import (
    AlterTableAddColumnsRequest,
    AlterTableDropColumnsRequest,
    CreateNamespaceRequest,
    CreateTableRequest,
    DescribeTableRequest,
    DropTableRequest,
    InsertIntoTableRequest,
)
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from support.examples import sized
from support.harness import Harness

from lance_metastore.rules.schema import catalog_columns

CLIENTS = 8
RUN_SECONDS = sized(20.0, 6.0)  # of racing; 6 s in the fast tier
SHARED_TABLES = ("shared_a", "shared_b")
SERVER_START_SECONDS = 120


def ipc_stream(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def rows(*ids: int) -> bytes:
    return ipc_stream(pa.table({"id": pa.array(ids, pa.int64()), "v": [f"r{i}" for i in ids]}))


@pytest.fixture(params=["glue", "hive2", "hive3"])
def served(request: pytest.FixtureRequest, tmp_path: Path):
    """``lance-metastore --impl ... serve --port 0`` over the backend; (harness, url)."""
    harness: Harness = request.getfixturevalue(request.param)
    harness.reset()
    props = [f"--prop={key}={value}" for key, value in harness.properties().items()]
    log = (tmp_path / "server.log").open("w+")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lance_metastore.cli",
            "--impl",
            harness.name,
            *props,
            "--prop=managed_by=impl",
            "serve",
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env={**os.environ, "RUST_LOG": "error"},
    )
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), Path(log.name).read_text()[-2000:]
        yield harness, url, process, Path(log.name)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def code_of(error: BaseException) -> int | None:
    return int(error.code) if isinstance(error, LanceNamespaceError) else None


def retried_on_conflict(call: Callable[[], object], rng: random.Random, attempts: int = 6) -> None:
    """Make ``call`` as a client does when Lance refuses a schema change preempted by a
    concurrent append (14, "Please retry"): again, after a short jittered pause, a few times.
    A schema change among eight appending clients may lose several races in a row."""
    for attempt in range(attempts):
        try:
            call()
            return
        except Exception as error:
            if code_of(error) != ErrorCode.CONCURRENT_MODIFICATION or attempt == attempts - 1:
                raise
            time.sleep(rng.uniform(0, 0.05 * 2**attempt))


def test_eight_clients_racing_creates_appends_column_syncs_and_drops(served):
    harness, url, process, log = served
    setup = RestNamespace(uri=url)
    db = harness.db("rest_races")
    setup.create_namespace(CreateNamespaceRequest(id=db))
    for name in SHARED_TABLES:
        setup.create_table(CreateTableRequest(id=[*db, name]), rows(0))

    returned: dict[str, set[int]] = {name: {0} for name in SHARED_TABLES}
    faults: list[str] = []  # answers that must not happen (5xx, wrong codes)
    refused: list[str] = []  # answers a race may give (14, a schema that moved on)
    dropped_appends = 0
    done: Counter[str] = Counter()
    lock = threading.Lock()
    deadline = time.monotonic() + RUN_SECONDS
    # On a loaded machine RUN_SECONDS may pass before every kind of call has been made
    # enough: the clients then go on until it has, or until the hard deadline.
    hard_deadline = deadline + 120

    def made_enough() -> bool:
        return done["append"] >= CLIENTS and done["schema"] >= 1 and done["lifecycle"] >= 1

    def racing() -> bool:
        now = time.monotonic()
        if now < deadline:
            return True
        with lock:
            enough = made_enough()
        return not enough and now < hard_deadline

    def note(bucket: list[str], what: str, error: BaseException) -> None:
        with lock:
            bucket.append(f"{what}: {type(error).__name__}: {error}"[:300])

    def client(index: int) -> None:
        nonlocal dropped_appends
        ns = RestNamespace(uri=url)
        rng = random.Random(index)
        next_id = (index + 1) * 1_000_000
        made = 0
        while racing():
            action = rng.choices(["append", "schema", "lifecycle"], [6, 1, 2])[0]
            table = rng.choice(SHARED_TABLES)
            try:
                if action == "append":
                    next_id += 1
                    ns.insert_into_table(
                        InsertIntoTableRequest(id=[*db, table], mode="append"), rows(next_id)
                    )
                    with lock:
                        returned[table].add(next_id)
                elif action == "schema":
                    column = f"extra_{index}"
                    add = AlterTableAddColumnsRequest(
                        id=[*db, table],
                        new_columns=[{"name": column, "expression": "CAST(NULL AS STRING)"}],
                    )
                    drop = AlterTableDropColumnsRequest(id=[*db, table], columns=[column])
                    retried_on_conflict(functools.partial(ns.alter_table_add_columns, add), rng)
                    retried_on_conflict(functools.partial(ns.alter_table_drop_columns, drop), rng)
                else:
                    made += 1
                    own = [*db, f"own_{index}_{made}"]
                    ns.create_table(CreateTableRequest(id=own), rows(1, 2))
                    ns.insert_into_table(InsertIntoTableRequest(id=own, mode="append"), rows(3))
                    ns.drop_table(DropTableRequest(id=own))
                    try:
                        ns.insert_into_table(InsertIntoTableRequest(id=own), rows(4))
                        with lock:
                            faults.append(f"append to dropped {own} returned")
                    except Exception as error:
                        if code_of(error) != ErrorCode.TABLE_NOT_FOUND:
                            note(faults, f"append to dropped {own}", error)
                    with lock:
                        dropped_appends += 1
                with lock:
                    done[action] += 1
            except Exception as error:
                code = code_of(error)
                if code in (ErrorCode.CONCURRENT_MODIFICATION, ErrorCode.INVALID_INPUT) or (
                    code is not None and action == "schema"
                ):
                    note(refused, action, error)
                else:
                    note(faults, action, error)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(RUN_SECONDS + 300)
    assert not any(thread.is_alive() for thread in threads), "clients did not finish in time"

    assert faults == [], faults
    assert dropped_appends >= 1
    assert process.poll() is None, "the server died"
    assert httpx.get(url + "/health", timeout=10).status_code == 200
    access = log.read_text()
    assert " status=5" not in access, [line for line in access.splitlines() if "status=5" in line]

    for name in SHARED_TABLES:
        dataset = lance.dataset(namespace_client=setup, table_id=[*db, name])
        present = set(dataset.to_table(columns=["id"])["id"].to_pylist())
        assert returned[name] <= present, sorted(returned[name] - present)
        described = setup.describe_table(DescribeTableRequest(id=[*db, name]))
        assert int(described.properties["version"]) == dataset.version
        wanted = [(c.name, c.type) for c in catalog_columns(dataset.schema)]
        assert harness.columns(db, name) == wanted
    assert made_enough(), (done, refused[:5])
