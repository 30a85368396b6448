"""Error handling shared by every backend.

Every public operation runs inside :func:`translate_errors`, so callers only ever see the
error classes of :mod:`lance_namespace.errors` (each carries the spec's numeric code), and
no message leaks a secret from the configuration.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from lance_namespace.errors import (
    ConcurrentModificationError,
    InternalError,
    InvalidInputError,
    InvalidTableStateError,
    LanceNamespaceError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    TableAlreadyExistsError,
    TableBranchAlreadyExistsError,
    TableBranchNotFoundError,
    TableColumnNotFoundError,
    TableIndexAlreadyExistsError,
    TableIndexNotFoundError,
    TableNotFoundError,
    TableSchemaValidationError,
    TableTagAlreadyExistsError,
    TableTagNotFoundError,
    TableVersionNotFoundError,
    TransactionNotFoundError,
    UnsupportedOperationError,
)

from .redaction import MIN_SCRUBBED_LENGTH, scrub, scrub_credential_fields

logger = logging.getLogger("lance_metastore")

NamespaceErrorT = TypeVar("NamespaceErrorT", bound=LanceNamespaceError)

# A backend's translator turns a client-library exception into a namespace error, or returns
# None when it does not recognise the exception (it then becomes an InternalError).
Translator = Callable[[BaseException, str], "LanceNamespaceError | None"]


# The words Lance's own DirectoryNamespace starts each of these errors with ("Table not found:
# a$x"). Lance's clients read errors by these words: lancedb turns an in-process namespace's
# error back into its own exception only when the text carries "Table not found" or "Namespace
# not empty" (lancedb/namespace.py), since Lance's bridge hands every Python error over as text.
LANCE_PHRASES: dict[type[LanceNamespaceError], str] = {
    NamespaceNotFoundError: "Namespace not found",
    NamespaceAlreadyExistsError: "Namespace already exists",
    NamespaceNotEmptyError: "Namespace not empty",
    TableNotFoundError: "Table not found",
    TableAlreadyExistsError: "Table already exists",
    TableIndexNotFoundError: "Table index not found",
    TableIndexAlreadyExistsError: "Table index already exists",
    TableTagNotFoundError: "Table tag not found",
    TableTagAlreadyExistsError: "Table tag already exists",
    TransactionNotFoundError: "Transaction not found",
    TableVersionNotFoundError: "Table version not found",
    TableColumnNotFoundError: "Table column not found",
    TableBranchNotFoundError: "Table branch not found",
    TableBranchAlreadyExistsError: "Table branch already exists",
}


def lance_error(kind: type[NamespaceErrorT], subject: str, detail: str = "") -> NamespaceErrorT:
    """``kind`` worded as Lance words it: its phrase, then the object (``'db$t'``, as
    :func:`~lance_metastore.rules.identifiers.describe` renders it), then ``detail`` if any."""
    message = f"{LANCE_PHRASES[kind]}: {subject}"
    return kind(f"{message} {detail}" if detail else message)


def with_lance_phrase(error: LanceNamespaceError) -> LanceNamespaceError:
    """``error``, its message prefixed with Lance's phrase for its class when it lacks it
    (a catalog's own "not found" text, say), so no error of ours escapes the rule."""
    phrase = LANCE_PHRASES.get(type(error))
    if phrase is None or str(error).startswith(phrase):
        return error
    return _rebuild(error, f"{phrase}: {error!s}")


def wire_message(code: int, message: str) -> str:
    """``message`` as a REST error body carries it: without the leading phrase of its code.

    Lance's REST client (pylance's, and lancedb's through it) puts the phrase before the body's
    message itself ("Table not found: " + message), so a body that kept it would reach the
    caller as "Table not found: Table not found: 'db$t'". In-process errors keep the phrase:
    lancedb reads it there (see :data:`LANCE_PHRASES`)."""
    for kind, phrase in LANCE_PHRASES.items():
        if int(kind.code) == int(code) and message.startswith(f"{phrase}: "):
            return message[len(phrase) + 2 :]
    return message


REFUSAL_PHRASE = "Not supported"


def is_worded_refusal(error: LanceNamespaceError, backend: str) -> bool:
    """Whether ``error`` is a refusal that already says what it refused and where."""
    message = str(error)
    return message.startswith(f"{REFUSAL_PHRASE}: ") and f" on {backend}" in message


def unsupported(operation: str, backend: str, reason: str = "") -> UnsupportedOperationError:
    """A refusal worded once, as Lance words its own ("Not supported: ..."): which operation,
    on which backend, and why."""
    message = f"{REFUSAL_PHRASE}: {operation} on {backend}"
    # Lance's own refusals already start with the words; "<operation> not implemented" stays
    # (lancedb looks for "rename_table not implemented")
    reason = reason.removeprefix(f"{REFUSAL_PHRASE}: ")
    if reason == operation:
        reason = ""
    return UnsupportedOperationError(f"{message}: {reason}" if reason else message)


# Lance's Python binding raises CommitConflictError for commit conflicts and hands every other
# Rust error over as ValueError, OSError or RuntimeError whose message starts with the error's
# kind, as the Rust variant displays itself ("Invalid user input: ...", "Namespace error: ...").
# Errors are mapped by that class and that leading kind, never by words found anywhere in the
# text ("retryable", "concurrent", "invalid" in a path or a value decide nothing).
LANCE_KINDS: dict[str, type[LanceNamespaceError]] = {
    # pylance raises these two kinds as plain OSError from some calls (drop_columns, ...)
    "Retryable commit conflict": ConcurrentModificationError,
    "Commit conflict": ConcurrentModificationError,
    # a commit that kept losing until its retries or its retry window ran out (Lance's
    # TooMuchWriteContention, and its commit loop's timeout): the caller may retry, 14 not 18
    "Too many concurrent writers": ConcurrentModificationError,
    "Failed to commit the transaction after": ConcurrentModificationError,
    "Invalid user input": InvalidInputError,
    "Not supported": UnsupportedOperationError,
    "Dataset already exists": TableAlreadyExistsError,
    # a tag or branch name Lance does not accept ("bad tag")
    "Ref is invalid": InvalidInputError,
}
# A namespace error Lance carries back ("Namespace error: <code's words>: ..."): the error
# code as Lance's namespace layer words it, or one of Lance's phrases (ours included).
NAMESPACE_WORDS: dict[str, type[LanceNamespaceError]] = {
    "Concurrent modification": ConcurrentModificationError,
    "Invalid input": InvalidInputError,
    "Unsupported": UnsupportedOperationError,
    "Not supported": UnsupportedOperationError,
    "Invalid table state": InvalidTableStateError,
    **{phrase: kind for kind, phrase in LANCE_PHRASES.items()},
}
# Which object an error of Lance's is about, where its kind alone does not say (a missing tag
# and a missing branch are both "Ref not found"): the object's name in Lance's wording.
_OBJECT_RULES: tuple[tuple[re.Pattern[str], type[LanceNamespaceError]], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE | re.DOTALL), error)
    for pattern, error in (
        (r"branch .*already exists", TableBranchAlreadyExistsError),
        (r"branch .*(not found|does not exist)", TableBranchNotFoundError),
        (r"tag .*already exists|tag .*exists already", TableTagAlreadyExistsError),
        (r"tag .*(not found|does not exist)", TableTagNotFoundError),
        (r"index .*already exists", TableIndexAlreadyExistsError),
        (r"index not found|index .*(not found|does not exist)", TableIndexNotFoundError),
        # before the version rules: "Column version does not exist" is about a column
        (
            r"fieldnotfound|no field named|column .*(does not exist|not found)"
            r"|does not exist in (the )?(dataset|schema)|key column .* does not exist",
            TableColumnNotFoundError,
        ),
        (r"version .*(not found|does not exist)|_versions/.*not found", TableVersionNotFoundError),
        (r"not found: .*\.manifest|checkout version", TableVersionNotFoundError),
        (r"dataset at path .* was not found", InvalidTableStateError),
        (
            r"different schema|fields did not match|schema mismatch|incompatible schema"
            r"|cannot cast",
            TableSchemaValidationError,
        ),
    )
)


