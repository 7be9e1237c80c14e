"""Campaign-level bulk statements: delivery inserts, counts, cancel and retry updates.

Every function takes a ``Connection`` and leaves the transaction to its caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, and_, case, func, select, update

from storage import states, tables
from storage.dialect import dialect_insert
from storage.queries import delivery_search
from storage.queries.moves import may_move
from storage.states import Move

_d: Table = tables.deliveries
_campaigns: Table = tables.campaigns

#: rows per executemany
BATCH = 5000


def insert_deliveries(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert delivery rows; a row whose (campaign_id, target) exists is left alone."""
    stmt = dialect_insert(conn, _d).on_conflict_do_nothing(index_elements=["campaign_id", "target"])
    for start in range(0, len(rows), BATCH):
        batch = [dict(r) for r in rows[start : start + BATCH]]
        if batch:
            conn.execute(stmt, batch)
    delivery_search.index_new(conn)


def count_in_states(
    conn: Connection, campaign_id: int, in_states: Sequence[str], *, at_most: int | None = None
) -> int:
    """The campaign's rows in ``in_states``, counted up to ``at_most`` (a range of the
    (campaign_id, state) index: the cost follows the rows counted, not the campaign)."""
    rows = select(_d.c.id).where(_d.c.campaign_id == campaign_id, _d.c.state.in_(list(in_states)))
    if at_most is not None:
        rows = rows.limit(max(0, at_most))
    return int(conn.execute(select(func.count()).select_from(rows.subquery())).scalar_one())


def opted_out_count(conn: Connection, campaign_id: int) -> int:
    """The campaign's rows whose contact has opted out."""
    contacts = tables.contacts
    return int(
        conn.execute(
            select(func.count())
            .select_from(_d.join(contacts, contacts.c.id == _d.c.contact_id))
            .where(_d.c.campaign_id == campaign_id, contacts.c.opted_out.is_(True))
        ).scalar_one()
    )


def replied_count(conn: Connection, campaign_id: int) -> int:
    """The campaign's rows that got a reply."""
    return int(
        conn.execute(
            select(func.count()).where(
                _d.c.campaign_id == campaign_id, _d.c.replied_at.is_not(None)
            )
        ).scalar_one()
    )


def skip_queued(
    conn: Connection, campaign_id: int, reason: str, *, move: Move, now: datetime
) -> int:
    """``move`` the campaign's queued rows (to skipped) with ``reason``; how many."""
    result = conn.execute(
        update(_d)
        .where(_d.c.campaign_id == campaign_id, may_move(move))
        .values(state=move.to, error=reason, due_at=None)
    )
    return int(result.rowcount)


def _unknown_waiting(attempted_after: datetime) -> Any:
    """An ``unknown`` row whose last attempt started after ``attempted_after``."""
    return and_(
        _d.c.state == states.UNKNOWN,
        _d.c.attempted_at.is_not(None),  # never NULL: NOT (...) must be true for old rows
        _d.c.attempted_at > attempted_after,
    )


def unknown_waiting(
    conn: Connection, campaign_id: int, *, attempted_after: datetime
) -> tuple[int, datetime | None]:
    """``(how many, latest attempt start)`` of the campaign's ``unknown`` rows whose last
    attempt started after ``attempted_after``."""
    n, latest = conn.execute(
        select(func.count(), func.max(_d.c.attempted_at)).where(
            _d.c.campaign_id == campaign_id, _unknown_waiting(attempted_after)
        )
    ).one()
    return int(n), latest


def requeue(
    conn: Connection,
    campaign_id: int,
    move: Move,
    *,
    now: datetime,
    unknown_attempted_before: datetime | None = None,
) -> int:
    """``move`` rows (its from-states) back in the queue, due now, attempts reset; with
    ``unknown_attempted_before``, ``unknown`` rows attempted after it stay as they are."""
    cond = [_d.c.campaign_id == campaign_id, may_move(move)]
    if unknown_attempted_before is not None:
        cond.append(~_unknown_waiting(unknown_attempted_before))
    result = conn.execute(
        update(_d)
        .where(*cond)
        .values(
            state=move.to,
            attempts=0,
            due_at=now,
            lease_until=None,
            message_id=None,
            error=None,
            error_code=None,
            sent_at=None,
            delivered_at=None,
            read_at=None,
            failed_at=None,
            queued_at=now,
        )
    )
    return int(result.rowcount)


def progress_bounds(conn: Connection, campaign_id: int) -> tuple[datetime | None, datetime | None]:
    """``(first, last)``: the campaign's first send or failure, and its latest sent,
    delivered, read or failed time (None without any)."""
    bounds = conn.execute(
        select(
            func.min(func.coalesce(_d.c.sent_at, _d.c.failed_at)),
            func.max(_d.c.sent_at),
            func.max(_d.c.delivered_at),
            func.max(_d.c.read_at),
            func.max(_d.c.failed_at),
        ).where(_d.c.campaign_id == campaign_id)
    ).one()
    last = max((b for b in bounds[1:] if b is not None), default=None)
    return bounds[0], last


def progress_counts(
    conn: Connection, campaign_id: int, moments: Sequence[datetime]
) -> list[tuple[int, int, int, int]]:
    """Per moment, the campaign's rows sent, delivered, read and failed by then; one read."""
    cols = (_d.c.sent_at, _d.c.delivered_at, _d.c.read_at, _d.c.failed_at)
    exprs = [
        func.sum(case((and_(col.is_not(None), col <= at), 1), else_=0))
        for at in moments
        for col in cols
    ]
    row = conn.execute(select(*exprs).where(_d.c.campaign_id == campaign_id)).one()
    out: list[tuple[int, int, int, int]] = []
    for i in range(len(moments)):
        sent, delivered, read, failed = (int(row[i * 4 + k] or 0) for k in range(4))
        out.append((sent, delivered, read, failed))
    return out


def specs_in_states(conn: Connection, in_states: Sequence[str]) -> list[tuple[int, Any]]:
    """``(id, stored spec)`` of every campaign in one of ``in_states``, by id."""
    stmt = (
        select(_campaigns.c.id, _campaigns.c.spec)
        .where(_campaigns.c.state.in_(list(in_states)))
        .order_by(_campaigns.c.id)
    )
    return [(int(i), spec) for i, spec in conn.execute(stmt)]


__all__ = [
    "BATCH",
    "count_in_states",
    "insert_deliveries",
    "opted_out_count",
    "progress_bounds",
    "progress_counts",
    "replied_count",
    "requeue",
    "skip_queued",
    "specs_in_states",
    "unknown_waiting",
]
