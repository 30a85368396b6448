"""A Glue namespace's AWS set-up: a session and its Glue client, with the process's shared
botocore loader (``rules/aws_sessions.py``) vs a plain ``boto3.Session`` (the code before it).

Run from the repository root, in the project's venv (``glue`` extra)::

    python benchmarks/bench_aws_sessions.py [--rounds 20] [--repeat 5] [--json out.json]

Each round builds one session and one Glue client each way, the order alternating round by
round (no request is sent: building a client reads the service model and makes no call).
Reported: per repeat the median of each side and the paired ratio (median over rounds of
shared/plain), then the medians over repeats and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import alternate, environment, paired_ratio, settle, write_json

KEYS = {"aws_access_key_id": "AKIABENCHMARK0000001", "aws_secret_access_key": "bench/secret"}


def plain() -> Any:
    import boto3

    return boto3.Session(region_name="us-east-1", **KEYS).client(
        "glue", endpoint_url="http://127.0.0.1:9"
    )


def shared() -> Any:
    from lance_metastore.rules.aws_sessions import aws_session

    return aws_session(region_name="us-east-1", **KEYS).client(
        "glue", endpoint_url="http://127.0.0.1:9"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    contenders = {"shared": shared, "plain": plain}
    load_before = os.getloadavg()
    shared()  # the shared loader's first read is paid once per process, not per namespace
    repeats = []
    for _ in range(args.repeat):
        samples: dict[str, list[float]] = {name: [] for name in contenders}
        for index in range(args.rounds):
            for name in alternate(index, list(contenders)):
                settle()
                start = time.perf_counter()
                contenders[name]()
                samples[name].append(time.perf_counter() - start)
        repeats.append(
            {
                "shared_ms": statistics.median(samples["shared"]) * 1e3,
                "plain_ms": statistics.median(samples["plain"]) * 1e3,
                "ratio": paired_ratio(samples["shared"], samples["plain"]),
            }
        )
        print(
            f"repeat {len(repeats)}: shared {repeats[-1]['shared_ms']:.1f} ms, "
            f"plain {repeats[-1]['plain_ms']:.1f} ms, shared/plain {repeats[-1]['ratio']:.3f}"
        )
    keys = ("shared_ms", "plain_ms", "ratio")
    result = {key: statistics.median(r[key] for r in repeats) for key in keys}
    load_after = os.getloadavg()
    print(
        f"medians of {args.repeat} repeats x {args.rounds} rounds: shared {result['shared_ms']:.1f}"
        f" ms, plain {result['plain_ms']:.1f} ms, shared/plain {result['ratio']:.3f}; "
        f"load average {load_before[0]:.2f} -> {load_after[0]:.2f}"
    )
    if args.json:
        write_json(args.json, {"environment": environment(), "repeats": repeats, **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
