"""Who is calling: the server's authentication schemes, each one small class behind one interface.

A scheme reads the request's headers and answers the :class:`Principal` they prove, ``None``
when they carry none of its credentials, or raises :class:`InvalidCredentials` when they carry
its credentials and these are wrong. The server tries its schemes in order; nobody admitting a
caller is a 401 (code 16). Schemes are chosen by name (``bearer``, ``api-key``, ``jwt``) or by
class path (``package.module:Class``), so a site plugs in its own (:func:`authenticator_from`).

Secrets never leave a scheme: tokens and keys are compared in constant time, never logged,
never part of a ``repr`` or a message; a principal carries a name, not the proof.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import importlib
import ipaddress
import json
import logging
import os
import socket
import ssl
import stat
import threading
import time
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..rules.extras import requires_extra
from ..rules.loopback import is_loopback

logger = logging.getLogger("lance_metastore.rest")

# A credential longer than this is refused unread (a JWT with a few claims is well under 2 KB).
MAX_CREDENTIAL_BYTES = 8 * 1024
# Asymmetric signatures only: an HMAC key would be a secret shared with every client, and
# "none" is no signature at all.
JWT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")

# Verified JWTs remembered until they expire (then forgotten all at once past this many).
VERIFIED_TOKENS_KEPT = 4096

Headers = Mapping[bytes, bytes]


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: the name the policy grants to, and the scheme that proved it."""

    name: str
    scheme: str

    @property
    def qualified(self) -> str:
        """``scheme:name``, what a policy grants to: the same name proved by two schemes is
        two principals (a JWT's ``sub`` never borrows a token principal's grants)."""
        return f"{self.scheme}:{self.name}"


class InvalidCredentials(Exception):
    """Credentials of a scheme were presented and are wrong; the message says why, never what."""


