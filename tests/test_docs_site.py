"""The docs site builds with ``mkdocs build --strict``: a broken link, a missing anchor, a page
left out of the nav or an API reference to a name that does not exist fails the suite.

The reference pages are generated from the code at build time (scripts/mkdocs_hooks.py): the
CLI reference from the typer app, the connection properties from each backend's property
table. The tests here check that they say what the code says.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HOOKS = REPO / "scripts" / "mkdocs_hooks.py"


def hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", HOOKS)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(300)
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra: pip install '.[docs]'")
    site = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, build.stderr[-4000:]
    assert "WARNING" not in build.stderr, build.stderr[-4000:]
    # The generated and the API pages are there, with what they are generated from.
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "lance-metastore hms start" in cli and "--exist-ok" in cli
    properties = (site / "reference" / "properties" / "index.html").read_text()
    assert "client.pool-size" in properties and "assume_role_arn" in properties
    api = (site / "reference" / "api" / "index.html").read_text()
    assert "GlueNamespace" in api and "sql_conf" in api


def test_the_cli_reference_has_every_command() -> None:
    import typer

    from lance_metastore.cli import app

    text = hooks().cli_reference()
    root = typer.main.get_command(app)
    for name in root.list_commands(None):  # type: ignore[attr-defined,arg-type]
        assert f"`lance-metastore {name}`" in text, name
    assert "`lance-metastore hms stop`" in text


def test_the_properties_reference_has_every_property() -> None:
    from lance_metastore.glue.namespace import PROPERTIES as GLUE
    from lance_metastore.hive.namespace import PROPERTIES as HIVE

    text = hooks().properties_reference()
    for prop in (*GLUE, *HIVE):
        assert f"| `{prop.name}` |" in text, prop.name
    secret_rows = [line for line in text.splitlines() if "| yes |" in line]
    assert any("secret_access_key" in row for row in secret_rows)


def test_the_readme_is_short_and_links_into_the_site() -> None:
    """The README is what a newcomer reads in five minutes; the rest is in the site."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    for command in ("bash scripts/demo.sh", "bash scripts/test.sh"):
        assert command in readme
    nav = (REPO / "mkdocs.yml").read_text()
    for link in re.findall(r"\]\(docs/([\w./-]+\.md)", readme):
        assert (REPO / "docs" / link).is_file() or link.startswith("reference/"), link
        assert link in nav, f"{link} is not in mkdocs.yml's nav"


def test_no_history_in_the_docs() -> None:
    """The docs say what is, not what was: no commit hashes, no "before this change"."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text()
        for pattern in (r"\b(?:before|after) (?:this|the) change\b", r"\(\b[0-9a-f]{7,12}\b\)"):
            found = re.search(pattern, text, re.I)
            assert found is None, f"{page.name}: {found.group(0) if found else ''}"
