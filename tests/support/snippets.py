"""The code blocks of the README and the guides, as a reader runs them: in document order.

Every fenced block in ``python``, ``sh``, ``bash`` or ``console`` (its ``$`` lines) is a
snippet that runs, unless the line before its fence says why it cannot::

    <!-- no-run: needs a Kerberos realm -->

A block marked ``<!-- background -->`` is a server the page tells the reader to start (it runs
until stopped): it is started, its first line of output awaited, and it is stopped after the
page's last snippet. Other languages (``text``, ``json``, ``toml`` ...) show data, not code.

A page writes its snippets for the servers it tells the reader to start: a local Hive Metastore
on port 9083 (``lance-metastore hms start --port 9083 --exist-ok``, a snippet of the page), a
Glue endpoint on port 5000 (moto's server), a REST server on port 2333 (a background snippet).
The tests substitute free ports and the Glue emulator (:data:`PORTS`, :data:`GLUE_ENDPOINT`)
and change nothing else.

A page's install line (``pip install '.[extras]'`` in one of its blocks, run or not) must
install everything its snippets import and use: :func:`missing_from_install` checks that.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent.parent

# The pages whose snippets run: the README and the guides.
PAGES = (
    "README.md",
    "docs/index.md",
    "docs/glue.md",
    "docs/hive.md",
    "docs/spark.md",
    "docs/spark-sql.md",
    "docs/rest.md",
    "docs/security.md",
    "docs/cli.md",
)

RUN_LANGUAGES = frozenset({"python", "sh", "bash", "console"})
HMS_PORT = "9083"
REST_PORT = "2333"
PORTS = (HMS_PORT, REST_PORT)
GLUE_ENDPOINT = "http://127.0.0.1:5000"

_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<code>.*?)^```[ \t]*$", re.S | re.M)
_MARKER = re.compile(r"<!--\s*(?P<kind>no-run|background)\s*(?::\s*(?P<reason>.*?))?\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: str
    line: int  # of the fence
    language: str
    code: str
    marker: str | None  # "no-run", "background" or None
    reason: str

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and self.marker != "no-run"

    def script(self) -> str:
        """What runs: the code, or a console block's ``$`` commands (continuations joined)."""
        if self.language != "console":
            return self.code
        commands: list[str] = []
        continuing = False
        for line in self.code.splitlines():
            if continuing:
                commands[-1] += "\n" + line
            elif line.startswith("$ "):
                commands.append(line[2:])
            else:
                continue
            continuing = line.endswith("\\")
        return "\n".join(commands) + "\n"

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.language})"


def blocks(page: str, text: str | None = None) -> list[Block]:
    """Every fenced block of ``page`` (a path relative to the repository), in order."""
    text = (REPO / page).read_text() if text is None else text
    found = []
    for match in _FENCE.finditer(text):
        info = match.group("info").strip()
        language = info.split()[0] if info else ""
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = _MARKER.search(before)
        found.append(
            Block(
                page,
                line,
                language,
                match.group("code"),
                marker.group("kind") if marker else None,
                (marker.group("reason") or "") if marker else "",
            )
        )
    return found


# -- what a page's install line installs --------------------------------------------------------

_INSTALL = re.compile(r"pip install '\.\[(?P<extras>[\w,-]+)\]'")


def install_extras(page_blocks: Iterable[Block]) -> set[str] | None:
    """The extras of the page's first ``pip install '.[...]'`` line (None without one)."""
    for block in page_blocks:
        match = _INSTALL.search(block.code)
        if match:
            return set(match.group("extras").split(","))
    return None


