"""Warm-up: a sender's daily allowance grows with its age in gatecast, and the one home
of "how many more may this sender send today" (the warm-up and the daily cap together).

- Day 1 is the local day the sender was added (``instances.created_at``, or the start an
  override set, ``gatecast instance warmup ID --day N``); days follow local midnights of
  the campaign's timezone, like the daily cap.
- The allowance of day ``n`` is ``warmup_first_day x 2^(n-1)`` times a factor drawn in
  ``[1 - spread, 1 + spread]``, stable for a sender and day (a hash, not a stored draw:
  every worker and a restart agree), for ``warmup_days`` days; after that only the daily
  cap applies. ``--ramp 15,30,60`` replaces the ramp for one sender (after its last
  value: no warm-up limit); ``--off`` turns it off.
- The allowance counts new-contact messages: a message to a contact this sender never
  messaged and never heard from uses 1, one to a known contact ``warmup_known_weight``
  (0.5). The use is kept on the sender's row for its local day (``warmup_used``,
  ``warmup_day_key``), added by each claim in its transaction.
- :func:`allowance_left` is the min of the daily cap's and the warm-up's remainders; a
  claim needs one full unit left.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from campaigns.instances import parse_ramp
from scheduler.care import CareSettings, current
from scheduler.pacing import cap_remaining
from scheduler.policy import Pace
from storage.queries.sender_care import CareRow

UTC = ZoneInfo("UTC")


def _factor(instance_id: str, day: int, spread: float) -> float:
    digest = hashlib.sha256(f"{instance_id}:{day}".encode()).digest()
    unit = int.from_bytes(digest[:8], "big") / 2**64
    return 1.0 + spread * (2.0 * unit - 1.0)


def day_of(row: CareRow, now: datetime, tz: ZoneInfo) -> int:
    """The sender's warm-up day at ``now`` (1 on its first local day)."""
    start = row.warmup_start_at or row.created_at
    return (now.astimezone(tz).date() - start.astimezone(tz).date()).days + 1


def day_key(now: datetime, tz: ZoneInfo) -> str:
    """The local day a use counts for."""
    return now.astimezone(tz).date().isoformat()


def allowance(
    row: CareRow, now: datetime, tz: ZoneInfo, care: CareSettings | None = None
) -> float | None:
    """Today's warm-up allowance in new-contact units (None: no warm-up limit)."""
    care = care or current()
    if row.warmup_off:
        return None
    day = max(1, day_of(row, now, tz))
    if row.warmup_ramp:
        ramp = parse_ramp(row.warmup_ramp)
        return float(ramp[day - 1]) if day <= len(ramp) else None
    if not care.warmup_enabled or day > care.warmup_days:
        return None
    base = care.warmup_first_day * 2.0 ** (day - 1)
    return float(round(base * _factor(row.instance_id, day, care.warmup_spread)))


def used(row: CareRow, now: datetime, tz: ZoneInfo) -> float:
    """Units used today."""
    return row.warmup_used if row.warmup_day_key == day_key(now, tz) else 0.0


def weight(known: bool | None, care: CareSettings | None = None) -> float:
    """Units a message uses: 1 for a new contact, ``warmup_known_weight`` for a known
    one (messaged before, or heard from)."""
    return (care or current()).warmup_known_weight if known else 1.0


def allowance_left(
    pace: Pace, sent_today: int | None, row: CareRow | None, now: datetime, tz: ZoneInfo
) -> int | None:
    """How many more messages the sender may start today: the min of the daily cap's
    remainder (``sent_today`` counted as the cap counts) and the warm-up's whole units
    left (a claim needs a full unit). None: neither limits."""
    cap = None if sent_today is None else cap_remaining(pace, sent_today)
    warm = None if row is None else allowance(row, now, tz)
    if warm is None:
        return cap
    left = max(0, math.floor(warm - used(row, now, tz))) if row is not None else 0
    return left if cap is None else min(cap, left)


@dataclass(frozen=True)
class WarmupView:
    """What the faces show of a sender's warm-up today."""

    day: int
    allowance: float | None
    used: float
    off: bool
    ramp: str | None


def view(row: CareRow, now: datetime, tz: ZoneInfo) -> WarmupView:
    """The sender's warm-up today, for the faces."""
    return WarmupView(
        day=max(1, day_of(row, now, tz)),
        allowance=allowance(row, now, tz),
        used=used(row, now, tz),
        off=row.warmup_off,
        ramp=row.warmup_ramp,
    )


__all__ = [
    "WarmupView",
    "allowance",
    "allowance_left",
    "day_key",
    "day_of",
    "used",
    "view",
    "weight",
]
