"""SQL for test sends (``test_sends``): a row per test, its status events, the contact a
test renders for. The rules (who may be sent to, how events move a test's state) are
``campaigns.test_sends``' and ``campaigns.gateway_events``'."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, func, insert, select, update

from storage import tables

_t = tables.test_sends
_e = tables.status_events
_c = tables.contacts


def insert_test_send(conn: Connection, values: Mapping[str, Any]) -> int:
    """Insert one test send; returns its id."""
    return int(conn.execute(insert(_t).values(**values).returning(_t.c.id)).scalar_one())


def update_test_send(conn: Connection, test_id: int, values: Mapping[str, Any]) -> None:
    """Set ``values`` on test send ``test_id``."""
    conn.execute(update(_t).where(_t.c.id == test_id).values(**values))


def get_test_send(conn: Connection, campaign_id: int, test_id: int) -> RowMapping | None:
    """Test send ``test_id`` of campaign ``campaign_id``, or None."""
    return (
        conn.execute(select(_t).where(_t.c.id == test_id, _t.c.campaign_id == campaign_id))
        .mappings()
        .one_or_none()
    )


def test_sends_page(
    conn: Connection, campaign_id: int, *, limit: int, offset: int
) -> tuple[int, list[RowMapping]]:
    """``(total, rows)``: a campaign's test sends, newest first."""
    where = _t.c.campaign_id == campaign_id
    total = conn.execute(select(func.count()).select_from(_t).where(where)).scalar_one()
    rows = conn.execute(
        select(_t).where(where).order_by(_t.c.id.desc()).limit(limit).offset(offset)
    ).mappings()
    return int(total), list(rows)


def count_since(conn: Connection, campaign_id: int, since: datetime) -> int:
    """How many test sends of the campaign were made since ``since``."""
    stmt = select(func.count()).where(_t.c.campaign_id == campaign_id, _t.c.created_at >= since)
    return int(conn.execute(stmt).scalar_one())


def with_message_ids(conn: Connection, message_ids: Sequence[str]) -> list[RowMapping]:
    """The test sends that carry one of ``message_ids`` (usually none: one indexed probe)."""
    if not message_ids:
        return []
    return list(conn.execute(select(_t).where(_t.c.message_id.in_(list(message_ids)))).mappings())


def unapplied_events(conn: Connection, message_ids: Sequence[str]) -> list[RowMapping]:
    """The stored, unapplied status events of ``message_ids``, oldest first."""
    stmt = (
        select(_e.c.id, _e.c.message_id, _e.c.status, _e.c.error_code, _e.c.occurred_at)
        .where(_e.c.message_id.in_(list(message_ids)), _e.c.applied.is_(False))
        .order_by(_e.c.occurred_at, _e.c.id)
    )
    return list(conn.execute(stmt).mappings())


def mark_applied(conn: Connection, event_ids: Sequence[int]) -> None:
    """Flag status events applied (retention may prune them then)."""
    if event_ids:
        conn.execute(update(_e).where(_e.c.id.in_(list(event_ids))).values(applied=True))


def contact_row(
    conn: Connection, *, contact_id: int | None = None, phone: str | None = None
) -> RowMapping | None:
    """One contact (id, phone, name, attributes, opted_out) by id or by phone, or None."""
    stmt = select(_c.c.id, _c.c.phone, _c.c.name, _c.c.attributes, _c.c.opted_out)
    if contact_id is not None:
        stmt = stmt.where(_c.c.id == contact_id)
    elif phone is not None:
        stmt = stmt.where(_c.c.phone == phone)
    else:
        return None
    return conn.execute(stmt.limit(1)).mappings().one_or_none()


__all__ = [
    "contact_row",
    "count_since",
    "get_test_send",
    "insert_test_send",
    "mark_applied",
    "test_sends_page",
    "unapplied_events",
    "update_test_send",
    "with_message_ids",
]
