"""A Hive table lock held by another client, as a test takes it to make a writer wait."""

from __future__ import annotations

from pymetastore.hive_metastore import ttypes


def exclusive_table_lock(db: str, table: str, user: str = "other") -> ttypes.LockRequest:
    """An EXCLUSIVE, non-transactional table lock request, as another tool would make one."""
    component = ttypes.LockComponent(
        type=ttypes.LockType.EXCLUSIVE,
        level=ttypes.LockLevel.TABLE,
        dbname=db,
        tablename=table,
        operationType=ttypes.DataOperationType.NO_TXN,
        isTransactional=False,
    )
    return ttypes.LockRequest(component=[component], user=user, hostname=user)
