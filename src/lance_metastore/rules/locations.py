"""Where tables live: one :class:`Location` value, read as Lance reads it, and who owns it.

A location is parsed once, by :meth:`Location.parse`, into the form Lance's object store opens
(scheme, bucket or host, path segments), and every rule acts on that value, never on caller
text: confinement and ownership (:class:`LocationPolicy`), overlap, drops, credential vending
and the IAM session policy (``credentials.py``). The canonical text (``str(location)``) is what
the catalog stores.

How Lance reads a URL (lance-io's ``ObjectStore::from_uri_and_params``): the WHATWG URL parser
(Rust ``url``) lower-cases the scheme, drops ``?query`` and ``#fragment``, resolves ``.``/``..``
segments, including their percent-encoded forms ``%2e``/``%2E``, and keeps an opaque bucket as
written; then ``object_store``'s ``Path::from_url_path`` percent-decodes the path, so ``%2F``
becomes a segment separator and ``%70`` a ``p``. Each of those is a second meaning of the same
text. Rather than imitate them, the parser refuses every text whose meaning could differ
between the caller, Lance, S3 and IAM (13, naming the character or part):

- ``?`` and ``#`` (query, fragment; ``?`` is also an IAM wildcard), ``%`` (any percent
  encoding: ``%2e%2e``, ``%2F``, ``%25``), ``*`` and ``${`` (IAM wildcard and policy
  variable), ``\\`` (a separator in ``file:`` URLs), control characters, whitespace at
  either end of the text or of a segment (Lance's URL reader trims the text);
- dot segments ``.`` and ``..`` anywhere, relative locations included;
- in object-store URLs: empty segments (``a//b`` is another S3 key; Lance refuses it), user
  info (``user@bucket``), and a bucket or host that is not lower case (S3 bucket names are
  lower case; a mixed-case one reaches the same bucket in some addressing styles only).

``s3a``/``s3n`` name the same store as ``s3`` and are stored as ``s3``. Local paths (plain or
``file:``) are one form, ``/a/b``: ``file:/x``, ``file:///x``, ``file://localhost/x`` and
``/x//`` are all ``/x``. A relative location resolves against the namespace's ``root``;
without one it is refused (never the process's working directory).

Ownership (when confined, always through ``lance-metastore serve``): a table a caller places
lies strictly below its namespace's own directory, or below an ``allowed_locations`` prefix an
administrator configured; a namespace's own directory is exactly ``<root>/<namespace>`` or one
segment below an allowed prefix apart from the root, so namespace directories never nest.
Prefixes compare on whole segments (``/lake/a`` holds ``/lake/a/t`` but not ``/lake/ab``);
local values keep the caller's (and the configured root's) spelling, lexically normalized,
and every comparison (:meth:`Location.is_under`, :meth:`Location.same`, claims) resolves
their symbolic links, so a link cannot make two texts of one directory look apart while
answers name paths clients elsewhere can open. This
module imports nothing from the package: it is a leaf every other module may use.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from lance_namespace.errors import InvalidInputError

# The schemes a confined namespace accepts unless ``allowed_schemes`` says otherwise.
DEFAULT_SCHEMES: tuple[str, ...] = ("file", "s3", "gs", "az", "hdfs")

# Schemes naming the same store: one value (``s3a://b/x`` is ``s3://b/x``).
_SAME_STORE = {"s3a": "s3", "s3n": "s3"}

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$", re.DOTALL)

# Text refused anywhere in a location, and why (the first found is named).
_REFUSED = (
    ("?", "a query ('?'): Lance drops it, IAM reads it as a wildcard"),
    ("#", "a fragment ('#'): Lance drops it"),
    ("%", "a percent encoding ('%'): Lance decodes it ('%2F' is '/', '%2e%2e' is '..')"),
    ("*", "a '*': IAM reads it as a wildcard in the credentials' session policy"),
    ("${", "'${': IAM reads it as a policy variable"),
    ("\\", "a backslash: a path separator in file URLs"),
)

# S3's bucket naming rule (3-63 lower-case letters, digits, dots and hyphens).
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
# Any other store's bucket, container or host (with an optional port).
_AUTHORITY = re.compile(r"[a-z0-9][a-z0-9._-]*(:[0-9]{1,5})?")

# The key of a drop's answer (its properties) saying why the table's data was kept.
DATA_KEPT_KEY = "data_kept"

# The deepest location a caller may set: a claim holds one file per ancestor (rules/claims.py),
# so depth bounds what one request may hold open and leave behind.
MAX_SEGMENTS = 64
# The server's claim store under the root (rules/claims.py): no table and no namespace
# directory may lie in it, confined or not. (Only the store: the local metastore's own data
# lives beside it, in <cwd>/.lance-metastore/hms.)
CLAIM_STORE = (".lance-metastore", "claims")
RESERVED_RULE = f"<root>/{'/'.join(CLAIM_STORE)} is the server's claim store"
CONFINEMENT_RULE = (
    "a table's location must lie below its namespace's own directory or an allowed_locations prefix"
)
NAMESPACE_RULE = (
    "a namespace's location must be exactly its default directory <root>/<namespace> (Hive "
    "without a root: <warehouse>/<database>.db), or one segment below an allowed_locations "
    "prefix apart from the root (namespace directories never nest)"
)


@dataclass(frozen=True, order=True)
class Location:
    """One storage location as Lance opens it: ``scheme`` (``file`` for local paths, ``s3``
    for s3/s3a/s3n), ``authority`` (bucket or host; empty for local paths) and the decoded
    path ``segments`` (never empty, ``.`` or ``..``)."""

    scheme: str
    authority: str
    segments: tuple[str, ...]

    @classmethod
    def parse(cls, text: object, root: Location | str | None, what: str) -> Location:
        """The location ``text`` names; relative ones resolve against ``root``. 13 for text
        whose meaning could differ between the caller and Lance (see the module)."""
        text = check_text(text, what)
        match = _SCHEME.match(text)
        if match is None:
            if text.startswith("/"):
                return cls("file", "", _segments(text, text, what, local=True))
            if root is None:
                raise InvalidInputError(
                    f"{what}: location {text!r} is relative and the namespace has no root to "
                    "resolve it against: give an absolute location or configure the root property"
                )
            base = root if isinstance(root, Location) else cls.parse(root, None, "root")
            return base.child(*_segments(text, text, what, local=base.local))
        scheme, rest = match.group(1).lower(), match.group(2)
        if scheme == "file":
            try:
                path = _file_path(rest)
            except ValueError as error:
                raise InvalidInputError(f"{what}: location {text!r} {error}") from None
            return cls("file", "", _segments(path, text, what, local=True))
        if not rest.startswith("//"):
            raise InvalidInputError(
                f"{what}: location {text!r} is neither an absolute path nor a URI "
                "(scheme://bucket-or-host/path)"
            )
        authority, _, path = rest[2:].partition("/")
        scheme = _SAME_STORE.get(scheme, scheme)
        _check_authority(scheme, authority, text, what)
        return cls(scheme, authority, _segments(path, text, what, local=False))

    @property
    def local(self) -> bool:
        return self.scheme == "file"

    @property
    def key(self) -> str:
        """The path inside the store: the object key prefix (``a/b``), ``/a/b`` locally."""
        path = "/".join(self.segments)
        return "/" + path if self.local else path

    def __str__(self) -> str:
        if self.local:
            return self.key
        return f"{self.scheme}://{self.authority}" + (f"/{self.key}" if self.segments else "")

    def child(self, *names: str) -> Location:
        """This location with child segments appended (each checked as a caller's would be)."""
        extra: list[str] = []
        for name in names:
            text = check_text(name, f"location {self}: child {name!r}")
            extra.extend(_segments(text, text, "location", local=self.local))
        return Location(self.scheme, self.authority, (*self.segments, *extra))

    def real(self) -> Location:
        """Local paths through their symbolic links: the form every check compares
        (:meth:`is_under`, :meth:`overlaps`, :meth:`same`, ownership, claims), so a link
        cannot make two texts of one directory look apart. Values themselves stay in the
        caller's (and the configured root's) spelling, lexically normalized: that is what
        the catalog stores and answers, a path clients on other hosts can open."""
        if not self.local:
            return self
        real = os.path.realpath(self.key)
        return Location("file", "", tuple(p for p in real.split("/") if p))

    def same(self, other: Location) -> bool:
        """Whether the two name one place (local paths compared through their links)."""
        return self.real() == other.real()

    def is_under(self, prefix: Location, *, strictly: bool = False) -> bool:
        """Whether this is ``prefix`` or lies below it, on whole segments (local paths
        compared through their links)."""
        if self.local and prefix.local:
            return self.real()._is_under(prefix.real(), strictly)
        return self._is_under(prefix, strictly)

    def _is_under(self, prefix: Location, strictly: bool) -> bool:
        length = len(prefix.segments)
        return (
            (self.scheme, self.authority) == (prefix.scheme, prefix.authority)
            and self.segments[:length] == prefix.segments
            and (not strictly or len(self.segments) > length)
        )

    def overlaps(self, other: Location) -> bool:
        """Whether one of the two holds the other (deleting one touches both)."""
        return self.is_under(other) or other.is_under(self)


def _file_path(rest: str) -> str:
    """The local path a ``file:`` URL names (``rest`` follows ``file:``): ``/x``, ``///x`` and
    ``//localhost/x`` are ``/x``. ValueError (a reason) for a host or a relative path."""
    if rest.startswith("//"):
        authority, _, path = rest[2:].partition("/")
        if authority.lower() not in ("", "localhost"):
            raise ValueError("names a host: file locations are local paths")
        rest = "/" + path
    if not rest.startswith("/"):
        raise ValueError("is not an absolute file path")
    return rest


def unqualified(location: str | None) -> str | None:
    """Catalog text in the form the catalog was given it: a ``file:`` URL, as Hive qualifies
    local paths (``file:/x``, ``file:///x``, ``file://localhost/x``), becomes its path
    ``/x`` by the parser's own reading of ``file:`` (:func:`_file_path`); anything else is
    kept as stored, for the rules to judge where it is acted on. Links are not resolved: this
    is what the catalog holds, not yet a :class:`Location`."""
    match = _SCHEME.match(location) if location else None
    if location is None or match is None or match.group(1).lower() != "file":
        return location
    try:
        return _file_path(match.group(2))
    except ValueError:
        return location


def check_text(location: object, what: str) -> str:
    """A location a caller gives: :func:`check_stored`, and none of the text whose meaning
    differs between the caller and Lance (13 otherwise)."""
    text = check_stored(location, what)
    if text != text.strip():
        raise InvalidInputError(
            f"{what}: location {text!r} starts or ends with whitespace (Lance's URL reader "
            "drops it)"
        )
    for needle, reason in _REFUSED:
        if needle in text:
            raise InvalidInputError(f"{what}: location {text!r} contains {reason}")
    return text


def check_stored(location: object, what: str) -> str:
    """The location as a non-empty string without control characters (13 otherwise)."""
    if location is None:
        raise InvalidInputError(f"{what} has no location")
    if not isinstance(location, str) or not location.strip():
        raise InvalidInputError(f"{what}: location must be a non-empty string")
    for ch in location:
        if ord(ch) < 32 or 127 <= ord(ch) < 160:
            raise InvalidInputError(
                f"{what}: location contains a control character (U+{ord(ch):04X})"
            )
    return location


def _segments(path: str, text: str, what: str, *, local: bool) -> tuple[str, ...]:
    """The segments of ``path``: no dot segments; in object stores no empty ones either."""
    parts = path.strip("/").split("/") if path.strip("/") else []
    for part in parts:
        if part in (".", ".."):
            raise InvalidInputError(
                f"{what}: location {text!r} contains a dot segment ({part!r}): give the "
                "location without '.' or '..'"
            )
        if part != part.strip():
            raise InvalidInputError(
                f"{what}: location {text!r} has a segment that starts or ends with whitespace "
                f"({part!r})"
            )
        if not part and not local:
            raise InvalidInputError(
                f"{what}: location {text!r} contains an empty segment ('//'): S3 reads it as "
                "another key, Lance refuses it"
            )
    return tuple(p for p in parts if p)


def _check_authority(scheme: str, authority: str, text: str, what: str) -> None:
    if not authority:
        raise InvalidInputError(f"{what}: location {text!r} names no bucket or host")
    if "@" in authority:
        raise InvalidInputError(f"{what}: location {text!r} contains user information ('@')")
    if authority != authority.lower():
        raise InvalidInputError(
            f"{what}: location {text!r}: the bucket or host {authority!r} must be lower case"
        )
    rule = _BUCKET if scheme == "s3" else _AUTHORITY
    if not rule.fullmatch(authority):
        raise InvalidInputError(
            f"{what}: location {text!r}: {authority!r} is not a valid "
            + ("S3 bucket name" if scheme == "s3" else "bucket, container or host")
        )


def join(base: str, *names: str) -> str:
    """``base`` (a local path or URI) with child names appended, as text."""
    if base == "/":
        return "/" + "/".join(names)
    return "/".join([base.rstrip("/"), *names])


def stored(location: str | None, what: str) -> Location:
    """A location read back from the catalog, judged by today's rules (13 if it fails)."""
    return Location.parse(location, None, what)


def answered(location: str | None, what: str) -> str:
    """The location an answer gives for a stored entry (describe, declare, register, create,
    deregister, drop): its canonical text, the form every operation acts on and a catalog
    commit's manifest path is checked against, so a client that opens what it was told
    commits where the check looks. Lexically normalized, never through symbolic links: an
    entry stored through a link is answered in the spelling the catalog holds (the
    configured root's), a path clients on other hosts mounting the lake there can open.
    Text today's rules refuse (an entry made before them) is answered as stored: nothing
    acts on it, and the answer still says what the catalog holds. 13 when missing or
    not text."""
    text = check_stored(location, what)
    try:
        return str(stored(text, what))
    except InvalidInputError:
        return text


def parse_prefixes(value: str) -> tuple[Location, ...]:
    """The ``allowed_locations`` property: a comma list of absolute prefixes."""
    prefixes = tuple(p.strip() for p in value.split(",") if p.strip())
    try:
        return tuple(Location.parse(p, None, "prefix") for p in prefixes)
    except InvalidInputError as error:
        raise ValueError(str(error)) from None


def parse_schemes(value: str) -> frozenset[str]:
    """The ``allowed_schemes`` property: a comma list of URI schemes (``file`` for paths)."""
    schemes = frozenset(s.strip().lower() for s in value.split(",") if s.strip())
    if not schemes:
        raise ValueError("must name at least one scheme")
    for scheme in schemes:
        if not re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme):
            raise ValueError(f"{scheme!r} is not a URI scheme")
    return frozenset(_SAME_STORE.get(s, s) for s in schemes)


