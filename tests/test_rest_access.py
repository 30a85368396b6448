"""Who may do what on the REST server, tested like a security feature, on the Glue emulator and
a real Hive Metastore 2.3: every route against every privilege, hidden namespaces that answer
like missing ones, lists that show only what a caller may see, the three schemes, fuzzed
credentials that never admit, no secret in any answer or log line, and SIGHUP reloads.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import lance_namespace
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lance_namespace import (
    CreateNamespaceRequest,
    DeclareTableRequest,
    DescribeTableRequest,
    DescribeTableResponse,
)
from lance_namespace.errors import ErrorCode, LanceNamespaceError
from support.access_kit import (
    AUDIENCE,
    ISSUER,
    JwksServer,
    SigningKey,
    jwks,
    policy_file,
    private_file,
)
from support.examples import sized
from support.harness import Harness
from support.rest_namespaces import BareNamespace
from support.serving import serve_cli

from lance_metastore.rest import (
    OPERATIONS,
    AccessControl,
    ApiKeys,
    BearerTokens,
    JwtBearer,
    RestServer,
    authenticator_from,
)
from lance_metastore.rest.access import TRANSACTION_OPERATIONS
from lance_metastore.rest.auth import Authenticator, Headers, Principal
from lance_metastore.rules.credentials import permission_to_vend

AUDIT = "lance_metastore.rest.audit"

# The contract: the least privilege each spec operation needs (each privilege includes the
# ones before it: list < read < write < create < manage).
NEEDS: dict[str, str] = {
    **dict.fromkeys(
        ["list_namespaces", "describe_namespace", "namespace_exists", "list_tables"], "list"
    ),
    **dict.fromkeys(["describe_table", "table_exists", "list_all_tables"], "list"),
    **dict.fromkeys(
        [
            "get_table_stats",
            "query_table",
            "count_table_rows",
            "explain_table_query_plan",
            "analyze_table_query_plan",
            "list_table_versions",
            "describe_table_version",
            "list_table_indices",
            "describe_table_index_stats",
            "list_table_tags",
            "get_table_tag_version",
            "list_table_branches",
            "describe_transaction",
        ],
        "read",
    ),
    **dict.fromkeys(
        [
            "insert_into_table",
            "merge_insert_into_table",
            "update_table",
            "delete_from_table",
            "alter_table_backfill_columns",
            "restore_table",
            "create_table_version",
            "batch_delete_table_versions",
            "batch_create_table_versions",
            "batch_commit_tables",
            "create_table_tag",
            "delete_table_tag",
            "update_table_tag",
            "create_table_branch",
            "delete_table_branch",
            "refresh_materialized_view",
            "alter_transaction",
        ],
        "write",
    ),
    **dict.fromkeys(
        [
            "create_namespace",
            "drop_namespace",
            "create_table",
            "declare_table",
            "create_empty_table",
            "register_table",
            "deregister_table",
            "drop_table",
            "rename_table",
            "create_materialized_view",
        ],
        "create",
    ),
    **dict.fromkeys(
        [
            "update_table_schema_metadata",
            "update_field_metadata",
            "alter_table_add_columns",
            "alter_table_alter_columns",
            "alter_table_drop_columns",
            "create_table_index",
            "create_table_scalar_index",
            "drop_table_index",
        ],
        "manage",
    ),
}
LEVELS = ["list", "read", "write", "create", "manage"]
NAMESPACE_OPERATIONS = {
    "list_namespaces",
    "describe_namespace",
    "namespace_exists",
    "list_tables",
    "create_namespace",
    "drop_namespace",
}
# One principal per privilege on "sales", and one with none at all.
PRINCIPALS = {name: name for name in LEVELS} | {"nobody": None}


def token_of(principal: str) -> str:
    return f"tok-{principal}-" + hashlib.sha256(principal.encode()).hexdigest()[:32]


def api_key_of(principal: str) -> str:
    return f"key-{principal}-" + hashlib.sha256(b"k" + principal.encode()).hexdigest()[:32]


def bearer(principal: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_of(principal)}"}


def arrow_stream() -> bytes:
    table = pa.table({"x": [1, 2]})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


@pytest.fixture(params=["glue", "hive2"])
def catalog(request: pytest.FixtureRequest) -> Harness:
    harness: Harness = request.getfixturevalue(request.param)
    harness.reset()
    return harness


@dataclass
class Secured:
    harness: Harness
    server: RestServer
    http: httpx.Client
    sales: list[str]
    hr: list[str]
    policy: Path
    access: AccessControl

    def route(self, operation_name: str, target: str) -> str:
        operation = next(op for op in OPERATIONS if op.name == operation_name)
        return operation.path.replace("{id}", target).replace("{index_name}", "idx")


@pytest.fixture
def secured(catalog: Harness, tmp_path: Path) -> Iterator[Secured]:
    namespace = catalog.connect()
    sales, hr = catalog.db("sales"), catalog.db("hr")
    for db in (sales, hr):
        namespace.create_namespace(CreateNamespaceRequest(id=db))
        namespace.declare_table(DeclareTableRequest(id=[*db, "orders"]))
    tokens = private_file(tmp_path / "tokens.json", {p: token_of(p) for p in PRINCIPALS})
    keys = private_file(tmp_path / "keys.json", {p: api_key_of(p) for p in PRINCIPALS})
    grants = [(name, sales, level) for name, level in PRINCIPALS.items() if level]
    policy = policy_file(tmp_path / "policy.json", grants)
    access = AccessControl(
        [BearerTokens(file=str(tokens)), ApiKeys(file=str(keys))], policy_file=str(policy)
    )
    with (
        RestServer(namespace, access=access) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        yield Secured(catalog, server, http, sales, hr, policy, access)


def call(secured: Secured, operation_name: str, target: str, headers: dict[str, str]) -> Any:
    """The operation's route on ``target`` with a body of the right kind (empty where it may be)."""
    operation = next(op for op in OPERATIONS if op.name == operation_name)
    table = target.split("$")
    if operation_name in TRANSACTION_OPERATIONS:
        target = f"{target}$1"  # the table's id, then the transaction's (its version)
    path = secured.route(operation_name, target)
    if operation.name == "batch_create_table_versions":
        entry = {"id": table, "version": 1, "manifest_path": "m"}
        body: Any = {"entries": [entry]}
    elif operation.name == "batch_commit_tables":
        inner = {"id": table, "version": 1, "manifest_path": "m"}
        body = {"operations": [{"create_table_version": inner}]}
    else:
        body = None
    if operation.method == "GET":
        params = {"id": target} if operation.name == "list_all_tables" else None
        return secured.http.get(path, headers=headers, params=params)
    if operation.body.value == "arrow":
        return secured.http.post(path, headers=headers, content=arrow_stream())
    if operation.body.value == "none":
        return secured.http.post(path, headers=headers)
    return secured.http.post(path, headers=headers, json=body if body is not None else {})


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == AUDIT]


