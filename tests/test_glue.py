"""Glue-specific tests: catalog hierarchy, configuration, credentials, errors, secrets, S3, columns.

The generic operations are covered by test_behaviour.py. Everything here talks to the Glue
emulator (tests/support/glue_emulator.py: Glue emulated, STS, S3 and IAM relayed to moto's real
server, all on one port of 127.0.0.1) over HTTP; nothing of ours, boto3's or botocore's is mocked.
Server-side facts are read back from the server: with boto3 clients of its own, with the
emulator's request log (moto's request recorder for moto's server as shipped), or from moto's
in-process STS backend. Tests that need emulator-only helpers skip against real AWS Glue
(``LANCE_METASTORE_TEST_GLUE_REAL=1``).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import logging
import pickle
import re
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lance
import lance_namespace
import lancedb
import pyarrow as pa
import pytest
from botocore.exceptions import ClientError
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from support.glue_emulator import GlueEmulator, RecordedRequest, glue_endpoint_from_env
from support.harness import GlueHarness
from support.waiting import wait_until

import lance_metastore
from lance_metastore import GlueNamespace
from lance_metastore.rules.versions import manifest_name

emulator_only = pytest.mark.skipif(
    glue_endpoint_from_env() is not None,
    reason="needs emulator-only helpers (fault injection, federation, moto internals)",
)

DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})
ROLE_ARN = "arn:aws:iam::123456789012:role/test"
NO_RETRIES = {"retries": {"total_max_attempts": 1}}

# Distinctive secret values: any of them showing up somewhere is a leak.
SECRET_PROPS = {
    "access_key_id": "AKIAQQLEAKCANARY7777",
    "secret_access_key": "sEcReT/AcCeSs+KeY-canary-9f8e7d",
    "session_token": "SeSsIoNtOkEn-canary-31415926",
    "assume_role_external_id": "ExTeRnAl-Id-canary-2718",
    "storage.aws_secret_access_key": "StOrAgE-sEcReT-canary-1618",
}
SECRETS = list(SECRET_PROPS.values())


class DictWithModelDump(dict):
    """The request shape Lance's Rust core hands to a Python namespace."""

    def model_dump(self) -> dict[str, Any]:
        return dict(self)


def code_of(call: Callable[..., Any], *args: Any, **kwargs: Any) -> ErrorCode:
    with pytest.raises(LanceNamespaceError) as caught:
        call(*args, **kwargs)
    return caught.value.code


def error_of(call: Callable[..., Any], *args: Any, **kwargs: Any) -> LanceNamespaceError:
    with pytest.raises(LanceNamespaceError) as caught:
        call(*args, **kwargs)
    return caught.value


