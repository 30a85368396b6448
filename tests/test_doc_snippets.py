"""Every snippet of the README and the guides runs as written, in document order, twice.

The blocks come from the markdown pages themselves (tests/support/snippets.py): a block runs
unless the line before it says ``<!-- no-run: why -->``. Each page runs in its own empty folder
with an empty HOME, against the servers the page tells the reader to start: its own snippet
``lance-metastore hms start --port 9083 --exist-ok`` starts a real Hive Metastore there (on a
free port the test substitutes for 9083; the second round reuses it, as ``--exist-ok`` says),
its ``<!-- background -->`` blocks start servers, and a Glue endpoint on port 5000 is the
session's Glue emulator. Then the page runs again from its first snippet: a snippet that
collides with an earlier one, or with its own first run, fails.

The environment sets nothing for the snippets beyond the interpreter (no ``SPARK_LOCAL_IP``, no
``LANCE_LOG``): what a reader's shell would have. As in that shell, what a shell block exports
(``export LANCE_METASTORE_IMPL=...``) or unsets holds for the page's later blocks. A snippet
that prints Spark's "resolves to a loopback address" warning or Lance's "No existing dataset"
notices fails: the snippet (or ``local_session``) must keep Spark on loopback and Lance quiet.

What a page's snippets import or use must be installed by the page's install line (checked
against pyproject.toml's extras without installing anything; a fresh-venv install of the core
is in tests/test_quickstart.py).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.snippets import (
    GLUE_ENDPOINT,
    PAGES,
    PORTS,
    REPO,
    Block,
    blocks,
    missing_from_install,
    substitute,
)

# Lines no snippet may print (on stdout or stderr).
NOISE = (
    re.compile(r"resolves to a loopback address"),  # Spark bound off loopback
    re.compile(r"No existing dataset at"),  # Lance's log at its default level
    re.compile(r"\[cds\]"),  # JVM class-data warnings
)


def runnable_pages() -> list[str]:
    return [page for page in PAGES if any(b.runs for b in blocks(page))]


def test_every_block_runs_or_says_why_not() -> None:
    """A block that cannot run says why; the few that cannot are listed here by count, so a
    new one is a decision."""
    skipped = []
    for page in PAGES:
        for block in blocks(page):
            if block.marker == "no-run":
                assert block.reason, f"{block}: <!-- no-run: ... --> must say why"
                skipped.append(str(block))
    runnable = [b for page in PAGES for b in blocks(page) if b.runs]
    assert len(runnable) >= 15, runnable
    assert len(skipped) <= 13, "\n".join(skipped)


def test_snippets_name_only_addresses_the_tests_provide() -> None:
    for page in PAGES:
        for block in blocks(page):
            if not block.runs:
                continue
            for address in re.findall(r"(?:thrift|https?)://[\w.:-]+", block.script()):
                assert address in (
                    f"thrift://127.0.0.1:{PORTS[0]}",
                    f"http://127.0.0.1:{PORTS[1]}",
                    GLUE_ENDPOINT,
                ), f"{block} names {address}, which no test provides"
            assert "/data/lake" not in block.code, f"{block} writes outside its folder"


@pytest.mark.parametrize("page", PAGES)
def test_the_install_line_installs_what_the_snippets_use(page: str) -> None:
    assert missing_from_install(blocks(page)) == []


def test_an_import_the_install_line_lacks_is_found() -> None:
    """The check itself: lancedb without the lancedb extra, Glue without the glue extra."""
    text = (
        "```sh\npip install '.[hive]'\n```\n\n"
        "```python\nimport lancedb\nimport lance_metastore\n"
        'lance_metastore.connect("glue", {})\n```\n'
    )
    problems = missing_from_install(blocks("README.md", text))
    assert any("imports lancedb" in p for p in problems), problems
    assert any("'glue' extra" in p for p in problems), problems
    assert missing_from_install(blocks("README.md", text.replace("[hive]", "[glue,lancedb]"))) == []


def test_console_blocks_run_their_commands() -> None:
    text = "```console\n$ echo a \\\n  b\nA B\n$ true\n```\n"
    (block,) = blocks("x.md", text)
    assert block.script() == "echo a \\\n  b\ntrue\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def page_environment(home: Path) -> dict[str, str]:
    """This process's environment without settings of ours or Spark's and Lance's log and
    address settings, a HOME without a profile file, and this interpreter first on PATH."""
    dropped = ("SPARK_LOCAL_IP", "LANCE_LOG", "RUST_LOG", "PYTHONWARNINGS")
    env = {
        name: value
        for name, value in os.environ.items()
        if (not name.startswith("LANCE_METASTORE_") or name.startswith("LANCE_METASTORE_TEST_"))
        and name not in dropped
    }
    bin_dir = str(Path(sys.executable).parent)
    env.update(
        HOME=str(home),
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    return env


def command_of(block: Block, code: str, exported: Path) -> list[str]:
    """A Python block runs in a new interpreter; a shell block in bash, which writes what it
    exported to ``exported`` when it exits (as a reader's shell keeps it for the next block)."""
    if block.language == "python":
        return [sys.executable, "-c", code]
    keep = f"trap 'env -0 > \"{exported}\"' EXIT\n"
    return ["bash", "-euo", "pipefail", "-c", keep + code]


# What a shell sets by itself, never carried from one block to the next.
_SHELL_OWN = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})


