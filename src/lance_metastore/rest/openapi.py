"""The OpenAPI 3.1 document of the served routes, built from the operation table and the spec's
own request and response models (``lance_namespace_urllib3_client.models``, generated from the
spec's OpenAPI document). Served at ``/openapi.json``; schemathesis fuzzes the server with it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .operations import ARROW_FILE, ARROW_STREAM, OPERATIONS, Body, Operation, Reply, wire_kind
from .statuses import documented_statuses

_REF = "#/components/schemas/{model}"


def _query_parameters(operation: Operation) -> list[dict[str, Any]]:
    """Request fields the route takes in its query string."""
    if operation.body is Body.NONE or operation.body is Body.ARROW:
        names = [
            (info.alias or name, info)
            for name, info in operation.request.model_fields.items()
            if name not in ("id", "identity", "context", *operation.path_fields)
        ]
    elif operation.name == "describe_table":
        fields = operation.request.model_fields
        names = [
            (n, fields[n]) for n in ("with_table_uri", "load_detailed_metadata", "check_declared")
        ]
    else:
        names = []
    parameters = []
    for name, info in names:
        schema = _scalar_schema(info.annotation)
        if schema is None:
            continue
        parameters.append({"name": name, "in": "query", "required": False, "schema": schema})
    return parameters


def _scalar_schema(annotation: Any) -> dict[str, Any] | None:
    kind = wire_kind(annotation)
    if kind == "int":
        return {"type": "integer", "minimum": 0}
    if kind == "bool":
        return {"type": "boolean"}
    if kind == "list":
        return {"type": "array", "items": {"type": "string"}}
    if kind == "dict":
        return None  # JSON-encoded maps are accepted but not described as a query form
    return {"type": "string"}


def _reply_content(operation: Operation) -> dict[str, Any]:
    if operation.reply is Reply.EMPTY:
        return {}
    if operation.reply is Reply.ARROW_FILE:
        return {ARROW_FILE: {"schema": {"type": "string", "format": "binary"}}}
    if operation.reply is Reply.INTEGER:
        return {"application/json": {"schema": {"type": "integer", "minimum": 0}}}
    if operation.reply is Reply.TEXT:
        return {"application/json": {"schema": {"type": "string"}}}
    if operation.reply is Reply.MAP:
        return _map_content()
    assert operation.response is not None
    return {"application/json": {"schema": {"$ref": _REF.format(model=operation.response_model)}}}


def _map_content() -> dict[str, Any]:
    return {
        "application/json": {
            "schema": {"type": "object", "additionalProperties": {"type": "string"}}
        }
    }


def _request_body(operation: Operation) -> dict[str, Any] | None:
    if operation.body is Body.NONE:
        return None
    if operation.body is Body.ARROW:
        content = {ARROW_STREAM: {"schema": {"type": "string", "format": "binary"}}}
        return {"required": True, "content": content}
    if operation.body is Body.MAP:
        return {"required": True, "content": _map_content()}
    ref = {"$ref": _REF.format(model=operation.request_model)}
    return {"required": True, "content": {"application/json": {"schema": ref}}}


def openapi_document() -> dict[str, Any]:
    models: set[type[BaseModel]] = {op.request for op in OPERATIONS}
    models |= {op.response for op in OPERATIONS if op.response is not None}
    _, schemas = models_json_schema(
        [(model, "validation") for model in sorted(models, key=lambda m: m.__name__)],
        by_alias=True,
        ref_template=_REF,
    )
    components = dict(schemas.get("$defs", {}))
    components["ErrorResponse"] = {
        "type": "object",
        "required": ["code"],
        "properties": {"error": {"type": "string"}, "code": {"type": "integer", "minimum": 0}},
    }
    error = {"$ref": _REF.format(model="ErrorResponse")}

    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        parameters: list[dict[str, Any]] = []
        if operation.has_id:
            parameters.append(
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
            )
        parameters += [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in operation.path_fields
        ]
        parameters.append(
            {"name": "delimiter", "in": "query", "required": False, "schema": {"type": "string"}}
        )
        parameters += _query_parameters(operation)
        responses: dict[str, Any] = {
            "200": {"description": "Success", "content": _reply_content(operation)}
        }
        for status, description in documented_statuses().items():
            responses[status] = {
                "description": description,
                "content": {"application/json": {"schema": error}},
            }
        entry: dict[str, Any] = {
            "operationId": operation.name,
            "parameters": parameters,
            "responses": responses,
        }
        body = _request_body(operation)
        if body is not None:
            entry["requestBody"] = body
        paths.setdefault(operation.path, {})[operation.method.lower()] = entry

    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Lance Namespace REST (lance-metastore)",
            "version": "1.0.0",
            "description": "The Lance Namespace REST spec, served by lance-metastore.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"BearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    }
