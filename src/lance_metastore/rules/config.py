"""Configuration: string properties in, typed settings out, secrets kept out of sight.

Each backend declares its properties once as :class:`Property` objects; :func:`parse_properties`
checks the whole set (unknown keys and malformed values are InvalidInputError at construction,
naming the property) and knows which values are secrets, so ``repr`` and error messages can
leave them out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any

from lance_namespace.errors import InvalidInputError

from .locations import DEFAULT_SCHEMES, Location, parse_prefixes, parse_schemes
from .redaction import REDACTED, STORAGE_PREFIX, masked, secret_values

# Lance's S3 storage options (object_store's key names, each with the aliases object_store
# accepts, the first present wins), by what they mean. Written once: every reader of a
# table's storage options outside Lance (the manifest finalizer's pyarrow filesystem) looks
# names up here.
S3_OPTION_NAMES: dict[str, tuple[str, ...]] = {
    "access_key_id": ("aws_access_key_id", "access_key_id"),
    "secret_access_key": ("aws_secret_access_key", "secret_access_key"),
    "session_token": ("aws_session_token", "session_token", "token"),
    "region": ("aws_region", "region"),
    "endpoint": ("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url"),
    "allow_http": ("allow_http", "aws_allow_http"),
    "virtual_hosted_style": ("aws_virtual_hosted_style_request", "virtual_hosted_style_request"),
}

_TRUE_WORDS = frozenset({"true", "1", "yes"})


def s3_option(options: Mapping[str, str], meaning: str) -> str | None:
    """The value of the S3 storage option that means ``meaning`` (a key of
    :data:`S3_OPTION_NAMES`), whichever of its names (any case) ``options`` uses."""
    lowered = {key.lower(): value for key, value in options.items()}
    for name in S3_OPTION_NAMES[meaning]:
        if lowered.get(name):
            return lowered[name]
    return None


def s3_flag(options: Mapping[str, str], meaning: str) -> bool:
    """Whether the boolean S3 storage option ``meaning`` is set true."""
    return (s3_option(options, meaning) or "").strip().lower() in _TRUE_WORDS


@dataclass(frozen=True)
class Property:
    """One configuration property: its name, how to parse it, its default, whether secret."""

    name: str
    doc: str
    parse: Callable[[str], Any] = str
    default: Any = None
    secret: bool = False


def non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value.strip()


def positive_int(value: str) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"must be a whole number, got {value!r}") from None
    if number <= 0:
        raise ValueError(f"must be greater than 0, got {number}")
    return number


# The longest wait a property may ask for (they are all seconds): sockets refuse timeouts from
# about 9.2e9 s on, and every call would then fail.
MAX_SECONDS = 1e9


def positive_float(value: str) -> float:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise ValueError(f"must be a number, got {value!r}") from None
    if not 0 < number <= MAX_SECONDS:  # also refuses nan and inf
        raise ValueError(f"must be greater than 0 and at most {MAX_SECONDS:g}, got {number}")
    return number


def boolean(value: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"must be true or false, got {value!r}")


def one_of(*choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        text = str(value).strip().lower()
        if text not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}, got {value!r}")
        return text

    return parse


def absolute_root(value: str) -> str:
    """A storage root: a URI (``s3://...``) is kept, a local path is made absolute."""
    value = non_empty(value)
    if "://" not in value:
        value = os.path.abspath(os.path.expanduser(value))
    try:
        return str(Location.parse(value, None, "root"))
    except InvalidInputError as error:
        raise ValueError(str(error)) from None


ROOT = Property(
    "root",
    "Storage root under which tables get their default location",
    absolute_root,
    default=None,
)


MANAGED_BY = Property(
    "managed_by",
    "Who arbitrates commits of new tables: 'storage' (Lance) or 'impl' (the catalog)",
    one_of("storage", "impl"),
    default="storage",
)


@dataclass(frozen=True)
class Settings:
    """Parsed configuration: typed values, ``storage.*`` options and the original strings."""

    values: Mapping[str, Any]
    storage_options: Mapping[str, str]
    raw: Mapping[str, str]
    secret_names: frozenset[str]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def secrets(self) -> list[str]:
        """Every secret value, including secret-looking storage options."""
        return secret_values(self.raw, self.secret_names)

    def public_view(self) -> dict[str, str]:
        """The properties with every secret replaced, for repr and logs."""
        return masked(self.raw, self.secret_names)


def parse_properties(
    owner: str,
    properties: Mapping[str, Any],
    declared: Iterable[Property],
) -> Settings:
    """Check and parse ``properties`` against the declared ones.

    Raises InvalidInputError naming the property for an unknown key or a malformed value.
    """
    by_name = {prop.name: prop for prop in declared}
    values: dict[str, Any] = {name: prop.default for name, prop in by_name.items()}
    storage: dict[str, str] = {}
    raw: dict[str, str] = {}
    for key, value in properties.items():
        if not isinstance(key, str):
            raise InvalidInputError(f"{owner}: property names must be strings, got {key!r}")
        if value is None:
            continue
        raw[key] = value if isinstance(value, str) else str(value)
        if key.startswith(STORAGE_PREFIX):
            option = key[len(STORAGE_PREFIX) :]
            if not option:
                raise InvalidInputError(f"{owner}: property {key!r} names no storage option")
            storage[option] = raw[key]
            continue
        prop = by_name.get(key)
        if prop is None:
            hint = get_close_matches(key, list(by_name), n=1)
            suggestion = f"; did you mean {hint[0]!r}?" if hint else ""
            raise InvalidInputError(f"{owner}: unknown property {key!r}{suggestion}")
        try:
            values[key] = prop.parse(raw[key])
        except ValueError as error:
            shown = REDACTED if prop.secret else repr(raw[key])
            raise InvalidInputError(
                f"{owner}: invalid value {shown} for property {key!r}: {error}"
            ) from None
    secret_names = frozenset(name for name, prop in by_name.items() if prop.secret)
    return Settings(values, storage, raw, secret_names)


CONFINE_LOCATIONS = Property(
    "confine_locations",
    "Refuse a location a caller sets outside root, the catalog's own locations and "
    "allowed_locations (lance-metastore serve always does)",
    boolean,
    default=False,
)

ALLOWED_LOCATIONS = Property(
    "allowed_locations",
    "Comma list of absolute prefixes where callers may also set locations when confined",
    parse_prefixes,
    default=(),
)

ALLOWED_SCHEMES = Property(
    "allowed_schemes",
    "Comma list of the location schemes allowed when confined ('file' for local paths)",
    parse_schemes,
    default=frozenset(DEFAULT_SCHEMES),
)

SHARED_LOCATIONS = Property(
    "shared_locations",
    "Allow a table entry at a location that another Lance table entry holds or overlaps",
    boolean,
    default=False,
)

# Every backend takes these: where tables may live (see locations.py).
LOCATION_PROPERTIES: tuple[Property, ...] = (
    ROOT,
    CONFINE_LOCATIONS,
    ALLOWED_LOCATIONS,
    ALLOWED_SCHEMES,
    SHARED_LOCATIONS,
)
