"""The ``lance-metastore`` console script: ``--version`` answered before anything is imported.

The command line itself (:mod:`lance_metastore.cli`) imports typer, rich and lance_namespace's
models, which take a second or more in a fresh process; ``--version`` needs none of them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``lance-metastore``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        from . import __version__

        print(f"lance-metastore {__version__}")
        return
    from .cli import main as cli_main

    cli_main(args)