@dataclass(frozen=True)
class LocationPolicy:
    """Which locations a caller may set. Enforced only when ``enforced``
    (``confine_locations=true``; always through ``lance-metastore serve``):

    - a table's: strictly below its namespace's own directory, or below an ``extra``
      (``allowed_locations``) prefix (:meth:`owns`);
    - a namespace's: exactly its default directory (``<root>/<path>``) or one segment below
      an ``extra`` prefix apart from the root (:meth:`places_namespace`).

    Either way its scheme must be one of ``schemes``.
    """

    root: Location | None
    extra: tuple[Location, ...] = ()
    schemes: frozenset[str] = frozenset(DEFAULT_SCHEMES)
    enforced: bool = False

    def reserved(self, location: Location) -> bool:
        """Whether ``location`` lies in the server's claim store,
        ``<root>/.lance-metastore/claims``: a table or namespace there could hold or forge
        every claim."""
        return self.root is not None and location.is_under(self.root.child(*CLAIM_STORE))

    def in_extra(self, location: Location) -> bool:
        """Whether ``location`` lies under an administrator's ``allowed_locations`` prefix."""
        return any(location.is_under(prefix) for prefix in self.extra)

    def extra_overlaps(self, directory: Location) -> bool:
        """Whether an ``allowed_locations`` prefix holds or lies inside ``directory`` (then
        tables of any namespace may lie inside it)."""
        return any(directory.overlaps(prefix) for prefix in self.extra)

    def owns(self, location: Location, namespace_dir: Location) -> bool:
        """Whether a table of the namespace whose directory is ``namespace_dir`` may be
        placed at ``location`` (always, when confinement is off, but never in the server's
        claim store)."""
        if self.reserved(location):
            return False
        if not self.enforced:
            return True
        if location.scheme not in self.schemes:
            return False
        return location.is_under(namespace_dir, strictly=True) or self.in_extra(location)

    def places_namespace(
        self,
        location: Location,
        path: tuple[str, ...],
        layout: tuple[Location | None, Location | None] | None = None,
    ) -> bool:
        """Whether namespace ``path`` may have its directory at ``location`` (always, when
        confinement is off).

        ``layout`` is where the catalog lays out the directories of namespaces made without a
        location: the tree holding them and this namespace's default directory in it (by
        default the root and ``<root>/<path>``; Hive without a root: its warehouse and
        ``<warehouse>/<database>.db``, HMS's own layout).

        Confined, namespace directories never nest, so no namespace's tables can lie in
        another's directory, whichever is created first: a namespace's directory is exactly
        its default directory, or exactly one segment below an ``allowed_locations`` prefix
        that neither holds nor lies inside the tree (no default directory can meet it). Never
        the tree itself, never a directory inside another namespace's default one. Never the
        server's claim store, confined or not.
        """
        if self.reserved(location):
            return False
        if not self.enforced:
            return True
        if location.scheme not in self.schemes or not path:
            return False
        tree, default = layout if layout is not None else self.layout(path)
        if default is not None and location.same(default):
            return True
        return any(
            location.is_under(prefix, strictly=True)
            and len(location.segments) == len(prefix.segments) + 1
            and (tree is None or not prefix.overlaps(tree))
            for prefix in self.extra
        )

    def layout(self, path: tuple[str, ...]) -> tuple[Location | None, Location | None]:
        """The root's layout: the root, and ``<root>/<path>`` as the namespace's default."""
        if self.root is None or not path:
            return self.root, None
        return self.root, self.root.child(*path)

    def refuse(self, location: Location, what: str, given: str) -> InvalidInputError:
        """The 13 for a location :meth:`owns` refused, naming it as the caller ``given`` it
        (never where a symbolic link in it leads: that may be a place the caller may not
        see)."""
        if self.reserved(location):
            return InvalidInputError(f"{what}: location {given!r} is not allowed: {RESERVED_RULE}")
        if location.scheme not in self.schemes:
            return InvalidInputError(
                f"{what}: location {given!r} uses scheme {location.scheme!r}; this "
                f"namespace allows only {', '.join(sorted(self.schemes))} (property "
                "allowed_schemes)"
            )
        return InvalidInputError(f"{what}: location {given!r} is not allowed: {CONFINEMENT_RULE}")


