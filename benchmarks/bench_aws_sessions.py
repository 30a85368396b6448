"""A Glue namespace's AWS set-up: a session and its Glue client, three ways.

- ``shared``: ``rules/aws_sessions.py`` as it is (the process's botocore loader, and a copy of
  built-in handlers registered once);
- ``loader``: the shared loader alone, each session registering botocore's handlers itself
  (the code before the handlers were shared);
- ``plain``: a plain ``boto3.Session`` (the code before either).

Run from the repository root, in the project's venv (``glue`` extra)::

    python benchmarks/bench_aws_sessions.py [--rounds 20] [--repeat 5] [--json out.json]

Each round builds one session and one Glue client each way, the order rotating round by round
(no request is sent: building a client reads the service model and makes no call). Reported:
per repeat the median of each side and the paired ratios (median over rounds of shared/loader
and shared/plain), then the medians over repeats and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import alternate, environment, paired_ratio, settle, write_json

KEYS = {"aws_access_key_id": "AKIABENCHMARK0000001", "aws_secret_access_key": "bench/secret"}
ENDPOINT = "http://127.0.0.1:9"


def plain() -> Any:
    import boto3

    return boto3.Session(region_name="us-east-1", **KEYS).client("glue", endpoint_url=ENDPOINT)


def loader() -> Any:
    import boto3
    import botocore.session

    from lance_metastore.rules.aws_sessions import _shared_loader

    core = botocore.session.get_session()
    core.register_component("data_loader", _shared_loader())
    session = boto3.Session(botocore_session=core, region_name="us-east-1", **KEYS)
    return session.client("glue", endpoint_url=ENDPOINT)


def shared() -> Any:
    from lance_metastore.rules.aws_sessions import aws_session

    return aws_session(region_name="us-east-1", **KEYS).client("glue", endpoint_url=ENDPOINT)


CONTENDERS: dict[str, Callable[[], Any]] = {"shared": shared, "loader": loader, "plain": plain}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    load_before = os.getloadavg()
    shared()  # what is shared is built once per process, not per namespace
    repeats = []
    for _ in range(args.repeat):
        samples: dict[str, list[float]] = {name: [] for name in CONTENDERS}
        for index in range(args.rounds):
            for name in alternate(index, list(CONTENDERS)):
                settle()
                start = time.perf_counter()
                CONTENDERS[name]()
                samples[name].append(time.perf_counter() - start)
        repeat = {f"{name}_ms": statistics.median(samples[name]) * 1e3 for name in CONTENDERS}
        repeat["shared_vs_loader"] = paired_ratio(samples["shared"], samples["loader"])
        repeat["shared_vs_plain"] = paired_ratio(samples["shared"], samples["plain"])
        repeats.append(repeat)
        print(
            f"repeat {len(repeats)}: "
            + ", ".join(f"{name} {repeat[f'{name}_ms']:.1f} ms" for name in CONTENDERS)
            + f"; shared/loader {repeat['shared_vs_loader']:.3f}"
            + f", shared/plain {repeat['shared_vs_plain']:.3f}"
        )
    result = {key: statistics.median(r[key] for r in repeats) for key in repeats[0]}
    load_after = os.getloadavg()
    print(
        f"medians of {args.repeat} repeats x {args.rounds} rounds: "
        + ", ".join(f"{name} {result[f'{name}_ms']:.1f} ms" for name in CONTENDERS)
        + f"; shared/loader {result['shared_vs_loader']:.3f}"
        + f", shared/plain {result['shared_vs_plain']:.3f}"
        + f"; load average {load_before[0]:.2f} -> {load_after[0]:.2f}"
    )
    if args.json:
        write_json(args.json, {"environment": environment(), "repeats": repeats, **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
