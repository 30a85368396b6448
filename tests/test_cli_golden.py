"""Golden transcripts of the ``lance-metastore`` command: every command, as text and ``--json``.

Each scenario runs a fixed sequence of commands against real servers and compares the whole
transcript (exit code, stdout, stderr) with ``tests/golden/cli/<scenario>.txt``. What differs
from run to run (database names, temporary paths, ports, timestamps) is replaced by
placeholders of fixed meaning before the comparison; paths and names are made of fixed length
so rich's column widths are the same on every run.

After an intended change of the output, regenerate and review the diff:
``LANCE_METASTORE_TEST_UPDATE_GOLDEN=1 pytest tests/test_cli_golden.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from support.cli_env import CliRunner, isolate_cli_environment

from lance_metastore.cli import app

GOLDEN_DIR = Path(__file__).parent / "golden" / "cli"
UPDATE = os.environ.get("LANCE_METASTORE_TEST_UPDATE_GOLDEN") == "1"
SECRET = "Zq7-GoldenSecretValue-DoNotPrint-9931"
TIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d)?")
HOST_PORT = re.compile(r"127\.0\.0\.1:\d+")
# A timestamp a narrow table broke across two lines.
DATE_ALONE = re.compile(r"\b\d{4}-\d\d-\d\d\b")
CLOCK_ALONE = re.compile(r"\b\d\d:\d\d:\d\d\b")
DDL_TIME = re.compile(r"(transient_lastDdlTime\W+)\d{10}")


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_cli_environment(monkeypatch, tmp_path)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory whose path has the same length on every run (``/tmp/lmgXXXXXXXX``)."""
    directory = Path(tempfile.mkdtemp(prefix="lmg", dir="/tmp"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class Transcript:
    """Runs commands in-process and records what each printed, with placeholders."""

    def __init__(self, base: list[str], replacements: dict[str, str], columns: int = 200) -> None:
        self.base = base
        self.replacements = replacements
        self.columns = columns
        self.runner = CliRunner()
        self.lines: list[str] = []

    def __call__(self, *args: str, code: int = 0, input: str | None = None) -> None:
        result = self.runner.invoke(
            app,
            [*self.base, *args],
            input=input,
            env={"COLUMNS": str(self.columns), "NO_COLOR": "1"},
        )
        assert result.exit_code == code, (
            f"exit {result.exit_code} != {code} for {args}\n{result.stdout}\n{result.stderr}\n"
            f"{result.exception!r}"
        )
        assert SECRET not in result.stdout + result.stderr
        shown = " ".join(args).replace(SECRET, "<secret>")
        self.lines.append(f"$ lance-metastore {self.clean(shown)}")
        self.lines.append(f"[exit {result.exit_code}]")
        for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            if text.strip():
                self.lines.append(f"--- {stream}")
                self.lines.extend(line.rstrip() for line in self.clean(text).splitlines())
        self.lines.append("")

    def clean(self, text: str) -> str:
        for value, placeholder in self.replacements.items():
            text = text.replace(value, placeholder)
        text = HOST_PORT.sub("<host:port>", text)
        text = DDL_TIME.sub(r"\g<1>0000000000", text)
        text = TIME.sub("<time>", text)
        return CLOCK_ALONE.sub("<clock>", DATE_ALONE.sub("<date>", text))

    def check(self, scenario: str) -> None:
        text = "\n".join(self.lines)
        path = GOLDEN_DIR / f"{scenario}.txt"
        if UPDATE or not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if not UPDATE:
                pytest.fail(f"wrote the missing golden file {path}; review and commit it")
        expected = path.read_text()
        assert text == expected, f"transcript differs from {path} (see the module docstring)"


def write(location: Path | str, values: list[int], mode: str = "create") -> None:
    lance.write_dataset(pa.table({"x": values}), str(location), mode=mode)


def test_golden_hive2(hive_metastore_uri: str, short_dir: Path) -> None:
    db = f"db_{uuid.uuid4().hex[:8]}"
    lake = short_dir / "lake"
    run = Transcript(
        ["--impl", "hive2", "--uri", hive_metastore_uri, "--root", str(lake)],
        {db: "<db>", str(short_dir): "<tmp>"},
    )
    run("config")
    run("config", "--json")
    # An explicit database location: the metastore's default warehouse path differs per run.
    where = f"database.location-uri={lake / db}"
    run("create-namespace", db, "--prop", "team=lake", "-p", "tier=gold", "-p", where)
    run("create-namespace", db, "--mode", "exist_ok", "--json")
    run("create-namespace", db, code=12)
    run("--json", "create-namespace", db, code=12)
    run("describe", db)
    run("describe", db, "--json")

    data = short_dir / "data"
    for name, where in [("alpha", "a"), ("beta", "b"), ("gamma", "b/deeper")]:
        write(data / where / f"{name}.lance", [1, 2])
    run("register-many", db, str(data), "--dry-run")
    run("register-many", db, str(data), "--dry-run", "--json")
    run("register-many", db, str(data))
    run("register-many", db, str(data), "--skip-existing", "--json")
    run("register-many", db, str(data), "--skip-existing")
    run("register-many", db, str(data), code=15)
    run("register-many", db, str(data), "--json", code=15)

    run("declare", f"{db}/events", "--prop", "owner=ops")
    run("declare", f"{db}/later", "--json")
    run("describe", f"{db}$events")
    run("describe", f"{db}$events", "--json")
    run("versions", f"{db}$events")
    run("versions", f"{db}$events", "--json")
    write(lake / db / "events.lance", [1])
    write(lake / db / "events.lance", [2, 3], mode="append")
    run("versions", f"{db}$events")
    run("versions", f"{db}$events", "--json")
    run("describe", f"{db}$events")
    run("describe", f"{db}$events", "--json")

    write(short_dir / "single.lance", [7])
    run("register", f"{db}/single", str(short_dir / "single.lance"))
    single = str(short_dir / "single.lance")
    run("register", f"{db}/single", single, "--mode", "overwrite", "--json")
    run("register", f"{db}/nothing", str(short_dir / "none.lance"), code=23)

    # The metastore is shared with other tests: its root listing is not ours to fix (the Glue
    # scenario, on a reset emulator, covers the root).
    run("ls", db)
    run("ls", db, "-r")
    run("ls", db, "--json", "--page-size", "2")
    run("ls", db, "-r", "--json")
    run("describe", f"{db}$nope", code=14)
    run("--json", "describe", f"{db}$nope", code=14)
    run("describe", "--table", f"{db}$a$b", code=23)
    run("describe", f"nope_{db}", code=11)
    run("describe", "--table", "$orders", code=23)
    run("create-namespace", "sa les", code=23)

    run("deregister", f"{db}$alpha")
    run("deregister", f"{db}$beta", "--json")
    run("drop-table", f"{db}$gamma", input="n\n", code=1)
    run("drop-table", f"{db}$gamma", input="y\n")
    run("drop-table", f"{db}$single", "--yes", "--json")
    run("drop-table", f"{db}$single", "--yes", code=14)

    run("drop-namespace", db, code=13)
    run("drop-namespace", db, "--cascade")
    run("drop-namespace", db, code=11)
    run("drop-namespace", db, "--skip-missing")
    run("drop-namespace", db, "--skip-missing", "--json")
    run.check("hive2")


def test_golden_glue_secrets(glue_emulator, short_dir: Path) -> None:
    glue_emulator.reset()
    run = Transcript(
        [
            "--impl",
            "glue",
            "--endpoint",
            glue_emulator.endpoint,
            "--region",
            glue_emulator.region,
            "--prop",
            "access_key_id=AKIAEXAMPLEGOLD",
            "--prop",
            f"secret_access_key={SECRET}",
            "--prop",
            f"storage.aws_secret_access_key={SECRET}",
            "--prop",
            "storage.aws_region=us-east-1",
            "--prop",
            "max_retries=1",
            "--root",
            str(short_dir / "lake"),
        ],
        {str(short_dir): "<tmp>"},
    )
    run("config")
    run("config", "--json")
    run("create-namespace", "sales", "--prop", "description=Sales data")
    run("declare", "sales$orders")
    write(short_dir / "lake" / "sales" / "orders.lance", [1, 2])
    run("describe", "sales/orders")
    run("describe", "sales/orders", "--json")
    run("ls", "-r")
    run("ls", "-r", "--json")
    run("drop-namespace", "sales", "--cascade", code=10)
    run("drop-table", "sales/orders", "--yes")
    run("drop-namespace", "sales", "--json")
    run("--prop", "session_token=", "ls", code=23)
    run.check("glue")


def test_golden_long_paths(glue_emulator, short_dir: Path) -> None:
    """On a narrow terminal, describe, versions and ls keep paths whole: they break after a
    '/', a name longer than the line is shortened in the middle, --json has the full value."""
    glue_emulator.reset()
    lake = short_dir / "analytics_lake_with_a_long_name" / "warehouse"
    base = ["--impl", "glue", "--endpoint", glue_emulator.endpoint]
    base += ["--region", glue_emulator.region, "--root", str(lake)]
    base += ["--prop", "access_key_id=AKIAEXAMPLEGOLD", "--prop", "secret_access_key=example"]
    # A path broken across lines no longer matches whole: its directory's name is replaced too.
    replacements = {str(short_dir): "<tmp>", short_dir.name: "<tmpname>"}
    run = Transcript(base, replacements, columns=48)
    run("create-namespace", "analytics")
    name = "customer_statistics_by_region_and_quarter_long"
    run("declare", f"analytics${name}", "--json")
    table = pa.table(
        {
            "customer_id": pa.array([1, 2, 3], pa.int64()),
            "region": pa.array(["eu", "us", None], pa.string()),
            "revenue": pa.array([1.5, 2.5, 3.5], pa.float64()),
        },
        schema=pa.schema(
            [
                pa.field("customer_id", pa.int64(), nullable=False),
                pa.field("region", pa.string()),
                pa.field("revenue", pa.float64()),
            ]
        ),
    )
    lance.write_dataset(table, str(lake / "analytics" / f"{name}.lance"))
    run("describe", f"analytics${name}")
    run("describe", f"analytics${name}", "--json")
    run("versions", f"analytics${name}")
    run("ls", "-r")
    run("drop-table", f"analytics${name}", "--yes")
    run("drop-namespace", "analytics")
    run.check("paths")


def test_golden_usage_and_local_metastore(short_dir: Path) -> None:
    run = Transcript([], {str(short_dir): "<tmp>"})
    run("ls", code=2)
    run("--json", "ls", code=2)
    run("--impl", "nosuch", "ls", code=2)
    run("--impl", "hive2", "--prop", f"secret_access_key:{SECRET}", "ls", code=2)
    run("--config", str(short_dir / "none.toml"), "ls", code=2)
    run("--impl", "hive2", "--uri", "thrift://a:1", "--prop", "uri=thrift://b:2", "ls", code=2)
    run("--json", "--impl", "hive2", "create-namespace", "x", "--mode", "sideways", code=2)
    unreachable = ["--impl", "hive2", "--uri", "thrift://127.0.0.1:9"]
    unreachable += ["--prop", "client.retries=1"]
    run(*unreachable, "ls", code=27)
    run("hms", "status", "--data-dir", str(short_dir / "hms"), code=3)
    run("hms", "status", "--data-dir", str(short_dir / "hms"), "--json", code=3)
    run("hms", "stop", "--data-dir", str(short_dir / "hms"), code=1)
    run("hms", "stop", "--data-dir", str(short_dir / "hms"), "--json", code=1)
    run.check("usage")


def test_golden_column_changes(hive_metastore_uri: str, short_dir: Path) -> None:
    """add-columns, drop-columns, alter-column and rename-table, as text and --json."""
    db = f"db_{uuid.uuid4().hex[:8]}"
    lake = short_dir / "lake"
    run = Transcript(
        ["--impl", "hive2", "--uri", hive_metastore_uri, "--root", str(lake)],
        {db: "<db>", str(short_dir): "<tmp>"},
    )
    run("create-namespace", db, "-p", f"database.location-uri={lake / db}")
    lance.write_dataset(
        pa.table({"id": [1, 2], "price": [1.5, 2.5]}), str(short_dir / "orders.lance")
    )
    run("register", f"{db}/orders", str(short_dir / "orders.lance"))
    run("add-columns", f"{db}/orders", "total=price * 2")
    run("add-columns", f"{db}/orders", "label=CAST(id AS STRING)", "--json")
    run("add-columns", f"{db}/orders", "total=id", code=23)
    run("alter-column", f"{db}/orders", "total", "--rename", "doubled")
    run("alter-column", f"{db}/orders", "id", "--type", "int32", "--json")
    run("alter-column", f"{db}/orders", "price", "--type", "date32", code=30)
    run("alter-column", f"{db}/orders", "nope", "--not-null", code=22)
    run("alter-column", f"{db}/orders", "price", code=1)
    run("drop-columns", f"{db}/orders", "label")
    run("drop-columns", f"{db}/orders", "nope", "--json", code=22)
    run("rename-table", f"{db}/orders", "sales")
    run("rename-table", f"{db}/sales", "orders", "--json")
    run("rename-table", f"{db}/nope", "x", code=14)
    run("drop-namespace", db, "--cascade")
    run.check("columns")
