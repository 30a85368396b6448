"""Secured Hive Metastores: Kerberos (SASL/GSSAPI) against a real MIT KDC, and TLS.

Every server here is real and local: ``krb5kdc`` from Debian's packages with a realm made by
the fixture (tests/support/kdc.py), and HMS 2.3 from the pyspark wheel configured for
Kerberos or, separately, for TLS (tests/support/secure_hms.py). The behaviour suite also runs
on the kerberized metastore (backend ``hive_kerberos`` in conftest.py).
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance_namespace import (
    CreateNamespaceRequest,
    DeclareTableRequest,
    DescribeTableRequest,
    DropNamespaceRequest,
    ListNamespacesRequest,
    ListTablesRequest,
    connect,
)
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from support.harness import HiveHarness
from support.secure_hms import KEYSTORE_PASSWORD, TlsMetastore, tls_metastore
from support.waiting import wait_until

import lance_metastore  # noqa: F401 - registers the hive2/hive3 aliases
from lance_metastore import Hive2Namespace, Hive3Namespace

ROOT = ListNamespacesRequest(id=[])
SPARK_JOB = Path(__file__).parent / "support" / "kerberos_spark_job.py"


def failure(call: Any, *args: Any) -> LanceNamespaceError:
    with pytest.raises(LanceNamespaceError) as caught:
        call(*args)
    return caught.value


def fill_ticket_cache(kdc: Any, principal: str, keytab: Path, cache: Path) -> str:
    """``kinit -kt``, done with gssapi: a FILE ticket cache for ``principal``."""
    import gssapi

    name = gssapi.Name(kdc.principal(principal), gssapi.NameType.kerberos_principal)
    gssapi.Credentials(
        name=name,
        usage="initiate",
        store={"client_keytab": str(keytab), "ccache": f"FILE:{cache}"},
    )
    return f"FILE:{cache}"


@pytest.fixture
def kerberos_props(kerberized_metastore: Any) -> dict[str, str]:
    return {"uri": kerberized_metastore.uri, **kerberized_metastore.client_properties()}


# --------------------------------------------------------------------------------------------
# Kerberos: the ways to hold credentials
# --------------------------------------------------------------------------------------------


def test_keytab_login_creates_and_serves_a_lance_table(kerberos_props, tmp_path: Path) -> None:
    ns = connect("hive2", {**kerberos_props, "root": str(tmp_path)})
    db = "krb_keytab_db"
    ns.create_namespace(CreateNamespaceRequest(id=[db]))
    location = ns.declare_table(DeclareTableRequest(id=[db, "orders"])).location
    lance.write_dataset(pa.table({"x": [1, 2, 3]}), location)
    described = ns.describe_table(DescribeTableRequest(id=[db, "orders"]))
    assert lance.dataset(described.location).count_rows() == 3
    assert ns.list_tables(ListTablesRequest(id=[db])).tables == ["orders"]
    ns.drop_namespace(DropNamespaceRequest(id=[db], behavior="Cascade"))
    ns.close()


def test_ticket_cache_from_krb5ccname(kdc, kerberized_metastore, tmp_path, monkeypatch) -> None:
    cache = fill_ticket_cache(
        kdc, "alice", kerberized_metastore.client_keytab, tmp_path / "alice.cc"
    )
    monkeypatch.setenv("KRB5CCNAME", cache)
    ns = Hive3Namespace(uri=kerberized_metastore.uri, **{"client.auth": "kerberos"})
    assert "hive" in ns.list_namespaces(ROOT).namespaces
    # A principal picked from the cache by name works too; one the cache lacks does not.
    named = Hive2Namespace(
        uri=kerberized_metastore.uri,
        **{"client.auth": "kerberos", "client.kerberos.principal": kdc.principal("alice")},
    )
    named.list_namespaces(ROOT)
    other = Hive2Namespace(
        uri=kerberized_metastore.uri,
        **{"client.auth": "kerberos", "client.kerberos.principal": kdc.principal("nobody")},
    )
    error = failure(other.list_namespaces, ROOT)
    assert error.code == ErrorCode.UNAUTHENTICATED
    assert "nobody@LANCE.TEST" in str(error)


def refusal_with_ticket_cache(uri: str) -> LanceNamespaceError | None:
    """The metastore's refusal of a new connection made with ``KRB5CCNAME``'s ticket, if any.

    A ticket of a 3 s life keeps working for the realm's 2 s clock skew after its end: tests
    wait for this refusal, with a deadline, rather than sleep past that time."""
    ns = Hive2Namespace(uri=uri, **{"client.auth": "kerberos"})
    try:
        ns.list_namespaces(ROOT)
    except LanceNamespaceError as error:
        return error
    finally:
        ns.close()
    return None


def test_keytab_login_renews_an_expired_ticket(
    kdc, kerberized_metastore, tmp_path, monkeypatch
) -> None:
    keytab = kdc.add_principal("brief", max_life="3 seconds")
    ns = Hive2Namespace(
        uri=kerberized_metastore.uri,
        **{
            "client.auth": "kerberos",
            "client.kerberos.principal": kdc.principal("brief"),
            "client.kerberos.keytab": str(keytab),
        },
    )
    ns.list_namespaces(ROOT)
    # A ticket got after the namespace's own login ends no earlier: once the metastore refuses
    # it, the namespace's ticket has expired too (its keytab login keeps a private cache).
    observer = fill_ticket_cache(kdc, "brief", keytab, tmp_path / "observer.cc")
    monkeypatch.setenv("KRB5CCNAME", observer)
    wait_until(
        lambda: refusal_with_ticket_cache(kerberized_metastore.uri),
        30,
        "the metastore to refuse the expired ticket",
        interval=0.5,
    )
    ns.close()  # the next call needs a new, newly authenticated connection
    assert ns.list_namespaces(ROOT).namespaces is not None
    ns.close()


def test_privacy_protection_encrypts_every_frame(java, kdc, tmp_path_factory, tmp_path) -> None:
    """hadoop.rpc.protection=privacy: SASL negotiates auth-conf and pure-sasl wraps frames."""
    from support.secure_hms import kerberized_metastore

    with kerberized_metastore(kdc, tmp_path_factory.mktemp("hms_privacy"), "privacy") as hms:
        props = {"uri": hms.uri, "root": str(tmp_path), **hms.client_properties()}
        ns = Hive2Namespace(**props)
        ns.create_namespace(CreateNamespaceRequest(id=["krb_private"]))
        location = ns.declare_table(DeclareTableRequest(id=["krb_private", "t"])).location
        lance.write_dataset(pa.table({"x": list(range(10))}), location)
        assert ns.list_tables(ListTablesRequest(id=["krb_private"])).tables == ["t"]
        with ns.pool.connection() as connection:
            assert connection.transport.sasl.qop == b"auth-conf"
        ns.close()


def test_pickled_namespace_logs_in_again(kerberos_props) -> None:
    ns = Hive2Namespace(**kerberos_props)
    copy = pickle.loads(pickle.dumps(ns))
    assert copy.list_namespaces(ROOT).namespaces == ns.list_namespaces(ROOT).namespaces


# --------------------------------------------------------------------------------------------
# Kerberos: failures answer 16 (or 17 when the KDC is down), name who and where, and stop
# --------------------------------------------------------------------------------------------


def test_missing_ticket_is_unauthenticated(kerberized_metastore, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'no-such-cache'}")
    security = kerberized_metastore.client_properties()
    harness = HiveHarness(root=tmp_path, uri=kerberized_metastore.uri, security=security)
    before = harness.snapshot()
    ns = Hive2Namespace(uri=kerberized_metastore.uri, **{"client.auth": "kerberos"})
    error = failure(ns.create_namespace, CreateNamespaceRequest(id=["krb_never"]))
    assert error.code == ErrorCode.UNAUTHENTICATED
    message = str(error)
    assert "hive/127.0.0.1" in message and kerberized_metastore.uri in message
    assert "credentials" in message.lower() or "not found" in message.lower()
    assert harness.snapshot() == before


def test_expired_ticket_is_unauthenticated(kdc, kerberized_metastore, tmp_path, monkeypatch):
    keytab = kdc.add_principal("expiring", max_life="3 seconds")
    monkeypatch.setenv(
        "KRB5CCNAME", fill_ticket_cache(kdc, "expiring", keytab, tmp_path / "expiring.cc")
    )
    error = wait_until(
        lambda: refusal_with_ticket_cache(kerberized_metastore.uri),
        30,
        "the metastore to refuse the expired ticket",
        interval=0.5,
    )
    assert error.code == ErrorCode.UNAUTHENTICATED
    assert "expired" in str(error).lower() and "hive/127.0.0.1" in str(error)


def test_unknown_server_principal_is_unauthenticated_and_not_retried(kdc, kerberos_props):
    def asked_for(service: str) -> int:  # ticket requests for it, in the KDC's own log
        return (kdc.directory / "krb5kdc.log").read_text().count(f"{service}/127.0.0.1@")

    per_attempt = {}
    for retries in ("1", "5"):
        service = f"nothive{retries}"
        ns = Hive2Namespace(
            **kerberos_props,
            **{"client.kerberos.service-name": service, "client.retries": retries},
        )
        before = asked_for(service)
        error = failure(ns.list_namespaces, ROOT)
        assert error.code == ErrorCode.UNAUTHENTICATED
        assert f"{service}/127.0.0.1" in str(error)
        assert "not found in Kerberos database" in str(error)
        per_attempt[retries] = asked_for(service) - before
    # One authentication attempt per call, whatever client.retries says.
    assert per_attempt["1"] == per_attempt["5"] >= 1


def test_keytab_without_the_principal_is_unauthenticated_and_hides_the_keys(
    kdc, kerberized_metastore
) -> None:
    keytab = kerberized_metastore.client_keytab
    ns = Hive2Namespace(
        uri=kerberized_metastore.uri,
        **{
            "client.auth": "kerberos",
            "client.kerberos.principal": kdc.principal("mallory"),
            "client.kerberos.keytab": str(keytab),
        },
    )
    error = failure(ns.list_namespaces, ROOT)
    assert error.code == ErrorCode.UNAUTHENTICATED
    message = str(error)
    assert "mallory@LANCE.TEST" in message and str(keytab) in message  # the path is fine
    contents = keytab.read_bytes()
    for start in range(0, len(contents) - 8, 8):  # no run of the keytab's bytes, in any form
        chunk = contents[start : start + 8]
        assert chunk.hex() not in message and chunk.decode("latin-1") not in message


def test_plain_client_and_kerberized_metastore_do_not_mix(
    kerberized_metastore, hive_metastore_uri, kerberos_props
) -> None:
    plain = Hive2Namespace(uri=kerberized_metastore.uri, **{"client.retries": "1"})
    error = failure(plain.list_namespaces, ROOT)
    assert error.code == ErrorCode.SERVICE_UNAVAILABLE
    assert kerberized_metastore.uri.split("//")[1] in str(error)

    props = {**kerberos_props, "uri": hive_metastore_uri}
    error = failure(Hive2Namespace(**props).list_namespaces, ROOT)
    assert error.code == ErrorCode.UNAUTHENTICATED
    assert hive_metastore_uri in str(error) and "Kerberos" in str(error)


def test_kdc_down_is_service_unavailable_then_recovers(kdc, kerberos_props) -> None:
    keytab = kdc.add_principal("carol")
    ns = Hive2Namespace(
        **{
            **kerberos_props,
            "client.kerberos.principal": kdc.principal("carol"),
            "client.kerberos.keytab": str(keytab),
        }
    )
    kdc.stop()
    try:
        error = failure(ns.list_namespaces, ROOT)  # carol has no ticket yet: asks the KDC
        assert error.code == ErrorCode.SERVICE_UNAVAILABLE
        assert "carol@LANCE.TEST" in str(error) and "KDC" in str(error)
    finally:
        kdc.start()
    assert ns.list_namespaces(ROOT).namespaces is not None
    # Namespaces that log in alike share their ticket: alice's, obtained earlier, needs no KDC.
    kdc.stop()
    try:
        assert Hive2Namespace(**kerberos_props).list_namespaces(ROOT).namespaces is not None
    finally:
        kdc.start()


# --------------------------------------------------------------------------------------------
# Kerberos: pooled connections, fail-over and reconnects authenticate the same way
# --------------------------------------------------------------------------------------------


def test_fail_over_to_a_kerberized_metastore(kerberized_metastore, kerberos_props) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"thrift://127.0.0.1:{sock.getsockname()[1]}"
    ns = Hive2Namespace(**{**kerberos_props, "uri": f"{dead},{kerberized_metastore.uri}"})
    assert ns.list_namespaces(ROOT).namespaces is not None
    # The pool's connections are all authenticated ones, used concurrently.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: ns.list_namespaces(ROOT).namespaces, range(12)))
    assert all(r == results[0] for r in results)
    assert 1 <= ns.pool.open_connections <= 3


def test_kerberized_metastore_restart_reauthenticates(kerberized_metastore, kerberos_props):
    ns = Hive2Namespace(**kerberos_props)
    before = ns.list_namespaces(ROOT).namespaces
    kerberized_metastore.metastore.restart()
    # The idle connections died with the server; new ones log in again, transparently.
    assert ns.list_namespaces(ROOT).namespaces == before


# --------------------------------------------------------------------------------------------
# The CLI and the Spark data source reach the kerberized metastore
# --------------------------------------------------------------------------------------------


def test_cli_with_keytab_and_with_ticket_cache(kdc, kerberized_metastore, tmp_path) -> None:
    base = [sys.executable, "-m", "lance_metastore.cli", "--impl", "hive2"]
    base += ["--uri", kerberized_metastore.uri, "--root", str(tmp_path)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANCE_METASTORE_")}
    keytab = [
        "--prop",
        "client.auth=kerberos",
        "--prop",
        f"client.kerberos.principal={kerberized_metastore.client_principal}",
        "--prop",
        f"client.kerberos.keytab={kerberized_metastore.client_keytab}",
    ]

    def run(*args: str, cache: str | None = None) -> subprocess.CompletedProcess[str]:
        extra = {"KRB5CCNAME": cache} if cache else {}
        return subprocess.run(
            [*base, *args], env={**env, **extra}, capture_output=True, text=True, timeout=120
        )

    created = run(*keytab, "create-namespace", "krb_cli")
    assert created.returncode == 0, created.stderr
    cache = fill_ticket_cache(kdc, "alice", kerberized_metastore.client_keytab, tmp_path / "cli.cc")
    listed = run("--prop", "client.auth=kerberos", "ls", "--json", cache=cache)
    assert listed.returncode == 0, listed.stderr
    assert "krb_cli" in listed.stdout
    refused = run("--prop", "client.auth=kerberos", "ls", cache=f"FILE:{tmp_path}/none")
    assert refused.returncode != 0
    assert "code 16 UNAUTHENTICATED" in refused.stderr and "hive/127.0.0.1" in refused.stderr
    assert run(*keytab, "drop-namespace", "krb_cli").returncode == 0


def test_spark_executors_authenticate(kdc, kerberized_metastore, tmp_path) -> None:
    """Spark local[2] in its own process, as spark-submit on a kerberized cluster runs: the
    realm's krb5.conf in the environment of driver and executors; the write logs in from the
    keytab named in the options, the read uses the ticket cache in KRB5CCNAME."""
    cache = fill_ticket_cache(
        kdc, "alice", kerberized_metastore.client_keytab, tmp_path / "spark.cc"
    )
    env = {**os.environ, "KRB5CCNAME": cache}
    job = subprocess.run(
        [
            sys.executable,
            str(SPARK_JOB),
            kerberized_metastore.uri,
            str(tmp_path / "lake"),
            kerberized_metastore.client_principal,
            str(kerberized_metastore.client_keytab),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    assert "rows read back: 1000" in job.stdout
    assert "managed rows read back: 1000" in job.stdout
    assert "managed version 1 rows: 500" in job.stdout


# --------------------------------------------------------------------------------------------
# TLS
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_hms(java: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsMetastore]:
    with tls_metastore(tmp_path_factory.mktemp("hms_tls")) as metastore:
        yield metastore


def test_tls_metastore_serves_the_namespace(tls_hms: TlsMetastore, tmp_path: Path) -> None:
    harness = HiveHarness(root=tmp_path, uri=tls_hms.uri, security=tls_hms.client_properties())
    ns = harness.connect()
    db = harness.unique("tls")
    ns.create_namespace(CreateNamespaceRequest(id=[db]))
    location = ns.declare_table(DeclareTableRequest(id=[db, "t"])).location
    lance.write_dataset(pa.table({"x": [1, 2]}), location)
    assert harness.snapshot()[f"database {db}"]["tables"]["t"]["location"].endswith("t.lance")
    assert ns.list_tables(ListTablesRequest(id=[db])).tables == ["t"]
    ns.drop_namespace(DropNamespaceRequest(id=[db], behavior="Cascade"))


def test_tls_client_certificate_with_encrypted_key(tls_hms: TlsMetastore, tmp_path) -> None:
    from cryptography.hazmat.primitives import serialization

    certs = tls_hms.certificates
    key = serialization.load_pem_private_key(certs.client_key.read_bytes(), None)
    password = "Kp4-KeyPassword-DoNotPrint"
    encrypted = tmp_path / "client-encrypted.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password.encode()),
        )
    )
    props = {
        "uri": tls_hms.uri,
        **tls_hms.client_properties(),
        "client.tls.cert": str(certs.client_cert),
        "client.tls.key": str(encrypted),
        "client.tls.key-password": password,
    }
    ns = Hive2Namespace(**props)
    assert "default" in ns.list_namespaces(ROOT).namespaces
    assert password not in repr(ns) and password not in ns.namespace_id()
    with pytest.raises(LanceNamespaceError) as caught:
        Hive2Namespace(**{**props, "client.tls.key-password": "wrong-" + password})
    assert caught.value.code == ErrorCode.INVALID_INPUT
    assert password not in str(caught.value) and str(encrypted) in str(caught.value)


def test_untrusted_certificate_is_unauthenticated(tls_hms: TlsMetastore) -> None:
    other = {"client.tls": "true", "client.tls.ca-cert": str(tls_hms.certificates.other_ca)}
    error = failure(Hive2Namespace(uri=tls_hms.uri, **other).list_namespaces, ROOT)
    assert error.code == ErrorCode.UNAUTHENTICATED
    assert tls_hms.uri in str(error) and "not trusted" in str(error)


def test_certificate_for_another_host_is_unauthenticated(tls_hms: TlsMetastore) -> None:
    uri = tls_hms.uri.replace("127.0.0.1", "localhost")
    ns = Hive2Namespace(uri=uri, **tls_hms.client_properties())
    error = failure(ns.list_namespaces, ROOT)
    assert error.code == ErrorCode.UNAUTHENTICATED
    assert "localhost" in str(error) and "mismatch" in str(error).lower()


def test_tls_and_plain_do_not_mix(tls_hms: TlsMetastore, hive_metastore_uri: str) -> None:
    plain = Hive2Namespace(uri=tls_hms.uri, **{"client.retries": "1"})
    assert failure(plain.list_namespaces, ROOT).code == ErrorCode.SERVICE_UNAVAILABLE
    tls = Hive2Namespace(uri=hive_metastore_uri, **tls_hms.client_properties())
    error = failure(tls.list_namespaces, ROOT)
    assert error.code in (ErrorCode.UNAUTHENTICATED, ErrorCode.SERVICE_UNAVAILABLE)
    assert hive_metastore_uri.split("//")[1] in str(error)


def test_tls_fail_over_and_restart(tls_hms: TlsMetastore) -> None:
    ns = Hive2Namespace(uri=f"{tls_hms.uri},{tls_hms.uri}", **tls_hms.client_properties())
    before = ns.list_namespaces(ROOT).namespaces
    tls_hms.metastore.restart()
    assert ns.list_namespaces(ROOT).namespaces == before
    assert KEYSTORE_PASSWORD not in tls_hms.metastore.log_path.read_text(errors="replace")


# --------------------------------------------------------------------------------------------
# Bad security properties: 13 at construction, naming the property, nothing contacted
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        ({"client.auth": "ntlm"}, "client.auth"),
        ({"client.auth": "kerberos", "client.kerberos.keytab": "/x.keytab"}, "principal"),
        (
            {
                "client.auth": "kerberos",
                "client.kerberos.principal": "a@R",
                "client.kerberos.keytab": "/no/such.keytab",
            },
            "/no/such.keytab",
        ),
        ({"client.kerberos.principal": "a@R"}, "client.kerberos.principal"),
        ({"client.kerberos.service-name": ""}, "client.kerberos.service-name"),
        ({"client.tls": "maybe"}, "client.tls"),
        ({"client.tls.ca-cert": "/ca.pem"}, "client.tls.ca-cert"),
        ({"client.tls": "true", "client.tls.ca-cert": "/no/ca.pem"}, "/no/ca.pem"),
        ({"client.tls": "true", "client.tls.key": __file__}, "client.tls.key"),
    ],
)
def test_bad_security_properties(properties: dict[str, str], named: str) -> None:
    with pytest.raises(LanceNamespaceError) as caught:
        Hive2Namespace(uri="thrift://127.0.0.1:9", **properties)
    assert caught.value.code == ErrorCode.INVALID_INPUT
    assert named in str(caught.value)


def test_unreadable_ca_file_is_invalid_input(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    with pytest.raises(LanceNamespaceError) as caught:
        Hive2Namespace(
            uri="thrift://127.0.0.1:9", **{"client.tls": "true", "client.tls.ca-cert": str(bad)}
        )
    assert caught.value.code == ErrorCode.INVALID_INPUT
    assert str(bad) in str(caught.value)


def test_kerberos_without_the_extra_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "kerberos", None)  # as if the extra were not installed
    with pytest.raises(LanceNamespaceError) as caught:
        Hive2Namespace(uri="thrift://127.0.0.1:9", **{"client.auth": "kerberos"})
    assert caught.value.code == ErrorCode.INVALID_INPUT
    assert "lance-metastore[kerberos]" in str(caught.value)


def test_a_tls_metastore_listening_everywhere_is_warned_about(
    tls_hms: TlsMetastore, caplog: pytest.LogCaptureFixture
) -> None:
    """HMS 2.3 with TLS cannot use the launcher's bind guard (hive.local): it listens on every
    interface, and start() says so instead of staying silent."""
    from lance_metastore.hive import local as hms_local

    if hms_local.listening_addresses(tls_hms.metastore.port) is None:
        pytest.skip("the kernel does not list listening sockets here (not Linux)")
    with caplog.at_level(logging.WARNING, logger="lance_metastore.hms_local"):
        tls_hms.metastore._warn_if_listening_beyond_host()
    assert "listens on every interface" in caplog.text