def _leading_kind(
    message: str, kinds: dict[str, type[LanceNamespaceError]]
) -> type[LanceNamespaceError] | None:
    for words, kind in kinds.items():
        if any(message.startswith(f"{words}{end}") for end in ": ."):
            return kind
    return None


def classify_lance_error(error: BaseException) -> type[LanceNamespaceError]:
    """The spec's error class for an exception Lance raised: by its class, then by the kind
    its message starts with, then by the object it names; else 13 for a ValueError (Lance
    refused the input) and 18 for anything else."""
    from lance.commit import CommitConflictError

    if isinstance(error, CommitConflictError):
        return ConcurrentModificationError
    if isinstance(error, NotImplementedError):
        return UnsupportedOperationError
    message = str(error).strip().removeprefix("Wrapped error: ")
    carried = message.removeprefix("Namespace error: ")
    if carried != message:
        found = _leading_kind(carried, NAMESPACE_WORDS)
        if found is not None:
            return found
    for pattern, kind in _OBJECT_RULES:
        if pattern.search(message):
            return kind
    found = _leading_kind(message, LANCE_KINDS)
    if found is not None:
        return found
    import pyarrow as pa

    if isinstance(error, (ValueError, pa.ArrowInvalid)):
        return InvalidInputError
    return InternalError


# Every way Lance, its object stores and the OS say a dataset or file is not there.
_MISSING = re.compile(r"not found|does not exist|no such file", re.IGNORECASE)


def is_lance_missing(error: BaseException) -> bool:
    """Whether a Lance call failed because the dataset (or a file of it) does not exist."""
    return isinstance(error, FileNotFoundError) or _MISSING.search(str(error)) is not None


