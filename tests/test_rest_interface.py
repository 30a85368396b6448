"""The whole-interface suite through the REST server, for every backend.

Each backend-parametrized test of ``test_interface.py`` runs again with ``backend`` wrapped in a
``RestHarness``: our server over the backend's namespace, reached by pylance's Rust REST
client. The results must still equal the reference's (``DirectoryNamespace`` in-process), and
the catalog and files are judged by the wrapped harness. In-process only: the Glue
fault-injection renames (they drive the emulator, not a client) and ``list_all_tables`` under a
namespace (its route carries no id). The three operations pylance's REST client lacks are sent
as raw HTTP (last test).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from support.manifests import staging_of
from support.rest import RestHarness, rest_backend
from test_interface import (  # noqa: F401 - the suite, collected again here
    ipc_stream,
    ours,
    reference,
    req,
    table_data,
    test_bad_input_changes_nothing,
    test_catalog_columns_follow_every_schema_change,
    test_catalog_managed_tables_give_the_same_results,
    test_create_over_an_unregistered_dataset_keeps_it,
    test_declared_tables_take_their_first_rows_by_insert,
    test_errors_compared_with_the_directory_namespace,
    test_list_all_tables_sorted_and_paged,
    test_new_operations_refuse_bad_identifiers,
    test_rename_within_and_across_namespaces,
    test_same_results_as_the_directory_namespace,
    test_two_merge_inserts_on_a_managed_table,
)

backend = rest_backend  # every test of this module runs through the REST server


def _post(base: str, route: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        base + route,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def test_operations_pylance_cannot_send_reach_the_server(backend: RestHarness):
    """pylance's REST client has no ``update_field_metadata``, ``batch_create_table_versions``
    or ``batch_commit_tables`` (it answers 0 itself), so they are sent as raw HTTP requests."""
    ns = backend.connect(managed_by="impl")
    base = backend.server(managed_by="impl").url
    db = backend.db("sales")
    ns.create_namespace({"id": db})
    t = [*db, "raw"]
    ns.create_table(req("CreateTableRequest", id=t), ipc_stream(table_data(0, 2)))
    route = urllib.parse.quote("$".join(t), safe="")
    status, body = _post(
        base,
        f"/v1/table/{route}/update_field_metadata",
        {"updates": [{"path": "name", "metadata": {"pii": "no"}}]},
    )
    assert (status, body["version"], body["fields"]) == (200, 2, {"name": {"pii": "no"}})
    status, body = _post(
        base,
        "/v1/table/version/batch-create",
        {"entries": [{"id": t, "version": 3, "manifest_path": staging_of(ns, t, 3)}]},
    )
    assert (status, [v["version"] for v in body["versions"]]) == (200, [3])
    status, body = _post(
        base,
        "/v1/table/batch-commit",
        {
            "operations": [
                {
                    "create_table_version": {
                        "id": t,
                        "version": 4,
                        "manifest_path": staging_of(ns, t, 4),
                    }
                }
            ]
        },
    )
    assert (status, body["results"][0]["create_table_version"]["version"]["version"]) == (200, 4)
    ns.create_table(req("CreateTableRequest", id=[*db, "other"]), ipc_stream(table_data(0, 1)))
    before = backend.snapshot()
    status, body = _post(
        base,
        "/v1/table/version/batch-create",
        {
            "entries": [
                {"id": t, "version": 5, "manifest_path": staging_of(ns, t, 5)},
                {"id": [*db, "other"], "version": 2, "manifest_path": "x/_versions/s-d"},
            ]
        },
    )
    assert body["code"] == 0 and "several tables" in body["error"]
    assert backend.snapshot() == before
