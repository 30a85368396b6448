"""The table changes Spark SQL's connector refuses, through the command line: ``add-columns``,
``drop-columns``, ``alter-column`` (rename, retype, nullability) and ``rename-table``, on a real
Hive Metastore (as ``hive2`` and ``hive3``) and the Glue emulator.

Each change is checked where it lands: the dataset (read back with pylance through the
namespace), the catalog's own columns (read straight from the server), and for a refused change,
that neither moved.
"""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from support.cli_env import CliRunner, isolate_cli_environment
from support.harness import Harness

from lance_metastore.cli import app

BACKENDS = ["glue", "hive2", "hive3"]


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_cli_environment(monkeypatch, tmp_path)


@pytest.fixture(params=BACKENDS)
def harness(request: pytest.FixtureRequest) -> Harness:
    found = request.getfixturevalue(request.param)
    found.reset()
    return found


def run(harness: Harness, *args: str, code: int = 0) -> dict:
    """One command with the harness's connection as flags; its JSON document."""
    props = harness.properties()
    flags = [item for key, value in props.items() for item in ("--prop", f"{key}={value}")]
    result = CliRunner().invoke(app, ["--impl", harness.name, *flags, *args, "--json"])
    assert result.exit_code == code, f"{args}: {result.stdout}\n{result.stderr}"
    return json.loads(result.stdout)


def _namespace(harness: Harness) -> list[str]:
    db = harness.db(harness.unique())
    run(harness, "create-namespace", "/".join(db))
    return db


def _table(harness: Harness, db: list[str], directory: Path) -> list[str]:
    """``db/orders``: three rows written by pylance, registered with the command."""
    location = directory / "orders.lance"
    prices = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "price": [1.5, 2.5, 4.0]})
    lance.write_dataset(prices, str(location))
    run(harness, "register", "/".join([*db, "orders"]), str(location))
    return [*db, "orders"]


def _dataset(harness: Harness, table: list[str]):
    return lance.dataset(namespace_client=harness.connect(), table_id=table)


@pytest.mark.parametrize("harness", BACKENDS, indirect=True)
def test_column_changes(harness: Harness, tmp_path: Path) -> None:
    db = _namespace(harness)
    table = _table(harness, db, tmp_path)
    name = "/".join(table)

    added = run(harness, "add-columns", name, "doubled=price * 2", "label=CAST(id AS STRING)")
    assert added["version"] == 2
    assert [c["name"] for c in added["columns"]] == ["id", "price", "doubled", "label"]
    assert _dataset(harness, table).to_table().column("doubled").to_pylist() == [3.0, 5.0, 8.0]
    assert harness.columns(db, "orders") == [
        ("id", "bigint"),
        ("price", "double"),
        ("doubled", "double"),
        ("label", "string"),
    ]

    renamed = run(harness, "alter-column", name, "doubled", "--rename", "twice")
    assert renamed["version"] == 3
    retyped = run(harness, "alter-column", name, "id", "--type", "int32")
    assert retyped["version"] == 4
    assert [(c["name"], c["type"]) for c in retyped["columns"]][:3] == [
        ("id", "int"),
        ("price", "double"),
        ("twice", "double"),
    ]
    assert _dataset(harness, table).schema.field("id").type == pa.int32()

    dropped = run(harness, "drop-columns", name, "label", "price")
    assert dropped["version"] == 5
    assert harness.columns(db, "orders") == [("id", "int"), ("twice", "double")]
    assert _dataset(harness, table).to_table().to_pydict() == {
        "id": [1, 2, 3],
        "twice": [3.0, 5.0, 8.0],
    }
    # Older versions keep what was dropped (time travel still reads them).
    old = lance.dataset(namespace_client=harness.connect(), table_id=table, version=1)
    assert old.schema.names == ["id", "price"]


@pytest.mark.parametrize("harness", BACKENDS, indirect=True)
def test_refused_column_changes_change_nothing(harness: Harness, tmp_path: Path) -> None:
    db = _namespace(harness)
    table = _table(harness, db, tmp_path)
    name = "/".join(table)
    before = (_dataset(harness, table).version, harness.columns(db, "orders"))

    missing = run(harness, "drop-columns", name, "nope", code=10 + 12)
    assert missing["error"]["name"] == "TABLE_COLUMN_NOT_FOUND"
    assert "nope" in missing["error"]["message"]
    run(harness, "alter-column", name, "nope", "--rename", "x", code=22)
    exists = run(harness, "add-columns", name, "price=id + 1", code=23)
    assert "already exists" in exists["error"]["message"]
    run(harness, "add-columns", name, "broken=no_such_column * 2", code=22)
    retype = run(harness, "alter-column", name, "price", "--type", "date32", code=30)
    assert retype["error"]["name"] == "TABLE_SCHEMA_VALIDATION_ERROR"
    run(harness, "alter-column", name, "price", code=1)  # nothing to change
    assert run(harness, "drop-columns", "/".join([*db, "absent"]), "id", code=14)

    assert (_dataset(harness, table).version, harness.columns(db, "orders")) == before


@pytest.mark.parametrize("harness", BACKENDS, indirect=True)
def test_rename_table(harness: Harness, tmp_path: Path) -> None:
    db = _namespace(harness)
    table = _table(harness, db, tmp_path)
    location = _dataset(harness, table).uri

    done = run(harness, "rename-table", "/".join(table), "sales")
    assert done == {"id": table, "renamed_to": [*db, "sales"]}
    listed = run(harness, "ls", "/".join(db))["tables"]
    assert listed == ["sales"]
    moved = _dataset(harness, [*db, "sales"])
    assert moved.uri == location and moved.count_rows() == 3  # the data did not move
    assert run(harness, "describe", "/".join(table), "--table", code=14)

    other = _namespace(harness)
    run(harness, "rename-table", "/".join([*db, "sales"]), "orders", "--namespace", "/".join(other))
    assert _dataset(harness, [*other, "orders"]).count_rows() == 3
    assert run(harness, "ls", "/".join(db))["tables"] == []

    # Onto an existing table, or into a namespace that does not exist: refused, nothing moves.
    _table(harness, db, tmp_path / "second")
    second = "/".join([*db, "orders"])
    onto = run(harness, "rename-table", second, "orders", "-n", "/".join(other), code=15)
    assert onto["error"]["name"] == "TABLE_ALREADY_EXISTS"
    run(
        harness,
        "rename-table",
        "/".join([*db, "orders"]),
        "x",
        "-n",
        "/".join(harness.db("nowhere")),
        code=11,
    )
    assert run(harness, "ls", "/".join(db))["tables"] == ["orders"]