class Authenticator(ABC):
    """One authentication scheme. Subclasses take their settings as keyword strings (so the CLI's
    ``--auth-option key=value`` reaches a site's own class unchanged)."""

    scheme: str = ""

    @abstractmethod
    async def authenticate(self, headers: Headers) -> Principal | None:
        """The caller these headers prove, ``None`` when they carry no credential of this
        scheme; raises :class:`InvalidCredentials` for a credential of this scheme that fails."""

    def reload(self) -> None:  # noqa: B027 - a scheme without files has nothing to reload
        """Re-read the scheme's files (on SIGHUP); on failure raise and keep the old state."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def header(headers: Headers, name: bytes) -> bytes | None:
    """The request header ``name`` (lower-case bytes), refused when oversized."""
    value = headers.get(name)
    if value is not None and len(value) > MAX_CREDENTIAL_BYTES:
        raise InvalidCredentials(f"The {name.decode()} header is larger than the server accepts")
    return value


def bearer_credential(headers: Headers) -> bytes | None:
    """The credential of ``Authorization: Bearer <credential>``; None for any other form."""
    value = header(headers, b"authorization")
    if value is None:
        return None
    scheme, _, credential = value.partition(b" ")
    credential = credential.strip()
    return credential if scheme.lower() == b"bearer" and credential else None


def read_private_file(path: str, what: str, warn: Callable[[str], None] | None = None) -> str:
    """The text of a file holding secrets (surrounding white space removed).

    Refuses an empty file and one that another user could change (writable by group or
    others, or owned by someone else but root): whoever writes it chooses who gets in. A file
    others can read is accepted with a warning (to ``warn``, else the log).
    """
    with open(path, encoding="utf-8") as handle:
        info = os.fstat(handle.fileno())
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or info.st_uid not in (os.getuid(), 0):
            raise ValueError(
                f"The {what} {path} can be changed by other users "
                f"(mode {stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid}): "
                f"make it yours and writable only by you (chmod 600 {path})"
            )
        text = handle.read().strip()
    if not text:
        raise ValueError(f"The {what} {path} is empty")
    if info.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        message = (
            f"The {what} {path} is readable by other users "
            f"(mode {stat.S_IMODE(info.st_mode):04o}): chmod 600 {path}"
        )
        (warn or logger.warning)(message)
    return text


def read_secrets_file(path: str, what: str) -> dict[str, list[str]]:
    """Principals and their secrets from a JSON object file: ``{"alice": "s1", "etl": ["s2",
    "s3"]}`` (several secrets per principal let a site rotate one without a gap)."""
    text = read_private_file(path, what, lambda _: None)  # the CLI warns once, at start
    try:
        content = json.loads(text)
    except json.JSONDecodeError as error:  # what json.loads raises for bad text
        raise ValueError(f"The {what} {path} is not valid JSON: {error.msg}") from None
    if not isinstance(content, dict):
        raise ValueError(f"The {what} {path} must hold a JSON object of principal: secret")
    secrets: dict[str, list[str]] = {}
    for principal, value in content.items():
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
            raise ValueError(
                f"The {what} {path}: the secrets of {principal!r} must be a non-empty string "
                "or a list of them"
            )
        secrets[principal] = values
    return secrets


class _SecretLookup:
    """Secret -> principal by the secret's SHA-256 digest: the lookup's timing depends on the
    digest, which tells nothing about the secret (no byte-by-byte comparison of secrets), and
    costs the same for one principal or thousands."""

    def __init__(self, secrets: Mapping[str, list[str]]) -> None:
        self._by_digest = {
            hashlib.sha256(secret.encode()).digest(): principal
            for principal, values in secrets.items()
            for secret in values
        }

    def principal_of(self, presented: bytes) -> str | None:
        return self._by_digest.get(hashlib.sha256(presented).digest())

    def principals(self) -> set[str]:
        return set(self._by_digest.values())


class _SecretsFileScheme(Authenticator):
    """A scheme whose secrets come from a file of principal: secret(s) (``file``), or that
    admits one ``principal`` with one secret: given (``token``) or a file's whole content
    (``token_file``, the form of ``--auth-token-file``)."""

    what = "secrets file"

    def __init__(
        self,
        file: str | None = None,
        token: str | None = None,
        token_file: str | None = None,
        principal: str = "token",
    ) -> None:
        if sum(source is not None for source in (file, token, token_file)) != 1:
            raise ValueError(f"{type(self).__name__} needs one of file, token or token_file")
        self.file = file or token_file
        self._token_file = token_file
        self._principal = principal
        self._single = {principal: [token]} if token is not None else None
        self._lookup = _SecretLookup({})
        self.reload()

    def reload(self) -> None:
        self.apply(self.read())

    def read(self) -> _SecretLookup:
        """The scheme's secrets as its files hold them now (not yet in force)."""
        if self._single is not None:
            secrets = self._single
        elif self._token_file is not None:
            token = read_private_file(self._token_file, "auth token file", lambda _: None)
            secrets = {self._principal: [token]}
        else:
            secrets = read_secrets_file(str(self.file), self.what)
        return _SecretLookup(secrets)

    def apply(self, lookup: _SecretLookup) -> None:
        self._lookup = lookup  # one assignment: a request sees old or new

    def _admit(self, presented: bytes | None) -> Principal | None:
        """The principal of a known secret; None for any other (the next scheme judges it:
        ``--auth-token-file`` and ``--tokens-file`` together are two bearer schemes, and
        when none admits the caller the server answers 401)."""
        if presented is None:
            return None
        name = self._lookup.principal_of(presented.strip())
        return None if name is None else Principal(name, self.scheme)

    def principal_names(self) -> set[str]:
        """The principals this scheme proves (to refuse two schemes proving one name)."""
        return self._lookup.principals()

    def __repr__(self) -> str:
        source = f"file={self.file!r}" if self.file else "token=***"
        return f"{type(self).__name__}({source})"


