"""The identical-content guard (issue 16, item 4): at most N identical bodies in a row
per sender.

A stream of the same text from one number is what anti-spam heuristics look for; spintax
and variables exist to vary it. The guard keeps, per sender, the digest of the last body
claimed, how many identical ones came in a row and when (``instances.body_digest``,
``body_run``, ``body_at``: one row per sender, read and written in the claim's
transaction; no history scan). When the next row's body would make the run longer than
``[safety] max_identical_in_row`` (default 20, ``GATECAST_MAX_IDENTICAL_IN_ROW``; 0: off)
while the last one was claimed less than :data:`HOLD` ago, that row waits: it goes back
to ``queued`` due when the hold ends (its attempt given back, its report row saying why),
and the sender's next slot takes the next row, a different body if there is one. A break
of :data:`HOLD` without a claim ends the run. Paced campaigns only: an unpaced campaign
("as fast as possible") has opted out of looking human.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Connection

from campaigns.delivery_lifecycle import SEND_REQUEUED
from campaigns.variety import body_digest
from storage.queries import content_runs as cr
from storage.queries import deliveries as dq

#: how long a sender holds a body that would lengthen its identical run past the limit
HOLD = timedelta(minutes=10)
#: how a held row's error starts (:mod:`scheduler.holds` tells such a wait by it)
HELD_PREFIX = "held:"


def held_reason(limit: int, until: datetime) -> str:
    """The held row's error while it waits."""
    return (
        f"{HELD_PREFIX} {limit} identical messages in a row from this sender; "
        f"waits until {until:%Y-%m-%d %H:%M} UTC (vary the text with spintax or variables)"
    )


def hold_runs(
    conn: Connection,
    rows: list[dq.ClaimedRow],
    limit: int,
    now: datetime,
    wakes: list[datetime],
) -> list[dq.ClaimedRow]:
    """The claimed ``rows`` that may be sent; the others are re-queued, due when their
    sender's hold ends (the moment goes to ``wakes``)."""
    if limit <= 0 or not rows:
        return rows
    state = cr.body_runs(conn, sorted({r.sender for r in rows if r.sender}))
    kept: list[dq.ClaimedRow] = []
    held: list[tuple[int, datetime, str | None]] = []
    changed: dict[str, cr.BodyRun] = {}
    for row in rows:
        if not row.sender:
            kept.append(row)
            continue
        digest = body_digest(row.content)
        last, run, at = state.get(row.sender, (None, 0, None))
        same = digest == last and at is not None and now - at < HOLD
        if same and run >= limit:
            assert at is not None
            until = at + HOLD
            held.append((row.id, until, held_reason(limit, until)))
            wakes.append(until)
            continue
        state[row.sender] = changed[row.sender] = (digest, run + 1 if same else 1, now)
        kept.append(row)
    dq.record_requeued(conn, held, move=SEND_REQUEUED, refund_attempt=True)
    cr.set_body_runs(conn, changed)
    return kept


__all__ = ["HELD_PREFIX", "HOLD", "held_reason", "hold_runs"]
