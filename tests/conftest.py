"""Servers for the whole test session, started once, on 127.0.0.1 with OS-chosen ports.

- ``glue_emulator``: the Glue emulator (STS, S3 and IAM relayed to moto's server), one port.
- ``stock_moto``: moto's server as shipped (no catalog API, no VersionId checks).
- ``backend``: a harness per backend, parametrizing the behaviour suite.

Markers come from fixtures: a test that uses (directly, through another fixture, or through a
parameter naming a backend fixture) a fixture listed in ``FIXTURE_MARKERS`` gets its markers,
so ``-m "not jvm"`` or ``-m "not spark"`` select by what a test starts. ``--fast`` (the tier of
``scripts/test.sh --fast``) keeps one backend per family (``FAST_BACKENDS``: Hive 2 on the
session's HMS 2.3, Glue on the emulator) and leaves out tests marked ``spark``, ``jvm`` or
``slow``, runs the suites that go through the REST server over Glue only
(``FAST_REST_BACKENDS``), and property-based tests draw at most
``support.examples.FAST_EXAMPLES`` examples. Session servers are per process: under xdist
each worker starts the HMS 2.3 and the Glue emulator its tests need (a shared metastore would
need shared resets: ``backend`` empties it before every test).

Set ``LANCE_METASTORE_TEST_GLUE_REAL=1`` (see tests/support/glue_emulator.py) to run the Glue
tests against real AWS Glue instead; emulator-only tests then skip.
"""

from __future__ import annotations

import gc
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Before anything imports lance_namespace (support.harness does): so the generated REST
# client's __init__ waits for first use in every worker (lance_metastore/rules/client_models.py).
import lance_metastore  # noqa: F401

sys.path.insert(0, str(Path(__file__).parent))

import support.examples
from support.glue_emulator import GlueEmulator, StockMotoServer, glue_endpoint_from_env
from support.harness import GlueHarness, Harness, HiveHarness

# Property-based tests run against live servers: no per-example deadline, fixtures shared by
# the examples of a test on purpose. On CI (env CI set) the examples are the same every run.
settings.register_profile(
    "lance-metastore",
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    **({"derandomize": True, "database": None, "print_blob": True} if os.environ.get("CI") else {}),
)
settings.load_profile("lance-metastore")

# Glue as deployed: "glue-stock" is moto's server as shipped, "glue-noapi" the emulator
# signed by a principal whose IAM policy grants no catalog action. "hive_kerberos": Hive 2 on
# a metastore that requires Kerberos (SASL/GSSAPI), with a test KDC. "hive3-3.1", "hive3-4":
# Hive 3 with real catalogs on real Hive Metastores 3.1 and 4.0 (fetched with Maven once per
# machine, started once per session; 3.1 with Hadoop's S3A on moto's S3, for s3:// tables).
BACKENDS = [
    "glue",
    "glue-stock",
    "glue-noapi",
    "hive2",
    "hive3",
    "hive_kerberos",
    pytest.param("hive3_hms31", id="hive3-3.1"),
    pytest.param("hive3_hms4", id="hive3-4"),
]

# The fixtures that start Spark or a server of their own, and the markers their tests get.
# The session's HMS 2.3 (``hive_metastore_uri``) is the fast tier's Hive server: no marker.
FIXTURE_MARKERS: dict[str, tuple[str, ...]] = {
    "spark_installed": ("spark",),
    "java": ("jvm",),
    "spare_metastore": ("jvm",),
    "hms31_uri": ("jvm", "hms31"),
    "hms4_uri": ("jvm", "hms4"),
    "kdc": ("kerberos",),
    "kerberized_metastore": ("jvm", "kerberos"),
}
# Backends that reach the namespace code of another (their twin) by a different way in:
# Kerberos is hive2's code over a SASL transport; glue-noapi is glue-stock's root-catalog path,
# reached through an IAM policy without catalog actions instead of a server without the API
# (its commits take glue's UpdateTable path); hive3 (on the session's HMS 2.3) is hive3-3.1's
# namespace code on hive2's server, its own path the metastore without the catalog API (the
# single catalog "hive"). They run the files below: the behaviour suite, and the tests of what
# differs (pools and connections, refusals, secrets). Elsewhere a test on a variant is left
# out where the same test runs on its twin (bad input, managed commits, races, the interface
# comparisons): the same code path twice. A test that names a variant without its twin (the
# Spark and REST suites run hive3 as their three-level Hive) keeps it; tests/test_tiers.py
# checks that every test left out runs on the twin. Keys and values are parameter values.
VARIANT_BACKENDS = {"hive_kerberos": "hive2", "glue-noapi": "glue-stock", "hive3": "hive3_hms31"}
VARIANT_FILES = {
    "test_behaviour.py",
    "test_glue.py",
    "test_load.py",
    "test_rest_refusals.py",
    "test_rest_secrets.py",
}
# One backend per family for ``--fast``; parameters naming the other backends are left out.
FAST_BACKENDS = {"glue", "hive2"}
# The REST server is one more client path over any backend: ``--fast`` runs the suites that go
# through it (``support.rest.rest_backend``) once, over Glue, so each behaviour runs once there.
FAST_REST_BACKENDS = {"glue"}
BACKEND_FIXTURES = {str(getattr(b, "values", [b])[0]).replace("-", "_") for b in BACKENDS}
FAST_LEAVES_OUT = {"spark", "jvm", "slow"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="one backend per family (hive2 on HMS 2.3, glue on the emulator), "
        "no Spark, no JVM besides the session's HMS 2.3, no slow tests",
    )


