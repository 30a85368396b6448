"""The class every backend subclasses: the spec's operations composed over :class:`CatalogCore`.

Each operation module is a mixin written against :class:`~.core.CatalogCore` (the catalog
primitives and the shared helpers); this module only puts them together. A backend (Glue,
Hive) subclasses :class:`CatalogNamespace` and implements the ``_catalog_*`` primitives.
"""

from __future__ import annotations

from .batches import BatchCommitOps
from .commits import CommitOps
from .core import CatalogCore
from .data import TableDataOps
from .indexes import TableIndexOps
from .lifecycle import TableLifecycleOps
from .namespaces import NamespaceOps
from .refs import TableRefOps
from .tables import TableOps
from .versions import VersionOps


class CatalogNamespace(
    NamespaceOps,
    TableOps,
    VersionOps,
    TableLifecycleOps,
    TableRefOps,
    TableDataOps,
    TableIndexOps,
    BatchCommitOps,
    CommitOps,
    CatalogCore,
):
    """Every operation of the Lance namespace spec; a backend implements the primitives."""
