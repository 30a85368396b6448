"""What an error body may tell a client: the one place the REST server sanitises messages.

Faults of the server or its catalog (code 17, code 18, anything unexpected) and any message
that carries internals (the metastore's SQL, Java exception text with host names, local file
paths from Lance's IO layer, stack frames) answer a generic message naming the operation,
the object and a reference; the full text goes to the server log under that reference, so an
operator can find it and a client learns nothing about the deployment.
"""

from __future__ import annotations

import logging
import re
import uuid

from lance_namespace.errors import ErrorCode, LanceNamespaceError

from .security import Scope, noted

logger = logging.getLogger("lance_metastore.rest")

_GENERIC_KIND: dict[int, str] = {
    ErrorCode.SERVICE_UNAVAILABLE: "The catalog is unavailable",
    ErrorCode.INTERNAL: "Internal error",
}

# Text that only the server's insides produce.
_INTERNALS = re.compile(
    r"""
    \b(?:INSERT\s+INTO|DELETE\s+FROM|SELECT\s+\S.*?\s+FROM|UPDATE\s+\S+\s+SET)\s  # SQL
    | \b(?:java|javax|jdk|sun|org|com)\.[\w$]+(?:\.[\w$]+)*\.[A-Z][\w$]*  # Java classes
    | \b\w+Exception\(message:  # Thrift exceptions as Hive renders them
    | \bat\s+[\w.$]+\([\w$]+\.java:\d+\)  # stack frames
    | LocalFileSystem | LanceError\(IO\) | \(os\ error\ \d+\)  # Lance's IO layer (local paths)
    """,
    re.VERBOSE,
)


def carries_internals(message: str) -> bool:
    """Whether an error message shows the server's internals."""
    return _INTERNALS.search(message) is not None


def public_message(error: BaseException, operation: str, scope: Scope) -> str:
    """The message an error body carries for ``error``; internals go to the log instead."""
    code = error.code if isinstance(error, LanceNamespaceError) else ErrorCode.INTERNAL
    message = str(error)
    expected = isinstance(error, LanceNamespaceError)
    if expected and code not in _GENERIC_KIND and not carries_internals(message):
        return message
    reference = uuid.uuid4().hex[:12]
    object_id = noted(scope, "object_id")
    target = f" of {object_id!r}" if object_id is not None else ""
    if expected:
        logger.warning(
            "%s%s failed (reference %s, code %d): %s", operation, target, reference, code, message
        )
    else:
        logger.error("%s%s failed (reference %s)", operation, target, reference, exc_info=error)
    kind = _GENERIC_KIND.get(int(code), "The request failed")
    return f"{kind} during {operation}{target}; the server log has details (ref {reference})"
