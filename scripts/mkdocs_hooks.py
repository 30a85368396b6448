"""MkDocs hook (mkdocs.yml ``hooks:``): the reference pages generated from the code at build time.

- ``reference/cli.md``: every command of the ``lance-metastore`` typer app, its arguments and
  options, from the click command tree typer builds (the same one ``--help`` prints);
- ``reference/properties.md``: the connection properties of each backend, from the property
  tables the namespaces parse their configuration with (``PROPERTIES``).

Generated, so they cannot drift from what the code accepts; ``mkdocs build --strict`` (run by
``tests/test_docs_site.py``) fails on a broken link into them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parent.parent / "src"


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def cli_reference() -> str:
    import typer

    from lance_metastore.cli import app

    root = typer.main.get_command(app)
    out = [
        "# Command line reference",
        "",
        "Generated from the `lance-metastore` app at build time: the same commands and options",
        "`lance-metastore --help` prints. How to connect, identifiers, output and exit codes are",
        "in the [command line guide](../cli.md).",
        "",
    ]

    # typer builds its commands on a click of its own (typer._click): checked by shape, not class.
    def options_table(command: Any) -> list[str]:
        rows = ["| argument or option | meaning | default |", "|---|---|---|"]
        for param in command.params:
            if param.param_type_name == "argument":
                name = f"`{(param.metavar or param.name or '').upper()}`"
                meaning = "required" if param.required else "optional"
                default = ""
            elif param.param_type_name == "option":
                if param.hidden:
                    continue
                names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
                metavar = "" if param.is_flag else f" `{param.metavar or 'VALUE'}`"
                name = names + metavar
                meaning = param.help or ""
                plain = isinstance(param.default, (str, int, float)) and param.default is not False
                default = f"`{param.default}`" if plain and param.default != "" else ""
                if param.envvar:
                    meaning += f" (env `{param.envvar}`)"
            else:
                continue
            rows.append(f"| {_cell(name)} | {_cell(meaning)} | {_cell(default)} |")
        return rows if len(rows) > 2 else []

    def walk(command: Any, path: list[str], depth: int) -> None:
        ctx = command.context_class(command, info_name=" ".join(path))
        title = " ".join(path)
        out.append(f"{'#' * depth} `{title}`")
        out.append("")
        usage = " ".join(command.collect_usage_pieces(ctx))
        out.append(f"```text\n{title} {usage}\n```")
        out.append("")
        if command.help:
            out.append(command.help.strip())
            out.append("")
        out.extend(options_table(command))
        out.append("")
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name], min(depth + 1, 3))

    walk(root, ["lance-metastore"], 2)
    return "\n".join(out) + "\n"


def _as_written(default: object) -> str:
    """A property's default as a user writes the value (a string): ``true``, ``a,b``."""
    if default is None:
        return ""
    if isinstance(default, bool):
        text = str(default).lower()
    elif isinstance(default, (tuple, list, set, frozenset)):
        text = ",".join(sorted(str(item) for item in default))
    else:
        text = str(default)
    return f"`{text}`" if text else "(empty)"


def properties_reference() -> str:
    from lance_metastore.glue.namespace import PROPERTIES as GLUE
    from lance_metastore.hive.namespace import PROPERTIES as HIVE

    out = [
        "# Connection properties",
        "",
        "Generated from the property tables each backend parses its configuration with, at build",
        "time. Every value is a string (`Cls(**props)`, the Spark data source's options, the",
        "command line's `--prop`, a profile of the config file); an unknown name or a malformed",
        "value answers 13 (`InvalidInputError`) at construction, naming the property. Secret",
        "values never appear in `repr`, logs or error messages. Besides these, every",
        "`storage.<option>` property is handed to Lance as the storage option `<option>`.",
        "",
    ]
    for title, impls, properties in (
        ("AWS Glue", "`glue` (`lance_metastore.GlueNamespace`)", GLUE),
        (
            "Hive Metastore",
            "`hive2` and `hive3` (`Hive2Namespace`, `Hive3Namespace`)",
            HIVE,
        ),
    ):
        out += [f"## {title}", "", f"Properties of {impls}.", ""]
        out += ["| property | default | secret | meaning |", "|---|---|---|---|"]
        for prop in properties:
            default = _as_written(prop.default)
            secret = "yes" if prop.secret else ""
            out.append(f"| `{prop.name}` | {_cell(default)} | {secret} | {_cell(prop.doc)} |")
        out.append("")
    return "\n".join(out) + "\n"


def generated_pages() -> dict[str, str]:
    """The generated pages, by their path in the docs directory."""
    if str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))
    return {
        "reference/cli.md": cli_reference(),
        "reference/properties.md": properties_reference(),
    }


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, text in generated_pages().items():
        files.append(File.generated(config, path, content=text))
    return files
