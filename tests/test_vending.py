"""Credential vending (issue 26): scoped STS credentials from describe/declare, used by clients
that hold no AWS credentials of their own.

Servers: moto's server as shipped for S3, STS and IAM (``stock_moto``); the catalogs of the
``glue``, ``hive2``, ``hive3`` and ``hive3_hms31`` fixtures; our REST server. Session policies,
which moto ignores, are enforced by ``support.session_policy_s3`` (tests at the end).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance_namespace.errors import InvalidInputError

from lance_metastore.rest.server import RestServer
from lance_metastore.rules import credentials
from lance_metastore.rules.config import parse_properties
from lance_metastore.rules.credentials import (
    VENDOR_PROPERTIES,
    CredentialVendor,
    session_policy,
    vending_at_most,
)
from lance_metastore.rules.redaction import VENDED_CREDENTIALS_MARKER

DATA = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]})
ROLE_NAME = "lance-table-access"
# The vendor's and the server's own keys: distinctive, so a grep finds any leak.
VENDOR_KEY_ID = "AKIAVENDOROWNKEY0001"
VENDOR_SECRET = "vendor-own-secret-7f3a9c1e"
SERVER_STORAGE_SECRET = "server-storage-secret-41d2b8"
VENDOR_CREDENTIALS = (VENDOR_KEY_ID, VENDOR_SECRET, SERVER_STORAGE_SECRET)

TRUST_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
            "Action": "sts:AssumeRole",
        }
    ],
}


@pytest.fixture
def s3_lake(stock_moto: Any) -> dict[str, str]:
    """A bucket and the role to vend from, on moto's server as shipped. (moto's servers in
    one process share their state: request a catalog fixture, which resets it, first.)"""
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    stock_moto.client("s3").create_bucket(Bucket=bucket)
    iam = stock_moto.client("iam")
    try:
        role = iam.get_role(RoleName=ROLE_NAME)["Role"]
    except iam.exceptions.NoSuchEntityException:
        role = iam.create_role(
            RoleName=ROLE_NAME, AssumeRolePolicyDocument=json.dumps(TRUST_POLICY)
        )["Role"]
    return {"bucket": bucket, "role_arn": role["Arn"], "endpoint": stock_moto.endpoint}


def vending_properties(lake: dict[str, str], **overrides: str) -> dict[str, str]:
    """A namespace's properties: tables under s3://bucket/lake, vending write credentials."""
    return {
        "root": f"s3://{lake['bucket']}/lake",
        "storage.aws_endpoint": lake["endpoint"],
        "storage.allow_http": "true",
        "storage.aws_region": "us-east-1",
        "storage.aws_access_key_id": "AKIASERVERSTORAGE01",
        "storage.aws_secret_access_key": SERVER_STORAGE_SECRET,
        "credential_vendor.enabled": "true",
        "credential_vendor.permission": "write",
        "credential_vendor.aws_role_arn": lake["role_arn"],
        "credential_vendor.aws_region": "us-east-1",
        "credential_vendor.aws_sts_endpoint": lake["endpoint"],
        "credential_vendor.aws_access_key_id": VENDOR_KEY_ID,
        "credential_vendor.aws_secret_access_key": VENDOR_SECRET,
        "credential_vendor.aws_duration_millis": "900000",
        **overrides,
    }


def assert_vended(options: dict[str, str], endpoint: str) -> None:
    assert options["aws_access_key_id"] not in ("", VENDOR_KEY_ID, "AKIASERVERSTORAGE01")
    assert options["aws_secret_access_key"]
    assert options["aws_session_token"]
    assert int(options[VENDED_CREDENTIALS_MARKER]) > 0
    assert options["aws_endpoint"] == endpoint
    assert options["allow_http"] == "true"
    assert options["aws_region"] == "us-east-1"
    assert not set(options.values()) & set(VENDOR_CREDENTIALS)


# ---------------------------------------------------------------------------------------------
# The policy and the properties
# ---------------------------------------------------------------------------------------------


def test_session_policy_allows_only_the_table_prefix():
    read = session_policy("lake", "warehouse/db/t.lance", "read")
    listing, _bucket_location, objects = read["Statement"]
    assert listing["Condition"]["StringLike"]["s3:prefix"] == [
        "warehouse/db/t.lance/",
        "warehouse/db/t.lance/*",
    ]
    assert objects["Resource"] == "arn:aws:s3:::lake/warehouse/db/t.lance/*"
    assert set(objects["Action"]) == {"s3:GetObject", "s3:GetObjectVersion"}
    write = session_policy("lake", "warehouse/db/t.lance/", "write")["Statement"][2]["Action"]
    assert {"s3:PutObject", "s3:DeleteObject"} <= set(write)
    assert "s3:DeleteObjectVersion" not in write
    admin = session_policy("lake", "warehouse/db/t.lance", "admin")["Statement"][2]["Action"]
    assert "s3:DeleteObjectVersion" in admin
    for prefix in ("", "/", "warehouse/*", "warehouse/?x", "w/${aws:username}"):
        with pytest.raises(InvalidInputError):
            session_policy("lake", prefix, "read")


