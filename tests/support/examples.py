"""How many examples a property-based test draws, and how big a race or load test is: less in
the ``--fast`` tier (the same behaviour, proven once and smaller; the full suite runs it whole).

``--fast`` (tests/conftest.py) sets ``fast`` before the test modules are imported, so
``@settings(max_examples=examples(25))`` and module constants such as
``RUN_SECONDS = sized(20.0, 6.0)`` read it when the module is imported.
"""

from __future__ import annotations

from typing import TypeVar

Size = TypeVar("Size")

FAST_EXAMPLES = 3
fast = False


def examples(full: int) -> int:
    """``full`` examples, or at most ``FAST_EXAMPLES`` in the fast tier."""
    return min(full, FAST_EXAMPLES) if fast else full


def sized(full: Size, fast_size: Size) -> Size:
    """A race or load test's size (seconds of racing, commits per writer): ``fast_size`` in the
    fast tier."""
    return fast_size if fast else full