class BearerTokens(_SecretsFileScheme):
    """``Authorization: Bearer <token>``, the token one of a principal's in the tokens file (or
    the single token of ``--auth-token-file``, the principal then being ``token``). A token
    no entry matches is left to the next scheme (another tokens file, a JWT scheme)."""

    scheme = "bearer"
    what = "tokens file"

    async def authenticate(self, headers: Headers) -> Principal | None:
        return self._admit(bearer_credential(headers))


class ApiKeys(_SecretsFileScheme):
    """``x-api-key: <key>`` (the spec's ``ApiKeyAuth``), a principal's key from the keys file."""

    scheme = "api-key"
    what = "API keys file"

    async def authenticate(self, headers: Headers) -> Principal | None:
        return self._admit(header(headers, b"x-api-key"))


class JwtBearer(Authenticator):
    """``Authorization: Bearer <JWT>``: an OAuth2 access token signed by the configured issuer.

    Checked: the signature against the key set (``jwks``: a JWKS file, checked like a token
    file, or an ``https://`` URL; ``http://`` only to a loopback address, for tests), ``iss``,
    ``aud``, ``exp`` (required), ``nbf`` and ``iat`` with ``leeway_seconds`` of clock skew. A
    token's algorithm must be its key's declared ``alg`` (a key without one accepts its key
    type's asymmetric algorithms); HMAC and ``none`` never. A URL is fetched without following
    redirects, within ``fetch_timeout_seconds`` in all; a token naming a key id the set lacks
    answers 401 at once and starts one fetch in the background (at most one per
    ``refetch_seconds``), so no request waits for the issuer. The principal is
    ``jwt:<principal_claim>`` (``sub`` by default).
    """

    scheme = "jwt"

    def __init__(
        self,
        issuer: str,
        audience: str,
        jwks: str,
        principal_claim: str = "sub",
        leeway_seconds: str | float = 30,
        refetch_seconds: str | float = 30,
        fetch_timeout_seconds: str | float = 5,
    ) -> None:
        with requires_extra("server"):
            import jwt

        self._jwt = jwt
        self.issuer, self.audience, self.jwks = issuer, audience, jwks
        if jwks.startswith("http://") and not is_loopback(_host_of(jwks)):
            raise ValueError(
                f"The JWT key set {jwks} must be fetched over https:// (http:// only from a "
                "loopback address)"
            )
        self.principal_claim = principal_claim
        self.leeway = float(leeway_seconds)
        self.refetch_seconds = float(refetch_seconds)
        self.fetch_timeout = float(fetch_timeout_seconds)
        self._keys: dict[str, tuple[Any, list[str]]] = {}
        # sha256(token) -> (principal name, expiry): a client sends the same token on every
        # call until it expires; its signature is checked once, not on every call.
        self._verified: dict[bytes, tuple[str, float]] = {}
        self._fetched_at = float("-inf")
        self._fetch_lock = threading.Lock()
        self._refreshing = False
        self.reload()

    @property
    def _remote(self) -> bool:
        return self.jwks.startswith(("https://", "http://"))

    def reload(self) -> None:
        keys = self._load_keys()
        self._keys = keys
        self._verified = {}  # a key taken out of the set stops admitting its tokens now
        self._fetched_at = time.monotonic()

    def _load_keys(self) -> dict[str, tuple[Any, list[str]]]:
        """The key set by key id, each key with the algorithms it accepts; an unreadable or
        invalid set is a ValueError naming it."""
        try:
            if self._remote:
                text = _fetch(self.jwks, self.fetch_timeout)
            else:
                text = read_private_file(self.jwks, "JWT key set file", lambda _: None)
            content = json.loads(text)
            entries = content.get("keys") if isinstance(content, dict) else None
            if not isinstance(entries, list):
                raise ValueError("not a JWKS document (no list 'keys')")
            keys: dict[str, tuple[Any, list[str]]] = {}
            for entry in entries:
                accepted = _algorithms_of(entry)
                if not accepted:
                    logger.warning(
                        "JWT key set %s: key %r is not a signing key this server accepts "
                        "(asymmetric algorithms only); left out",
                        self.jwks,
                        entry.get("kid") if isinstance(entry, dict) else None,
                    )
                    continue
                key = self._jwt.PyJWK(entry, accepted[0])
                keys[key.key_id or ""] = (key, accepted)
        except (OSError, ValueError, self._jwt.PyJWTError) as error:
            raise ValueError(f"Cannot load the JWT key set {self.jwks}: {error}") from None
        return keys

    def _refetch_soon(self) -> None:
        """Fetch the key set again in the background unless it was fetched within
        ``refetch_seconds`` or a fetch is under way: a flood of tokens with invented key ids
        costs the issuer one fetch per interval and holds no request."""
        with self._fetch_lock:
            due = time.monotonic() - self._fetched_at >= self.refetch_seconds
            if self._refreshing or not due:
                return
            self._refreshing = True
            self._fetched_at = time.monotonic()
        threading.Thread(target=self._refetch, name="jwks-refetch", daemon=True).start()

    def _refetch(self) -> None:
        try:
            self.reload()
        except Exception as error:
            logger.warning("could not fetch the JWT key set %s: %s", self.jwks, error)
        finally:
            with self._fetch_lock:
                self._refreshing = False

    async def authenticate(self, headers: Headers) -> Principal | None:
        token = bearer_credential(headers)
        if token is None:
            return None
        digest = hashlib.sha256(token).digest()
        known = self._verified.get(digest)
        if known is not None and time.time() < known[1]:
            return Principal(known[0], self.scheme)
        jwt = self._jwt
        try:
            key_id = jwt.get_unverified_header(token).get("kid") or ""
        except jwt.PyJWTError:
            raise InvalidCredentials("The bearer token is not a valid JWT") from None
        entry = self._keys.get(key_id)
        if entry is None:
            self._refetch_soon()
            raise InvalidCredentials("The token's signing key is not in the issuer's key set")
        key, accepted = entry
        try:
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=accepted,
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud", self.principal_claim]},
            )
        except jwt.PyJWTError as error:
            raise InvalidCredentials(f"The bearer token was refused: {error}") from None
        name = claims.get(self.principal_claim)
        if not isinstance(name, str) or not name:
            raise InvalidCredentials(f"The token's {self.principal_claim} claim is not a name")
        if len(self._verified) >= VERIFIED_TOKENS_KEPT:
            self._verified = {}
        self._verified[digest] = (name, float(claims["exp"]))
        return Principal(name, self.scheme)

    def __repr__(self) -> str:
        return f"JwtBearer(issuer={self.issuer!r}, audience={self.audience!r}, jwks={self.jwks!r})"