def free_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def moto_api(emulator: GlueEmulator, path: str, body: str = "") -> bytes:
    request = urllib.request.Request(
        f"{emulator.endpoint}/moto-api/{path}",
        data=body.encode(),
        method="POST",
        headers={"Content-Type": "text/plain"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


def assert_no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"secret {secret[:8]}... leaked into {where}: {text[:300]}"


@pytest.fixture
def ns(glue: GlueHarness) -> GlueNamespace:
    return glue.connect()


@pytest.fixture
def raw(glue: GlueHarness) -> Any:
    """A plain boto3 Glue client on the emulator, to check what the server holds."""
    return glue.emulator.client("glue")


@pytest.fixture
def account(glue: GlueHarness) -> str:
    return glue.emulator.account_id


# ---------------------------------------------------------------------------------------------
# Requests as the server saw them (moto's request recorder)
# ---------------------------------------------------------------------------------------------


class Recording:
    """Requests as the server saw them: the emulator's own log, or moto's recorder file."""

    def __init__(self, source: list[RecordedRequest] | Path) -> None:
        self.source = source

    def _raw(self) -> list[tuple[dict[str, str], str]]:
        if isinstance(self.source, list):
            return [(r.headers, r.body.decode("utf-8", "replace")) for r in self.source]
        entries = []
        if not self.source.exists():
            return entries
        for line in self.source.read_text().splitlines():
            entry = json.loads(line)
            body = entry.get("body") or ""
            if entry.get("body_encoded"):
                body = base64.b64decode(body).decode("utf-8", "replace")
            entries.append(({k.lower(): v for k, v in entry["headers"].items()}, body))
        return entries

    def requests(self) -> list[dict[str, Any]]:
        entries = []
        for headers, body in self._raw():
            match = re.search(
                r"Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/", headers.get("authorization", "")
            )
            entries.append(
                {
                    "service": match.group(2) if match else None,
                    "access_key": match.group(1) if match else None,
                    "token": headers.get("x-amz-security-token"),
                    "target": headers.get("x-amz-target", ""),
                    "body": body,
                }
            )
        return entries

    def glue(self) -> list[dict[str, Any]]:
        return [r for r in self.requests() if r["target"].startswith("AWSGlue.")]

    def assume_role_calls(self) -> list[dict[str, Any]]:
        calls = []
        for r in self.requests():
            form = urllib.parse.parse_qs(r["body"]) if r["service"] == "sts" else {}
            if form.get("Action") == ["AssumeRole"]:
                calls.append({**r, "form": {k: v[0] for k, v in form.items()}})
        return calls


@contextlib.contextmanager
def _recording(server: Any, tmp_path: Path) -> Iterator[Recording]:
    """The emulator's request log, or moto's request recorder for moto's server as shipped."""
    if isinstance(server, GlueEmulator):
        with server.recording() as log:
            yield Recording(log)
        return
    from moto.moto_api import recorder

    previous = recorder._location
    recorder._location = str(tmp_path / "requests.jsonl")
    moto_api(server, "recorder/reset-recording")
    moto_api(server, "recorder/start-recording")
    try:
        yield Recording(tmp_path / "requests.jsonl")
    finally:
        moto_api(server, "recorder/stop-recording")
        recorder._location = previous


@pytest.fixture
def recording(glue: GlueHarness, tmp_path: Path) -> Iterator[Recording]:
    with _recording(glue.emulator, tmp_path) as recorded:
        yield recorded


# ---------------------------------------------------------------------------------------------
# 1. Multi-level catalogs
# ---------------------------------------------------------------------------------------------


def test_catalog_holds_databases_and_lance_tables(glue: GlueHarness, ns, raw, account):
    created = ns.create_namespace(
        {"id": ["cat"], "properties": {"glue.kind": "catalog", "description": "sales lake"}}
    )
    assert created.properties["description"] == "sales lake"
    ns.create_namespace({"id": ["cat", "db"], "properties": {"team": "etl"}})
    table_id = ["cat", "db", "t"]
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="append")
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 6

    location = ns.describe_table({"id": table_id}).location
    assert location == str(glue.root / "cat" / "db" / "t.lance")
    assert ns.list_tables({"id": ["cat", "db"]}).tables == ["t"]
    assert ns.list_namespaces({"id": ["cat"]}).namespaces == ["db"]
    assert ns.list_namespaces({"id": ["cat", "db"]}).namespaces == []
    assert ns.describe_namespace({"id": ["cat", "db"]}).properties == {"team": "etl"}

    # Server side: the database and table live in catalog <account>:cat, not in the root.
    catalog_id = f"{account}:cat"
    table = raw.get_table(CatalogId=catalog_id, DatabaseName="db", Name="t")["Table"]
    assert table["Parameters"]["table_type"] == "lance"
    assert table["StorageDescriptor"]["Location"] == location
    assert raw.get_catalog(CatalogId=catalog_id)["Catalog"]["Description"] == "sales lake"
    assert raw.get_databases()["DatabaseList"] == []


def test_root_lists_databases_and_child_catalogs_sorted(ns):
    for name in ["zulu", "alpha"]:
        ns.create_namespace({"id": [name]})
    for name in ["mike", "bravo"]:
        ns.create_namespace({"id": [name], "properties": {"glue.kind": "catalog"}})
    ns.create_namespace({"id": ["mike", "inner"]})
    assert ns.list_namespaces({"id": []}).namespaces == ["alpha", "bravo", "mike", "zulu"]
    first = ns.list_namespaces({"id": [], "limit": 3})
    rest = ns.list_namespaces({"id": [], "page_token": first.page_token})
    assert first.namespaces + rest.namespaces == ["alpha", "bravo", "mike", "zulu"]
    # A database of a child catalog is not a database of the root.
    assert code_of(ns.describe_namespace, {"id": ["inner"]}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(ns.list_tables, {"id": ["inner"]}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert ns.list_tables({"id": ["mike", "inner"]}).tables == []
    # A catalog holds databases, never tables.
    assert code_of(ns.declare_table, {"id": ["mike", "t"]}) == ErrorCode.NAMESPACE_NOT_FOUND


def test_describe_and_overwrite_a_catalog(ns, raw, account):
    ns.create_namespace(
        {
            "id": ["cat"],
            "properties": {"glue.kind": "catalog", "description": "d1", "owner": "data"},
        }
    )
    assert ns.describe_namespace({"id": ["cat"]}).properties == {
        "owner": "data",
        "description": "d1",
    }
    ns.namespace_exists({"id": ["cat"]})
    assert code_of(ns.create_namespace, {"id": ["cat"]}) == ErrorCode.NAMESPACE_ALREADY_EXISTS
    kept = ns.create_namespace({"id": ["cat"], "mode": "exist_ok", "properties": {"x": "1"}})
    assert kept.properties["owner"] == "data"

    replaced = ns.create_namespace(
        {"id": ["cat"], "mode": "overwrite", "properties": {"owner": "ml", "description": "d2"}}
    )
    assert replaced.properties == {"owner": "ml", "description": "d2"}
    catalog = raw.get_catalog(CatalogId=f"{account}:cat")["Catalog"]
    assert catalog["Parameters"] == {"owner": "ml"}
    assert catalog["Description"] == "d2"
    # OVERWRITE may not turn a catalog into a database (or back).
    request = {"id": ["cat"], "mode": "overwrite", "properties": {"glue.kind": "database"}}
    assert code_of(ns.create_namespace, request) == ErrorCode.INVALID_INPUT
    bad_kind = {"id": ["other"], "properties": {"glue.kind": "schema"}}
    assert code_of(ns.create_namespace, bad_kind) == ErrorCode.INVALID_INPUT
    assert ns.list_namespaces({"id": []}).namespaces == ["cat"]


def test_drop_catalog_only_when_empty(ns, raw, account):
    ns.create_namespace({"id": ["cat"], "properties": {"glue.kind": "catalog", "k": "v"}})
    ns.create_namespace({"id": ["cat", "db"]})
    ns.declare_table({"id": ["cat", "db", "t"]})
    assert code_of(ns.drop_namespace, {"id": ["cat"]}) == ErrorCode.NAMESPACE_NOT_EMPTY
    assert code_of(ns.drop_namespace, {"id": ["cat", "db"]}) == ErrorCode.NAMESPACE_NOT_EMPTY
    cascade = {"id": ["cat"], "behavior": "CASCADE"}
    assert code_of(ns.drop_namespace, cascade) == ErrorCode.UNSUPPORTED
    raw.get_catalog(CatalogId=f"{account}:cat")  # still there

    ns.deregister_table({"id": ["cat", "db", "t"]})
    ns.drop_namespace({"id": ["cat", "db"]})
    ns.drop_namespace({"id": ["cat"]})
    assert ns.list_namespaces({"id": []}).namespaces == []
    assert code_of(ns.describe_namespace, {"id": ["cat"]}) == ErrorCode.NAMESPACE_NOT_FOUND
    with pytest.raises(ClientError, match="EntityNotFoundException"):
        raw.get_catalog(CatalogId=f"{account}:cat")
    ns.drop_namespace({"id": ["cat"], "mode": "skip"})


@emulator_only
def test_catalog_with_a_federated_child_is_not_empty(glue: GlueHarness, ns, account):
    ns.create_namespace({"id": ["cat"], "properties": {"glue.kind": "catalog"}})
    glue.emulator.add_federated_catalog(f"{account}:cat", "bucket")
    assert code_of(ns.drop_namespace, {"id": ["cat"]}) == ErrorCode.NAMESPACE_NOT_EMPTY
    ns.namespace_exists({"id": ["cat"]})


def test_catalogs_are_created_only_under_the_account_root(glue: GlueHarness, ns, account):
    ns.create_namespace({"id": ["cat"], "properties": {"glue.kind": "catalog"}})
    deeper = {"id": ["cat", "sub"], "properties": {"glue.kind": "catalog"}}
    assert code_of(ns.create_namespace, deeper) == ErrorCode.UNSUPPORTED
    # Under a nested root catalog, CreateCatalog could not place the child either.
    nested_root = glue.connect(catalog_id=f"{account}:cat")
    child = {"id": ["sub"], "properties": {"glue.kind": "catalog"}}
    assert code_of(nested_root.create_namespace, child) == ErrorCode.UNSUPPORTED
    assert ns.list_namespaces({"id": ["cat"]}).namespaces == []
    assert ns.list_namespaces({"id": []}).namespaces == ["cat"]


def test_catalog_name_rules(ns, raw):
    for name in ["dots.in.name", "aws:reserved", "c" * 65, "a/b", "back\\slash", "x\ty"]:
        request = {"id": [name], "properties": {"glue.kind": "catalog"}}
        assert code_of(ns.create_namespace, request) == ErrorCode.INVALID_INPUT, name
    assert ns.list_namespaces({"id": []}).namespaces == []
    assert raw.get_databases()["DatabaseList"] == []


def test_catalog_name_of_64_characters_is_fine(ns):
    name = "c" * 64
    ns.create_namespace({"id": [name], "properties": {"glue.kind": "catalog"}})
    ns.create_namespace({"id": [name, "db"]})
    ns.declare_table({"id": [name, "db", "t"]})
    ns.table_exists({"id": f"{name}$db$t"})


@emulator_only
def test_federated_nested_catalog_is_traversed(glue: GlueHarness, ns, raw, account):
    ns.create_namespace({"id": ["cat"], "properties": {"glue.kind": "catalog"}})
    federated = glue.emulator.add_federated_catalog(
        f"{account}:cat", "bucket", {"source": "s3tables"}
    )
    assert federated == f"{account}:cat/bucket"
    assert ns.list_namespaces({"id": ["cat"]}).namespaces == ["bucket"]
    assert ns.describe_namespace({"id": ["cat", "bucket"]}).properties == {"source": "s3tables"}

    ns.create_namespace({"id": ["cat", "bucket", "db"], "properties": {"p": "1"}})
    declared = ns.declare_table({"id": ["cat", "bucket", "db", "t"]})
    assert declared.location == str(glue.root / "cat" / "bucket" / "db" / "t.lance")
    described = ns.describe_table({"id": "cat$bucket$db$t"})
    assert described.location == declared.location
    assert described.namespace == ["cat", "bucket", "db"]
    assert ns.list_namespaces({"id": ["cat", "bucket"]}).namespaces == ["db"]
    assert ns.list_tables({"id": ["cat", "bucket", "db"]}).tables == ["t"]
    assert ns.describe_namespace({"id": ["cat", "bucket", "db"]}).properties == {"p": "1"}

    # Server side: the database is scoped to the federated catalog's id.
    assert raw.get_database(CatalogId=federated, Name="db")["Database"]["Parameters"] == {"p": "1"}
    assert raw.get_table(CatalogId=federated, DatabaseName="db", Name="t")["Table"]["Name"] == "t"
    with pytest.raises(ClientError, match="EntityNotFoundException"):
        raw.get_database(CatalogId=f"{account}:cat", Name="db")
    # Federated catalogs are traversed, never created.
    sibling = {"id": ["cat", "bucket2"], "properties": {"glue.kind": "catalog"}}
    assert code_of(ns.create_namespace, sibling) == ErrorCode.UNSUPPORTED


def test_two_part_ids_mean_root_databases(ns, raw, account):
    ns.create_namespace({"id": ["cat"], "properties": {"glue.kind": "catalog"}})
    ns.create_namespace({"id": ["db"]})
    ns.create_namespace({"id": ["cat", "db"]})
    ns.declare_table({"id": ["db", "t"]})
    root_table = raw.get_table(DatabaseName="db", Name="t")["Table"]
    assert root_table["CatalogId"] == account
    with pytest.raises(ClientError, match="EntityNotFoundException"):
        raw.get_table(CatalogId=f"{account}:cat", DatabaseName="db", Name="t")
    assert ns.list_tables({"id": ["db"]}).tables == ["t"]
    assert ns.list_tables({"id": ["cat", "db"]}).tables == []
    assert code_of(ns.table_exists, {"id": ["cat", "db", "t"]}) == ErrorCode.TABLE_NOT_FOUND


def test_catalog_id_property_makes_a_catalog_the_root(glue: GlueHarness, ns, raw, account):
    ns.create_namespace({"id": ["cat"], "properties": {"glue.kind": "catalog"}})
    ns.create_namespace({"id": ["rootdb"]})
    rooted = glue.connect(catalog_id=f"{account}:cat")
    assert rooted.describe_namespace({"id": []}).properties == {"catalog_id": f"{account}:cat"}
    rooted.create_namespace({"id": ["db"]})
    rooted.declare_table({"id": ["db", "t"]})
    assert rooted.list_namespaces({"id": []}).namespaces == ["db"]
    assert rooted.list_tables({"id": ["db"]}).tables == ["t"]
    assert raw.get_table(CatalogId=f"{account}:cat", DatabaseName="db", Name="t")
    # The same objects, seen from the account's root catalog.
    assert ns.list_tables({"id": ["cat", "db"]}).tables == ["t"]
    assert code_of(ns.describe_namespace, {"id": ["db"]}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(rooted.describe_namespace, {"id": ["rootdb"]}) == ErrorCode.NAMESPACE_NOT_FOUND


@emulator_only
def test_catalog_id_of_a_federated_catalog_as_root(glue: GlueHarness, ns, account):
    ns.create_namespace({"id": ["cat"], "properties": {"glue.kind": "catalog"}})
    glue.emulator.add_federated_catalog(f"{account}:cat", "bucket")
    rooted = glue.connect(catalog_id=f"{account}:cat")
    assert rooted.list_namespaces({"id": []}).namespaces == ["bucket"]
    rooted.create_namespace({"id": ["bucket", "db"]})
    rooted.declare_table({"id": ["bucket", "db", "t"]})
    assert ns.list_tables({"id": ["cat", "bucket", "db"]}).tables == ["t"]
    deepest = glue.connect(catalog_id=f"{account}:cat/bucket")
    assert deepest.list_namespaces({"id": []}).namespaces == ["db"]
    assert deepest.list_tables({"id": ["db"]}).tables == ["t"]


# ---------------------------------------------------------------------------------------------
# 2. Configuration
# ---------------------------------------------------------------------------------------------

BASE = {"region": "us-east-1", "endpoint": "http://127.0.0.1:1"}


@pytest.mark.parametrize(
    ("props", "fragment"),
    [
        ({"assume_role_timeout_sec": "soon"}, "assume_role_timeout_sec"),
        ({"assume_role_timeout_sec": "0"}, "assume_role_timeout_sec"),
        ({"catalog_id": ""}, "catalog_id"),
        ({"catalog_id": "   "}, "catalog_id"),
        ({"catalog_id": "sales"}, "catalog_id"),
        ({"catalog_id": "12345"}, "catalog_id"),
        ({"catalog_id": "123456789012:"}, "catalog_id"),
        ({"catalog_id": "123456789012:a:b"}, "catalog_id"),
        ({"access_key_id": "AKIAONLYTHEKEY"}, "secret_access_key"),
        ({"secret_access_key": "only-the-secret"}, "access_key_id"),
        ({"session_token": "token-without-keys"}, "session_token"),
        ({"retry_mode": "eventually"}, "retry_mode"),
        ({"max_retries": "many"}, "max_retries"),
        ({"max_retries": "0"}, "max_retries"),
        ({"connect_timeout_sec": "-1"}, "connect_timeout_sec"),
        ({"read_timeout_sec": "fast"}, "read_timeout_sec"),
        ({"endpoint": "not a url"}, "endpoint"),
        ({"endpoint": "ftp://glue.example.com"}, "endpoint"),
        ({"sts_endpoint": "127.0.0.1:9000"}, "sts_endpoint"),
        ({"region": ""}, "region"),
        ({"root": " "}, "root"),
        ({"storage.": "x"}, "storage."),
    ],
)
def test_invalid_configuration_is_refused_at_construction(props, fragment):
    error = error_of(GlueNamespace, **{**BASE, **props})
    assert error.code == ErrorCode.INVALID_INPUT
    assert fragment in str(error)
    for key in ("session_token", "secret_access_key", "access_key_id"):
        if key in props:
            assert props[key] not in str(error)  # secrets are not echoed back


def test_unknown_property_suggests_the_close_name():
    error = error_of(GlueNamespace, **BASE, regoin="us-west-2")
    assert error.code == ErrorCode.INVALID_INPUT
    assert "'regoin'" in str(error) and "did you mean 'region'" in str(error)
    error = error_of(GlueNamespace, **BASE, assume_role_timeout="60")
    assert "did you mean 'assume_role_timeout_sec'" in str(error)
    # lance_namespace.connect wraps whatever the constructor raises in a ValueError.
    with pytest.raises(ValueError, match="unknown property 'bogus'"):
        lance_namespace.connect("glue", {**BASE, "bogus": "1"})


def test_construction_does_no_io():
    # Nothing listens on port 1: a namespace is still built, and fails only when used.
    ns = GlueNamespace(**BASE, max_retries="1", connect_timeout_sec="1")
    assert "127.0.0.1:1" in ns.namespace_id()


def test_storage_options_reach_lance_without_prefix(glue: GlueHarness):
    ns = glue.connect(
        **{"storage.aws_region": "us-west-2", "storage.timeout": "30s", "storage.allow_http": "1"}
    )
    ns.create_namespace({"id": ["db"]})
    expected = {"aws_region": "us-west-2", "timeout": "30s", "allow_http": "1"}
    assert ns.declare_table({"id": ["db", "t"]}).storage_options == expected
    assert ns.describe_table({"id": ["db", "t"]}).storage_options == expected
    plain = glue.connect()
    assert plain.describe_table({"id": ["db", "t"]}).storage_options is None


def test_default_root_is_the_current_directory(glue: GlueHarness, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    props = {k: v for k, v in glue.properties().items() if k != "root"}
    ns = GlueNamespace(**props)
    ns.create_namespace({"id": ["db"]})
    declared = ns.declare_table({"id": ["db", "t"]})
    assert declared.location == str(tmp_path / "db" / "t.lance")
    lance.write_dataset(DATA, namespace_client=ns, table_id=["db", "w"], mode="create")
    assert (tmp_path / "db" / "w.lance" / "_versions").is_dir()


@pytest.fixture
def no_ambient_credentials(monkeypatch, tmp_path):
    """No AWS credentials anywhere: environment, files, instance metadata."""
    for key in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ]:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@emulator_only
def test_missing_credentials_are_unauthenticated(glue: GlueHarness, no_ambient_credentials):
    endpoint = glue.emulator.endpoint
    ns = GlueNamespace(endpoint=endpoint, region="us-east-1", max_retries="1")
    assert code_of(ns.describe_namespace, {"id": ["db"]}) == ErrorCode.UNAUTHENTICATED
    assert code_of(ns.list_namespaces, {"id": []}) == ErrorCode.UNAUTHENTICATED
    role = GlueNamespace(endpoint=endpoint, region="us-east-1", assume_role_arn=ROLE_ARN)
    assert code_of(role.list_namespaces, {"id": []}) == ErrorCode.UNAUTHENTICATED


@emulator_only
def test_unknown_profile_is_invalid_input(glue: GlueHarness, no_ambient_credentials):
    ns = GlueNamespace(endpoint=glue.emulator.endpoint, region="us-east-1", profile_name="nope")
    error = error_of(ns.describe_namespace, {"id": ["db"]})
    assert error.code == ErrorCode.INVALID_INPUT
    assert "nope" in str(error)


def test_profile_credentials_are_used(glue: GlueHarness, no_ambient_credentials, tmp_path):
    (tmp_path / "no-credentials").write_text(
        "[lake]\naws_access_key_id = AKIAPROFILEKEY000001\naws_secret_access_key = s3cr3t\n"
    )
    ns = GlueNamespace(
        endpoint=glue.emulator.endpoint, region="us-east-1", profile_name="lake", root="/x"
    )
    ns.create_namespace({"id": ["from_profile"]})
    assert "from_profile" in ns.list_namespaces({"id": []}).namespaces


# ---------------------------------------------------------------------------------------------
# 3. Authentication
# ---------------------------------------------------------------------------------------------


@emulator_only
def test_static_keys_sign_every_glue_request(glue: GlueHarness, recording):
    ns = glue.connect(access_key_id="AKIASTATICKEY0000001", secret_access_key="static-secret")
    ns.create_namespace({"id": ["db"]})
    ns.declare_table({"id": ["db", "t"]})
    calls = recording.glue()
    assert {c["target"] for c in calls} >= {"AWSGlue.CreateDatabase", "AWSGlue.CreateTable"}
    assert {c["access_key"] for c in calls} == {"AKIASTATICKEY0000001"}
    assert {c["token"] for c in calls} == {None}


@emulator_only
def test_session_token_is_sent_with_every_glue_request(glue: GlueHarness, recording):
    ns = glue.connect(
        access_key_id="ASIATEMPORARYKEY0001",
        secret_access_key="temp-secret",
        session_token="session-token-value",
    )
    ns.create_namespace({"id": ["db"]})
    ns.list_namespaces({"id": []})
    calls = recording.glue()
    assert len(calls) >= 3
    assert {(c["access_key"], c["token"]) for c in calls} == {
        ("ASIATEMPORARYKEY0001", "session-token-value")
    }
    # An account lookup (no catalog_id), when one is needed, uses the same credentials.
    ns.describe_namespace({"id": ["db"]})
    ns.create_namespace({"id": ["cat"], "properties": {"glue.kind": "catalog"}})
    sts_calls = [r for r in recording.requests() if r["service"] == "sts"]
    assert sts_calls and {(c["access_key"], c["token"]) for c in sts_calls} == {
        ("ASIATEMPORARYKEY0001", "session-token-value")
    }


@pytest.fixture
def iam_enforced(glue: GlueHarness) -> Iterator[dict[str, str]]:
    """Signatures are checked: by moto with IAM policies for STS (its /moto-api/reset-auth
    switch), by the emulator for Glue (``check_signatures`` with the user's key)."""
    iam = glue.emulator.client("iam")
    iam.create_user(UserName="etl")
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["glue:*", "sts:*"], "Resource": "*"}],
    }
    iam.put_user_policy(UserName="etl", PolicyName="lake", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="etl")["AccessKey"]
    previous = json.loads(moto_api(glue.emulator, "reset-auth", "0"))
    try:
        with glue.emulator.check_signatures({key["AccessKeyId"]: key["SecretAccessKey"]}):
            yield {"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]}
    finally:
        moto_api(glue.emulator, "reset-auth", previous["PREVIOUS_INITIAL_NO_AUTH_ACTION_COUNT"])


@emulator_only
def test_static_keys_pass_a_signature_check(glue: GlueHarness, iam_enforced, raw):
    ns = glue.connect(**iam_enforced)
    ns.create_namespace({"id": ["db"]})
    ns.declare_table({"id": ["db", "t"]})
    assert ns.list_tables({"id": ["db"]}).tables == ["t"]

    forged = glue.connect(
        access_key_id=iam_enforced["access_key_id"], secret_access_key="not-the-real-secret"
    )
    error = error_of(forged.create_namespace, {"id": ["forged"]})
    assert "not-the-real-secret" not in str(error)
    assert ns.list_namespaces({"id": []}).namespaces == ["db"]


@emulator_only
def test_assume_role_renews_its_credentials(glue: GlueHarness, recording, account):
    from moto.sts.models import sts_backends

    ns = glue.connect(
        access_key_id="AKIASOURCEKEY0000001",
        secret_access_key="source-secret",
        catalog_id=account,
        assume_role_arn=ROLE_ARN,
        assume_role_external_id="ext-id-42",
        assume_role_session_name="nightly-etl",
        assume_role_timeout_sec="4",
    )
    roles = sts_backends[account]["aws"].assumed_roles
    assert roles == []  # nothing happens at construction

    ns.create_namespace({"id": ["db"]})
    ns.declare_table({"id": ["db", "t"]})
    assert len(roles) == 1  # several calls, one session: no renewal on every call
    first = roles[0]
    assert (first.role_arn, first.session_name, first.external_id) == (
        ROLE_ARN,
        "nightly-etl",
        "ext-id-42",
    )

    # In the advisory window (the last quarter of the 4 s lifetime) the next call renews.
    wait_until(
        lambda: ns.describe_table({"id": ["db", "t"]}) and len(roles) == 2,
        10,
        "the role session to be renewed",
        interval=0.25,
    )
    assert len(roles) == 2
    second = roles[1]
    assert (second.session_name, second.external_id) == ("nightly-etl", "ext-id-42")
    assert second.access_key_id != first.access_key_id

    # As the server saw it: STS calls signed with the source keys, Glue calls with the
    # role's keys, switching to the renewed ones after the refresh.
    assume_calls = recording.assume_role_calls()
    assert len(assume_calls) == 2
    for call in assume_calls:
        assert call["access_key"] == "AKIASOURCEKEY0000001"
        assert call["form"]["RoleArn"] == ROLE_ARN
        assert call["form"]["RoleSessionName"] == "nightly-etl"
        assert call["form"]["ExternalId"] == "ext-id-42"
    signers = [c["access_key"] for c in recording.glue()]
    assert set(signers) == {first.access_key_id, second.access_key_id}
    assert signers[-1] == second.access_key_id
    assert signers.index(second.access_key_id) > signers.index(first.access_key_id)
    tokens = {c["token"] for c in recording.glue()}
    assert tokens == {first.session_token, second.session_token}


@emulator_only
def test_assume_role_without_catalog_id_resolves_the_account(glue: GlueHarness, recording):
    ns = glue.connect(assume_role_arn=ROLE_ARN, assume_role_session_name="s1")
    ns.create_namespace({"id": ["cat"], "properties": {"glue.kind": "catalog"}})
    ns.create_namespace({"id": ["cat", "db"]})
    assert ns.list_namespaces({"id": []}).namespaces == ["cat"]
    assert ns.list_namespaces({"id": ["cat"]}).namespaces == ["db"]
    assert all(c["access_key"].startswith("ASIA") for c in recording.glue())


# ---------------------------------------------------------------------------------------------
# 4. Error mapping (fault injection)
# ---------------------------------------------------------------------------------------------


@emulator_only
def test_throttling_is_retried_then_reported(glue: GlueHarness, ns, raw):
    ns.create_namespace({"id": ["db"]})
    ns.declare_table({"id": ["db", "t"]})
    no_retry = glue.emulator.client("glue", **NO_RETRIES)

    # One throttle: retried transparently.
    glue.emulator.inject_fault("GetTable", "ThrottlingException", 400, times=1)
    assert ns.describe_table({"id": ["db", "t"]}).location.endswith("t.lance")
    no_retry.get_table(DatabaseName="db", Name="t")  # our call used the fault up

    # Throttled on every attempt: max_retries=2 is 3 attempts, then ThrottlingError (21),
    # and the failed write changed nothing.
    glue.emulator.inject_fault("CreateTable", "ThrottlingException", 400, times=4)
    error = error_of(ns.declare_table, {"id": ["db", "u"]})
    assert error.code == ErrorCode.THROTTLING
    assert isinstance(error, lance_namespace.errors.ThrottlingError)
    assert "'db$u'" in str(error)
    table_input = {"Name": "probe", "TableType": "EXTERNAL_TABLE", "Parameters": {}}
    with pytest.raises(ClientError, match="ThrottlingException"):
        no_retry.create_table(DatabaseName="db", TableInput=table_input)  # 1 of 4 was left
    assert [t["Name"] for t in raw.get_tables(DatabaseName="db")["TableList"]] == ["t"]
    assert ns.list_tables({"id": ["db"]}).tables == ["t"]


FAILED_WRITES = [
    ("CreateTable", "InternalServiceException", 500, ErrorCode.SERVICE_UNAVAILABLE),
    ("CreateTable", "ServiceUnavailableException", 503, ErrorCode.SERVICE_UNAVAILABLE),
    ("CreateTable", "AccessDeniedException", 400, ErrorCode.PERMISSION_DENIED),
    ("CreateTable", "UnrecognizedClientException", 400, ErrorCode.UNAUTHENTICATED),
    ("CreateTable", "ExpiredTokenException", 400, ErrorCode.UNAUTHENTICATED),
    ("CreateDatabase", "AccessDeniedException", 400, ErrorCode.PERMISSION_DENIED),
    ("CreateDatabase", "ExpiredTokenException", 400, ErrorCode.UNAUTHENTICATED),
    ("CreateCatalog", "InternalServiceException", 500, ErrorCode.SERVICE_UNAVAILABLE),
    ("DeleteTable", "AccessDeniedException", 400, ErrorCode.PERMISSION_DENIED),
    ("DeleteDatabase", "UnrecognizedClientException", 400, ErrorCode.UNAUTHENTICATED),
    ("UpdateDatabase", "InternalServiceException", 500, ErrorCode.SERVICE_UNAVAILABLE),
    ("GetDatabase", "ExpiredTokenException", 400, ErrorCode.UNAUTHENTICATED),
]


@emulator_only
def test_failed_writes_map_to_codes_and_change_nothing(glue: GlueHarness, ns, raw):
    ns.create_namespace({"id": ["db"], "properties": {"v": "1"}})
    ns.create_namespace({"id": ["empty"]})
    ns.declare_table({"id": ["db", "t"]})
    writes = {
        "CreateTable": lambda: ns.declare_table({"id": ["db", "new"]}),
        "CreateDatabase": lambda: ns.create_namespace({"id": ["new"]}),
        "CreateCatalog": lambda: ns.create_namespace(
            {"id": ["new"], "properties": {"glue.kind": "catalog"}}
        ),
        "DeleteTable": lambda: ns.deregister_table({"id": ["db", "t"]}),
        "DeleteDatabase": lambda: ns.drop_namespace({"id": ["empty"]}),
        "UpdateDatabase": lambda: ns.create_namespace(
            {"id": ["db"], "mode": "overwrite", "properties": {"v": "2"}}
        ),
        "GetDatabase": lambda: ns.declare_table({"id": ["db", "new"]}),
    }
    for action, error_code, status, expected in FAILED_WRITES:
        case = f"{action} {error_code} {status}"
        glue.emulator.inject_fault(action, error_code, status, times=10)
        error = error_of(writes[action])
        glue.emulator.clear_faults()
        assert error.code == expected, f"{case}: {error}"
        assert error_code in str(error), case
        # Nothing changed, as the catalog itself tells.
        assert sorted(d["Name"] for d in raw.get_databases()["DatabaseList"]) == ["db", "empty"]
        assert raw.get_database(Name="db")["Database"]["Parameters"] == {"v": "1"}
        assert [t["Name"] for t in raw.get_tables(DatabaseName="db")["TableList"]] == ["t"]
        assert raw.get_tables(DatabaseName="empty")["TableList"] == [], case
    assert ns.list_namespaces({"id": []}).namespaces == ["db", "empty"]


@emulator_only
def test_unknown_error_code_is_internal_and_names_the_object(glue: GlueHarness, ns):
    ns.create_namespace({"id": ["db"]})
    ns.declare_table({"id": ["db", "orders"]})
    glue.emulator.inject_fault("GetTable", "BrandNewFailureException", 400, message="odd")
    error = error_of(ns.describe_table, {"id": ["db", "orders"]})
    assert error.code == ErrorCode.INTERNAL
    assert isinstance(error, lance_namespace.errors.InternalError)
    assert "'db$orders'" in str(error) and "describe table" in str(error)
    assert "BrandNewFailureException" in str(error)
    glue.emulator.inject_fault("GetDatabase", "BrandNewFailureException", 400)
    error = error_of(ns.list_namespaces, {"id": ["db"]})
    assert error.code == ErrorCode.INTERNAL and "'db'" in str(error)


def test_unreachable_endpoint_is_service_unavailable(glue: GlueHarness):
    ns = glue.connect(
        endpoint=f"http://127.0.0.1:{free_port()}", connect_timeout_sec="1", max_retries="1"
    )
    started = time.monotonic()
    error = error_of(ns.describe_table, {"id": ["db", "t"]})
    assert error.code == ErrorCode.SERVICE_UNAVAILABLE
    assert "'db$t'" in str(error)
    assert code_of(ns.create_namespace, {"id": ["db"]}) == ErrorCode.SERVICE_UNAVAILABLE
    # Without catalog_id the account is resolved through STS on the same endpoint first.
    assert code_of(ns.list_namespaces, {"id": []}) == ErrorCode.SERVICE_UNAVAILABLE
    assert time.monotonic() - started < 15


@emulator_only
def test_read_timeout_is_service_unavailable(glue: GlueHarness, ns):
    ns.create_namespace({"id": ["db"]})
    ns.declare_table({"id": ["db", "t"]})
    impatient = glue.connect(read_timeout_sec="1", max_retries="1")
    glue.emulator.inject_delay("GetTable", 1.5, times=2)
    started = time.monotonic()
    error = error_of(impatient.describe_table, {"id": ["db", "t"]})
    assert error.code == ErrorCode.SERVICE_UNAVAILABLE
    assert "'db$t'" in str(error)
    assert time.monotonic() - started < 10


@emulator_only
def test_column_sync_refused_as_a_concurrent_change_retries_until_it_lands(
    glue: GlueHarness, ns, raw
):
    """Glue refuses the sync's conditional UpdateTable ten times in a row: each time the
    sync reads the entry again and retries (it is idempotent); it never fails for a race."""
    ns.create_namespace({"id": ["db"]})
    lance.write_dataset(DATA, namespace_client=ns, table_id=["db", "t"], mode="create")
    with glue.emulator.fault("UpdateTable", "ConcurrentModificationException", 400, times=10):
        columns = ns.sync_table_columns(["db", "t"])
    assert glue.columns(["db"], "t") == [(c.name, c.type) for c in columns] != []


# ---------------------------------------------------------------------------------------------
# 5. Secrets
# ---------------------------------------------------------------------------------------------


def secret_namespace(glue: GlueHarness, **overrides: str | None) -> GlueNamespace:
    """A namespace whose every secret property holds a distinctive value."""
    props = {
        **glue.properties(),
        **SECRET_PROPS,
        "assume_role_arn": ROLE_ARN,
        "catalog_id": glue.emulator.account_id,
        "max_retries": "1",
    }
    props.update(overrides)
    return GlueNamespace(**{k: v for k, v in props.items() if v is not None})


def test_repr_and_namespace_id_hide_secrets(glue: GlueHarness):
    ns = secret_namespace(glue, **{"storage.aws_access_key_id": "AKIASTORAGEKEYCANARY"})
    shown = repr(ns)
    assert_no_secret(shown, "repr")
    assert "AKIASTORAGEKEYCANARY" not in shown
    assert "secret_access_key='***'" in shown and "session_token='***'" in shown
    assert ROLE_ARN in shown  # what is not secret stays visible
    assert_no_secret(ns.namespace_id(), "namespace_id")
    assert_no_secret(str(ns), "str")
    ns.create_namespace({"id": ["db"]})  # used: a live client now exists
    assert_no_secret(repr(ns) + ns.namespace_id(), "repr after use")


@emulator_only
def test_error_messages_hide_secrets(glue: GlueHarness):
    ns = secret_namespace(glue)
    ns.create_namespace({"id": ["db"]})
    ns.declare_table({"id": ["db", "t"]})
    glue.emulator.inject_fault(
        "GetTable", "AccessDeniedException", 400, message="not authorized to glue:GetTable"
    )
    error = error_of(ns.describe_table, {"id": ["db", "t"]})
    assert error.code == ErrorCode.PERMISSION_DENIED
    assert_no_secret(str(error), "access denied error")

    # A server message that echoes credentials is scrubbed before it reaches the caller.
    echo = f"key {SECRET_PROPS['access_key_id']} token {SECRET_PROPS['session_token']} refused"
    glue.emulator.inject_fault("GetTable", "UnrecognizedClientException", 400, message=echo)
    error = error_of(ns.describe_table, {"id": ["db", "t"]})
    assert error.code == ErrorCode.UNAUTHENTICATED
    assert_no_secret(str(error), "unauthenticated error")
    assert "***" in str(error)
    assert error.__cause__ is None or all(s not in str(error.__cause__) for s in SECRETS)

    # botocore's own failures: nothing listening, and an invalid endpoint.
    gone = secret_namespace(glue, endpoint=f"http://127.0.0.1:{free_port()}")
    error = error_of(gone.describe_table, {"id": ["db", "t"]})
    assert error.code == ErrorCode.SERVICE_UNAVAILABLE
    assert_no_secret(str(error), "connection error")
    error = error_of(secret_namespace, glue, endpoint="htp:/broken")
    assert error.code == ErrorCode.INVALID_INPUT
    assert_no_secret(str(error), "invalid endpoint error")


def _our_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("lance_metastore")]


def _record_text(record: logging.LogRecord) -> str:
    text = record.getMessage()
    if record.exc_info:
        text += logging.Formatter().formatException(record.exc_info)
    return text


@emulator_only
def test_our_logs_hold_no_secrets(glue: GlueHarness, caplog):
    caplog.set_level(logging.DEBUG)
    ns = secret_namespace(glue)
    ns.create_namespace({"id": ["db"]})
    lance.write_dataset(DATA, namespace_client=ns, table_id=["db", "t"], mode="create")
    ns.describe_table({"id": ["db", "t"]})
    ns.list_tables({"id": ["db"]})
    glue.emulator.inject_fault("GetTable", "AccessDeniedException", 400)
    error_of(ns.describe_table, {"id": ["db", "t"]})
    glue.emulator.inject_fault("GetTable", "NeverSeenException", 400)
    error_of(ns.describe_table, {"id": ["db", "t"]})
    ns.drop_table({"id": ["db", "t"]})

    ours = _our_records(caplog)
    assert any("assumed role" in r.getMessage() for r in ours)  # the check is not vacuous
    for record in ours:
        assert_no_secret(_record_text(record), f"log record of {record.name}")
    # The secret key and the storage secret never leave the process, in any log.
    for record in caplog.records:
        text = _record_text(record)
        assert SECRET_PROPS["secret_access_key"] not in text, record.name
        assert SECRET_PROPS["storage.aws_secret_access_key"] not in text, record.name


@emulator_only
def test_refused_column_sync_hides_secrets(glue: GlueHarness, caplog):
    """A read-only principal: describe never writes (so never fails for that); an explicit
    column sync is refused, and neither its error nor any log record shows a secret."""
    caplog.set_level(logging.DEBUG)
    ns = secret_namespace(glue)
    ns.create_namespace({"id": ["db"]})
    location = ns.declare_table({"id": ["db", "t"]}).location
    lance.write_dataset(DATA, location)  # data without catalog columns yet
    echo = f"access key {SECRET_PROPS['access_key_id']} may not update tables"
    glue.emulator.inject_fault("UpdateTable", "AccessDeniedException", 400, times=5, message=echo)
    ns.describe_table({"id": ["db", "t"]})  # a read: no UpdateTable, nothing to refuse
    error = error_of(ns.sync_table_columns, ["db", "t"])
    glue.emulator.clear_faults()
    assert_no_secret(str(error), "the refused sync's error")
    for record in _our_records(caplog):
        assert_no_secret(_record_text(record), f"log record of {record.name}")


@emulator_only
def test_aws_sdk_debug_logs_hold_no_secrets(glue: GlueHarness, caplog):
    """Known failure: botocore's DEBUG logs carry credentials unless we filter them."""
    caplog.set_level(logging.DEBUG)
    ns = secret_namespace(glue)
    ns.create_namespace({"id": ["db"]})
    ns.declare_table({"id": ["db", "t"]})
    ns.describe_table({"id": ["db", "t"]})
    mine = threading.get_ident()  # the client's records; the in-process server logs too
    leaks = sorted(
        {
            (record.name, secret[:12])
            for record in caplog.records
            if record.thread == mine
            for secret in SECRETS
            if secret in _record_text(record)
        }
    )
    assert leaks == [], f"secrets in DEBUG logs (logger, secret): {leaks}"


def test_pickle_carries_only_the_properties(glue: GlueHarness):
    ns = secret_namespace(glue, assume_role_arn=None)
    ns.create_namespace({"id": ["db"]})
    ns.declare_table({"id": ["db", "t"]})
    state = ns.__getstate__()
    assert set(state) == {"properties"}
    assert all(isinstance(v, str) for v in state["properties"].values())
    assert state["properties"]["access_key_id"] == SECRET_PROPS["access_key_id"]
    payload = pickle.dumps(ns)
    for marker in (b"botocore", b"boto3", b"urllib3", b"RLock", b"_thread"):
        assert marker not in payload, marker
    clone = pickle.loads(payload)
    assert isinstance(clone, GlueNamespace)
    assert repr(clone) == repr(ns) and clone.namespace_id() == ns.namespace_id()
    assert clone.describe_table({"id": ["db", "t"]}).location == str(glue.root / "db" / "t.lance")
    assert clone.storage_options == ns.storage_options


def test_close_releases_the_client_and_reconnects(glue: GlueHarness, ns):
    ns.create_namespace({"id": ["db"]})
    with ns:
        ns.declare_table({"id": ["db", "t"]})
    ns.close()  # twice is fine
    ns.table_exists({"id": ["db", "t"]})


# ---------------------------------------------------------------------------------------------
# 6. Lance data on S3 (moto's S3 on the same endpoint)
# ---------------------------------------------------------------------------------------------


def _s3_props(glue: GlueHarness, bucket: str) -> dict[str, str]:
    emulator = glue.emulator
    return {
        **glue.properties(),
        "root": f"s3://{bucket}/lake",
        "storage.aws_endpoint": emulator.endpoint,
        "storage.allow_http": "true",
        "storage.aws_access_key_id": emulator.access_key_id,
        "storage.aws_secret_access_key": emulator.secret_access_key,
        "storage.aws_region": "us-east-1",
    }


def _keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


@emulator_only
def test_a_managed_commit_raced_around_the_catalog_on_s3_loses_nothing(glue: GlueHarness):
    """On S3 a version's final manifest is written with If-None-Match: a writer that commits
    version 2 straight to S3 between a catalog commit's catch-up and its finalize keeps its
    version; the catalog commit answers 14 and Lance rebases it to version 3."""
    glue.emulator.client("s3").create_bucket(Bucket="managed")
    ns = GlueNamespace(**{**_s3_props(glue, "managed"), "managed_by": "impl"})
    ns.create_namespace({"id": ["db"]})
    t = ["db", "raced"]
    lance.write_dataset(DATA.slice(0, 1), namespace_client=ns, table_id=t, mode="create")
    described = ns.describe_table({"id": t})
    location, options = described.location, described.storage_options
    write = ns._catalog_write_table
    fired: list[int] = []

    def around_the_catalog_first(path: Any, expected: Any, updated: Any) -> None:
        if not fired and updated.parameters.get("version") == "2":
            around = lance.write_dataset(
                DATA.slice(1, 1), location, mode="append", storage_options=options
            )
            fired.append(around.version)
        write(path, expected, updated)

    ns._catalog_write_table = around_the_catalog_first  # type: ignore[method-assign]
    ours = lance.write_dataset(DATA.slice(2, 1), namespace_client=ns, table_id=t, mode="append")
    assert fired == [2]
    assert ours.version == 3
    reader = lance.dataset(
        namespace_client=GlueNamespace(**ns.__getstate__()["properties"]), table_id=t
    )
    assert reader.version == 3
    assert reader.to_table().sort_by("id").equals(DATA)


@emulator_only
def test_lance_tables_on_s3(glue: GlueHarness):
    s3 = glue.emulator.client("s3")
    s3.create_bucket(Bucket="lakehouse")
    props = _s3_props(glue, "lakehouse")
    ns = GlueNamespace(**props)
    ns.create_namespace({"id": ["db"]})

    table_id = ["db", "events"]
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="append")
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 6
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="overwrite")
    read = lance.dataset(namespace_client=ns, table_id=table_id)
    assert read.to_table().sort_by("id").equals(DATA)

    described = ns.describe_table({"id": table_id})
    assert described.location == "s3://lakehouse/lake/db/events.lance"
    assert described.storage_options["aws_endpoint"] == glue.emulator.endpoint
    keys = _keys(s3, "lakehouse", "")
    assert keys and all(k.startswith("lake/db/events.lance/") for k in keys)
    assert any(k.startswith("lake/db/events.lance/_versions/") for k in keys)
    assert any(k.startswith("lake/db/events.lance/data/") for k in keys)

    conn = lancedb.connect_namespace("lance_metastore.GlueNamespace", props)
    conn.create_table("scores", DATA, namespace_path=["db"])
    assert conn.open_table("scores", namespace_path=["db"]).count_rows() == 3
    assert _keys(s3, "lakehouse", "lake/db/scores.lance/")
    assert ns.list_tables({"id": ["db"]}).tables == ["events", "scores"]

    # Deregister keeps the objects (and they can be registered again); drop deletes them.
    scores = _keys(s3, "lakehouse", "lake/db/scores.lance/")
    ns.deregister_table({"id": ["db", "scores"]})
    assert _keys(s3, "lakehouse", "lake/db/scores.lance/") == scores
    ns.register_table({"id": ["db", "again"], "location": "s3://lakehouse/lake/db/scores.lance"})
    assert lance.dataset(namespace_client=ns, table_id=["db", "again"]).count_rows() == 3

    ns.drop_table({"id": table_id})
    assert _keys(s3, "lakehouse", "lake/db/events.lance/") == []
    assert _keys(s3, "lakehouse", "lake/db/scores.lance/") == scores
    assert ns.list_tables({"id": ["db"]}).tables == ["again"]


