"""The one output layer: every command hands a JSON-ready document to an :class:`Output`.

:class:`JsonOutput` prints exactly that document on stdout; :class:`RichOutput` renders it as
text, tables and trees for people, with progress on stderr when stderr is a terminal. No
command knows which one it talks to. Errors go to stderr as ``error [code N NAME]: message``
in both, and ``--json`` adds one ``{"error": ...}`` document on stdout.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..rules.identifiers import join_identifier

Advance = Callable[[int, int], None]  # (done, total)
Describe = Callable[[str], None]


def _json_default(value: Any) -> Any:
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


class Output:
    """What a command can show. The base class is the JSON form: the document, nothing else."""

    json = True

    def document(self, document: Any) -> None:
        """Exactly one JSON document on stdout, no colours."""
        sys.stdout.write(json.dumps(document, indent=2, default=_json_default))
        sys.stdout.write("\n")
        sys.stdout.flush()

    # One method per kind of result; the JSON form of each is its document.
    def done(self, document: dict[str, Any], message: str) -> None:
        self.document(document)

    def line(self, document: dict[str, Any], text: str) -> None:
        self.document(document)

    def tree(self, document: dict[str, Any], label: str) -> None:
        self.document(document)

    def _shown_as_document(self, document: dict[str, Any]) -> None:
        self.document(document)

    # Kinds of result that the JSON form shows as their bare document.
    config = table_description = namespace_description = _shown_as_document
    namespace_ready = registrations = versions = columns = _shown_as_document

    def note(self, text: str) -> None:
        """A remark for people (stderr); nothing in JSON."""

    def error(
        self,
        message: str,
        exit_code: int,
        code: int | None,
        name: str | None,
        document: bool = True,
    ) -> None:
        """The error line on stderr, and its JSON document unless the command's own document
        (which reports the failure) is already printed: stdout holds exactly one."""
        prefix = f"error [code {code} {name}]" if code is not None else "error"
        stderr_console().print(Text(f"{prefix}: {message}", style="red"), soft_wrap=True)
        if document:
            error: dict[str, Any] = {"message": message, "exit_code": exit_code}
            if code is not None:
                error.update(code=code, name=name)
            self.document({"error": error})

    @contextlib.contextmanager
    def spinner(self, description: str) -> Iterator[Describe]:
        """Progress of work that takes seconds, with a settable description."""
        yield lambda _text: None

    @contextlib.contextmanager
    def progress(self, description: str) -> Iterator[Advance]:
        """Progress of counted steps; yields ``update(done, total)``."""
        yield lambda _done, _total: None


JsonOutput = Output


class RichOutput(Output):
    """Text for people: rich tables and trees on stdout, progress and notes on stderr."""

    json = False

    def __init__(self) -> None:
        self.out = Console(highlight=False, soft_wrap=False)
        self.err = stderr_console()

    def _progress_shown(self) -> bool:
        return self.err.is_terminal  # not into pipes and files

    def done(self, document: dict[str, Any], message: str) -> None:
        # One line, never broken by us: the terminal wraps it and a copied path stays whole.
        self.out.print(Text(message), soft_wrap=True)

    def line(self, document: dict[str, Any], text: str) -> None:
        print(text)

    def note(self, text: str) -> None:
        self.err.print(Text(text))

    def error(
        self,
        message: str,
        exit_code: int,
        code: int | None,
        name: str | None,
        document: bool = True,
    ) -> None:
        prefix = f"error [code {code} {name}]" if code is not None else "error"
        self.err.print(Text(f"{prefix}: {message}", style="red"), soft_wrap=True)

    def config(self, document: dict[str, Any]) -> None:
        impl = document["impl"]
        self.out.print(
            key_values(
                [
                    ("impl", f"{impl} ({document['impl_source']})" if impl else "-"),
                    ("profile", document["profile"] or "-"),
                    ("config file", document["config_file"] or "-"),
                ]
            )
        )
        table = Table(title="properties", title_justify="left")
        table.add_column("key", no_wrap=True)
        table.add_column("value", overflow="fold")
        table.add_column("source")
        for key, entry in document["properties"].items():
            table.add_row(Text(key), Text(entry["value"]), Text(entry["source"] or ""))
        self.out.print(table)

    def tree(self, document: dict[str, Any], label: str) -> None:
        tree = Tree(WholePath(label, style="bold"))
        namespaces, tables = _add_branches(tree, document)
        self.out.print(tree)
        self.out.print(Text(f"{namespaces} namespace(s), {tables} table(s)", style="dim"))

    def table_description(self, document: dict[str, Any]) -> None:
        declared = document["declared_only"]
        by_catalog = document["managed_by"] == "impl"
        rows: list[tuple[str, Any]] = [
            ("table", WholePath(join_identifier(document["id"]))),
            ("location", WholePath(document["location"])),
            ("format", document["format"]),
            (
                "commits",
                f"managed by the catalog (managed_by={document['managed_by']})"
                if by_catalog
                else f"managed by Lance in storage (managed_by={document['managed_by']})",
            ),
        ]
        if declared:
            rows.append(("data", "none yet (declared only)"))
        else:
            rows += [("version", document["version"]), ("rows", document["rows"])]
        self.out.print(key_values(rows))
        if document["schema"] is not None:
            schema = Table(title="schema", title_justify="left")
            schema.add_column("column", overflow="fold")
            schema.add_column("type", overflow="fold")
            schema.add_column("nullable")
            for column in document["schema"]:
                nullable = "yes" if column["nullable"] else "no"
                schema.add_row(Text(column["name"]), Text(column["type"]), Text(nullable))
            self.out.print(schema)
        self._properties(document["properties"], "properties")
        if document["storage_options"]:
            self._properties(document["storage_options"], "storage options")

    def namespace_description(self, document: dict[str, Any]) -> None:
        self.out.print(key_values([("namespace", join_identifier(document["id"]) or "(root)")]))
        self._properties(document["properties"], "properties")

    def namespace_ready(self, document: dict[str, Any]) -> None:
        name = join_identifier(document["id"])
        self.out.print(Text(f"namespace {name} ready ({document['mode']})"))
        if document["properties"]:
            self.out.print(properties_table(document["properties"]))

    def registrations(self, document: dict[str, Any]) -> None:
        title = f"{document['found']} dataset(s) under {document['directory']}"
        table = Table(title=title, title_justify="left")
        table.add_column("table", no_wrap=True)
        table.add_column("status")
        table.add_column("location")
        rows = (
            [(e, "would register") for e in document["would_register"]]
            if document["dry_run"]
            else [(e, "registered") for e in document["registered"]]
            + [(e, "skipped (exists)") for e in document["skipped"]]
            + [(e, f"failed: {e['error']}") for e in document["failed"]]
        )
        for entry, status in sorted(rows, key=lambda r: r[0]["table"]):
            location = WholePath(entry["location"])
            table.add_row(Text(join_identifier(entry["id"])), Text(status), location)
        self.out.print(table)

    def versions(self, document: dict[str, Any]) -> None:
        self.out.print(
            key_values(
                [
                    ("table", WholePath(join_identifier(document["id"]))),
                    ("location", WholePath(document["location"])),
                ]
            )
        )
        table = Table(title="versions", title_justify="left")
        table.add_column("version", justify="right")
        table.add_column("timestamp")
        table.add_column("rows", justify="right")
        table.add_column("fragments", justify="right")
        for item in document["versions"]:
            timestamp = item["timestamp"]
            table.add_row(
                str(item["version"]),
                timestamp.isoformat(sep=" ", timespec="seconds")
                if isinstance(timestamp, _dt.datetime)
                else str(timestamp or ""),
                str(item["metadata"].get("total_rows", "")),
                str(item["metadata"].get("total_fragments", "")),
            )
        self.out.print(table)
        if not document["versions"]:
            self.out.print(
                Text("no versions: the table is declared but has no data yet", style="dim")
            )

    def columns(self, document: dict[str, Any]) -> None:
        title = f"catalog columns of {join_identifier(document['id'])}"
        table = Table(title=title, title_justify="left")
        for name in ("name", "type", "comment"):
            table.add_column(name, overflow="fold")
        for column in document["columns"]:
            table.add_row(Text(column["name"]), Text(column["type"]), Text(column["comment"]))
        self.out.print(table)

    def _properties(self, properties: dict[str, str] | None, title: str) -> None:
        if properties:
            self.out.print(properties_table(properties, title))
        else:
            self.out.print(Text(f"no {title}", style="dim"))

    @contextlib.contextmanager
    def spinner(self, description: str) -> Iterator[Describe]:
        if not self._progress_shown():
            yield lambda _text: None
            return
        columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
        with Progress(*columns, console=self.err, transient=True) as progress:
            task = progress.add_task(description, total=None)
            yield lambda text: progress.update(task, description=text)

    @contextlib.contextmanager
    def progress(self, description: str) -> Iterator[Advance]:
        if not self._progress_shown():
            yield lambda _done, _total: None
            return
        columns = (
            TextColumn(description),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=self.err, transient=True) as progress:
            task = progress.add_task(description, total=None)
            yield lambda done, total: progress.update(task, completed=done, total=total)


class WholePath:
    """A path or URI kept whole for people: when it does not fit, it breaks after a ``/``,
    never inside a name, and a single name longer than the line is shortened in the middle
    with an ellipsis. ``--json`` always carries the full value."""

    def __init__(self, path: str, style: str = "") -> None:
        self.path = path
        self.style = style

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        longest = max((len(part) for part in path_parts(self.path)), default=1)
        return Measurement(min(longest, MIN_PATH_WIDTH), len(self.path)).clamp(
            max_width=options.max_width
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in fold_path(self.path, options.max_width):
            yield Text(line, style=self.style, no_wrap=True, overflow="ignore")


# Narrower than this, a path is shortened rather than squeezed further by a table.
MIN_PATH_WIDTH = 24
ELLIPSIS = "…"


# Where a path, URI or identifier may break: after a scheme's "://", a run of "/", a "$" or
# spaces; never inside a name.
BREAK_AFTER = re.compile(r".*?(?:://|/+|\$| +)|.+$")


def path_parts(path: str) -> list[str]:
    """The pieces a path may break between, each ending at its separator (kept)."""
    return BREAK_AFTER.findall(path) or [path]


def shorten_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, its middle replaced by an ellipsis."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    keep = width - 1
    head = keep - keep // 2
    tail = keep - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def fold_path(path: str, width: int) -> list[str]:
    """``path`` in lines of at most ``width`` characters, broken only after separators."""
    width = max(width, 1)
    lines: list[str] = []
    current = ""
    for part in path_parts(path):
        if len(current) + len(part) <= width:
            current += part
            continue
        if current:
            lines.append(current)
        current = shorten_middle(part, width)
    lines.append(current)
    return lines


def key_values(rows: Sequence[tuple[str, Any]]) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False, title_justify="left")
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        shown = value if isinstance(value, WholePath) else Text("" if value is None else str(value))
        table.add_row(Text(str(key)), shown)
    return table


def properties_table(properties: dict[str, str], title: str = "properties") -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("key", no_wrap=True)
    table.add_column("value", overflow="fold")
    for key, value in sorted(properties.items()):
        table.add_row(Text(key), Text(str(value)))
    return table


def _add_branches(branch: Tree, node: dict[str, Any]) -> tuple[int, int]:
    """Add a listing node's namespaces and tables to the tree; (namespaces, tables) counted."""
    namespaces, tables = len(node.get("namespaces") or []), len(node.get("tables") or [])
    for child in node.get("namespaces") or []:
        sub = branch.add(WholePath(f"{child['name']}/", style="bold blue"))
        n, t = _add_branches(sub, child)
        namespaces, tables = namespaces + n, tables + t
    for table in node.get("tables") or []:
        branch.add(WholePath(table))
    return namespaces, tables
