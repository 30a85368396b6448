"""The demos' examples keep apart what cannot be shared.

The main demo (examples/pipeline.py, pyspark 4 and Derby 10.16) and the SQL demo
(examples/sql_pipeline.py, pyspark 3.5 and Derby 10.14) each start a local metastore; a Derby
database made by one release cannot be opened by the other, so each keeps its own data
directory, and the main demo's is the one the command line finds by default.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from lance_metastore.cli.commands.hms import DEFAULT_HMS_DATA_DIR

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_demos_keep_separate_metastore_data() -> None:
    main, sql = example("pipeline"), example("sql_pipeline")
    assert Path(main.DEFAULT_DATA_DIR) / "hms" == DEFAULT_HMS_DATA_DIR
    assert Path(sql.DEFAULT_DATA_DIR).resolve() != Path(main.DEFAULT_DATA_DIR).resolve()
    assert (
        not Path(sql.DEFAULT_DATA_DIR)
        .resolve()
        .is_relative_to(Path(main.DEFAULT_DATA_DIR).resolve())
    )


def test_the_demo_prints_where_its_time_went() -> None:
    timings = example("pipeline").Timings(install=12.04)
    timings.lap("metastore")
    timings.lap("Spark")
    timings.lap("pipeline")
    summary = timings.summary()
    assert summary.startswith("time: install 12.0 s, metastore ")
    assert ", Spark " in summary and ", pipeline " in summary and "; total " in summary


def test_the_java_check_says_one_line_without_the_jvm_banner(java: str) -> None:
    """What the demo's set-up prints about Java when it is there: one line, no version banner
    (``java -version`` writes "openjdk version ..." and two more lines)."""
    import subprocess

    check = subprocess.run(
        ["bash", str(EXAMPLES.parent / ".ci" / "install-java.sh")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stderr
    output = (check.stdout + check.stderr).strip().splitlines()
    assert len(output) == 1 and output[0].startswith("install-java: Java 17"), output
    assert "openjdk version" not in check.stdout + check.stderr


def test_the_set_up_installs_quietly_with_a_one_line_summary() -> None:
    """pip runs with -q and the step says what it installed, or that it already was."""
    setup = (EXAMPLES.parent / "scripts" / "setup.sh").read_text()
    installs = [line for line in setup.splitlines() if "-m pip install" in line]
    assert installs and all(" -q " in line for line in installs), installs
    assert "already installed in" in setup and "new packages in" in setup
