"""A local Hive Metastore's start, with and without its JVM class-data archive.

- ``archive``: ``LocalMetastore`` as it is (later starts map the archive the first one
  recorded, ``hive/class_archive.py``);
- ``none``: the same start without any archive option (the code before).

Run from the repository root, in the project's venv (``hive`` and ``spark`` extras: HMS 2.3
comes from the pyspark wheel; ``--version 3.1`` or ``4`` fetch a standalone release once)::

    python benchmarks/bench_hms_start.py [--version 2.3] [--rounds 4] [--repeat 3] [--json out.json]

The archive is recorded once before the rounds (a start and a clean stop). Each round starts
a metastore each way on a new data directory, the order alternating round by round, and
measures the JVM's CPU time (user + system) and the wall time until ``start()`` returned (the
port answers a Thrift call), then stops it. Reported: per repeat the medians of each side and
the paired ratios archive/none, then the medians over repeats and the load average before and
after.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import cpu_and_wall_rounds, environment, write_json

from lance_metastore.hive import class_archive
from lance_metastore.hive.local import LocalMetastore

CONTENDERS = ("archive", "none")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@contextmanager
def without_archive() -> Iterator[None]:
    """``LocalMetastore`` starting its JVM with no archive option, as before archives."""
    original = class_archive.archive_options
    class_archive.archive_options = lambda archive, data_dir: []
    try:
        yield
    finally:
        class_archive.archive_options = original


def jvm_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def one_start(version: str, use_archive: bool) -> tuple[float, float]:
    """CPU seconds of the JVM and wall seconds until it answered, for one start."""
    with tempfile.TemporaryDirectory(prefix="bench-hms-") as data_dir:
        metastore = LocalMetastore(data_dir, version=version)
        began = time.perf_counter()
        if use_archive:
            metastore.start()
        else:
            with without_archive():
                metastore.start()
        wall = time.perf_counter() - began
        assert metastore.pid is not None
        cpu = jvm_cpu_seconds(metastore.pid)
        metastore.stop()
    return cpu, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="2.3")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    load_before = os.getloadavg()
    one_start(args.version, use_archive=True)  # records the archive if there is none yet
    result, repeats = cpu_and_wall_rounds(
        CONTENDERS,
        lambda name: one_start(args.version, use_archive=name == "archive"),
        args.rounds,
        args.repeat,
        describe,
    )
    load_after = os.getloadavg()
    print(
        f"HMS {args.version}, medians of {args.repeat} repeats x {args.rounds} rounds: "
        f"{describe(result)}; load average {load_before[0]:.2f} -> {load_after[0]:.2f}"
    )
    if args.json:
        write_json(args.json, {"environment": environment(), "repeats": repeats, **result})
    return 0


def describe(figures: dict[str, float]) -> str:
    sides = ", ".join(
        f"{name} {figures[f'{name}_cpu_s']:.2f} s CPU / {figures[f'{name}_wall_s']:.2f} s to ready"
        for name in CONTENDERS
    )
    return f"{sides}; archive/none CPU {figures['cpu_ratio']:.3f}, wall {figures['wall_ratio']:.3f}"


if __name__ == "__main__":
    sys.exit(main())
