"""The routes of the Lance Namespace REST spec: one row per ``LanceNamespace`` operation.

Each row says how the operation's request reaches the server (route, JSON body, Arrow IPC
body, query parameters) and how its response leaves (JSON, an empty 200, an Arrow IPC file, a
bare integer or string). The app (``app.py``) and the OpenAPI document (``openapi.py``) are both
built from this table, so a route is declared once.
"""

from __future__ import annotations

import enum
import typing
from dataclasses import dataclass
from functools import cached_property

import lance_namespace_urllib3_client.models as models
from pydantic import BaseModel


class Body(enum.Enum):
    """What the HTTP request body carries."""

    JSON = "json"  # the request model as JSON (may be empty: the route names the object)
    NONE = "none"  # no body: every field comes from the route and the query string
    ARROW = "arrow"  # an Arrow IPC stream; the request's fields come from the query string
    MAP = "map"  # a bare JSON object of strings, the request's ``metadata`` field


class Reply(enum.Enum):
    """What the HTTP response body carries."""

    JSON = "json"  # the response model as JSON
    EMPTY = "empty"  # existence checks: 200 and no body
    ARROW_FILE = "arrow_file"  # query results, an Arrow IPC file
    INTEGER = "integer"  # a bare JSON integer (row counts)
    TEXT = "text"  # a bare string (query plans)
    MAP = "map"  # a bare JSON object of strings, the response's ``metadata`` field


ARROW_STREAM = "application/vnd.apache.arrow.stream"
ARROW_FILE = "application/vnd.apache.arrow.file"


@dataclass(frozen=True)
class Operation:
    name: str  # the LanceNamespace method
    method: str  # HTTP method
    path: str  # the spec's route; ``{id}`` is the delimited object id
    request_model: str  # class name in lance_namespace_urllib3_client.models
    response_model: str | None
    body: Body = Body.JSON
    reply: Reply = Reply.JSON
    serves: str = ""  # the LanceNamespace method it calls, when not ``name`` (older routes)

    @property
    def method_name(self) -> str:
        return self.serves or self.name

    @cached_property
    def request(self) -> type[BaseModel]:
        model: type[BaseModel] = getattr(models, self.request_model)
        return model

    @cached_property
    def response(self) -> type[BaseModel] | None:
        return getattr(models, self.response_model) if self.response_model else None

    @property
    def has_id(self) -> bool:
        return "{id}" in self.path

    @property
    def path_fields(self) -> list[str]:
        """Request fields named by the route besides the object id (e.g. ``index_name``)."""
        return [p.strip("{}") for p in self.path.split("/") if p.startswith("{") and p != "{id}"]


def _op(
    name: str,
    method: str,
    path: str,
    body: Body = Body.JSON,
    reply: Reply = Reply.JSON,
    request: str | None = None,
    response: str | None = "",
    serves: str = "",
) -> Operation:
    camel = "".join(part.capitalize() for part in name.split("_"))
    return Operation(
        name=name,
        method=method,
        path=path,
        request_model=request or f"{camel}Request",
        response_model=f"{camel}Response" if response == "" else response,
        body=body,
        reply=reply,
        serves=serves,
    )


NS = "/v1/namespace/{id}"
TABLE = "/v1/table/{id}"

