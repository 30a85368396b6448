"""Backoff between retried calls: exponential, capped, jittered.

Clients that fail together (a metastore restart breaks every pooled connection at once; writers
that wait on one lock) must not come back together, so every delay is jittered: half of the
exponential step is fixed, so the server always gets some time, and half is drawn at random
("equal jitter"). The number of attempts is bounded by the caller; with the cap, so is the
time spent waiting.

Glue calls do not use this: botocore's ``standard`` and ``adaptive`` retry modes already back
off with full jitter and bound attempts and a retry quota.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backoff:
    """Delays ``base * 2**attempt`` capped at ``cap`` seconds, each jittered to [d/2, d]."""

    base: float
    cap: float
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def step(self, attempt: int) -> float:
        """The un-jittered delay before retry number ``attempt`` (0-based)."""
        delay: float = min(self.cap, self.base * 2 ** min(attempt, 62))
        return delay

    def delay(self, attempt: int) -> float:
        step = self.step(attempt)
        return step / 2 + self.rng.uniform(0, step / 2)

    def total_cap(self, attempts: int) -> float:
        """The longest total wait ``attempts`` retries can add: the budget in seconds."""
        return sum(self.step(attempt) for attempt in range(attempts))
