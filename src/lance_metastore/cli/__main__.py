"""``python -m lance_metastore.cli``: the same as the ``lance-metastore`` command."""

from ..launch import main

main()
