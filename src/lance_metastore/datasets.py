"""The Lance side of the table operations, shared by every backend.

The data, schema, tag, branch and index operations of the interface are Lance operations on a
table's dataset; the catalog only says where the dataset is and, for ``managed_by=impl``
tables, arbitrates each commit. This module holds what those operations share:

- :class:`TableDatasets`, a mixin of :class:`~lance_metastore.base.CatalogNamespace`: open a
  table's dataset the way its owner requires (catalog-managed tables through the namespace, so
  every commit goes through ``create_table_version``), and keep the catalog's columns true
  after a change;
- :func:`lance_errors`: Lance's exceptions as the spec's error classes, naming the table;
- Arrow IPC in (stream, as the interface sends data) and out (file, as it answers queries).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.ipc as ipc
from lance_namespace.errors import (
    ConcurrentModificationError,
    InternalError,
    InvalidInputError,
    InvalidTableStateError,
    LanceNamespaceError,
    TableAlreadyExistsError,
    TableBranchAlreadyExistsError,
    TableBranchNotFoundError,
    TableColumnNotFoundError,
    TableIndexAlreadyExistsError,
    TableIndexNotFoundError,
    TableSchemaValidationError,
    TableTagAlreadyExistsError,
    TableTagNotFoundError,
    TableVersionNotFoundError,
    UnsupportedOperationError,
)

from . import tables, versions
from .identifiers import Path, describe
from .retries import Backoff
from .schema import CatalogColumn, catalog_columns

if TYPE_CHECKING:
    from lance import LanceDataset

    from .base import CatalogNamespace
    from .tables import TableEntry

# A catalog write that lost a race to a concurrent commit is retried on the entry as it is
# then (column syncs and register overwrites are idempotent), with jittered backoff, for up to
# this long: longer than a burst of commits keeps a table busy, bounded all the same.
CONFLICT_RETRY_SECONDS = 60.0
CONFLICT_BACKOFF = Backoff(base=0.01, cap=0.5)

T = TypeVar("T")

# Lance reports most failures as ValueError/OSError/RuntimeError with a message; these rules
# (first match wins) give each the spec's error class. The patterns are Lance's own wording.
_CONFLICT = re.compile(
    r"changed concurrently|already committed|commit conflict|retryable|concurrent", re.I
)
_RULES: tuple[tuple[re.Pattern[str], type[LanceNamespaceError]], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE | re.DOTALL), error)
    for pattern, error in (
        # Lance's refusals ("Not supported: ...", "... not implemented"): code 0, not 18
        (r"not supported: |not implemented", UnsupportedOperationError),
        (r"branch .*already exists", TableBranchAlreadyExistsError),
        (r"branch .*(not found|does not exist)", TableBranchNotFoundError),
        (r"tag .*already exists|tag .*exists already", TableTagAlreadyExistsError),
        (r"tag .*(not found|does not exist)", TableTagNotFoundError),
        (r"index .*already exists", TableIndexAlreadyExistsError),
        (r"index not found|index .*(not found|does not exist)", TableIndexNotFoundError),
        (r"version .*(not found|does not exist)|_versions/.*not found", TableVersionNotFoundError),
        (r"not found: .*\.manifest|checkout version", TableVersionNotFoundError),
        (r"dataset at path .* was not found", InvalidTableStateError),
        (r"dataset already exists", TableAlreadyExistsError),
        (
            r"fieldnotfound|no field named|column .*(does not exist|not found)"
            r"|does not exist in (the )?(dataset|schema)|key column .* does not exist",
            TableColumnNotFoundError,
        ),
        (
            r"different schema|fields did not match|schema mismatch|incompatible schema"
            r"|cannot cast",
            TableSchemaValidationError,
        ),
        (r"parse|parser|syntax|invalid|dimension|expected|mismatch", InvalidInputError),
    )
)


def _classify(message: str) -> type[LanceNamespaceError] | None:
    if _CONFLICT.search(message):
        return ConcurrentModificationError
    for pattern, error in _RULES:
        if pattern.search(message):
            return error
    return None


def _short(message: str) -> str:
    """Lance's first line, without its source locations and backtraces."""
    first = message.strip().splitlines()[0] if message.strip() else message
    first = re.sub(r",\s*/\S+\.rs:\d+:\d+", "", first)
    return first[:500]


