"""Catalog calls per declare with a location, against the size of the rest of the catalog.

Run from the repository root, in the project's venv (the ``test`` extra: moto[server])::

    python benchmarks/bench_locations.py [--sizes 10,1000,10000] [--namespaces 10] [--repeat 5]

One Glue emulator (``tests/support/glue_emulator.py``, moto's server plus the catalog
extensions) runs in this process. For each size N the catalog is reset; ``--namespaces``
other namespaces are created through the namespace API and N Lance table entries spread over
them are put straight into the emulator's state (a bulk load: creating 10,000 entries through
HTTP would only make the set-up slow). The caller's own namespace holds 5 tables. Then, per
size, ``--repeat`` times each:

- confined (``confine_locations=true``, as ``lance-metastore serve`` runs): a declare with the
  default location; a declare with a location in the namespace's own directory;
- unconfined (the library default), a declare at a location of the caller's choice: a
  catalog-wide search, shown for contrast.

Every Glue request the namespace sends is counted (botocore's ``before-call`` event of its
client), and the median wall time of a declare is reported. The claim marker a declare puts
on its location is a storage call (here a local directory), not a catalog call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_tests_to_path, format_table

add_tests_to_path()


def _bulk_tables(emulator: Any, database: str, names: list[str], base: Path) -> None:
    for name in names:
        emulator._state.glue.create_table(
            {
                "DatabaseName": database,
                "TableInput": {
                    "Name": name,
                    "TableType": "EXTERNAL_TABLE",
                    "Parameters": {"table_type": "lance", "managed_by": "storage"},
                    "StorageDescriptor": {"Location": str(base / f"{name}.lance")},
                },
            },
            emulator.account_id,
        )


def _props(emulator: Any, root: Path, **extra: str) -> dict[str, str]:
    return {
        "region": emulator.region,
        "endpoint": emulator.endpoint,
        "access_key_id": emulator.access_key_id,
        "secret_access_key": emulator.secret_access_key,
        "root": str(root),
        **extra,
    }


def _measure(ns: Any, declare: Any, repeat: int) -> tuple[float, float]:
    """(median Glue calls, median ms) of ``declare(i)`` over ``repeat`` calls."""
    calls: Counter[int] = Counter()
    current = [0]
    ns.glue.meta.events.register("before-call.glue", lambda **_: calls.update([current[0]]))
    times = []
    for i in range(repeat):
        current[0] = i
        start = time.perf_counter()
        declare(i)
        times.append((time.perf_counter() - start) * 1000)
    counts = [calls[i] for i in range(repeat)]
    return statistics.median(counts), statistics.median(times)


def run(sizes: list[int], namespaces: int, repeat: int) -> list[list[str]]:
    from support.glue_emulator import GlueEmulator

    with GlueEmulator() as emulator, tempfile.TemporaryDirectory() as tmp:
        return [_one_size(emulator, Path(tmp), size, namespaces, repeat) for size in sizes]


def _one_size(emulator: Any, tmp: Path, size: int, namespaces: int, repeat: int) -> list[str]:
    """One row: a fresh catalog with ``size`` tables in other namespaces, then the declares."""
    import lance_metastore

    emulator.reset()
    root = tmp / f"lake{size}"
    admin = lance_metastore.GlueNamespace(**_props(emulator, root))
    others = [f"other{n}" for n in range(namespaces)]
    for n, other in enumerate(others):
        admin.create_namespace({"id": [other]})
        _bulk_tables(emulator, other, [f"t{i}" for i in range(n, size, namespaces)], root / other)
    admin.create_namespace({"id": ["mine"]})
    for i in range(5):
        admin.declare_table({"id": ["mine", f"own{i}"]})
    assert sum(len(admin.list_tables({"id": [o]}).tables) for o in others) == size

    confined = lance_metastore.GlueNamespace(**_props(emulator, root, confine_locations="true"))
    default = _measure(
        confined, lambda i: confined.declare_table({"id": ["mine", f"d{i}"]}), repeat
    )
    placed = _measure(
        confined,
        lambda i: confined.declare_table(
            {"id": ["mine", f"p{i}"], "location": str(root / "mine" / "placed" / f"p{i}.lance")}
        ),
        repeat,
    )
    unconfined = lance_metastore.GlueNamespace(**_props(emulator, root))
    anywhere = _measure(
        unconfined,
        lambda i: unconfined.declare_table(
            {"id": ["mine", f"u{i}"], "location": str(root / "free" / f"u{i}")}
        ),
        repeat,
    )
    return [
        f"{size:,}",
        *(f"{calls:.0f} ({ms:.1f} ms)" for calls, ms in (default, placed, anywhere)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,1000,10000", help="tables in other namespaces")
    parser.add_argument("--namespaces", type=int, default=10, help="other namespaces")
    parser.add_argument("--repeat", type=int, default=5, help="declares per size and kind")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = run(sizes, args.namespaces, args.repeat)
    print(
        f"command: python benchmarks/bench_locations.py --sizes {args.sizes} "
        f"--namespaces {args.namespaces} --repeat {args.repeat}"
    )
    print("Glue calls per declare (median wall time), Glue emulator on 127.0.0.1")
    print(
        format_table(
            [
                "tables in other namespaces",
                "confined, default location",
                "confined, location in own directory",
                "unconfined, location anywhere",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