def last_audit_line(caplog: pytest.LogCaptureFixture) -> str:
    """The request's audit line; an empty answer (exists: 200, no body) can reach the client
    just before the server writes its line, so wait for it, with a deadline."""
    deadline = time.monotonic() + 10
    while not (lines := audit_lines(caplog)):
        assert time.monotonic() < deadline, "no audit line"
        time.sleep(0.001)
    return lines[-1]


def error_of(response: httpx.Response) -> tuple[int, int]:
    return response.status_code, response.json()["code"]


def test_the_contract_names_every_route():
    assert set(NEEDS) == {op.name for op in OPERATIONS}


def test_every_route_allows_and_denies_by_privilege(
    secured: Secured, caplog: pytest.LogCaptureFixture
):
    """Principal by privilege by every route: allowed calls reach the catalog (whatever it then
    answers), denied ones answer 403/15, or the 404 of a missing object for a caller without
    any grant; the catalog's other namespace is untouched."""
    hr_before = secured.harness.snapshot()
    sales = "$".join(secured.sales)
    failures = []
    with caplog.at_level(logging.INFO, logger=AUDIT):
        for principal, level in PRINCIPALS.items():
            for operation in OPERATIONS:
                needed = NEEDS[operation.name]
                if operation.name in ("create_namespace", "drop_namespace"):
                    target = f"{sales}$sub"
                elif operation.name in NAMESPACE_OPERATIONS or operation.name == "list_all_tables":
                    target = sales
                else:
                    target = f"{sales}$ghost"
                caplog.clear()
                response = call(secured, operation.name, target, bearer(principal))
                line = last_audit_line(caplog)
                allowed = level is not None and LEVELS.index(level) >= LEVELS.index(needed)
                if not well_formed(secured, operation.name, target):
                    # an id the catalog refuses: 400 for every caller, judged before access
                    ok = error_of(response) == (400, 13) and "denied=" not in line
                elif allowed:
                    ok = response.status_code not in (401, 403) and "denied=" not in line
                else:
                    if level is not None:
                        expected: tuple[int, int] = (403, 15)
                    elif operation.name in NAMESPACE_OPERATIONS | {"list_all_tables"}:
                        expected = (404, 1)
                    else:
                        expected = (404, 4)
                    ok = error_of(response) == expected and f"denied={needed}" in line
                if not ok:
                    failures.append((principal, operation.name, response.status_code, line))
                assert f"identity=bearer:{principal} " in line
    assert not failures, failures
    after = secured.harness.snapshot()
    hr_keys = [key for key in hr_before if "hr" in str(key)]
    assert {k: hr_before[k] for k in hr_keys} == {k: after.get(k) for k in hr_keys}