# Secret values known to this process; the records of the loggers below are scrubbed of them.
_KNOWN_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()

# The logger families whose records can carry a registered secret: ours, and the AWS SDK's
# (botocore's DEBUG records print signed request headers with the access key id and session
# token, the canonical request, and STS's response body with assumed-role credentials).
SCRUBBED_LOGGERS = ("lance_metastore", "botocore", "boto3", "s3transfer", "urllib3")


class _SecretScrubber(logging.Filter):
    """Replaces every registered secret, and every credential an AWS answer carries, in a
    record's message before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        with _SECRETS_LOCK:
            secrets = tuple(_KNOWN_SECRETS)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record stays as it is
            return True
        cleaned = scrub_credential_fields(scrub(message, secrets))
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


_SCRUBBER = _SecretScrubber()


def guard_library_logs() -> None:
    """Attach the scrubber to every logger of :data:`SCRUBBED_LOGGERS`' families that exists
    now, and to the handlers on them.

    A logger's filter sees only the records created on that very logger, not those its
    children propagate to it, so each child (``botocore.endpoint``, ``botocore.auth``,
    ``botocore.parsers``, ...) gets the filter itself: a record is scrubbed where it is made,
    before any handler anywhere (the root's ``basicConfig`` handler, one that
    ``boto3.set_stream_logger`` adds) formats it. Modules create their loggers on import, so
    this runs again whenever a secret is registered and whenever an AWS client is built
    (which imports the modules that log requests). Nothing else in the process is touched.
    """
    manager = logging.Logger.manager
    with _SECRETS_LOCK:
        names = set(SCRUBBED_LOGGERS) | {
            name
            for name in list(manager.loggerDict)
            if any(name.startswith(family + ".") for family in SCRUBBED_LOGGERS)
        }
    for name in sorted(names):
        library_logger = logging.getLogger(name)
        if _SCRUBBER not in library_logger.filters:
            library_logger.addFilter(_SCRUBBER)
        for handler in list(library_logger.handlers):
            if _SCRUBBER not in handler.filters:
                handler.addFilter(_SCRUBBER)


def register_secrets(values: Iterable[str]) -> None:
    """Keep these values out of every record of our loggers and the AWS SDK's, at every
    level (see :func:`guard_library_logs`)."""
    fresh = {value for value in values if value and len(value) >= MIN_SCRUBBED_LENGTH}
    if not fresh:
        return
    with _SECRETS_LOCK:
        _KNOWN_SECRETS.update(fresh)
    guard_library_logs()


def known_secrets() -> frozenset[str]:
    """The secret values registered so far (every namespace's configured secrets)."""
    with _SECRETS_LOCK:
        return frozenset(_KNOWN_SECRETS)


def _rebuild(error: LanceNamespaceError, message: str) -> LanceNamespaceError:
    rebuilt = type(error)(message)
    rebuilt.__cause__ = error.__cause__
    return rebuilt


@contextlib.contextmanager
def translate_errors(
    operation: str,
    target: str,
    translator: Translator,
    secrets: Iterable[str] = (),
    backend: str = "",
) -> Iterator[None]:
    """Run one public operation, re-raising any failure as a namespace error.

    ``operation`` and ``target`` name what was attempted on which object, so an unexpected
    error still tells the user where it happened. Every error leaves worded as Lance words it
    (:func:`with_lance_phrase`); a refusal (``NotImplementedError`` included) leaves as
    :class:`UnsupportedOperationError` naming the operation and ``backend``.
    """
    secrets = tuple(secrets)
    attempt = " ".join(part for part in (operation, target) if part)
    try:
        yield
    except LanceNamespaceError as error:
        finished = _finished(error, attempt, backend)
        cleaned = scrub(str(finished), secrets)
        if finished is error and cleaned == str(error):
            raise
        raise _rebuild(finished, cleaned) from None
    except NotImplementedError as error:
        refusal = unsupported(attempt, backend or "this catalog", str(error))
        raise _rebuild(refusal, scrub(str(refusal), secrets)) from None
    except Exception as error:
        translated = translator(error, attempt)
        if translated is None:
            # Our own fault (a TypeError, a KeyError, ...): 18, and its trace in the log.
            logger.error("unexpected error during %s", attempt, exc_info=True)
            translated = InternalError(
                f"Unexpected error during {attempt}: {type(error).__name__}: {error}"
            )
        translated = _finished(translated, attempt, backend)
        translated = _rebuild(translated, scrub(str(translated), secrets))
        raise translated from None


def _finished(error: LanceNamespaceError, attempt: str, backend: str) -> LanceNamespaceError:
    """``error`` as it leaves an operation: Lance's phrase first; a refusal that does not say
    which operation it refused on which backend says so."""
    if (
        isinstance(error, UnsupportedOperationError)
        and backend
        and not is_worded_refusal(error, backend)
    ):
        return _rebuild(error, str(unsupported(attempt, backend, str(error))))
    return with_lance_phrase(error)
