"""Instance routes against the real sandbox over HTTP: create, QR, scan, operations."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from storage import tables
from tests.qr import decode_qr
from tests.web.conftest import API_KEY, LiveApp, gateway_factory_for


@contextmanager
def _signed_in(live: LiveApp) -> Iterator[httpx.Client]:
    with live.client(key=None, follow_redirects=False) as browser:
        res = browser.post("/login", data={"api_key": API_KEY, "next": "/"})
        assert res.status_code == 303
        yield browser


def test_link_an_instance_by_its_qr(
    make_live: Callable[..., LiveApp], engine: Engine, sandbox: Any
) -> None:
    live = make_live(engine, gateway_factory=gateway_factory_for(sandbox))
    with live.client() as api:
        res = api.post("/api/v1/instances", json={"label": "shop phone"})
        assert res.status_code == 201, res.text
        inst = res.json()
        iid = inst["instance_id"]
        assert inst["label"] == "shop phone"
        assert inst["state"] == "created"
        assert "access_token" not in res.text

        qr = api.post(f"/api/v1/instances/{iid}/link").json()
        assert qr["state"] == "unconfirmed"
        content = decode_qr(qr["data_uri"])
        assert api.get(f"/api/v1/instances/{iid}").json()["state"] == "unconfirmed"

        # the phone scans the code it was shown
        scan = httpx.post(f"{sandbox.url}/sandbox/instances/{iid}/scan", json={"code": content})
        assert scan.status_code == 200, scan.text

        qr = api.post(f"/api/v1/instances/{iid}/link").json()
        assert qr["state"] == "connected"
        assert qr["data_uri"] is None
        listed = api.get("/api/v1/instances").json()["items"]
        assert [(i["instance_id"], i["state"]) for i in listed] == [(iid, "connected")]
        assert listed[0]["sends_today"] == 0


def test_operations_and_reset_follow_the_new_id(live_sqlite: LiveApp, sandbox: Any) -> None:
    live_sqlite.ctx.gateway_factory = gateway_factory_for(sandbox)
    with live_sqlite.client() as api:
        iid = api.post("/api/v1/instances", json={}).json()["instance_id"]
        api.post(f"/api/v1/instances/{iid}/link")
        sandbox.scan(iid)
        assert api.post(f"/api/v1/instances/{iid}/reconnect").status_code == 200
        res = api.post(f"/api/v1/instances/{iid}/logout")
        assert res.status_code == 200
        assert api.get(f"/api/v1/instances/{iid}").json()["state"] == "logged_out"
        # a logged-out instance cannot reconnect: the gateway's refusal is a 502 with its text
        res = api.post(f"/api/v1/instances/{iid}/reconnect")
        assert res.status_code == 502
        assert "gateway" in res.json()["detail"]
        assert sandbox.access_token not in res.text
        res = api.post(f"/api/v1/instances/{iid}/reboot")
        assert res.status_code == 200
        assert api.get(f"/api/v1/instances/{iid}").json()["state"] == "waiting_scan"
        res = api.post(f"/api/v1/instances/{iid}/reset")
        assert res.status_code == 200
        new_id = res.json()["new_instance_id"]
        assert new_id and new_id != iid
        assert api.get(f"/api/v1/instances/{iid}").status_code == 404
        assert api.get(f"/api/v1/instances/{new_id}").json()["state"] == "created"


def test_webhook_registration(live_sqlite: LiveApp, sandbox: Any) -> None:
    live_sqlite.ctx.gateway_factory = gateway_factory_for(sandbox)
    with live_sqlite.client() as api:
        iid = api.post("/api/v1/instances", json={}).json()["instance_id"]
        res = api.post(f"/api/v1/instances/{iid}/webhook", json={"url": "http://127.0.0.1:9/hook"})
        assert res.status_code == 200, res.text
        assert api.get(f"/api/v1/instances/{iid}").json()["webhook_url_registered"] is True
        res = api.post(f"/api/v1/instances/{iid}/webhook", json={"url": "ftp://nope"})
        assert res.status_code == 422
        assert res.json()["errors"][0]["loc"] == ["body", "url"]
        # no public URL configured and none given: 422 naming the field
        res = api.post(f"/api/v1/instances/{iid}/webhook")
        assert res.status_code == 422
        assert res.json()["errors"][0]["loc"] == ["body", "url"]


def test_unknown_instance_is_404_everywhere(live_sqlite: LiveApp, sandbox: Any) -> None:
    live_sqlite.ctx.gateway_factory = gateway_factory_for(sandbox)
    with live_sqlite.client() as api:
        assert api.get("/api/v1/instances/NOPE").status_code == 404
        assert api.post("/api/v1/instances/NOPE/link").status_code == 404
        for op in ("reboot", "reconnect", "logout", "reset", "webhook"):
            res = api.post(f"/api/v1/instances/NOPE/{op}", json={"url": "http://x/y"})
            assert res.status_code == 404, op
            assert res.json()["detail"] == "instance NOPE not found"


def test_bad_body_is_422_with_field_path(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api:
        res = api.post("/api/v1/instances", json={"label": "x" * 500})
        assert res.status_code == 422
        assert res.json()["errors"][0]["loc"] == ["body", "label"]


def test_gateway_unreachable_is_502(live_sqlite: LiveApp) -> None:
    from gateway.client import GatewayClient

    live_sqlite.ctx.gateway_factory = lambda: GatewayClient(
        "http://127.0.0.1:9", "secret-token-xyz", timeout=2, connect_retries=0
    )
    with live_sqlite.client() as api:
        res = api.post("/api/v1/instances", json={})
        assert res.status_code == 502
        assert "secret-token-xyz" not in res.text


def test_scan_reaches_us_through_the_registered_webhook(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine, sandbox: Any
) -> None:
    live = make_live(
        sqlite_engine,
        gateway_factory=gateway_factory_for(sandbox),
        settings_overrides={"public_url": "self", "webhook_secret": "hook-secret-123"},
    )
    with live.client() as api:
        inst = api.post("/api/v1/instances", json={}).json()
        iid = inst["instance_id"]
        assert inst["webhook_url_registered"] is True  # the spec dialect takes it at once
        registered = sandbox.state.instances[iid].webhook_url
        assert registered == f"{live.url}/webhooks/gateway/hook-secret-123"
        api.post(f"/api/v1/instances/{iid}/link")
        sandbox.scan(iid, phone="15550001111")
        assert sandbox.wait_idle(30)
        deadline = time.monotonic() + 30
        while api.get(f"/api/v1/instances/{iid}").json()["state"] != "connected":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert api.get(f"/api/v1/instances/{iid}").json()["phone"]
        listed = api.get("/api/v1/instances").text
        assert "hook-secret-123" not in listed


def test_resume_and_reconnect_lift_pauses(
    make_live: Callable[..., LiveApp], engine: Engine, sandbox: Any
) -> None:
    from storage.queries import instances as iq
    from storage.types import utcnow

    live = make_live(engine, gateway_factory=gateway_factory_for(sandbox))
    iid = sandbox.create_linked_instance()
    with engine.begin() as conn:
        iq.mark_state(conn, iid, "connected", now=utcnow())
        iq.pause(conn, iid, "quota_exhausted", now=utcnow())
    with live.client() as api, _signed_in(live) as browser:
        inst = api.get(f"/api/v1/instances/{iid}").json()
        assert inst["paused_reason"] == "quota_exhausted" and inst["paused_at"]
        page = browser.get("/instances").text
        assert '<span data-role="paused-reason">quota_exhausted</span>' in page
        assert 'class="error " data-role="paused"' in page  # shown

        # reconnect does not lift a quota pause
        res = api.post(f"/api/v1/instances/{iid}/reconnect")
        assert res.status_code == 200 and res.json()["resumed_reason"] is None
        assert api.get(f"/api/v1/instances/{iid}").json()["paused_reason"] == "quota_exhausted"

        res = api.post(f"/api/v1/instances/{iid}/resume")
        assert res.status_code == 200, res.text
        assert res.json()["resumed_reason"] == "quota_exhausted"
        assert api.get(f"/api/v1/instances/{iid}").json()["paused_reason"] is None
        assert 'class="error hidden" data-role="paused"' in browser.get("/instances").text
        res = api.post(f"/api/v1/instances/{iid}/resume")
        assert res.status_code == 200 and res.json()["resumed_reason"] is None
        assert "not paused" in res.json()["detail"]

        # a connection pause is lifted by a successful reconnect
        with engine.begin() as conn:
            iq.pause(conn, iid, "relogin_required", now=utcnow())
        res = api.post(f"/api/v1/instances/{iid}/reconnect")
        assert res.status_code == 200 and res.json()["resumed_reason"] == "relogin_required"
        assert api.get(f"/api/v1/instances/{iid}").json()["paused_reason"] is None

        res = api.post("/api/v1/instances/NOPE/resume")
        assert res.status_code == 404 and res.json()["detail"] == "instance NOPE not found"


def test_reset_reports_what_followed_the_new_id(
    live_sqlite: LiveApp, sqlite_engine: Engine, sandbox: Any
) -> None:
    from sqlalchemy import insert, select

    from storage.types import utcnow

    c, d = tables.campaigns, tables.deliveries
    live_sqlite.ctx.gateway_factory = gateway_factory_for(sandbox)
    with live_sqlite.client() as api:
        iid = api.post("/api/v1/instances", json={}).json()["instance_id"]
        now = utcnow()
        with sqlite_engine.begin() as conn:
            cid = conn.execute(
                insert(c)
                .values(
                    name="x",
                    state="paused",
                    spec={"instances": [iid]},
                    message_type="text",
                    created_at=now,
                    updated_at=now,
                )
                .returning(c.c.id)
            ).scalar_one()
            conn.execute(
                insert(d).values(
                    campaign_id=cid,
                    target="+14155550001",
                    sender=iid,
                    content={"type": "text", "text": "hi"},
                    queued_at=now,
                )
            )
        res = api.post(f"/api/v1/instances/{iid}/reset")
        assert res.status_code == 200, res.text
        body = res.json()
        new_id = body["new_instance_id"]
        assert (body["deliveries_moved"], body["campaigns_updated"]) == (1, [cid])
        with sqlite_engine.connect() as conn:
            assert conn.execute(select(d.c.sender)).scalar_one() == new_id
            assert conn.execute(select(c.c.spec)).scalar_one()["instances"] == [new_id]


@pytest.mark.slow
@pytest.mark.browser
def test_resume_button_in_the_browser(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine, sandbox: Any, chromium_browser: Any
) -> None:
    """The dashboard's Resume sending button lifts the pause and the card updates in place."""
    from playwright.sync_api import expect

    from storage.queries import instances as iq
    from storage.types import utcnow

    live = make_live(sqlite_engine, gateway_factory=gateway_factory_for(sandbox))
    iid = sandbox.create_linked_instance()
    with sqlite_engine.begin() as conn:
        iq.mark_state(conn, iid, "connected", now=utcnow())
        iq.pause(conn, iid, "error 463 reported by the gateway", now=utcnow())
    context = chromium_browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.goto(f"{live.url}/login?next=/instances")
        page.fill("#api_key", API_KEY)
        page.click("#sign-in")
        card = page.locator(f'.instance[data-instance="{iid}"]')
        paused = card.locator("[data-role=paused]")
        expect(paused).to_be_visible()
        expect(paused).to_contain_text("error 463")
        card.locator("button[data-op=resume]").click()
        expect(card.locator("[data-role=msg]")).to_contain_text("resumed")
        expect(paused).to_be_hidden()
    finally:
        context.close()
    with sqlite_engine.connect() as conn:
        assert iq.pause_state(conn, [iid]) == {iid: None}


