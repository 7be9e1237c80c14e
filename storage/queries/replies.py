"""SQL for the replies inbox: incoming messages, newest first, with the delivery (and so
the campaign) the reply window matched each to."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, Select, func, select, update

from storage import tables

_i = tables.inbound_messages
_d = tables.deliveries
_c = tables.campaigns
_ct = tables.contacts


def link_inbound(conn: Connection, message_id: str, delivery_id: int) -> None:
    """Note the delivery an incoming message answers (the reply window's match)."""
    conn.execute(
        update(_i).where(_i.c.message_id == message_id[:128]).values(delivery_id=delivery_id)
    )


def _inbox(*conds: Any) -> Select[Any]:
    """The inbox's rows (a reply with its delivery, campaign and contact) where ``conds``."""
    return (
        select(
            _i.c.id,
            _i.c.received_at,
            _i.c.text,
            _i.c.is_opt_out,
            _i.c.sender_phone.label("phone"),
            _i.c.chat,
            _i.c.instance_id.label("sender"),
            _i.c.contact_id,
            _ct.c.name.label("contact_name"),
            _i.c.delivery_id,
            _d.c.campaign_id,
            _c.c.name.label("campaign_name"),
            _i.c.button_id,
            _i.c.row_id,
            _i.c.quoted_id,
            _i.c.handled_at,
        )
        .select_from(
            _i.outerjoin(_d, _d.c.id == _i.c.delivery_id)
            .outerjoin(_c, _c.c.id == _d.c.campaign_id)
            .outerjoin(_ct, _ct.c.id == _i.c.contact_id)
        )
        .where(*conds)
    )


def replies_page(
    conn: Connection,
    *,
    campaign_id: int | None,
    sender: str | None,
    opt_out: bool | None,
    limit: int,
    offset: int,
    handled: bool | None = None,
) -> tuple[int, list[RowMapping]]:
    """``(total, rows)``: incoming messages, newest first, filtered by the campaign of the
    delivery they answer, the sender instance that received them, opt-out and handled."""
    conds: list[Any] = []
    if campaign_id is not None:
        conds.append(_d.c.campaign_id == campaign_id)
    if sender is not None:
        conds.append(_i.c.instance_id == sender)
    if opt_out is not None:
        conds.append(_i.c.is_opt_out.is_(opt_out))
    if handled is not None:
        conds.append(_i.c.handled_at.is_not(None) if handled else _i.c.handled_at.is_(None))
    joined = _i.outerjoin(_d, _d.c.id == _i.c.delivery_id)
    total = conn.execute(select(func.count()).select_from(joined).where(*conds)).scalar_one()
    stmt = (
        _inbox(*conds).order_by(_i.c.received_at.desc(), _i.c.id.desc()).limit(limit).offset(offset)
    )
    return int(total), list(conn.execute(stmt).mappings())


def get_reply(conn: Connection, reply_id: int) -> RowMapping | None:
    """One reply as the inbox shows it (None: no such reply)."""
    return conn.execute(_inbox(_i.c.id == reply_id)).mappings().one_or_none()


def mark_handled(conn: Connection, reply_id: int, now: datetime) -> None:
    """Note that a reply was handled at ``now`` (the first time is kept)."""
    conn.execute(
        update(_i).where(_i.c.id == reply_id, _i.c.handled_at.is_(None)).values(handled_at=now)
    )


def reply_senders(conn: Connection) -> Sequence[str]:
    """The sender instances gatecast knows (the inbox's sender filter), by id."""
    stmt = select(tables.instances.c.instance_id).order_by(tables.instances.c.instance_id)
    return [str(v) for v in conn.execute(stmt).scalars()]


def received_since(conn: Connection, since: datetime) -> tuple[int, int]:
    """``(replies, opt-outs)``: incoming messages received from ``since`` on (one count
    over the ``received_at`` index)."""
    stmt = select(
        func.count().filter(_i.c.is_opt_out.is_(False)),
        func.count().filter(_i.c.is_opt_out.is_(True)),
    ).where(_i.c.received_at >= since)
    replies, opt_outs = conn.execute(stmt).one()
    return int(replies or 0), int(opt_outs or 0)


__all__ = [
    "get_reply",
    "link_inbound",
    "mark_handled",
    "received_since",
    "replies_page",
    "reply_senders",
]