def test_caller_ceiling_only_narrows():
    assert credentials.narrowed("write", "read") == "read"
    assert credentials.narrowed("read", "admin") == "read"
    assert credentials.narrowed("admin", None) == "admin"
    with pytest.raises(ValueError, match="permission must be one of"), vending_at_most("all"):
        pass
    # Nested blocks only narrow: a server's own (wider) ceiling inside a narrower one keeps it.
    with vending_at_most("read"), vending_at_most("admin"):
        assert credentials.permission_to_vend("write") == "read"
    with vending_at_most("write"), vending_at_most(None):
        assert credentials.permission_to_vend("admin") == "write"
    with vending_at_most("none"), vending_at_most("write"):
        assert credentials.permission_to_vend("write") is None
    assert credentials.permission_to_vend("write") == "write"


@pytest.mark.parametrize(
    ("name", "value", "phrase"),
    [
        ("credential_vendor.aws_duration_millis", "60000", "between 900000"),
        ("credential_vendor.aws_duration_millis", "43200001", "between 900000"),
        ("credential_vendor.permission", "owner", "must be one of read, write, admin"),
        ("credential_vendor.enabled", "maybe", "must be true or false"),
    ],
)
def test_bad_vendor_properties_are_refused(name: str, value: str, phrase: str):
    from lance_namespace.errors import InvalidInputError

    from lance_metastore import Hive3Namespace

    with pytest.raises(InvalidInputError, match=phrase):
        Hive3Namespace(uri="thrift://127.0.0.1:1", **{name: value})


def test_vendor_properties_are_judged_by_their_own_name():
    from lance_metastore.rules.redaction import is_secret

    assert is_secret("credential_vendor.aws_secret_access_key")
    assert is_secret("credential_vendor.aws_session_token")
    for public in ("enabled", "permission", "aws_role_arn", "aws_region", "aws_sts_endpoint"):
        assert not is_secret(f"credential_vendor.{public}")


def test_enabled_without_a_role_is_refused():
    from lance_namespace.errors import InvalidInputError

    from lance_metastore import Hive3Namespace

    with pytest.raises(InvalidInputError, match=r"requires credential_vendor\.aws_role_arn"):
        Hive3Namespace(uri="thrift://127.0.0.1:1", **{"credential_vendor.enabled": "true"})


# ---------------------------------------------------------------------------------------------
# Vending on every backend (in process)
# ---------------------------------------------------------------------------------------------

VENDING_BACKENDS = ["glue", "hive2", "hive3"]


@pytest.fixture(params=VENDING_BACKENDS)
def catalog(request: pytest.FixtureRequest) -> Any:
    harness = request.getfixturevalue(request.param)
    harness.reset()
    return harness


# Catalogs whose entries may point at s3:// on moto: Glue, and Hive 3 on the HMS 3.1 fixture,
# which runs with Hadoop's S3A on moto's S3 (a metastore checks and creates a new table's
# directory). HMS 2.3 from the pyspark wheel has no S3 file system (see docs/hive.md).
S3_CATALOGS = ["glue", pytest.param("hive3_hms31", id="hive3-3.1")]


@pytest.fixture(params=S3_CATALOGS)
def s3_catalog(request: pytest.FixtureRequest) -> Any:
    """A catalog harness whose tables may live on S3 (request it before ``s3_lake``)."""
    harness = request.getfixturevalue(request.param)
    harness.reset()
    return harness


def test_describe_and_declare_vend_scoped_credentials(s3_catalog: Any, s3_lake, caplog):
    """On S3, through each catalog that can hold S3 entries here."""
    # Every logger at DEBUG: botocore's wire log prints STS's answer, which carries the vended
    # credentials; the scrubber masks them there.
    caplog.set_level(logging.DEBUG)
    ns = s3_catalog.connect(**vending_properties(s3_lake))
    db = s3_catalog.db(s3_catalog.unique())
    ns.create_namespace({"id": db})

    declared = ns.declare_table({"id": [*db, "events"], "vend_credentials": True})
    assert declared.location.startswith(f"s3://{s3_lake['bucket']}/lake/")
    assert_vended(declared.storage_options, s3_lake["endpoint"])

    # Unset counts as asked, as in DirectoryNamespace; the answer is the cached one.
    described = ns.describe_table({"id": [*db, "events"]})
    assert described.storage_options == declared.storage_options

    # Asked not to vend: the configured options, as without a vendor.
    plain = ns.describe_table({"id": [*db, "events"], "vend_credentials": False})
    assert plain.storage_options["aws_secret_access_key"] == SERVER_STORAGE_SECRET
    assert VENDED_CREDENTIALS_MARKER not in plain.storage_options

    # Nothing the vendor holds shows in repr or in any log line.
    shown = repr(ns) + caplog.text + repr(ns._vendor)
    assert not [secret for secret in VENDOR_CREDENTIALS if secret in shown]
    assert "<AssumeRoleResponse" in caplog.text, "botocore logged no STS answer"
    vended = declared.storage_options
    assert vended["aws_secret_access_key"] not in caplog.text
    assert vended["aws_session_token"] not in caplog.text


def test_local_tables_answer_without_credentials(catalog: Any, s3_lake, tmp_path: Path):
    ns = catalog.connect(**vending_properties(s3_lake, root=str(tmp_path / "local")))
    db = catalog.db(catalog.unique())
    ns.create_namespace({"id": db})
    declared = ns.declare_table({"id": [*db, "t"], "vend_credentials": True})
    assert not declared.location.startswith("s3://")
    options = declared.storage_options or {}
    assert VENDED_CREDENTIALS_MARKER not in options
    assert "aws_session_token" not in options


