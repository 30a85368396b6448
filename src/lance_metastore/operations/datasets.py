"""The Lance side of the table operations, shared by every backend.

The data, schema, tag, branch and index operations of the interface are Lance operations on a
table's dataset; the catalog only says where the dataset is and, for ``managed_by=impl``
tables, arbitrates each commit. This module holds what those operations share:

- (opening a table's dataset the way its owner requires and keeping the catalog's columns true
  after a change are :class:`~lance_metastore.operations.core.CatalogCore` helpers);
- :func:`lance_errors`: Lance's exceptions as the spec's error classes, naming the table;
- Arrow IPC in (stream, as the interface sends data) and out (file, as it answers queries).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
from lance_namespace.errors import InvalidInputError, LanceNamespaceError

from ..rules.errors import classify_lance_error


def _short(message: str) -> str:
    """Lance's first line, without its source locations and backtraces."""
    first = message.strip().splitlines()[0] if message.strip() else message
    first = re.sub(r",\s*/\S+\.rs:\d+:\d+", "", first)
    return first[:500]


@contextlib.contextmanager
def lance_errors(operation: str, target: str, *, caller_input: bool = False) -> Iterator[None]:
    """Run Lance calls, raising what Lance raised as the spec's error class naming ``target``
    (see :func:`~lance_metastore.rules.errors.classify_lance_error`).

    Only the exceptions Lance raises are caught (its CommitConflictError, ValueError, OSError,
    RuntimeError, Arrow's errors); a TypeError or KeyError is a fault of ours and goes on to
    the operation's translation: 18 (REST 500) with its trace logged.

    ``caller_input``: the call's arguments are the caller's own (an index's column and type,
    a tag's name), and pylance refuses bad ones with a TypeError before Lance runs: 13."""
    try:
        yield
    except LanceNamespaceError:
        raise
    except TypeError as error:
        if not caller_input:
            raise
        said = "".join(str(part) for part in error.args)  # pylance splits its words in args
        raise InvalidInputError(f"Cannot {operation} {target}: {_short(said)}") from None
    except (ValueError, OSError, RuntimeError, pa.ArrowException) as error:
        message = _short(str(error) or type(error).__name__)
        kind = classify_lance_error(error)
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
