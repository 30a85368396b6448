"""Data operations: create with data, insert, merge-insert, update, delete, count, query.

A mixin of :class:`~lance_metastore.operations.catalog.CatalogNamespace`. Each runs Lance on
the table's dataset (see :mod:`lance_metastore.operations.datasets`): on catalog-managed tables
every commit goes through this namespace's ``create_table_version``, so concurrent writers are
arbitrated by the catalog. Requests are checked before Lance writes anything (columns named,
filters parsed, vector dimensions), so bad input changes nothing."""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from lance_namespace import (
    AnalyzeTableQueryPlanRequest,
    CountTableRowsRequest,
    CountTableRowsResponse,
    CreateTableRequest,
    CreateTableResponse,
    DeleteFromTableRequest,
    DeleteFromTableResponse,
    ExplainTableQueryPlanRequest,
    InsertIntoTableRequest,
    InsertIntoTableResponse,
    MergeInsertIntoTableRequest,
    MergeInsertIntoTableResponse,
    QueryTableRequest,
    QueryTableResponse,
    UpdateTableRequest,
    UpdateTableResponse,
)
from lance_namespace.errors import (
    ConcurrentModificationError,
    InvalidInputError,
    TableAlreadyExistsError,
    TableColumnNotFoundError,
    TableSchemaValidationError,
    UnsupportedOperationError,
)

from ..rules import locations, tables
from ..rules.errors import lance_error
from ..rules.identifiers import Path, describe
from ..rules.requests import (
    APPEND,
    CREATE,
    EXIST_OK,
    OVERWRITE,
    RequestInput,
    coerce_request,
    request_id,
    request_mode,
)
from ..rules.tables import TableEntry
from .core import CatalogCore

if TYPE_CHECKING:
    from lance import LanceDataset
    from lance.dataset import LanceScanner
    from lance.query import FullTextQuery
    from lance_namespace_urllib3_client.models.fts_query import FtsQuery
    from lance_namespace_urllib3_client.models.query_table_request_full_text_query import (
        QueryTableRequestFullTextQuery,
    )
from .datasets import ipc_file_bytes, lance_errors, read_ipc_stream

logger = logging.getLogger("lance_metastore")

# The requests that read rows (the same query fields, as the spec models them).
_QueryRequest = QueryTableRequest | AnalyzeTableQueryPlanRequest

DEFAULT_VECTOR_COLUMN = "vector"


def _own(parameters: Mapping[str, str]) -> dict[str, str]:
    """The parameters this library sets (a catalog may add its own, as Hive's DDL time)."""
    return {k: v for k, v in parameters.items() if tables.is_own_parameter(k)}


def _no_branch(branch: str | None, what: str) -> None:
    if branch:
        raise UnsupportedOperationError(f"{what} on a branch is not supported")


def _check_columns(schema: pa.Schema, names: list[str], target: str) -> None:
    for name in names:
        if schema.get_field_index(name) < 0:
            raise lance_error(TableColumnNotFoundError, f"column {name!r} in {target}")


def _check_predicate(dataset: LanceDataset, predicate: str | None, target: str) -> None:
    """Parse and bind a filter before anything is written (a bad one changes nothing)."""
    if predicate is None:
        return
    if not isinstance(predicate, str) or not predicate.strip():
        raise InvalidInputError(f"An empty filter is not valid for {target}")
    with lance_errors("apply the filter to", target):
        dataset.scanner(filter=predicate, limit=0, columns=[]).to_table()


