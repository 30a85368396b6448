"""How one pooled connection reaches a Hive Metastore: plain TCP, TLS, or Kerberos.

A secured metastore speaks one of two things (Hive 2.3 to 4 choose one: SASL wins when both
are configured):

- **Kerberos**: Thrift's own SASL transport (``thrift.transport.TTransport
  .TSaslClientTransport``) with pure-sasl's GSSAPI mechanism, which authenticates through the
  system's MIT/Heimdal library (``kerberos`` module). Credentials come from the ticket cache
  (``KRB5CCNAME`` or krb5.conf's default) or, given a principal and a keytab, from a private
  in-memory cache that :class:`KerberosLogin` fills from the keytab through ``gssapi`` and
  refreshes before the ticket runs out. The GSSAPI library reads a thread's default cache
  through ``gss_krb5_ccache_name``, so the private cache is made current only for the thread
  that opens a connection, only while it does.
- **TLS**: Thrift's ``TSSLSocket`` with an :class:`ssl.SSLContext` that verifies the server's
  certificate and host name against ``client.tls.ca-cert`` (or the system's trust store) and
  may present a client certificate.

Failures to authenticate raise :class:`AuthenticationFailed`, which names the principal or
the server and never a keytab's contents. The pool does not retry it on the same server
(a wrong key or an untrusted certificate fails the same way every time).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..rules.config import Property, Settings, boolean, non_empty, one_of
from ..rules.extras import requires_extra

with requires_extra("hive"):
    from thrift.transport import TSocket, TSSLSocket, TTransport


class AuthenticationFailed(Exception):
    """The metastore or its client could not be authenticated (spec code 16)."""


class KerberosUnavailable(Exception):
    """The realm's KDC could not be reached (spec code 17: try again later)."""


@dataclass(frozen=True)
class TlsSettings:
    """``client.tls.*``: how to verify the server and what to present to it."""

    ca_cert: str | None = None
    cert: str | None = None
    key: str | None = None
    key_password: str | None = None

    def context(self) -> ssl.SSLContext:
        """A client context that verifies certificates and host names; ValueError if unusable."""
        for label, path in (("ca-cert", self.ca_cert), ("cert", self.cert), ("key", self.key)):
            if path is not None and not Path(path).is_file():
                raise ValueError(f"client.tls.{label}: no such file {path!r}")
        if self.key is not None and self.cert is None:
            raise ValueError("client.tls.key needs client.tls.cert")
        try:
            context = ssl.create_default_context(cafile=self.ca_cert)
            if self.cert is not None:
                context.load_cert_chain(self.cert, self.key, self.key_password)
        except ssl.SSLError as error:
            # The message names the files only (OpenSSL never echoes key material).
            raise ValueError(f"unusable TLS files ({self._files()}): {error.reason}") from None
        return context

    def _files(self) -> str:
        return ", ".join(p for p in (self.ca_cert, self.cert, self.key) if p) or "system trust"


@dataclass(frozen=True)
class KerberosSettings:
    """``client.kerberos.*``: whom to authenticate as, and which server principal to ask for."""

    service_name: str = "hive"
    server_host: str | None = None  # host part of the server principal; else each URI's host
    principal: str | None = None
    keytab: str | None = None

    def server_principal(self, host: str) -> str:
        return f"{self.service_name}/{self.server_host or host}"

    def client_description(self) -> str:
        if self.keytab is not None:
            return f"{self.principal} (keytab {self.keytab})"
        if self.principal is not None:
            return f"{self.principal} (ticket cache)"
        return "the ticket cache's principal"


def require_kerberos_libraries() -> None:
    """MissingExtraError (an ImportError) when the ``[kerberos]`` extra is missing."""
    with requires_extra("kerberos"):
        import gssapi  # noqa: F401
        import kerberos  # noqa: F401
        import puresasl  # noqa: F401


_LOGIN_LOCKS: dict[str, threading.Lock] = {}


