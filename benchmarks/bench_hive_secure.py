"""What securing the Hive Metastore costs: plain vs TLS vs Kerberos (SASL/GSSAPI).

Run from the repository root, in the project's venv (needs the MIT KDC of
``.ci/install-kerberos.sh`` and the ``[kerberos]`` extra)::

    python benchmarks/bench_hive_secure.py [--rounds 40] [--privacy] [--json out.json]

Starts a test KDC on loopback (tests/support/kdc.py) and three local Hive Metastores 2.3 from
the pyspark wheel: plain, TLS (``hive.metastore.use.SSL``) and Kerberos
(``hive.metastore.sasl.enabled``, QOP auth); ``--privacy`` adds one with
``hadoop.rpc.protection=privacy`` (every frame encrypted). One Hive2Namespace per metastore,
the Kerberos ones logging in from a keytab, each with one Lance table declared.

Per round, the contenders run in rotated order (``_common.alternate``); each call is timed
alone:

- ``connect``: ``close()`` the pool, then ``list_namespaces``: a new connection (TCP, plus the
  TLS handshake or the SASL/GSSAPI exchange with a cached service ticket) and one call;
- ``call``: ``describe_table`` on a warm pooled connection (the steady state).

Printed: medians and p95 per contender, the ratio of medians to plain, the load average.
There is no target: the numbers say what a secured metastore adds per new connection and per
call, which the pool amortizes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # the benchmarks dir is put on sys.path just above
    add_tests_to_path,
    alternate,
    environment,
    fmt_ratio,
    format_table,
    ms,
    percentile,
    settle,
    write_json,
)

add_tests_to_path()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--privacy", action="store_true", help="also QOP auth-conf")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()

    from lance_namespace import (
        CreateNamespaceRequest,
        DeclareTableRequest,
        DescribeTableRequest,
        ListNamespacesRequest,
    )
    from support.kdc import Kdc, missing_binaries
    from support.secure_hms import kerberized_metastore, tls_metastore

    from lance_metastore import Hive2Namespace
    from lance_metastore.hive.local import LocalMetastore

    if missing_binaries():
        sys.exit(f"MIT Kerberos KDC missing: {missing_binaries()}; run scripts/setup.sh")

    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-secure-")))
        kdc = stack.enter_context(Kdc(work / "kdc"))
        os.environ["KRB5_CONFIG"] = str(kdc.krb5_conf)
        plain = stack.enter_context(LocalMetastore(work / "plain"))
        tls = stack.enter_context(tls_metastore(work / "tls"))
        kerberos = stack.enter_context(kerberized_metastore(kdc, work / "krb"))
        contenders: dict[str, dict[str, str]] = {
            "plain": {"uri": plain.uri},
            "tls": {"uri": tls.uri, **tls.client_properties()},
            "kerberos": {"uri": kerberos.uri, **kerberos.client_properties()},
        }
        if args.privacy:
            private = stack.enter_context(kerberized_metastore(kdc, work / "krbp", "privacy"))
            contenders["kerberos-privacy"] = {"uri": private.uri, **private.client_properties()}

        namespaces = {}
        for name, props in contenders.items():
            ns = Hive2Namespace(**props, root=str(work / "lake" / name))
            ns.create_namespace(CreateNamespaceRequest(id=["bench"], mode="exist_ok"))
            ns.declare_table(DeclareTableRequest(id=["bench", "t"]))
            namespaces[name] = ns
        describe = DescribeTableRequest(id=["bench", "t"])
        root = ListNamespacesRequest(id=[])

        samples: dict[str, dict[str, list[float]]] = {
            phase: {name: [] for name in namespaces} for phase in ("connect", "call")
        }
        load_before = os.getloadavg()
        for index in range(args.rounds):
            for name in alternate(index, list(namespaces)):
                ns = namespaces[name]
                ns.close()
                start = time.perf_counter()
                ns.list_namespaces(root)
                samples["connect"][name].append(time.perf_counter() - start)
            settle()
            for name in alternate(index, list(namespaces)):
                ns = namespaces[name]
                for _ in range(5):
                    start = time.perf_counter()
                    ns.describe_table(describe)
                    samples["call"][name].append(time.perf_counter() - start)
        load_after = os.getloadavg()
        for ns in namespaces.values():
            ns.close()

    results: dict[str, Any] = {"rounds": args.rounds, "environment": environment()}
    for phase, by_name in samples.items():
        base = statistics.median(by_name["plain"])
        rows = []
        for name, values in by_name.items():
            values = sorted(values)
            median = statistics.median(values)
            rows.append(
                [
                    name,
                    str(len(values)),
                    ms(median * 1e3),
                    ms(percentile(values, 0.95) * 1e3),
                    fmt_ratio(median / base),
                ]
            )
            results[f"{phase}:{name}"] = {
                "median_ms": median * 1e3,
                "p95_ms": percentile(values, 0.95) * 1e3,
                "ratio_to_plain": median / base,
            }
        print(f"\n{phase}")
        print(format_table(["contender", "n", "median", "p95", "vs plain"], rows))
    results["load_average"] = {"before": load_before, "after": load_after}
    print(
        f"\nload average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f} "
        f"{load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}"
        f" on {os.cpu_count()} CPUs"
    )
    if args.json:
        write_json(args.json, results)


if __name__ == "__main__":
    main()