# ---------------------------------------------------------------------------------------------
# Cache and refresh, with an injected clock (no waiting)
# ---------------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        import time

        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _vendor(lake: dict[str, str], clock: Clock, **overrides: str) -> CredentialVendor:
    props = {k: v for k, v in vending_properties(lake, **overrides).items() if "vendor" in k}
    settings = parse_properties("test", props, VENDOR_PROPERTIES)
    return CredentialVendor(settings, clock=clock)


def test_cached_until_shortly_before_expiry_then_refreshed(s3_lake):
    clock = Clock()
    vendor = _vendor(s3_lake, clock)
    location = f"s3://{s3_lake['bucket']}/lake/db/t.lance"
    first = vendor.storage_options(location, {}, True)
    expires_at = int(first[VENDED_CREDENTIALS_MARKER]) / 1000
    # The configured 15 minutes (the frozen clock was read before the STS call, which can
    # take seconds on a loaded machine).
    assert 800 < expires_at - clock.now <= 960

    clock.now += (expires_at - clock.now) * 0.7  # most of the lifetime gone: still cached
    assert vendor.storage_options(location, {}, True) == first

    clock.now = expires_at - 60  # inside the last quarter: refreshed before expiry
    second = vendor.storage_options(location, {}, True)
    assert second["aws_access_key_id"] != first["aws_access_key_id"]
    assert int(second[VENDED_CREDENTIALS_MARKER]) / 1000 > expires_at - 60


def test_cache_is_per_table_and_rights(s3_lake):
    vendor = _vendor(s3_lake, Clock())
    one = f"s3://{s3_lake['bucket']}/lake/db/one.lance"
    two = f"s3://{s3_lake['bucket']}/lake/db/two.lance"
    written = vendor.storage_options(one, {}, True)
    assert vendor.storage_options(two, {}, True) != written
    with vending_at_most("read"):
        read = vendor.storage_options(one, {}, True)
    assert read["aws_access_key_id"] != written["aws_access_key_id"]
    with vending_at_most("admin"):  # a ceiling above the namespace's: still write
        assert vendor.storage_options(one, {}, True) == written
    with vending_at_most("none"):  # may describe, not read: no credentials, no secret
        assert vendor.storage_options(
            one, {"aws_region": "r", "aws_secret_access_key": "s"}, True
        ) == {"aws_region": "r"}


def test_concurrent_callers_share_one_assume_role(s3_lake):
    from concurrent.futures import ThreadPoolExecutor

    vendor = _vendor(s3_lake, Clock())
    location = f"s3://{s3_lake['bucket']}/lake/db/busy.lance"
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: vendor.storage_options(location, {}, True), range(16)))
    assert len({a["aws_access_key_id"] for a in answers}) == 1


def test_sts_refusal_names_the_table_not_a_secret(s3_lake):
    from lance_namespace.errors import InternalError

    vendor = _vendor(
        s3_lake, Clock(), **{"credential_vendor.aws_role_arn": "arn:aws:iam::123:role/none"}
    )
    location = f"s3://{s3_lake['bucket']}/lake/db/t.lance"
    try:
        vendor.storage_options(location, {}, True)
    except InternalError as error:  # moto may refuse the unknown role
        assert location in str(error)
        assert not [s for s in VENDOR_CREDENTIALS if s in str(error)]


# ---------------------------------------------------------------------------------------------
# Clients with no AWS credentials of their own, through `lance-metastore serve`
# ---------------------------------------------------------------------------------------------

