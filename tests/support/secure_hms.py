"""Secured local Hive Metastores for tests: one behind Kerberos (SASL/GSSAPI), one behind TLS.

Both are the real HMS 2.3 from the pyspark wheel (:class:`LocalMetastore`), configured the way
a production metastore is: ``hive.metastore.sasl.enabled`` with a service keytab and Hadoop's
``hadoop.security.authentication=kerberos``; or ``hive.metastore.use.SSL`` with a keystore.
The certificates (a CA, a server certificate for 127.0.0.1, a client certificate) are made
here with ``cryptography``.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lance_metastore.hive.local import LocalMetastore

from .kdc import Kdc

HMS_SERVICE = "hive/127.0.0.1"
CLIENT = "alice"
KEYSTORE_PASSWORD = "lance-keystore-pw"


def _port_accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def probe_with(properties: Mapping[str, str]):
    """A LocalMetastore probe: a real call through our own client with ``properties``."""

    def probe(host: str, port: int) -> bool:
        from lance_metastore import Hive2Namespace

        if not _port_accepts(host, port):
            return False
        namespace = Hive2Namespace(
            uri=f"thrift://{host}:{port}", **{"client.retries": "1", **properties}
        )
        try:
            namespace._call("get_all_databases")
            return True
        except Exception:
            return False
        finally:
            namespace.close()

    return probe


@contextlib.contextmanager
def secured_thrift_client(uri: str, properties: Mapping[str, str]) -> Iterator[Any]:
    """A raw Thrift client of the metastore at ``uri``, authenticated as ``properties`` say.

    The harness reads and resets the catalog with it, next to (not through) the namespace.
    """
    from lance_metastore.hive.pool import Connection, parse_uris
    from lance_metastore.hive.transport import SECURITY_PROPERTIES, security_from_settings
    from lance_metastore.rules.config import parse_properties

    settings = parse_properties("test client", properties, SECURITY_PROPERTIES)
    connection = Connection(parse_uris(uri)[0], 30.0, security_from_settings(settings))
    try:
        yield connection.client
    finally:
        connection.close()


@dataclass
class KerberizedMetastore:
    kdc: Kdc
    metastore: LocalMetastore
    client_principal: str
    client_keytab: Path

    @property
    def uri(self) -> str:
        return self.metastore.uri

    def client_properties(self) -> dict[str, str]:
        """Properties of a namespace that logs in with its own keytab."""
        return {
            "client.auth": "kerberos",
            "client.kerberos.principal": self.client_principal,
            "client.kerberos.keytab": str(self.client_keytab),
        }


@contextlib.contextmanager
def kerberized_metastore(
    kdc: Kdc, data_dir: Path, protection: str = "authentication"
) -> Iterator[KerberizedMetastore]:
    """A kerberized HMS whose principal is ``hive/127.0.0.1@REALM``, and a client keytab.

    ``protection`` is Hadoop's ``hadoop.rpc.protection``: ``authentication`` (SASL QOP auth),
    ``integrity`` (auth-int) or ``privacy`` (auth-conf, every frame encrypted).
    """
    service_keytab = kdc.directory / "hive_127.0.0.1.keytab"
    if not service_keytab.exists():
        kdc.add_principal(HMS_SERVICE)
    client_keytab = kdc.directory / f"{CLIENT}.keytab"
    if not client_keytab.exists():
        kdc.add_principal(CLIENT)
    client = KerberizedMetastore(kdc, None, kdc.principal(CLIENT), client_keytab)  # type: ignore[arg-type]
    metastore = LocalMetastore(
        data_dir,
        hive_conf={
            "hive.metastore.sasl.enabled": "true",
            "hive.metastore.kerberos.keytab.file": str(service_keytab),
            "hive.metastore.kerberos.principal": kdc.principal(HMS_SERVICE),
        },
        core_conf={
            "hadoop.security.authentication": "kerberos",
            "hadoop.rpc.protection": protection,
        },
        jvm_options=[f"-Djava.security.krb5.conf={kdc.krb5_conf}"],
        probe=probe_with(client.client_properties()),
    )
    client.metastore = metastore
    metastore.start()
    try:
        yield client
    finally:
        metastore.stop()


@dataclass
class Certificates:
    """PEM files of a test CA, a server certificate for 127.0.0.1 and a client certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    server_keystore: Path  # PKCS#12, password KEYSTORE_PASSWORD, for the JVM
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here: trusting it only must fail


def make_certificates(directory: Path) -> Certificates:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def certificate(subject, key, issuer, issuer_key, *, ca: bool, san=None):
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if ca:
            builder = builder.add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                critical=True,
            ).add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
        else:
            builder = builder.add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                critical=False,
            )
        if san is not None:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    def write(path: Path, data: bytes) -> Path:
        path.write_bytes(data)
        return path

    def pem_key(key) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    pem = serialization.Encoding.PEM
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = certificate(name("lance test CA"), ca_key, name("lance test CA"), ca_key, ca=True)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other_ca = certificate(name("other CA"), other_key, name("other CA"), other_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = certificate(
        name("127.0.0.1"),
        server_key,
        ca_cert.subject,
        ca_key,
        ca=False,
        san=[x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_cert = certificate(name("alice"), client_key, ca_cert.subject, ca_key, ca=False)
    keystore = pkcs12.serialize_key_and_certificates(
        b"hms",
        server_key,
        server_cert,
        [ca_cert],
        serialization.BestAvailableEncryption(KEYSTORE_PASSWORD.encode()),
    )
    return Certificates(
        ca=write(directory / "ca.pem", ca_cert.public_bytes(pem)),
        server_cert=write(directory / "server.pem", server_cert.public_bytes(pem)),
        server_key=write(directory / "server.key", pem_key(server_key)),
        server_keystore=write(directory / "server.p12", keystore),
        client_cert=write(directory / "client.pem", client_cert.public_bytes(pem)),
        client_key=write(directory / "client.key", pem_key(client_key)),
        other_ca=write(directory / "other-ca.pem", other_ca.public_bytes(pem)),
    )


@dataclass
class TlsMetastore:
    certificates: Certificates
    metastore: LocalMetastore

    @property
    def uri(self) -> str:
        return self.metastore.uri

    def client_properties(self) -> dict[str, str]:
        return {"client.tls": "true", "client.tls.ca-cert": str(self.certificates.ca)}


@contextlib.contextmanager
def tls_metastore(data_dir: Path) -> Iterator[TlsMetastore]:
    """An HMS that speaks only TLS, with a certificate for 127.0.0.1 from a test CA."""
    certificates = make_certificates(data_dir / "certs")
    client = {"client.tls": "true", "client.tls.ca-cert": str(certificates.ca)}
    metastore = LocalMetastore(
        data_dir / "hms",
        hive_conf={
            "hive.metastore.use.SSL": "true",
            "hive.metastore.keystore.path": str(certificates.server_keystore),
            "hive.metastore.keystore.password": KEYSTORE_PASSWORD,
        },
        jvm_options=["-Djavax.net.ssl.keyStoreType=pkcs12"],
        probe=probe_with(client),
    )
    metastore.start()
    try:
        yield TlsMetastore(certificates, metastore)
    finally:
        metastore.stop()
