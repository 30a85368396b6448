"""A new process's start-up: importing the CLI (what ``lance-metastore ...`` does first), two ways.

- ``deferred``: the code as it is (``rules/client_models.py`` leaves the generated REST client's
  ``__init__``, every API class with its pydantic validators, until something uses it);
- ``eager``: the same import after ``import lance_namespace_urllib3_client``, so that
  ``__init__`` runs at start-up as it did before.

Every CLI command, REST server, commit worker and Spark task process starts this way.

Run from the repository root, in the project's venv::

    python benchmarks/bench_startup.py [--rounds 8] [--repeat 3] [--json out.json]
    python benchmarks/bench_startup.py --commands [--rounds 8]

``--commands`` times what a person waits for instead: ``lance-metastore --version``,
``lance-metastore --help`` and every subcommand's ``--help`` (``ls --help``, ``hms start
--help``, ...) from a fresh interpreter (the console script's entry point,
``lance_metastore.launch:main``), wall and CPU medians against the goal of 0.5 s of wall time
each, with the load average before and after (a loaded machine's figures say so).

Each round starts one child interpreter each way, the order alternating round by round, and
measures its CPU time (user + system, from ``wait4``) and wall time. Reported: per repeat the
medians of each side and the paired CPU ratio deferred/eager, then the medians over repeats
and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
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


# The console script's entry point, as the installed `lance-metastore` runs it.
COMMAND = "from lance_metastore.launch import main; main()"
COMMANDS = {"--version": ["--version"], "--help": ["--help"]}
GOAL_S = 0.5


def start(code: str, *args: str) -> tuple[float, float]:
    """CPU and wall seconds of a child interpreter that runs ``code`` with ``args``."""
    began = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL if args else None
    )
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
    parser.add_argument("--commands", action="store_true", help="time --version and --help")
    args = parser.parse_args()
    if args.commands:
        return time_commands(args.rounds)
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


def subcommand_helps() -> dict[str, list[str]]:
    """``<command> --help`` for every command of the app, sub-apps' commands included."""
    import typer

    from lance_metastore.cli import app

    helps: dict[str, list[str]] = {}
    for name, command in typer.main.get_command(app).commands.items():  # type: ignore[attr-defined]
        helps[f"{name} --help"] = [name, "--help"]
        for sub in getattr(command, "commands", {}):
            helps[f"{name} {sub} --help"] = [name, sub, "--help"]
    return helps


def time_commands(rounds: int) -> int:
    """Medians of ``--version``, ``--help`` and each subcommand's ``--help``, wall and CPU,
    against the goal; the load average before and after."""
    load_before = os.getloadavg()
    missed = []
    for name, argv in {**COMMANDS, **subcommand_helps()}.items():
        start(COMMAND, *argv)  # compiled modules and files in the cache
        times = [start(COMMAND, *argv) for _ in range(rounds)]
        cpu = statistics.median(run[0] for run in times)
        wall = statistics.median(run[1] for run in times)
        verdict = "met" if wall <= GOAL_S else "missed"
        if wall > GOAL_S:
            missed.append(name)
        print(
            f"lance-metastore {name}: median of {rounds}: {wall:.3f} s wall, {cpu:.3f} s CPU "
            f"(goal {GOAL_S} s wall: {verdict})"
        )
    load_after = os.getloadavg()
    print(
        f"load average (1, 5, 15 min) {' '.join(f'{x:.2f}' for x in load_before)} -> "
        f"{' '.join(f'{x:.2f}' for x in load_after)} on {os.cpu_count()} cores; "
        f"missed: {', '.join(missed) or 'none'}"
    )
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
