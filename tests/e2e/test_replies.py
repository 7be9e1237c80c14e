"""Replies reach their deliveries through the real webhook (sandbox reply_rate = 1).

The gateway stamps an incoming message in whole seconds of its own clock, so its time
is often before the ``sent_at`` gatecast recorded (with microseconds) for the message
being answered; the reply must still land on that delivery.
"""

from __future__ import annotations

import random

import pytest
from sqlalchemy import Engine, select

from gateway.sandbox import SandboxConfig
from scheduler.clock import SystemClock
from scheduler.dispatcher import Dispatcher
from storage import tables
from storage.types import utcnow
from tests.e2e.live import live_gateway
from tests.scheduler.helpers import add_running_campaign, spec

RECIPIENTS = 12


@pytest.mark.parametrize("dialect", ["spec", "reference"])
def test_every_reply_is_attached_to_its_delivery(engine: Engine, dialect: str) -> None:
    cfg = SandboxConfig(
        dialect=dialect,  # type: ignore[arg-type]
        seed=5,
        auto_link=True,
        reply_rate=1.0,
        status_delays=(0.01, 0.02, 0.03),
    )
    with live_gateway(engine, cfg) as live:
        sb, iid = live.sandbox, live.instance_ids[0]
        cid = add_running_campaign(
            engine, spec(), recipients=RECIPIENTS, senders=[iid], now=utcnow()
        )
        with Dispatcher(
            engine,
            live.client,
            clock=SystemClock(),
            workers=2,
            batch_size=4,
            rng=random.Random(1),
            poll_seconds=0.05,
        ) as d:
            d.run(until_done=True)
            live.settle(d.sweep_pending_events)
        truth = {m["message_id"]: m for m in sb.messages()}

    dt = tables.deliveries
    with engine.connect() as conn:
        rows = conn.execute(
            select(dt.c.message_id, dt.c.sent_at, dt.c.replied_at, dt.c.reply_text).where(
                dt.c.campaign_id == cid
            )
        ).all()
    assert len(rows) == RECIPIENTS
    replied = {m["message_id"]: m["replied"] for m in truth.values()}
    assert all(replied.values()), "the sandbox did not reply to every message"
    got = {r.message_id: r.reply_text for r in rows}
    assert got == replied
    assert all(r.replied_at is not None for r in rows)
