"""The replies inbox: every incoming message, newest first, with the campaign whose
message it answers (the reply window's match: ``campaigns.gateway_events``), filtered by
campaign, by the sender instance that received it, by opt-out and by handled; and the
inbox's answers (docs/architecture.md, decision "inbox answers"): an answer is a direct
message (``campaigns.direct_messages``, the paced, opt-out-aware path of ``POST
/api/v1/messages``) to the person who wrote, through the sender that received it, and
marks the reply handled."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from campaigns.direct_messages import MessageError, answering_senders, send_message
from campaigns.paging import Page
from campaigns.reply_rules import pause_for
from campaigns.variety import DEFAULT_MAX_IDENTICAL_IN_ROW
from storage.queries import replies as rq
from storage.types import utcnow


class ReplyNotFound(LookupError):
    """No incoming message has this id."""

    def __init__(self, reply_id: int) -> None:
        super().__init__(f"no reply {reply_id}")
        self.reply_id = reply_id


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
    #: when it was answered or marked handled (None: still to handle)
    handled_at: datetime | None = None


def replies_page(
    engine: Engine,
    *,
    campaign_id: int | None = None,
    sender: str | None = None,
    opt_out: bool | None = None,
    handled: bool | None = None,
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
            handled=handled,
            limit=limit,
            offset=offset,
        )
    return Page([Reply(**r) for r in rows], total)


def get_reply(engine: Engine, reply_id: int) -> Reply:
    """One incoming message as the inbox shows it; :class:`ReplyNotFound` if none."""
    with engine.connect() as conn:
        row = rq.get_reply(conn, reply_id)
    if row is None:
        raise ReplyNotFound(reply_id)
    return Reply(**row)


def mark_handled(engine: Engine, reply_id: int, now: datetime | None = None) -> Reply:
    """Mark a reply handled (a second time changes nothing); the reply."""
    get_reply(engine, reply_id)
    with engine.begin() as conn:
        rq.mark_handled(conn, reply_id, now or utcnow())
    return get_reply(engine, reply_id)


def answer_reply(
    engine: Engine,
    reply_id: int,
    *,
    message: Mapping[str, Any],
    region: str,
    metadata: Any = None,
    now: datetime | None = None,
    default_cooldown_hours: float = 0.0,
    default_max_identical: int = DEFAULT_MAX_IDENTICAL_IN_ROW,
) -> int:
    """Answer a reply: ``message`` as a direct message to the person who wrote, through
    the sender that received it (any usable sender when that one is gone or removed),
    then mark the reply handled and pause the reply rules for that person
    (:func:`campaigns.reply_rules.pause_for`); the message's id. :class:`ReplyNotFound`, or
    :class:`~campaigns.direct_messages.MessageError` (a group's message has no one to
    answer; the message's own refusals) with nothing stored."""
    now = now or utcnow()
    reply = get_reply(engine, reply_id)
    if reply.phone is None:
        raise MessageError("a group's message cannot be answered here", "reply")
    with engine.connect() as conn:
        senders = answering_senders(conn, reply.sender)
    message_id = send_message(
        engine,
        to=reply.phone,
        message=message,
        region=region,
        instances=senders,
        metadata=metadata,
        now=now,
        default_cooldown_hours=default_cooldown_hours,
        default_max_identical=default_max_identical,
    )
    with engine.begin() as conn:
        rq.mark_handled(conn, reply_id, now)
        pause_for(conn, reply.phone, now)  # a person took over: the reply rules keep quiet
    return message_id


def reply_senders(engine: Engine) -> list[str]:
    """The sender instances gatecast knows (the inbox's sender filter)."""
    with engine.connect() as conn:
        return list(rq.reply_senders(conn))


__all__ = [
    "Reply",
    "ReplyNotFound",
    "answer_reply",
    "get_reply",
    "mark_handled",
    "replies_page",
    "reply_senders",
]
