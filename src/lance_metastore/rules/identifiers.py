"""Identifiers: the list form and the ``$``-joined string form, and the naming rules.

A namespace or table is named by its path from the root, e.g. ``["sales", "orders"]`` or
``"sales$orders"``. Both forms are accepted everywhere; a list element that contains the
delimiter is split too, so ``["sales$orders"]`` means the same. Because the delimiter may
never appear inside a name, splitting is unambiguous.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from lance_namespace.errors import InvalidInputError

DELIMITER = "$"
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

Path = tuple[str, ...]


def split_identifier(value: object, delimiter: str = DELIMITER) -> Path:
    """Turn any accepted identifier form into a tuple of parts (not yet validated).

    ``None`` and ``[]`` are the root. A string is split on the delimiter; so is every element
    of a list.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split(delimiter)) if value else ()
    if not isinstance(value, (list, tuple)):
        raise InvalidInputError(
            f"Identifier must be a list of names or a {delimiter!r}-joined string, "
            f"got {type(value).__name__}"
        )
    parts: list[str] = []
    for element in value:
        if not isinstance(element, str):
            raise InvalidInputError(
                f"Identifier parts must be strings, got {type(element).__name__} in {value!r}"
            )
        parts.extend(element.split(delimiter))
    return tuple(parts)


def parse_identifier(text: str | None, delimiter: str = DELIMITER) -> Path:
    """An identifier as a person types it (command line, Spark path) to its parts.

    ``db$t``, ``db/t`` and ``cat/db$t`` all work: ``/`` separates too, because no catalog
    allows it inside a name; surrounding whitespace and leading or trailing ``/`` are ignored,
    and ``""`` or ``/`` is the root. Names are checked by the namespace, not here.
    """
    text = (text or "").strip().strip("/")
    if delimiter != "/":
        text = text.replace("/", delimiter)
    return split_identifier(text, delimiter)


def join_identifier(parts: Sequence[str], delimiter: str = DELIMITER) -> str:
    """The ``$``-joined form, used in messages and listings."""
    return delimiter.join(parts)


def describe(parts: Sequence[str]) -> str:
    """A quoted rendering of an identifier for error messages; the root has its own name."""
    return repr(join_identifier(parts)) if parts else "the root namespace"


@dataclass(frozen=True)
class NameRules:
    """What a catalog accepts as a database, catalog or table name.

    With ``lowercase`` set (Glue and Hive store names in lower case, so names are
    case-insensitive there) the canonical name has its ASCII letters lower-cased, and only
    those: full Unicode lower-casing turns some other letters into ASCII ones (KELVIN SIGN into
    "k"), and what a catalog does with non-ASCII capitals is not something to rely on (Hive
    refuses them; AWS documents Glue's lower-casing without saying which letters it folds). So
    a name with a letter outside ASCII that has a lower-case form (``"Ä"``, KELVIN SIGN) is
    refused, and every accepted name means one object whichever folding the catalog applies:
    ``"Sales"`` is ``"sales"``, ``"straße"`` stays as written, ``"STRASSE"`` is ``"strasse"``.
    ``pattern`` is matched against that canonical name. Access checks run on the same form
    (the REST server's grants and decisions).
    """

    max_length: int = 255
    pattern: re.Pattern[str] | None = None
    pattern_hint: str = ""
    lowercase: bool = True

    def normalize(self, name: str, what: str, full: Sequence[str]) -> str:
        where = f" in {describe(full)}" if len(full) > 1 else ""
        if name == "":
            raise InvalidInputError(f"Empty {what} name{where}")
        if name in (".", ".."):
            raise InvalidInputError(f"{what.capitalize()} name {name!r}{where} is not allowed")
        if any(unicodedata.category(ch).startswith("C") for ch in name):
            raise InvalidInputError(
                f"{what.capitalize()} name {name!r}{where} contains a control character"
            )
        if "/" in name or "\\" in name:
            raise InvalidInputError(
                f"{what.capitalize()} name {name!r}{where} may not contain '/' or '\\'"
            )
        if name != name.strip():
            raise InvalidInputError(
                f"{what.capitalize()} name {name!r}{where} has leading or trailing spaces"
            )
        if len(name) > self.max_length:
            raise InvalidInputError(
                f"{what.capitalize()} name {name[:40]!r}...{where} is longer than "
                f"{self.max_length} characters"
            )
        folded = name.translate(_ASCII_LOWER) if self.lowercase else name
        if self.lowercase and not folded.isascii() and folded.lower() != folded:
            raise InvalidInputError(
                f"{what.capitalize()} name {name!r}{where} has a capital letter outside ASCII, "
                "which catalogs fold differently: write it in lower case"
            )
        if self.pattern is not None and not self.pattern.fullmatch(folded):
            raise InvalidInputError(
                f"{what.capitalize()} name {name!r}{where} is not valid here"
                + (f": {self.pattern_hint}" if self.pattern_hint else "")
            )
        return folded
