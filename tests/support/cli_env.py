"""The environment a CLI test runs in, written once for every CLI test module."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
import typer.main
import typer.testing
from click.testing import Result
from typer.testing import CliRunner

# typer's runner builds the app's click command again on every invoke (typer.testing's
# ``_get_command``), evaluating the annotations of every command: about 45 ms of CPU, times
# ~240 invokes in the fast tier. A click command is made to run any number of times, so a test
# process builds it once per app. Every CLI test module takes CliRunner from here.
if not callable(getattr(typer.testing, "_get_command", None)):
    raise RuntimeError("typer.testing has no _get_command any more: update support/cli_env.py")
typer.testing._get_command = functools.cache(typer.main.get_command)

__all__ = ["CliRunner", "isolate_cli_environment", "refused_in_process"]


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