def well_formed(secured: Secured, operation_name: str, target: str) -> bool:
    """Whether the catalog accepts ``target`` as the id ``operation_name`` acts on."""
    kind = "namespace" if operation_name in NAMESPACE_OPERATIONS | {"list_all_tables"} else "table"
    try:
        secured.harness.connect().canonical_id(target.split("$"), kind)
    except LanceNamespaceError:
        return False
    return True


def test_a_hidden_namespace_answers_like_a_missing_object(secured: Secured):
    """A caller without grants on hr gets, on every route, the same answer for hr's existing
    table as for a missing one (and for hr itself as for a missing namespace): names do not leak."""
    hr, ghost_db = "$".join(secured.hr), "$".join([*secured.hr[:-1], "nowhere"])
    # the canonical id and a variant the backend folds to it (ASCII case): the same answers
    for fold in (str, str.upper):
        for principal in ("read", "manage", "nobody"):
            for operation in OPERATIONS:
                if not operation.has_id and operation.name != "list_all_tables":
                    continue
                if operation.name in NAMESPACE_OPERATIONS | {"list_all_tables"}:
                    existing, missing = hr, ghost_db
                else:
                    existing, missing = f"{hr}$orders", f"{hr}$ghost"
                there = call(secured, operation.name, fold(existing), bearer(principal))
                absent = call(secured, operation.name, fold(missing), bearer(principal))
                assert there.status_code == absent.status_code == 404, (principal, operation.name)
                assert there.json()["code"] == absent.json()["code"]
                assert there.json()["error"].replace(existing, "X") == absent.json()[
                    "error"
                ].replace(missing, "X")
                assert set(there.headers) == set(absent.headers)


def test_a_location_conflict_names_no_hidden_table(secured: Secured):
    """A caller who may create in sales, registering a table at the location of hr's table
    (which it may not see), is refused without learning that table's name."""
    hidden = secured.harness.connect().describe_table(
        DescribeTableRequest(id=[*secured.hr, "orders"])
    )
    sales = "$".join(secured.sales)
    answer = secured.http.post(
        f"/v1/table/{sales}$copy/register",
        json={"location": hidden.location},
        headers=bearer("create"),
    )
    assert answer.status_code in (400, 409)
    # the location is the caller's own text; the hidden table's id must not appear
    assert "$".join([*secured.hr, "orders"]) not in answer.json()["error"]


