"""SQL for the number checks (``number_checks``: one row per number, migration 0034).

What an answer does (which rows it skips, when it is asked again) is the caller's:
``scheduler.number_checks`` (decision 68).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from sqlalchemy import Connection, and_, exists, select, update

from storage import tables
from storage.dialect import dialect_insert
from storage.queries.moves import may_move
from storage.states import QUEUED, Move

_n = tables.number_checks
_d = tables.deliveries
_c = tables.campaigns


def known(conn: Connection, numbers: Iterable[str], *, since: datetime) -> dict[str, bool]:
    """``{number: on the app}`` for the ``numbers`` checked at or after ``since``."""
    wanted = sorted(set(numbers))
    out: dict[str, bool] = {}
    for i in range(0, len(wanted), 500):
        rows = conn.execute(
            select(_n.c.number, _n.c.on_app).where(
                _n.c.number.in_(wanted[i : i + 500]), _n.c.checked_at >= since
            )
        )
        out.update({str(number): bool(on_app) for number, on_app in rows})
    return out


def store(conn: Connection, answers: Mapping[str, bool], *, now: datetime) -> None:
    """Keep each number's answer, replacing an older one."""
    if not answers:
        return
    stmt = dialect_insert(conn, _n)
    stmt = stmt.on_conflict_do_update(
        index_elements=[_n.c.number],
        set_={"on_app": stmt.excluded.on_app, "checked_at": stmt.excluded.checked_at},
    )
    conn.execute(
        stmt,
        [
            {"number": number, "on_app": on_app, "checked_at": now}
            for number, on_app in sorted(answers.items())
        ],
    )


def unchecked_queued(
    conn: Connection,
    campaign_ids: Sequence[int],
    *,
    since: datetime,
    limit: int,
    senders: Iterable[str] | None = None,
) -> list[tuple[str, str | None]]:
    """Up to ``limit`` (number, sender) of the queued one-to-one rows of
    ``campaign_ids`` (of ``senders`` only, when given) whose number has no answer since
    ``since``, the soonest due first."""
    if not campaign_ids:
        return []
    only = [] if senders is None else [_d.c.sender.in_(sorted(senders))]
    fresh = select(_n.c.number).where(_n.c.number == _d.c.target, _n.c.checked_at >= since).exists()
    rows = conn.execute(
        select(_d.c.target, _d.c.sender)
        .where(
            _d.c.campaign_id.in_(list(campaign_ids)),
            _d.c.state == QUEUED,
            _d.c.contact_id.is_not(None),
            ~fresh,
            *only,
        )
        .order_by(_d.c.due_at, _d.c.id)
        .limit(limit)
    )
    return [(str(target), sender) for target, sender in rows]


def skip_not_on_app(
    conn: Connection, campaign_ids: Sequence[int], *, move: Move, since: datetime, error: str
) -> int:
    """``move`` (a skip), with ``error``, the queued rows of ``campaign_ids`` whose
    number was answered not on the app since ``since``; how many."""
    if not campaign_ids:
        return 0
    absent = exists().where(
        and_(_n.c.number == _d.c.target, _n.c.on_app.is_(False), _n.c.checked_at >= since)
    )
    stmt = (
        update(_d)
        .where(_d.c.campaign_id.in_(list(campaign_ids)), may_move(move), absent)
        .values(state=move.to, error=error, due_at=None)
    )
    return int(conn.execute(stmt).rowcount or 0)


__all__ = ["known", "skip_not_on_app", "store", "unchecked_queued"]
