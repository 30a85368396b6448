"""The environment a CLI test runs in, written once for every CLI test module."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def isolate_cli_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No configuration of the machine running the tests leaks in: no LANCE_METASTORE_* (the
    tests' own LANCE_METASTORE_TEST_* stay) and a HOME without a config file."""
    for name in list(os.environ):
        if name.startswith("LANCE_METASTORE_") and not name.startswith("LANCE_METASTORE_TEST_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