def test_qr_code_is_refused_for_a_dropped_instance_unless_relinking(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine, sandbox: Any
) -> None:
    """A QR request would end a dropped phone's session: 409 unless relink=true."""
    from storage.queries import instances as iq
    from storage.types import utcnow

    live = make_live(sqlite_engine, gateway_factory=gateway_factory_for(sandbox))
    iid = sandbox.create_linked_instance()
    with sqlite_engine.begin() as conn:
        iq.mark_state(conn, iid, "disconnected", now=utcnow())
    asked = sandbox.stats()["requests"].get("get_qrcode", 0)
    with live.client() as api:
        res = api.post(f"/api/v1/instances/{iid}/link")
        assert res.status_code == 409, res.text
        assert res.json()["code"] == "instance_reconnecting"
        assert sandbox.stats()["requests"].get("get_qrcode", 0) == asked
        assert api.get(f"/api/v1/instances/{iid}").json()["state"] == "disconnected"
        res = api.post(f"/api/v1/instances/{iid}/link", params={"relink": "true"})
        assert res.status_code == 200, res.text
    assert sandbox.stats()["requests"].get("get_qrcode", 0) == asked + 1


def test_sends_today_is_what_the_daily_cap_counts(
    make_live: Callable[..., LiveApp], engine: Engine
) -> None:
    """A campaign in UTC+10 caps the sender: at 23:00 UTC its day began at 14:00 UTC, and
    messages being sent count (the dispatcher's rule), one sent at 12:00 UTC does not."""
    from datetime import UTC, datetime, timedelta
    from zoneinfo import ZoneInfo

    from sqlalchemy import insert

    from campaigns.campaign_file import parse_campaign
    from scheduler.windows import local_day_start
    from storage.queries import deliveries as dq

    now = datetime(2026, 3, 10, 23, 0, tzinfo=UTC)
    zone = ZoneInfo("Australia/Brisbane")  # UTC+10 all year
    spec = parse_campaign(
        {
            "name": "far east",
            "list": "customers",
            "message": {"type": "text", "text": "hi"},
            "schedule": {"timezone": "Australia/Brisbane"},
            "pace": {"daily_cap": 3},
            "instances": ["AAA"],
        }
    )
    with engine.begin() as conn:
        conn.execute(
            insert(tables.instances).values(
                instance_id="AAA", state="connected", created_at=now, updated_at=now
            )
        )
        cid = conn.execute(
            insert(tables.campaigns)
            .values(
                name="far east",
                state="running",
                spec=spec.model_dump(mode="json"),
                message_type="text",
                timezone="Australia/Brisbane",
                created_at=now,
                updated_at=now,
            )
            .returning(tables.campaigns.c.id)
        ).scalar_one()
        base = {"campaign_id": cid, "queued_at": now, "sender": "AAA", "content": {}}
        sent = [now - timedelta(hours=h) for h in (11, 9, 8, 1)]  # 12:00, 14:00, 15:00, 22:00
        conn.execute(
            insert(tables.deliveries),
            [
                *(
                    {**base, "target": f"+{i}", "state": "sent", "sent_at": at}
                    for i, at in enumerate(sent)
                ),
                {**base, "target": "+8", "state": "sending", "sent_at": None},
                {**base, "target": "+9", "state": "sending", "sent_at": None},
            ],
        )
    with engine.connect() as conn:
        capped = dq.sends_since(conn, "AAA", local_day_start(now, zone))
    assert capped == 5  # 14:00, 15:00 and 22:00 UTC, and the two being sent (not 4 since 00:00 UTC)

    live = make_live(engine, clock=lambda: now)
    with live.client() as api:
        inst = api.get("/api/v1/instances/AAA").json()
        listed = api.get("/api/v1/instances").json()["items"]
        metrics = api.get("/metrics").text
    assert (inst["sends_today"], inst["daily_cap"]) == (capped, 3)
    assert listed[0]["sends_today"] == capped
    assert f'gatecast_instance_sends_today{{instance="AAA"}} {float(capped)}' in metrics


