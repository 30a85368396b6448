"""The ``lance-metastore`` command against real servers: the local Hive Metastore (as ``hive2``
and ``hive3``) and the Glue emulator.

Commands run in-process through typer's CliRunner (stdout and stderr kept apart) and, where
the process boundary matters (the console entry, ``hms start`` detaching its JVM), through
``python -m lance_metastore.cli``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from support.cli_env import CliRunner, isolate_cli_environment

from lance_metastore.cli import app, parse_id
from lance_metastore.cli.config import env_property_name

SECRET = "Zq7-SuperSecretValue-DoNotPrint-4417"
STORAGE_SECRET = "Kx9-StorageSecret-DoNotPrint-2231"


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_cli_environment(monkeypatch, tmp_path)


class Cli:
    """Runs the command in-process with fixed connection arguments."""

    def __init__(self, *base: str) -> None:
        self.base = list(base)
        self.runner = CliRunner()
        self.outputs: list[str] = []

    def __call__(
        self, *args: str, code: int = 0, input: str | None = None, env: dict | None = None
    ):
        result = self.runner.invoke(app, [*self.base, *args], input=input, env=env)
        self.outputs += [result.stdout, result.stderr]
        if result.exit_code != code:
            raise AssertionError(
                f"exit {result.exit_code} != {code} for {args}\nstdout:\n{result.stdout}\n"
                f"stderr:\n{result.stderr}\nexception: {result.exception!r}"
            )
        return result

    def json(self, *args: str, code: int = 0, **kwargs) -> dict:
        result = self(*args, "--json", code=code, **kwargs)
        return json.loads(result.stdout)


def unique(prefix: str = "db") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def write(location: Path | str, values: list[int], mode: str = "create") -> None:
    lance.write_dataset(pa.table({"x": values}), str(location), mode=mode)


def error_line(result) -> str:
    return result.stderr.strip().splitlines()[-1]


# --------------------------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------------------------


def test_identifier_forms() -> None:
    assert parse_id("db$t") == ["db", "t"]
    assert parse_id("db/t") == ["db", "t"]
    assert parse_id("cat/db$t") == ["cat", "db", "t"]
    assert parse_id("/db/") == ["db"]
    assert parse_id("") == [] and parse_id(None) == [] and parse_id("/") == []


def test_environment_property_names() -> None:
    hive = ["uri", "client.pool-size", "client.user", "root"]
    assert env_property_name("CLIENT__POOL_SIZE", hive) == "client.pool-size"
    assert env_property_name("URI", hive) == "uri"
    assert env_property_name("STORAGE__AWS_REGION", hive) == "storage.aws_region"
    assert env_property_name("CATALOG_ID", ["catalog_id"]) == "catalog_id"


# --------------------------------------------------------------------------------------------
# Hive 2: every namespace and table command
# --------------------------------------------------------------------------------------------


def test_drop_table_says_when_it_keeps_the_data(hive_metastore_uri: str, tmp_path: Path) -> None:
    """Two entries at one location (allowed by shared_locations): dropping one keeps the data
    the other still points at, and says so; dropping the last deletes it."""
    root = tmp_path / "lake"
    cli = Cli("--impl", "hive2", "--uri", hive_metastore_uri, "--root", str(root))
    shared = Cli(*cli.base, "--prop", "shared_locations=true")
    db = unique()
    cli("create-namespace", db)
    write(root / "t.lance", [1, 2])
    cli("register", f"{db}$first", str(root / "t.lance"))
    clash = cli("register", f"{db}$second", str(root / "t.lance"), code=15)
    assert "already exists" in error_line(clash)
    shared("register", f"{db}$second", str(root / "t.lance"))
    dropped = shared.json("drop-table", f"{db}$second", "--yes")
    assert "still points at it" in dropped["data_kept"] and (root / "t.lance").is_dir()
    assert "and its data" in cli("drop-table", f"{db}$first", "--yes").stdout
    assert not (root / "t.lance").exists()


def test_hive2_commands(hive_metastore_uri: str, tmp_path: Path) -> None:
    cli = Cli("--impl", "hive2", "--uri", hive_metastore_uri, "--root", str(tmp_path / "lake"))
    db = unique()

    created = cli.json("create-namespace", db, "--prop", "team=lake", "-p", "tier=gold")
    assert created["id"] == [db] and created["properties"]["team"] == "lake"
    again = cli("create-namespace", db, code=12)
    assert error_line(again).startswith("error [code 2 NAMESPACE_ALREADY_EXISTS]:")
    assert db in error_line(again)
    cli("create-namespace", db, "--mode", "exist_ok")

    # register-many: three datasets, one nested deeper, plus a directory that is no dataset.
    data = tmp_path / "data"
    for name, where in [("alpha", "a"), ("beta", "b"), ("gamma", "b/deeper")]:
        write(data / where / f"{name}.lance", [1, 2])
    (data / "not-a-dataset").mkdir()
    summary = cli.json("register-many", db, str(data))
    assert sorted(e["table"] for e in summary["registered"]) == ["alpha", "beta", "gamma"]
    assert summary["failed"] == [] and summary["found"] == 3
    human = cli("register-many", db, str(data), "--skip-existing")
    assert "skipped" in human.stdout
    clash = cli.json("register-many", db, str(data), code=15)
    assert [e["name"] for e in clash["failed"]] == ["TABLE_ALREADY_EXISTS"] * 3
    assert "error [code 5 TABLE_ALREADY_EXISTS]" in cli.outputs[-1]  # its stderr

    # declare, then two writes: versions 1 and 2, read through the namespace.
    declared = cli.json("declare", f"{db}/events", "--prop", "owner=ops")
    location = declared["location"]
    assert location.endswith("events.lance") and declared["properties"]["owner"] == "ops"
    table = cli.json("describe", f"{db}$events")
    assert table["kind"] == "table" and table["declared_only"] is True
    assert cli.json("versions", f"{db}$events")["versions"] == []
    write(location, [1])
    write(location, [2, 3], mode="append")
    versions = cli.json("versions", f"{db}$events")
    assert [v["version"] for v in versions["versions"]] == [1, 2]
    assert versions["versions"][1]["metadata"]["total_rows"] == "3"
    assert "│       2 │" in cli("versions", f"{db}/events").stdout

    # register one more by path (relative paths become absolute)
    write(tmp_path / "single.lance", [7])
    registered = cli.json("register", f"{db}/single", str(tmp_path / "single.lance"))
    assert registered["location"] == str(tmp_path / "single.lance")

    # ls: plain, paged (page size 2 over 5 tables), recursive from the root
    listing = cli.json("ls", db, "--page-size", "2")
    assert listing["id"] == [db] and listing["namespaces"] == []
    assert listing["tables"] == ["alpha", "beta", "events", "gamma", "single"]
    root = cli.json("ls")
    assert db in [n["name"] for n in root["namespaces"]] and "tables" not in root
    assert "tables" not in next(n for n in root["namespaces"] if n["name"] == db)
    tree = cli.json("ls", "--recursive", "--page-size", "1")
    node = next(n for n in tree["namespaces"] if n["name"] == db)
    assert node["tables"] == listing["tables"] and node["id"] == [db]
    text = cli("ls", db).stdout
    assert "alpha" in text and "5 table(s)" in text

    # describe: the namespace, a table, a missing table (code 4), a malformed id (code 13)
    described = cli.json("describe", db)
    assert described["kind"] == "namespace" and described["properties"]["tier"] == "gold"
    assert "tier" in cli("describe", db).stdout
    missing = cli("describe", f"{db}$nope", code=14)
    assert error_line(missing) == f"error [code 4 TABLE_NOT_FOUND]: Table not found: '{db}$nope'"
    missing_json = cli("--json", "describe", f"{db}$nope", code=14)
    assert json.loads(missing_json.stdout)["error"]["code"] == 4
    assert cli("describe", "--table", f"{db}$a$b", code=23).stderr.startswith(
        "error [code 13 INVALID_INPUT]"
    )
    cli("describe", "nope_" + db, code=11)

    # deregister keeps the data; drop-table asks, and deletes the data
    gone = cli.json("deregister", f"{db}$alpha")
    assert gone["location"].endswith("alpha.lance") and Path(gone["location"]).is_dir()
    cli("describe", f"{db}$alpha", code=14)
    refused = cli("drop-table", f"{db}$beta", input="n\n", code=1)
    assert "aborted" in refused.stderr and "Drop table" in refused.stderr
    assert cli.json("describe", f"{db}$beta")["kind"] == "table"
    beta = data / "b" / "beta.lance"
    cli("drop-table", f"{db}$beta", input="y\n")
    assert not beta.exists()
    dropped = cli.json("drop-table", f"{db}$gamma", "--yes")
    assert not Path(dropped["location"]).exists()
    cli("drop-table", f"{db}$gamma", "--yes", code=14)

    # drop-namespace: not empty (code 3), cascade, missing (code 1), --skip-missing
    assert "code 3 NAMESPACE_NOT_EMPTY" in cli("drop-namespace", db, code=13).stderr
    cli("drop-namespace", db, "--cascade")
    assert "code 1 NAMESPACE_NOT_FOUND" in cli("drop-namespace", db, code=11).stderr
    assert cli.json("drop-namespace", db, "--skip-missing")["dropped"] is True
    assert Path(location).is_dir()  # cascade deregisters, data stays


# --------------------------------------------------------------------------------------------
# Hive 3: catalog -> database -> table
# --------------------------------------------------------------------------------------------


def test_hive3_hierarchy(hive_metastore_uri: str, tmp_path: Path) -> None:
    cli = Cli("--impl", "hive3", "--uri", hive_metastore_uri, "--root", str(tmp_path / "lake"))
    db = unique()
    assert [n["name"] for n in cli.json("ls")["namespaces"]] == ["hive"]
    cli("create-namespace", f"hive/{db}")
    write(tmp_path / "t1.lance", [1])
    cli("register", f"hive${db}$t1", str(tmp_path / "t1.lance"))

    tree = cli.json("ls", "hive", "-r")
    database = next(n for n in tree["namespaces"] if n["name"] == db)
    assert database["id"] == ["hive", db] and database["tables"] == ["t1"]
    # One id, two meanings told apart by the backend's depth.
    assert cli.json("describe", f"hive/{db}")["kind"] == "namespace"
    assert cli.json("describe", f"hive/{db}/t1")["id"] == ["hive", db, "t1"]
    assert "code 1 NAMESPACE_NOT_FOUND" in cli("describe", "hive/nope_x", code=11).stderr
    assert "code 4 TABLE_NOT_FOUND" in cli("describe", f"hive/{db}/nope", code=14).stderr
    assert "code 0 UNSUPPORTED" in cli("create-namespace", "other_catalog", code=10).stderr
    assert [v["version"] for v in cli.json("versions", f"hive/{db}/t1")["versions"]] == [1]
    cli("drop-namespace", f"hive/{db}", "--cascade")


def test_a_hive_id_of_the_other_shape_is_recognised(
    hive_metastore_uri: str, tmp_path: Path
) -> None:
    """``sales/orders`` on hive3 and ``hive/sales/orders`` on hive2 name a table the other
    backend's way: the error says how to write it on this one."""
    hive2 = Cli("--impl", "hive2", "--uri", hive_metastore_uri, "--root", str(tmp_path / "lake"))
    hive3 = Cli("--impl", "hive3", "--uri", hive_metastore_uri, "--root", str(tmp_path / "lake"))
    db = unique()
    hive2("create-namespace", db)
    write(tmp_path / "t.lance", [1])
    hive2("register", f"{db}/t", str(tmp_path / "t.lance"))
    try:
        on_hive3 = error_line(hive3("describe", f"{db}/t", code=11))
        assert "hive3 ids start with the catalog" in on_hive3, on_hive3
        assert f"write hive/{db}/t" in on_hive3
        assert f"write hive/{db}" in error_line(hive3("ls", db, code=11))
        on_hive2 = error_line(hive2("describe", f"hive/{db}/t", code=23))
        assert f"hive2 ids have no catalog level (database/table): write {db}/t" in on_hive2
        # An id missing either way gets no such hint.
        assert "write" not in error_line(hive3("describe", f"{db}/nope", code=11))
    finally:
        hive2("drop-namespace", db, "--cascade")


