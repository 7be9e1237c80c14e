"""The health score of a sender: recent ban signals, decaying over time.

Source: baileys-antiban's health monitor (kobie3717/baileys-antiban, ``src/health.ts``).
Taken from it: the signals (403 forbidden, 401 logged out, 463 reach-out timelocks,
disconnects, failed messages), their relative weights (logout 60, 403 40, 463 25, a
burst of disconnects 30, a burst of failed messages 20), the levels on a 0-100 scale
(medium from 15, high from 40, critical from 80), and what each level means (medium:
halve the rate; high: pause; critical: stop until a person looks). Changed: its score is
recomputed over the last hour's events with a linear decay; here it is kept
incrementally on the sender's row (``health_score`` as of ``health_at``), each signal
adds its weight (a disconnect 10, a failed send 4: three disconnects or five failures in
a short while reach the weights above), and it decays exponentially with a half-life
(``GATECAST_HEALTH_HALF_LIFE_SECONDS``, default 15 min), so the cost is one row per
sender whatever the history. A message to a new contact adds 0.02 and a reply takes 0.5
off (cold outreach that nobody answers adds up; an answer offsets 25 of it); a number not
on the app (a failed status 404) adds 2. Unpaced campaigns (a gateway you own:
benchmarks, the sandbox) count no new-contact signal and no warm-up.

Levels: ``medium`` halves the sender's pace; ``high`` pauses it with the reason, and it
resumes by itself after ``GATECAST_HEALTH_COOLDOWN_SECONDS`` (if the score fell below
high by then, else the cool-down starts again); ``critical`` pauses it until a person
resumes it (``gatecast instance resume``, which also clears the score). Every change is
logged, stored (``sender_health_changes``) and counted in the metrics.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from sqlalchemy import Connection

from scheduler.care import CareSettings, current
from storage.queries import instances as iq
from storage.queries import sender_care as sc
from storage.queries.sender_care import CareRow

log = logging.getLogger("gatecast.health")

LOW, MEDIUM, HIGH, CRITICAL = "low", "medium", "high", "critical"
LEVELS = (LOW, MEDIUM, HIGH, CRITICAL)

#: the weight of each signal (see the module doc for where they come from)
WEIGHTS: Mapping[str, float] = {
    "logout": 60.0,  # 401 / logged out / relogin required
    "forbidden": 40.0,  # 403
    "timelock": 25.0,  # 463
    "disconnect": 10.0,
    "failed": 4.0,  # a failed send (permanent failure, failed status)
    "not_on_app": 2.0,  # a failed status 404: the number is not on the app
    # a message to a contact never messaged nor heard from: at 20 a minute the score
    # settles near 9 (low); above about 35 a minute it reaches medium and slows the sender
    "new_contact": 0.02,
    "reply": -0.5,  # an answer: the outreach was welcome
}
#: the prefix of a pause reason the health score set (a person's resume clears it)
PAUSE_PREFIX = "health "

NotePause = Callable[[str, str], None]


def decayed(score: float, at: datetime | None, now: datetime, care: CareSettings) -> float:
    """``score`` (as of ``at``) at ``now``."""
    if at is None or score <= 0:
        return max(0.0, score)
    elapsed = max(0.0, (now - at).total_seconds())
    return float(score * 0.5 ** (elapsed / max(1e-9, care.health_half_life_seconds)))


def level_of(score: float, care: CareSettings) -> str:
    """The level of a score."""
    if score >= care.health_critical:
        return CRITICAL
    if score >= care.health_high:
        return HIGH
    if score >= care.health_medium:
        return MEDIUM
    return LOW


def score_now(row: CareRow, now: datetime, care: CareSettings | None = None) -> float:
    """The sender's score at ``now``."""
    return decayed(row.health_score, row.health_at, now, care or current())


def pace_factor(row: CareRow | None, now: datetime) -> float:
    """How much longer the sender's gaps are: 2 at medium or worse, else 1."""
    if row is None:
        return 1.0
    care = current()
    return 2.0 if score_now(row, now, care) >= care.health_medium else 1.0


def _change(
    conn: Connection,
    row: CareRow,
    score: float,
    level: str,
    now: datetime,
    why: str,
    note_pause: NotePause | None,
    care: CareSettings,
) -> None:
    """Store the score; when the level moved, log it and pause or resume as it says."""
    resume_at = row.health_resume_at
    old = row.health_level
    if level != old:
        rank_old, rank_new = LEVELS.index(old), LEVELS.index(level)
        log.warning(
            "sender %s health %s -> %s (score %.0f): %s", row.instance_id, old, level, score, why
        )
        sc.log_change(
            conn,
            row.instance_id,
            at=now,
            level_from=old,
            level_to=level,
            score=score,
            reason=why,
        )
        if rank_new >= LEVELS.index(HIGH) and rank_new > rank_old:
            if level == HIGH:
                resume_at = now + timedelta(seconds=care.health_cooldown_seconds)
                reason = (
                    f"{PAUSE_PREFIX}high (score {score:.0f}): {why}; resumes by itself at "
                    f"{resume_at:%Y-%m-%d %H:%M:%S} UTC"
                )
            else:
                resume_at = None
                reason = (
                    f"{PAUSE_PREFIX}critical (score {score:.0f}): {why}; "
                    "resume it by hand when the account is safe"
                )
            if sc.pause_for_health(conn, row.instance_id, reason, now=now) and note_pause:
                note_pause(row.instance_id, reason)
    sc.set_health(conn, row.instance_id, score=score, at=now, level=level, resume_at=resume_at)


