"""Table lifecycle and metadata: rename, restore, list everything, stats, schema changes.

A mixin of :class:`~lance_metastore.operations.catalog.CatalogNamespace`. Rename is a catalog
change only (the data stays where it is) made by the backend's ``_catalog_rename_table``;
everything else is a Lance change of the table's dataset, after which the catalog's columns are
made to mirror the new schema."""

from __future__ import annotations

from typing import Any

from lance_namespace import (
    AlterTableAddColumnsRequest,
    AlterTableAddColumnsResponse,
    AlterTableAlterColumnsRequest,
    AlterTableAlterColumnsResponse,
    AlterTableDropColumnsRequest,
    AlterTableDropColumnsResponse,
    AlterTransactionRequest,
    AlterTransactionResponse,
    DescribeTransactionRequest,
    DescribeTransactionResponse,
    GetTableStatsRequest,
    GetTableStatsResponse,
    ListTablesRequest,
    ListTablesResponse,
    NamespaceNotFoundError,
    RenameTableRequest,
    RenameTableResponse,
    RestoreTableRequest,
    RestoreTableResponse,
    UpdateFieldMetadataRequest,
    UpdateFieldMetadataResponse,
    UpdateTableSchemaMetadataRequest,
    UpdateTableSchemaMetadataResponse,
)
from lance_namespace.errors import (
    InvalidInputError,
    TableAlreadyExistsError,
    TableColumnNotFoundError,
    TransactionNotFoundError,
    UnsupportedOperationError,
)
from lance_namespace_urllib3_client.models.fragment_stats import FragmentStats
from lance_namespace_urllib3_client.models.fragment_summary import FragmentSummary

from ..rules.errors import lance_error
from ..rules.identifiers import Path, describe, join_identifier, split_identifier
from ..rules.requests import RequestInput, coerce_request, request_id
from ..rules.visibility import NAMESPACE, TABLE, viewer
from .core import CatalogCore
from .datasets import json_arrow_type, lance_errors

# Every transaction Lance reports was committed (uncommitted ones leave no record).
COMMITTED = "SUCCEEDED"

# Lance's own threshold for a "small" fragment in its compaction defaults.
SMALL_FRAGMENT_ROWS = 1024 * 1024


def _no_branch(branch: str | None, what: str) -> None:
    if branch:
        raise UnsupportedOperationError(
            f"{what} on a branch is not supported: open the branch with Lance"
        )