def exports_of(exported: Path, env: dict[str, str]) -> dict[str, str]:
    """The environment after a shell block: what it exported (or unset) carried forward."""
    if not exported.exists():
        return env
    after = dict(entry.split("=", 1) for entry in exported.read_text().split("\0") if "=" in entry)
    exported.unlink()
    kept = {name: value for name, value in env.items() if name in after or name in _SHELL_OWN}
    kept.update({name: value for name, value in after.items() if name not in _SHELL_OWN})
    return kept


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("page", runnable_pages())
def test_page_snippets_run_in_order_twice(
    page: str, java: str, spark_installed: None, glue, tmp_path: Path
) -> None:
    """Every runnable snippet of the page, in order, then all of them again."""
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = page_environment(home)
    replacements = {port: str(free_port()) for port in PORTS}
    replacements = {GLUE_ENDPOINT: glue.emulator.endpoint, **replacements}
    page_blocks = [b for b in blocks(page) if b.runs]
    background: list[subprocess.Popen[str]] = []
    exported = tmp_path / "exported"
    try:
        for round_ in (1, 2):
            for block in page_blocks:
                code = substitute(block.script(), replacements)
                if block.marker == "background":
                    if round_ == 1:
                        background.append(start_background(block, code, work, env))
                    continue
                run = subprocess.run(
                    command_of(block, code, exported),
                    capture_output=True,
                    text=True,
                    timeout=600,
                    cwd=work,
                    env=env,
                )
                assert run.returncode == 0, (
                    f"{block}, run {round_}:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
                )
                if block.language != "python":
                    env = exports_of(exported, env)
                for noise in NOISE:
                    for stream in (run.stdout, run.stderr):
                        assert not noise.search(stream), f"{block} printed:\n{stream[-3000:]}"
    finally:
        for process in background:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        if (work / ".lance-metastore" / "hms").is_dir():
            subprocess.run(
                [str(Path(sys.executable).parent / "lance-metastore"), "hms", "stop"],
                cwd=work,
                env=env,
                capture_output=True,
                timeout=120,
            )


def start_background(
    block: Block, code: str, cwd: Path, env: dict[str, str]
) -> subprocess.Popen[str]:
    """A server the page starts: running once it prints its first line."""
    process = subprocess.Popen(
        ["bash", "-c", f"exec {code.strip()}"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    assert process.poll() is None, f"{block} exited: {first}{process.stdout.read()[-3000:]}"
    # Its log (the audit lines) goes on: read it, so the server never blocks on a full pipe.
    threading.Thread(target=process.stdout.read, daemon=True).start()
    return process


def test_the_pages_are_the_readme_and_the_guides() -> None:
    assert "README.md" in PAGES
    for page in PAGES:
        assert (REPO / page).is_file(), page


def test_the_token_recipe_makes_a_file_only_its_owner_reads(tmp_path: Path) -> None:
    """The guides' token recipe, run with a umask that leaves files world-readable, still
    makes a 0600 file (``serve`` warns about a token file others can read)."""
    recipes = [
        line.split("#")[0].strip()
        for page in PAGES
        for block in blocks(page)
        for line in block.script().splitlines()
        if "openssl rand" in line
    ]
    assert recipes
    for recipe in recipes:
        subprocess.run(["bash", "-c", f"umask 022; {recipe}"], cwd=tmp_path, check=True)
        token = tmp_path / "token.txt"
        assert token.stat().st_mode & 0o777 == 0o600, recipe
        assert len(token.read_text().strip()) >= 32
        token.unlink()
