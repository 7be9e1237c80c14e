"""Automatic reconnection: the leader heals dropped instances, with backoff, over real HTTP.

The end-to-end case runs the whole service (dispatcher, leader, reconnector) against a
sandbox whose connections drop every few sends; the webhook receiver records the drops.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, select, update

from campaigns import lifecycle
from campaigns.delivery_lifecycle import LOGGED_OUT_PAUSE
from gateway.client import GatewayClient
from gateway.messages import Text
from gateway.outcomes import OutcomeKind
from gateway.sandbox import Sandbox, SandboxConfig, run_sandbox_in_thread
from gateway.sandbox.records import CONNECTED, DISCONNECTED, LOGGED_OUT
from scheduler.reconnect import Reconnector
from scheduler.service import Service, ServiceOptions
from storage import tables
from storage.types import utcnow
from tests.e2e.live import live_gateway
from tests.scheduler.helpers import add_instances, add_running_campaign, spec

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
_i = tables.instances


class CountingClient(GatewayClient):
    calls: list[str] = []  # noqa: RUF012 (shared across the clients a factory makes)

    def reconnect(self, instance_id: str) -> None:
        CountingClient.calls.append(instance_id)
        super().reconnect(instance_id)


def _mark(engine: Engine, instance_id: str, state: str, paused: str | None) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(_i)
            .where(_i.c.instance_id == instance_id)
            .values(state=state, paused_reason=paused)
        )


def _row(engine: Engine, instance_id: str) -> tuple[str, str | None]:
    with engine.connect() as conn:
        row = conn.execute(
            select(_i.c.state, _i.c.paused_reason).where(_i.c.instance_id == instance_id)
        ).one()
    return str(row[0]), row[1]


def _factory(sb: Sandbox) -> CountingClient:
    return CountingClient(sb.url, sb.access_token, timeout=30.0)


def test_dropped_instance_is_reconnected_and_its_pause_lifted(engine: Engine) -> None:
    with run_sandbox_in_thread(SandboxConfig(auto_link=True)) as sb:
        dropped, healthy = sb.create_linked_instance(), sb.create_linked_instance()
        add_instances(engine, [dropped, healthy], T0)
        sb.state.set_state(dropped, DISCONNECTED, "connection lost")
        _mark(engine, dropped, "disconnected", "relogin_required: This WhatsApp account ...")
        CountingClient.calls = []
        healer = Reconnector(engine, lambda: _factory(sb))
        assert healer.run_once(T0) == [dropped]
        assert CountingClient.calls == [dropped]  # the healthy one is left alone
        assert sb.state.instances[dropped].state == CONNECTED
        assert _row(engine, dropped)[1] is None  # the pause is lifted


def test_reconnects_back_off_while_the_gateway_cannot_answer(engine: Engine) -> None:
    iid = "DOWN0000000001"
    add_instances(engine, [iid], T0)
    _mark(engine, iid, "disconnected", "relogin_required: relogin")
    CountingClient.calls = []
    # nothing listens on port 9: every reconnect fails before the gateway answers
    healer = Reconnector(
        engine,
        lambda: CountingClient("http://127.0.0.1:9", "tok", timeout=2.0),
        backoff=(30.0, 60.0),
    )
    for seconds in (0, 10, 29, 31, 60, 90, 92, 151, 152):
        assert healer.run_once(T0 + timedelta(seconds=seconds)) == []
    # attempts at 0; 30 s later (at 31); then 60 s apart (due 91: at 92; due 152: at 152)
    assert len(CountingClient.calls) == 4
    assert _row(engine, iid) == ("disconnected", "relogin_required: relogin")
    # once the state says connected again, the schedule is forgotten
    _mark(engine, iid, "connected", None)
    assert healer.run_once(T0 + timedelta(seconds=500)) == []
    assert len(CountingClient.calls) == 4


def test_a_reconnect_refused_as_relogin_proves_a_logout(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    with run_sandbox_in_thread(SandboxConfig(auto_link=True)) as sb:
        iid = sb.create_linked_instance()
        add_instances(engine, [iid], T0)
        # the phone logged out; a send was refused as "relogin required" (a drop or a logout)
        sb.state.set_state(iid, LOGGED_OUT, "logged out from the phone")
        _mark(engine, iid, "logged_out", "relogin_required: relogin")
        CountingClient.calls = []
        healer = Reconnector(engine, lambda: _factory(sb), backoff=(1.0,))
        assert healer.run_once(T0) == []
        # the gateway's refusal settles it: logged out, paused until its QR code is scanned
        assert _row(engine, iid) == ("logged_out", LOGGED_OUT_PAUSE)
        with engine.connect() as conn:
            logouts = conn.execute(
                select(_i.c.signal_logouts).where(_i.c.instance_id == iid)
            ).scalar()
        assert logouts == 1  # the health score's logout, counted once it is proven
        for seconds in (5, 60, 600):  # and never tried again
            assert healer.run_once(T0 + timedelta(seconds=seconds)) == []
        assert CountingClient.calls == [iid]
        assert "scan its QR code again" in caplog.text


def test_a_send_refused_as_relogin_on_a_dropped_connection_is_healed(engine: Engine) -> None:
    with run_sandbox_in_thread(SandboxConfig(auto_link=True)) as sb:
        iid = sb.create_linked_instance()
        add_instances(engine, [iid], T0)
        # the connection dropped, no event told us: a send was refused as "relogin required"
        sb.state.set_state(iid, DISCONNECTED, "connection lost")
        _mark(engine, iid, "logged_out", "relogin_required: relogin")
        healer = Reconnector(engine, lambda: _factory(sb), backoff=(1.0,))
        assert healer.run_once(T0) == [iid]
        assert sb.state.instances[iid].state == CONNECTED
        assert _row(engine, iid) == ("connected", None)


def test_an_invalidated_id_becomes_gone_and_is_not_tried_again(engine: Engine) -> None:
    with run_sandbox_in_thread(SandboxConfig(auto_link=True)) as sb:
        iid = sb.create_linked_instance()
        add_instances(engine, [iid], T0)
        with GatewayClient(sb.url, sb.access_token, timeout=10) as gw:
            gw.reset_instance(iid)  # the old id no longer exists at the gateway
        _mark(engine, iid, "disconnected", None)
        CountingClient.calls = []
        healer = Reconnector(engine, lambda: _factory(sb), backoff=(1.0,))
        assert healer.run_once(T0) == []
        assert _row(engine, iid) == ("gone", "gone: the gateway says its id is invalid")
        assert healer.run_once(T0 + timedelta(seconds=5)) == []
        assert CountingClient.calls == [iid]


def test_sandbox_drops_the_connection_after_n_sends() -> None:
    cfg = SandboxConfig(auto_link=True, disconnect_after_sends=2, status_delays=(3600.0,) * 3)
    with run_sandbox_in_thread(cfg) as sb, GatewayClient(sb.url, sb.access_token) as gw:
        iid = sb.create_linked_instance()
        kinds = [gw.send(iid, f"1555123000{i}", Text("hi")).kind for i in range(3)]
        assert kinds == [OutcomeKind.ACCEPTED, OutcomeKind.ACCEPTED, OutcomeKind.INSTANCE]
        assert sb.state.instances[iid].state == DISCONNECTED
        gw.reconnect(iid)
        assert gw.send(iid, "15551230009", Text("hi")).kind is OutcomeKind.ACCEPTED
        assert len(sb.messages()) == 3


def test_service_heals_drops_and_the_campaign_completes_once_per_recipient(
    engine: Engine,
) -> None:
    recipients = 60
    cfg = SandboxConfig(auto_link=True, disconnect_after_sends=25, status_delays=(0.02, 0.05, 0.1))
    with live_gateway(engine, cfg) as live:
        sb, iid = live.sandbox, live.instance_ids[0]
        now = utcnow()
        cid = add_running_campaign(engine, spec(), recipients=recipients, senders=[iid], now=now)
        options = ServiceOptions(
            workers=2,
            batch_size=10,
            poll_seconds=0.05,
            sync_seconds=0.2,
            leader_ttl_seconds=3.0,
            reconnect_check_seconds=0.1,
            reconnect_backoff=(0.2,),
        )

        c = tables.campaigns
        with Service(engine, live.client, options=options, instance_client=live.client):
            deadline = time.monotonic() + 60
            state = None
            while time.monotonic() < deadline:
                with engine.connect() as conn:
                    state = conn.execute(select(c.c.state).where(c.c.id == cid)).scalar()
                if state == lifecycle.COMPLETED:
                    break
                time.sleep(0.1)
        assert state == lifecycle.COMPLETED
        per_recipient = Counter(m["to"] for m in sb.messages())
        drops = [
            e
            for e in sb.state.events
            if e["event"] == "connection" and b"connection lost" in e["body"]
        ]
    assert len(per_recipient) == recipients
    assert max(per_recipient.values()) == 1, "a recipient got two messages"
    assert len(drops) >= 2, "the connection never dropped"