def test_lists_show_only_what_the_caller_may_see(secured: Secured):
    http = secured.http
    root = "$".join(secured.sales[:-1]) or "$"
    listed = http.get(f"/v1/namespace/{root}/list", headers=bearer("read")).json()["namespaces"]
    assert listed == [secured.sales[-1]]
    everything = http.get(f"/v1/namespace/{root}/list", headers=bearer("manage"))
    assert secured.hr[-1] not in everything.json()["namespaces"]  # grants are per prefix
    assert error_of(http.get(f"/v1/namespace/{root}/list", headers=bearer("nobody"))) == (404, 1)
    all_tables = http.get("/v1/table", headers=bearer("read")).json()["tables"]
    assert all_tables == ["$".join([*secured.sales, "orders"])]
    assert http.get("/v1/table", headers=bearer("nobody")).json()["tables"] == []
    hr = "$".join(secured.hr)
    assert error_of(http.get(f"/v1/namespace/{hr}/table/list", headers=bearer("read"))) == (404, 1)
    sales = "$".join(secured.sales)
    tables = http.get(f"/v1/namespace/{sales}/table/list", headers=bearer("list")).json()
    assert tables["tables"] == ["orders"]


def test_pylance_client_with_an_api_key_and_a_token(secured: Secured):
    """Lance's own REST client passes credentials as header.<name> properties; a denial reaches
    it as the spec's error class."""
    url, orders = secured.server.url, [*secured.sales, "orders"]
    reader = lance_namespace.connect("rest", {"uri": url, "header.x-api-key": api_key_of("read")})
    parent = lance_namespace.ListNamespacesRequest(id=secured.sales[:-1])
    assert reader.list_namespaces(parent).namespaces == [secured.sales[-1]]
    assert reader.describe_table(DescribeTableRequest(id=orders)).location
    with pytest.raises(LanceNamespaceError) as denied:
        reader.drop_table(lance_namespace.DropTableRequest(id=orders))
    assert denied.value.code == ErrorCode.PERMISSION_DENIED
    with pytest.raises(LanceNamespaceError) as hidden:
        reader.describe_table(DescribeTableRequest(id=[*secured.hr, "orders"]))
    assert hidden.value.code == ErrorCode.TABLE_NOT_FOUND
    creator = lance_namespace.connect(
        "rest", {"uri": url, "header.Authorization": f"Bearer {token_of('create')}"}
    )
    creator.drop_table(lance_namespace.DropTableRequest(id=orders))
    assert not creator.list_tables(lance_namespace.ListTablesRequest(id=secured.sales)).tables


def test_api_keys_and_missing_or_bad_credentials(secured: Secured):
    http, sales = secured.http, "$".join(secured.sales)
    describe = f"/v1/table/{sales}$orders/describe"
    assert (
        http.post(describe, json={}, headers={"x-api-key": api_key_of("read")}).status_code == 200
    )
    for headers in [
        {},
        {"x-api-key": "wrong"},
        {"Authorization": "Bearer wrong"},
        {"Authorization": token_of("read")},  # no scheme word
        {"Authorization": f"Basic {token_of('read')}"},
        {"x-api-key": token_of("read")},  # a bearer token is not an API key
    ]:
        response = http.post(describe, json={}, headers=headers)
        assert error_of(response) == (401, 16), headers
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert http.get("/health").status_code == 200


