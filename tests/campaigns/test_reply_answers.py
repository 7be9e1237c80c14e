"""The inbox's answers (issue 32, item 4) on both databases: an answer is a direct message
to the person who wrote, through the sender that received it, and marks the reply
handled; the inbox filters by handled; a group's message and an unknown reply are
refused with nothing stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, insert, select, update

from campaigns.direct_messages import MessageError, get_message
from campaigns.replies import ReplyNotFound, answer_reply, mark_handled, replies_page
from scheduler.starts import start_campaign
from storage import tables

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
PHONE = "+12025550181"


def _setup(engine: Engine) -> tuple[int, int]:
    """Two senders, and a reply from PHONE received by the second and one in a group."""
    with engine.begin() as conn:
        for iid in ("AAA", "BBB"):
            conn.execute(
                insert(tables.instances).values(
                    instance_id=iid, state="connected", created_at=NOW, updated_at=NOW
                )
            )
        conn.execute(
            insert(tables.inbound_messages),
            [
                {
                    "message_id": "in-1",
                    "instance_id": "BBB",
                    "chat": f"{PHONE[1:]}@c.us",
                    "sender_phone": PHONE,
                    "text": "Where is my order?",
                    "received_at": NOW,
                },
                {
                    "message_id": "in-2",
                    "instance_id": "AAA",
                    "chat": "1203630@g.us",
                    "sender_phone": None,
                    "text": "hello all",
                    "received_at": NOW + timedelta(seconds=1),
                },
            ],
        )
        im = tables.inbound_messages
        ids = dict(conn.execute(select(im.c.message_id, im.c.id)).all())
    return ids["in-1"], ids["in-2"]


def _unhandled(engine: Engine) -> list[str]:
    return [r.text for r in replies_page(engine, handled=False, limit=10).items]


def test_an_answer_goes_to_the_writer_through_the_sender_that_received_it(
    engine: Engine,
) -> None:
    person, _ = _setup(engine)
    assert _unhandled(engine) == ["hello all", "Where is my order?"]
    mid = answer_reply(
        engine, person, message={"type": "text", "text": "It ships today"}, region="US", now=NOW
    )
    start_campaign(engine, mid, now=NOW)
    answer = get_message(engine, mid)
    assert answer is not None and answer.to == PHONE and answer.state == "queued"
    with engine.connect() as conn:
        senders = conn.execute(
            select(tables.deliveries.c.sender).where(tables.deliveries.c.campaign_id == mid)
        ).all()
    assert senders == [("BBB",)]
    assert _unhandled(engine) == ["hello all"]
    handled = replies_page(engine, handled=True, limit=10).items
    assert [(r.id, r.handled_at) for r in handled] == [(person, NOW)]


def test_an_answer_goes_through_another_sender_when_that_one_is_gone(engine: Engine) -> None:
    person, _ = _setup(engine)
    with engine.begin() as conn:
        i = tables.instances
        conn.execute(update(i).where(i.c.instance_id == "BBB").values(state="gone"))
    mid = answer_reply(engine, person, message={"type": "text", "text": "Hi"}, region="US", now=NOW)
    start_campaign(engine, mid, now=NOW)
    answer = get_message(engine, mid)
    assert answer is not None and answer.sender == "AAA", answer


def test_marking_handled_keeps_the_first_time(engine: Engine) -> None:
    _, group = _setup(engine)
    assert mark_handled(engine, group, NOW).handled_at == NOW
    assert mark_handled(engine, group, NOW + timedelta(hours=1)).handled_at == NOW
    assert _unhandled(engine) == ["Where is my order?"]


def test_a_group_s_message_or_an_unknown_reply_is_refused(engine: Engine) -> None:
    person, group = _setup(engine)
    text = {"type": "text", "text": "Hi"}
    with pytest.raises(MessageError) as in_group:
        answer_reply(engine, group, message=text, region="US", now=NOW)
    assert in_group.value.field == "reply"
    with pytest.raises(ReplyNotFound):
        answer_reply(engine, group + person + 10, message=text, region="US", now=NOW)
    with pytest.raises(MessageError) as unrenderable:
        answer_reply(engine, person, message={"type": "text", "text": "{{ city }}"}, region="US")
    assert unrenderable.value.field == "message"
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(tables.campaigns)).scalar() == 0
    assert len(_unhandled(engine)) == 2