class TableDataOps(CatalogCore):
    """create_table (with data), insert, merge-insert, update, delete, count, query, plans."""

    def _write(self, path: Path, entry: TableEntry, data: pa.Table, mode: str) -> LanceDataset:
        """Write ``data`` to the table (its first write creates the dataset); the dataset."""
        import lance

        target = f"table {describe((*path, entry.name))}"
        where = self._stored_location(path, entry)  # today's rules, ownership when confined
        has_data = self._has_committed_data(entry)
        if has_data:
            current = self._dataset(path, entry)
            if mode == APPEND:
                _check_append_schema(current.schema, data.schema, target)
        with lance_errors("write to", target):
            if self._managed_versioning(entry):
                return lance.write_dataset(
                    data,
                    namespace_client=self,
                    table_id=[*path, entry.name],
                    mode=mode if has_data else APPEND,
                    storage_options=self.storage_options or None,
                )
            return lance.write_dataset(
                data,
                str(where),
                mode=mode if has_data else CREATE,
                storage_options=self.storage_options or None,
            )

    def create_table(
        self, request: RequestInput = None, request_data: object = None
    ) -> CreateTableResponse:
        with self._operation("create table", request_id(request)):
            req = coerce_request(request, CreateTableRequest)
            path, name = self._table_path(req.id)
            target = f"table {describe((*path, name))}"
            mode = request_mode(req.mode, CREATE, (CREATE, EXIST_OK, OVERWRITE), "create mode")
            parameters = self._declared_parameters(req.properties)
            existing = self._catalog_get_table(path, name)
            if existing is not None:
                if mode == CREATE or not existing.is_lance:
                    raise lance_error(TableAlreadyExistsError, describe((*path, name)))
                if tables.fenced(existing.parameters):  # a failed create's undo removes it
                    raise ConcurrentModificationError(
                        f"Table {describe((*path, name))} is being removed (its create "
                        "failed): retry"
                    )
                if mode == OVERWRITE:
                    data = read_ipc_stream(request_data, target)
                    dataset = self._write(path, existing, data, OVERWRITE)
                    self._record_columns(path, name, dataset.schema, existing)
                    existing = self._require_lance_table(path, name)
                return self._created(existing, self._current_version(path, existing))
            # The rows are decoded only once the target is known to take them.
            data = read_ipc_stream(request_data, target)
            default = self._namespace_dir(path).child(name + tables.LANCE_SUFFIX)
            # Only a directory this call makes is removed if the write fails: one that existed
            # before (empty or not) is never touched.
            fresh = default.local and not os.path.lexists(default.key)
            with self._placing_table(path, name, None, "create") as location:
                if self._dataset_schema(location) is not None:
                    # A dataset left there (a deregistered table): a create never adopts or
                    # appends to it, whoever manages the versions (register_table does).
                    raise lance_error(
                        TableAlreadyExistsError,
                        describe((*path, name)),
                        f"(Dataset already exists: {location}; register it instead)",
                    )
                entry = TableEntry(name=name, location=location, parameters=parameters)
                local = default.key if location == str(default) else ""
                # Declared first, so the catalog decides who creates it; undone if the write
                # fails.
                self._catalog_create_table(path, entry, [])
            try:
                dataset = self._write(path, entry, data, CREATE)
            except BaseException:
                self._undo_declare(path, entry, local if fresh and local else None)
                raise
            self._record_columns(path, name, dataset.schema, entry)
            entry = self._require_lance_table(path, name)
            return self._created(entry, dataset.version)

    def _created(self, entry: TableEntry, version: int) -> CreateTableResponse:
        return CreateTableResponse(
            location=locations.answered(entry.location, f"Table {entry.name}"),
            version=version,
            storage_options=self._storage_options_or_none(),
            properties=dict(entry.parameters),
        )

    def _current_version(self, path: Path, entry: TableEntry) -> int:
        if not self._has_committed_data(entry):
            return 0
        return self._dataset(path, entry).version

    def _undo_declare(self, path: Path, entry: TableEntry, made_directory: str | None) -> None:
        """A create whose write failed: remove the entry and the directory the write made,
        but only while no one else used them. Between the declaration and the failure another
        writer may have written the table (an insert, a commit): an entry that moved from the
        one declared (columns recorded, a version committed) stays, the removal is fenced
        against commits racing it (:meth:`_remove_untouched`), and a directory holding a
        dataset (a ``_versions/`` with a manifest) is never removed; the caller answers the
        original error either way."""
        target = describe((*path, entry.name))
        try:
            outcome = self._remove_untouched(path, entry.name, entry.parameters)
        except Exception as error:  # the original failure matters more
            logger.warning("could not undo the entry of %s: %s", target, error)
            outcome = "kept"
        if outcome == "kept":
            logger.warning(
                "table %s: its entry stays (used by another writer, or not removed)", target
            )
        versions_dir = os.path.join(made_directory or "", "_versions")
        if made_directory and os.path.isdir(versions_dir) and os.listdir(versions_dir):
            logger.warning("table %s holds a dataset it did not write: its data stays", target)
        elif made_directory and outcome != "kept":
            shutil.rmtree(made_directory, ignore_errors=True)

    def insert_into_table(
        self, request: RequestInput = None, request_data: object = None
    ) -> InsertIntoTableResponse:
        with self._operation("insert into table", request_id(request)):
            req = coerce_request(request, InsertIntoTableRequest)
            _no_branch(req.branch, "Inserting")
            path, name, entry = self._lance_table(req.id)
            mode = request_mode(req.mode, APPEND, (APPEND, OVERWRITE), "insert mode")
            data = read_ipc_stream(request_data, f"table {describe((*path, name))}")
            dataset = self._write(path, entry, data, mode)
            self._record_columns(path, name, dataset.schema, entry)
            return InsertIntoTableResponse(num_inserted_rows=data.num_rows, version=dataset.version)

    def merge_insert_into_table(
        self, request: RequestInput = None, request_data: object = None
    ) -> MergeInsertIntoTableResponse:
        with self._operation("merge into table", request_id(request)):
            req = coerce_request(request, MergeInsertIntoTableRequest)
            _no_branch(req.branch, "Merging")
            path, name, entry = self._lance_table(req.id)
            target = f"table {describe((*path, name))}"
            if not req.on:
                raise InvalidInputError(f"Merging into {target} needs the key columns ('on')")
            data = read_ipc_stream(request_data, target)
            timeout = _duration(req.timeout, f"the merge into {target}")
            dataset = self._dataset(path, entry)
            _check_columns(dataset.schema, list(req.on), target)
            _check_columns(data.schema, list(req.on), "the merged data")
            _check_predicate(dataset, req.when_matched_update_all_filt, target)
            _check_predicate(dataset, req.when_not_matched_by_source_delete_filt, target)
            with lance_errors("merge into", target):
                builder = dataset.merge_insert(list(req.on))
                if req.when_matched_update_all:
                    builder = builder.when_matched_update_all(req.when_matched_update_all_filt)
                if req.when_not_matched_insert_all:
                    builder = builder.when_not_matched_insert_all()
                if req.when_not_matched_by_source_delete:
                    builder = builder.when_not_matched_by_source_delete(
                        req.when_not_matched_by_source_delete_filt
                    )
                if req.use_index is not None:
                    builder = builder.use_index(req.use_index)
                if timeout is not None:
                    builder = builder.retry_timeout(timeout)
                stats = builder.execute(data)
            latest = self._latest(path, name)
            self._record_columns(path, name, latest.schema, entry)
            return MergeInsertIntoTableResponse(
                num_updated_rows=stats.get("num_updated_rows", 0),
                num_inserted_rows=stats.get("num_inserted_rows", 0),
                num_deleted_rows=stats.get("num_deleted_rows", 0),
                version=latest.version,
            )

    def update_table(self, request: RequestInput = None) -> UpdateTableResponse:
        with self._operation("update rows of table", request_id(request)):
            req = coerce_request(request, UpdateTableRequest)
            _no_branch(req.branch, "Updating")
            path, name, entry = self._lance_table(req.id)
            target = f"table {describe((*path, name))}"
            if not req.updates:
                raise InvalidInputError(f"An update of {target} needs at least one column")
            updates = {column: expression for column, expression in req.updates}
            dataset = self._dataset(path, entry)
            _check_columns(dataset.schema, list(updates), target)
            _check_predicate(dataset, req.predicate, target)
            with lance_errors("update rows of", target):
                result = dataset.update(updates, where=req.predicate)
            return UpdateTableResponse(
                updated_rows=result.get("num_rows_updated", 0),
                version=dataset.version,
                properties=dict(self._require_lance_table(path, name).parameters),
            )

    def delete_from_table(self, request: RequestInput = None) -> DeleteFromTableResponse:
        with self._operation("delete rows of table", request_id(request)):
            req = coerce_request(request, DeleteFromTableRequest)
            _no_branch(req.branch, "Deleting")
            path, name, entry = self._lance_table(req.id)
            target = f"table {describe((*path, name))}"
            dataset = self._dataset(path, entry)
            _check_predicate(dataset, req.predicate, target)
            with lance_errors("delete rows of", target):
                dataset.delete(req.predicate)
            return DeleteFromTableResponse(version=dataset.version)

    def count_table_rows(self, request: RequestInput = None) -> CountTableRowsResponse:
        with self._operation("count rows of table", request_id(request)):
            req = coerce_request(request, CountTableRowsRequest)
            path, name, entry = self._lance_table(req.id)
            dataset = self._dataset(path, entry, version=req.version, branch=req.branch or None)
            target = f"table {describe((*path, name))}"
            _check_predicate(dataset, req.predicate, target)
            with lance_errors("count rows of", target):
                return CountTableRowsResponse(count=dataset.count_rows(filter=req.predicate))

    # ----------------------------------------------------------------------------------------
    # Queries
    # ----------------------------------------------------------------------------------------

    def _scanner(self, raw: RequestInput, model: type[_QueryRequest]) -> tuple[LanceScanner, str]:
        """A Lance scanner for a query request (and the table it reads, for messages)."""
        req = coerce_request(raw, model)
        path, name, entry = self._lance_table(req.id)
        target = f"table {describe((*path, name))}"
        dataset = self._dataset(path, entry, version=req.version, branch=req.branch or None)
        options = _query_options(req, dataset.schema, target)
        with lance_errors("query", target):
            return dataset.scanner(**options), target

    def query_table(self, request: RequestInput = None) -> QueryTableResponse:
        """The rows, as Arrow IPC file bytes (the interface's answer format)."""
        with self._operation("query table", request_id(request)):
            scanner, target = self._scanner(request, QueryTableRequest)
            with lance_errors("query", target):
                return QueryTableResponse(data=ipc_file_bytes(scanner.to_table()))

    def explain_table_query_plan(self, request: RequestInput = None) -> str:
        with self._operation("explain a query of table", request_id(request)):
            req = coerce_request(request, ExplainTableQueryPlanRequest)
            query = req.query.model_copy(update={"id": req.id, "branch": req.branch})
            scanner, target = self._scanner(query, QueryTableRequest)
            with lance_errors("explain a query of", target):
                return scanner.explain_plan(bool(req.verbose))

    def analyze_table_query_plan(self, request: RequestInput = None) -> str:
        with self._operation("analyze a query of table", request_id(request)):
            scanner, target = self._scanner(request, AnalyzeTableQueryPlanRequest)
            with lance_errors("analyze a query of", target):
                return scanner.analyze_plan()


