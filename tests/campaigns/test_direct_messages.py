"""Direct messages (``POST /api/v1/messages``'s rules) on both databases: a hidden
one-recipient campaign whose start makes its one row, skipped for an opted-out contact;
refusals store nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, insert, select, update

from campaigns.campaign_file import CampaignFileError
from campaigns.direct_messages import MessageError, get_message, send_message
from campaigns.service import list_campaigns
from scheduler.starts import start_campaign
from storage import tables
from storage.queries.events import reply_target
from tests.rows import campaign_row
from tests.scheduler.helpers import BASE_SPEC, add_running_campaign

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
TEXT = {"type": "text", "text": "Your order has shipped"}


def _link(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(tables.instances).values(
                instance_id="AAA", state="connected", created_at=NOW, updated_at=NOW
            )
        )


def _send(engine: Engine, to: str, **more: object) -> int:
    return send_message(engine, to=to, message=TEXT, region="US", now=NOW, **more)  # type: ignore[arg-type]


def test_a_message_is_a_hidden_campaign_of_one_recipient(engine: Engine) -> None:
    _link(engine)
    mid = _send(engine, "+12025550143", metadata={"ticket": "T-1"})
    queued = get_message(engine, mid)
    assert queued is not None
    assert (queued.state, queued.to, queued.metadata) == (
        "queued",
        "+12025550143",
        {"ticket": "T-1"},
    )
    assert start_campaign(engine, mid, now=NOW).outcome == "started"
    started = get_message(engine, mid)
    assert started is not None and started.state == "queued" and started.delivery_id
    assert started.contact_id is not None  # the contact was created
    assert list_campaigns(engine).total == 0
    assert get_message(engine, mid + 1) is None


def test_an_opted_out_contact_s_message_is_skipped_with_the_reason(engine: Engine) -> None:
    _link(engine)
    first = _send(engine, "+12025550144")
    with engine.begin() as conn:
        conn.execute(update(tables.contacts).values(opted_out=True))
    second = _send(engine, "+12025550144")
    start_campaign(engine, second, now=NOW)
    skipped = get_message(engine, second)
    assert skipped is not None and (skipped.state, skipped.reason) == ("skipped", "opted out")
    assert first != second


def test_a_message_that_cannot_start_says_why(engine: Engine) -> None:
    mid = _send(engine, "+12025550146")
    start_campaign(engine, mid, now=NOW)  # no sender linked
    failed = get_message(engine, mid)
    assert failed is not None and failed.state == "failed", failed
    assert failed.reason is not None and "link a sender" in failed.reason


def test_refusals_name_the_field_and_store_nothing(engine: Engine) -> None:
    with pytest.raises(MessageError) as bad_phone:
        _send(engine, "call me")
    assert bad_phone.value.field == "to"
    with pytest.raises(MessageError) as bad_meta:
        _send(engine, "+12025550145", metadata=["not", "an", "object"])
    assert bad_meta.value.field == "metadata"
    with pytest.raises(MessageError) as big:
        _send(engine, "+12025550145", metadata={"x": "y" * 5000})
    assert "4096" in str(big.value)
    with pytest.raises(MessageError) as unrenderable:
        send_message(
            engine, to="+12025550145", message={"type": "text", "text": "{{ city }}"}, region="US"
        )
    assert unrenderable.value.field == "message"
    with pytest.raises(CampaignFileError):
        _send(engine, "+12025550145", pace={"daily_cap": -1})
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(tables.campaigns)).scalar() == 0


def test_messages_neither_crowd_out_nor_miss_the_reply_window(engine: Engine) -> None:
    """A reply matches a campaign's delivery however many messages went out since, and a
    message's own delivery however many campaigns (the window counts campaigns only)."""
    _link(engine)
    phone, window = "+12025550150", 5
    bulk = add_running_campaign(
        engine, BASE_SPEC, recipients=1, senders=["AAA"], now=NOW, phone_base=12025550150
    )
    d = tables.deliveries
    with engine.begin() as conn:
        conn.execute(update(d).values(state="sent", sent_at=NOW))
        bulk_row = conn.execute(select(d.c.id).where(d.c.campaign_id == bulk)).scalar_one()
        for n in range(window + 1):
            campaign_row(conn, NOW, name=f"m{n}", direct=True)
    later = NOW + timedelta(minutes=2)
    with engine.connect() as conn:
        assert reply_target(conn, phone, latest=later, campaigns=window) == (bulk_row, NOW)
    mid = _send(engine, phone)
    start_campaign(engine, mid, now=NOW)
    with engine.begin() as conn:
        conn.execute(update(d).where(d.c.campaign_id == mid).values(state="sent", sent_at=later))
        for n in range(window + 1):
            campaign_row(conn, NOW, name=f"c{n}")
    sent = get_message(engine, mid)
    assert sent is not None and sent.delivery_id is not None
    with engine.connect() as conn:
        assert reply_target(conn, phone, latest=later, campaigns=window) == (
            sent.delivery_id,
            later,
        )
