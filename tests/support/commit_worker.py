"""A writer process for the managed-commit tests: appends through a namespace, then reports.

``python commit_worker.py IMPL PROPS_JSON TABLE_ID APPENDS [--die-before-catalog-update |
--die-after-catalog-update]`` prints one JSON line: how many appends landed and the codes of
those that failed. With ``--die-before-catalog-update`` the process kills itself (SIGKILL)
after Lance wrote its manifest and right before the catalog would record the commit; with
``--die-after-catalog-update``, right after the catalog recorded it and before the manifest
was moved to its final name: the crashes the tests need.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import lance
import pyarrow as pa

# Ours before lance_namespace, as a process of the CLI imports them: the generated REST
# client's __init__ then waits for first use (lance_metastore/rules/client_models.py).
from lance_metastore import connect

# isort: split
from lance_namespace.errors import LanceNamespaceError

ROWS = pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]})


def main() -> None:
    impl, props, appends = sys.argv[1], json.loads(sys.argv[2]), sys.argv[4]
    table_id = sys.argv[3].split("$")  # pylance wants the list form
    ns = connect(impl, props)
    if "--die-before-catalog-update" in sys.argv:
        # Fault injection, not a stand-in: the real commit runs up to the catalog update.
        def die(*_args: object) -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        ns._catalog_write_table = die  # type: ignore[method-assign]
    if "--die-after-catalog-update" in sys.argv:
        record = ns._catalog_write_table

        def record_then_die(*args: object) -> None:
            record(*args)
            os.kill(os.getpid(), signal.SIGKILL)

        ns._catalog_write_table = record_then_die  # type: ignore[method-assign]
    landed, codes = 0, []
    for _ in range(int(appends)):
        try:
            lance.write_dataset(ROWS, namespace_client=ns, table_id=table_id, mode="append")
            landed += 1
        except LanceNamespaceError as error:
            codes.append(int(error.code))
        except Exception as error:  # Lance wraps namespace errors raised inside its commit
            codes.append(14 if "oncurrent" in str(error) else -1)
            print(repr(error), file=sys.stderr)
    print(json.dumps({"landed": landed, "codes": codes}))


if __name__ == "__main__":
    main()
