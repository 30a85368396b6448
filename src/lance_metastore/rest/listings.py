"""Listings of a served namespace that is not ours, paged by the server itself.

Our namespaces filter inside their listings (:mod:`~lance_metastore.rules.visibility`). A
namespace of another kind (Lance's ``DirectoryNamespace``, a site's class) pages by its own
rules, and its page tokens may be names in clear. So the server never hands such a token out
nor takes one in: it reads the namespace's whole listing through the namespace's own pages,
judges each entry by the caller's visibility, and cuts the pages itself with its own sealed
tokens (:class:`~lance_metastore.rules.paging.Pager`). Page sizes and tokens then depend on
what the caller may see alone, as for ours.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lance_namespace import ListNamespacesResponse, ListTablesResponse
from pydantic import BaseModel

from ..rules.identifiers import Path, join_identifier, split_identifier
from ..rules.paging import Pager
from ..rules.visibility import NAMESPACE, TABLE

LISTINGS = ("list_namespaces", "list_tables", "list_all_tables")
# A namespace whose pages never end (a token that keeps coming back) is cut off here.
MAX_FOREIGN_PAGES = 100_000


class ForeignListings:
    """The three listings of ``namespace``, read whole and paged by the server."""

    def __init__(self, namespace: Any) -> None:
        self.namespace = namespace
        self.pager = Pager()

    def police(self) -> None:
        self.pager.police()

    def method(self, operation: str) -> Callable[[BaseModel], Any]:
        """What the server calls for ``operation`` (one of :data:`LISTINGS`)."""
        own = getattr(self.namespace, operation)
        field = "namespaces" if operation == "list_namespaces" else "tables"
        kind = NAMESPACE if operation == "list_namespaces" else TABLE

        def listing(request: BaseModel) -> Any:
            parent = split_identifier(getattr(request, "id", None))

            def object_id(name: str) -> Path:
                # A name of list_all_tables is a whole id, addressed as every route splits it.
                return split_identifier(name) if operation == "list_all_tables" else (*parent, name)

            def fetch() -> list[Path]:
                return [object_id(name) for name in _all_names(own, request, field)]

            render: Callable[[Path], str] = (
                join_identifier if operation == "list_all_tables" else (lambda i: i[-1])
            )
            key = (operation, request.model_dump_json(exclude={"page_token", "limit"}))
            names, token = self.pager.objects(
                key,
                fetch,
                getattr(request, "page_token", None),
                getattr(request, "limit", None),
                kind=kind,
                render=render,
            )
            if operation == "list_namespaces":
                return ListNamespacesResponse(namespaces=names, page_token=token)
            return ListTablesResponse(tables=names, page_token=token)

        return listing


def _all_names(own: Callable[[Any], Any], request: BaseModel, field: str) -> list[str]:
    """Every name of the listing, read through the namespace's own pages."""
    names: list[str] = []
    token: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_FOREIGN_PAGES):
        answer = own(request.model_copy(update={"page_token": token, "limit": None}))
        if isinstance(answer, dict):  # a namespace may answer the response's fields as a dict
            names.extend(answer.get(field) or [])
            token = answer.get("page_token")
        else:
            names.extend(getattr(answer, field, None) or [])
            token = getattr(answer, "page_token", None)
        if not token or token in seen:
            return names
        seen.add(token)
    return names
