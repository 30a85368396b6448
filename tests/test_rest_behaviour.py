"""The behaviour suite and the managed-commit suite, through the REST server, for every backend.

Each test of ``test_behaviour.py`` (and the catalog-managed commit tests) runs again with
``backend`` wrapped in a ``RestHarness``: our server over the backend's namespace, reached by
pylance's Rust REST client. The same ids, codes, pages and catalog state must come out as
in-process.
"""

from __future__ import annotations

from lance_namespace import ListTablesRequest
from lance_namespace.errors import ErrorCode
from support.harness import Harness
from support.rest import rest_backend
from test_behaviour import *  # noqa: F403 - the suite, collected again here
from test_behaviour import DictWithModelDump, code_of

# test_writer_killed_before/after_the_catalog_update are not run here: their fault is injected
# into the writer's in-process namespace, which a REST client does not have.
from test_managed_commits import (  # noqa: F401 - collected again here
    managed,
    test_a_taken_version_is_a_conflict,
    test_commits_name_their_final_manifest_and_reads_write_nothing,
    test_concurrent_writers_all_land,
    test_paging_and_deleting_version_records,
    test_pylance_commits_through_the_catalog,
    test_storage_managed_tables_keep_lance_commits,
    test_versions_written_around_the_catalog_are_adopted_not_overwritten,
    test_writer_processes_lose_nothing,
)

# Where pylance's REST client itself cannot carry a request, the suite's test is replaced
# below by the same test without that request; the server's answer to it is proven with raw
# HTTP in test_rest_server.py.
del test_pickles_without_clients  # noqa: F821 - pickling a live Rust client is not supported

backend = rest_backend  # every test of this module runs through the REST server


def test_bad_page_tokens_and_limits(backend: Harness, ns, db):
    """As in-process, without ``limit="ten"``: pylance's client refuses it before sending
    (TypeError); the server's 400/13 for ``limit=ten`` is in test_rest_server.py."""
    parent = db[:-1]
    for bad in ["not-a-token", "e30", "%%%"]:
        assert code_of(ns.list_namespaces, {"id": parent, "page_token": bad}) == 13
        assert code_of(ns.list_tables, {"id": db, "page_token": bad}) == 13
    assert code_of(ns.list_namespaces, {"id": parent, "limit": -1}) == 13


def test_identifier_forms(backend: Harness, ns, db):
    """As in-process, without a bare ``"db$t"`` string id: pylance's REST client turns a string
    id into a list of its characters before sending. ``["db$t"]`` travels as the route ``db$t``
    and names the same table."""
    joined = "$".join([*db, "orders"])
    ns.declare_table({"id": [joined]})
    ns.table_exists({"id": [*db, "orders"]})
    ns.table_exists({"id": [joined]})
    ns.table_exists(DictWithModelDump(id=[*db, "orders"]))
    assert ns.describe_table(DictWithModelDump(id=[joined])).location.endswith("orders.lance")
    assert ns.list_tables(DictWithModelDump(id=db, limit=10)).tables == ["orders"]
    assert code_of(ns.table_exists, {"id": [*db, "missing"]}) == ErrorCode.TABLE_NOT_FOUND


def test_invalid_names_change_nothing(backend: Harness, ns, db):
    """As in-process, without ``{"id": 42}``: pylance's client refuses a non-list id before
    sending (TypeError); the server's 400/13 for it is in test_rest_server.py."""
    for name in backend.bad_names:
        assert code_of(ns.declare_table, {"id": [*db, name]}) == ErrorCode.INVALID_INPUT
        assert code_of(ns.create_namespace, {"id": backend.db(name)}) == ErrorCode.INVALID_INPUT
    assert code_of(ns.declare_table, {"id": [*db, "a", ""]}) == ErrorCode.INVALID_INPUT
    assert code_of(ns.describe_table, {"id": []}) == ErrorCode.INVALID_INPUT
    assert ns.list_tables({"id": db}).tables == []


def test_root_lists_no_tables(backend: Harness, ns, db):
    """As in-process, without ``{"id": 42}``, which pylance's client refuses before sending, and
    ``["", ""]``: on the wire (a GET route, no body) it is ``$``, the spec's form of the root."""
    ns.declare_table({"id": [*db, "orders"]})
    listed = ns.list_tables({"id": []})
    assert listed.tables == [] and listed.page_token is None
    assert ns.list_tables(ListTablesRequest(id=[], limit=1)).tables == []
    assert ns.list_tables(DictWithModelDump(id=[], limit=10)).tables == []
    assert code_of(ns.list_tables, {"id": [], "page_token": "%%"}) == ErrorCode.INVALID_INPUT
    assert code_of(ns.list_tables, {"id": [], "limit": -1}) == ErrorCode.INVALID_INPUT