@emulator_only
def test_managed_commits_on_s3_finalize_their_manifests(glue: GlueHarness):
    """On S3 too the committing namespace copies each manifest to its final key (one
    server-side copy), answers name it, and opening the table writes no object."""
    s3 = glue.emulator.client("s3")
    s3.create_bucket(Bucket="managed")
    ns = GlueNamespace(**_s3_props(glue, "managed"), managed_by="impl")
    ns.create_namespace({"id": ["db"]})
    table_id = ["db", "events"]
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="append")
    final = f"lake/db/events.lance/_versions/{manifest_name(2, 'V2')}"
    assert final in _keys(s3, "managed", "lake/db/events.lance/_versions/")
    assert ns.describe_table_version({"id": table_id}).version.manifest_path == final
    before = _keys(s3, "managed", "")
    for _ in range(2):
        assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 6
    assert _keys(s3, "managed", "") == before


# ---------------------------------------------------------------------------------------------
# 7. Columns
# ---------------------------------------------------------------------------------------------

WIDE = pa.table(
    {
        "i32": pa.array([1], pa.int32()),
        "i64": pa.array([1], pa.int64()),
        "f32": pa.array([1.5], pa.float32()),
        "f64": pa.array([2.5], pa.float64()),
        "s": pa.array(["x"], pa.string()),
        "flag": pa.array([True], pa.bool_()),
        "ts": pa.array([datetime.datetime(2024, 1, 1)], pa.timestamp("us")),
        "tags": pa.array([["a", "b"]], pa.list_(pa.string())),
        "point": pa.array(
            [{"x": 1, "label": "p"}], pa.struct([("x", pa.int64()), ("label", pa.string())])
        ),
        "vec": pa.array([[0.1, 0.2, 0.3, 0.4]], pa.list_(pa.float32(), 4)),
    }
)