OPERATIONS: tuple[Operation, ...] = (
    # namespaces
    _op("create_namespace", "POST", f"{NS}/create"),
    _op("list_namespaces", "GET", f"{NS}/list", Body.NONE),
    _op("describe_namespace", "POST", f"{NS}/describe"),
    _op("drop_namespace", "POST", f"{NS}/drop"),
    _op("namespace_exists", "POST", f"{NS}/exists", reply=Reply.EMPTY),
    _op("list_tables", "GET", f"{NS}/table/list", Body.NONE),
    # table metadata
    _op(
        "list_all_tables",
        "GET",
        "/v1/table",
        Body.NONE,
        request="ListTablesRequest",
        response="ListTablesResponse",
    ),
    _op("register_table", "POST", f"{TABLE}/register"),
    _op("describe_table", "POST", f"{TABLE}/describe"),
    _op("table_exists", "POST", f"{TABLE}/exists", reply=Reply.EMPTY),
    _op("drop_table", "POST", f"{TABLE}/drop", Body.NONE),
    _op("deregister_table", "POST", f"{TABLE}/deregister"),
    _op("declare_table", "POST", f"{TABLE}/declare"),
    # The spec's older name for declare (same body, a subset of its reply); lance-spark 0.0.x,
    # the newest build for Spark 3.5 that Maven Central serves, still creates tables with it.
    _op(
        "create_empty_table",
        "POST",
        f"{TABLE}/create-empty",
        request="DeclareTableRequest",
        response="DeclareTableResponse",
        serves="declare_table",
    ),
    _op("rename_table", "POST", f"{TABLE}/rename"),
    _op("restore_table", "POST", f"{TABLE}/restore"),
    _op("get_table_stats", "POST", f"{TABLE}/stats"),
    _op(
        "update_table_schema_metadata",
        "POST",
        f"{TABLE}/schema_metadata/update",
        Body.MAP,
        Reply.MAP,
    ),
    _op("update_field_metadata", "POST", f"{TABLE}/update_field_metadata"),
    _op("alter_table_add_columns", "POST", f"{TABLE}/add_columns"),
    _op("alter_table_alter_columns", "POST", f"{TABLE}/alter_columns"),
    _op("alter_table_drop_columns", "POST", f"{TABLE}/drop_columns"),
    _op("alter_table_backfill_columns", "POST", f"{TABLE}/backfill_column"),
    # table versions (catalog-managed commits)
    _op("list_table_versions", "POST", f"{TABLE}/version/list", Body.NONE),
    _op("create_table_version", "POST", f"{TABLE}/version/create"),
    _op("describe_table_version", "POST", f"{TABLE}/version/describe"),
    _op("batch_delete_table_versions", "POST", f"{TABLE}/version/delete"),
    _op("batch_create_table_versions", "POST", "/v1/table/version/batch-create"),
    _op("batch_commit_tables", "POST", "/v1/table/batch-commit"),
    # table data (Arrow IPC bodies)
    _op("create_table", "POST", f"{TABLE}/create", Body.ARROW),
    _op("insert_into_table", "POST", f"{TABLE}/insert", Body.ARROW),
    _op("merge_insert_into_table", "POST", f"{TABLE}/merge_insert", Body.ARROW),
    _op("update_table", "POST", f"{TABLE}/update"),
    _op("delete_from_table", "POST", f"{TABLE}/delete"),
    _op("query_table", "POST", f"{TABLE}/query", reply=Reply.ARROW_FILE, response=None),
    _op("count_table_rows", "POST", f"{TABLE}/count_rows", reply=Reply.INTEGER, response=None),
    _op(
        "explain_table_query_plan", "POST", f"{TABLE}/explain_plan", reply=Reply.TEXT, response=None
    ),
    _op(
        "analyze_table_query_plan", "POST", f"{TABLE}/analyze_plan", reply=Reply.TEXT, response=None
    ),
    # indexes
    _op("create_table_index", "POST", f"{TABLE}/create_index"),
    _op(
        "create_table_scalar_index",
        "POST",
        f"{TABLE}/create_scalar_index",
        request="CreateTableIndexRequest",
    ),
    _op("list_table_indices", "POST", f"{TABLE}/index/list"),
    _op("describe_table_index_stats", "POST", f"{TABLE}/index/{{index_name}}/stats"),
    _op("drop_table_index", "POST", f"{TABLE}/index/{{index_name}}/drop", Body.NONE),
    # tags and branches
    _op("list_table_tags", "POST", f"{TABLE}/tags/list", Body.NONE),
    _op("get_table_tag_version", "POST", f"{TABLE}/tags/version"),
    _op("create_table_tag", "POST", f"{TABLE}/tags/create"),
    _op("delete_table_tag", "POST", f"{TABLE}/tags/delete"),
    _op("update_table_tag", "POST", f"{TABLE}/tags/update"),
    _op("create_table_branch", "POST", f"{TABLE}/branches/create"),
    _op("list_table_branches", "POST", f"{TABLE}/branches/list", Body.NONE),
    _op("delete_table_branch", "POST", f"{TABLE}/branches/delete"),
    # materialized views and transactions
    _op("create_materialized_view", "POST", "/v1/materialized_view/{id}/create"),
    _op("refresh_materialized_view", "POST", "/v1/materialized_view/{id}/refresh"),
    _op("describe_transaction", "POST", "/v1/transaction/{id}/describe"),
    _op("alter_transaction", "POST", "/v1/transaction/{id}/alter"),
)

BY_NAME = {op.name: op for op in OPERATIONS}


def wire_kind(annotation: object) -> str:
    """The wire shape of a field: int, bool, list, dict or str (Optional/Annotated unwrapped).

    The app parses query parameters by it and the OpenAPI document describes them by it.
    """
    origin = typing.get_origin(annotation)
    if origin in (list, tuple):
        return "list"
    if origin is dict:
        return "dict"
    if origin is not None:  # Optional[...], Annotated[...], Union[...]
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                kind = wire_kind(arg)
                if kind != "str":
                    return kind
        return "str"
    if annotation is bool:
        return "bool"
    if annotation is int:
        return "int"
    return "str"
