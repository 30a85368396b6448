"""Errors a person can act on: each answers in one line that says what to do, in the command
line (non-zero exit, no traceback) and in a PySpark job (the first line after Spark's prefix,
none of our frames in the text)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from support.cli_env import CliRunner, isolate_cli_environment
from support.harness import GlueHarness

from lance_metastore.cli import app
from lance_metastore.impls import impl_choices

# What Spark puts before the data source's error text.
SPARK_PREFIX = "[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: "


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_cli_environment(monkeypatch, tmp_path)


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (the OS chose it, then it was released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cli_error(args: list[str], code: int) -> str:
    """The command's one stderr line, checked for exit code, no traceback, one line."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_cli_misspelt_impl_names_the_choices() -> None:
    line = cli_error(["--impl", "hvie3", "ls"], code=2)
    assert (
        line == f"error: unknown impl 'hvie3' (did you mean 'hive3'?): give one of {impl_choices()}"
    )
    # --help names the same implementations (without importing lance_namespace's models for
    # its own, which would double --help's time: it names them as examples)
    help_text = " ".join(CliRunner().invoke(app, ["--help"]).stdout.split())
    for choice in impl_choices().replace(" or a class path pkg.mod.Class", "").split(", "):
        assert choice in help_text, choice
    assert "class path pkg.mod.Class" in help_text


def test_cli_metastore_down_says_how_to_get_one(closed_port: int) -> None:
    uri = f"thrift://127.0.0.1:{closed_port}"
    line = cli_error(["--impl", "hive2", "--uri", uri, "--prop", "client.retries=1", "ls"], code=27)
    assert line.startswith(f"error [code 17 SERVICE_UNAVAILABLE]: Hive Metastore {uri} unreachable")
    assert line.endswith("check the 'uri' property, or start one with `lance-metastore hms start`")


def test_cli_glue_without_credentials_says_which_to_set(
    glue: GlueHarness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    target = glue.target
    args = ["--impl", "glue", "--endpoint", target.endpoint, "--region", target.region, "ls"]
    line = cli_error(args, code=26)
    assert line.startswith("error [code 16 UNAUTHENTICATED]: No usable AWS credentials")
    assert "set the access_key_id and secret_access_key properties, profile_name" in line


def test_cli_hms_start_without_java_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    line = cli_error(["hms", "start", "--data-dir", str(tmp_path / "hms")], code=1)
    assert line.startswith("error: no `java` on PATH; install Java 17")
    assert "or set JAVA_HOME" in line


# -- the same errors in a PySpark job ----------------------------------------------------------


def spark_first_line(error: BaseException) -> str:
    text = str(error)
    assert text.startswith(SPARK_PREFIX), text
    body = text[len(SPARK_PREFIX) :]
    assert "Traceback" not in body and "lance_metastore/" not in body, body
    return body.splitlines()[0]


def test_spark_metastore_down_is_the_first_line(spark: Any, closed_port: int) -> None:
    uri = f"thrift://127.0.0.1:{closed_port}"
    reader = spark.read.format("lance").options(impl="hive2", uri=uri, **{"client.retries": "1"})
    with pytest.raises(Exception) as caught:
        reader.load("db$t").count()
    line = spark_first_line(caught.value)
    assert line.startswith(f"lance_namespace.errors.ServiceUnavailableError: Hive Metastore {uri}")
    assert line.endswith("check the 'uri' property, or start one with `lance-metastore hms start`")


def test_spark_misspelt_impl_is_the_first_line(spark: Any) -> None:
    with pytest.raises(Exception) as caught:
        spark.read.format("lance").option("impl", "hvie3").load("db$t").count()
    line = spark_first_line(caught.value)
    assert line.endswith(
        f"Option 'impl': unknown impl 'hvie3' (did you mean 'hive3'?): give one of {impl_choices()}"
    )


@pytest.mark.parametrize("backend_name", ["glue", "hive3"])
def test_cli_missing_parent_hint_is_the_same_for_every_backend(
    request: pytest.FixtureRequest, backend_name: str
) -> None:
    """A not-found error names the first ancestor namespace (e.g. a catalog) that is missing,
    by the same rule on every backend."""
    harness = request.getfixturevalue(backend_name)
    args = ["--impl", harness.name]
    for key, value in harness.properties().items():
        args += ["--prop", f"{key}={value}"]
    line = cli_error([*args, "describe", "nocat$db$t"], code=14)
    assert line == (
        "error [code 4 TABLE_NOT_FOUND]: Table not found: 'nocat$db$t'; "
        "namespace 'nocat' does not exist"
    )
    line = cli_error([*args, "declare", "nocat$db$t"], code=11)
    assert line.startswith("error [code 1 NAMESPACE_NOT_FOUND]: Namespace not found: ")
    assert "'nocat'" in line
    line = cli_error([*args, "create-namespace", "nocat$db"], code=11)
    assert line.endswith("parent catalog 'nocat' of 'nocat$db'") or "'nocat' does not" in line