def _columns(raw: Any, db: str, name: str) -> list[dict[str, str]]:
    return raw.get_table(DatabaseName=db, Name=name)["Table"]["StorageDescriptor"].get(
        "Columns", []
    )


def test_columns_reflect_the_arrow_schema(ns, raw):
    ns.create_namespace({"id": ["db"]})
    ns.declare_table({"id": ["db", "wide"]})
    assert _columns(raw, "db", "wide") == []
    lance.write_dataset(WIDE, namespace_client=ns, table_id=["db", "wide"], mode="append")
    ns.sync_table_columns(["db", "wide"])
    assert _columns(raw, "db", "wide") == [
        {"Name": "i32", "Type": "int"},
        {"Name": "i64", "Type": "bigint"},
        {"Name": "f32", "Type": "float"},
        {"Name": "f64", "Type": "double"},
        {"Name": "s", "Type": "string"},
        {"Name": "flag", "Type": "boolean"},
        {"Name": "ts", "Type": "timestamp"},
        {"Name": "tags", "Type": "array<string>"},
        {"Name": "point", "Type": "struct<x:bigint,label:string>"},
        {"Name": "vec", "Type": "array<float>", "Comment": "lance vector(4)"},
    ]
    table = raw.get_table(DatabaseName="db", Name="wide")["Table"]
    assert table["TableType"] == "EXTERNAL_TABLE"
    assert table["Parameters"]["table_type"] == "lance"