def test_vended_permission_follows_the_caller(tmp_path: Path):
    """The namespace sees, for each caller, the storage permission its privilege allows
    (lance_metastore.rules.credentials.permission_to_vend, what credential vending reads)."""
    tokens = private_file(tmp_path / "tokens.json", {p: token_of(p) for p in PRINCIPALS})
    grants = [(name, ["db"], level) for name, level in PRINCIPALS.items() if level]
    access = AccessControl(
        [BearerTokens(file=str(tokens))],
        str(policy_file(tmp_path / "policy.json", grants)),
    )
    expected = {"list": None, "read": "read", "write": "write", "create": "write"}
    expected["manage"] = "admin"
    with (
        RestServer(PermissionEcho(), access=access) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        for principal, permission in expected.items():
            answer = http.post("/v1/table/db$t/describe", json={}, headers=bearer(principal))
            assert answer.json()["storage_options"]["vend"] == str(permission), principal
    with RestServer(PermissionEcho()) as server:  # no policy: nothing narrowed
        answer = httpx.post(server.url + "/v1/table/db$t/describe", json={})
        assert answer.json()["storage_options"]["vend"] == "admin"


class PermissionEcho(BareNamespace):
    """Answers describe_table with the permission credential vending would vend now."""

    def describe_table(self, request: DescribeTableRequest) -> DescribeTableResponse:
        return DescribeTableResponse(
            location="file:///t", storage_options={"vend": str(permission_to_vend("admin"))}
        )


# ---------------------------------------------------------------------------------------------
# JWT access tokens
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def signing_key() -> SigningKey:
    return SigningKey("key-1")


def jwt_server(tmp_path: Path, namespace: Any, jwks_source: str, **options: str) -> RestServer:
    policy = policy_file(tmp_path / "policy.json", [("alice", ["sales"], "read")])
    scheme = JwtBearer(issuer=ISSUER, audience=AUDIENCE, jwks=jwks_source, **options)
    return RestServer(namespace, access=AccessControl([scheme], str(policy)))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged_tokens(key: SigningKey) -> dict[str, str]:
    """Tokens that must never admit, each for one reason."""
    other = SigningKey(key.key_id)  # same key id, another key
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now + 600}
    unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": key.key_id})
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": key.key_id}).encode())
    signing_input = f"{header}.{_b64(json.dumps(claims).encode())}"
    mac = hmac.new(key.public_pem.encode(), signing_input.encode(), hashlib.sha256).digest()
    good = key.token()
    head, body, signature = good.split(".")
    tampered_claims = {**claims, "sub": "admin"}
    return {
        "expired": key.token(exp=now - 3600, iat=now - 7200),
        "not yet valid": key.token(nbf=now + 3600),
        "wrong audience": key.token(aud="someone-else"),
        "wrong issuer": key.token(iss="https://evil.test"),
        "no expiry": key.token(exp=None),
        "no subject": key.token(sub=None),
        "wrong key": other.token(),
        "alg none": unsigned,
        "alg none, no signature dot": unsigned.rstrip("."),
        "HS256 with the public key as secret": f"{signing_input}.{_b64(mac)}",
        "tampered payload": f"{head}.{_b64(json.dumps(tampered_claims).encode())}.{signature}",
        "unknown key id": SigningKey("key-x").token(),
        "oversized": key.token(padding="p" * 9000),
        "malformed base64": f"{head}.!!!not*base64!!!.{signature}",
        "two parts": f"{head}.{body}",
        "empty parts": "..",
        "garbage": "a.b.c",
    }


