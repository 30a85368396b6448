"""Tests of the Glue emulator (tests/support/glue_emulator.py), over HTTP with plain boto3.

They check the AWS behaviour the emulator adds to moto. With LANCE_METASTORE_TEST_GLUE_REAL=1 the
same tests run against real AWS Glue (names get a unique suffix and what a test creates is deleted
afterwards); tests that need emulator-only helpers (faults, federated catalogs, reset) skip there.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from support.glue_emulator import (
    GLUE_MODEL,
    REAL_GLUE_CATALOG_ID_ENV,
    REAL_GLUE_ENV,
    GlueConnectionSettings,
    GlueEmulator,
    glue_endpoint_from_env,
)

NO_RETRIES = {"retries": {"total_max_attempts": 1}}


@dataclass
class GlueTarget:
    """What a test talks to: the emulator, or real Glue when opted in."""

    settings: GlueConnectionSettings
    account_id: str
    emulator: GlueEmulator | None
    suffix: str = ""
    created: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def name(self, base: str) -> str:
        """A resource name that can't collide with anything else in a real account."""
        return f"{base}{self.suffix}"

    def catalog_id(self, *path: str) -> str:
        return f"{self.account_id}:{'/'.join(path)}"

    def require_emulator(self) -> GlueEmulator:
        if self.emulator is None:
            pytest.skip("needs an emulator-only helper")
        return self.emulator

    def client(self, service_name: str = "glue", **config: Any) -> Any:
        client = self.settings.client(service_name, **{**NO_RETRIES, **config})
        if self.emulator is None and service_name == "glue":
            client.meta.events.register("provide-client-params.glue_api.*", self._record_creation)
        return client

    def _record_creation(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in ("CreateCatalog", "CreateDatabase", "CreateTable"):
            self.created.append((model.name, dict(params)))

    def delete_created(self) -> None:
        """Real Glue has no reset: delete what this test created, newest first."""
        glue_api = self.settings.client("glue")
        for action, params in reversed(self.created):
            catalog = {"CatalogId": params["CatalogId"]} if "CatalogId" in params else {}
            try:
                if action == "CreateTable":
                    glue_api.delete_table(
                        **catalog,
                        DatabaseName=params["DatabaseName"],
                        Name=params["TableInput"]["Name"],
                    )
                elif action == "CreateDatabase":
                    glue_api.delete_database(**catalog, Name=params["DatabaseInput"]["Name"])
                else:
                    glue_api.delete_catalog(CatalogId=self.catalog_id(params["Name"]))
            except ClientError:
                pass
        self.created.clear()


@pytest.fixture(scope="session")
def session_target(request: pytest.FixtureRequest) -> GlueTarget:
    real = glue_endpoint_from_env()
    if real is not None:
        account_id = real.client("sts").get_caller_identity()["Account"]
        return GlueTarget(settings=real, account_id=account_id, emulator=None)
    # The session's one emulator (conftest.py starts it on first use).
    emulator: GlueEmulator = request.getfixturevalue("glue_emulator")
    return GlueTarget(
        settings=emulator.connection_settings, account_id=emulator.account_id, emulator=emulator
    )


@pytest.fixture
def target(session_target: GlueTarget) -> Iterator[GlueTarget]:
    if session_target.emulator is not None:
        session_target.emulator.reset()
        yield session_target
        return
    session_target.suffix = f"_{uuid.uuid4().hex[:8]}"
    try:
        yield session_target
    finally:
        session_target.delete_created()


@pytest.fixture
def glue_api(target: GlueTarget) -> Any:
    return target.client()


@pytest.fixture
def emulator(target: GlueTarget) -> GlueEmulator:
    return target.require_emulator()


def error_of(call: Callable[[], Any]) -> tuple[str, int]:
    """The AWS error code and HTTP status a call fails with."""
    with pytest.raises(ClientError) as excinfo:
        call()
    response = excinfo.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def ours(target: GlueTarget, names: list[str]) -> list[str]:
    """Names this test made (a real account has other catalogs and databases too)."""
    return [n for n in names if n.endswith(target.suffix)]


def catalog_names(response: dict[str, Any]) -> list[str]:
    return [c["Name"] for c in response["CatalogList"]]


def all_pages(call: Callable[..., dict[str, Any]], key: str, **kwargs: Any) -> list[Any]:
    """Every item of a paged Glue listing (a real account may need more than one page)."""
    items: list[Any] = []
    while True:
        response = call(**kwargs)
        items.extend(response[key])
        if not response.get("NextToken"):
            return items
        kwargs["NextToken"] = response["NextToken"]


def database_names(glue_api: Any, **catalog: str) -> list[str]:
    return [d["Name"] for d in all_pages(glue_api.get_databases, "DatabaseList", **catalog)]


def make_table(glue_api: Any, database: str, table: str, **catalog: str) -> None:
    glue_api.create_table(
        **catalog,
        DatabaseName=database,
        TableInput={"Name": table, "Parameters": {"table_type": "lance"}},
    )


# --- catalogs ----------------------------------------------------------------------------------


def test_create_and_get_catalog(target: GlueTarget, glue_api: Any) -> None:
    name = target.name("sales")
    glue_api.create_catalog(
        Name=name,
        CatalogInput={"Description": "sales data", "Parameters": {"owner": "team-a"}},
        Tags={"env": "test"},
    )

    catalog = glue_api.get_catalog(CatalogId=target.catalog_id(name))["Catalog"]

    assert catalog["CatalogId"] == target.catalog_id(name)
    assert catalog["Name"] == name
    assert catalog["Description"] == "sales data"
    assert catalog["Parameters"] == {"owner": "team-a"}
    assert catalog["ResourceArn"].endswith(f":{target.account_id}:catalog/{name}")
    assert "CreateTime" in catalog and "UpdateTime" in catalog
    assert glue_api.get_tags(ResourceArn=catalog["ResourceArn"])["Tags"] == {"env": "test"}


def test_get_root_catalog_by_account_id(target: GlueTarget, glue_api: Any) -> None:
    catalog = glue_api.get_catalog(CatalogId=target.account_id)["Catalog"]
    assert catalog["CatalogId"] == target.account_id


def test_create_existing_catalog_fails(target: GlueTarget, glue_api: Any) -> None:
    name = target.name("sales")
    glue_api.create_catalog(Name=name, CatalogInput={})
    code, status = error_of(lambda: glue_api.create_catalog(Name=name, CatalogInput={}))
    assert (code, status) == ("AlreadyExistsException", 400)


@pytest.mark.parametrize(
    "name",
    ["a.b", "a/b", "a\\b", "aws:mine", "x" * 65, "", "ACCOUNT"],
    ids=["dot", "slash", "backslash", "aws-prefix", "too-long", "empty", "account-id"],
)
def test_catalog_name_rules(target: GlueTarget, name: str) -> None:
    # botocore checks only the minimum length client-side; let every name reach the server.
    glue_api = target.client(parameter_validation=False)
    name = target.account_id if name == "ACCOUNT" else name
    code, status = error_of(lambda: glue_api.create_catalog(Name=name, CatalogInput={}))
    assert (code, status) == ("InvalidInputException", 400)


def test_longest_catalog_name_is_accepted(target: GlueTarget, glue_api: Any) -> None:
    name = target.name("c")
    name += "x" * (64 - len(name))
    glue_api.create_catalog(Name=name, CatalogInput={})
    assert glue_api.get_catalog(CatalogId=target.catalog_id(name))["Catalog"]["Name"] == name


def test_unknown_catalog_is_not_found(target: GlueTarget, glue_api: Any) -> None:
    missing = target.catalog_id(target.name("missing"))
    assert error_of(lambda: glue_api.get_catalog(CatalogId=missing))[0] == "EntityNotFoundException"
    assert error_of(lambda: glue_api.get_catalogs(ParentCatalogId=missing))[0] == (
        "EntityNotFoundException"
    )


def test_get_catalogs_lists_children_and_optionally_the_root(
    target: GlueTarget, glue_api: Any
) -> None:
    names = sorted(target.name(n) for n in ("sales", "marketing"))
    for name in names:
        glue_api.create_catalog(Name=name, CatalogInput={})

    listed = all_pages(glue_api.get_catalogs, "CatalogList")
    assert sorted(ours(target, [c["Name"] for c in listed])) == names
    assert target.account_id not in [c["CatalogId"] for c in listed]
    with_root = all_pages(glue_api.get_catalogs, "CatalogList", IncludeRoot=True)
    assert target.account_id in [c["CatalogId"] for c in with_root]
    by_account = all_pages(
        glue_api.get_catalogs, "CatalogList", ParentCatalogId=target.account_id, IncludeRoot=True
    )
    assert target.account_id in [c["CatalogId"] for c in by_account]


@pytest.mark.parametrize("include_root", [True, False])
def test_include_root_only_for_the_account(
    target: GlueTarget, glue_api: Any, include_root: bool
) -> None:
    name = target.name("sales")
    glue_api.create_catalog(Name=name, CatalogInput={})
    code, _ = error_of(
        lambda: glue_api.get_catalogs(
            ParentCatalogId=target.catalog_id(name), IncludeRoot=include_root
        )
    )
    assert code == "InvalidInputException"


@pytest.mark.parametrize("max_results", [0, 1001])
def test_max_results_out_of_bounds(target: GlueTarget, max_results: int) -> None:
    glue_api = target.client(parameter_validation=False)
    code, status = error_of(lambda: glue_api.get_catalogs(MaxResults=max_results))
    assert (code, status) == ("InvalidInputException", 400)


def test_max_results_bounds_are_inclusive(glue_api: Any) -> None:
    glue_api.get_catalogs(MaxResults=1)
    glue_api.get_catalogs(MaxResults=1000)


def test_get_catalogs_pages_with_next_token(target: GlueTarget, glue_api: Any) -> None:
    names = sorted(target.name(f"cat{i}") for i in range(5))
    for name in names:
        glue_api.create_catalog(Name=name, CatalogInput={})

    pages: list[list[str]] = []
    kwargs: dict[str, Any] = {"MaxResults": 2}
    while True:
        response = glue_api.get_catalogs(**kwargs)
        pages.append(catalog_names(response))
        if "NextToken" not in response:
            break
        kwargs["NextToken"] = response["NextToken"]

    assert len(pages) >= 3
    assert all(len(page) <= 2 for page in pages)
    listed = [name for page in pages for name in page]
    assert sorted(ours(target, listed)) == names
    assert len(listed) == len(set(listed))


def test_invalid_next_token(emulator: GlueEmulator, glue_api: Any) -> None:
    code, _ = error_of(lambda: glue_api.get_catalogs(NextToken="not-a-token"))
    assert code == "InvalidInputException"


def test_recursive_listing_reaches_federated_catalogs(
    target: GlueTarget, emulator: GlueEmulator, glue_api: Any
) -> None:
    glue_api.create_catalog(Name="sales", CatalogInput={})
    tables_id = emulator.add_federated_catalog(target.account_id, "s3tablescatalog")
    bucket_id = emulator.add_federated_catalog(tables_id, "my-bucket", {"region": "us-east-1"})
    assert bucket_id == target.catalog_id("s3tablescatalog", "my-bucket")

    assert catalog_names(glue_api.get_catalogs()) == ["s3tablescatalog", "sales"]
    recursive = glue_api.get_catalogs(Recursive=True)["CatalogList"]
    assert sorted(c["CatalogId"] for c in recursive) == sorted(
        [target.catalog_id("sales"), tables_id, bucket_id]
    )
    assert catalog_names(glue_api.get_catalogs(ParentCatalogId=tables_id)) == ["my-bucket"]
    # s3tablescatalog only holds catalogs, so HasDatabases leaves it out.
    with_databases = glue_api.get_catalogs(HasDatabases=True, IncludeRoot=True)
    assert catalog_names(with_databases) == [target.account_id, "sales"]

    bucket = glue_api.get_catalog(CatalogId=bucket_id)["Catalog"]
    assert bucket["Parameters"] == {"region": "us-east-1"}
    assert bucket["ResourceArn"].endswith(":catalog/s3tablescatalog/my-bucket")

    glue_api.create_database(CatalogId=bucket_id, DatabaseInput={"Name": "ns"})
    assert [d["Name"] for d in glue_api.get_databases(CatalogId=bucket_id)["DatabaseList"]] == [
        "ns"
    ]
    assert error_of(lambda: glue_api.delete_catalog(CatalogId=tables_id))[0] == (
        "InvalidInputException"
    )


def test_federated_catalog_needs_an_existing_parent(
    target: GlueTarget, emulator: GlueEmulator
) -> None:
    with pytest.raises(ValueError):
        emulator.add_federated_catalog(target.catalog_id("nope"), "child")
    with pytest.raises(ValueError):
        emulator.add_federated_catalog(target.account_id, "a/b")


def test_update_catalog_replaces_its_input(target: GlueTarget, glue_api: Any) -> None:
    name = target.name("sales")
    catalog_id = target.catalog_id(name)
    glue_api.create_catalog(
        Name=name, CatalogInput={"Description": "old", "Parameters": {"a": "1"}}
    )

    glue_api.update_catalog(
        CatalogId=catalog_id, CatalogInput={"Description": "new", "Parameters": {"b": "2"}}
    )

    catalog = glue_api.get_catalog(CatalogId=catalog_id)["Catalog"]
    assert (catalog["Description"], catalog["Parameters"]) == ("new", {"b": "2"})
    assert catalog["UpdateTime"] >= catalog["CreateTime"]
    missing = target.catalog_id(target.name("missing"))
    code, _ = error_of(lambda: glue_api.update_catalog(CatalogId=missing, CatalogInput={}))
    assert code == "EntityNotFoundException"


def test_delete_catalog_only_when_empty(target: GlueTarget, glue_api: Any) -> None:
    name = target.name("sales")
    catalog_id = target.catalog_id(name)
    glue_api.create_catalog(Name=name, CatalogInput={})
    glue_api.create_database(CatalogId=catalog_id, DatabaseInput={"Name": "orders"})

    code, status = error_of(lambda: glue_api.delete_catalog(CatalogId=catalog_id))
    assert (code, status) == ("InvalidInputException", 400)

    glue_api.delete_database(CatalogId=catalog_id, Name="orders")
    glue_api.delete_catalog(CatalogId=catalog_id)
    assert error_of(lambda: glue_api.get_catalog(CatalogId=catalog_id))[0] == (
        "EntityNotFoundException"
    )
    assert error_of(lambda: glue_api.delete_catalog(CatalogId=catalog_id))[0] == (
        "EntityNotFoundException"
    )


# --- databases and tables scoped to a catalog --------------------------------------------------


def test_databases_are_scoped_to_their_catalog(target: GlueTarget, glue_api: Any) -> None:
    sales = target.catalog_id(target.name("sales"))
    glue_api.create_catalog(Name=target.name("sales"), CatalogInput={})
    orders, root_only = target.name("orders"), target.name("root_only")
    glue_api.create_database(CatalogId=sales, DatabaseInput={"Name": orders})
    glue_api.create_database(DatabaseInput={"Name": root_only})

    in_sales = glue_api.get_databases(CatalogId=sales)["DatabaseList"]
    assert [(d["Name"], d["CatalogId"]) for d in in_sales] == [(orders, sales)]
    assert ours(target, database_names(glue_api)) == [root_only]
    assert ours(target, database_names(glue_api, CatalogId=target.account_id)) == [root_only]

    assert error_of(lambda: glue_api.get_database(Name=orders))[0] == "EntityNotFoundException"
    assert error_of(lambda: glue_api.get_database(CatalogId=sales, Name=root_only))[0] == (
        "EntityNotFoundException"
    )
    assert glue_api.get_database(CatalogId=sales, Name=orders)["Database"]["CatalogId"] == sales


def test_same_database_name_in_two_catalogs_is_two_databases(
    target: GlueTarget, glue_api: Any
) -> None:
    sales = target.catalog_id(target.name("sales"))
    glue_api.create_catalog(Name=target.name("sales"), CatalogInput={})
    shared = target.name("shared")
    glue_api.create_database(
        CatalogId=sales, DatabaseInput={"Name": shared, "Description": "child"}
    )
    glue_api.create_database(DatabaseInput={"Name": shared, "Description": "root"})

    glue_api.update_database(
        CatalogId=sales, Name=shared, DatabaseInput={"Name": shared, "Description": "changed"}
    )
    make_table(glue_api, shared, "t", CatalogId=sales)

    assert glue_api.get_database(Name=shared)["Database"]["Description"] == "root"
    assert glue_api.get_database(CatalogId=sales, Name=shared)["Database"]["Description"] == (
        "changed"
    )
    assert glue_api.get_tables(DatabaseName=shared)["TableList"] == []
    child_tables = glue_api.get_tables(CatalogId=sales, DatabaseName=shared)["TableList"]
    assert [(t["Name"], t["CatalogId"]) for t in child_tables] == [("t", sales)]
    assert error_of(lambda: glue_api.get_table(DatabaseName=shared, Name="t"))[0] == (
        "EntityNotFoundException"
    )

    glue_api.delete_database(CatalogId=sales, Name=shared)
    assert glue_api.get_database(Name=shared)["Database"]["Description"] == "root"


def test_table_operations_honour_catalog_id(target: GlueTarget, glue_api: Any) -> None:
    sales = target.catalog_id(target.name("sales"))
    glue_api.create_catalog(Name=target.name("sales"), CatalogInput={})
    db = target.name("db")
    glue_api.create_database(CatalogId=sales, DatabaseInput={"Name": db})
    for table in ("t1", "t2", "t3"):
        make_table(glue_api, db, table, CatalogId=sales)

    glue_api.update_table(
        CatalogId=sales, DatabaseName=db, TableInput={"Name": "t1", "Parameters": {"v": "2"}}
    )
    versions = glue_api.get_table_versions(CatalogId=sales, DatabaseName=db, TableName="t1")
    assert len(versions["TableVersions"]) == 2
    glue_api.delete_table(CatalogId=sales, DatabaseName=db, Name="t2")
    result = glue_api.batch_delete_table(CatalogId=sales, DatabaseName=db, TablesToDelete=["t3"])
    assert not result.get("Errors")

    tables = glue_api.get_tables(CatalogId=sales, DatabaseName=db)["TableList"]
    assert [(t["Name"], t["Parameters"]) for t in tables] == [("t1", {"v": "2"})]


def test_unknown_catalog_id_in_database_and_table_calls(target: GlueTarget, glue_api: Any) -> None:
    missing = target.catalog_id(target.name("missing"))
    calls: list[Callable[[], Any]] = [
        lambda: glue_api.create_database(CatalogId=missing, DatabaseInput={"Name": "db"}),
        lambda: glue_api.get_databases(CatalogId=missing),
        lambda: glue_api.get_database(CatalogId=missing, Name="db"),
        lambda: glue_api.get_tables(CatalogId=missing, DatabaseName="db"),
        lambda: glue_api.get_table(CatalogId=missing, DatabaseName="db", Name="t"),
    ]
    for call in calls:
        assert error_of(call)[0] == "EntityNotFoundException"


# --- names -------------------------------------------------------------------------------------


def test_database_and_table_names_are_lowercased(target: GlueTarget, glue_api: Any) -> None:
    db = target.name("MyDB")
    glue_api.create_database(DatabaseInput={"Name": db})
    assert glue_api.get_database(Name=db.upper())["Database"]["Name"] == db.lower()
    assert db.lower() in database_names(glue_api)

    make_table(glue_api, db.upper(), "MyTable")
    table = glue_api.get_table(DatabaseName=db, Name="MYTABLE")["Table"]
    assert (table["DatabaseName"], table["Name"]) == (db.lower(), "mytable")
    names = [t["Name"] for t in glue_api.get_tables(DatabaseName=db)["TableList"]]
    assert names == ["mytable"]

    glue_api.update_table(DatabaseName=db.upper(), TableInput={"Name": "MyTable", "Parameters": {}})
    assert glue_api.get_table(DatabaseName=db, Name="mytable")["Table"]["Name"] == "mytable"
    make_table(glue_api, db, "Other")
    glue_api.batch_delete_table(DatabaseName=db, TablesToDelete=["OTHER"])
    glue_api.delete_table(DatabaseName=db, Name="MYTABLE")
    assert glue_api.get_tables(DatabaseName=db)["TableList"] == []
    glue_api.delete_database(Name=db.upper())
    assert error_of(lambda: glue_api.get_database(Name=db))[0] == "EntityNotFoundException"


# --- UpdateTable and VersionId -----------------------------------------------------------------


def test_update_table_checks_version_id(target: GlueTarget, glue_api: Any) -> None:
    db = target.name("db")
    glue_api.create_database(DatabaseInput={"Name": db})
    make_table(glue_api, db, "t")
    first = glue_api.get_table(DatabaseName=db, Name="t")["Table"]["VersionId"]

    glue_api.update_table(DatabaseName=db, TableInput={"Name": "t", "Parameters": {"n": "1"}})
    second = glue_api.get_table(DatabaseName=db, Name="t")["Table"]["VersionId"]
    assert int(second) == int(first) + 1

    stale = {"Name": "t", "Parameters": {"n": "stale"}}
    code, status = error_of(
        lambda: glue_api.update_table(DatabaseName=db, TableInput=stale, VersionId=first)
    )
    assert (code, status) == ("ConcurrentModificationException", 400)

    fresh = {"Name": "t", "Parameters": {"n": "2"}}
    glue_api.update_table(DatabaseName=db, TableInput=fresh, VersionId=second)
    table = glue_api.get_table(DatabaseName=db, Name="t")["Table"]
    assert table["Parameters"] == {"n": "2"}
    assert int(table["VersionId"]) == int(second) + 1


def test_concurrent_updates_with_one_version_id_have_one_winner(
    target: GlueTarget, glue_api: Any
) -> None:
    db = target.name("db")
    glue_api.create_database(DatabaseInput={"Name": db})
    make_table(glue_api, db, "t")
    version = glue_api.get_table(DatabaseName=db, Name="t")["Table"]["VersionId"]
    start = threading.Barrier(8)
    outcomes: list[str] = []
    outcomes_lock = threading.Lock()

    def update(writer: int) -> None:
        table_input = {"Name": "t", "Parameters": {"writer": str(writer)}}
        start.wait()
        try:
            glue_api.update_table(DatabaseName=db, TableInput=table_input, VersionId=version)
            outcome = "ok"
        except ClientError as error:
            outcome = error.response["Error"]["Code"]
        with outcomes_lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=update, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["ConcurrentModificationException"] * 7 + ["ok"]
    table = glue_api.get_table(DatabaseName=db, Name="t")["Table"]
    assert int(table["VersionId"]) == int(version) + 1


# --- fault injection ---------------------------------------------------------------------------


def test_injected_throttling_is_a_client_error(emulator: GlueEmulator, glue_api: Any) -> None:
    glue_api.create_database(DatabaseInput={"Name": "db"})
    emulator.inject_fault("GetDatabase", "ThrottlingException", 400, message="Rate exceeded")

    with pytest.raises(ClientError) as excinfo:
        glue_api.get_database(Name="db")
    error = excinfo.value.response
    assert error["Error"] == {"Code": "ThrottlingException", "Message": "Rate exceeded"}
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert glue_api.get_database(Name="db")["Database"]["Name"] == "db"


def test_injected_faults_count_down_and_match_actions(
    emulator: GlueEmulator, glue_api: Any
) -> None:
    emulator.inject_fault("*", "InternalServiceException", 500, times=2)
    assert error_of(glue_api.get_databases) == ("InternalServiceException", 500)
    assert error_of(glue_api.get_catalogs) == ("InternalServiceException", 500)
    glue_api.get_databases()

    emulator.inject_fault("GetTable", "AccessDeniedException", 400)
    glue_api.get_databases()
    code, _ = error_of(lambda: glue_api.get_table(DatabaseName="db", Name="t"))
    assert code == "AccessDeniedException"


def test_fault_after_apply_changes_the_catalog_then_fails(
    emulator: GlueEmulator, glue_api: Any
) -> None:
    emulator.inject_fault("CreateDatabase", "InternalServiceException", 500, after_apply=True)
    assert error_of(lambda: glue_api.create_database(DatabaseInput={"Name": "landed"})) == (
        "InternalServiceException",
        500,
    )
    assert glue_api.get_database(Name="landed")["Database"]["Name"] == "landed"
    code, _ = error_of(lambda: glue_api.create_database(DatabaseInput={"Name": "landed"}))
    assert code == "AlreadyExistsException"  # what a retry of the lost reply meets


def test_retrying_client_recovers_from_a_throttle(
    emulator: GlueEmulator, target: GlueTarget
) -> None:
    glue_api = target.client(retries={"mode": "standard", "max_attempts": 3})
    emulator.inject_fault("GetDatabases", "ThrottlingException", 400)
    response = glue_api.get_databases()
    assert response["ResponseMetadata"]["RetryAttempts"] == 1


def test_clear_faults(emulator: GlueEmulator, glue_api: Any) -> None:
    emulator.inject_fault("*", "InternalServiceException", 500, times=10)
    emulator.inject_delay("*", 5)
    emulator.clear_faults()
    glue_api.get_databases()


def test_fault_lasts_for_its_block(emulator: GlueEmulator, glue_api: Any) -> None:
    with (
        emulator.fault("GetDatabases", "InternalServiceException", 500, times=10),
        pytest.raises(ClientError),
    ):
        glue_api.get_databases()
    glue_api.get_databases()


def test_injected_delay(emulator: GlueEmulator, target: GlueTarget, glue_api: Any) -> None:
    emulator.inject_delay("GetDatabases", 0.3)
    started = time.monotonic()
    glue_api.get_databases()
    assert time.monotonic() - started >= 0.3

    impatient = target.client(read_timeout=0.2)
    emulator.inject_delay("GetDatabases", 1.0)
    with pytest.raises(ReadTimeoutError):
        impatient.get_databases()


def test_fault_arguments_are_checked(emulator: GlueEmulator) -> None:
    with pytest.raises(ValueError):
        emulator.inject_fault("GetTable", "ThrottlingException", 200)
    with pytest.raises(ValueError):
        emulator.inject_fault("GetTable", "ThrottlingException", 400, times=0)


# --- reset, the model, and what is relayed to moto ------------------------------------------------


def test_reset_clears_moto_and_emulator_state(
    target: GlueTarget, emulator: GlueEmulator, glue_api: Any
) -> None:
    glue_api.create_catalog(Name="sales", CatalogInput={})
    emulator.add_federated_catalog(target.account_id, "s3tablescatalog")
    glue_api.create_database(CatalogId=target.catalog_id("sales"), DatabaseInput={"Name": "db"})
    glue_api.create_database(DatabaseInput={"Name": "db"})
    s3 = target.client("s3")
    s3.create_bucket(Bucket="bucket-1")
    emulator.inject_fault("*", "InternalServiceException", 500, times=5)

    emulator.reset()

    assert glue_api.get_catalogs()["CatalogList"] == []
    assert glue_api.get_databases()["DatabaseList"] == []
    assert error_of(lambda: glue_api.get_catalog(CatalogId=target.catalog_id("sales")))[0] == (
        "EntityNotFoundException"
    )
    assert s3.list_buckets()["Buckets"] == []


def test_unknown_operation_answers_like_aws(emulator: GlueEmulator) -> None:
    request = urllib.request.Request(
        emulator.endpoint,
        data=b"{}",
        method="POST",
        headers={
            "X-Amz-Target": "AWSGlue.NoSuchOperation",
            "Content-Type": "application/x-amz-json-1.1",
        },
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 400
    assert json.loads(caught.value.read())["__type"] == "UnknownOperationException"


def test_operation_the_emulator_lacks_says_so(emulator: GlueEmulator, glue_api: Any) -> None:
    code, status = error_of(
        lambda: glue_api.create_job(Name="job", Role="r", Command={"Name": "x"})
    )
    assert (code, status) == ("InternalServiceException", 501)


@pytest.mark.parametrize(
    ("operation", "params"),
    [
        ("create_database", {"DatabaseInput": {}}),  # a required member missing
        ("create_database", {"DatabaseInput": {"Name": 7}}),  # the wrong type
        ("get_tables", {"DatabaseName": "db", "MaxResults": 101}),  # above the model's max
    ],
    ids=["required", "type", "range"],
)
def test_bad_input_is_checked_against_the_model(
    emulator: GlueEmulator, target: GlueTarget, operation: str, params: dict[str, Any]
) -> None:
    glue_api = target.client(parameter_validation=False)
    glue_api.create_database(DatabaseInput={"Name": "db"})
    code, status = error_of(lambda: getattr(glue_api, operation)(**params))
    model = GLUE_MODEL.operation_model(glue_api.meta.method_to_api_mapping[operation])
    assert status == 400
    assert code in {"SerializationException"} | {e.name for e in model.error_shapes}
    assert glue_api.get_databases()["DatabaseList"][0]["Name"] == "db"  # nothing changed


def test_recording_sees_glue_and_relayed_requests(emulator: GlueEmulator, glue_api: Any) -> None:
    with emulator.recording() as requests:
        glue_api.get_databases()
        emulator.client("sts").get_caller_identity()
    targets = [r.headers.get("x-amz-target") for r in requests]
    assert targets == ["AWSGlue.GetDatabases", None]
    assert b"GetCallerIdentity" in requests[1].body


def test_signatures_are_checked_when_asked(emulator: GlueEmulator, target: GlueTarget) -> None:
    signed = target.client()
    forged = GlueConnectionSettings(
        region=emulator.region,
        endpoint=emulator.endpoint,
        access_key_id=emulator.access_key_id,
        secret_access_key="not-the-secret",
    ).client("glue", **NO_RETRIES)
    stranger = GlueConnectionSettings(
        region=emulator.region,
        endpoint=emulator.endpoint,
        access_key_id="AKIASTRANGER00000001",
        secret_access_key="x",
    ).client("glue", **NO_RETRIES)
    forged.get_databases()  # not checked outside the block
    with emulator.check_signatures({emulator.access_key_id: emulator.secret_access_key}):
        signed.create_database(DatabaseInput={"Name": "db"})
        assert error_of(forged.get_databases) == ("InvalidSignatureException", 400)
        assert error_of(stranger.get_databases) == ("UnrecognizedClientException", 400)


def test_s3_still_works(emulator: GlueEmulator, target: GlueTarget) -> None:
    s3 = target.client("s3")
    s3.create_bucket(Bucket="bucket-1")
    s3.put_object(Bucket="bucket-1", Key="data/file.txt", Body=b"hello")
    assert s3.get_object(Bucket="bucket-1", Key="data/file.txt")["Body"].read() == b"hello"


def _eight_racing_puts(s3: Any, bucket: str, condition: dict[str, str]) -> list[str]:
    """Eight puts of one object at once, each with ``condition``: their outcomes."""
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def put(writer: int) -> None:
        start.wait()
        try:
            s3.put_object(Bucket=bucket, Key="claim", Body=str(writer).encode(), **condition)
            outcomes.append("ok")
        except ClientError as error:
            outcomes.append(error.response["Error"]["Code"])

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(outcomes)


def test_racing_conditional_puts_of_one_object_have_one_winner(
    emulator: GlueEmulator, target: GlueTarget
) -> None:
    """As on AWS: of eight puts conditional on one state of an object (absent, or one ETag),
    exactly one succeeds and the others answer 412; moto's server alone can let several
    pass (it checks, then writes)."""
    s3 = target.client("s3")
    bucket = f"race-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    for _round in range(3):
        assert _eight_racing_puts(s3, bucket, {"IfNoneMatch": "*"}) == (
            ["PreconditionFailed"] * 7 + ["ok"]
        )
        etag = s3.put_object(Bucket=bucket, Key="claim", Body=b"old")["ETag"]
        assert _eight_racing_puts(s3, bucket, {"IfMatch": etag}) == (
            ["PreconditionFailed"] * 7 + ["ok"]
        )
        s3.delete_object(Bucket=bucket, Key="claim")


def test_ignoring_conditional_writes_drops_the_conditions(
    emulator: GlueEmulator, target: GlueTarget
) -> None:
    """Within the block S3 acts as a store without conditional writes; after it, as AWS."""
    s3 = target.client("s3")
    s3.create_bucket(Bucket="no-conditions")
    s3.put_object(Bucket="no-conditions", Key="k", Body=b"1")
    with emulator.ignoring_conditional_writes():
        s3.put_object(Bucket="no-conditions", Key="k", Body=b"2", IfNoneMatch="*")
    assert s3.get_object(Bucket="no-conditions", Key="k")["Body"].read() == b"2"
    assert error_of(
        lambda: s3.put_object(Bucket="no-conditions", Key="k", Body=b"3", IfNoneMatch="*")
    ) == ("PreconditionFailed", 412)


def test_a_storage_fault_after_apply_writes_then_fails(
    emulator: GlueEmulator, target: GlueTarget
) -> None:
    """``after_apply``: the write lands in moto, and the client is answered the error."""
    s3 = target.client("s3")  # no retries
    s3.create_bucket(Bucket="lost-answers")
    with emulator.storage_fault("PUT", r"/k$", 500, "InternalError", after_apply=True) as fault:
        assert error_of(lambda: s3.put_object(Bucket="lost-answers", Key="k", Body=b"v")) == (
            "InternalError",
            500,
        )
    assert fault.met == 1
    assert s3.get_object(Bucket="lost-answers", Key="k")["Body"].read() == b"v"


def test_relayed_answers_carry_one_date(emulator: GlueEmulator, target: GlueTarget) -> None:
    """moto's own ``Date`` is relayed, not joined with a second one (a client reading the
    store's clock parses one HTTP date)."""
    s3 = target.client("s3")
    s3.create_bucket(Bucket="one-date")
    headers = s3.list_objects_v2(Bucket="one-date")["ResponseMetadata"]["HTTPHeaders"]
    assert headers["date"].count("GMT") == 1


def test_sts_still_works(target: GlueTarget) -> None:
    sts = target.client("sts")
    assert sts.get_caller_identity()["Account"] == target.account_id
    if target.emulator is None:
        return  # assuming a role needs one that exists in the real account
    role = sts.assume_role(
        RoleArn=f"arn:aws:iam::{target.account_id}:role/glue-reader", RoleSessionName="tests"
    )["Credentials"]
    assumed = GlueConnectionSettings(
        region=target.settings.region,
        endpoint=target.settings.endpoint,
        access_key_id=role["AccessKeyId"],
        secret_access_key=role["SecretAccessKey"],
        session_token=role["SessionToken"],
    )
    assert assumed.client("glue").get_databases()["DatabaseList"] == []


# --- Glue as deployed: a principal without catalog rights, moto as shipped -------------------


def test_catalog_api_denied_principal(emulator: GlueEmulator, glue_api: Any) -> None:
    """A policy granting database and table actions only: catalog calls answer as AWS does."""
    denied = emulator.catalog_api_denied.client("glue", **NO_RETRIES)
    account = emulator.account_id
    glue_api.create_catalog(Name="sales", CatalogInput={})
    calls = {
        "GetCatalogs": lambda: denied.get_catalogs(),
        "GetCatalog": lambda: denied.get_catalog(CatalogId=f"{account}:sales"),
        "CreateCatalog": lambda: denied.create_catalog(Name="other", CatalogInput={}),
        "UpdateCatalog": lambda: denied.update_catalog(
            CatalogId=f"{account}:sales", CatalogInput={"Description": "d"}
        ),
        "DeleteCatalog": lambda: denied.delete_catalog(CatalogId=f"{account}:sales"),
    }
    for action, call in calls.items():
        with pytest.raises(ClientError) as caught:
            call()
        response = caught.value.response
        assert response["Error"]["Code"] == "AccessDeniedException"
        assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert f"not authorized to perform: glue:{action}" in response["Error"]["Message"]
    assert emulator.catalog_calls_refused == len(calls)
    # Nothing was changed by the refused calls; the full principal still sees the hierarchy.
    assert catalog_names(glue_api.get_catalogs()) == ["sales"]
    assert "Description" not in glue_api.get_catalog(CatalogId=f"{account}:sales")["Catalog"]

    # Databases and tables are allowed, on the state the full principal sees.
    denied.create_database(DatabaseInput={"Name": "DB"})
    make_table(denied, "db", "t")
    assert database_names(glue_api) == ["db"]
    assert denied.get_table(DatabaseName="db", Name="t")["Table"]["Name"] == "t"
    assert database_names(glue_api, CatalogId=f"{account}:sales") == []
    emulator.reset()
    assert emulator.catalog_calls_refused == 0


def test_stock_moto_server_is_moto_as_shipped(stock_moto: Any) -> None:
    """What the glue-stock backend stands for: no catalog API, no VersionId check, names kept."""
    stock_moto.reset()
    glue = stock_moto.client("glue", **NO_RETRIES)
    for call in (glue.get_catalogs, lambda: glue.get_catalog(CatalogId="123456789012:x")):
        assert error_of(call) == ("500", 500)  # moto's bare "not implemented" page
    glue.create_database(DatabaseInput={"Name": "MyDB"})
    assert database_names(glue) == ["MyDB"]
    make_table(glue, "MyDB", "t")
    version = glue.get_table(DatabaseName="MyDB", Name="t")["Table"]["VersionId"]
    table_input = {"Name": "t", "Parameters": {"v": "1"}}
    glue.update_table(DatabaseName="MyDB", TableInput=table_input, VersionId=version)
    glue.update_table(DatabaseName="MyDB", TableInput=table_input, VersionId=version)  # stale
    stock_moto.reset()
    assert database_names(glue) == []


# --- opt-in real service -----------------------------------------------------------------------


def test_glue_endpoint_from_env_is_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    assert glue_endpoint_from_env({}) is None
    assert glue_endpoint_from_env({REAL_GLUE_ENV: "0"}) is None

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.delenv("AWS_REGION", raising=False)
    settings = glue_endpoint_from_env(
        {REAL_GLUE_ENV: "1", REAL_GLUE_CATALOG_ID_ENV: "123456789012:sales"}
    )

    assert settings == GlueConnectionSettings(
        region="eu-west-1",
        endpoint=None,
        access_key_id="AKIDEXAMPLE",
        secret_access_key="secret",
        session_token=None,
        catalog_id="123456789012:sales",
    )
