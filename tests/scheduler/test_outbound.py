"""Outbound webhooks: the outbox triggers (both dialects), the sender's order, retries,
give-up and disabling, against a real receiver over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, insert, select, update

from campaigns import webhook_endpoints as we
from scheduler.outbound import OutboundPolicy, OutboundSender
from scheduler.retention import EventPruner
from storage import outbox, tables
from storage.queries.outbound import claim_due
from tests.scheduler.helpers import BASE_SPEC, add_instances, add_running_campaign
from tests.webhook_receiver import Receiver, verify

_m = tables.webhook_messages
_d = tables.deliveries


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def _messages(engine: Engine) -> list[tuple[str, str, dict[str, object]]]:
    with engine.connect() as conn:
        rows = conn.execute(select(_m.c.event, _m.c.recipient, _m.c.data).order_by(_m.c.id))
        return [(e, r, json.loads(d)) for e, r, d in rows]


def _move(engine: Engine, cid: int, state: str, now: datetime) -> None:
    column = {"sent": "sent_at", "delivered": "delivered_at", "read": "read_at"}[state]
    with engine.begin() as conn:
        conn.execute(update(_d).where(_d.c.campaign_id == cid).values(state=state, **{column: now}))


def test_changes_write_one_message_per_subscriber_in_their_transaction(engine: Engine) -> None:
    now = datetime.now(UTC)
    add_instances(engine, ["s1"], now)
    cid = add_running_campaign(engine, BASE_SPEC, recipients=3, senders=["s1"], now=now)
    _move(engine, cid, "sent", now)
    assert _messages(engine) == [], "no subscription: nothing is written"

    we.create_endpoint(engine, "https://a.example/hooks", ["delivery.sent", "delivery.read"])
    we.create_endpoint(engine, "http://b.example/x", ["*"])
    _move(engine, cid, "delivered", now)  # only the '*' endpoint asked for this one
    with pytest.raises(RuntimeError), engine.begin() as conn:  # rolled back: nothing
        conn.execute(update(_d).where(_d.c.campaign_id == cid).values(state="read"))
        raise RuntimeError
    _move(engine, cid, "read", now)
    with engine.begin() as conn:
        conn.execute(update(tables.campaigns).values(state="paused", updated_at=now))
        conn.execute(update(tables.instances).values(state="disconnected", updated_at=now))
        conn.execute(update(tables.contacts).values(updated_at=now))  # no opt-out: nothing
    got = _messages(engine)
    assert [e for e, _, _ in got[:-2]] == ["delivery.delivered"] * 3 + ["delivery.read"] * 6 + [
        "campaign.state_changed"
    ]
    # one change, two events of the instance's (their order: the triggers')
    instance = {e: d for e, _, d in got[-2:]}
    _, recipient, data = got[0]
    assert recipient.startswith("contact:")
    assert data["campaign_id"] == cid and data["state"] == "delivered"
    assert data["to"] == "+15550000000"
    assert got[-3][2]["from"] == "running" and got[-3][2]["to"] == "paused"
    moved = {"instance_id": "s1", "label": "", "from": "connected", "to": "disconnected"}
    assert instance == {"instance.state_changed": moved, "instance.disconnected": moved}


def test_a_reply_event_names_the_delivery_and_campaign_it_answers(engine: Engine) -> None:
    now = datetime.now(UTC)
    add_instances(engine, ["s1"], now)
    cid = add_running_campaign(engine, BASE_SPEC, recipients=1, senders=["s1"], now=now)
    we.create_endpoint(engine, "https://a.example/hooks", ["reply.received"])
    with engine.begin() as conn:
        did = conn.execute(select(_d.c.id).where(_d.c.campaign_id == cid)).scalar_one()
        replies = [("in1", "+15550000000", "yes", did), ("in2", "+15559999999", "who?", None)]
        conn.execute(
            insert(tables.inbound_messages),
            [
                {
                    "message_id": m,
                    "chat": f"{phone[1:]}@c.us",
                    "sender_phone": phone,
                    "text": text,
                    "received_at": now,
                    "delivery_id": delivery,
                }
                for m, phone, text, delivery in replies
            ],
        )
    with engine.begin() as conn:
        due = claim_due(
            conn, now=now, hold_until=now + timedelta(minutes=1), limit=10, new_id=we.new_message_id
        )
    got = [json.loads(d.data) for d in due]
    assert [(d["text"], d["delivery_id"], d["campaign_id"]) for d in got] == [
        ("yes", did, cid),
        ("who?", None, None),  # it answers nothing gatecast sent
    ]


def test_triggers_exist_only_while_someone_subscribes(engine: Engine) -> None:
    def present() -> set[str]:
        with engine.connect() as conn:
            return outbox.present(conn)

    assert present() == set()
    first = we.create_endpoint(engine, "https://a.example/", ["delivery.read", "reply.received"])
    assert present() == {"tr_deliveries_outbox", "tr_inbound_messages_outbox"}
    second = we.create_endpoint(engine, "https://b.example/", ["*"])
    assert len(present()) == len(outbox.SOURCES)
    assert we.delete_endpoint(engine, second.endpoint.id)
    assert present() == {"tr_deliveries_outbox", "tr_inbound_messages_outbox"}
    assert we.delete_endpoint(engine, first.endpoint.id)
    assert present() == set()


def test_endpoint_input_is_checked() -> None:
    for url, words in [
        ("ftp://x.example/", "http://"),
        ("file:///etc/passwd", "http://"),
        ("https://user:pw@x.example/", "user name"),
        ("https:///path", "host"),
        ("", "address"),
    ]:
        with pytest.raises(we.EndpointError) as err:
            we.check_url(url)
        assert err.value.field == "url" and words in err.value.message
    with pytest.raises(we.EndpointError) as err:
        we.check_events(["delivery.sent", "delivery.bounced"])
    assert "'delivery.bounced'" in err.value.message and "reply.received" in err.value.message
    assert we.check_events(["delivery.sent", "*"]) == ["*"]
    secret = we.new_secret()
    assert secret.startswith("whsec_") and len(secret) == 6 + 32


def test_signature_is_what_a_receiver_verifies() -> None:
    secret = we.new_secret()
    stamp = int(datetime.now(UTC).timestamp())
    body = b'{"type":"x"}'
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(stamp),
        "webhook-signature": we.sign(secret, "msg_1", stamp, body),
    }
    assert verify(secret, headers, body)
    assert not verify(secret, headers, body + b" ")
    assert not verify(we.new_secret(), headers, body)
    assert not verify(secret, {**headers, "webhook-timestamp": str(stamp - 301)}, body)


class _Clock:
    def __init__(self) -> None:
        self.at = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.at


def test_sender_delivers_in_order_retries_and_logs(engine: Engine, receiver: Receiver) -> None:
    now = datetime.now(UTC)
    add_instances(engine, ["s1"], now)
    created = we.create_endpoint(engine, receiver.url, ["*"])
    receiver.secret = created.secret
    cid = add_running_campaign(engine, BASE_SPEC, recipients=2, senders=["s1"], now=now)
    clock = _Clock()
    sender = OutboundSender(engine, policy=OutboundPolicy(timeout_seconds=5), now=clock)
    try:
        receiver.status = 503
        _move(engine, cid, "sent", now)
        assert sender.run_once() == 1  # the first failure holds the endpoint's others back
        _move(engine, cid, "delivered", now)
        assert sender.run_once() == 0  # backing off
        receiver.status = 200
        clock.at += timedelta(seconds=2)
        while sender.run_once():
            pass
    finally:
        sender.close()
    assert receiver.bad_signatures == 0
    by_target: dict[str, list[str]] = {}
    for event in receiver.events:
        by_target.setdefault(event["data"]["to"], []).append(event["type"])
    assert by_target == {
        "+15550000000": ["delivery.sent", "delivery.delivered"],
        "+15550000001": ["delivery.sent", "delivery.delivered"],
    }
    assert receiver.events[0]["timestamp"].endswith("Z")
    log = we.attempts_page(engine, created.endpoint.id, limit=10)
    assert log is not None and log.total == 5
    first = log.items[-1]
    assert (first.attempt, first.status_code, first.outcome) == (1, 503, "retrying")
    assert first.error == "answered HTTP 503"
    shown = we.get_endpoint(engine, created.endpoint.id)
    assert shown is not None and shown.messages == {"pending": 0, "delivered": 4, "failed": 0}
    assert shown.consecutive_failures == 0


def test_a_long_failure_run_disables_and_replay_brings_everything(
    engine: Engine, receiver: Receiver
) -> None:
    now = datetime.now(UTC)
    add_instances(engine, ["s1"], now)
    created = we.create_endpoint(engine, receiver.url, ["delivery.sent"])
    receiver.secret = created.secret
    eid = created.endpoint.id
    cid = add_running_campaign(engine, BASE_SPEC, recipients=1, senders=["s1"], now=now)
    receiver.stop()  # refuses connections
    clock = _Clock()
    sender = OutboundSender(engine, policy=OutboundPolicy(timeout_seconds=2), now=clock)
    try:
        _move(engine, cid, "sent", now)
        for _ in range(40):  # a day and more of failures, at the backoff's pace
            sender.run_once()
            clock.at += timedelta(hours=1)
        shown = we.get_endpoint(engine, eid)
        assert shown is not None and not shown.enabled
        assert shown.disabled_reason and "24 h" in shown.disabled_reason
        assert shown.messages == {"pending": 1, "delivered": 0, "failed": 0}
        # disabled: new changes are not written for it
        with engine.begin() as conn:
            conn.execute(update(_d).values(state="queued"))
        _move(engine, cid, "sent", now)
        shown = we.get_endpoint(engine, eid)
        assert shown is not None and shown.messages == {"pending": 1, "delivered": 0, "failed": 0}
        log = we.attempts_page(engine, eid, limit=100)
        assert log is not None and log.items[0].error == "could not connect"

        receiver.start()
        assert we.replay(engine, eid) == 0  # nothing failed yet: enabled again only
        clock.at = datetime.now(UTC)
        while sender.run_once():
            pass
    finally:
        sender.close()
    assert [e["type"] for e in receiver.events] == ["delivery.sent"]
    shown = we.get_endpoint(engine, eid)
    assert shown is not None and shown.enabled
    assert shown.messages == {"pending": 0, "delivered": 1, "failed": 0}


def test_a_message_is_given_up_after_three_days(engine: Engine, receiver: Receiver) -> None:
    now = datetime.now(UTC)
    add_instances(engine, ["s1"], now)
    created = we.create_endpoint(engine, receiver.url, ["delivery.sent"])
    receiver.secret = created.secret
    receiver.status = 500
    cid = add_running_campaign(engine, BASE_SPEC, recipients=1, senders=["s1"], now=now)
    clock = _Clock()
    policy = OutboundPolicy(timeout_seconds=2, disable_after=timedelta(days=30))
    sender = OutboundSender(engine, policy=policy, now=clock)
    try:
        _move(engine, cid, "sent", now)
        for _ in range(100):
            sender.run_once()
            clock.at += timedelta(hours=1)
    finally:
        sender.close()
    shown = we.get_endpoint(engine, created.endpoint.id)
    assert shown is not None and shown.messages == {"pending": 0, "delivered": 0, "failed": 1}
    assert shown.enabled
    assert we.replay(engine, created.endpoint.id) == 1
    with engine.connect() as conn:
        assert conn.execute(select(_m.c.state)).scalar_one() == "pending"


def test_retention_prunes_settled_history_and_keeps_what_waits(
    engine: Engine, receiver: Receiver
) -> None:
    now = datetime.now(UTC)
    add_instances(engine, ["s1"], now)
    created = we.create_endpoint(engine, receiver.url, ["delivery.sent", "delivery.read"])
    receiver.secret = created.secret
    cid = add_running_campaign(engine, BASE_SPEC, recipients=2, senders=["s1"], now=now)
    _move(engine, cid, "sent", now)
    sender = OutboundSender(engine, policy=OutboundPolicy(timeout_seconds=5))
    try:
        assert sender.run_once() == 2
    finally:
        sender.close()
    _move(engine, cid, "read", now)  # two more, never sent
    pruner = EventPruner(engine, timedelta(days=30))
    assert pruner.run_once(datetime.now(UTC) + timedelta(days=1)) == 0  # too recent
    assert pruner.run_once(datetime.now(UTC) + timedelta(days=31)) == 4  # 2 attempts, 2 sent
    shown = we.get_endpoint(engine, created.endpoint.id)
    assert shown is not None and shown.messages == {"pending": 2, "delivered": 0, "failed": 0}
    log = we.attempts_page(engine, created.endpoint.id, limit=10)
    assert log is not None and log.total == 0
