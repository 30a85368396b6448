"""The one rule for secrets: which properties are secret, how they are masked and scrubbed.

Everything that shows, logs or reports a property or a message (a namespace's ``repr`` and
errors, the log filter on our and the AWS SDK's loggers, the command line, the Spark data
source, the REST server's answers) asks here, so a secret hidden in one place is hidden in all
of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

REDACTED = "***"
STORAGE_PREFIX = "storage."
# ``credential_vendor.*`` properties (credentials.py) are judged by the name after the prefix:
# the prefix's own word "credential" does not make ``credential_vendor.enabled`` a secret.
VENDOR_PREFIX = "credential_vendor."

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
    """Secret when the backend declares the property so, or when its name (a ``storage.*`` or
    ``credential_vendor.*`` name without the prefix) looks like a credential."""
    if key in set(declared):
        return True
    for prefix in (STORAGE_PREFIX, VENDOR_PREFIX):
        if key.startswith(prefix):
            key = key[len(prefix) :]
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


# Credentials that arrive in an answer (STS's AssumeRole, for the namespace's own role or for a
# table's vended credentials) are logged by the AWS SDK at DEBUG before anyone could register
# them: they are recognised by the field that carries them, in STS's XML body and in the
# header and parameter dictionaries botocore prints.
_CREDENTIAL_FIELDS = "SecretAccessKey|SessionToken|X-Amz-Security-Token"
_CREDENTIAL_IN_XML = re.compile(rf"(<(?:{_CREDENTIAL_FIELDS})>)[^<]*(?=<)", re.IGNORECASE)
_CREDENTIAL_IN_DICT = re.compile(
    rf"""((['"])(?:{_CREDENTIAL_FIELDS})\2\s*:\s*b?(['"]))[^'"]*(?=\3)""", re.IGNORECASE
)


def scrub_credential_fields(text: str) -> str:
    """Mask the values of the credential fields of AWS answers and headers in ``text``."""
    text = _CREDENTIAL_IN_XML.sub(rf"\g<1>{REDACTED}", text)
    return _CREDENTIAL_IN_DICT.sub(rf"\g<1>{REDACTED}", text)


# The exemption the access-control issue (#26) plugs into: storage options a namespace vended
# for one caller and one table carry their expiry under this key (as DirectoryNamespace's
# credential vendors mark theirs). Such short-lived, scoped credentials may leave a server; the
# credentials it was configured with never do, vended or not.
VENDED_CREDENTIALS_MARKER = "expires_at_millis"
STORAGE_OPTIONS_FIELD = "storage_options"


def shareable_storage_options(
    options: Mapping[str, object], configured_secrets: Iterable[str]
) -> dict[str, object]:
    """The storage options a server may hand its clients.

    Every option the secret rule calls secret is dropped, unless the options were vended
    (they carry :data:`VENDED_CREDENTIALS_MARKER`); even then no value the server was
    configured with passes. Endpoint, region, ``allow_http`` and the like pass as they are.
    """
    configured = frozenset(configured_secrets)
    vended = VENDED_CREDENTIALS_MARKER in options
    return {
        name: value
        for name, value in options.items()
        if str(value) not in configured and (vended or not looks_secret(name))
    }


def shareable(payload: object, configured_secrets: Iterable[str]) -> object:
    """A server's answer (JSON-shaped) without the secrets the server was configured with:
    ``storage_options`` maps pass through :func:`shareable_storage_options`; anywhere else a
    map entry holding a configured secret is dropped and a string holding one is scrubbed."""
    configured = frozenset(configured_secrets)
    if isinstance(payload, Mapping):
        kept: dict[object, object] = {}
        for key, value in payload.items():
            if isinstance(value, str) and value in configured:
                continue
            if key == STORAGE_OPTIONS_FIELD and isinstance(value, Mapping):
                kept[key] = shareable_storage_options(value, configured)
            else:
                kept[key] = shareable(value, configured)
        return kept
    if isinstance(payload, list):
        return [shareable(item, configured) for item in payload]
    if isinstance(payload, str):
        return scrub(payload, configured)
    return payload