def test_sync_table_columns_after_a_schema_change(ns, raw):
    ns.create_namespace({"id": ["db"]})
    lance.write_dataset(DATA, namespace_client=ns, table_id=["db", "t"], mode="create")
    ns.sync_table_columns(["db", "t"])
    assert [c["Name"] for c in _columns(raw, "db", "t")] == ["id", "name"]
    version_before = raw.get_table(DatabaseName="db", Name="t")["Table"]["VersionId"]

    changed = pa.table({"key": ["k"], "score": pa.array([0.5], pa.float64())})
    lance.write_dataset(changed, namespace_client=ns, table_id=["db", "t"], mode="overwrite")
    columns = ns.sync_table_columns(["db", "t"])
    assert [(c.name, c.type) for c in columns] == [("key", "string"), ("score", "double")]
    assert _columns(raw, "db", "t") == [
        {"Name": "key", "Type": "string"},
        {"Name": "score", "Type": "double"},
    ]
    table = raw.get_table(DatabaseName="db", Name="t")["Table"]
    assert table["VersionId"] != version_before
    assert table["Parameters"]["table_type"] == "lance"
    assert table["StorageDescriptor"]["Location"] == ns.describe_table({"id": "db$t"}).location

    ns.declare_table({"id": ["db", "declared_only"]})
    assert code_of(ns.sync_table_columns, "db$declared_only") == ErrorCode.TABLE_NOT_FOUND
    assert code_of(ns.sync_table_columns, ["db", "missing"]) == ErrorCode.TABLE_NOT_FOUND


