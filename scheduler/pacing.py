"""Pace per sender instance: the gap before its next send (rate and random delay)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from scheduler.policy import Pace


def gap_seconds(pace: Pace, rng: random.Random) -> float:
    """Seconds between two sends of one instance: max(60/per_minute, uniform(min, max))."""
    rate_gap = 60.0 / pace.per_minute if pace.per_minute > 0 else 0.0
    lo, hi = pace.delay_min, pace.delay_max
    delay = rng.uniform(lo, hi) if hi > 0 else 0.0
    return max(rate_gap, delay)


#: typing shown before a send: a first second, then this long per character, at most
#: TYPING_MAX_SECONDS and half the shortest gap of the pace
TYPING_PER_CHAR_SECONDS = 0.03
TYPING_MAX_SECONDS = 8.0


def typing_seconds(pace: Pace, characters: int) -> float:
    """How long a sender shows "typing..." before a message of ``characters`` characters
    (``[pace] typing``): about as long as a person would type it, within half the
    pace's shortest gap, so the typing is part of the gap and never slows the pace
    (0: no typing, also for an unpaced campaign, which has no gap to type in)."""
    if not pace.typing:
        return 0.0
    shortest = max(60.0 / pace.per_minute if pace.per_minute > 0 else 0.0, pace.delay_min)
    wanted = min(TYPING_MAX_SECONDS, 1.0 + TYPING_PER_CHAR_SECONDS * max(0, characters))
    return round(min(wanted, shortest / 2), 3)


def next_send_at(now: datetime, pace: Pace, rng: random.Random) -> datetime:
    """When the instance may send again after sending at ``now``."""
    return now + timedelta(seconds=gap_seconds(pace, rng))


def cap_remaining(pace: Pace, sent_today: int) -> int | None:
    """Sends left today under the daily cap (None: no cap)."""
    if pace.daily_cap is None:
        return None
    return max(0, pace.daily_cap - sent_today)


#: Below this gap between two sends, one claim takes several slots at once (a tick costs
#: a few milliseconds, so claiming one row per tick could not keep such a pace).
FAST_GAP_SECONDS = 0.05


def slots_per_claim(pace: Pace, batch_limit: int) -> int:
    """How many rows of one sender a paced claim may take: 1, or one second's worth.

    Slow paces (every real-world pace) claim one row per slot, which keeps the in-flight
    batch at one row per sender. Very fast paces (the demo, benchmarks) claim about one
    second of sends at a time, and the sender's next slot moves forward by their gaps.
    """
    widest = max(60.0 / pace.per_minute if pace.per_minute > 0 else 0.0, pace.delay_max)
    if widest >= FAST_GAP_SECONDS:
        return 1
    if widest <= 0:
        return max(1, batch_limit)
    return max(1, min(batch_limit, int(1.0 / widest)))