CLIENT_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import lance, lancedb, pyarrow as pa
    from lance_namespace import connect

    uri, table_id = sys.argv[1], json.loads(sys.argv[2])
    ns = connect("rest", {"uri": uri})
    described = ns.describe_table(
        __import__("lance_namespace").DescribeTableRequest(id=table_id, vend_credentials=True)
    )
    before = lance.dataset(namespace_client=ns, table_id=table_id).count_rows()
    more = pa.table({"id": [10, 11], "name": ["x", "y"]})
    lance.write_dataset(more, namespace_client=ns, table_id=table_id, mode="append")
    after_pylance = lance.dataset(namespace_client=ns, table_id=table_id).count_rows()
    db = lancedb.connect_namespace("rest", {"uri": uri})
    table = db.open_table(table_id[-1], namespace_path=table_id[:-1])
    table.add(pa.table({"id": [20], "name": ["z"]}))
    print(json.dumps({
        "before": before,
        "after_pylance": after_pylance,
        "after_lancedb": table.count_rows(),
        "options": described.storage_options,
    }))
    """
)


def scrubbed_environment(home: Path) -> dict[str, str]:
    """No AWS_* variable, no config or credentials file, no instance metadata."""
    home.mkdir(exist_ok=True)
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env.update(
        HOME=str(home),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(home / "no-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "no-credentials"),
    )
    return env


def test_client_without_aws_credentials_reads_and_appends(s3_catalog: Any, s3_lake, tmp_path: Path):
    """pylance and lancedb through the REST server, in a process with no AWS credentials."""
    harness = s3_catalog  # before s3_lake: resetting moto's state would remove the bucket
    ns = harness.connect(**vending_properties(s3_lake))
    db = harness.db(harness.unique())
    ns.create_namespace({"id": db})
    table_id = [*db, "events"]
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")

    with RestServer(ns) as server:
        result = subprocess.run(
            [sys.executable, "-c", CLIENT_SCRIPT, server.url, json.dumps(table_id)],
            env=scrubbed_environment(tmp_path / "home"),
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert (answer["before"], answer["after_pylance"], answer["after_lancedb"]) == (3, 5, 6)
    assert_vended(answer["options"], s3_lake["endpoint"])
    leaked = [s for s in VENDOR_CREDENTIALS if s in result.stdout + result.stderr]
    assert not leaked
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 6


# ---------------------------------------------------------------------------------------------
# Scope, enforced by the session-policy emulator (moto ignores session policies)
# ---------------------------------------------------------------------------------------------


def test_emulator_evaluates_allow_resource_and_prefix_condition():
    from support.session_policy_s3 import is_allowed, s3_request

    policy = session_policy("lake", "wh/db/t.lance", "read")
    assert is_allowed(policy, *s3_request("GET", "/lake/wh/db/t.lance/_versions/1.manifest", ""))
    assert not is_allowed(policy, *s3_request("GET", "/lake/wh/db/other.lance/data/x", ""))
    assert not is_allowed(policy, *s3_request("GET", "/lake/wh/db/t.lance2/data/x", ""))
    assert not is_allowed(policy, *s3_request("PUT", "/lake/wh/db/t.lance/data/x", ""))
    assert not is_allowed(policy, *s3_request("DELETE", "/lake/wh/db/t.lance/data/x", ""))
    assert is_allowed(policy, *s3_request("GET", "/lake", "list-type=2&prefix=wh/db/t.lance/"))
    assert not is_allowed(policy, *s3_request("GET", "/lake", "list-type=2&prefix=wh/db/"))
    deny = {
        "Statement": [*policy["Statement"], {"Effect": "Deny", "Action": "s3:*", "Resource": "*"}]
    }
    assert not is_allowed(deny, *s3_request("GET", "/lake/wh/db/t.lance/x", ""))


def test_emulator_judges_a_multi_object_delete_per_key():
    from support.session_policy_s3 import is_allowed, s3_requests

    write = session_policy("lake", "wh/db/t.lance", "write")

    def bulk(*keys: str) -> list[tuple[str, str, dict[str, str]]]:
        objects = "".join(f"<Object><Key>{key}</Key></Object>" for key in keys)
        body = f'<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{objects}</Delete>'
        return s3_requests("POST", "/lake", "delete=", body.encode())

    inside = bulk("wh/db/t.lance/data/a", "wh/db/t.lance/_jobs/b")
    assert [resource for _, resource, _ in inside] == [
        "arn:aws:s3:::lake/wh/db/t.lance/data/a",
        "arn:aws:s3:::lake/wh/db/t.lance/_jobs/b",
    ]
    assert all(is_allowed(write, *asked) for asked in inside)
    outside = bulk("wh/db/t.lance/data/a", "wh/db/other.lance/data/b")
    assert not all(is_allowed(write, *asked) for asked in outside)
    read = session_policy("lake", "wh/db/t.lance", "read")
    assert not any(is_allowed(read, *asked) for asked in inside)


@pytest.fixture
def enforced_lake(glue: Any, s3_lake: dict[str, str]) -> Any:
    from support.session_policy_s3 import SessionPolicyS3

    with SessionPolicyS3(s3_lake["endpoint"]) as proxy:
        yield {**s3_lake, "endpoint": proxy.endpoint, "proxy": proxy}


def _s3_with(options: dict[str, str]) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=options["aws_endpoint"],
        region_name="us-east-1",
        aws_access_key_id=options["aws_access_key_id"],
        aws_secret_access_key=options["aws_secret_access_key"],
        aws_session_token=options["aws_session_token"] or None,
    )


def test_vended_credentials_are_refused_outside_their_table_and_rights(glue: Any, enforced_lake):
    from botocore.exceptions import ClientError

    lake, proxy = enforced_lake, enforced_lake["proxy"]
    ns = glue.connect(**vending_properties(lake, **{"credential_vendor.permission": "read"}))
    db = glue.db(glue.unique())
    ns.create_namespace({"id": db})
    for name in ("mine", "theirs"):
        ns.declare_table({"id": [*db, name], "vend_credentials": False})
    mine = ns.describe_table({"id": [*db, "mine"]})
    theirs = ns.describe_table({"id": [*db, "theirs"], "vend_credentials": False}).location
    bucket = lake["bucket"]
    mine_key = mine.location.split(f"{bucket}/", 1)[1]
    theirs_key = theirs.split(f"{bucket}/", 1)[1]
    # The server's own (unscoped) keys put one file into each table.
    own = _s3_with({**mine.storage_options, **_server_keys()})
    for key in (mine_key, theirs_key):
        own.put_object(Bucket=bucket, Key=f"{key}/data/part-0", Body=b"rows")

    vended = _s3_with(mine.storage_options)
    assert vended.get_object(Bucket=bucket, Key=f"{mine_key}/data/part-0")["Body"].read()
    listed = vended.list_objects_v2(Bucket=bucket, Prefix=f"{mine_key}/")
    assert [o["Key"] for o in listed["Contents"]] == [f"{mine_key}/data/part-0"]
    refused = [
        lambda: vended.get_object(Bucket=bucket, Key=f"{theirs_key}/data/part-0"),
        lambda: vended.list_objects_v2(Bucket=bucket, Prefix=f"{theirs_key}/"),
        lambda: vended.put_object(Bucket=bucket, Key=f"{mine_key}/data/part-1", Body=b"x"),
        lambda: vended.delete_object(Bucket=bucket, Key=f"{mine_key}/data/part-0"),
    ]
    for call in refused:
        with pytest.raises(ClientError, match="AccessDenied"):
            call()
    assert len(proxy.refusals) == len(refused)

    # A write vendor: puts inside the table pass, another table's prefix stays closed.
    writer = glue.connect(**vending_properties(lake))
    written = _s3_with(writer.describe_table({"id": [*db, "mine"]}).storage_options)
    written.put_object(Bucket=bucket, Key=f"{mine_key}/data/part-1", Body=b"x")
    with pytest.raises(ClientError, match="AccessDenied"):
        written.put_object(Bucket=bucket, Key=f"{theirs_key}/data/part-1", Body=b"x")


def test_emulator_relays_an_objects_length_on_head(enforced_lake):
    """HEAD answers carry no body but the object's length, which readers size their reads by."""
    lake = enforced_lake
    own = _s3_with({"aws_endpoint": lake["endpoint"], **_server_keys()})
    own.put_object(Bucket=lake["bucket"], Key="lake/t.lance/sized", Body=b"12345")
    assert own.head_object(Bucket=lake["bucket"], Key="lake/t.lance/sized")["ContentLength"] == 5