# ---------------------------------------------------------------------------------------------
# 8. Request shapes and entry points
# ---------------------------------------------------------------------------------------------


def test_rust_style_requests_for_every_operation(glue: GlueHarness, ns, tmp_path):
    R = DictWithModelDump
    created = ns.create_namespace(R(id=["cat"], properties={"glue.kind": "catalog"}, mode=None))
    assert created.properties == {}
    ns.create_namespace(R(id=["cat", "db"], mode="create", properties={"a": "1"}))
    assert ns.describe_namespace(R(id=["cat", "db"])).properties == {"a": "1"}
    ns.namespace_exists(R(id="cat$db"))
    assert ns.list_namespaces(R(id=["cat"], limit=10, page_token=None)).namespaces == ["db"]

    declared = ns.declare_table(R(id=["cat", "db", "d"], location=None, properties=None))
    assert declared.location.endswith("d.lance")
    assert ns.create_empty_table(R(id=["cat", "db", "e"])).location.endswith("e.lance")
    location = str(tmp_path / "reg.lance")
    lance.write_dataset(DATA, location)
    ns.register_table(R(id=["cat", "db", "r"], location=location, mode="CREATE"))
    described = ns.describe_table(R(id=["cat", "db", "r"], version=None, with_table_uri=True))
    assert described.location == location and described.table_uri == location
    ns.table_exists(R(id=["cat", "db", "r"]))
    listed = ns.list_tables(R(id=["cat", "db"], limit=2, page_token=None))
    assert listed.tables == ["d", "e"]
    rest = ns.list_tables(R(id=["cat", "db"], page_token=listed.page_token))
    assert rest.tables == ["r"]
    assert ns.deregister_table(R(id=["cat", "db", "r"])).location == location
    assert lance.dataset(location).count_rows() == 3
    ns.drop_table(R(id=["cat", "db", "d"]))
    ns.drop_table(R(id=["cat", "db", "e"]))
    assert ns.list_tables(R(id=["cat", "db"])).tables == []
    ns.drop_namespace(R(id=["cat", "db"], mode="FAIL", behavior="RESTRICT"))
    ns.drop_namespace(R(id=["cat"]))
    assert ns.list_namespaces(R(id=[])).namespaces == []
    bad = R(id=["cat", "db", "x"], location=42)
    assert code_of(ns.declare_table, bad) == ErrorCode.INVALID_INPUT


