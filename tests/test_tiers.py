"""The test tiers select by fixture: ``--fast`` keeps one backend per family and leaves out
what starts Spark or another JVM; markers follow the fixtures a test uses (tests/conftest.py).

Collections run in this process (``pytest.main --collect-only`` with a plugin that keeps the
items): the modules are imported already, so a collection costs a second, where a fresh
interpreter spends ten importing them."""

from __future__ import annotations

from pathlib import Path

import pytest
import support.examples
from conftest import VARIANT_BACKENDS

ROOT = Path(__file__).parent.parent


class _Keep:
    """Keeps each collected item's node id and marker names, the ids deselected, and every
    item's string parameter values."""

    def __init__(self) -> None:
        self.markers: dict[str, set[str]] = {}
        self.deselected: list[str] = []
        self.params: dict[str, set[str]] = {}

    def _keep_params(self, items: list[pytest.Item]) -> None:
        for item in items:
            callspec = getattr(item, "callspec", None)
            values = callspec.params.values() if callspec is not None else ()
            self.params[item.nodeid] = {v for v in values if isinstance(v, str)}

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += [item.nodeid for item in items]
        self._keep_params(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.markers = {
            item.nodeid: {m.name for m in item.iter_markers()} for item in session.items
        }
        self._keep_params(session.items)


def collected(*args: str) -> dict[str, set[str]]:
    """Node id -> marker names of what pytest collects with ``args`` (no server starts)."""
    return collection(*args).markers


def collection(*args: str) -> _Keep:
    """What pytest collects and deselects with ``args``, collecting only."""
    keep, fast = _Keep(), support.examples.fast
    try:
        status = pytest.main(
            ["--collect-only", "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT), *args],
            plugins=[keep],
        )
    finally:
        support.examples.fast = fast  # the conftest's pytest_configure sets it for --fast
    assert status == pytest.ExitCode.OK, f"collecting {args} answered {status!r}"
    return keep


def backend_of(node: str) -> str:
    return node.rsplit("[", 1)[1].rstrip("]")


TESTS = ROOT / "tests"
BEHAVIOUR, HIVE, SPARK = "tests/test_behaviour.py", "tests/test_hive.py", "tests/test_spark.py"
REST = "tests/test_rest_behaviour.py"
FILES = [str(ROOT / path) for path in (BEHAVIOUR, HIVE, SPARK, REST)]


@pytest.fixture(scope="module")
def every() -> dict[str, set[str]]:
    return collected(*FILES)


def test_fast_runs_each_behaviour_once_per_family_without_spark_or_other_jvms(
    every: dict[str, set[str]],
) -> None:
    fast = collected("--fast", *FILES)
    # Through the REST server: every behaviour once, over Glue.
    assert {backend_of(n) for n in every if n.startswith(REST)} == {
        "rest-glue",
        "rest-hive2",
        "rest-hive3",
    }
    assert {backend_of(n) for n in fast if n.startswith(REST)} == {"rest-glue"}
    behaviours = {node.split("[")[0] for node in every if node.startswith(BEHAVIOUR)}
    fast_behaviour = [node for node in fast if node.startswith(BEHAVIOUR)]
    assert {node.split("[")[0] for node in fast_behaviour} == behaviours
    assert {backend_of(node) for node in fast_behaviour} == {"glue", "hive2"}
    assert len(fast_behaviour) == 2 * len(behaviours)
    # test_spark.py's tests that start no Spark (pure functions) stay; those on `spark` go
    assert not [node for node in fast if node.startswith(f"{SPARK}::test_save_modes")]
    assert len([n for n in fast if n.startswith(SPARK)]) < len(
        [n for n in every if n.startswith(SPARK)]
    )
    assert not [node for node in fast if node.endswith(("[3.1]", "[4]"))]
    assert any(node.startswith(HIVE) for node in fast)  # the HMS 2.3 tests stay


def test_markers_come_from_the_fixtures_used(every: dict[str, set[str]]) -> None:
    hms31 = [node for node, markers in every.items() if "hms31" in markers]
    assert hms31 and all(node.endswith(("[3.1]", "[hive3-3.1]")) for node in hms31)
    jvm = {
        backend_of(n)
        for n, markers in every.items()
        if n.startswith(BEHAVIOUR) and "jvm" in markers
    }
    assert jvm == {"hive3-3.1", "hive3-4", "hive_kerberos"}
    spark = [
        n for n, markers in every.items() if n.startswith((SPARK, BEHAVIOUR)) and "spark" in markers
    ]
    assert spark and all(node.startswith(SPARK) for node in spark)
    # and the `-m` selection of the tiers reads those markers
    selected = collected("-m", "hms31", *FILES)
    assert set(selected) == set(hms31)


def test_variant_backends_leave_only_what_their_twin_runs() -> None:
    """hive_kerberos, glue-noapi and hive3 (on HMS 2.3) run the behaviour suite; a suite they
    leave out runs the same test on their twin (the same namespace code, reached without
    Kerberos, the IAM denial or a metastore without catalogs); a test that names a variant
    without its twin keeps it."""
    suites = ["test_bad_input.py", "test_managed_commits.py", "test_interface.py"]
    run = collection(
        *[str(TESTS / name) for name in [*suites, "test_spark.py"]], str(ROOT / BEHAVIOUR)
    )

    def on(node: str, backend: str) -> bool:
        return backend in run.params[node]

    for variant in VARIANT_BACKENDS:
        assert any(on(node, variant) for node in run.deselected), variant
        assert any(on(node, variant) for node in run.markers if node.startswith(BEHAVIOUR))
    for node in run.deselected:
        variant = next(v for v in VARIANT_BACKENDS if on(node, v))
        twins = [
            other
            for other in run.markers
            if other.split("[")[0] == node.split("[")[0]
            and run.params[other] == run.params[node] - {variant} | {VARIANT_BACKENDS[variant]}
        ]
        assert twins, node
        assert not node.startswith(BEHAVIOUR)
    # test_spark.py names hive3 but not hive3-3.1: its hive3 tests stay
    assert any(on(node, "hive3") for node in run.markers if node.startswith(SPARK))


def test_timed_tests_lead_each_workers_block() -> None:
    """Under xdist each worker's first block starts with its share of the timed tests, a
    file's tests stay in order, and every test is kept once."""
    from types import SimpleNamespace

    from conftest import TIMED_FILES, _timed_tests_lead_each_block

    timed_file = sorted(TIMED_FILES)[0]
    items = [SimpleNamespace(path=Path(f"tests/test_a{n}.py"), n=n) for n in range(30)]
    items[5:5] = [SimpleNamespace(path=Path(f"tests/{timed_file}"), n=100 + n) for n in range(10)]
    order = _timed_tests_lead_each_block(items, 4)  # type: ignore[arg-type]
    assert sorted(item.n for item in order) == sorted(item.n for item in items)
    blocks = [order[0:10], order[10:20], order[20:30], order[30:40]]  # xdist's 40 // 4 each
    heads = [[item.n for item in block if item.n >= 100] for block in blocks]
    assert heads == [[100, 101], [102, 103, 104], [105, 106], [107, 108, 109]]
    for block, head in zip(blocks, heads, strict=True):
        assert [item.n for item in block[: len(head)]] == head  # the block starts with them
    others = [item.n for item in order if item.n < 100]
    assert others == list(range(30))