def pytest_configure(config: pytest.Config) -> None:
    # before the test modules are imported: their @settings(max_examples=examples(n)) read it
    support.examples.fast = bool(config.getoption("--fast"))


GC_THRESHOLD = 20_000


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the imports and the collection made (about 270,000 objects: modules, service and
    request models, test items) lives until the session ends: ``gc.freeze`` takes it out of
    the cyclic collector's way, and the collector runs after every 20,000 new objects instead
    of 700, so the tests' many short-lived objects are collected in fewer, larger rounds.
    Measured in the fast tier: full collections took 7.8 to 17.4 s per worker without either
    (``gc.collect()`` called by a test is unaffected)."""
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])


def _fixture_closure(item: pytest.Item) -> set[str]:
    """The fixtures an item uses, including those a parameter names (``backend``'s params,
    ``getfixturevalue(param)``), each with the fixtures it requests in turn."""
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        names |= {v.replace("-", "_") for v in callspec.params.values() if isinstance(v, str)}
    manager = item.session._fixturemanager
    pending, seen = list(names), set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for definition in manager.getfixturedefs(name, item) or ():
            pending.extend(definition.argnames)
            # A module may take a fixture under another name (``backend = rest_backend``).
            pending.append(getattr(definition.func, "__name__", name))
    return seen


def _named_backends(item: pytest.Item) -> set[str]:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return set()
    values = {v.replace("-", "_") for v in callspec.params.values() if isinstance(v, str)}
    return values & BACKEND_FIXTURES


def _same_test_key(item: pytest.Item, params: dict[str, object]) -> tuple[str, str]:
    """One test function with one set of parameter values."""
    return item.nodeid.split("[", 1)[0], repr(sorted((k, repr(v)) for k, v in params.items()))


def _key_on_the_twin(item: pytest.Item) -> tuple[str, str] | None:
    """The key of this test on the twin backend, if it runs on a variant outside the files
    every variant runs."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or item.path.name in VARIANT_FILES:
        return None
    params = dict(callspec.params)
    on_variant = [k for k, v in params.items() if isinstance(v, str) and v in VARIANT_BACKENDS]
    if not on_variant:
        return None
    for name in on_variant:
        params[name] = VARIANT_BACKENDS[str(params[name])]
    return _same_test_key(item, params)


def _left_out_of_fast(item: pytest.Item, used: set[str]) -> bool:
    if {mark.name for mark in item.iter_markers()} & FAST_LEAVES_OUT:
        return True
    if "rest_backend" in used and _named_backends(item) - FAST_REST_BACKENDS:
        return True
    return bool(_named_backends(item) - FAST_BACKENDS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    closures = {}
    for item in items:
        used = closures[item] = _fixture_closure(item)
        for fixture, markers in FIXTURE_MARKERS.items():
            if fixture in used:
                for marker in markers:
                    item.add_marker(marker)
    fast = config.getoption("--fast")
    collected = {
        _same_test_key(item, item.callspec.params) for item in items if hasattr(item, "callspec")
    }
    kept, left_out = [], []
    for item in items:
        twin = _key_on_the_twin(item)
        if twin in collected or (fast and _left_out_of_fast(item, closures[item])):
            left_out.append(item)
        else:
            kept.append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))  # set in xdist's workers
    if workers > 1:
        items[:] = _timed_tests_lead_each_block(items, workers)