def test_entry_points_resolve_to_glue_namespace(glue: GlueHarness):
    props = glue.properties()
    assert "glue" in lance_metastore.ALIASES
    via_alias = lance_namespace.connect("glue", props)
    via_path = lance_namespace.connect("lance_metastore.GlueNamespace", props)
    assert isinstance(via_alias, GlueNamespace) and isinstance(via_path, GlueNamespace)
    via_alias.create_namespace({"id": ["db"]})
    assert via_path.list_namespaces({"id": []}).namespaces == ["db"]

    conn = lancedb.connect_namespace("lance_metastore.GlueNamespace", props)
    conn.create_table("scores", DATA, namespace_path=["db"])
    assert conn.open_table("scores", namespace_path=["db"]).count_rows() == 3
    by_alias = lancedb.connect_namespace("glue", props)
    assert by_alias.list_tables(namespace_path=["db"]).tables == ["scores"]
    assert by_alias.open_table("scores", namespace_path=["db"]).count_rows() == 3
    assert via_alias.describe_table({"id": ["db", "scores"]}).location == str(
        glue.root / "db" / "scores.lance"
    )


def test_database_in_a_missing_catalog_is_namespace_not_found(ns):
    missing = {"id": ["nocat", "db"]}
    assert code_of(ns.create_namespace, missing) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(ns.list_namespaces, {"id": ["nocat"]}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(ns.declare_table, {"id": ["nocat", "db", "t"]}) == 1
    assert ns.list_namespaces({"id": []}).namespaces == []


# ---------------------------------------------------------------------------------------------
# 9. Glue as deployed: endpoints and principals without the catalog API
# ---------------------------------------------------------------------------------------------

CATALOG_TARGETS = {"AWSGlue.GetCatalog", "AWSGlue.GetCatalogs", "AWSGlue.CreateCatalog"}
CATALOG_TARGETS |= {"AWSGlue.UpdateCatalog", "AWSGlue.DeleteCatalog"}


@pytest.fixture(params=["glue-stock", "glue-noapi"])
def root_only(request: pytest.FixtureRequest) -> GlueHarness:
    """moto's server as shipped, or the emulator signed by a principal without catalog rights."""
    return request.getfixturevalue(request.param.replace("-", "_"))


def _catalog_calls(recording: Recording) -> list[str]:
    return [r["target"] for r in recording.glue() if r["target"] in CATALOG_TARGETS]


@pytest.fixture
def recorded(root_only: GlueHarness, tmp_path: Path) -> Iterator[Recording]:
    """Every request the server saw."""
    with _recording(root_only.emulator, tmp_path) as recording:
        yield recording


def _absence_logs(caplog) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "lance_metastore.glue" and "serving the root catalog alone" in r.getMessage()
    ]