def test_emulator_refuses_unvended_keys_while_only_vended(enforced_lake):
    from botocore.exceptions import ClientError

    lake, proxy = enforced_lake, enforced_lake["proxy"]
    own = _s3_with({"aws_endpoint": lake["endpoint"], **_server_keys()})
    own.put_object(Bucket=lake["bucket"], Key="lake/t.lance/before", Body=b"x")
    with proxy.only_vended():
        with pytest.raises(ClientError, match="AccessDenied"):
            own.get_object(Bucket=lake["bucket"], Key="lake/t.lance/before")
        with pytest.raises(ClientError, match="AccessDenied"):
            own.put_object(Bucket=lake["bucket"], Key="lake/t.lance/during", Body=b"x")
    assert len(proxy.refusals) == 2
    assert own.get_object(Bucket=lake["bucket"], Key="lake/t.lance/before")["Body"].read()


def _server_keys() -> dict[str, str]:
    return {
        "aws_access_key_id": "AKIASERVERSTORAGE01",
        "aws_secret_access_key": SERVER_STORAGE_SECRET,
        "aws_session_token": "",
    }


def test_clients_refresh_vended_credentials_before_they_expire(glue: Any, enforced_lake):
    """pylance asks the catalog again before ``expires_at_millis`` and signs with what it gets.

    No waiting: the client's refresh offset (``refresh_offset_millis``, Lance's storage option)
    exceeds the credentials' lifetime, so every storage access counts as "about to expire";
    the vendor's clock is moved past its reuse window, so each ask gets new credentials."""
    lake, proxy = enforced_lake, enforced_lake["proxy"]
    ns = glue.connect(**vending_properties(lake))
    clock = Clock()
    ns._vendor = CredentialVendor(ns._settings, clock=clock)
    db = glue.db(glue.unique())
    ns.create_namespace({"id": db})
    table_id = [*db, "events"]
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")

    with RestServer(ns) as server:
        client = connect_rest(server.url)
        eager = {"refresh_offset_millis": str(2 * MAX_LIFETIME_MILLIS)}
        dataset = lance.dataset(namespace_client=client, table_id=table_id, storage_options=eager)
        assert dataset.count_rows() == 3
        first = set(proxy.signers)
        clock.now += 850  # past the reuse window (3/4 of 15 minutes), before expiry
        refreshed = dataset.latest_storage_options()
        assert refreshed["aws_access_key_id"] not in first
        proxy.signers.clear()
        assert dataset.to_table().num_rows == 3
        assert refreshed["aws_access_key_id"] in proxy.signers


MAX_LIFETIME_MILLIS = 43_200_000


def connect_rest(url: str) -> Any:
    from lance_namespace import connect

    return connect("rest", {"uri": url})


def test_spark_executors_receive_only_the_token_and_vend_for_themselves(glue: Any, s3_lake):
    """What our Python data source ships to executors with ``impl=rest`` (its pickled
    ``Location``) holds the server's URL and token, no vended and no vendor credentials; an
    executor unpickling it asks the server for credentials of its own."""
    from lance_metastore.spark.options import Target
    from lance_metastore.spark.reader import open_dataset, resolve_location

    ns = glue.connect(**vending_properties(s3_lake))
    db = glue.db(glue.unique())
    ns.create_namespace({"id": db})
    table_id = (*db, "events")
    lance.write_dataset(DATA, namespace_client=ns, table_id=list(table_id), mode="create")
    token = "executor-token-3b9f27"
    with RestServer(ns, auth_token=token) as server:
        properties = {"uri": server.url, "headers.Authorization": f"Bearer {token}"}
        target = Target(
            path="$".join(table_id), impl="rest", properties=properties, table_id=table_id
        )
        location = resolve_location(target)
        assert location.vended
        driver_key = location.storage_options["aws_secret_access_key"]

        shipped = pickle.dumps(location)
        assert token.encode() in shipped
        carried = [s for s in (*VENDOR_CREDENTIALS, driver_key) if s.encode() in shipped]
        assert not carried

        on_executor = pickle.loads(shipped)
        assert_vended(on_executor.storage_options, s3_lake["endpoint"])
        assert open_dataset(on_executor).count_rows() == 3


