"""The core install in a fresh virtualenv, as the README's install lines do it.

The README's and the guides' snippets themselves run in tests/test_doc_snippets.py. The core
install in a fresh virtualenv (no editable install, nothing from the test venv) is
checked separately: it imports, answers the one-line missing-extra error, and runs the pylance
snippet with the ``hive`` extra.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from support.snippets import blocks

REPO = Path(__file__).resolve().parent.parent
HMS_URI = "thrift://127.0.0.1:9083"  # what the README writes; the test's metastore instead


def pylance_snippet() -> str:
    """The README's pylance snippet (tests/support/snippets.py collects the README's blocks)."""
    return next(
        b.script()
        for b in blocks("README.md")
        if b.runs and "lance.write_dataset" in b.code and "hive2" in b.code
    )


def snippet_environment(home: Path, python: str) -> dict[str, str]:
    """This process's environment without the machine's lance-metastore settings, a HOME
    without a profile file, and this interpreter."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("LANCE_METASTORE_") or name.startswith("LANCE_METASTORE_TEST_")
    }
    env.update(HOME=str(home), PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
    return env


@pytest.mark.slow  # installs the project twice into a new virtualenv: a minute or more
@pytest.mark.timeout(1200)
def test_core_install_in_a_fresh_venv(hive3, hive_metastore_uri: str, tmp_path: Path) -> None:
    """``pip install .`` gives the core only: it imports, a backend without its extra answers
    one line naming it, and with ``[hive]`` the README's pylance snippet runs twice."""
    hive3.reset()
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = str(env_dir / "bin" / "python")

    def pip_install(target: str) -> None:
        install = subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", target],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert install.returncode == 0, install.stderr[-3000:]

    pip_install(str(REPO))
    env = {**snippet_environment(tmp_path, python), "PYTHONPATH": ""}
    probe = subprocess.run(
        [python, "-c", "import lance_metastore\nlance_metastore.GlueNamespace"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert probe.returncode == 1
    last_line = probe.stderr.strip().splitlines()[-1]
    assert last_line.startswith(
        "lance_metastore.rules.extras.MissingExtraError: missing the 'glue'"
    )
    assert last_line.endswith("pip install 'lance-metastore[glue]'")

    pip_install(f"{REPO}[hive]")
    code = pylance_snippet().replace(HMS_URI, hive_metastore_uri)
    for _ in (1, 2):
        run = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env
        )
        assert run.returncode == 0, run.stderr[-3000:]
        assert "['customers']" in run.stdout
    assert sys.executable != python
