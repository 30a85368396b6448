"""A batch of versions whose later final name turns out taken after its earlier version was
made final stands in part: it answers 17 (outcome unknown), never 14 (Lance would commit the
rows of the version that stands a second time). Real Glue emulator, pylance, local storage.
"""

from __future__ import annotations

import os
import shutil
import uuid

import lance
import pyarrow as pa
import pytest
from lance_namespace.errors import ConcurrentModificationError, ServiceUnavailableError
from support.harness import GlueHarness
from support.manifests import final_name, store_path


def _copy_new_data(source: str, target: str) -> None:
    for name in os.listdir(f"{source}/data"):
        if not os.path.exists(f"{target}/data/{name}"):
            shutil.copy(f"{source}/data/{name}", f"{target}/data/{name}")


def test_a_batch_whose_later_version_is_taken_after_its_first_is_final_answers_17(
    glue: GlueHarness,
):
    """Versions 2 and 3 staged for one batch; storage's final name of version 3 holds another
    writer's manifest (one that committed version 3 by path on top of version 2, as a writer
    does once version 2 is final), version 2's is free. The batch's version 2 becomes final
    and stays; its version 3 cannot: the batch answers 17, and the catalog follows storage."""
    db = glue.db("partial_batch")
    ns = glue.connect(managed_by="impl")
    ns.create_namespace({"id": db})
    t = [*db, "t"]
    lance.write_dataset(pa.table({"id": [1]}), namespace_client=ns, table_id=t, mode="create")
    location = ns.describe_table({"id": t}).location
    local = location.removeprefix("file://")
    ours, theirs = local + ".ours", local + ".theirs"
    shutil.copytree(local, ours)
    lance.write_dataset(pa.table({"id": [2]}), ours, mode="append")
    shutil.copytree(ours, theirs)
    lance.write_dataset(pa.table({"id": [3]}), ours, mode="append")
    lance.write_dataset(pa.table({"id": [99]}), theirs, mode="append")
    _copy_new_data(ours, local)
    _copy_new_data(theirs, local)
    entries = []
    for version in (2, 3):
        staged = f"{final_name(version)}-{uuid.uuid4()}"
        shutil.copy(f"{ours}/_versions/{final_name(version)}", f"{local}/_versions/{staged}")
        manifest = f"{store_path(location).rstrip('/')}/_versions/{staged}"
        entries.append({"id": t, "version": version, "manifest_path": manifest})
    shutil.copy(f"{theirs}/_versions/{final_name(3)}", f"{local}/_versions/{final_name(3)}")

    with pytest.raises(ServiceUnavailableError) as answered:
        ns.batch_create_table_versions({"entries": entries})
    assert not isinstance(answered.value, ConcurrentModificationError)
    assert "version 2 stands" in str(answered.value)
    reader = lance.dataset(namespace_client=glue.connect(managed_by="impl"), table_id=t)
    assert reader.version == 3
    assert sorted(reader.to_table()["id"].to_pylist()) == [1, 2, 99]