# The algorithms a key of each type may sign with, when its JWK declares none.
_KEY_TYPE_ALGORITHMS = {
    "RSA": ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"],
    "EC": ["ES256", "ES384", "ES512"],
}


def _algorithms_of(jwk: object) -> list[str]:
    """What a JWK may verify: its declared ``alg`` alone, else its key type's asymmetric
    algorithms; nothing for an encryption key or a symmetric one."""
    if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
        return []
    declared = jwk.get("alg")
    if declared is not None:
        return [declared] if declared in JWT_ALGORITHMS else []
    return list(_KEY_TYPE_ALGORITHMS.get(str(jwk.get("kty")), []))


def _host_of(url: str) -> str:
    return urllib.parse.urlsplit(url).hostname or ""


MAX_JWKS_BYTES = 1024 * 1024


def _fetch(url: str, deadline_seconds: float) -> str:
    """The document at ``url`` within ``deadline_seconds`` in all. No proxy is used (a
    loopback key set reached through ``http_proxy`` would be the proxy's), no redirect is
    followed (any answer but 200 is a failure), and an ``http://`` URL is fetched from the
    loopback address that was checked, not from a second resolution of its name. The fetch
    runs on a thread of its own; at the deadline its connection is shut, so the thread ends
    then too, however slowly the answer trickles."""
    outcome: list[str | BaseException] = []
    connection: list[http.client.HTTPConnection] = []

    def fetch() -> None:
        try:
            outcome.append(_read_within(url, deadline_seconds, connection.append))
        except BaseException as error:  # handed to the caller below
            outcome.append(error)

    worker = threading.Thread(target=fetch, name="jwks-fetch", daemon=True)
    worker.start()
    worker.join(deadline_seconds)
    if not outcome:
        for opened in connection:
            _shut(opened)
        worker.join(1.0)
        raise OSError(f"the key set took longer than {deadline_seconds:g} s")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _shut(connection: http.client.HTTPConnection) -> None:
    """End a connection another thread may be reading: shutdown wakes a blocked read."""
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    connection.close()


