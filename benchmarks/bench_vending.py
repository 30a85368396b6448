"""Vended ``describe_table``: a cached vended answer vs an unvended one (issue 26, goal 1.2x).

Run from the repository root, in the project's venv (``test`` extra: moto[server])::

    python benchmarks/bench_vending.py [--calls 300] [--repeat 3] [--json out.json]

One Glue catalog on moto's server as shipped (Glue, STS, IAM and S3 in this process), one table
on ``s3://``, two namespaces over it: one with ``credential_vendor.enabled=true`` (write, 15
minute credentials), one without. Each is served by ``lance-metastore serve``'s app on a thread
(``RestServer``) and called by pylance's Rust REST client; ``describe_table`` of the same table,
the two servers alternated call by call. The vending server's first call assumes the role; the
answers after it come from its cache, which is what is compared. In-process calls (no REST)
are measured the same way. Reported: per repeat the median of each side and the paired ratio
(median over calls of vended/unvended); then the medians over repeats, and the load average
before and after (a shared machine: read the ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import add_tests_to_path, alternate, environment, paired_ratio, settle, write_json

add_tests_to_path()

GOAL = 1.2


def _catalog(moto: Any, bucket: str, role_arn: str, vending: bool) -> Any:
    from lance_namespace import connect

    import lance_metastore  # noqa: F401 - registers the aliases

    props = {
        "region": "us-east-1",
        "endpoint": moto.endpoint,
        "access_key_id": "AKIABENCHCATALOG01",
        "secret_access_key": "bench-catalog-secret",
        "root": f"s3://{bucket}/lake",
        "storage.aws_endpoint": moto.endpoint,
        "storage.allow_http": "true",
        "storage.aws_region": "us-east-1",
    }
    if vending:
        props.update(
            {
                "credential_vendor.enabled": "true",
                "credential_vendor.permission": "write",
                "credential_vendor.aws_role_arn": role_arn,
                "credential_vendor.aws_region": "us-east-1",
                "credential_vendor.aws_sts_endpoint": moto.endpoint,
                "credential_vendor.aws_access_key_id": "AKIABENCHVENDOR001",
                "credential_vendor.aws_secret_access_key": "bench-vendor-secret",
                "credential_vendor.aws_duration_millis": "900000",
            }
        )
    return connect("glue", props)


def _round(callers: dict[str, Any], calls: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in callers}
    for index in range(calls):
        for name in alternate(index, list(callers)):
            start = time.perf_counter()
            callers[name]()
            samples[name].append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()

    from lance_namespace import DescribeTableRequest, connect
    from support.glue_emulator import StockMotoServer

    from lance_metastore.rest.server import RestServer

    load_before = os.getloadavg()
    with StockMotoServer() as moto:
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        moto.client("s3").create_bucket(Bucket=bucket)
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}
            ],
        }
        role_arn = moto.client("iam").create_role(
            RoleName="bench-vending", AssumeRolePolicyDocument=json.dumps(trust)
        )["Role"]["Arn"]
        plain = _catalog(moto, bucket, role_arn, vending=False)
        vending = _catalog(moto, bucket, role_arn, vending=True)
        plain.create_namespace({"id": ["db"]})
        plain.declare_table({"id": ["db", "t"]})
        request = DescribeTableRequest(id=["db", "t"])
        answer = vending.describe_table(request)  # assumes the role: the cache is warm
        assert "expires_at_millis" in (answer.storage_options or {})

        with RestServer(plain) as plain_server, RestServer(vending) as vending_server:
            rest_plain = connect("rest", {"uri": plain_server.url})
            rest_vending = connect("rest", {"uri": vending_server.url})
            assert "expires_at_millis" in rest_vending.describe_table(request).storage_options
            contenders = {
                "rest": {
                    "vended": lambda: rest_vending.describe_table(request),
                    "unvended": lambda: rest_plain.describe_table(request),
                },
                "in-process": {
                    "vended": lambda: vending.describe_table(request),
                    "unvended": lambda: plain.describe_table(request),
                },
            }
            results: dict[str, Any] = {}
            for label, callers in contenders.items():
                _round(callers, 20)  # warm-up
                rounds = []
                for _ in range(args.repeat):
                    settle()
                    samples = _round(callers, args.calls)
                    rounds.append(
                        {
                            "vended_median_ms": statistics.median(samples["vended"]) * 1e3,
                            "unvended_median_ms": statistics.median(samples["unvended"]) * 1e3,
                            "paired_ratio": paired_ratio(samples["vended"], samples["unvended"]),
                        }
                    )
                results[label] = {
                    "rounds": rounds,
                    "median_ratio": statistics.median(r["paired_ratio"] for r in rounds),
                }
    load_after = os.getloadavg()

    for label, result in results.items():
        for number, r in enumerate(result["rounds"], 1):
            print(
                f"{label:10} repeat {number}: vended {r['vended_median_ms']:.3f} ms, "
                f"unvended {r['unvended_median_ms']:.3f} ms, ratio {r['paired_ratio']:.3f}"
            )
        verdict = "within goal" if result["median_ratio"] <= GOAL else "ABOVE GOAL"
        print(f"{label:10} median ratio {result['median_ratio']:.3f} ({verdict} {GOAL}x)")
    print(f"load average before {load_before}, after {load_after}")
    if args.json:
        write_json(
            args.json,
            {
                "results": results,
                "load_before": load_before,
                "load_after": load_after,
                "environment": environment(),
            },
        )


if __name__ == "__main__":
    main()