def test_two_level_work_needs_one_unretried_probe(root_only: GlueHarness, recorded, caplog):
    caplog.set_level(logging.INFO, logger="lance_metastore.glue")
    ns = root_only.connect(max_retries="5")  # the default: the probe must not use them
    ns.create_namespace({"id": ["sales"], "properties": {"owner": "data"}})
    ns.create_namespace({"id": ["sales"], "mode": "exist_ok"})
    assert ns.describe_namespace({"id": ["sales"]}).properties["owner"] == "data"
    assert ns.list_namespaces({"id": []}).namespaces == ["sales"]
    assert code_of(ns.describe_namespace, {"id": ["nowhere"]}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(ns.list_tables, {"id": ["nowhere"]}) == ErrorCode.NAMESPACE_NOT_FOUND
    lance.write_dataset(DATA, namespace_client=ns, table_id=["sales", "orders"])
    lance.write_dataset(DATA, namespace_client=ns, table_id=["sales", "orders"], mode="append")
    assert lance.dataset(namespace_client=ns, table_id=["sales", "orders"]).count_rows() == 6
    assert ns.list_tables({"id": ["sales"]}).tables == ["orders"]
    assert ns.list_tables({"id": []}).tables == []
    ns.drop_table({"id": ["sales", "orders"]})
    ns.drop_namespace({"id": ["sales"]})
    ns.drop_namespace({"id": ["sales"], "mode": "skip"})

    assert _catalog_calls(recorded) == ["AWSGlue.GetCatalogs"]  # the probe, sent once
    (logged,) = _absence_logs(caplog)
    assert logged.levelno == logging.INFO
    expected = "may not use" if root_only.principal else "does not implement"
    assert expected in logged.getMessage()


def test_managed_commits_without_the_catalog_api(root_only: GlueHarness, recorded):
    ns = root_only.connect(managed_by="impl")
    ns.create_namespace({"id": ["db"]})
    for mode in ("create", "append", "append"):
        lance.write_dataset(DATA, namespace_client=ns, table_id=["db", "events"], mode=mode)
    assert ns.describe_table({"id": ["db", "events"]}).properties["version"] == "3"
    versions = ns.list_table_versions({"id": ["db", "events"]}).versions
    assert [v.version for v in versions] == [1, 2, 3]
    assert lance.dataset(namespace_client=ns, table_id=["db", "events"]).count_rows() == 9
    assert _catalog_calls(recorded) == ["AWSGlue.GetCatalogs"]  # the new database's check


def test_lancedb_without_the_catalog_api(root_only: GlueHarness, recorded):
    conn = lancedb.connect_namespace("lance_metastore.GlueNamespace", root_only.properties())
    assert conn.list_tables().tables == []
    conn.create_namespace(["db"])
    conn.create_table("scores", DATA, namespace_path=["db"])
    assert conn.list_namespaces().namespaces == ["db"]
    assert conn.open_table("scores", namespace_path=["db"]).count_rows() == 3
    assert conn.list_tables(namespace_path=["db"]).tables == ["scores"]
    assert len(_catalog_calls(recorded)) <= 1


def test_catalog_ids_answer_saying_why(root_only: GlueHarness):
    ns = root_only.connect()
    ns.create_namespace({"id": ["db"]})
    ns.declare_table({"id": ["db", "t"]})
    why = "may not use Glue's catalog API" if root_only.principal else "does not implement"
    for call, request in [
        (ns.create_namespace, {"id": ["cat", "db"]}),
        (ns.describe_namespace, {"id": ["cat", "db"]}),
        (ns.namespace_exists, {"id": "cat$db"}),
        (ns.list_namespaces, {"id": ["cat", "db"]}),
        (ns.list_tables, {"id": ["cat", "db"]}),
        (ns.drop_namespace, {"id": ["cat", "db"], "mode": "skip"}),
        (ns.declare_table, {"id": ["cat", "db", "t"]}),
        (ns.describe_table, {"id": ["cat", "db", "t"]}),
        (ns.table_exists, {"id": "cat$db$t"}),
        (ns.drop_table, {"id": ["cat", "db", "t"]}),
    ]:
        error = error_of(call, request)
        assert error.code == ErrorCode.INVALID_INPUT, (call.__name__, error)
        assert why in str(error) and "'cat$db" in str(error), str(error)
        assert "root catalog alone" in str(error)

    refused = error_of(ns.create_namespace, {"id": ["cat"], "properties": {"glue.kind": "catalog"}})
    assert refused.code == ErrorCode.UNSUPPORTED and why in str(refused)
    # A one-level id that is no database is missing, not a catalog looked up in vain.
    assert code_of(ns.describe_namespace, {"id": ["cat"]}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert code_of(ns.list_namespaces, {"id": ["cat"]}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert ns.list_namespaces({"id": ["db"]}).namespaces == []
    assert ns.list_namespaces({"id": []}).namespaces == ["db"]
    assert ns.list_tables({"id": ["db"]}).tables == ["t"]


def test_probe_is_shared_by_threads(root_only: GlueHarness, recorded, caplog):
    caplog.set_level(logging.INFO, logger="lance_metastore.glue")
    ns = root_only.connect()
    barrier = threading.Barrier(8)
    codes: list[ErrorCode] = []

    def first_call() -> None:
        barrier.wait()
        codes.append(code_of(ns.describe_namespace, {"id": ["missing"]}))

    threads = [threading.Thread(target=first_call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert codes == [ErrorCode.NAMESPACE_NOT_FOUND] * 8
    assert _catalog_calls(recorded) == ["AWSGlue.GetCatalogs"]
    assert len(_absence_logs(caplog)) == 1
    # A copy (a Spark task, say) probes once for itself.
    clone = pickle.loads(pickle.dumps(ns))
    assert code_of(clone.describe_namespace, {"id": ["a", "b"]}) == ErrorCode.INVALID_INPUT
    assert _catalog_calls(recorded) == ["AWSGlue.GetCatalogs"] * 2


@emulator_only
def test_full_principal_keeps_the_hierarchy_on_the_same_endpoint(glue: GlueHarness, glue_noapi):
    full, limited = glue.connect(), glue_noapi.connect()
    full.create_namespace({"id": ["cat"], "properties": {"glue.kind": "catalog"}})
    full.create_namespace({"id": ["cat", "db"]})
    full.create_namespace({"id": ["db"]})
    assert full.list_namespaces({"id": []}).namespaces == ["cat", "db"]
    assert limited.list_namespaces({"id": []}).namespaces == ["db"]
    assert code_of(limited.describe_namespace, {"id": ["cat"]}) == ErrorCode.NAMESPACE_NOT_FOUND
    assert full.catalog_api().available and not limited.catalog_api().available


# How Glue-compatible endpoints answer an operation they lack, and what the probe concludes.
PROBE_ANSWERS = [
    ("UnknownOperationException", 400, "", False),  # AWS's JSON protocol
    ("InternalFailure", 501, "API action 'GetCatalogs' not yet implemented", False),  # LocalStack
    ("InternalFailure", 500, "The get_catalogs action has not been implemented", False),
    ("AccessDeniedException", 400, "not authorized to perform: glue:GetCatalogs", False),
    ("ThrottlingException", 400, "Rate exceeded", True),  # retried: decides nothing
    ("InternalServiceException", 500, "Internal error", True),  # likewise
]


@emulator_only
@pytest.mark.parametrize(("code", "status", "message", "available"), PROBE_ANSWERS)
def test_probe_reads_the_first_answer(glue: GlueHarness, code, status, message, available):
    ns = glue.connect(max_retries="5")
    glue.emulator.inject_fault("GetCatalogs", code, status, times=1, message=message or "x")
    assert ns.catalog_api().available is available
    expected = ["db"] if not available else ["cat", "db"]
    glue.emulator.clear_faults()
    glue.connect().create_namespace({"id": ["cat"], "properties": {"glue.kind": "catalog"}})
    ns.create_namespace({"id": ["db"]})
    assert ns.list_namespaces({"id": []}).namespaces == expected


@emulator_only
def test_an_outage_during_the_probe_decides_nothing(glue: GlueHarness):
    ns = glue.connect()  # max_retries=2: three attempts after the single-try probe
    glue.emulator.inject_fault("GetCatalogs", "ServiceUnavailableException", 503, times=4)
    error = error_of(ns.list_namespaces, {"id": []})
    assert error.code == ErrorCode.SERVICE_UNAVAILABLE
    ns.create_namespace({"id": ["cat"], "properties": {"glue.kind": "catalog"}})  # probed again
    assert ns.catalog_api().available
    assert ns.list_namespaces({"id": []}).namespaces == ["cat"]


def _answer(code: str, status: int, message: str = "") -> ClientError:
    """An error as botocore builds it from an endpoint's reply."""
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "GetCatalogs",
    )


def test_a_bare_500_means_no_catalog_api_only_from_a_custom_endpoint():
    from lance_metastore.glue.namespace import _catalog_api_refusal

    bare = _answer("500", 500, "<!doctype html><title>500 Internal Server Error</title>")
    assert "does not implement" in _catalog_api_refusal(bare, "http://127.0.0.1:1")
    assert "HTTP 500" in _catalog_api_refusal(bare, "http://127.0.0.1:1")
    assert _catalog_api_refusal(bare, None) is None  # AWS always sends an error document
    outage = _answer("InternalServiceException", 500, "Internal service error")
    assert _catalog_api_refusal(outage, "http://127.0.0.1:1") is None
    assert _catalog_api_refusal(_answer("ThrottlingException", 400), None) is None
    assert "may not use" in _catalog_api_refusal(_answer("AccessDeniedException", 400), None)
    assert _catalog_api_refusal(_answer("UnknownOperationException", 400), None)