class KerberosLogin:
    """Keeps this namespace's own ticket, from its keytab, in a private in-memory cache.

    ``gssapi``'s credential store extension obtains the ticket from the keytab when the cache
    has none (or only one close to expiry), so calling :meth:`current` before each new
    connection is both the login and the renewal. Without a keytab, the process's ticket cache
    is used as it is.
    """

    def __init__(self, settings: KerberosSettings) -> None:
        self.settings = settings
        # One cache per principal and keytab in the process: namespaces that log in alike
        # share their ticket, and memory caches (which live until the process ends) stay few.
        key = f"{settings.principal}\0{os.path.abspath(settings.keytab or '')}"
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        self._cache = f"MEMORY:lance-metastore-{digest}"
        self._lock = _LOGIN_LOCKS.setdefault(self._cache, threading.Lock())

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        """Make this namespace's credentials the calling thread's for the ``with`` block."""
        if self.settings.keytab is None:
            yield
            return
        with requires_extra("kerberos"):
            import gssapi
            import gssapi.raw

        with self._lock:
            try:
                name = gssapi.Name(self.settings.principal, gssapi.NameType.kerberos_principal)
                gssapi.Credentials(
                    name=name,
                    usage="initiate",
                    store={"client_keytab": self.settings.keytab, "ccache": self._cache},
                )
            except gssapi.raw.misc.GSSError as error:
                raise _kerberos_failure(
                    f"Kerberos login of {self.settings.client_description()} failed",
                    _gssapi_message(error),
                ) from None
        gssapi.raw.krb5_ccache_name(self._cache.encode())
        try:
            yield
        finally:
            # None, not the name it returned: that is the default resolved at the time, and
            # pinning it would hide a later KRB5CCNAME from this thread for good.
            gssapi.raw.krb5_ccache_name(None)


def _gssapi_message(error: Any) -> str:
    try:
        return str(error.gen_message())
    except Exception:
        return str(error)


def _kerberos_message(error: BaseException) -> str:
    """``kerberos.GSSError`` carries ``((major text, code), (minor text, code))``."""
    parts = []
    for item in getattr(error, "args", ()):
        if isinstance(item, tuple) and item and isinstance(item[0], str):
            parts.append(item[0])
    # The minor status says what happened (e.g. "Ticket expired"); the major one is generic.
    return ": ".join(reversed(parts)) or str(error)


def _kerberos_failure(prefix: str, detail: str) -> Exception:
    if "Cannot contact any KDC" in detail or "Cannot find KDC" in detail:
        return KerberosUnavailable(f"{prefix}: {detail}")
    return AuthenticationFailed(f"{prefix}: {detail}")


SECURITY_PROPERTIES: tuple[Property, ...] = (
    Property("client.auth", "none, or kerberos (SASL/GSSAPI)", one_of("none", "kerberos"), "none"),
    Property(
        "client.kerberos.service-name",
        "Service part of the metastore's principal (service/host@REALM)",
        non_empty,
        "hive",
    ),
    Property(
        "client.kerberos.server-host",
        "Host part of the metastore's principal; default: each URI's host",
        non_empty,
    ),
    Property(
        "client.kerberos.principal",
        "Client principal: logs in from client.kerberos.keytab, else picks it from the cache",
        non_empty,
    ),
    Property("client.kerberos.keytab", "Keytab file of client.kerberos.principal", non_empty),
    Property("client.tls", "Connect over TLS", boolean, False),
    Property("client.tls.ca-cert", "PEM file of the CAs trusted for the server", non_empty),
    Property("client.tls.cert", "PEM file of a client certificate (chain) to present", non_empty),
    Property("client.tls.key", "PEM file of the client certificate's private key", non_empty),
    Property(
        "client.tls.key-password", "Password of an encrypted client.tls.key", non_empty, secret=True
    ),
)


@dataclass(frozen=True)
class Security:
    """How every connection of one namespace authenticates; ``PLAIN`` when not at all."""

    tls: ssl.SSLContext | None = None
    kerberos: KerberosLogin | None = None

    def describe(self) -> str:
        parts = (["tls"] if self.tls else []) + (["kerberos"] if self.kerberos else [])
        return "+".join(parts) or "none"


PLAIN = Security()


def security_from_settings(settings: Settings) -> Security:
    """The parsed ``client.auth`` / ``client.kerberos.*`` / ``client.tls.*`` properties.

    ValueError names the property at fault; nothing is contacted here.
    """
    kerberos_names = [p.name for p in SECURITY_PROPERTIES if p.name.startswith("client.kerberos.")]
    tls_names = [p.name for p in SECURITY_PROPERTIES if p.name.startswith("client.tls.")]
    login = None
    if settings["client.auth"] == "kerberos":
        kerberos = KerberosSettings(
            service_name=settings["client.kerberos.service-name"],
            server_host=settings["client.kerberos.server-host"],
            principal=settings["client.kerberos.principal"],
            keytab=settings["client.kerberos.keytab"],
        )
        if kerberos.keytab is not None:
            if kerberos.principal is None:
                raise ValueError("client.kerberos.keytab needs client.kerberos.principal")
            if not Path(kerberos.keytab).is_file():
                raise ValueError(f"client.kerberos.keytab: no such file {kerberos.keytab!r}")
        try:
            require_kerberos_libraries()
        except ImportError as error:
            raise ValueError(str(error)) from None
        login = KerberosLogin(kerberos)
    else:
        _refuse_unused(settings, kerberos_names, "client.auth is not kerberos")
    context = None
    if settings["client.tls"]:
        context = TlsSettings(
            ca_cert=settings["client.tls.ca-cert"],
            cert=settings["client.tls.cert"],
            key=settings["client.tls.key"],
            key_password=settings["client.tls.key-password"],
        ).context()
    else:
        _refuse_unused(settings, tls_names, "client.tls is not true")
    return Security(tls=context, kerberos=login)