def _scored(
    row: CareRow, signals: Mapping[str, int], now: datetime, care: CareSettings
) -> tuple[float, str, str] | None:
    """The sender's score and level after ``signals``, and why (None: nothing to add)."""
    delta = sum(WEIGHTS[k] * n for k, n in signals.items() if n)
    if not delta:
        return None
    score = max(0.0, min(100.0, score_now(row, now, care) + delta))
    level = level_of(score, care)
    # a level only goes down by decay, in the sweep (a reply does not lift a pause)
    if LEVELS.index(level) < LEVELS.index(row.health_level):
        level = row.health_level
    why = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in signals.items() if n)
    return score, level, why


def add_signals(
    conn: Connection,
    instance_id: str,
    signals: Mapping[str, int],
    now: datetime,
    *,
    note_pause: NotePause | None = None,
    row: CareRow | None = None,
) -> None:
    """Add ``{signal: count}`` to the sender's score (see :data:`WEIGHTS`); a level
    going up logs, pauses (high, critical) or slows (medium) the sender."""
    care = current()
    if row is None:
        row = sc.care_rows(conn, [instance_id], lock=True).get(instance_id)
        if row is None:
            return
    scored = _scored(row, signals, now, care)
    if scored is not None:
        _change(conn, row, *scored[:2], now, scored[2], note_pause, care)


def add_signal_each(
    conn: Connection,
    signal: str,
    counts: Mapping[str, int],
    now: datetime,
    rows: Mapping[str, CareRow],
) -> None:
    """:func:`add_signals` of one signal for several senders (``rows``: their care rows,
    read by the caller): the scores whose level stays are stored in one statement, not
    one each (the claim adds ``new_contact`` for every sender it claimed for)."""
    care = current()
    same: list[tuple[str, float, datetime | None, str]] = []
    for sender, n in sorted(counts.items()):
        row = rows.get(sender)
        if row is None:
            add_signals(conn, sender, {signal: n}, now)
            continue
        scored = _scored(row, {signal: n}, now, care)
        if scored is None:
            continue
        score, level, why = scored
        if level == row.health_level:
            same.append((sender, score, row.health_resume_at, level))
        else:
            _change(conn, row, score, level, now, why, None, care)
    sc.set_health_each(conn, same, at=now)


def sweep(conn: Connection, now: datetime, note_pause: NotePause | None = None) -> None:
    """Levels that decayed go down (logged); a sender paused at high resumes after its
    cool-down when its score fell below high (else the cool-down starts again)."""
    care = current()
    for row in sc.care_rows_where_level_or_lock(conn):
        if row.health_level == LOW:
            continue
        score = score_now(row, now, care)
        level = level_of(score, care)
        if row.health_level == CRITICAL:
            continue  # a person resumes it
        if row.health_level == HIGH:
            due = row.health_resume_at is not None and row.health_resume_at <= now
            if not due:
                continue
            if level in (HIGH, CRITICAL):
                sc.set_health(
                    conn,
                    row.instance_id,
                    score=score,
                    at=now,
                    level=HIGH,
                    resume_at=now + timedelta(seconds=care.health_cooldown_seconds),
                )
                continue
            if str(row.paused_reason or "").startswith(PAUSE_PREFIX):
                iq.resume(conn, row.instance_id, now=now)
            log.warning("sender %s resumes after its health cool-down", row.instance_id)
            _change(conn, row, score, level, now, "cool-down over", None, care)
            continue
        if level != row.health_level:
            _change(conn, row, score, level, now, "signals decayed", None, care)


def fold_counted(conn: Connection, now: datetime, note_pause: NotePause | None = None) -> None:
    """Fold the signals the webhook counted (disconnects, logouts, replies) into scores."""
    for instance_id, counts in sc.take_signals(conn).items():
        add_signals(conn, instance_id, counts, now, note_pause=note_pause)


__all__ = [
    "CRITICAL",
    "HIGH",
    "LEVELS",
    "LOW",
    "MEDIUM",
    "PAUSE_PREFIX",
    "WEIGHTS",
    "add_signal_each",
    "add_signals",
    "decayed",
    "fold_counted",
    "level_of",
    "pace_factor",
    "score_now",
    "sweep",
]
