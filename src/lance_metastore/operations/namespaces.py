"""The namespace operations of the spec: create, describe, exists, drop and list namespaces.

A mixin of :class:`~lance_metastore.operations.catalog.CatalogNamespace`, written over the
catalog primitives and shared helpers that :class:`~lance_metastore.operations.core.CatalogCore`
names.
"""

from __future__ import annotations

from typing import Any

from lance_namespace import (
    CreateNamespaceRequest,
    CreateNamespaceResponse,
    DescribeNamespaceRequest,
    DescribeNamespaceResponse,
    DropNamespaceRequest,
    DropNamespaceResponse,
    ListNamespacesRequest,
    ListNamespacesResponse,
    NamespaceExistsRequest,
)
from lance_namespace.errors import (
    InvalidInputError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    UnsupportedOperationError,
)

from ..rules.errors import lance_error
from ..rules.identifiers import Path, describe
from ..rules.requests import (
    CASCADE,
    CREATE,
    EXIST_OK,
    FAIL,
    OVERWRITE,
    RESTRICT,
    SKIP,
    RequestInput,
    coerce_request,
)
from ..rules.requests import request_id as _raw_id
from ..rules.requests import request_mode as _mode
from ..rules.visibility import NAMESPACE
from .core import CatalogCore


class NamespaceOps(CatalogCore):
    """CreateNamespace, DescribeNamespace, NamespaceExists, DropNamespace, ListNamespaces."""

    def create_namespace(self, request: RequestInput = None) -> CreateNamespaceResponse:
        raw_id = _raw_id(request)
        with self._operation("create namespace", raw_id):
            req = coerce_request(request, CreateNamespaceRequest)
            path = self._namespace_path(req.id)
            mode = _mode(req.mode, CREATE, (CREATE, EXIST_OK, OVERWRITE), "create mode")
            properties = dict(req.properties or {})
            if not path:
                if mode == OVERWRITE:
                    raise UnsupportedOperationError("The root namespace cannot be overwritten")
                if mode == CREATE:
                    raise lance_error(
                        NamespaceAlreadyExistsError, describe(path), "(it always exists)"
                    )
                return CreateNamespaceResponse(properties=self._catalog_root_properties())
            with self._placing_namespace(path, properties) as properties:
                return self._write_namespace(path, properties, mode)

    def _write_namespace(
        self, path: Path, properties: dict[str, Any], mode: str
    ) -> CreateNamespaceResponse:
        if mode == OVERWRITE and self._catalog_get_namespace(path) is not None:
            self._catalog_replace_namespace_properties(path, properties)
            return CreateNamespaceResponse(properties=self._stored_properties(properties))
        try:
            # Create first: one catalog call in the common case, and no check-then-act race.
            self._catalog_create_namespace(path, properties)
        except NamespaceAlreadyExistsError:
            if mode == CREATE:
                raise
            if mode == OVERWRITE:
                self._catalog_replace_namespace_properties(path, properties)
                return CreateNamespaceResponse(properties=self._stored_properties(properties))
            existing = self._catalog_get_namespace(path)
            return CreateNamespaceResponse(properties=existing or {})
        return CreateNamespaceResponse(properties=self._stored_properties(properties))

    def describe_namespace(self, request: RequestInput = None) -> DescribeNamespaceResponse:
        raw_id = _raw_id(request)
        with self._operation("describe namespace", raw_id):
            req = coerce_request(request, DescribeNamespaceRequest)
            path = self._namespace_path(req.id)
            if not path:
                return DescribeNamespaceResponse(properties=self._catalog_root_properties())
            properties = self._catalog_get_namespace(path)
            if properties is None:
                raise lance_error(NamespaceNotFoundError, describe(path))
            return DescribeNamespaceResponse(properties=properties)

    def namespace_exists(self, request: RequestInput = None) -> None:  # type: ignore[override]
        raw_id = _raw_id(request)
        with self._operation("check namespace", raw_id):
            req = coerce_request(request, NamespaceExistsRequest)
            path = self._namespace_path(req.id)
            if path and self._catalog_get_namespace(path) is None:
                raise lance_error(NamespaceNotFoundError, describe(path))

    def drop_namespace(self, request: RequestInput = None) -> DropNamespaceResponse:
        raw_id = _raw_id(request)
        with self._operation("drop namespace", raw_id):
            req = coerce_request(request, DropNamespaceRequest)
            path = self._namespace_path(req.id)
            mode = _mode(req.mode, FAIL, (FAIL, SKIP), "drop mode")
            behavior = _mode(req.behavior, RESTRICT, (RESTRICT, CASCADE), "drop behavior")
            if not path:
                raise InvalidInputError("The root namespace cannot be dropped")
            if behavior == CASCADE and not self.SUPPORTS_CASCADE:
                raise UnsupportedOperationError(
                    "only RESTRICT drops are supported (CASCADE is not); "
                    f"drop the tables of {describe(path)} first"
                )
            if behavior == CASCADE:
                exists = self._catalog_get_namespace(path) is not None
                empty = None
            else:
                empty = self._catalog_namespace_is_empty(path)
                exists = empty is not None
            if not exists:
                if mode == SKIP:
                    return DropNamespaceResponse()
                raise lance_error(NamespaceNotFoundError, describe(path))
            if behavior == RESTRICT and not empty:
                raise lance_error(
                    NamespaceNotEmptyError, describe(path), "holds tables or namespaces"
                )
            try:
                self._catalog_drop_namespace(path, cascade=behavior == CASCADE)
            except NamespaceNotFoundError:
                if mode != SKIP:
                    raise
            return DropNamespaceResponse()

    def list_namespaces(self, request: RequestInput = None) -> ListNamespacesResponse:
        raw_id = _raw_id(request)
        with self._operation("list namespaces of", raw_id):
            req = coerce_request(request, ListNamespacesRequest)
            path = self._namespace_path(req.id)
            names, token = self._pager.objects(
                ("namespaces", path),
                lambda: [(*path, name) for name in self._catalog_list_namespaces(path)],
                req.page_token,
                req.limit,
                kind=NAMESPACE,
                render=lambda object_id: object_id[-1],
            )
            return ListNamespacesResponse(namespaces=names, page_token=token)
