"""The command modules, by subject. Each has ``register(app)``; adding a command module is
one file here and one line in :data:`MODULES`."""

from __future__ import annotations

from types import ModuleType

from . import alter, catalog, hms, namespaces, serve, tables

MODULES: tuple[ModuleType, ...] = (catalog, namespaces, tables, alter, hms, serve)