def security_hint(error: BaseException, security: Security) -> str:
    """A hint for a transport error that looks like a client/server security mismatch.

    A Kerberos-secured metastore closes a plain connection at once; a TLS one answers plain
    Thrift with bytes that read as an absurd message length.
    """
    text = str(error)
    if (
        security.kerberos is None
        and security.tls is None
        and ("read 0 bytes" in text or "Length exceeded" in text or "max allowed" in text)
    ):
        return " (does this metastore require Kerberos or TLS? see client.auth, client.tls)"
    return ""


def _refuse_unused(settings: Settings, names: list[str], reason: str) -> None:
    given = [name for name in names if name in settings.raw]
    if given:
        raise ValueError(f"{', '.join(given)} set but {reason}")


def open_transport(
    host: str,
    port: int,
    timeout_sec: float,
    security: Security = PLAIN,
) -> tuple[TTransport.TTransportBase, TSocket.TSocket]:
    """An open transport to ``host:port`` and the socket under it (for staleness checks).

    Raises :class:`AuthenticationFailed` or :class:`KerberosUnavailable` for authentication
    failures, and Thrift's ``TTransportException`` or ``OSError`` when the server is
    unreachable.
    """
    if security.tls is not None:
        sock: TSocket.TSocket = TSSLSocket.TSSLSocket(
            host, port, ssl_context=security.tls, server_hostname=host
        )
    else:
        sock = TSocket.TSocket(host, port)
    sock.setTimeout(timeout_sec * 1000)
    server = f"thrift://{host}:{port}"
    if security.kerberos is None:
        transport: TTransport.TTransportBase = TTransport.TBufferedTransport(sock)
        _open_socket(transport, server)
        return transport, sock
    _open_socket(sock, server)
    try:
        return _sasl_handshake(sock, host, security.kerberos, server), sock
    except BaseException:
        sock.close()
        raise


def _open_socket(transport: TTransport.TTransportBase, server: str) -> None:
    try:
        transport.open()
    except TTransport.TTransportException as error:
        inner = getattr(error, "inner", None)
        if isinstance(inner, ssl.SSLCertVerificationError):
            raise AuthenticationFailed(
                f"TLS: the certificate of {server} is not trusted: {inner.verify_message}"
            ) from None
        if isinstance(inner, ssl.SSLError):
            raise AuthenticationFailed(
                f"TLS handshake with {server} failed: {inner.reason or inner}"
            ) from None
        raise


def _sasl_handshake(
    sock: TSocket.TSocket, host: str, login: KerberosLogin, server: str
) -> TTransport.TTransportBase:
    with requires_extra("kerberos"):
        import kerberos
        from puresasl import SASLError, SASLProtocolException

    settings = login.settings
    service = settings.server_principal(host)
    options: dict[str, Any] = {}
    if settings.principal is not None and settings.keytab is None:
        options["principal"] = settings.principal  # choose it from a ticket cache collection
    who = f"{settings.client_description()} to {service} at {server}"
    with login.current():
        try:
            transport = TTransport.TSaslClientTransport(
                sock,
                settings.server_host or host,
                settings.service_name,
                mechanism="GSSAPI",
                **options,
            )
            transport.open()
        except kerberos.KrbError as error:
            raise _kerberos_failure(
                f"Kerberos authentication of {who} failed", _kerberos_message(error)
            ) from None
        except (SASLError, SASLProtocolException) as error:  # e.g. no common protection
            raise AuthenticationFailed(f"SASL negotiation of {who} failed: {error}") from None
        except TTransport.TTransportException as error:
            if error.type == TTransport.TTransportException.END_OF_FILE:
                raise AuthenticationFailed(
                    f"The metastore closed the connection while authenticating {who} "
                    "(is it secured with Kerberos? did it reject the ticket?)"
                ) from None
            if error.type == TTransport.TTransportException.NOT_OPEN and "SASL" in str(error):
                raise AuthenticationFailed(
                    f"The metastore refused Kerberos authentication of {who}: {error}"
                ) from None
            raise
    return transport