SPARK_JOB_TIMEOUT_SECONDS = 420
# What scrubbed_environment sets: where no config is, and no instance metadata. No credential.
NON_CREDENTIAL_AWS_VARIABLES = {
    "AWS_EC2_METADATA_DISABLED",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
}


def test_spark_job_through_the_server_uses_only_vended_credentials(
    spark_installed: None, glue: Any, enforced_lake, tmp_path: Path
):
    """Our Python data source with ``impl=rest`` and a token, in a Spark (local[2]) whose
    driver and Python workers hold no AWS credentials and no ~/.aws: it reads an S3 table by
    name, appends to it from two partitions and reads it again. Storage sits behind the
    session-policy emulator, which during the job refuses every S3 request not signed with
    vended credentials, so a leak of the vendor's or the server's own keys would fail it."""
    lake, proxy = enforced_lake, enforced_lake["proxy"]
    ns = glue.connect(**vending_properties(lake))
    db = glue.db(glue.unique())
    ns.create_namespace({"id": db})
    table_id = [*db, "events"]
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")

    token = "spark-job-token-" + uuid.uuid4().hex[:8]
    env = scrubbed_environment(tmp_path / "home")
    env.update({k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "SPARK_HOME")})
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    assert not [k for k in env if k.startswith("AWS_") and k not in NON_CREDENTIAL_AWS_VARIABLES]
    with RestServer(ns, auth_token=token) as server:
        job = {
            "table": "$".join(table_id),
            "options": {
                "impl": "rest",
                "uri": server.url,
                "header.Authorization": f"Bearer {token}",
            },
            "rows": [[10, "x"], [11, "y"], [12, "z"]],
        }
        proxy.signers.clear()
        with proxy.only_vended():
            result = subprocess.run(
                [sys.executable, "-m", "support.vended_spark_job", json.dumps(job)],
                cwd=Path(__file__).parent,
                env=env,
                capture_output=True,
                text=True,
                timeout=SPARK_JOB_TIMEOUT_SECONDS,
            )
        job_signers = set(proxy.signers)
    assert result.returncode == 0, (proxy.refusals, result.stderr[-3000:])
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["before"] == 3
    assert answer["ids"] == [1, 2, 3, 10, 11, 12]

    # The Python workers (not the driver) held no AWS credential variable and no ~/.aws.
    workers = answer["workers"]
    assert workers and all(w["pid"] != answer["driver_pid"] for w in workers)
    for worker in workers:
        held = set(filter(None, worker["aws_variables"].split(",")))
        assert held <= NON_CREDENTIAL_AWS_VARIABLES
        assert not worker["aws_dir"]

    # Every S3 request of the job was signed with vended credentials, none was refused.
    assert job_signers and job_signers <= set(proxy.policies)
    assert not job_signers & {*VENDOR_CREDENTIALS, "AKIASERVERSTORAGE01"}
    assert not proxy.refusals
    leaked = [s for s in VENDOR_CREDENTIALS if s in result.stdout + result.stderr]
    assert not leaked
    assert token not in result.stdout + result.stderr

    # pylance in this process sees the appended rows.
    assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 6


@pytest.mark.skipif(
    not (Path(__file__).parents[1] / ".venv-sql" / "bin" / "python").exists(),
    reason="lance-spark's SQL catalog runs in .venv-sql (scripts/setup.sh makes it)",
)
def test_lance_spark_sql_catalog_without_aws_credentials(
    spark_installed: None, s3_catalog: Any, s3_lake, tmp_path: Path
):
    """lance-spark 0.4.0's SQL catalog (impl=rest) in a Spark whose process holds no AWS
    credentials: it creates, appends to and reads an S3 table with vended credentials (its
    readers and writers refresh them through LanceNamespaceStorageOptionsProvider)."""
    from support.spark_sql import SqlSession

    from lance_metastore.spark.sql import sql_conf

    ns = s3_catalog.connect(**vending_properties(s3_lake))
    db = s3_catalog.db(s3_catalog.unique("sql"))  # ["sql_.."] on Glue, ["hive", "sql_.."] on Hive 3
    name = ".".join(db)
    with RestServer(ns) as server:
        conf = sql_conf(server.url, "vended", spark_version="3.5")
        env = scrubbed_environment(tmp_path / "home")
        env.update({k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "SPARK_HOME")})
        with SqlSession(conf, tmp_path / "spark-sql.log", env=env) as sql:
            sql.sql(f"CREATE NAMESPACE IF NOT EXISTS vended.{name}")
            sql.sql(f"CREATE TABLE vended.{name}.events AS SELECT id FROM range(100)")
            sql.sql(f"INSERT INTO vended.{name}.events SELECT id FROM range(100, 150)")
            assert sql.sql(f"SELECT count(*), max(id) FROM vended.{name}.events") == [(150, 149)]
    described = ns.describe_table({"id": [*db, "events"], "vend_credentials": False})
    assert described.location.startswith(f"s3://{s3_lake['bucket']}/")
    assert lance.dataset(namespace_client=ns, table_id=[*db, "events"]).count_rows() == 150
    log = (tmp_path / "spark-sql.log").read_text(errors="replace")
    assert not [s for s in VENDOR_CREDENTIALS if s in log]