# Files whose tests take a set stretch of time rather than CPU: fault injection that waits out
# retry budgets, races and load runs of fixed seconds, writer processes. One of them started by
# a worker when the others have run out of tests is the tier's last half minute.
TIMED_FILES = {
    "test_faults.py",
    "test_rest_races.py",
    "test_load.py",
    "test_commit_races.py",
    "test_managed_commits.py",
}


def _timed_tests_lead_each_block(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` reordered so each worker starts with its share of the timed tests (a
    contiguous share, so a file's tests stay together and its module fixtures start once).

    pytest-xdist's ``worksteal`` hands the collection out in contiguous blocks, one per worker
    (each ``len(pending) // workers_left`` long), then idle workers take tests from the end of
    a busy worker's queue: timed tests at the head of every block all start early, and what is
    left to share at the end is short. (Under ``loadfile`` the timed files only start early.)"""
    timed = [item for item in items if item.path.name in TIMED_FILES]
    other = [item for item in items if item.path.name not in TIMED_FILES]
    order: list[pytest.Item] = []
    remaining = len(items)
    for index in range(workers):
        size = remaining // (workers - index)
        remaining -= size
        head = timed[len(timed) * index // workers : len(timed) * (index + 1) // workers]
        fill = max(0, size - len(head))
        order += head + other[:fill]
        other = other[fill:]
    return order + other


# Run the Hive tests against an existing metastore instead of starting one from the pyspark
# wheel (e.g. a real Hive 3 or 4 metastore): thrift://host:port
HMS_URI_ENV = "LANCE_METASTORE_TEST_HMS_URI"

os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(scope="session")
def java() -> str:
    """The ``java`` executable, for tests that start a JVM of their own (marks them ``jvm``)."""
    from lance_metastore.hive.local import JavaNotFoundError, java_executable

    try:
        return str(java_executable())
    except JavaNotFoundError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def glue_emulator() -> Iterator[GlueEmulator]:
    with GlueEmulator() as emulator:
        yield emulator


@pytest.fixture
def glue(glue_emulator: GlueEmulator, tmp_path: Path) -> Iterator[GlueHarness]:
    real = glue_endpoint_from_env()
    if real is not None:
        harness = GlueHarness(
            root=tmp_path / "lake", real=real, prefix=f"lmt_{uuid.uuid4().hex[:6]}_"
        )
        yield harness
        harness.reset()  # leave the shared account as it was
        return
    glue_emulator.reset()
    yield GlueHarness(root=tmp_path / "lake", emulator=glue_emulator)


@pytest.fixture(scope="session")
def stock_moto() -> Iterator[StockMotoServer]:
    with StockMotoServer() as server:
        yield server


def _emulated_glue_only(variant: str) -> None:
    if glue_endpoint_from_env() is not None:
        pytest.skip(f"{variant} needs a local endpoint; real AWS Glue is configured")


@pytest.fixture
def glue_stock(stock_moto: StockMotoServer, tmp_path: Path) -> GlueHarness:
    _emulated_glue_only("glue-stock")
    stock_moto.reset()
    return GlueHarness(
        root=tmp_path / "lake",
        emulator=stock_moto,
        label="glue-stock",
        catalog_api=False,
        conditional_updates=False,
    )


@pytest.fixture
def glue_noapi(glue_emulator: GlueEmulator, tmp_path: Path) -> GlueHarness:
    _emulated_glue_only("glue-noapi")
    glue_emulator.reset()
    return GlueHarness(
        root=tmp_path / "lake",
        emulator=glue_emulator,
        principal=glue_emulator.catalog_api_denied,
        label="glue-noapi",
        catalog_api=False,
    )


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Harness:
    harness = request.getfixturevalue(request.param.replace("-", "_"))
    harness.reset()
    return harness


@pytest.fixture(scope="session")
def hive_metastore_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Hive Metastore 2.3 from the pyspark wheel (or the one named by the env var)."""
    if os.environ.get(HMS_URI_ENV):
        yield os.environ[HMS_URI_ENV]
        return
    from lance_metastore.hive.local import LocalMetastore

    metastore = LocalMetastore(tmp_path_factory.mktemp("hms"))
    metastore.start()
    try:
        yield metastore.uri
    finally:
        metastore.stop()


@pytest.fixture(scope="session")
def spare_metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A second local metastore, for the tests that stop, kill and restart one."""
    if os.environ.get(HMS_URI_ENV):
        pytest.skip("restarts a local metastore; an external one is configured")
    from lance_metastore.hive.local import LocalMetastore

    metastore = LocalMetastore(tmp_path_factory.mktemp("hms_spare"))
    metastore.start()
    try:
        yield metastore
    finally:
        metastore.stop()


def _standalone_metastore(
    version: str, tmp_path_factory: pytest.TempPathFactory, **options: Any
) -> Iterator[str]:
    from lance_metastore.hive.local import LocalMetastore

    metastore = LocalMetastore(tmp_path_factory.mktemp(f"hms{version}"), version=version, **options)
    metastore.start()
    try:
        yield metastore.uri
    finally:
        metastore.stop()


@pytest.fixture(scope="session")
def hms31_uri(
    tmp_path_factory: pytest.TempPathFactory, stock_moto: StockMotoServer
) -> Iterator[str]:
    """A real Hive Metastore 3.1.3 (standalone, from Maven Central), once per session, with
    Hadoop's S3A file system on ``stock_moto``'s S3, so tables may live on ``s3://`` there."""
    yield from _standalone_metastore(
        "3.1",
        tmp_path_factory,
        s3_endpoint=stock_moto.endpoint,
        s3_credentials=("metastore-test-key", "metastore-test-secret"),
    )


@pytest.fixture(scope="session")
def hms4_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Hive Metastore 4.0.1 (standalone, from Maven Central), once per session."""
    yield from _standalone_metastore("4", tmp_path_factory)


@pytest.fixture
def hive3_hms31(hms31_uri: str, tmp_path: Path) -> HiveHarness:
    return HiveHarness(
        root=tmp_path / "lake", uri=hms31_uri, level=3, catalog="lmt", label="hive3-3.1"
    )


@pytest.fixture
def hive3_hms4(hms4_uri: str, tmp_path: Path) -> HiveHarness:
    return HiveHarness(
        root=tmp_path / "lake", uri=hms4_uri, level=3, catalog="lmt", label="hive3-4"
    )


@pytest.fixture
def hive2(hive_metastore_uri: str, tmp_path: Path) -> HiveHarness:
    return HiveHarness(root=tmp_path / "lake", uri=hive_metastore_uri, level=2)


@pytest.fixture
def hive3(hive_metastore_uri: str, tmp_path: Path) -> HiveHarness:
    return HiveHarness(root=tmp_path / "lake", uri=hive_metastore_uri, level=3)


@pytest.fixture(scope="session")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An MIT KDC on loopback with realm LANCE.TEST; KRB5_CONFIG points at it for the session
    (Spark executors and CLI subprocesses inherit it)."""
    from support.kdc import Kdc, missing_binaries

    missing = missing_binaries()
    if missing:
        pytest.skip(f"MIT Kerberos KDC not installed ({', '.join(missing)}): scripts/setup.sh")
    pytest.importorskip("gssapi", reason="the [kerberos] extra is not installed")
    with Kdc(tmp_path_factory.mktemp("kdc")) as server:
        previous = os.environ.get("KRB5_CONFIG")
        os.environ["KRB5_CONFIG"] = str(server.krb5_conf)
        try:
            yield server
        finally:
            if previous is None:
                os.environ.pop("KRB5_CONFIG", None)
            else:
                os.environ["KRB5_CONFIG"] = previous


@pytest.fixture(scope="session")
def kerberized_metastore(kdc: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real HMS 2.3 that accepts only Kerberos-authenticated clients."""
    from support.secure_hms import kerberized_metastore as start

    with start(kdc, tmp_path_factory.mktemp("hms_kerberos")) as metastore:
        yield metastore


@pytest.fixture
def hive_kerberos(kerberized_metastore: Any, tmp_path: Path) -> HiveHarness:
    return HiveHarness(
        root=tmp_path / "lake",
        uri=kerberized_metastore.uri,
        level=2,
        security=kerberized_metastore.client_properties(),
    )


@pytest.fixture(scope="session")
def spark_installed() -> None:
    """For tests that start Spark (in this process or another): skips without pyspark, and
    marks them ``spark``."""
    pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark(spark_installed: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local[2] SparkSession for the whole test session (format "lance" registered)."""
    from support.spark import local_session

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = local_session(
        "lance-metastore-test-spark", conf={"spark.sql.warehouse.dir": str(warehouse)}
    )
    try:
        yield session
    finally:
        session.stop()