@contextlib.contextmanager
def lance_errors(operation: str, target: str) -> Iterator[None]:
    """Run Lance calls, raising what fails as the spec's error class naming ``target``."""
    try:
        yield
    except LanceNamespaceError:
        raise
    except (ValueError, OSError, RuntimeError, KeyError, TypeError, pa.ArrowException) as error:
        message = _short(str(error) or type(error).__name__)
        kind = _classify(str(error))
        if kind is None:
            if isinstance(error, (ValueError, KeyError, TypeError, pa.ArrowInvalid)):
                kind = InvalidInputError
            elif isinstance(error, NotImplementedError):
                kind = UnsupportedOperationError
            else:
                kind = InternalError
        raise kind(f"Cannot {operation} {target}: {message}") from None


def read_ipc_stream(data: object, target: str) -> pa.Table:
    """The rows of an Arrow IPC stream body (the file format is accepted as well)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidInputError(
            f"Data for {target} must be Arrow IPC stream bytes, got {type(data).__name__}"
        )
    if not data:
        raise InvalidInputError(f"Data for {target} is empty: an Arrow IPC stream is required")
    buffer = pa.py_buffer(bytes(data))
    try:
        return ipc.open_stream(buffer).read_all()
    except pa.ArrowException as stream_error:
        try:
            return ipc.open_file(buffer).read_all()
        except pa.ArrowException:
            raise InvalidInputError(
                f"Data for {target} is not a valid Arrow IPC stream: {stream_error}"
            ) from None


def ipc_file_bytes(table: pa.Table) -> bytes:
    """Query results as the interface answers them: Arrow IPC file format."""
    sink = io.BytesIO()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


_JSON_TYPES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "bool": pa.bool_(),
    "boolean": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float16": pa.float16(),
    "float32": pa.float32(),
    "float": pa.float32(),
    "float64": pa.float64(),
    "double": pa.float64(),
    "utf8": pa.string(),
    "string": pa.string(),
    "large_utf8": pa.large_string(),
    "large_string": pa.large_string(),
    "binary": pa.binary(),
    "large_binary": pa.large_binary(),
    "date32": pa.date32(),
    "date64": pa.date64(),
}


def json_arrow_type(spec: Any, target: str) -> pa.DataType:
    """An Arrow type from the interface's JSON form (``{"type": "int32"}``, lists with
    ``fields``, fixed-size lists with ``length``), or a plain type name."""
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
        raise InvalidInputError(f"Invalid data type for {target}: {spec!r}")
    name = spec["type"].strip().lower()
    if name in _JSON_TYPES:
        return _JSON_TYPES[name]
    children = spec.get("fields") or []
    if name in ("list", "large_list", "fixed_size_list", "fixedsizelist"):
        if len(children) != 1 or not isinstance(children[0], dict):
            raise InvalidInputError(f"Data type {name} for {target} needs one child field")
        item = json_arrow_type(children[0].get("type"), target)
        if name == "list":
            return pa.list_(item)
        if name == "large_list":
            return pa.large_list(item)
        length = spec.get("length")
        if not isinstance(length, int) or length < 1:
            raise InvalidInputError(f"Data type {name} for {target} needs a length >= 1")
        return pa.list_(item, length)
    raise InvalidInputError(f"Unsupported data type {spec['type']!r} for {target}")


class TableDatasets:
    """Opening a table's dataset and keeping the catalog true after a change."""

    def _lance_table(self: CatalogNamespace, raw_id: object) -> tuple[Path, str, TableEntry]:
        path, name = self._table_path(raw_id)
        return path, name, self._require_lance_table(path, name)

    def _dataset(
        self: CatalogNamespace,
        path: Path,
        entry: TableEntry,
        version: int | str | None = None,
        branch: str | None = None,
    ) -> LanceDataset:
        """The table's dataset (at a version or branch when asked).

        Catalog-managed tables are opened through this namespace, so Lance finds the version
        the catalog names and commits every change through ``create_table_version``.
        """
        import lance

        target = describe((*path, entry.name))
        if self._managed_versioning(entry):
            if branch:
                raise UnsupportedOperationError(
                    f"Table {target} is catalog-managed: branches are not supported, as the "
                    "catalog records one line of versions (declare it managed_by=storage)"
                )
            if versions.current_version(entry.parameters) == 0:
                raise InvalidTableStateError(f"Table {target} is declared and holds no data yet")
            with lance_errors("open", f"table {target}"):
                dataset = lance.dataset(
                    namespace_client=self,
                    table_id=[*path, entry.name],
                    storage_options=self.storage_options or None,
                )
        else:
            location = tables.plain_location(entry.location) or ""
            if "://" not in location and not os.path.isdir(os.path.join(location, "_versions")):
                raise InvalidTableStateError(
                    f"Table {target} is declared and holds no data yet (nothing at {location!r})"
                )
            with lance_errors("open", f"table {target}"):
                dataset = lance.dataset(location, storage_options=self.storage_options or None)
        if version is None and branch is None:
            return dataset
        reference: Any = version if branch is None else (branch, version)
        with lance_errors("open", f"version {reference!r} of table {target}"):
            return dataset.checkout_version(reference)

    def _latest(self: CatalogNamespace, path: Path, name: str) -> LanceDataset:
        """The table's dataset as it is now, read again from the catalog after a change."""
        return self._dataset(path, self._require_lance_table(path, name))

    def _retry_conflicts(self: CatalogNamespace, target: str, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` (one conditional catalog write that reads the entry afresh) until it
        stops losing races to concurrent writes; ConcurrentModificationError only once
        :data:`CONFLICT_RETRY_SECONDS` have passed with every attempt refused."""
        deadline = time.monotonic() + CONFLICT_RETRY_SECONDS
        tries = 0
        while True:
            try:
                return attempt()
            except ConcurrentModificationError:
                if time.monotonic() > deadline:
                    raise ConcurrentModificationError(
                        f"{target} kept changing for {CONFLICT_RETRY_SECONDS:.0f} s: "
                        f"{tries + 1} conditional updates lost to concurrent commits"
                    ) from None
            time.sleep(CONFLICT_BACKOFF.delay(tries))
            tries += 1

    def _record_columns(
        self: CatalogNamespace,
        path: Path,
        name: str,
        schema: pa.Schema,
        before: TableEntry | None = None,
    ) -> list[CatalogColumn]:
        """Make the catalog's columns mirror ``schema`` after a change that may alter it.

        ``before`` is the entry read before the change: when its columns already match, no
        catalog call is made (appends, merges and most updates keep the schema). Otherwise
        only the columns change, conditionally on the entry as read just before (see
        :meth:`_catalog_set_columns`): a concurrent commit is never undone. A lost race is
        retried, with the schema of the table's latest version then, so the columns end up
        neither failed nor stale, whatever committed in between.
        """
        columns = catalog_columns(schema)
        if before is not None and before.columns == columns:
            return columns
        target = f"Table {describe((*path, name))}"
        lost_race = False

        def attempt() -> list[CatalogColumn]:
            nonlocal columns, lost_race
            entry = self._require_lance_table(path, name)
            if lost_race:
                latest = self._table_schema(path, entry)
                columns = catalog_columns(latest) if latest is not None else columns
            if entry.columns != columns:
                try:
                    self._catalog_set_columns(path, entry, columns)
                except ConcurrentModificationError:
                    lost_race = True
                    raise
            return columns

        return self._retry_conflicts(target, attempt)
