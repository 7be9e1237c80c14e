"""Retries over days: the rows whose horizon passed while their sender stayed paused.

The rule (which campaigns, how long, the reason) is ``scheduler.retry_horizon``'s.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, update

from storage import tables
from storage.queries.moves import may_move
from storage.states import Move

_d = tables.deliveries


def fail_waiting_since(
    conn: Connection,
    campaign_id: int,
    sender: str,
    *,
    move: Move,
    made_before: datetime,
    error: str,
    now: datetime,
) -> int:
    """The campaign's queued rows of ``sender`` made before ``made_before`` ``move`` (to
    ``failed``)
    with ``error``; returns how many (a range of ``ix_deliveries_queue``: the sender's
    queued rows)."""
    result = conn.execute(
        update(_d)
        .where(
            _d.c.campaign_id == campaign_id,
            may_move(move),
            _d.c.sender == sender,
            _d.c.queued_at < made_before,
        )
        .values(state=move.to, error=error[:1000], failed_at=now, due_at=None)
    )
    return int(result.rowcount or 0)


__all__ = ["fail_waiting_since"]