def test_a_server_narrows_vending_to_its_callers_privilege(glue: Any, enforced_lake):
    """The hook the REST server's access checks use: an ASGI layer that wraps each call in
    ``vending_at_most(<caller's privilege>)`` makes a write-vending namespace hand a reader
    read-only credentials (enforced by the session-policy emulator)."""
    from botocore.exceptions import ClientError

    from lance_metastore.rest import create_app

    lake = enforced_lake
    ns = glue.connect(**vending_properties(lake))
    db = glue.db(glue.unique())
    ns.create_namespace({"id": db})
    ns.declare_table({"id": [*db, "t"], "vend_credentials": False})
    inner = create_app(ns)

    async def reader_only(scope: Any, receive: Any, send: Any) -> None:
        with vending_at_most("read"):
            await inner(scope, receive, send)

    with RestServer(reader_only) as server:
        answer = connect_rest(server.url).describe_table(
            __import__("lance_namespace").DescribeTableRequest(id=[*db, "t"])
        )
    s3 = _s3_with(answer.storage_options)
    key = answer.location.split(f"{lake['bucket']}/", 1)[1]
    assert s3.list_objects_v2(Bucket=lake["bucket"], Prefix=f"{key}/")["KeyCount"] == 0
    with pytest.raises(ClientError, match="AccessDenied"):
        s3.put_object(Bucket=lake["bucket"], Key=f"{key}/data/x", Body=b"x")


# ---------------------------------------------------------------------------------------------
# Locations on S3, attacked through the server (issue 38)
# ---------------------------------------------------------------------------------------------


def test_vending_judges_the_stored_location_by_todays_rules(glue: Any, enforced_lake):
    """Entries made before the rules (here by the catalog's own client) whose location holds
    a wildcard, a query or a bucket root get no credentials, and no AssumeRole is made."""
    lake, proxy = enforced_lake, enforced_lake["proxy"]
    ns = glue.connect(**vending_properties(lake))
    db = glue.db(glue.unique())
    ns.create_namespace({"id": db})
    bucket = lake["bucket"]
    for n, stored in enumerate(
        [f"s3://{bucket}/lake/*", f"s3://{bucket}/lake/?x", f"s3://{bucket}", f"s3://{bucket}/a%2F"]
    ):
        glue.create_foreign_table(db, f"legacy{n}", stored, table_type="lance")
        with pytest.raises(InvalidInputError, match="Cannot vend credentials"):
            ns.describe_table({"id": [*db, f"legacy{n}"]})
        plain = ns.describe_table({"id": [*db, f"legacy{n}"], "vend_credentials": False})
        assert VENDED_CREDENTIALS_MARKER not in (plain.storage_options or {})
    assert not proxy.policies, "an AssumeRole was made for a refused location"


def test_served_s3_locations_read_one_way_and_vend_exactly_their_prefix(glue: Any, enforced_lake):
    """Through ``serve`` on moto's S3 behind the session-policy emulator: the probe's
    locations answer 13; an accepted one is vended credentials for its own prefix only (a
    sibling named with it as a prefix stays closed); a drop leaves a foreign object there."""
    from botocore.exceptions import ClientError

    from lance_metastore.rest import create_app

    lake = enforced_lake
    bucket = lake["bucket"]
    ns = glue.connect(**vending_properties(lake))
    db = glue.db(glue.unique())
    ns.create_namespace({"id": db})
    base = f"s3://{bucket}/lake/{db[-1]}"
    with RestServer(create_app(ns)) as server:
        client = connect_rest(server.url)
        from lance_namespace import DeclareTableRequest, DropTableRequest

        for hostile in (
            f"s3://{bucket}/lake/%2e%2e/private/hr.lance",
            f"{base}/t.lance?x",
            f"{base}/t.lance#x",
            f"{base}/%74.lance",
            f"s3://{bucket}/lake/*",
            f"s3://{bucket}/lake/?x",
            f"{base}//t.lance",
            f"s3://{bucket.upper()}/lake/{db[-1]}/t.lance",
        ):
            with pytest.raises(InvalidInputError):
                client.declare_table(DeclareTableRequest(id=[*db, "t"], location=hostile))
        answer = client.declare_table(DeclareTableRequest(id=[*db, "t"], location=f"{base}/t"))
        assert answer.location == f"{base}/t"
        s3 = _s3_with(answer.storage_options)
        own = _s3_with({**answer.storage_options, **_server_keys()})
        own.put_object(Bucket=bucket, Key=f"lake/{db[-1]}/t2/data/x", Body=b"theirs")
        assert s3.list_objects_v2(Bucket=bucket, Prefix=f"lake/{db[-1]}/t/")["KeyCount"] == 0
        for refused in (
            lambda: s3.list_objects_v2(Bucket=bucket, Prefix=f"lake/{db[-1]}/t"),
            lambda: s3.get_object(Bucket=bucket, Key=f"lake/{db[-1]}/t2/data/x"),
        ):
            with pytest.raises(ClientError, match="AccessDenied"):
                refused()
        lance.write_dataset(
            pa.table({"id": [1, 2]}), answer.location, storage_options=answer.storage_options
        )
        own.put_object(Bucket=bucket, Key=f"lake/{db[-1]}/t/foreign.parquet", Body=b"PAR1")
        client.drop_table(DropTableRequest(id=[*db, "t"]))
    left = own.list_objects_v2(Bucket=bucket, Prefix=f"lake/{db[-1]}/")
    assert sorted(o["Key"] for o in left["Contents"]) == [
        f"lake/{db[-1]}/t/foreign.parquet",
        f"lake/{db[-1]}/t2/data/x",
    ]