def test_jwt_from_a_jwks_file(tmp_path: Path, signing_key: SigningKey, caplog):
    jwks_file = private_file(tmp_path / "jwks.json", jwks(signing_key))
    forged = forged_tokens(signing_key)
    answers: list[str] = []
    with (
        caplog.at_level(logging.DEBUG),
        jwt_server(tmp_path, PermissionEcho(), str(jwks_file)) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        good = http.post(
            "/v1/table/sales$t/describe",
            json={},
            headers={"Authorization": f"Bearer {signing_key.token()}"},
        )
        assert good.status_code == 200 and good.json()["storage_options"]["vend"] == "read"
        for reason, token in forged.items():
            response = http.post(
                "/v1/table/sales$t/describe", json={}, headers={"Authorization": f"Bearer {token}"}
            )
            assert error_of(response) == (401, 16), reason
            answers.append(response.text + str(response.headers))
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for reason, token in [*forged.items(), ("good", signing_key.token())]:
        signature = token.rsplit(".", 1)[-1]
        for secret in (token, signature):
            if len(secret) >= 16:  # "a.b.c" has no secret to leak
                assert all(secret not in text for text in [*answers, logged]), reason


def test_jwks_url_is_cached_and_refetched_for_an_unknown_key(tmp_path: Path):
    first, second = SigningKey("key-1"), SigningKey("key-2")
    issuer = JwksServer(first)
    with issuer.running():
        scheme = JwtBearer(issuer=ISSUER, audience=AUDIENCE, jwks=issuer.url, refetch_seconds="0")
        access = AccessControl([scheme])
        with RestServer(BareNamespace(), access=access) as server:
            url = server.url + "/v1/namespace/x/describe"

            def status(key: SigningKey) -> int:
                headers = {"Authorization": f"Bearer {key.token()}"}
                return httpx.post(url, json={}, headers=headers).status_code

            assert status(first) == 406 and issuer.fetches == 1  # admitted (Bare refuses)
            assert status(first) == 406 and issuer.fetches == 1  # cached
            issuer.keys = [first, second]  # the issuer rotates in a new key
            # the unknown key id answers 401 at once and starts one fetch in the background
            assert status(second) == 401
            deadline = time.monotonic() + 10
            while status(second) != 406:
                assert time.monotonic() < deadline, "the new key never arrived"
                time.sleep(0.02)
            assert issuer.fetches == 2
        # an invented key id costs the issuer at most one fetch per interval
        limited = JwtBearer(issuer=ISSUER, audience=AUDIENCE, jwks=issuer.url, refetch_seconds="60")
        fetched = issuer.fetches
        with RestServer(BareNamespace(), access=AccessControl([limited])) as server:
            for n in range(20):
                headers = {"Authorization": f"Bearer {SigningKey(f'k{n % 3}').token()}"}
                answer = httpx.post(server.url + "/v1/namespace/x/describe", headers=headers)
                assert answer.status_code == 401
        assert issuer.fetches == fetched  # no fetch after the one at start


def test_fuzzed_credentials_never_admit(tmp_path: Path, signing_key: SigningKey, caplog):
    """Random Authorization and x-api-key values (a bounded count) never admit and never
    reach a log line or an answer."""
    jwks_file = private_file(tmp_path / "jwks.json", jwks(signing_key))
    tokens = private_file(tmp_path / "tokens.json", {"alice": token_of("alice")})
    keys = private_file(tmp_path / "keys.json", {"alice": api_key_of("alice")})
    access = AccessControl(
        [
            BearerTokens(file=str(tokens)),
            ApiKeys(file=str(keys)),
            JwtBearer(issuer=ISSUER, audience=AUDIENCE, jwks=str(jwks_file)),
        ]
    )
    printable = st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=300)
    real = [token_of("alice"), api_key_of("alice"), signing_key.token()]
    with (
        caplog.at_level(logging.DEBUG),
        RestServer(BareNamespace(), access=access) as server,
        httpx.Client(base_url=server.url) as http,
    ):

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
        @given(
            scheme=st.sampled_from(["Bearer ", "bearer ", "Basic ", "", "Bearer  "]),
            value=printable,
            key=st.one_of(st.none(), printable),
        )
        def never_admits(scheme: str, value: str, key: str | None) -> None:
            if value in real or key in real:
                return
            headers = (
                {"Authorization": (scheme + value).strip()} if (scheme + value).strip() else {}
            )
            if key:
                headers["x-api-key"] = key
            response = http.post("/v1/namespace/x/describe", json={}, headers=headers)
            assert error_of(response) == (401, 16)
            assert (value not in response.text) or len(value) < 8

        never_admits()
    secrets = [*real, signing_key.private_pem.splitlines()[1]]
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert not any(secret in logged for secret in secrets)