_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*", re.IGNORECASE)
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def _duration(text: str | None, what: str) -> timedelta | None:
    """A request's timeout ("30s", "5m", "500ms", "1h") as a timedelta."""
    if text is None:
        return None
    match = _DURATION.fullmatch(text)
    if match is None:
        raise InvalidInputError(f"Invalid timeout {text!r} for {what}: expected e.g. '30s', '5m'")
    return timedelta(seconds=float(match.group(1)) * _SECONDS[match.group(2).lower()])


def _check_append_schema(table: pa.Schema, data: pa.Schema, target: str) -> None:
    """Appended rows must have the table's columns (Lance would refuse later, after work)."""
    missing = [n for n in table.names if data.get_field_index(n) < 0]
    unexpected = [n for n in data.names if table.get_field_index(n) < 0]
    if unexpected:
        raise TableSchemaValidationError(
            f"Data for {target} has columns the table lacks: {', '.join(unexpected)}"
        )
    if missing and not all(table.field(n).nullable for n in missing):
        raise TableSchemaValidationError(
            f"Data for {target} lacks non-nullable columns: {', '.join(missing)}"
        )


def _query_options(req: _QueryRequest, schema: pa.Schema, target: str) -> dict[str, Any]:
    """Scanner keyword arguments for a query request, checked against the table's schema."""
    options: dict[str, Any] = {}
    if req.columns is not None:
        if req.columns.column_aliases:
            options["columns"] = dict(req.columns.column_aliases)
        elif req.columns.column_names:
            _check_columns(schema, list(req.columns.column_names), target)
            options["columns"] = list(req.columns.column_names)
    if req.filter is not None:
        options["filter"] = req.filter
    if req.prefilter is not None:
        options["prefilter"] = req.prefilter
    if req.with_row_id:
        options["with_row_id"] = True
    if req.fast_search is not None:
        options["fast_search"] = req.fast_search
    if req.offset:
        options["offset"] = req.offset
    if req.k is not None and req.k < 0:
        raise InvalidInputError(f"k must be >= 0 for a query of {target}, got {req.k}")
    vector = _query_vector(req)
    if vector is not None:
        options["nearest"] = _nearest(req, vector, schema, target)
    elif req.k:
        options["limit"] = req.k
    if req.full_text_query is not None:
        options["full_text_query"] = _full_text(req.full_text_query, target)
        if vector is None and req.k:
            options["limit"] = req.k
    return options