def _requirement_name(requirement: str) -> tuple[str, set[str]]:
    match = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(?:\[([^\]]*)\])?", requirement)
    assert match, requirement
    extras = {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
    return _normal(match.group(1)), extras


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _project() -> dict[str, object]:
    with (REPO / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)["project"]  # type: ignore[no-any-return]


def installed_by(extras: set[str]) -> set[str]:
    """The distributions ``pip install '.[extras]'`` installs: the project's requirements and
    those of its extras, and everything they require in turn (as installed here)."""
    project = _project()
    optional: dict[str, list[str]] = project["optional-dependencies"]  # type: ignore[assignment]
    own = _normal(str(project["name"]))
    wanted: list[str] = list(project["dependencies"])  # type: ignore[call-overload]
    seen_extras: set[str] = set()
    todo = list(extras)
    while todo:
        extra = todo.pop()
        if extra in seen_extras:
            continue
        seen_extras.add(extra)
        for requirement in optional[extra]:
            name, nested = _requirement_name(requirement)
            if name == own:
                todo.extend(nested)
            else:
                wanted.append(requirement)
    result: set[str] = {own}
    queue = [r for r in wanted if "; python_version < '3.11'" not in r]
    while queue:
        name, nested = _requirement_name(queue.pop())
        if name in result:
            continue
        result.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            if "extra ==" in requirement:
                extra_names = re.findall(r"extra == ['\"]([\w-]+)['\"]", requirement)
                if not set(extra_names) & nested:
                    continue
            elif ";" in requirement and not _marker_holds(requirement):
                continue
            queue.append(requirement.split(";")[0])
    return result


def _marker_holds(requirement: str) -> bool:
    from packaging.requirements import Requirement

    marker = Requirement(requirement).marker
    return marker is None or marker.evaluate({"extra": ""})


# What a snippet uses beyond its imports: a backend by its alias, the REST server, the local
# metastore (pyspark's jars and the Thrift client). Each needs its extra.
_USES = (
    (re.compile(r"[\"']glue[\"']|--impl glue|IMPL=glue"), ("glue",)),
    (re.compile(r"[\"']hive[23][\"']|--impl hive[23]|IMPL=hive[23]|Hive[23]Namespace"), ("hive",)),
    (re.compile(r"lance-metastore[^\n]* serve\b|lance_metastore\.rest"), ("server",)),
    # The local metastore runs the Hive jars of pyspark's wheel, 4 or 3.5 (and talks Thrift).
    (re.compile(r"lance-metastore hms start"), ("spark", "sql")),
    (re.compile(r"lance-metastore hms start"), ("hive",)),
)


def _distribution_of(module: str) -> set[str]:
    return {_normal(d) for d in metadata.packages_distributions().get(module, [])}


def missing_from_install(page_blocks: list[Block]) -> list[str]:
    """What the page's runnable snippets import or use that its install line does not install
    (a missing install line is itself reported)."""
    runnable = [b for b in page_blocks if b.runs]
    if not runnable:
        return []
    extras = install_extras(page_blocks)
    if extras is None:
        return [f"{page_blocks[0].page} has runnable snippets but no pip install '.[...]' line"]
    installed = installed_by(extras)
    problems = []
    for block in runnable:
        if block.language == "python":
            for node in ast.walk(ast.parse(block.script())):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    top = name.partition(".")[0]
                    if top == "lance_metastore":
                        continue
                    distributions = _distribution_of(top)
                    if distributions and not distributions & installed:
                        problems.append(f"{block} imports {top}, which {sorted(extras)} lacks")
        for pattern, choices in _USES:
            if pattern.search(block.script()) and not set(choices) & _closure(extras):
                wanted = " or ".join(f"'{extra}'" for extra in choices)
                problems.append(f"{block} uses the {wanted} extra, which {sorted(extras)} lacks")
    return problems


def _closure(extras: set[str]) -> set[str]:
    """The extras ``extras`` stand for, nested ones included (``glue`` includes ``aws``)."""
    optional: dict[str, list[str]] = _project()["optional-dependencies"]  # type: ignore[assignment]
    own = _normal(str(_project()["name"]))
    result: set[str] = set()
    todo = list(extras)
    while todo:
        extra = todo.pop()
        if extra in result:
            continue
        result.add(extra)
        for requirement in optional[extra]:
            name, nested = _requirement_name(requirement)
            if name == own:
                todo.extend(nested)
    return result


def substitute(code: str, replacements: dict[str, str]) -> str:
    """The snippet with the test's addresses for the ones the page names."""
    for written, actual in replacements.items():
        code = code.replace(written, actual)
    return code
