"""Waiting on a condition with a deadline, instead of sleeping a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], timeout: float, what: str, *, interval: float = 0.05
) -> T:
    """Calls ``predicate`` until it returns a truthy value and returns that value; fails the
    test with ``what`` (the awaited condition, e.g. "ten calls after the fault") when
    ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