# --------------------------------------------------------------------------------------------
# Glue (emulator): properties as flags, secrets never printed
# --------------------------------------------------------------------------------------------


@pytest.fixture
def glue_cli(glue_emulator, tmp_path: Path) -> Cli:
    glue_emulator.reset()
    return Cli(
        "--impl",
        "glue",
        "--endpoint",
        glue_emulator.endpoint,
        "--region",
        glue_emulator.region,
        "--prop",
        "access_key_id=AKIAEXAMPLECLI",
        "--prop",
        f"secret_access_key={SECRET}",
        "--prop",
        f"storage.aws_secret_access_key={STORAGE_SECRET}",
        "--prop",
        "storage.aws_region=us-east-1",
        "--prop",
        "max_retries=1",
        "--root",
        str(tmp_path / "lake"),
    )


def test_glue_commands_never_print_secrets(glue_cli: Cli, tmp_path: Path) -> None:
    cli = glue_cli
    cli.json("create-namespace", "sales", "--prop", "description=Sales data")
    assert cli.json("describe", "sales")["properties"]["description"] == "Sales data"
    declared = cli.json("declare", "sales$orders")
    write(declared["location"], [1, 2])
    write(declared["location"], [3], mode="append")
    assert [v["version"] for v in cli.json("versions", "sales/orders")["versions"]] == [1, 2]
    write(tmp_path / "loose.lance", [1])
    cli("register", "sales/loose", str(tmp_path / "loose.lance"))

    table = cli.json("describe", "sales/orders")
    assert table["storage_options"] == {
        "aws_region": "us-east-1",
        "aws_secret_access_key": "***",
    }
    assert "aws_secret_access_key" in cli("describe", "sales/orders").stdout
    assert cli.json("ls", "-r")["namespaces"] == [
        {"name": "sales", "id": ["sales"], "namespaces": [], "tables": ["loose", "orders"]}
    ]
    assert "GlueNamespace" in cli("ls").stdout  # the root label is the namespace's id
    assert "code 4 TABLE_NOT_FOUND" in cli("describe", "sales$nope", code=14).stderr
    assert "code 0 UNSUPPORTED" in cli("drop-namespace", "sales", "--cascade", code=10).stderr
    config = cli.json("config")
    assert config["properties"]["secret_access_key"] == {"value": "***", "source": "flag --prop"}
    assert config["properties"]["access_key_id"]["value"] == "***"
    cli("config")
    cli("deregister", "sales/loose")
    cli("drop-table", "sales/orders", "--yes")
    cli("drop-namespace", "sales")
    cli("--debug", "describe", "sales", code=11)
    # An invalid property value of a secret is reported without its value.
    cli("--prop", "session_token=", "ls", code=23)

    everything = "\n".join(cli.outputs)
    assert SECRET not in everything and STORAGE_SECRET not in everything