def _query_vector(req: _QueryRequest) -> list[Any] | None:
    vector = req.vector
    if vector is None:  # required by the models; kept for requests built unchecked
        return None  # type: ignore[unreachable]
    if vector.single_vector:
        return list(vector.single_vector)
    if vector.multi_vector:
        return [list(v) for v in vector.multi_vector]
    return None


def _vector_column(req: _QueryRequest, schema: pa.Schema, target: str) -> str:
    if req.vector_column:
        _check_columns(schema, [req.vector_column], target)
        return req.vector_column
    if schema.get_field_index(DEFAULT_VECTOR_COLUMN) >= 0:
        return DEFAULT_VECTOR_COLUMN
    candidates = [f.name for f in schema if pa.types.is_fixed_size_list(f.type)]
    if len(candidates) == 1:
        return candidates[0]
    raise InvalidInputError(
        f"Name the vector column of {target} (vector_column): candidates {candidates or 'none'}"
    )


def _nearest(
    req: _QueryRequest, vector: list[Any], schema: pa.Schema, target: str
) -> dict[str, Any]:
    column = _vector_column(req, schema, target)
    column_type = schema.field(column).type
    if pa.types.is_fixed_size_list(column_type):
        dimension = column_type.list_size
        queries = vector if vector and isinstance(vector[0], list) else [vector]
        for query in queries:
            if len(query) != dimension:
                raise InvalidInputError(
                    f"Query vector has {len(query)} dimensions; column {column!r} of {target} "
                    f"has {dimension}"
                )
    nearest: dict[str, Any] = {"column": column, "q": vector, "k": req.k or 10}
    if req.distance_type:
        nearest["metric"] = req.distance_type.lower()
    for field, key in (
        ("nprobes", "nprobes"),
        ("minimum_nprobes", "minimum_nprobes"),
        ("maximum_nprobes", "maximum_nprobes"),
        ("refine_factor", "refine_factor"),
        ("ef", "ef"),
    ):
        value = getattr(req, field)
        if value is not None:
            nearest[key] = value
    if req.bypass_vector_index:
        nearest["use_index"] = False
    if req.lower_bound is not None or req.upper_bound is not None:
        nearest["distance_range"] = (req.lower_bound, req.upper_bound)
    return nearest


