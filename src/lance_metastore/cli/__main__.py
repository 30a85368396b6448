"""``python -m lance_metastore.cli``."""

from . import main

main()
