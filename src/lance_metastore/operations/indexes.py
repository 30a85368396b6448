"""Indexes of a table: create (vector, scalar, full-text), list, describe, drop.

A mixin of :class:`~lance_metastore.operations.catalog.CatalogNamespace`. Indexes live in the
Lance dataset; creating or dropping one commits a new version (through the catalog for managed
tables). The index name is the handle: creating a name that exists answers 7 (Lance would
replace it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lance_namespace import (
    CreateTableIndexRequest,
    CreateTableIndexResponse,
    CreateTableScalarIndexResponse,
    DescribeTableIndexStatsRequest,
    DescribeTableIndexStatsResponse,
    DropTableIndexRequest,
    DropTableIndexResponse,
    ListTableIndicesRequest,
    ListTableIndicesResponse,
)
from lance_namespace.errors import (
    InvalidInputError,
    TableColumnNotFoundError,
    TableIndexAlreadyExistsError,
    TableIndexNotFoundError,
    UnsupportedOperationError,
)
from lance_namespace_urllib3_client.models.index_content import IndexContent

from ..rules.errors import lance_error
from ..rules.identifiers import describe
from ..rules.requests import RequestInput, coerce_request, request_id
from .core import CatalogCore

if TYPE_CHECKING:
    from lance import LanceDataset
from .datasets import lance_errors

VECTOR_INDEX_TYPES = frozenset(
    {"IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_RQ", "IVF_HNSW_FLAT", "IVF_HNSW_PQ", "IVF_HNSW_SQ"}
)
SCALAR_INDEX_TYPES = frozenset(
    {"BTREE", "BITMAP", "LABEL_LIST", "NGRAM", "ZONEMAP", "BLOOMFILTER", "INVERTED", "FTS"}
)
FULL_TEXT_OPTIONS = (
    "with_position",
    "base_tokenizer",
    "language",
    "max_token_length",
    "lower_case",
    "stem",
    "remove_stop_words",
    "ascii_folding",
)
VECTOR_OPTIONS = (
    "num_partitions",
    "num_sub_vectors",
    "num_bits",
    "max_iterations",
    "sample_rate",
    "target_partition_size",
    "m",
    "ef_construction",
)


class TableIndexOps(CatalogCore):
    """create_table_index, create_table_scalar_index, list, describe stats, drop."""

    def create_table_index(self, request: RequestInput = None) -> CreateTableIndexResponse:
        with self._operation("create an index on table", request_id(request)):
            self._create_index(request, scalar_only=False)
            return CreateTableIndexResponse()

    def create_table_scalar_index(
        self, request: RequestInput = None
    ) -> CreateTableScalarIndexResponse:
        with self._operation("create a scalar index on table", request_id(request)):
            self._create_index(request, scalar_only=True)
            return CreateTableScalarIndexResponse()

    def _create_index(self, request: RequestInput, scalar_only: bool) -> None:
        req = coerce_request(request, CreateTableIndexRequest)
        if req.branch:
            raise UnsupportedOperationError("Creating an index on a branch is not supported")
        path, name, entry = self._lance_table(req.id)
        target = f"table {describe((*path, name))}"
        index_type = (req.index_type or "").strip().upper()
        if index_type not in VECTOR_INDEX_TYPES | SCALAR_INDEX_TYPES:
            raise InvalidInputError(
                f"Unknown index type {req.index_type!r} for {target}: expected one of "
                f"{', '.join(sorted(VECTOR_INDEX_TYPES | SCALAR_INDEX_TYPES))}"
            )
        if scalar_only and index_type in VECTOR_INDEX_TYPES:
            raise InvalidInputError(
                f"{index_type} is a vector index: use create_table_index for {target}"
            )
        dataset = self._dataset(path, entry)
        if dataset.schema.get_field_index(req.column) < 0:
            raise lance_error(TableColumnNotFoundError, f"column {req.column!r} in {target}")
        index_name = req.name or f"{req.column}_idx"
        if index_name in {index.name for index in dataset.describe_indices()}:
            raise lance_error(TableIndexAlreadyExistsError, f"index {index_name!r} of {target}")
        with lance_errors(f"create index {index_name!r} on", target, caller_input=True):
            if index_type in VECTOR_INDEX_TYPES:
                options = {
                    k: getattr(req, k) for k in VECTOR_OPTIONS if getattr(req, k) is not None
                }
                dataset.create_index(
                    req.column,
                    index_type,
                    name=index_name,
                    metric=(req.distance_type or "l2").lower(),
                    **options,
                )
            else:
                lance_type = "INVERTED" if index_type == "FTS" else index_type
                options = {
                    k: getattr(req, k) for k in FULL_TEXT_OPTIONS if getattr(req, k) is not None
                }
                if lance_type != "INVERTED" and options:
                    raise InvalidInputError(
                        f"Options {', '.join(options)} apply to full-text indexes only ({target})"
                    )
                dataset.create_scalar_index(  # Lance judges the type name
                    req.column,
                    lance_type,  # type: ignore[arg-type]
                    name=index_name,
                    replace=False,
                    **options,
                )

    def list_table_indices(self, request: RequestInput = None) -> ListTableIndicesResponse:
        with self._operation("list indexes of table", request_id(request)):
            req = coerce_request(request, ListTableIndicesRequest)
            path, name, entry = self._lance_table(req.id)
            dataset = self._dataset(path, entry, version=req.version, branch=req.branch or None)
            with lance_errors("list indexes of", f"table {describe((*path, name))}"):
                contents = {c.index_name: c for c in _index_contents(dataset)}
            keys, token = self._pager.page(
                ("indexes", path, name, dataset.version, tuple(sorted(contents))),
                lambda: list(contents),
                req.page_token,
                req.limit,
            )
            return ListTableIndicesResponse(indexes=[contents[k] for k in keys], page_token=token)

    def describe_table_index_stats(
        self, request: RequestInput = None
    ) -> DescribeTableIndexStatsResponse:
        with self._operation("describe an index of table", request_id(request)):
            req = coerce_request(request, DescribeTableIndexStatsRequest)
            path, name, entry = self._lance_table(req.id)
            target = f"table {describe((*path, name))}"
            if not req.index_name:
                raise InvalidInputError(f"Name the index of {target} to describe")
            dataset = self._dataset(path, entry, version=req.version, branch=req.branch or None)
            _require_index(dataset, req.index_name, target)
            with lance_errors(f"describe index {req.index_name!r} of", target):
                stats = dataset.stats.index_stats(req.index_name)
            indices = stats.get("indices") or [{}]
            return DescribeTableIndexStatsResponse(
                distance_type=indices[0].get("metric_type"),
                index_type=stats.get("index_type"),
                num_indexed_rows=stats.get("num_indexed_rows"),
                num_unindexed_rows=stats.get("num_unindexed_rows"),
                num_indices=stats.get("num_indices"),
            )

    def drop_table_index(self, request: RequestInput = None) -> DropTableIndexResponse:
        with self._operation("drop an index of table", request_id(request)):
            req = coerce_request(request, DropTableIndexRequest)
            if req.branch:
                raise UnsupportedOperationError("Dropping an index on a branch is not supported")
            path, name, entry = self._lance_table(req.id)
            target = f"table {describe((*path, name))}"
            if not req.index_name:
                raise InvalidInputError(f"Name the index of {target} to drop")
            dataset = self._dataset(path, entry)
            _require_index(dataset, req.index_name, target)
            with lance_errors(f"drop index {req.index_name!r} of", target):
                dataset.drop_index(req.index_name)
            return DropTableIndexResponse()


def _require_index(dataset: LanceDataset, index_name: str, target: str) -> None:
    if index_name not in {index.name for index in dataset.describe_indices()}:
        raise lance_error(TableIndexNotFoundError, f"index {index_name!r} of {target}")


def _index_contents(dataset: LanceDataset) -> list[IndexContent]:
    """One entry per index name (its first segment gives the uuid, creation time, version)."""
    contents = []
    for description in dataset.describe_indices():
        stats = dataset.stats.index_stats(description.name)
        first = description.segments[0] if description.segments else None
        contents.append(
            IndexContent(
                index_name=description.name,
                index_uuid=str(first.uuid) if first else "",
                columns=list(description.field_names),
                status="SUCCEEDED",
                index_type=stats.get("index_type") or description.index_type,
                type_url=description.type_url,
                num_indexed_rows=stats.get("num_indexed_rows"),
                num_unindexed_rows=stats.get("num_unindexed_rows"),
                size_bytes=description.total_size_bytes,
                num_segments=len(description.segments),
                created_at=first.created_at if first else None,
                index_version=first.index_version if first else None,
            )
        )
    return contents
