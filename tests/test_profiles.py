"""Profiles everywhere: ``connect(profile=...)``, the Spark option ``profile`` and the command
line read the same config file with the same precedence (explicit > environment > profile)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lance_namespace import CreateNamespaceRequest, ListNamespacesRequest
from lance_namespace.errors import InvalidInputError
from support.cli_env import CliRunner, isolate_cli_environment
from support.harness import GlueHarness, HiveHarness

import lance_metastore
from lance_metastore.cli import app
from lance_metastore.impls import declared_properties
from lance_metastore.rules import profiles
from lance_metastore.rules.profiles import ProfileError


def resolve(**arguments: Any) -> profiles.Resolved:
    """The rule as every entry point calls it, with our implementations' declarations."""
    return profiles.resolve(declared_properties=declared_properties, **arguments)


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_cli_environment(monkeypatch, tmp_path)


def toml_value(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_profiles(path: Path, profiles: dict[str, dict[str, str]], default: str | None = None):
    lines = [f"default_profile = {toml_value(default)}"] if default else []
    for name, body in profiles.items():
        lines.append(f"[profiles.{name}]")
        lines += [f"{toml_value(key)} = {toml_value(value)}" for key, value in body.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def default_config(home_of: Path) -> Path:
    """The config file every entry point reads when none is named (HOME is isolated)."""
    path = home_of / "home" / ".config" / "lance-metastore" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


# -- the rule ----------------------------------------------------------------------------------


def test_precedence_explicit_over_environment_over_profile(tmp_path: Path) -> None:
    config = write_profiles(
        tmp_path / "c.toml",
        {"prod": {"impl": "glue", "region": "eu-west-1", "root": "/p", "catalog_id": "111"}},
    )
    env = {"LANCE_METASTORE_REGION": "us-east-2", "LANCE_METASTORE_PROP_ROOT": "/e"}
    resolved = resolve(profile="prod", config=config, properties={"root": "/x"}, env=env)
    assert resolved.impl == "glue" and resolved.impl_source == "profile prod"
    assert resolved.properties == {"region": "us-east-2", "root": "/x", "catalog_id": "111"}
    assert resolved.sources == {
        "region": "env LANCE_METASTORE_REGION",
        "root": "argument",
        "catalog_id": "profile prod",
    }
    env_impl = resolve(profile="prod", config=config, env={"LANCE_METASTORE_IMPL": "hive2"})
    assert env_impl.impl == "hive2"
    assert resolve(impl="hive3", profile="prod", config=config, env=env).impl == "hive3"
    # The profile comes from LANCE_METASTORE_PROFILE when not named, the file likewise.
    by_env = resolve(env={"LANCE_METASTORE_PROFILE": "prod", "LANCE_METASTORE_CONFIG": str(config)})
    assert by_env.profile == "prod" and by_env.impl == "glue"


def test_profile_errors_are_invalid_input_and_say_what_to_do(tmp_path: Path) -> None:
    config = write_profiles(tmp_path / "c.toml", {"prod": {"impl": "glue"}})
    with pytest.raises(ProfileError, match=r"no profile 'qa' in .* \(profiles: prod\)"):
        lance_metastore.connect(profile="qa", config=config)
    with pytest.raises(InvalidInputError, match="does not exist"):
        lance_metastore.connect(profile="prod", config=tmp_path / "none.toml")
    with pytest.raises(InvalidInputError, match=r"create it with a \[profiles.prod\] table"):
        lance_metastore.connect(profile="prod")  # no file at the default place
    empty = write_profiles(tmp_path / "e.toml", {"bare": {"root": "/x"}})
    with pytest.raises(InvalidInputError, match=r"no implementation chosen .*impl=.*glue, hive2"):
        lance_metastore.connect(profile="bare", config=empty)


# -- connect(profile=...) ----------------------------------------------------------------------


def test_connect_with_profile_on_glue(glue: GlueHarness, tmp_path: Path) -> None:
    """The implementation and every property from the profile of the default config file."""
    write_profiles(
        default_config(tmp_path), {"lake": {"impl": "glue", **glue.properties()}}, default="lake"
    )
    ns = lance_metastore.connect(profile="lake")
    assert isinstance(ns, lance_metastore.GlueNamespace)
    ns.create_namespace(CreateNamespaceRequest(id=["from_profile"]))
    assert "from_profile" in glue.connect().list_namespaces(ListNamespacesRequest(id=[])).namespaces
    # default_profile is used when no profile is named and no impl given
    same = lance_metastore.connect()
    assert "from_profile" in same.list_namespaces(ListNamespacesRequest(id=[])).namespaces


def test_connect_with_profile_on_hive2(
    hive2: HiveHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Explicit properties win over the environment, which wins over the profile: a wrong
    uri in the profile is overridden by the environment, a wrong root by the argument."""
    config = write_profiles(
        tmp_path / "c.toml",
        {"hms": {"impl": "hive2", "uri": "thrift://127.0.0.1:9", "root": "/nowhere"}},
    )
    monkeypatch.setenv("LANCE_METASTORE_URI", hive2.uri)
    ns = lance_metastore.connect(profile="hms", config=config, properties={"root": str(hive2.root)})
    assert isinstance(ns, lance_metastore.Hive2Namespace)
    db = hive2.unique()
    ns.create_namespace(CreateNamespaceRequest(id=[db]))
    assert db in hive2.connect().list_namespaces(ListNamespacesRequest(id=[])).namespaces
    # The same settings through the command line: one rule.
    result = CliRunner().invoke(
        app, ["--config", str(config), "--profile", "hms", "--root", str(hive2.root), "ls"]
    )
    assert result.exit_code == 0, result.stderr
    assert db in result.stdout
    # With an explicit impl and no profile, exactly the given properties are used.
    with pytest.raises(InvalidInputError, match="unknown property 'urii'"):
        lance_metastore.connect("hive2", {"urii": hive2.uri})


# -- Spark option profile ----------------------------------------------------------------------


def test_spark_read_and_write_with_option_profile(
    spark: Any, hive2: HiveHarness, tmp_path: Path
) -> None:
    config = write_profiles(
        tmp_path / "spark.toml",
        {"hms": {"impl": "hive2", "uri": hive2.uri, "root": str(hive2.root)}},
    )
    db = hive2.unique()
    hive2.connect().create_namespace(CreateNamespaceRequest(id=[db]))
    frame = spark.createDataFrame(pa.table({"id": [1, 2, 3]}).to_pandas())
    options = {"profile": "hms", "config": str(config)}
    frame.write.format("lance").options(**options).mode("append").save(f"{db}$t")
    read = spark.read.format("lance").options(**options).load(f"{db}$t")
    assert sorted(row.id for row in read.collect()) == [1, 2, 3]
    # An option wins over the profile: a wrong uri given as an option is used, and fails.
    with pytest.raises(Exception, match=r"thrift://127\.0\.0\.1:9 unreachable"):
        spark.read.format("lance").options(**options, uri="thrift://127.0.0.1:9").option(
            "client.retries", "1"
        ).load(f"{db}$t").count()
    with pytest.raises(Exception, match=r"Option 'profile': no profile 'nope'"):
        spark.read.format("lance").options(profile="nope", config=str(config)).load("a$b").count()
