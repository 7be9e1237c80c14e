"""A/B variants: the counts per variant, an A/B test's rest and its pick (issue 16).

The rules (which variant a recipient gets, the rates, the test, the winner) are
``campaigns.variants``'; here only the statements.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Text, and_, bindparam, case, cast, func, or_, select, update

from storage import states, tables
from storage.queries.moves import may_move
from storage.states import Move

_d = tables.deliveries
_c = tables.contacts
_campaigns = tables.campaigns


def variant_counts(conn: Connection, campaign_id: int) -> dict[str, dict[str, int]]:
    """Per variant of the campaign: its ``rows``, and of them ``sent`` (sent_at set),
    ``delivered``, ``read``, ``replied`` and ``opted_out`` (sent, contact opted out since)."""
    opted = case((and_(_d.c.sent_at.is_not(None), _c.c.opted_out.is_(True)), 1), else_=0)
    rows = conn.execute(
        select(
            _d.c.variant,
            func.count(),
            func.count(_d.c.sent_at),
            func.count(_d.c.delivered_at),
            func.count(_d.c.read_at),
            func.count(_d.c.replied_at),
            func.coalesce(func.sum(opted), 0),
        )
        .select_from(_d.outerjoin(_c, _c.c.id == _d.c.contact_id))
        .where(_d.c.campaign_id == campaign_id, _d.c.variant.is_not(None))
        .group_by(_d.c.variant)
    ).all()
    keys = ("rows", "sent", "delivered", "read", "replied", "opted_out")
    return {str(r[0]): dict(zip(keys, (int(v) for v in r[1:]), strict=True)) for r in rows}


def waiting_rest(
    conn: Connection, campaign_id: int, *, after: int, limit: int
) -> list[dict[str, Any]]:
    """Up to ``limit`` queued rows of an A/B test's rest (no variant yet) with id above
    ``after``, in id order: id, target, target kind and the contact's name, phone and
    attributes (None for groups)."""
    rows = conn.execute(
        select(
            _d.c.id,
            _d.c.target,
            _d.c.target_kind,
            _c.c.name,
            _c.c.attributes,
        )
        .select_from(_d.outerjoin(_c, _c.c.id == _d.c.contact_id))
        .where(
            _d.c.campaign_id == campaign_id,
            _d.c.state == states.QUEUED,
            _d.c.variant.is_(None),
            _d.c.id > after,
        )
        .order_by(_d.c.id)
        .limit(limit)
    ).all()
    return [dict(r._mapping) for r in rows]


def release_rest(
    conn: Connection, rows: Sequence[tuple[int, str, dict[str, Any]]], *, due: datetime
) -> int:
    """Rows ``(id, variant, content)`` of a rest, still queued without a variant, take
    the winner's variant and content and are due at ``due``."""
    if not rows:
        return 0
    stmt = (
        update(_d)
        .where(
            _d.c.id == bindparam("b_id"),
            _d.c.state == states.QUEUED,
            _d.c.variant.is_(None),
        )
        .values(variant=bindparam("b_variant"), content=bindparam("b_content"), due_at=due)
    )
    params = [{"b_id": i, "b_variant": v, "b_content": c} for i, v, c in rows]
    return int(conn.execute(stmt, params).rowcount or 0)


def campaign_ab(conn: Connection, campaign_id: int) -> tuple[Any, datetime | None, Any]:
    """The campaign's stored spec, ``started_at`` and A/B pick (None before it is made);
    all None when there is no such campaign."""
    row = conn.execute(
        select(_campaigns.c.spec, _campaigns.c.started_at, _campaigns.c.ab_pick).where(
            _campaigns.c.id == campaign_id
        )
    ).one_or_none()
    return (None, None, None) if row is None else (row[0], row[1], row[2])


def skip_rest(
    conn: Connection, rows: Sequence[tuple[int, str]], *, move: Move, now: datetime
) -> int:
    """Rows ``(id, reason)`` of a rest that cannot be rendered with the winner: ``move``d
    (skipped)."""
    if not rows:
        return 0
    stmt = (
        update(_d)
        .where(_d.c.id == bindparam("b_id"), may_move(move))
        .values(state=move.to, error=bindparam("b_err"), failed_at=now)
    )
    return int(conn.execute(stmt, [{"b_id": i, "b_err": e} for i, e in rows]).rowcount or 0)


def _no_pick() -> Any:
    """``ab_pick`` holds nothing: SQL NULL, or JSON ``null`` (what an ORM insert of None
    stores in a JSON column)."""
    col = _campaigns.c.ab_pick
    return or_(col.is_(None), cast(col, Text) == "null")


def record_pick(conn: Connection, campaign_id: int, pick: dict[str, Any]) -> bool:
    """Store the A/B pick unless one is stored; False when another process made it."""
    result = conn.execute(
        update(_campaigns).where(_campaigns.c.id == campaign_id, _no_pick()).values(ab_pick=pick)
    )
    return bool(result.rowcount == 1)


__all__ = [
    "campaign_ab",
    "record_pick",
    "release_rest",
    "skip_rest",
    "variant_counts",
    "waiting_rest",
]
