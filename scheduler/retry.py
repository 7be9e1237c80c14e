"""Durable retry policy: exponential backoff with full jitter, honouring Retry-After.

The delay is stored as the row's ``due_at`` (durable across restarts), not slept in
memory. The short in-call retries (a dropped connection re-tried at once) belong to the
gateway client (tenacity).
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how late a refused send is tried again."""

    max_attempts: int = 4
    backoff_seconds: float = 30.0
    max_backoff_seconds: float = 3600.0
    #: retries over days (``scheduler.retry_horizon``): 0 is no horizon
    horizon_seconds: float = 0.0
    every_seconds: float = 6 * 3600.0

    def should_retry(self, attempts: int) -> bool:
        """True when a row that has made ``attempts`` attempts may try again."""
        return attempts < self.max_attempts

    def delay(self, attempts: int, rng: random.Random, retry_after: float | None = None) -> float:
        """Seconds to wait after the ``attempts``-th attempt failed.

        Exponential: base * 2**(attempts-1), capped; jitter draws uniformly from the
        upper half of that (so retries spread out but never come back too soon); a
        gateway's Retry-After is a floor.
        """
        n = max(1, attempts)
        ceiling = min(self.max_backoff_seconds, self.backoff_seconds * (2 ** (n - 1)))
        delay = rng.uniform(ceiling / 2, ceiling) if ceiling > 0 else 0.0
        if retry_after is not None and retry_after > delay:
            delay = min(retry_after, self.max_backoff_seconds)
        return delay
