"""How many examples a property-based test draws: fewer in the ``--fast`` tier.

``--fast`` (tests/conftest.py) sets ``fast`` before the test modules are imported, so
``@settings(max_examples=examples(25))`` reads it when the decorator runs.
"""

from __future__ import annotations

FAST_EXAMPLES = 3
fast = False


def examples(full: int) -> int:
    """``full`` examples, or at most ``FAST_EXAMPLES`` in the fast tier."""
    return min(full, FAST_EXAMPLES) if fast else full
