"""The environment a CLI test runs in, written once for every CLI test module."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner


def refused_in_process(*args: str) -> Result:
    """Runs ``lance-metastore *args`` in this process and returns the result of a command that
    must refuse before it serves anything (a refusal needs no process of its own: one real
    ``serve`` process per behaviour is enough, each costs seconds of imports)."""
    from lance_metastore.cli import app

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code != 0, result.stdout
    assert result.stdout == ""  # never served: no URL printed
    return result


def isolate_cli_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No configuration of the machine running the tests leaks in: no LANCE_METASTORE_* (the
    tests' own LANCE_METASTORE_TEST_* stay) and a HOME without a config file."""
    for name in list(os.environ):
        if name.startswith("LANCE_METASTORE_") and not name.startswith("LANCE_METASTORE_TEST_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