def test_no_secret_in_any_answer_or_log(secured: Secured, caplog: pytest.LogCaptureFixture):
    """Every principal's token and key, through every route: none appears in an answer (body
    or headers) or in any log line, audit included."""
    texts: list[str] = []
    sales = "$".join(secured.sales)
    with caplog.at_level(logging.DEBUG):
        for principal in PRINCIPALS:
            for index, operation in enumerate(OPERATIONS):
                target = sales if operation.name in NAMESPACE_OPERATIONS else f"{sales}$orders"
                schemes = [bearer(principal), {"x-api-key": api_key_of(principal)}]
                # Every route with both schemes; in the fast tier with one, taking turns.
                for headers in sized(schemes, [schemes[index % 2]]):
                    if operation.name in ("drop_table", "deregister_table", "drop_namespace"):
                        continue  # keep the table for the next principal
                    response = call(secured, operation.name, target, headers)
                    texts.append(response.text + json.dumps(dict(response.headers)))
        texts.extend(record.getMessage() for record in caplog.records)
        texts.append(repr(secured.access.authenticators) + repr(secured.server))
    everything = "\n".join(texts)
    for principal in PRINCIPALS:
        assert token_of(principal) not in everything
        assert api_key_of(principal) not in everything


def test_schemes_by_name_or_class_path(tmp_path: Path):
    tokens = private_file(tmp_path / "tokens.json", {"alice": token_of("alice")})
    assert isinstance(authenticator_from("bearer", {"file": str(tokens)}), BearerTokens)
    plugged = authenticator_from(f"{__name__}:HeaderNamesCaller", {"header": "x-caller"})
    with (
        RestServer(BareNamespace(), access=AccessControl([plugged])) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        assert http.post("/v1/namespace/x/describe", json={}).status_code == 401
        response = http.post("/v1/namespace/x/describe", json={}, headers={"x-caller": "bob"})
        assert response.status_code == 406  # admitted; the bare namespace refuses the call
    for bad in ["nope", f"{__name__}:PRINCIPALS", "no.such.module:Thing"]:
        with pytest.raises(ValueError):
            authenticator_from(bad, {})
    with pytest.raises(ValueError, match="refused its options"):
        authenticator_from("bearer", {"colour": "blue"})


class HeaderNamesCaller(Authenticator):
    """A site's own scheme, for the plug-in test: a header names the caller (a trusted proxy)."""

    scheme = "proxy"

    def __init__(self, header: str) -> None:
        self.header = header.encode()

    async def authenticate(self, headers: Headers) -> Principal | None:
        name = headers.get(self.header)
        return Principal(name.decode(), self.scheme) if name else None


def test_bad_policy_and_token_files_are_refused(tmp_path: Path):
    for content, reason in [
        ("{", "does not parse"),
        ({"grants": [{"principal": "a", "namespace": "sales", "privilege": "read"}]}, "list"),
        ({"grants": [{"principal": "a", "namespace": [], "privilege": "own"}]}, "privilege"),
        ({"grants": [{"principal": "a", "namespace": []}]}, "exactly"),
        ([], "grants"),
    ]:
        path = private_file(tmp_path / "policy.json", content)
        with pytest.raises(ValueError, match=reason):
            AccessControl([], str(path))
    shared = tmp_path / "shared.json"
    shared.write_text(json.dumps({"a": "secret-token"}))
    os.chmod(shared, 0o666)
    with pytest.raises(ValueError, match="can be changed by other users"):
        BearerTokens(file=str(shared))
    with pytest.raises(ValueError, match="non-empty string"):
        BearerTokens(file=str(private_file(tmp_path / "t.json", {"a": 3})))
    with pytest.raises(ValueError, match="Cannot load the JWT key set"):
        JwtBearer(issuer=ISSUER, audience=AUDIENCE, jwks=str(tmp_path / "missing.json"))


def test_a_yaml_policy_file(tmp_path: Path):
    pytest.importorskip("yaml")
    policy = private_file(
        tmp_path / "policy.yaml",
        "grants:\n  - principal: bearer:analyst\n    namespace: [sales]\n    privilege: read\n",
    )
    access = AccessControl([], str(policy))
    analyst = Principal("analyst", "bearer")
    assert access.check(analyst, "query_table", ["sales", "t"]) is None
    assert access.check(analyst, "drop_table", ["sales", "t"]).status == 403


# ---------------------------------------------------------------------------------------------
# SIGHUP and --insecure through the CLI
# ---------------------------------------------------------------------------------------------


def test_sighup_reloads_files_on_an_open_connection(tmp_path: Path):
    """A keep-alive connection stays open across SIGHUP and sees the new policy and tokens."""
    tokens = private_file(tmp_path / "tokens.json", {"alice": token_of("alice")})
    policy = policy_file(tmp_path / "policy.json", [("alice", ["other"], "list")])
    process = serve_cli(
        "--impl",
        "rest_namespaces.SlowNamespace",
        "--prop",
        "delay=0",
        "serve",
        "--port",
        "0",
        "--tokens-file",
        str(tokens),
        "--policy-file",
        str(policy),
        "--keep-alive-timeout",
        "60",
    )
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), process.stderr.read()
        opened: list[Any] = []
        transport = httpx.HTTPTransport()
        with httpx.Client(base_url=url, transport=transport, timeout=30) as http:

            def describe(token: str) -> httpx.Response:
                headers = {"Authorization": f"Bearer {token}"}
                response = http.post("/v1/namespace/x/describe", json={}, headers=headers)
                stream = response.extensions["network_stream"]
                opened.append(stream.get_extra_info("socket").getsockname())
                return response

            assert error_of(describe(token_of("alice"))) == (404, 1)  # x is hidden from alice
            policy_file(policy, [("alice", ["x"], "list")])
            private_file(tokens, {"alice": token_of("alice"), "bob": token_of("bob")})
            process.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 30
            while describe(token_of("alice")).status_code != 200:
                assert time.monotonic() < deadline, "the new policy never applied"
                time.sleep(0.05)
            assert describe(token_of("bob")).status_code == 404  # bob is known, has no grant
            assert len(set(opened)) == 1  # one connection throughout
            # a broken file on reload keeps the previous state
            (tmp_path / "policy.json").write_text("{broken")
            os.chmod(policy, 0o600)
            process.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 30
            while "keeping the old one" not in _stderr_so_far(process, tmp_path):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert describe(token_of("alice")).status_code == 200
    finally:
        process.terminate()
        process.wait(30)


