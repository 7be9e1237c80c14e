"""The replies inbox: every incoming message, newest first, with the campaign whose
message it answers (the reply window's match: ``campaigns.gateway_events``), filtered by
campaign, by the sender instance that received it, and by opt-out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine

from campaigns.paging import Page
from storage.queries import replies as rq


@dataclass(frozen=True)
class Reply:
    """One incoming message as the inbox shows it."""

    id: int
    received_at: datetime
    text: str
    is_opt_out: bool
    #: the person's number (None for a group's message)
    phone: str | None
    chat: str
    #: the sender instance that received it
    sender: str | None
    contact_id: int | None
    contact_name: str | None
    #: the delivery, and so the campaign, it answers (None: no campaign's message)
    delivery_id: int | None
    campaign_id: int | None
    campaign_name: str | None
    #: the id of the button or list row tapped, and of the message it quotes (None: none)
    button_id: str | None = None
    row_id: str | None = None
    quoted_id: str | None = None


def replies_page(
    engine: Engine,
    *,
    campaign_id: int | None = None,
    sender: str | None = None,
    opt_out: bool | None = None,
    limit: int,
    offset: int = 0,
) -> Page[Reply]:
    """Incoming messages newest first, filtered (see the module); one page."""
    with engine.connect() as conn:
        total, rows = rq.replies_page(
            conn,
            campaign_id=campaign_id,
            sender=sender,
            opt_out=opt_out,
            limit=limit,
            offset=offset,
        )
    return Page([Reply(**r) for r in rows], total)


def reply_senders(engine: Engine) -> list[str]:
    """The sender instances gatecast knows (the inbox's sender filter)."""
    with engine.connect() as conn:
        return list(rq.reply_senders(conn))


__all__ = ["Reply", "replies_page", "reply_senders"]
