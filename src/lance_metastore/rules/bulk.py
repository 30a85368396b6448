"""Register every Lance dataset under a directory: the plan, the parallel run, the result.

A library operation (the command line's ``register-many`` only renders its result): datasets
are found without a catalog call, registered by a small thread pool sharing one namespace,
and every outcome is kept, so one failure neither stops the others nor hides them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lance_namespace.errors import (
    InternalError,
    LanceNamespaceError,
    TableAlreadyExistsError,
)

from .tables import LANCE_SUFFIX

if TYPE_CHECKING:
    from lance_namespace import LanceNamespace

REGISTERED, SKIPPED, FAILED, PLANNED = "registered", "skipped", "failed", "planned"


def find_datasets(directory: Path) -> list[Path]:
    """Every Lance dataset under ``directory`` (a directory with ``_versions``), not nested."""
    found: list[Path] = []
    for current, dirnames, _files in os.walk(directory, followlinks=False):
        if "_versions" in dirnames:
            found.append(Path(current))
            dirnames[:] = []  # a dataset's own directories hold no further datasets
        else:
            dirnames.sort()
    return sorted(found)


def table_name_for(dataset: Path) -> str:
    """The table a dataset directory becomes: its name without ``.lance``."""
    name = dataset.name
    if name.endswith(LANCE_SUFFIX) and len(name) > len(LANCE_SUFFIX):
        return name[: -len(LANCE_SUFFIX)]
    return name


@dataclass(frozen=True)
class Registration:
    """One dataset's outcome; ``error`` is set when it failed."""

    table: str
    id: tuple[str, ...]
    location: str
    status: str
    error: LanceNamespaceError | None = None


@dataclass
class BulkRegistration:
    """Everything a bulk registration found and did."""

    namespace: tuple[str, ...]
    directory: Path
    dry_run: bool
    outcomes: list[Registration] = field(default_factory=list)

    def with_status(self, status: str) -> list[Registration]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def failed(self) -> list[Registration]:
        return self.with_status(FAILED)

    @property
    def first_error(self) -> LanceNamespaceError | None:
        return next((o.error for o in self.outcomes if o.error is not None), None)


def register_many(
    ns: LanceNamespace,
    namespace_id: Sequence[str],
    directory: Path,
    *,
    properties: Mapping[str, str] | None = None,
    skip_existing: bool = False,
    jobs: int = 4,
    dry_run: bool = False,
    on_done: Callable[[int, int], None] | None = None,
) -> BulkRegistration:
    """Register every dataset under ``directory`` in ``namespace_id``; never raises for one
    dataset's failure (see :attr:`BulkRegistration.failed`). A missing namespace fails fast.

    ``on_done(done, total)`` is called after each registration (for progress).
    """
    from lance_namespace import NamespaceExistsRequest, RegisterTableRequest

    namespace = tuple(namespace_id)
    plan = [(table_name_for(d), str(d)) for d in find_datasets(directory)]
    result = BulkRegistration(namespace, directory, dry_run)
    if dry_run or not plan:
        result.outcomes = [Registration(n, (*namespace, n), loc, PLANNED) for n, loc in plan]
        return result
    ns.namespace_exists(NamespaceExistsRequest(id=list(namespace)))

    def register(item: tuple[str, str]) -> Registration:
        name, location = item
        table_id = (*namespace, name)
        try:
            request = RegisterTableRequest(
                id=list(table_id), location=location, properties=dict(properties or {}) or None
            )
            ns.register_table(request)
        except TableAlreadyExistsError as error:
            status = SKIPPED if skip_existing else FAILED
            return Registration(name, table_id, location, status, None if skip_existing else error)
        except LanceNamespaceError as error:
            return Registration(name, table_id, location, FAILED, error)
        except Exception as error:  # a foreign namespace's bug: reported, not raised
            wrapped = InternalError(f"{type(error).__name__}: {error}")
            return Registration(name, table_id, location, FAILED, wrapped)
        return Registration(name, table_id, location, REGISTERED)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for outcome in pool.map(register, plan):
            result.outcomes.append(outcome)
            if on_done is not None:
                on_done(len(result.outcomes), len(plan))
    return result
