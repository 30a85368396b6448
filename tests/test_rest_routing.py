"""The server's router (``rest/routing.py``) picks, for any path and method, the route
Starlette's full scan picks: it only skips routes that cannot match."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from lance_namespace import LanceNamespace

from lance_metastore.rest import create_app
from lance_metastore.rest.routing import LastSegmentRouter


class Bare(LanceNamespace):
    """A namespace that answers nothing: routing needs only its routes."""

    def namespace_id(self) -> str:
        return "bare"


ROUTER = create_app(Bare()).router
assert isinstance(ROUTER, LastSegmentRouter)
TEMPLATES = [route.path for route in ROUTER.routes if hasattr(route, "path")]
LITERALS = sorted({part for path in TEMPLATES for part in path.split("/") if "{" not in part})


def scan(scope: dict[str, Any]) -> Any:
    """Starlette's own choice: the first route, in order, that matches whole."""
    from starlette.routing import Match

    for route in ROUTER.routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route
    return None


def scope_of(method: str, path: str) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}


# ids and names made of the routes' own words, slashes and '$' (what could confuse a router)
WORDS = st.sampled_from([*LITERALS, "", "$", "a", "a/b", "x$y", "drop/", "%2F", " "])
PARTS = st.lists(WORDS, min_size=1, max_size=4).map("/".join)


@st.composite
def paths(draw: st.DrawFn) -> str:
    if draw(st.booleans()):  # a route's template filled in
        template = draw(st.sampled_from(TEMPLATES))
        while "{" in template:
            start, end = template.index("{"), template.index("}")
            template = template[:start] + draw(PARTS) + template[end + 1 :]
        return template
    return "/" + draw(PARTS)  # anything


@settings(max_examples=400, deadline=None)
@given(paths(), st.sampled_from(["GET", "POST", "DELETE", "PUT"]))
def test_the_router_picks_what_starlettes_scan_picks(path: str, method: str):
    scope = scope_of(method, path)
    found = ROUTER.full_match(scope)
    assert (found[0] if found else None) is scan(scope)