def _read_within(
    url: str, deadline_seconds: float, opened: Callable[[http.client.HTTPConnection], None]
) -> str:
    """The body of a 200 answer to GET ``url``; every socket wait is bounded by what remains
    of ``deadline_seconds``."""
    deadline = time.monotonic() + deadline_seconds
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(
            host, parts.port or 443, timeout=deadline_seconds, context=ssl.create_default_context()
        )
    elif parts.scheme == "http":
        address = _loopback_address(host)
        connection = http.client.HTTPConnection(address, parts.port or 80, timeout=deadline_seconds)
    else:
        raise ValueError(f"not an http(s) URL: {url}")
    opened(connection)
    try:
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        netloc = host if parts.port is None else f"{host}:{parts.port}"
        connection.request("GET", target, headers={"Host": netloc, "Accept": "application/json"})
        answer = connection.getresponse()
        if answer.status != 200:
            raise OSError(f"the key set answered HTTP {answer.status} (redirects are not followed)")
        chunks: list[bytes] = []
        size = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise OSError(f"the key set took longer than {deadline_seconds:g} s")
            if connection.sock is not None:
                connection.sock.settimeout(max(remaining, 0.001))
            chunk = answer.read1(16 * 1024)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_JWKS_BYTES:
                raise OSError(f"the key set is larger than {MAX_JWKS_BYTES} bytes")
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        connection.close()


def _loopback_address(host: str) -> str:
    """A loopback address of ``host``, the one the fetch connects to (http:// is allowed to
    loopback only: the name is not resolved a second time, elsewhere)."""
    for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM):
        address = str(info[4][0])
        if ipaddress.ip_address(address).is_loopback:
            return address
    raise ValueError(f"{host} is not a loopback address: use https://")


SCHEMES: dict[str, type[Authenticator]] = {
    "bearer": BearerTokens,
    "api-key": ApiKeys,
    "jwt": JwtBearer,
}


def authenticator_from(name: str, options: Mapping[str, str]) -> Authenticator:
    """The scheme ``name`` (one of :data:`SCHEMES`, or a class path ``package.module:Class`` or
    ``package.module.Class`` of an :class:`Authenticator` subclass) made with ``options``."""
    cls: Any = SCHEMES.get(name)
    if cls is None:
        module_name, _, class_name = name.rpartition(":") if ":" in name else name.rpartition(".")
        if not module_name:
            raise ValueError(
                f"Unknown auth scheme {name!r}: use one of {', '.join(SCHEMES)} or a class path "
                "package.module:Class"
            )
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as error:
            raise ValueError(f"Cannot load the auth scheme {name!r}: {error}") from None
    if not (isinstance(cls, type) and issubclass(cls, Authenticator)):
        raise ValueError(f"The auth scheme {name!r} is not an Authenticator subclass")
    try:
        return cls(**options)
    except TypeError as error:
        raise ValueError(f"The auth scheme {name!r} refused its options: {error}") from None