def test_glue_unreachable_endpoint_is_service_unavailable(tmp_path: Path) -> None:
    cli = Cli(
        "--impl",
        "glue",
        "--endpoint",
        "http://127.0.0.1:9",
        "--region",
        "us-east-1",
        "--prop",
        "access_key_id=AKIAEXAMPLECLI",
        "--prop",
        f"secret_access_key={SECRET}",
        "--prop",
        "max_retries=1",
        "--prop",
        "connect_timeout_sec=1",
    )
    result = cli("describe", "sales", code=27)
    assert error_line(result).startswith("error [code 17 SERVICE_UNAVAILABLE]:")
    assert SECRET not in result.stdout + result.stderr


# --------------------------------------------------------------------------------------------
# Configuration: profiles, environment, precedence, usage errors
# --------------------------------------------------------------------------------------------


def test_profiles_environment_and_precedence(
    hive_metastore_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f"""
default_profile = "local"

[profiles.local]
impl = "hive2"
uri = "{hive_metastore_uri}"
root = "{tmp_path / "lake"}"
client.pool-size = 2

[profiles.prod]
impl = "glue"
region = "eu-west-1"
root = "s3://lake"
secret_access_key = "{SECRET}"
access_key_id = "AKIAEXAMPLECLI"

[profiles.prod.storage]
aws_secret_access_key = "{STORAGE_SECRET}"
"""
    )
    cli = Cli("--config", str(config))

    # The default profile connects to the real metastore.
    db = unique()
    cli("create-namespace", db)
    assert db in [n["name"] for n in cli.json("ls")["namespaces"]]
    shown = cli.json("config")
    assert shown["impl"] == "hive2" and shown["profile"] == "local"
    assert shown["properties"]["client.pool-size"] == {"value": "2", "source": "profile local"}

    # Precedence: flag > environment > profile.
    env = {
        "LANCE_METASTORE_REGION": "us-west-2",
        "LANCE_METASTORE_ROOT": "s3://from-env",
        "LANCE_METASTORE_PROP_MAX_RETRIES": "7",
        "LANCE_METASTORE_PROP_STORAGE__AWS_REGION": "us-west-2",
    }
    prod = cli.json("--profile", "prod", "--root", "s3://from-flag", "config", env=env)
    props = {k: v["value"] for k, v in prod["properties"].items()}
    assert prod["impl"] == "glue" and props["region"] == "us-west-2"
    assert prod["properties"]["region"]["source"] == "env LANCE_METASTORE_REGION"
    assert props["root"] == "s3://from-flag" and props["max_retries"] == "7"
    assert props["storage.aws_region"] == "us-west-2"
    assert props["secret_access_key"] == "***" and props["storage.aws_secret_access_key"] == "***"
    human = cli("--profile", "prod", "config")
    assert "profile prod" in human.stdout

    # The profile can come from the environment, the config file too; the impl from env wins.
    env = {"LANCE_METASTORE_CONFIG": str(config), "LANCE_METASTORE_PROFILE": "prod"}
    from_env = Cli().json("--impl", "glue", "config", env=env)
    assert from_env["profile"] == "prod" and from_env["config_file"] == str(config)
    env_impl = Cli().json(
        "config", env={**env, "LANCE_METASTORE_IMPL": "hive3", "LANCE_METASTORE_PROFILE": "local"}
    )
    assert env_impl["impl"] == "hive3" and env_impl["impl_source"] == "env LANCE_METASTORE_IMPL"

    # Environment variables alone are enough to connect.
    env = {
        "LANCE_METASTORE_IMPL": "hive2",
        "LANCE_METASTORE_URI": hive_metastore_uri,
        "LANCE_METASTORE_PROP_CLIENT__SOCKET_TIMEOUT_SEC": "30",
    }
    assert db in [n["name"] for n in Cli().json("ls", env=env)["namespaces"]]
    cli("drop-namespace", db)

    # The default config file location is ~/.config/lance-metastore/config.toml.
    default = Path(os.environ["HOME"]) / ".config" / "lance-metastore" / "config.toml"
    default.parent.mkdir(parents=True)
    default.write_text(config.read_text())
    assert Cli().json("config")["config_file"] == str(default)

    everything = "\n".join(cli.outputs)
    assert SECRET not in everything and STORAGE_SECRET not in everything