def _full_text(
    query: QueryTableRequestFullTextQuery, target: str
) -> str | dict[str, Any] | FullTextQuery:
    if query.string_query is not None:
        string = query.string_query
        if string.columns:
            return {"query": string.query, "columns": list(string.columns)}
        return string.query
    if query.structured_query is not None:
        return _fts(query.structured_query.query, target)
    raise InvalidInputError(f"A full-text query of {target} needs a string or structured query")


def _fts(query: FtsQuery, target: str) -> FullTextQuery:
    """The interface's structured full-text query as Lance's query objects."""
    from lance import query as fts

    if query.match is not None:
        match = query.match
        if not match.column:
            raise InvalidInputError(f"A match query of {target} needs a column")
        options: dict[str, Any] = {}
        for field in ("boost", "fuzziness", "max_expansions", "prefix_length"):
            if getattr(match, field) is not None:
                options[field] = getattr(match, field)
        if match.operator:
            options["operator"] = fts.FullTextOperator(match.operator.upper())
        return fts.MatchQuery(match.terms, match.column, **options)
    if query.phrase is not None:
        phrase = query.phrase
        if not phrase.column:
            raise InvalidInputError(f"A phrase query of {target} needs a column")
        return fts.PhraseQuery(phrase.terms, phrase.column, slop=phrase.slop or 0)
    if query.boost is not None:
        boost = query.boost
        return fts.BoostQuery(
            _fts(boost.positive, target),
            _fts(boost.negative, target),
            negative_boost=boost.negative_boost if boost.negative_boost is not None else 0.5,
        )
    if query.multi_match is not None:
        matches = query.multi_match.match_queries
        if not matches:
            raise InvalidInputError(f"A multi-match query of {target} needs match queries")
        return fts.MultiMatchQuery(
            matches[0].terms,
            [m.column for m in matches],  # type: ignore[misc]  # Lance judges a missing one
            boosts=[float(m.boost if m.boost is not None else 1.0) for m in matches],
        )
    if query.boolean is not None:
        clauses = [
            (occur, _fts(sub, target))
            for occur, subs in (
                (fts.Occur.MUST, query.boolean.must),
                (fts.Occur.MUST_NOT, query.boolean.must_not),
                (fts.Occur.SHOULD, query.boolean.should),
            )
            for sub in subs or []
        ]
        return fts.BooleanQuery(clauses)
    raise InvalidInputError(f"Empty structured full-text query for {target}")
