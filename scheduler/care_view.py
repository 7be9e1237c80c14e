"""What the faces show of a sender's care: warm-up, allowance left today, health, lock.

One read of the senders' rows (``storage.queries.sender_care.care_rows``) beside their
usage today (:mod:`scheduler.sender_usage`); the same rules the claim obeys
(:mod:`scheduler.warmup`, :mod:`scheduler.health`, :mod:`scheduler.timelock`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection

from scheduler import health, timelock, warmup
from scheduler.policy import Pace
from scheduler.sender_usage import SenderUsage
from storage.queries import sender_care as sc


@dataclass(frozen=True)
class SenderCare:
    """A sender's care today, as the instance card, ``instance status`` and the API show it."""

    #: the sender's warm-up day (1 on its first day in gatecast)
    warmup_day: int
    #: today's warm-up allowance in new-contact messages (None: no warm-up limit)
    warmup_allowance: float | None
    #: how much of it is used (a known contact counts ``GATECAST_WARMUP_KNOWN_WEIGHT``)
    warmup_used: float
    warmup_off: bool
    warmup_ramp: str | None
    #: messages it may still start today: the min of the daily cap and the warm-up (None:
    #: neither limits)
    allowance_left: int | None
    health_score: float
    health_level: str
    #: when a sender paused at high health resumes by itself
    health_resume_at: datetime | None
    #: while a 463 timelock holds: its end (cold contacts wait until then)
    timelock_until: datetime | None


def sender_care(
    conn: Connection, ids: Sequence[str], now: datetime, usage: dict[str, SenderUsage]
) -> dict[str, SenderCare]:
    """:class:`SenderCare` of each known sender of ``ids``."""
    rows = sc.care_rows(conn, ids)
    out: dict[str, SenderCare] = {}
    for sender, row in rows.items():
        use = usage.get(sender)
        tz = use.timezone if use is not None else warmup.UTC
        seen = warmup.view(row, now, tz)
        cap = None if use is None else use.daily_cap
        left = warmup.allowance_left(
            Pace(daily_cap=cap),
            None if use is None or cap is None else use.sends_today,
            row,
            now,
            tz,
        )
        out[sender] = SenderCare(
            warmup_day=seen.day,
            warmup_allowance=seen.allowance,
            warmup_used=round(seen.used, 2),
            warmup_off=seen.off,
            warmup_ramp=seen.ramp,
            allowance_left=left,
            health_score=round(health.score_now(row, now), 1),
            health_level=row.health_level,
            health_resume_at=row.health_resume_at if row.health_level == health.HIGH else None,
            timelock_until=row.lock_until if timelock.locked(row, now) else None,
        )
    return out


def describe(care: SenderCare) -> str:
    """One line for a person: warm-up, allowance, health, lock."""
    if care.warmup_allowance is None:
        warm = "warm-up off" if care.warmup_off else f"warm-up day {care.warmup_day}: no limit"
    else:
        warm = (
            f"warm-up day {care.warmup_day}: {care.warmup_used:g} of "
            f"{care.warmup_allowance:g} new-contact messages used today"
        )
    left = "no limit" if care.allowance_left is None else str(care.allowance_left)
    parts = [
        warm,
        f"may send {left} more today",
        f"health {care.health_level} ({care.health_score:g})",
    ]
    if care.health_resume_at is not None:
        parts.append(f"resumes by itself at {care.health_resume_at:%Y-%m-%d %H:%M:%S} UTC")
    if care.timelock_until is not None:
        parts.append(f"463 timelock until {care.timelock_until:%H:%M:%S} UTC: cold contacts wait")
    return "; ".join(parts)


@dataclass(frozen=True)
class HealthFigures:
    """The metrics' view of sender health: changes into each level since the database was
    created (a counter), and each sender's score and level now."""

    changes: dict[str, int]
    scores: dict[str, tuple[float, str]]


def health_figures(conn: Connection, ids: Sequence[str], now: datetime) -> HealthFigures:
    """:class:`HealthFigures` of the senders ``ids``."""
    rows = sc.care_rows(conn, ids)
    return HealthFigures(
        changes=sc.changes_by_level(conn),
        scores={s: (health.score_now(r, now), r.health_level) for s, r in rows.items()},
    )


__all__ = ["HealthFigures", "SenderCare", "describe", "health_figures", "sender_care"]