def lenient(text: str) -> Location:
    """A stored location that today's rules refuse (an entry made before them), read as
    Lance would open it, for overlap checks only.

    This one reading must differ from :meth:`Location.parse`: the parser refuses text Lance
    reads another way, while an overlap check must still see where such an entry's data
    lies. So Lance's reading is undone first (query and fragment dropped, percent-decoded,
    ``\\`` a separator, dot segments resolved, bucket lower-cased) and the result goes
    through the one parser, which gives the canonical value (``s3a`` as ``s3``; links are
    resolved where it is compared). Only what the parser still refuses after that (a
    decoded ``*``, ``%`` or ``?`` in a name) is made into a value by hand, on the same
    segments. Text that no reading
    can make a path of (a decoded control character) raises 13: a caller must count such an
    entry as overlapping whatever it compares (fail closed), never answer 18."""
    from urllib.parse import unquote

    match = _SCHEME.match(text)
    scheme = match.group(1).lower() if match else "file"
    rest = (match.group(2) if match else text).split("#", 1)[0].split("?", 1)[0]
    if scheme != "file" or rest.startswith("//"):
        authority, _, path = rest.removeprefix("//").partition("/")
    else:
        authority, path = "", rest
    parts: list[str] = []
    for part in unquote(path).replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    authority = "" if scheme == "file" else authority.lower()
    plain = (
        "/" + "/".join(parts) if scheme == "file" else f"{scheme}://{authority}/" + "/".join(parts)
    )
    try:
        return Location.parse(plain.rstrip("/") or "/", None, "stored")
    except InvalidInputError:
        pass
    if any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in plain):
        # A decoded control character (``%00``): no path names it, so no reading of it can
        # be trusted; callers count it as overlapping everything (fail closed).
        raise InvalidInputError("a stored location cannot be read (a control character)")
    return Location(_SAME_STORE.get(scheme, scheme), authority, tuple(parts))