def test_sender_care_in_the_api_and_on_the_card(
    make_live: Callable[..., LiveApp], engine: Engine, sandbox: Any
) -> None:
    """The instance view shows the warm-up, the allowance left, the health and a 463
    lock; ``PUT /instances/{id}/warmup`` sets a sender's own ramp, refusals name the field."""
    from datetime import timedelta

    from scheduler import health
    from storage.queries import instances as iq
    from storage.queries import sender_care as sc
    from storage.types import utcnow

    live = make_live(engine, gateway_factory=gateway_factory_for(sandbox))
    iid = sandbox.create_linked_instance()
    with engine.begin() as conn:
        iq.mark_state(conn, iid, "connected", now=utcnow())
    with live.client() as api, _signed_in(live) as browser:
        res = api.put(f"/api/v1/instances/{iid}/warmup", json={"ramp": "7, 14"})
        assert res.status_code == 200, res.text
        inst = res.json()
        assert (inst["warmup_day"], inst["warmup_allowance"], inst["warmup_ramp"]) == (
            1,
            7,
            "7,14",
        )
        assert inst["allowance_left"] == 7 and inst["health_level"] == "low"
        assert "warm-up day 1: 0 of 7 new-contact messages" in inst["care_summary"]
        res = api.put(f"/api/v1/instances/{iid}/warmup", json={"day": 2})
        assert res.json()["warmup_day"] == 2
        for body, field in (
            ({"ramp": "7,x"}, "ramp"),
            ({"ramp": "5,0"}, "ramp"),
            ({"day": 0}, "day"),
            ({"off": True, "day": 3}, "off"),
        ):
            refused = api.put(f"/api/v1/instances/{iid}/warmup", json=body)
            assert refused.status_code == 422, refused.text
            assert field in refused.text, refused.text
        assert api.put("/api/v1/instances/NOPE/warmup", json={"off": True}).status_code == 404

        with engine.begin() as conn:
            health.add_signals(conn, iid, {"timelock": 1}, utcnow())
            sc.set_lock(conn, iid, utcnow() + timedelta(seconds=60))
        inst = api.get(f"/api/v1/instances/{iid}").json()
        assert inst["health_level"] == "medium" and inst["health_score"] > 20
        assert inst["timelock_until"] and "463 timelock until" in inst["care_summary"]
        page = browser.get("/instances").text
        assert "health medium" in page and "463 timelock until" in page
        metrics = api.get("/metrics").text
        assert 'gatecast_sender_health_changes_total{level="medium"} 1.0' in metrics
        assert f'gatecast_instance_health_score{{instance="{iid}",level="medium"}}' in metrics