def _stderr_so_far(process: subprocess.Popen[str], tmp_path: Path) -> str:
    """What the server wrote to stderr so far (read without blocking)."""
    import fcntl

    descriptor = process.stderr.fileno()
    flags = fcntl.fcntl(descriptor, fcntl.F_GETFL)
    fcntl.fcntl(descriptor, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    collected = tmp_path / "stderr.txt"
    try:
        chunk = os.read(descriptor, 1 << 16)
    except BlockingIOError:
        chunk = b""
    with collected.open("ab") as handle:
        handle.write(chunk)
    return collected.read_text(errors="replace")


def test_insecure_rule_counts_every_scheme_as_auth(tmp_path: Path):
    keys = private_file(tmp_path / "keys.json", {"alice": api_key_of("alice")})
    refused = serve_cli("--impl", "rest_namespaces.BareNamespace", "serve", "--host", "0.0.0.0")
    assert refused.wait(60) != 0 and "--api-keys-file" in refused.stderr.read()
    process = serve_cli(
        "--impl",
        "rest_namespaces.BareNamespace",
        "serve",
        "--host",
        "0.0.0.0",
        "--port",
        "0",
        "--api-keys-file",
        str(keys),
    )
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://0.0.0.0:"), process.stderr.read()
        local = url.replace("0.0.0.0", "127.0.0.1")
        assert httpx.post(local + "/v1/namespace/x/describe", json={}).status_code == 401
    finally:
        process.terminate()
        process.wait(30)
