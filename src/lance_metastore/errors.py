"""Error handling shared by every backend.

Every public operation runs inside :func:`translate_errors`, so callers only ever see the
error classes of :mod:`lance_namespace.errors` (each carries the spec's numeric code), and
no message leaks a secret from the configuration.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator

from lance_namespace.errors import (
    InternalError,
    InvalidInputError,
    LanceNamespaceError,
)

from .redaction import MIN_SCRUBBED_LENGTH, scrub

logger = logging.getLogger("lance_metastore")

# A backend's translator turns a client-library exception into a namespace error, or returns
# None when it does not recognise the exception (it then becomes an InternalError).
Translator = Callable[[BaseException, str], "LanceNamespaceError | None"]


# Secret values known to this process; every log record is scrubbed of them (see below).
_KNOWN_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()
_FACTORY_INSTALLED = False


def register_secrets(values: Iterable[str]) -> None:
    """Keep these values out of every log record of the process, whichever library logs it.

    botocore's DEBUG logs carry access key ids, session tokens, external ids and assumed-role
    credentials; no logger-level filter reaches all of its child loggers, so the record factory
    itself redacts. Costs nothing until a secret is registered.
    """
    global _FACTORY_INSTALLED
    fresh = {value for value in values if value and len(value) >= MIN_SCRUBBED_LENGTH}
    if not fresh:
        return
    with _SECRETS_LOCK:
        _KNOWN_SECRETS.update(fresh)
        if _FACTORY_INSTALLED:
            return
        previous = logging.getLogRecordFactory()

        def redacting_factory(*args: object, **kwargs: object) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            try:
                message = record.getMessage()
            except Exception:  # a malformed record stays as it is
                return record
            cleaned = scrub(message, tuple(_KNOWN_SECRETS))
            if cleaned != message:
                record.msg, record.args = cleaned, ()
            return record

        logging.setLogRecordFactory(redacting_factory)
        _FACTORY_INSTALLED = True


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
) -> Iterator[None]:
    """Run one public operation, re-raising any failure as a namespace error.

    ``operation`` and ``target`` name what was attempted on which object, so an unexpected
    error still tells the user where it happened.
    """
    secrets = tuple(secrets)
    try:
        yield
    except LanceNamespaceError as error:
        message = str(error)
        cleaned = scrub(message, secrets)
        if cleaned != message:
            raise _rebuild(error, cleaned) from None
        raise
    except Exception as error:
        translated = translator(error, f"{operation} {target}")
        if translated is None:
            logger.debug("unexpected error during %s %s", operation, target, exc_info=True)
            translated = InternalError(
                f"Unexpected error during {operation} {target}: {type(error).__name__}: {error}"
            )
        translated = _rebuild(translated, scrub(str(translated), secrets))
        raise translated from None


def no_translation(error: BaseException, context: str) -> LanceNamespaceError | None:
    """Translator for code paths that only raise namespace errors or bugs."""
    if isinstance(error, (ValueError, TypeError)):
        return InvalidInputError(f"Invalid input for {context}: {error}")
    return None