def test_usage_and_configuration_errors(tmp_path: Path, hive_metastore_uri: str) -> None:
    cli = Cli()
    assert "no implementation chosen" in cli("ls", code=2).stderr
    assert "unknown impl 'nosuch'" in cli("--impl", "nosuch", "ls", code=2).stderr
    typo = cli("--impl", "hive2", "--prop", f"secret_access_key:{SECRET}", "ls", code=2)
    assert "key=value" in typo.stderr and SECRET not in typo.stderr
    assert "does not exist" in cli("--config", str(tmp_path / "none.toml"), "ls", code=2).stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[profiles.x\n")
    assert "invalid TOML" in cli("--config", str(bad), "ls", code=2).stderr
    good = tmp_path / "good.toml"
    good.write_text('[profiles.a]\nimpl = "hive2"\n')
    assert "no profile 'zz'" in cli("--config", str(good), "--profile", "zz", "ls", code=2).stderr
    conflict = cli(
        "--impl", "hive2", "--uri", "thrift://a:1", "--prop", "uri=thrift://b:2", "ls", code=2
    )
    assert "--uri and --prop uri=... disagree" in conflict.stderr
    # Unknown property: the namespace's InvalidInput (code 13).
    unknown = cli("--impl", "hive2", "--uri", hive_metastore_uri, "--prop", "urj=x", "ls", code=23)
    assert error_line(unknown).startswith("error [code 13 INVALID_INPUT]:")
    assert "did you mean 'uri'" in unknown.stderr
    # Typer's own usage errors keep exit code 2.
    cli("--impl", "hive2", "create-namespace", "x", "--mode", "sideways", code=2)
    cli("nosuchcommand", code=2)
    # With --json an error is still exactly one JSON document on stdout.
    document = json.loads(cli("--json", "ls", code=2).stdout)
    assert document["error"]["exit_code"] == 2 and "code" not in document["error"]


# --------------------------------------------------------------------------------------------
# Through a real process
# --------------------------------------------------------------------------------------------


def run_module(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LANCE_METASTORE_") or k.startswith("LANCE_METASTORE_TEST_")
    }
    return subprocess.run(
        [sys.executable, "-m", "lance_metastore.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, "NO_COLOR": "1", **(env or {})},
    )


def test_module_entry_point(hive_metastore_uri: str, tmp_path: Path) -> None:
    base = ["--impl", "hive2", "--uri", hive_metastore_uri, "--root", str(tmp_path)]
    db = unique()
    created = run_module(*base, "--json", "create-namespace", db)
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["id"] == [db]
    listing = Cli(*base).json("ls", db)
    assert listing == {"name": db, "id": [db], "namespaces": [], "tables": []}
    missing = run_module(*base, "--json", "describe", f"{db}$nope")
    assert missing.returncode == 14
    assert missing.stderr.strip() == (
        f"error [code 4 TABLE_NOT_FOUND]: Table not found: '{db}$nope'"
    )
    assert json.loads(missing.stdout)["error"]["name"] == "TABLE_NOT_FOUND"
    Cli(*base)("drop-namespace", db)


# --------------------------------------------------------------------------------------------
# hms start / status / stop: a second JVM, so one test only
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def stopped_at_exit(data_dir: Path) -> Iterator[None]:
    try:
        yield
    finally:
        from lance_metastore.hive.local import LocalMetastore

        with contextlib.suppress(Exception):
            LocalMetastore.from_data_dir(data_dir).stop()


@pytest.mark.timeout(240)
def test_hms_start_status_stop(java: str, tmp_path: Path) -> None:
    data_dir = tmp_path / "hms"
    cli = Cli()
    stopped = cli("hms", "status", "--data-dir", str(data_dir), code=3)
    assert stopped.stdout.startswith("stopped")
    with stopped_at_exit(data_dir):
        # A separate process starts it: the JVM must outlive the command.
        started = run_module("hms", "start", "--data-dir", str(data_dir))
        assert started.returncode == 0, started.stderr
        # Says what it is doing while it starts, even into a pipe (no spinner there).
        assert "starting Hive Metastore 2.3 in" in started.stderr, started.stderr
        uri = started.stdout.strip()
        assert uri.startswith("thrift://127.0.0.1:")

        status = cli.json("hms", "status", "--data-dir", str(data_dir))
        assert status["running"] is True and status["uri"] == uri
        assert cli("hms", "status", "--data-dir", str(data_dir)).stdout.startswith(f"running {uri}")
        started_twice = cli("hms", "start", "--data-dir", str(data_dir), code=1).stderr
        assert "already runs" in started_twice and "--exist-ok" in started_twice
        assert cli.json("hms", "start", "--data-dir", str(data_dir), "--exist-ok")["uri"] == uri
        # As the docs say: --exist-ok reuses the running one, printing its uri and nothing else
        # on stdout.
        again = run_module("hms", "start", "--data-dir", str(data_dir), "--exist-ok")
        assert (again.returncode, again.stdout.strip()) == (0, uri), again.stderr
        assert "starting" not in again.stderr and "already running" in again.stderr
        roots = cli.json("--impl", "hive2", "--uri", uri, "ls")
        assert [n["name"] for n in roots["namespaces"]] == ["default"]

        assert cli("hms", "stop", "--data-dir", str(data_dir)).stdout.strip() == "stopped"
        after = cli.json("hms", "status", "--data-dir", str(data_dir), code=3)
        assert after["running"] is False
        assert cli("hms", "stop", "--data-dir", str(data_dir)).stdout.strip() == ("was not running")
    assert (
        "no local metastore" in cli("hms", "stop", "--data-dir", str(tmp_path / "x"), code=1).stderr
    )


@pytest.mark.timeout(240)
def test_hms_start_version_4(java: str, tmp_path: Path) -> None:
    """``hms start --version 4`` runs Hive Metastore 4.0.1 (fetched by scripts/setup.sh); the
    data directory remembers it, so status and a later start need no flag."""
    cli = Cli()
    bad = cli("hms", "start", "--data-dir", str(tmp_path / "bad"), "--version", "9", code=1)
    assert "unknown Hive Metastore version '9'" in bad.stderr
    data_dir = tmp_path / "hms4"
    with stopped_at_exit(data_dir):
        started = run_module("hms", "start", "--data-dir", str(data_dir), "--version", "4")
        assert started.returncode == 0, started.stderr
        uri = started.stdout.strip()
        status = cli.json("hms", "status", "--data-dir", str(data_dir))
        assert (status["running"], status["uri"], status["version"]) == (True, uri, "4")
        roots = cli.json("--impl", "hive3", "--uri", uri, "ls")
        assert [n["name"] for n in roots["namespaces"]] == ["hive"]
        assert cli("hms", "stop", "--data-dir", str(data_dir)).stdout.strip() == "stopped"


@pytest.mark.timeout(240)
def test_hms_start_s3_endpoint(java: str, stock_moto, tmp_path: Path) -> None:
    """``hms start --version 3.1 --s3-endpoint URL``: a metastore that accepts tables on
    ``s3://`` (moto's S3 here), signing with the AWS_* keys of the starting shell; 2.3 refuses."""
    from lance_metastore import connect

    cli = Cli()
    refused = cli("hms", "start", "--data-dir", str(tmp_path / "x"), "--s3-endpoint", "aws", code=1)
    assert "2.3 cannot hold s3:// locations here; use version 3.1" in refused.stderr
    bucket = f"hms-cli-{uuid.uuid4().hex[:8]}"
    stock_moto.client("s3").create_bucket(Bucket=bucket)
    data_dir = tmp_path / "hms31"
    keys = {"AWS_ACCESS_KEY_ID": "cli-test-key", "AWS_SECRET_ACCESS_KEY": "cli-test-secret"}
    with stopped_at_exit(data_dir):
        options = ("--data-dir", str(data_dir), "--version", "3.1")
        started = run_module(
            "hms", "start", *options, "--s3-endpoint", stock_moto.endpoint, env=keys
        )
        assert started.returncode == 0, started.stderr
        core_site = data_dir / "conf" / "core-site.xml"
        assert "cli-test-secret" in core_site.read_text()
        assert core_site.stat().st_mode & 0o777 == 0o600
        storage = {
            "storage.aws_endpoint": stock_moto.endpoint,
            "storage.allow_http": "true",
            "storage.aws_region": "us-east-1",
            "storage.aws_access_key_id": "client-key",
            "storage.aws_secret_access_key": "client-secret",
        }
        ns = connect(
            "hive3", {"uri": started.stdout.strip(), "root": f"s3://{bucket}/lake", **storage}
        )
        ns.create_namespace({"id": ["hive", "on_s3"]})
        declared = ns.declare_table({"id": ["hive", "on_s3", "t"]})
        assert declared.location.startswith(f"s3://{bucket}/lake/")
        assert cli("hms", "stop", "--data-dir", str(data_dir)).stdout.strip() == "stopped"
        # restarted without the flag: the data directory keeps its S3 settings
        assert run_module("hms", "start", "--data-dir", str(data_dir)).returncode == 0
        assert "cli-test-secret" in core_site.read_text()
        assert cli("hms", "stop", "--data-dir", str(data_dir)).stdout.strip() == "stopped"


# --------------------------------------------------------------------------------------------
# What a new user meets first
# --------------------------------------------------------------------------------------------


def test_version_and_json_usage_errors() -> None:
    """In this process: the entry point's own process is test_module_entry_point's."""
    import lance_metastore

    cli = Cli()
    assert cli("--version").stdout.strip() == f"lance-metastore {lance_metastore.__version__}"
    bad = cli("--json", "--impl", "hive2", "create-namespace", "x", "--mode", "sideways", code=2)
    assert "Usage:" in bad.stderr
    assert json.loads(bad.stdout)["error"]["exit_code"] == 2  # one JSON document
    late = cli("--impl", "hive2", "ls", "--page-size", "0", "--json", code=2)
    assert json.loads(late.stdout)["error"]["exit_code"] == 2
    misspelt = cli("--impl", "hiv2", "ls", code=2)
    assert "did you mean 'hive2'?" in misspelt.stderr


def test_unreachable_metastore_is_one_clean_line() -> None:
    result = run_module(
        "--impl", "hive2", "--uri", "thrift://127.0.0.1:9", "--prop", "client.retries=1", "ls"
    )
    assert result.returncode == 27
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error [code 17 SERVICE_UNAVAILABLE]:")


def test_reads_never_write_and_sync_columns(hive_metastore_uri: str, tmp_path: Path) -> None:
    cli = Cli("--impl", "hive2", "--uri", hive_metastore_uri, "--root", str(tmp_path / "lake"))
    db = unique()
    cli("create-namespace", db)
    location = cli.json("declare", f"{db}/t")["location"]
    write(location, [1, 2])  # pylance straight to storage: the catalog is not told
    cli("describe", f"{db}/t")
    cli("versions", f"{db}/t")
    from support.harness import HiveHarness

    hive = HiveHarness(root=tmp_path / "lake", uri=hive_metastore_uri, level=2)
    assert hive.columns([db], "t") == []  # the reads wrote nothing
    synced = cli.json("sync-columns", f"{db}$t")
    assert synced == {"id": [db, "t"], "columns": [{"name": "x", "type": "bigint", "comment": ""}]}
    assert "bigint" in cli("sync-columns", f"{db}$t").stdout
    assert "code 4 TABLE_NOT_FOUND" in cli("sync-columns", f"{db}$nope", code=14).stderr
    cli("drop-namespace", db, "--cascade")


def test_every_help_imports_no_client_library() -> None:
    """``--help`` of the command and of every subcommand answers from typer and rich alone
    (benchmarks/bench_startup.py --commands times them against 0.5 s): no Lance, Arrow, AWS,
    Thrift, Spark or server module, and not lance_namespace's models."""
    code = (
        "import sys, typer\n"
        "from lance_metastore.launch import main\n"
        "from lance_metastore.cli import app\n"
        "group = typer.main.get_command(app)\n"
        "helps = [['--help']]\n"
        "for name, command in group.commands.items():\n"
        "    helps.append([name, '--help'])\n"
        "    for sub in getattr(command, 'commands', {}):\n"
        "        helps.append([name, sub, '--help'])\n"
        "for argv in helps:\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit as exit:\n"
        "        assert exit.code in (0, None), (argv, exit.code)\n"
        "heavy = {'pyarrow', 'lance', 'lancedb', 'lance_namespace_urllib3_client.models',\n"
        "         'boto3', 'botocore', 'thrift', 'pymetastore', 'pyspark', 'starlette',\n"
        "         'uvicorn', 'jwt', 'pandas', 'numpy'}\n"
        "assert not heavy & set(sys.modules), heavy & set(sys.modules)\n"
        "assert 'LanceNamespace' not in vars(sys.modules.get('lance_namespace', sys))\n"
        "print(len(helps))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert int(run.stdout.strip().splitlines()[-1]) > 15