def test_racing_declares_on_s3_exactly_one_wins(glue: Any, s3_lake):
    """The claim on S3 is a conditional put (If-None-Match): two declares, one location."""
    import threading

    from lance_namespace.errors import LanceNamespaceError

    props = vending_properties(s3_lake, **{"credential_vendor.enabled": "false"})
    ns = glue.connect(confine_locations="true", **props)
    db = glue.db(glue.unique())
    ns.create_namespace({"id": db})
    for round_ in range(3):
        location = f"s3://{s3_lake['bucket']}/lake/{db[-1]}/contested{round_}.lance"
        barrier = threading.Barrier(2)
        codes: list[Any] = []

        def race(
            name: str, location: str = location, barrier: Any = barrier, codes: Any = codes
        ) -> None:
            client = glue.connect(confine_locations="true", **props)
            barrier.wait()
            try:
                client.declare_table({"id": [*db, name], "location": location})
                codes.append(None)
            except LanceNamespaceError as error:
                codes.append(error.code)

        threads = [threading.Thread(target=race, args=(f"r{round_}{n}",)) for n in "ab"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(codes, key=str) == sorted([None, 5], key=str), codes


def test_hostile_s3_locations_vend_exactly_what_the_catalog_keeps(glue: Any, enforced_lake):
    """Generated suffixes below the namespace's S3 directory: refused (13), or kept in
    canonical form below it, and the policy the emulator saw for the vended key names exactly
    that prefix, ending in '/'."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from lance_namespace.errors import LanceNamespaceError

    from lance_metastore.rules.locations import Location

    lake, proxy = enforced_lake, enforced_lake["proxy"]
    ns = glue.connect(confine_locations="true", **vending_properties(lake))
    db = glue.db(glue.unique())
    ns.create_namespace({"id": db})
    base = f"s3://{lake['bucket']}/lake/{db[-1]}"
    own = Location.parse(base, None, "base")
    counter = iter(range(10_000))
    atoms = st.sampled_from(["t.lance", "%2e%2e", "?x", "*", "a b", "[x]", "caf\u00e9", ".", ""])

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(atoms, min_size=1, max_size=3))
    def attempt(parts: list[str]) -> None:
        name = f"h{next(counter)}"
        text = f"{base}/{'/'.join(parts)}"
        try:
            answer = ns.declare_table({"id": [*db, name], "location": text})
        except LanceNamespaceError as error:
            assert error.code in (13, 5), error
            return
        placed = Location.parse(answer.location, None, "answer")
        assert str(placed) == answer.location and placed.is_under(own, strictly=True)
        policy = proxy.policies[answer.storage_options["aws_access_key_id"]]
        resources = [s["Resource"] for s in policy["Statement"]]
        assert f"arn:aws:s3:::{lake['bucket']}/{placed.key}/*" in resources
        listing = policy["Statement"][0]["Condition"]["StringLike"]["s3:prefix"]
        assert listing == [f"{placed.key}/", f"{placed.key}/*"]

    attempt()


def test_a_served_namespace_never_takes_a_later_namespaces_directory(
    glue: Any, enforced_lake: dict[str, Any]
):
    """The second review, through serve + S3 + vending: mallory created namespace ``a`` at
    ``s3://B/lake/victim`` before victor created ``victim``, then declared an alias of
    victor's table and was vended write credentials for it. The namespace's location must be
    exactly its own default directory: refused (13), and so is the alias."""
    from lance_namespace import CreateNamespaceRequest, DeclareTableRequest, connect
    from lance_namespace.errors import LanceNamespaceError

    lake = enforced_lake
    bucket = lake["bucket"]
    ns = glue.connect(**vending_properties(lake))
    mallory, victim = glue.unique("a"), glue.unique("victim")
    with RestServer(ns) as server:
        client = connect("rest", {"uri": server.url})
        for target in (f"s3://{bucket}/lake/{victim}", f"s3://{bucket}/lake"):
            with pytest.raises(LanceNamespaceError) as refused:
                client.create_namespace(
                    CreateNamespaceRequest(id=[mallory], properties={"location": target})
                )
            assert refused.value.code == 13
        client.create_namespace(CreateNamespaceRequest(id=[mallory]))
        client.create_namespace(CreateNamespaceRequest(id=[victim]))
        declared = client.declare_table(DeclareTableRequest(id=[victim, "payroll"]))
        assert declared.location == f"s3://{bucket}/lake/{victim}/payroll.lance"
        with pytest.raises(LanceNamespaceError) as alias:
            client.declare_table(
                DeclareTableRequest(id=[mallory, "alias"], location=declared.location)
            )
        assert alias.value.code == 13
