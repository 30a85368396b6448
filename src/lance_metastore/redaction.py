"""The one rule for secrets: which properties are secret, how they are masked and scrubbed.

Everything that shows, logs or reports a property or a message (a namespace's ``repr`` and
errors, the log record factory, the command line, the Spark data source) asks here, so a
secret hidden in one place is hidden in all of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

REDACTED = "***"
STORAGE_PREFIX = "storage."

# Shortest value scrubbed from text: shorter ones would mangle ordinary words.
MIN_SCRUBBED_LENGTH = 4

# An HTTP Authorization header carries a bearer token or a password.
_SECRET_WORDS = (
    "secret",
    "password",
    "token",
    "credential",
    "private",
    "sas",
    "key_id",
    "key",
    "authorization",
)
# Names that contain a secret word but hold no secret: a keytab property is the file's path
# (its contents, the secret, never reach a message).
_PUBLIC_SUFFIXES = ("region", "endpoint", "allow_http", "bucket", "keytab")


def looks_secret(name: str) -> bool:
    """Whether a free-form option name (a storage option, say) names a credential."""
    lowered = name.lower()
    if lowered.endswith(_PUBLIC_SUFFIXES):
        return False
    return any(word in lowered for word in _SECRET_WORDS)


def secret_name_pattern() -> str:
    """:func:`looks_secret` as one case-insensitive regular expression (Java's and Python's
    syntax alike), for tools that take a pattern rather than a function, such as Spark's
    ``spark.redaction.regex``. It matches a name whole, so a dotted setting name is judged by
    its last part's ending (``...aws_region`` is public) like any other name."""
    public = "|".join(re.escape(suffix) for suffix in _PUBLIC_SUFFIXES)
    secret = "|".join(re.escape(word) for word in _SECRET_WORDS)
    return f"(?i)^(?!.*(?:{public})$).*(?:{secret})"


def is_secret(key: str, declared: Iterable[str] = ()) -> bool:
    """Secret when the backend declares the property so, or when its name (a ``storage.*``
    option's name without the prefix) looks like a credential."""
    if key in set(declared):
        return True
    if key.startswith(STORAGE_PREFIX):
        key = key[len(STORAGE_PREFIX) :]
    return looks_secret(key)


def masked(properties: Mapping[str, object] | None, declared: Iterable[str] = ()) -> dict[str, str]:
    """The properties, sorted, with every secret value replaced by :data:`REDACTED`."""
    declared = frozenset(declared)
    return {
        key: REDACTED if is_secret(key, declared) else str(value)
        for key, value in sorted((properties or {}).items())
    }


def secret_values(properties: Mapping[str, object], declared: Iterable[str] = ()) -> list[str]:
    """The values of the secret properties, to scrub from anything printed."""
    declared = frozenset(declared)
    return [str(v) for k, v in properties.items() if v and is_secret(k, declared)]


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace every secret value that occurs in ``text``."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SCRUBBED_LENGTH and secret in text:
            text = text.replace(secret, REDACTED)
    return text
