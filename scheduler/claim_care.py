"""The claim's sender-care hooks: what a claim reads before and does after taking rows.

Before: each due sender's care row (one read for all), new timelocks parked
(``scheduler/timelock.py``), the allowance left today (``scheduler/warmup.py``: the
warm-up and the daily cap in one). After: the rows' known-chat probes (one primary-key
lookup per claimed row), cold rows of a locked sender held back, the warm-up use added,
messages to new contacts counted as a health signal (``scheduler/health.py``). The gap to
the next slot is doubled at medium health or worse.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import Connection

from scheduler import health, timelock, warmup
from storage.queries import deliveries as dq
from storage.queries import sender_care as sc
from storage.queries.sender_care import GROUP_KIND, CareRow


def before_claim(conn: Connection, senders: list[str], now: datetime) -> dict[str, CareRow]:
    """The senders' care rows; a lock new to a claim parks its sender's cold rows."""
    rows = sc.care_rows(conn, senders)
    timelock.park_new_locks(conn, rows, now)
    return rows


def after_claim(
    conn: Connection,
    claimed: list[dq.ClaimedRow],
    care: dict[str, CareRow],
    now: datetime,
    tz: ZoneInfo,
    *,
    unpaced: bool = False,
) -> list[dq.ClaimedRow]:
    """The claimed rows that go now (see the module doc), their use counted (not for an
    unpaced campaign: a gateway you own)."""
    if not claimed:
        return claimed
    pairs = [(str(r.sender), r.target) for r in claimed if r.target_kind != GROUP_KIND]
    chats = sc.chats_of(conn, pairs)
    rows = timelock.hold_cold(conn, claimed, care, chats, now)
    if unpaced:
        return rows
    uses: dict[str, float] = {}
    new: Counter[str] = Counter()
    for row in rows:
        sender = str(row.sender)
        seen = row.target_kind == GROUP_KIND or (sender, row.target) in chats
        uses[sender] = uses.get(sender, 0.0) + warmup.weight(seen)
        if not seen:
            new[sender] += 1
    key = warmup.day_key(now, tz)
    sc.add_warmup_use(conn, [(s, key, u) for s, u in sorted(uses.items())])
    health.add_signal_each(conn, "new_contact", new, now, care)
    return rows


def slowed(now: datetime, at: datetime, row: CareRow | None) -> datetime:
    """The next slot ``at`` after a send at ``now``, its gap stretched by the sender's
    health (:func:`scheduler.health.pace_factor`)."""
    factor = health.pace_factor(row, now)
    return at if factor == 1.0 else now + timedelta(seconds=(at - now).total_seconds() * factor)


__all__ = ["after_claim", "before_claim", "slowed"]
