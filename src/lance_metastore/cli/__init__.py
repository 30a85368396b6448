"""``lance-metastore``: browse and manage Lance tables in AWS Glue and Hive Metastore.

- :mod:`.app`: the typer app, its global options, the state a command runs with, exit codes;
- :mod:`.output`: the one output layer (rich text or one JSON document);
- :mod:`.config`: where the impl and properties come from (flags, environment, profiles);
- :mod:`.commands`: the commands, one module per subject, registered in one place.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..rules.identifiers import parse_identifier
from .app import app
from .commands import MODULES

for _module in MODULES:
    _module.register(app)


def parse_id(text: str | None) -> list[str]:
    """An identifier typed on the command line, as a list (see ``parse_identifier``)."""
    return list(parse_identifier(text))


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``lance-metastore``)."""
    app(args=list(argv) if argv is not None else None, prog_name="lance-metastore")


__all__ = ["app", "main", "parse_id"]
