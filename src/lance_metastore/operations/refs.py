"""Tags and branches of a table: Lance keeps them beside the data (``_refs/``), so these are
Lance operations on the table's dataset; the catalog entry does not change.

A mixin of :class:`~lance_metastore.operations.catalog.CatalogNamespace`. Listings are sorted
by name and paged with the namespace's page tokens. Branches need Lance to commit to a second
line of versions, which a catalog-managed table (one version line in the catalog) cannot
record: on ``managed_by=impl`` tables they answer the spec's unsupported error."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from lance_namespace import (
    CreateTableBranchRequest,
    CreateTableBranchResponse,
    CreateTableTagRequest,
    CreateTableTagResponse,
    DeleteTableBranchRequest,
    DeleteTableBranchResponse,
    DeleteTableTagRequest,
    DeleteTableTagResponse,
    GetTableTagVersionRequest,
    GetTableTagVersionResponse,
    ListTableBranchesRequest,
    ListTableBranchesResponse,
    ListTableTagsRequest,
    ListTableTagsResponse,
    UpdateTableTagRequest,
    UpdateTableTagResponse,
)
from lance_namespace.errors import (
    InvalidInputError,
    TableBranchAlreadyExistsError,
    TableBranchNotFoundError,
    TableTagNotFoundError,
    TableVersionNotFoundError,
    UnsupportedOperationError,
)
from lance_namespace_urllib3_client.models.branch_contents import BranchContents
from lance_namespace_urllib3_client.models.tag_contents import TagContents

from ..rules.errors import lance_error
from ..rules.identifiers import Path, describe
from ..rules.requests import RequestInput, coerce_request, request_id
from ..rules.tables import TableEntry
from .core import CatalogCore
from .datasets import lance_errors

if TYPE_CHECKING:
    from lance.dataset import Tags

Ref = TypeVar("Ref", TagContents, BranchContents)
TagRequest = (
    GetTableTagVersionRequest
    | CreateTableTagRequest
    | UpdateTableTagRequest
    | DeleteTableTagRequest
)


def _check_ref_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not name.strip() or any(ord(ch) < 32 for ch in name):
        raise InvalidInputError(f"Invalid {what} name {name!r}")
    return name


def _reference(version: int, branch: str | None, what: str) -> int | tuple[str, int]:
    if version < 1:
        raise lance_error(TableVersionNotFoundError, f"version {version} of {what}")
    return (branch, version) if branch else version


class TableRefOps(CatalogCore):
    """Tags (list, get, create, update, delete) and branches (list, create, delete)."""

    def list_table_tags(self, request: RequestInput = None) -> ListTableTagsResponse:
        with self._operation("list tags of table", request_id(request)):
            req = coerce_request(request, ListTableTagsRequest)
            path, name, entry = self._lance_table(req.id)
            dataset = self._dataset(path, entry)
            with lance_errors("list tags of", f"table {describe((*path, name))}"):
                found = dataset.tags.list()
            contents = {
                tag: TagContents(
                    branch=info.get("branch"),
                    version=info["version"],
                    manifest_size=info.get("manifest_size") or 0,
                )
                for tag, info in found.items()
            }
            page, token = self._ref_page(("tags", path, name), contents, req.page_token, req.limit)
            return ListTableTagsResponse(tags=page, page_token=token)

    def _ref_page(
        self,
        kind: tuple[object, ...],
        contents: dict[str, Ref],
        token: str | None,
        limit: int | None,
    ) -> tuple[dict[str, Ref], str | None]:
        """One page of a table's tags or branches, in name order."""
        keys, next_token = self._pager.page(
            (*kind, tuple(sorted(contents))), lambda: list(contents), token, limit
        )
        return {key: contents[key] for key in keys}, next_token

    def _tag_of(self, req: TagRequest) -> tuple[str, str, Tags]:
        """The checked tag name, the table's description and its dataset's tags."""
        path, name, entry = self._lance_table(req.id)
        tag = _check_ref_name(req.tag, "tag")
        return tag, f"table {describe((*path, name))}", self._dataset(path, entry).tags

    def get_table_tag_version(self, request: RequestInput = None) -> GetTableTagVersionResponse:
        with self._operation("read a tag of table", request_id(request)):
            tag, target, tags = self._tag_of(coerce_request(request, GetTableTagVersionRequest))
            found = tags.list()
            if tag not in found:
                raise lance_error(TableTagNotFoundError, f"tag {tag!r} of {target}")
            return GetTableTagVersionResponse(
                version=found[tag]["version"], branch=found[tag].get("branch")
            )

    def create_table_tag(self, request: RequestInput = None) -> CreateTableTagResponse:
        self._point_tag(request, CreateTableTagRequest, "create")
        return CreateTableTagResponse()

    def update_table_tag(self, request: RequestInput = None) -> UpdateTableTagResponse:
        self._point_tag(request, UpdateTableTagRequest, "move")
        return UpdateTableTagResponse()

    def _point_tag(
        self,
        request: RequestInput,
        request_type: type[CreateTableTagRequest] | type[UpdateTableTagRequest],
        verb: str,
    ) -> None:
        """Create a tag or move one: both point a tag at a version of the table."""
        with self._operation(f"{verb} a tag of table", request_id(request)):
            req = coerce_request(request, request_type)
            tag, target, tags = self._tag_of(req)
            point = tags.create if verb == "create" else tags.update
            with lance_errors(f"{verb} tag {tag!r} of", target, caller_input=True):
                point(tag, _reference(req.version, req.branch, target))

    def delete_table_tag(self, request: RequestInput = None) -> DeleteTableTagResponse:
        with self._operation("delete a tag of table", request_id(request)):
            tag, target, tags = self._tag_of(coerce_request(request, DeleteTableTagRequest))
            with lance_errors(f"delete tag {tag!r} of", target):
                tags.delete(tag)
            return DeleteTableTagResponse()

    def list_table_branches(self, request: RequestInput = None) -> ListTableBranchesResponse:
        with self._operation("list branches of table", request_id(request)):
            req = coerce_request(request, ListTableBranchesRequest)
            path, name, entry = self._lance_table(req.id)
            if self._managed_versioning(entry):
                found: dict[str, Any] = {}  # a managed table has its main line only
            else:
                with lance_errors("list branches of", f"table {describe((*path, name))}"):
                    found = self._dataset(path, entry).branches.list()
            contents = {
                branch: BranchContents(
                    parent_branch=info.get("parent_branch"),
                    parent_version=info["parent_version"],
                    create_at=info.get("create_at") or 0,
                    manifest_size=info.get("manifest_size") or 0,
                    metadata=dict(info.get("metadata") or {}) or None,
                )
                for branch, info in found.items()
            }
            page, token = self._ref_page(
                ("branches", path, name), contents, req.page_token, req.limit
            )
            return ListTableBranchesResponse(branches=page, page_token=token)

    def _branch_of(
        self, req: CreateTableBranchRequest | DeleteTableBranchRequest
    ) -> tuple[str, str, Path, TableEntry]:
        """The checked branch name, the table's description, its namespace and entry."""
        path, name, entry = self._lance_table(req.id)
        return _check_ref_name(req.name, "branch"), f"table {describe((*path, name))}", path, entry

    def create_table_branch(self, request: RequestInput = None) -> CreateTableBranchResponse:
        with self._operation("create a branch of table", request_id(request)):
            req = coerce_request(request, CreateTableBranchRequest)
            branch, target, path, entry = self._branch_of(req)
            if self._managed_versioning(entry):
                raise UnsupportedOperationError(
                    f"{target} is catalog-managed: the catalog records one line of versions, "
                    "so it cannot hold branches (declare the table managed_by=storage)"
                )
            dataset = self._dataset(path, entry)
            if branch in dataset.branches.list():
                raise lance_error(TableBranchAlreadyExistsError, f"branch {branch!r} of {target}")
            source = req.from_branch or None
            if source and source not in dataset.branches.list():
                raise lance_error(TableBranchNotFoundError, f"branch {source!r} of {target}")
            reference: Any = (source, req.from_version) if source else req.from_version
            if req.from_version is not None and req.from_version < 1:
                raise lance_error(
                    TableVersionNotFoundError, f"version {req.from_version} of {target}"
                )
            with lance_errors(f"create branch {branch!r} of", target):
                dataset.create_branch(branch, reference, self.storage_options or None)
            return CreateTableBranchResponse()

    def delete_table_branch(self, request: RequestInput = None) -> DeleteTableBranchResponse:
        with self._operation("delete a branch of table", request_id(request)):
            req = coerce_request(request, DeleteTableBranchRequest)
            branch, target, path, entry = self._branch_of(req)
            if self._managed_versioning(entry):
                raise lance_error(TableBranchNotFoundError, f"branch {branch!r} of {target}")
            dataset = self._dataset(path, entry)
            with lance_errors(f"delete branch {branch!r} of", target):
                dataset.branches.delete(branch)
            return DeleteTableBranchResponse()
