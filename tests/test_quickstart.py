"""The README's quickstart, followed literally in a fresh virtual environment.

The project is installed from this checkout into a new venv (no editable install, nothing from
the test venv), then the README's first Python block runs there against a real local Hive
Metastore; only the metastore address and the storage root are substituted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def readme_quickstart() -> str:
    text = (REPO / "README.md").read_text()
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


@pytest.mark.timeout(900)
def test_readme_quickstart_in_a_fresh_venv(hive3, hive_metastore_uri: str, tmp_path: Path):
    hive3.reset()  # the quickstart creates "sales": start from an empty metastore
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", str(REPO)],
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert install.returncode == 0, install.stderr[-3000:]

    code = readme_quickstart()
    assert 'connect("hive3"' in code
    code = code.replace("thrift://localhost:9083", hive_metastore_uri)
    code = code.replace("/data/lake", str(tmp_path / "lake"))
    run = subprocess.run(
        [python, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "RUST_LOG": "error", "PYTHONPATH": ""},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "['orders']" in run.stdout
    assert "amount" in run.stdout
    assert sys.executable != python


def test_readme_lancedb_example(hive3, hive_metastore_uri: str, tmp_path: Path):
    """The README's lancedb block, after its quickstart, in this test environment."""
    hive3.reset()
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    lancedb_block = next(b for b in blocks if "lancedb.connect_namespace" in b)
    assert "import lance_metastore" in lancedb_block
    code = "\n".join([blocks[0], lancedb_block])
    code = code.replace("thrift://localhost:9083", hive_metastore_uri)
    code = code.replace("/data/lake", str(tmp_path / "lake"))
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "RUST_LOG": "error"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.count("['orders']") == 2  # listed by the namespace, then by lancedb
    assert "amount" in run.stdout
