"""A new process's start-up: importing the CLI (what ``lance-metastore ...`` does first), two ways.

- ``deferred``: the code as it is (``rules/client_models.py`` leaves the generated REST client's
  ``__init__``, every API class with its pydantic validators, until something uses it);
- ``eager``: the same import after ``import lance_namespace_urllib3_client``, so that
  ``__init__`` runs at start-up as it did before.

Every CLI command, REST server, commit worker and Spark task process starts this way.

Run from the repository root, in the project's venv::

    python benchmarks/bench_startup.py [--rounds 8] [--repeat 3] [--json out.json]

Each round starts one child interpreter each way, the order alternating round by round, and
measures its CPU time (user + system, from ``wait4``) and wall time. Reported: per repeat the
medians of each side and the paired CPU ratio deferred/eager, then the medians over repeats
and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import cpu_and_wall_rounds, environment, write_json

IMPORT = "import lance_metastore.cli.app"
CONTENDERS = {
    "deferred": IMPORT,
    "eager": f"import lance_namespace_urllib3_client; {IMPORT}",
}


def start(code: str) -> tuple[float, float]:
    """CPU and wall seconds of a child interpreter that runs ``code``."""
    began = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code])
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{code!r} exited with {child.returncode}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    load_before = os.getloadavg()
    start(IMPORT)  # compiled modules in __pycache__ and files in the page cache for both
    result, repeats = cpu_and_wall_rounds(
        list(CONTENDERS), lambda name: start(CONTENDERS[name]), args.rounds, args.repeat, describe
    )
    load_after = os.getloadavg()
    print(
        f"medians of {args.repeat} repeats x {args.rounds} rounds: {describe(result)}"
        f"; load average {load_before[0]:.2f} -> {load_after[0]:.2f}"
    )
    if args.json:
        write_json(args.json, {"environment": environment(), "repeats": repeats, **result})
    return 0


def describe(figures: dict[str, float]) -> str:
    sides = ", ".join(
        f"{name} {figures[f'{name}_cpu_s']:.2f} s CPU / {figures[f'{name}_wall_s']:.2f} s wall"
        for name in CONTENDERS
    )
    return (
        f"{sides}; deferred/eager CPU {figures['cpu_ratio']:.3f}, wall {figures['wall_ratio']:.3f}"
    )


if __name__ == "__main__":
    sys.exit(main())
