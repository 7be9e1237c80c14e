"""Replies reach their deliveries through the real webhook (sandbox reply_rate = 1).

The gateway stamps an incoming message in whole seconds of its own clock, so its time
is often before the ``sent_at`` gatecast recorded (with microseconds) for the message
being answered; the reply must still land on that delivery.
"""

from __future__ import annotations

import random
import time

import pytest
from pydantic import SecretStr
from sqlalchemy import Engine, select

from gatecast.settings import Settings
from gatecast.web.app import create_app
from gatecast.web.context import AppContext
from gateway.client import GatewayClient
from gateway.sandbox import SandboxConfig, run_sandbox_in_thread
from scheduler.clock import SystemClock
from scheduler.dispatcher import Dispatcher
from scheduler.service import AsgiServer
from storage.models import Delivery
from storage.types import utcnow
from tests.scheduler.helpers import add_instances, add_running_campaign, spec

RECIPIENTS = 12
SECRET = "reply-test-secret-0123456789"


@pytest.mark.parametrize("dialect", ["spec", "reference"])
def test_every_reply_is_attached_to_its_delivery(engine: Engine, dialect: str) -> None:
    cfg = SandboxConfig(
        dialect=dialect,  # type: ignore[arg-type]
        seed=5,
        auto_link=True,
        reply_rate=1.0,
        status_delays=(0.01, 0.02, 0.03),
    )
    settings = Settings(
        database_url="sqlite:///unused.db",
        webhook_secret=SecretStr(SECRET),
        api_key=SecretStr("k" * 32),
    )
    ctx = AppContext(settings=settings, engine=engine, api_key=SecretStr("k" * 32))
    with (
        run_sandbox_in_thread(cfg) as sb,
        AsgiServer(create_app(ctx), log_level="error") as server,
    ):
        iid = sb.create_linked_instance()
        with GatewayClient(sb.url, sb.access_token) as gw:
            gw.set_webhook(iid, f"{server.url}/webhooks/gateway/{SECRET}")
        now = utcnow()
        add_instances(engine, [iid], now)
        cid = add_running_campaign(engine, spec(), recipients=RECIPIENTS, senders=[iid], now=now)
        with Dispatcher(
            engine,
            lambda: GatewayClient(sb.url, sb.access_token, timeout=30.0),
            clock=SystemClock(),
            workers=2,
            batch_size=4,
            rng=random.Random(1),
            poll_seconds=0.05,
        ) as d:
            d.run(until_done=True)
            assert sb.wait_idle(30)
            time.sleep(0.5)  # the receiver's last group commit
            d.sweep_pending_events()
        truth = {m["message_id"]: m for m in sb.messages()}

    dt = Delivery.__table__  # type: ignore[attr-defined]
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