class TableLifecycleOps(CatalogCore):
    """rename_table, restore_table, list_all_tables, get_table_stats, metadata, columns and
    the committed transactions of a table."""

    def describe_transaction(self, request: RequestInput = None) -> DescribeTransactionResponse:
        """A committed Lance transaction of a table: ``id`` is the table id followed by the
        transaction's uuid or the version it committed."""
        with self._operation("describe a transaction of", request_id(request)):
            req = coerce_request(request, DescribeTransactionRequest)
            return DescribeTransactionResponse(
                status=COMMITTED, properties=self._transaction(req.id)
            )

    def alter_transaction(self, request: RequestInput = None) -> AlterTransactionResponse:
        with self._operation("alter a transaction of", request_id(request)):
            req = coerce_request(request, AlterTransactionRequest)
            properties = self._transaction(req.id)
            raise UnsupportedOperationError(
                f"Transaction {properties['uuid']} committed version {properties['version']}: "
                "a committed Lance transaction cannot be altered"
            )

    def _transaction(self, raw_id: object) -> dict[str, str]:
        parts = list(split_identifier(raw_id))
        if len(parts) < 2:
            raise InvalidInputError("A transaction id is the table id followed by its uuid")
        path, name, entry = self._lance_table(parts[:-1])
        wanted = parts[-1]
        target = f"table {describe((*path, name))}"
        dataset = self._dataset(path, entry)
        with lance_errors("read the transactions of", target):
            if wanted.isdigit():
                candidates = [int(wanted)] if 1 <= int(wanted) <= dataset.version else []
            else:
                candidates = list(range(dataset.version, 0, -1))
            for version in candidates:
                transaction = dataset.read_transaction(version)
                if transaction is not None and (wanted.isdigit() or transaction.uuid == wanted):
                    return {
                        "version": str(version),
                        "uuid": transaction.uuid,
                        "operation": type(transaction.operation).__name__,
                        "read_version": str(transaction.read_version),
                    }
        raise lance_error(TransactionNotFoundError, f"{wanted!r} of {target}")

    def rename_table(self, request: RequestInput = None) -> RenameTableResponse:
        raw_id = request_id(request)
        with self._operation("rename table", raw_id):
            req = coerce_request(request, RenameTableRequest)
            path, name, entry = self._lance_table(req.id)
            new_namespace = path if req.new_namespace_id is None else req.new_namespace_id
            new_path, new_name = self._table_path([*new_namespace, req.new_table_name])
            if (new_path, new_name) == (path, name):
                raise lance_error(
                    TableAlreadyExistsError,
                    describe((*path, name)),
                    "(a table cannot be renamed onto itself)",
                )
            if new_path != path and self._catalog_get_namespace(new_path) is None:
                raise lance_error(NamespaceNotFoundError, describe(new_path))
            if self._catalog_get_table(new_path, new_name) is not None:
                raise lance_error(
                    TableAlreadyExistsError,
                    describe((*new_path, new_name)),
                    f"(cannot rename {describe((*path, name))} to it)",
                )
            if new_path != path:
                self._check_moves_namespace(path, name, entry)
            self._catalog_rename_table(path, entry, new_path, new_name)
            return RenameTableResponse()

    def restore_table(self, request: RequestInput = None) -> RestoreTableResponse:
        raw_id = request_id(request)
        with self._operation("restore table", raw_id):
            req = coerce_request(request, RestoreTableRequest)
            _no_branch(req.branch, "Restore")
            path, name, entry = self._lance_table(req.id)
            if req.version < 1:
                raise InvalidInputError(f"Version {req.version} of a table does not exist")
            dataset = self._dataset(path, entry, version=req.version)
            target = f"table {describe((*path, name))}"
            with lance_errors("restore", target):
                dataset.restore()  # type: ignore[no-untyped-call]  # unannotated in Lance
            latest = self._latest(path, name)
            self._record_columns(path, name, latest.schema, entry)
            return RestoreTableResponse()

    def list_all_tables(self, request: RequestInput = None) -> ListTablesResponse:
        """Every Lance table under the namespace asked for (the root: all), as ``$``-joined
        identifiers, sorted and paged like every listing."""
        raw_id = request_id(request)
        with self._operation("list all tables under", raw_id):
            req = coerce_request(request, ListTablesRequest)
            start = self._namespace_path(req.id)
            if start and self._catalog_get_namespace(start) is None:
                raise lance_error(NamespaceNotFoundError, describe(start))
            include_declared = req.include_declared is not False

            sees = self._pager.sees

            def fetch() -> list[Path]:
                # Walks only the namespaces the caller may see (nothing without a grant, all
                # with one on the root), and opens only tables it may see.
                found: list[Path] = []
                pending: list[Path] = [start] if sees(start, NAMESPACE) else []
                while pending:
                    path = pending.pop()
                    for child in self._catalog_list_namespaces(path):
                        if sees((*path, child), NAMESPACE):
                            pending.append((*path, child))
                    if not path:
                        continue
                    for table in self._catalog_list_lance_tables(path):
                        table_id = (*path, table)
                        if sees(table_id, TABLE) and (
                            include_declared or self._has_data(path, table)
                        ):
                            found.append(table_id)
                return found

            names, token = self._pager.objects(
                ("all tables", start, include_declared, viewer()),
                fetch,
                req.page_token,
                req.limit,
                kind=TABLE,
                render=join_identifier,
            )
            return ListTablesResponse(tables=names, page_token=token)

    def get_table_stats(self, request: RequestInput = None) -> GetTableStatsResponse:
        raw_id = request_id(request)
        with self._operation("get stats of table", raw_id):
            req = coerce_request(request, GetTableStatsRequest)
            path, name, entry = self._lance_table(req.id)
            dataset = self._dataset(path, entry, branch=req.branch or None)
            with lance_errors("read stats of", f"table {describe((*path, name))}"):
                lengths = sorted(f.count_rows() for f in dataset.get_fragments())
                data = dataset.stats.data_stats()
                # Lance annotates ``fields`` as one FieldStatistics; it is a list of them.
                total_bytes = sum(field.bytes_on_disk for field in data.fields)  # type: ignore[attr-defined]
                indices = len(dataset.describe_indices())
                rows = dataset.count_rows()
            return GetTableStatsResponse(
                total_bytes=total_bytes,
                num_rows=rows,
                num_indices=indices,
                fragment_stats=FragmentStats(
                    num_fragments=len(lengths),
                    num_small_fragments=sum(1 for n in lengths if n < SMALL_FRAGMENT_ROWS),
                    lengths=_summary(lengths),
                ),
            )

    def update_table_schema_metadata(
        self, request: RequestInput = None
    ) -> UpdateTableSchemaMetadataResponse:
        raw_id = request_id(request)
        with self._operation("update schema metadata of table", raw_id):
            req = coerce_request(request, UpdateTableSchemaMetadataRequest)
            _no_branch(req.branch, "Updating schema metadata")
            path, name, entry = self._lance_table(req.id)
            dataset = self._dataset(path, entry)
            with lance_errors("update schema metadata of", f"table {describe((*path, name))}"):
                metadata = dataset.update_schema_metadata(dict(req.metadata or {}))
            return UpdateTableSchemaMetadataResponse(metadata=dict(metadata or {}))

    def update_field_metadata(self, request: RequestInput = None) -> UpdateFieldMetadataResponse:
        raw_id = request_id(request)
        with self._operation("update field metadata of table", raw_id):
            req = coerce_request(request, UpdateFieldMetadataRequest)
            _no_branch(req.branch, "Updating field metadata")
            path, name, entry = self._lance_table(req.id)
            dataset = self._dataset(path, entry)
            target = f"table {describe((*path, name))}"
            for update in req.updates:
                _require_field(dataset.schema, update.path, target)
            with lance_errors("update field metadata of", target):
                for update in req.updates:
                    dataset.update_field_metadata(
                        {update.path: dict(update.metadata)}, replace=bool(update.replace)
                    )
            latest = self._latest(path, name)
            fields = {
                update.path: _field_metadata(latest.schema, update.path) for update in req.updates
            }
            return UpdateFieldMetadataResponse(version=latest.version, fields=fields)

    def alter_table_add_columns(self, request: RequestInput = None) -> AlterTableAddColumnsResponse:
        raw_id = request_id(request)
        with self._operation("add columns to table", raw_id):
            req = coerce_request(request, AlterTableAddColumnsRequest)
            _no_branch(req.branch, "Adding columns")
            path, name, entry = self._lance_table(req.id)
            target = f"table {describe((*path, name))}"
            transforms: dict[str, str] = {}
            for column in req.new_columns:
                expression = column.expression or column.computed
                if column.virtual_column is not None or not expression:
                    raise InvalidInputError(
                        f"Column {column.name!r} for {target} needs a SQL expression "
                        "(virtual columns are not supported)"
                    )
                transforms[column.name] = expression
            dataset = self._dataset(path, entry)
            existing = set(dataset.schema.names)
            for column_name in transforms:
                if column_name in existing:
                    raise InvalidInputError(f"Column {column_name!r} already exists in {target}")
            with lance_errors("add columns to", target):
                dataset.add_columns(transforms)
            self._record_columns(path, name, dataset.schema, entry)
            return AlterTableAddColumnsResponse(version=dataset.version)

    def alter_table_alter_columns(
        self, request: RequestInput = None
    ) -> AlterTableAlterColumnsResponse:
        raw_id = request_id(request)
        with self._operation("alter columns of table", raw_id):
            req = coerce_request(request, AlterTableAlterColumnsRequest)
            _no_branch(req.branch, "Altering columns")
            path, name, entry = self._lance_table(req.id)
            target = f"table {describe((*path, name))}"
            dataset = self._dataset(path, entry)
            alterations = []
            for alteration in req.alterations:
                _require_field(dataset.schema, alteration.path, target)
                if alteration.virtual_column is not None:
                    raise InvalidInputError(f"Virtual columns are not supported on {target}")
                change: dict[str, Any] = {"path": alteration.path}
                if alteration.rename is not None:
                    change["name"] = alteration.rename
                if alteration.nullable is not None:
                    change["nullable"] = alteration.nullable
                if alteration.data_type is not None:
                    change["data_type"] = json_arrow_type(
                        alteration.data_type, f"column {alteration.path!r} of {target}"
                    )
                if len(change) == 1:
                    raise InvalidInputError(
                        f"Alteration of column {alteration.path!r} of {target} changes nothing"
                    )
                alterations.append(change)
            with lance_errors("alter columns of", target):
                # Lance's AlterColumn marks every key required; it takes any of them.
                dataset.alter_columns(*alterations)  # type: ignore[arg-type]
            self._record_columns(path, name, dataset.schema, entry)
            return AlterTableAlterColumnsResponse(version=dataset.version)

    def alter_table_drop_columns(
        self, request: RequestInput = None
    ) -> AlterTableDropColumnsResponse:
        raw_id = request_id(request)
        with self._operation("drop columns of table", raw_id):
            req = coerce_request(request, AlterTableDropColumnsRequest)
            _no_branch(req.branch, "Dropping columns")
            path, name, entry = self._lance_table(req.id)
            target = f"table {describe((*path, name))}"
            dataset = self._dataset(path, entry)
            for column in req.columns:
                _require_field(dataset.schema, column, target)
            with lance_errors("drop columns of", target):
                dataset.drop_columns(list(req.columns))
            self._record_columns(path, name, dataset.schema, entry)
            return AlterTableDropColumnsResponse(version=dataset.version)


def _require_field(schema: Any, field_path: str, target: str) -> Any:
    """The field at a dotted path, or TableColumnNotFoundError naming it."""
    current = schema
    found = None
    for part in field_path.split("."):
        index = current.get_field_index(part) if current is not None else -1
        if index < 0:
            raise lance_error(TableColumnNotFoundError, f"column {field_path!r} in {target}")
        found = current.field(index)
        current = found.type if hasattr(found.type, "get_field_index") else None
    return found


def _field_metadata(schema: Any, field_path: str) -> dict[str, str]:
    found = _require_field(schema, field_path, "the table")
    return {k.decode(): v.decode() for k, v in (found.metadata or {}).items()}


def _summary(lengths: list[int]) -> FragmentSummary:
    if not lengths:
        return FragmentSummary(min=0, max=0, mean=0, p25=0, p50=0, p75=0, p99=0)

    def percentile(fraction: float) -> int:
        return lengths[min(len(lengths) - 1, int(fraction * len(lengths)))]

    return FragmentSummary(
        min=lengths[0],
        max=lengths[-1],
        mean=sum(lengths) // len(lengths),
        p25=percentile(0.25),
        p50=percentile(0.5),
        p75=percentile(0.75),
        p99=percentile(0.99),
    )
