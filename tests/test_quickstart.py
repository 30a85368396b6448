"""The README's runnable snippets, run as written, twice in a row, in an empty folder.

A snippet is runnable when the line before its fence is ``<!-- runnable -->``. The README writes
them for a local Hive Metastore on port 9083 and a Glue endpoint (moto's server) on port 5000;
the test gives them the addresses of the session's real Hive Metastore 2.3 and Glue emulator
instead (:data:`PLACEHOLDERS`) and changes nothing else. Python snippets run in this test
environment's interpreter, shell snippets in bash with its ``bin`` first on PATH. Every snippet
runs in README order in one empty folder, and then the whole sequence again: running a snippet
twice must work (``exist_ok``, ``overwrite``).

The core install in a fresh virtualenv (no editable install, nothing from the test venv) is
checked separately: it imports, answers the one-line missing-extra error, and runs the pylance
snippet with the ``hive`` extra.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MARKER = "<!-- runnable -->"

# What the README writes -> the name of the address the test substitutes for it.
HMS_URI = "thrift://127.0.0.1:9083"
GLUE_ENDPOINT = "http://127.0.0.1:5000"
PLACEHOLDERS = (HMS_URI, GLUE_ENDPOINT)


@dataclass(frozen=True)
class Snippet:
    language: str  # "python" or "sh"
    code: str
    line: int  # of the fence in README.md

    def __str__(self) -> str:
        return f"README.md:{self.line} ({self.language})"


def runnable_snippets(text: str) -> list[Snippet]:
    """Every fenced block whose preceding line is the marker, in README order."""
    pattern = re.compile(re.escape(MARKER) + r"\n```(\w+)\n(.*?)^```", re.S | re.M)
    return [
        Snippet(match.group(1), match.group(2), text.count("\n", 0, match.start(1)) + 1)
        for match in pattern.finditer(text)
    ]


def substitute(code: str, addresses: dict[str, str]) -> str:
    for placeholder, address in addresses.items():
        code = code.replace(placeholder, address)
    return code


def snippet_environment(home: Path, python: str) -> dict[str, str]:
    """This process's environment without the machine's lance-metastore settings, a HOME
    without a profile file, and Spark on loopback with this interpreter."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("LANCE_METASTORE_") or name.startswith("LANCE_METASTORE_TEST_")
    }
    bin_dir = str(Path(python).parent)
    env.update(
        HOME=str(home),
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYSPARK_PYTHON=python,
        PYSPARK_DRIVER_PYTHON=python,
        SPARK_LOCAL_IP="127.0.0.1",
        RUST_LOG="error",
    )
    return env


def run_snippet(
    snippet: Snippet, addresses: dict[str, str], cwd: Path, env: dict[str, str], python: str
) -> subprocess.CompletedProcess[str]:
    code = substitute(snippet.code, addresses)
    command = (
        [python, "-c", code]
        if snippet.language == "python"
        else ["bash", "-euo", "pipefail", "-c", code]
    )
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=cwd, env=env)


def test_the_readme_marks_the_walkthrough_runnable() -> None:
    """The quick start, PySpark, pylance, lancedb, Glue and CLI snippets are all marked, and every
    marked snippet names only addresses the test substitutes."""
    snippets = runnable_snippets(README.read_text())
    codes = [s.code for s in snippets]
    assert any('format("lance")' in c and "SparkSession" in c for c in codes)
    assert any("lance.write_dataset" in c and "hive3" in c for c in codes)
    assert any("lancedb.connect_namespace" in c for c in codes)
    assert any('"glue"' in c and GLUE_ENDPOINT in c for c in codes)
    assert any(s.language == "sh" and "lance-metastore" in s.code for s in snippets)
    for snippet in snippets:
        assert snippet.language in ("python", "sh"), snippet
        assert "/data/lake" not in snippet.code, f"{snippet} writes outside its folder"
        for address in re.findall(r"(?:thrift|https?)://[\w.:-]+", snippet.code):
            assert address in PLACEHOLDERS, f"{snippet} names {address}, which no test provides"


@pytest.mark.timeout(1800)
def test_readme_runnable_snippets_twice(
    spark_installed: None, hive3, hive_metastore_uri: str, glue, tmp_path: Path
) -> None:
    """Every runnable snippet, twice; the PySpark one starts Spark (hence ``spark``)."""
    hive3.reset()  # the snippets create hive$sales: start from an empty metastore
    addresses = {HMS_URI: hive_metastore_uri, GLUE_ENDPOINT: glue.emulator.endpoint}
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = snippet_environment(home, sys.executable)
    snippets = runnable_snippets(README.read_text())
    outputs: dict[Snippet, str] = {}
    for round_ in (1, 2):
        for snippet in snippets:
            run = run_snippet(snippet, addresses, work, env, sys.executable)
            assert run.returncode == 0, (
                f"{snippet}, run {round_}:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
            )
            outputs[snippet] = run.stdout
    everything = "\n".join(outputs.values())
    # What the snippets print after their second run: the tables they made, by name.
    assert "['customers', 'orders']" in everything
    assert "['ids']" in everything
    assert "customers" in outputs[snippets[-1]] and "orders" in outputs[snippets[-1]]
    assert (work / "lake").is_dir()  # the relative root landed in the snippets' folder


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
    pylance = next(
        s for s in runnable_snippets(README.read_text()) if "lance.write_dataset" in s.code
    )
    for _ in (1, 2):
        run = run_snippet(pylance, {HMS_URI: hive_metastore_uri}, tmp_path, env, python)
        assert run.returncode == 0, run.stderr[-3000:]
        assert "['customers']" in run.stdout
    assert sys.executable != python
