"""463-aware routing: while a reach-out timelock holds, a sender sends only to known
chats and groups; cold contacts wait until the lock's end, then go out by themselves.

Source: baileys-antiban's timelock guard (kobie3717/baileys-antiban,
``src/timelockGuard.ts``): on a 463, assume a 60 s lock when its end is unknown; groups
and chats with history flow; new contacts are held until the lock lifts.

- The gateway reports a 463 as a failed status event (error code ``463``). The
  dispatcher's sweep reads each sender's new coded events (``ix_status_events_instance_code``:
  the events after the last it read) and on a 463 sets ``instances.lock_until`` to
  ``now + GATECAST_TIMELOCK_SECONDS`` (60). The refused message's delivery goes back to
  ``queued``, due at the lock's end (it never reached its contact).
- A known chat: the target got a message of this sender that was delivered (or read), or
  wrote to it (``sender_chats``, one primary-key probe). Groups always flow.
- The first claim that sees a new lock parks the sender's queued rows to cold contacts at
  the lock's end (once per lock); a claim under the lock probes the rows it took and
  puts cold ones back (attempt refunded). When ``lock_until`` passes the rows are simply
  due: nothing else lifts it.
- The sender is not paused: a 463 adds to its health score (``scheduler/health.py``),
  which pauses it only if signals pile up.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import Connection

from campaigns.delivery_lifecycle import PARKED, REFUSED_UNDER_LOCK, RESTRICTION_CODE
from scheduler.care import current
from storage.queries import deliveries as dq
from storage.queries import sender_care as sc
from storage.queries.sender_care import GROUP_KIND, CareRow

log = logging.getLogger("gatecast.dispatch")

#: the error of a row parked until a timelock ends
PARKED_ERROR = "waits for the end of a 463 timelock (cold contact)"


#: the health signal of a failed status's error code (others: ``failed``)
_SIGNALS = {RESTRICTION_CODE: "timelock", "403": "forbidden", "404": "not_on_app"}


def locked(row: CareRow | None, now: datetime) -> bool:
    """True while the sender's timelock holds."""
    return row is not None and row.lock_until is not None and row.lock_until > now


def on_restriction(
    conn: Connection, instance_id: str, message_ids: Sequence[str], now: datetime
) -> datetime:
    """A 463 arrived for ``message_ids``: lock the sender's cold contacts until the lock
    ends (``GATECAST_TIMELOCK_SECONDS``), and queue the refused rows for then."""
    row = sc.care_rows(conn, [instance_id]).get(instance_id)
    until = now + timedelta(seconds=current().timelock_seconds)
    if row is not None and row.lock_until is not None and row.lock_until > until:
        until = row.lock_until
    sc.set_lock(conn, instance_id, until)
    back = sc.requeue_refused(
        conn, instance_id, message_ids, move=REFUSED_UNDER_LOCK, until=until, error=PARKED_ERROR
    )
    log.warning(
        "sender %s: error 463 (may not reach new contacts): known chats and groups go on, "
        "cold contacts wait until %s UTC (%d refused message(s) queued again)",
        instance_id,
        f"{until:%H:%M:%S}",
        back,
    )
    return until


def park_new_locks(conn: Connection, rows: dict[str, CareRow], now: datetime) -> None:
    """Park the queued cold rows of each sender whose lock is new (once per lock)."""
    for sender, row in rows.items():
        if locked(row, now) and not row.lock_parked:
            assert row.lock_until is not None
            moved = sc.park_cold(conn, sender, row.lock_until)
            if moved:
                log.info("sender %s: %d cold contact(s) wait for the lock's end", sender, moved)


def hold_cold(
    conn: Connection,
    claimed: list[dq.ClaimedRow],
    rows: dict[str, CareRow],
    known: dict[tuple[str, str], bool],
    now: datetime,
) -> list[dq.ClaimedRow]:
    """The claimed rows that may go now; those to cold contacts of a locked sender go
    back to ``queued`` until its lock ends (attempt refunded)."""
    keep: list[dq.ClaimedRow] = []
    back: list[tuple[int, datetime]] = []
    for row in claimed:
        care = rows.get(str(row.sender))
        cold = row.target_kind != GROUP_KIND and not known.get((str(row.sender), row.target))
        if care is not None and locked(care, now) and cold:
            assert care.lock_until is not None
            back.append((row.id, care.lock_until))
        else:
            keep.append(row)
    sc.requeue_parked(conn, back, move=PARKED, error=PARKED_ERROR)
    return keep


def lift_expired(conn: Connection, now: datetime) -> None:
    """Clear the locks that ended (their parked rows are due by then)."""
    for row in sc.care_rows_where_level_or_lock(conn):
        if row.lock_until is not None and row.lock_until <= now:
            sc.set_lock(conn, row.instance_id, None)
            log.info("sender %s: the 463 timelock ended; cold contacts go out", row.instance_id)


def read_signals(conn: Connection, now: datetime) -> dict[str, dict[str, int]]:
    """Each sender's new coded status events: 463s lock it (:func:`on_restriction`);
    returns the health signals they are (``timelock``, ``forbidden``, ``failed``)."""
    floor = now - timedelta(hours=1)
    out: dict[str, dict[str, int]] = {}
    for sender, events in sc.coded_events_since(conn, floor=floor).items():
        refused = [m for code, m, _ in events if code == RESTRICTION_CODE]
        if refused:
            on_restriction(conn, sender, refused, now)
        counts = out.setdefault(sender, {})
        for code, _, _ in events:
            kind = _SIGNALS.get(code, "failed")
            counts[kind] = counts.get(kind, 0) + 1
    return out


__all__ = [
    "PARKED_ERROR",
    "hold_cold",
    "lift_expired",
    "locked",
    "on_restriction",
    "park_new_locks",
    "read_signals",
]
