"""Arrow IPC request bodies decoded within a budget of decoded bytes.

The body limit counts wire bytes, but a compressed Arrow IPC stream can expand a
thousandfold and more when decoded (a 33 KB zstd stream of zeros decodes to 1 GiB). Every
IPC message declares what its buffers take once decoded: a compressed buffer starts with its
uncompressed length, an uncompressed one is a slice of the body itself. So the budget is
checked from the messages' metadata alone, before a single buffer is decompressed, and a
body over it is refused with nothing decoded.

The metadata is a flatbuffer (Arrow's ``Message.fbs``); pyarrow does not expose its buffer
list, so :func:`declared_decoded_bytes` reads the few fields it needs directly.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
from lance_namespace.errors import InvalidInputError

DECODED_LIMIT_FACTOR = 4  # the default budget: this many times the body limit

# Message.fbs: the MessageHeader union's members that carry buffers.
_DICTIONARY_BATCH = 2
_RECORD_BATCH = 3
# Field slots (vtable indexes) of the tables read here.
_MESSAGE_HEADER_TYPE, _MESSAGE_HEADER = 1, 2
_DICTIONARY_DATA = 1
_BATCH_BUFFERS, _BATCH_COMPRESSION = 2, 3
_BUFFER_STRUCT = struct.Struct("<qq")  # Buffer {offset: long, length: long}
_NOT_COMPRESSED = -1  # a compressed body's buffer stored as is


class DecodedBodyTooLarge(InvalidInputError):
    """A data body whose decoded size exceeds the server's budget (413, code 13)."""


class _FlatBuffer:
    """Just enough of the flatbuffer format to read tables, scalars and vectors."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def _unpack(self, fmt: str, position: int) -> Any:
        return struct.unpack_from(fmt, self.data, position)[0]

    def root(self) -> int:
        return int(self._unpack("<I", 0))

    def field(self, table: int, slot: int) -> int | None:
        """The position of a table's field, or None when the field is absent."""
        vtable = table - self._unpack("<i", table)
        vtable_size = self._unpack("<H", vtable)
        entry = 4 + 2 * slot
        if entry >= vtable_size:
            return None
        offset = self._unpack("<H", vtable + entry)
        return table + offset if offset else None

    def table(self, table: int, slot: int) -> int | None:
        position = self.field(table, slot)
        return None if position is None else position + self._unpack("<I", position)

    def ubyte(self, table: int, slot: int) -> int:
        position = self.field(table, slot)
        return 0 if position is None else int(self._unpack("<B", position))

    def structs(self, table: int, slot: int, layout: struct.Struct) -> list[tuple[Any, ...]]:
        vector = self.table(table, slot)
        if vector is None:
            return []
        count = self._unpack("<I", vector)
        return [layout.unpack_from(self.data, vector + 4 + i * layout.size) for i in range(count)]


def declared_decoded_bytes(message: ipc.Message) -> int:
    """What a message's buffers take once decoded, from its metadata (nothing decompressed)."""
    metadata = _FlatBuffer(message.metadata.to_pybytes())
    root = metadata.root()
    header_type = metadata.ubyte(root, _MESSAGE_HEADER_TYPE)
    if header_type not in (_RECORD_BATCH, _DICTIONARY_BATCH):
        return 0
    batch = metadata.table(root, _MESSAGE_HEADER)
    if batch is not None and header_type == _DICTIONARY_BATCH:
        batch = metadata.table(batch, _DICTIONARY_DATA)
    if batch is None:
        return 0
    compressed = metadata.field(batch, _BATCH_COMPRESSION) is not None
    body = message.body
    assert body is not None  # a message with buffers has a body
    total = 0
    for offset, length in metadata.structs(batch, _BATCH_BUFFERS, _BUFFER_STRUCT):
        if offset < 0 or length < 0 or offset + length > body.size:
            raise ValueError("a buffer lies outside the message body")
        if not compressed or length == 0:
            total += length
            continue
        if length < 8:
            raise ValueError("a compressed buffer is shorter than its length prefix")
        (uncompressed,) = struct.unpack("<q", body.slice(offset, 8).to_pybytes())
        if uncompressed == _NOT_COMPRESSED:
            total += length - 8
        elif uncompressed < 0:
            raise ValueError("a compressed buffer declares a negative length")
        else:
            total += uncompressed
    return total


def declared_size(body: pa.Buffer) -> int:
    """What the stream's messages declare they decode to, reading every message's metadata and
    checking that its body is all there (nothing decompressed). A stream cut short or with
    malformed metadata is invalid input (400, code 13), not a fault of the server."""
    reader = ipc.MessageReader.open_stream(body)
    total = 0
    while True:
        try:
            message = reader.read_next_message()
        except StopIteration:
            return total
        except (pa.ArrowException, OSError) as error:  # a cut stream: OSError
            raise _invalid(error) from None
        try:
            total += declared_decoded_bytes(message)
        except (ValueError, struct.error, IndexError) as error:
            raise _invalid(error) from None


def _invalid(error: Exception) -> InvalidInputError:
    return InvalidInputError(f"The request body is not a valid Arrow IPC stream: {error}")


def check_decoded_size(body: pa.Buffer, max_decoded_bytes: int) -> None:
    """Refuse a stream whose messages would decode to more than ``max_decoded_bytes``."""
    if declared_size(body) > max_decoded_bytes:
        raise _too_large(max_decoded_bytes)


def _too_large(max_decoded_bytes: int) -> DecodedBodyTooLarge:
    return DecodedBodyTooLarge(
        f"The request body decodes to more than the server's limit of {max_decoded_bytes} bytes"
    )


def arrow_body(data: bytes, max_decoded_bytes: int, *, lazy: bool) -> pa.RecordBatchReader | bytes:
    """A data body ready for the namespace, decoded within ``max_decoded_bytes``.

    The stream's structure is checked now, whatever ``lazy`` says: a body cut short or with
    malformed messages is refused (400, code 13) before the namespace sees it. ``lazy``
    (namespaces of this project, which read rows only after checking the target): a reader
    that refuses a stream over the budget when first read, raising
    :class:`DecodedBodyTooLarge` with nothing decoded, then decodes batch by batch; a batch
    that fails to decode is invalid input too. Otherwise (a namespace that takes bytes) the
    size is checked now and the bytes are passed on. An empty body is passed on for the
    namespace to refuse in its own words.
    """
    if not data:
        return data
    buffer = pa.py_buffer(data)
    try:
        stream = ipc.open_stream(buffer)  # reads the schema message only
    except (pa.ArrowException, OSError) as error:  # a cut stream: OSError
        raise _invalid(error) from None
    declared = declared_size(buffer)
    if not lazy:
        if declared > max_decoded_bytes:
            raise _too_large(max_decoded_bytes)
        return data

    def batches() -> Iterator[pa.RecordBatch]:
        if declared > max_decoded_bytes:
            raise _too_large(max_decoded_bytes)
        while True:
            try:
                batch = stream.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowException, OSError) as error:  # a cut stream: OSError
                raise _invalid(error) from None
            yield batch

    return pa.RecordBatchReader.from_batches(stream.schema, batches())
