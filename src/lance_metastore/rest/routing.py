"""Routing a request to its operation without trying every route.

Starlette's router tries its routes in order, a regular expression each, until one matches: the
spec's sixty-odd routes cost some 30 tries per request, about a sixth of the server's own
time per ``describe_table`` (py-spy, ``benchmarks/bench_rest_overhead.py``). A route whose
path ends in a literal segment (``/v1/table/{id}/describe``) can only match a path that ends in
that segment, so :class:`LastSegmentRouter` tries only those routes, plus the routes whose last
segment is not a literal, in the original order: the same first match as the full scan. What
matches none of them (a 404, a 405, a redirect) goes to Starlette's own scan, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..rules.extras import requires_extra

with requires_extra("server"):
    from starlette._utils import get_route_path
    from starlette.routing import BaseRoute, Match, Route, Router
    from starlette.types import Receive, Scope, Send


def _last_literal(route: BaseRoute) -> str | None:
    """The literal last segment of the route's path; None when it holds a parameter."""
    if not isinstance(route, Route):
        return None
    last = route.path.rpartition("/")[2]
    return None if "{" in last else last


class LastSegmentRouter(Router):
    """Starlette's router, trying first only the routes that can match the path's last segment."""

    def __init__(self, routes: Sequence[BaseRoute], **options: Any) -> None:
        super().__init__(list(routes), **options)
        literals = {_last_literal(route) for route in self.routes} - {None}
        self._candidates: dict[str, list[BaseRoute]] = {
            literal: [route for route in self.routes if _last_literal(route) in (literal, None)]
            for literal in literals
            if literal is not None
        }
        self._others = [route for route in self.routes if _last_literal(route) is None]

    def full_match(self, scope: Scope) -> tuple[BaseRoute, Scope] | None:
        """The first route that matches the request whole, and its part of the scope."""
        last = get_route_path(scope).rpartition("/")[2]
        for route in self._candidates.get(last, self._others):
            match, child_scope = route.matches(scope)
            if match is Match.FULL:
                return route, child_scope
        return None

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self.full_match(scope) if scope["type"] == "http" else None
        if found is None:
            await super().app(scope, receive, send)  # 404, 405, redirects: Starlette's own
            return
        route, child_scope = found
        scope.setdefault("router", self)
        scope["route"] = route
        scope.update(child_scope)
        await route.handle(scope, receive, send)
