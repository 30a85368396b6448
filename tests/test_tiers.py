"""The test tiers select by fixture: ``--fast`` keeps one backend per family and leaves out
what starts Spark or another JVM; markers follow the fixtures a test uses (tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).parent.parent


def collected(*args: str) -> list[str]:
    """The node ids pytest collects with ``args`` (collection only: no server starts)."""
    found = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return [line for line in found.stdout.splitlines() if "::" in line]


def collected_each(*runs: tuple[str, ...]) -> list[list[str]]:
    """:func:`collected` for each argument tuple, the collections running at once (each is a
    Python process that spends most of its time importing)."""
    with ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda args: collected(*args), runs))


def backend_of(node: str) -> str:
    return node.rsplit("[", 1)[1].rstrip("]")


BEHAVIOUR, HIVE, SPARK = "tests/test_behaviour.py", "tests/test_hive.py", "tests/test_spark.py"
REST = "tests/test_rest_behaviour.py"


def test_fast_runs_each_behaviour_once_per_family_without_spark_or_other_jvms() -> None:
    every, fast = collected_each(
        (BEHAVIOUR, HIVE, SPARK, REST), ("--fast", BEHAVIOUR, HIVE, SPARK, REST)
    )
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


def test_markers_come_from_the_fixtures_used() -> None:
    hms31, jvm_nodes, spark = collected_each(
        ("-m", "hms31", BEHAVIOUR, HIVE),
        ("-m", "jvm", BEHAVIOUR),
        ("-m", "spark", SPARK, BEHAVIOUR),
    )
    assert hms31 and all(node.endswith(("[3.1]", "[hive3-3.1]")) for node in hms31)
    jvm = {backend_of(node) for node in jvm_nodes}
    assert jvm == {"hive3-3.1", "hive3-4", "hive_kerberos"}
    assert spark and all(node.startswith(SPARK) for node in spark)
