"""Outbound webhook endpoints over HTTP: register (the secret once), refusals that store
nothing, list, show, change, rotate the secret, test events, the attempts, replay,
remove; webhook-ids unique across databases."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, update

from campaigns.webhook_endpoints import create_endpoint, send_test_event
from scheduler.outbound import OutboundPolicy, OutboundSender
from storage import tables
from storage.engine import make_engine, upgrade
from storage.types import utcnow
from tests.scheduler.helpers import BASE_SPEC, add_instances, add_running_campaign
from tests.web.conftest import LiveApp
from tests.webhook_receiver import Receiver, verify


def test_endpoints_over_http(live: LiveApp, engine: Engine) -> None:
    receiver = Receiver()
    try:
        with live.client() as api:
            for body, field in [
                ({"url": "gopher://x.example/", "events": ["*"]}, "url"),
                ({"url": "https://x.example/", "events": ["delivery.bounced"]}, "events"),
                ({"url": "https://x.example/", "events": []}, "events"),
            ]:
                res = api.post("/api/v1/webhook-endpoints", json=body)
                assert res.status_code == 422, res.text
                assert res.json()["errors"][0]["loc"] == ["body", field]
            assert api.get("/api/v1/webhook-endpoints").json()["total"] == 0

            res = api.post(
                "/api/v1/webhook-endpoints",
                json={"url": receiver.url, "events": ["delivery.sent"], "description": "crm"},
            )
            assert res.status_code == 201, res.text
            created = res.json()
            receiver.secret = created["secret"]
            eid = created["id"]
            listed = api.get("/api/v1/webhook-endpoints").json()
            assert listed["total"] == 1 and "secret" not in listed["items"][0]
            assert listed["items"][0]["events"] == ["delivery.sent"]

            now = utcnow()
            add_instances(engine, ["s1"], now)
            cid = add_running_campaign(engine, BASE_SPEC, recipients=2, senders=["s1"], now=now)
            with engine.begin() as conn:
                conn.execute(
                    update(tables.deliveries)
                    .where(tables.deliveries.c.campaign_id == cid)
                    .values(state="sent", sent_at=now)
                )
            sender = OutboundSender(engine, policy=OutboundPolicy(timeout_seconds=5))
            try:
                sender.run_once()
            finally:
                sender.close()
            assert len(receiver.events) == 2 and receiver.bad_signatures == 0

            one = api.get(f"/api/v1/webhook-endpoints/{eid}").json()
            assert one["messages"] == {"pending": 0, "delivered": 2, "failed": 0}
            log = api.get(f"/api/v1/webhook-endpoints/{eid}/deliveries", params={"limit": 1})
            page = log.json()
            assert page["total"] == 2 and len(page["items"]) == 1
            assert page["items"][0]["status_code"] == 200
            assert page["items"][0]["message_id"].startswith("msg_")

            res = api.post(f"/api/v1/webhook-endpoints/{eid}/replay", json={})
            assert res.json() == {"requeued": 0}
            since = (now.replace(microsecond=0)).isoformat()
            res = api.post(f"/api/v1/webhook-endpoints/{eid}/replay", json={"since": since})
            assert res.json() == {"requeued": 2}
            res = api.post(f"/api/v1/webhook-endpoints/{eid}/replay", json={"since": "yesterday"})
            assert res.status_code == 422

            assert api.delete(f"/api/v1/webhook-endpoints/{eid}").status_code == 204
            for path in ("", "/deliveries"):
                gone = api.get(f"/api/v1/webhook-endpoints/{eid}{path}")
                assert gone.status_code == 404 and gone.json()["code"] == "not_found"
            assert api.post(f"/api/v1/webhook-endpoints/{eid}/replay").status_code == 404
    finally:
        receiver.stop()


def _send(engine: Engine) -> int:
    """One pass of the sender, retries due at once."""
    sender = OutboundSender(
        engine, policy=OutboundPolicy(timeout_seconds=5, first_retry_seconds=0.0)
    )
    try:
        return sender.run_once()
    finally:
        sender.close()


def _metric(text: str, name: str) -> float:
    line = next(x for x in text.splitlines() if x.startswith(name + " "))
    return float(line.split()[-1])


def test_endpoint_managed_over_http(make_live: Any, engine: Engine) -> None:
    """Update, rotate with an overlap, test events, attempts and metrics; the app's clock
    two hours behind the sender's, so a rotation's overlap ends before the sender sends
    (an hour) or after (three)."""
    live = make_live(engine, clock=lambda: utcnow() - timedelta(hours=2))
    receiver = Receiver()
    try:
        with live.client() as api:
            created = api.post(
                "/api/v1/webhook-endpoints",
                json={"url": receiver.url, "events": ["contact.opted_out"]},
            ).json()
            eid, first = created["id"], created["secret"]
            assert created["old_secret_valid_until"] is None
            receiver.secret = first
            cid = api.post("/api/v1/contacts", json={"phone": "+12025550143"}).json()["id"]
            api.post(f"/api/v1/contacts/{cid}/opt-out")

            # refused once, then delivered: the same webhook-id on both attempts
            receiver.status = 500
            assert _send(engine) == 1 and receiver.requests == 1 and not receiver.events
            receiver.status = 200
            assert _send(engine) == 1 and len(receiver.ids) == 1
            attempts = api.get(f"/api/v1/webhook-endpoints/{eid}/attempts").json()["items"]
            assert [a["outcome"] for a in attempts] == ["delivered", "retrying"]
            assert attempts[1]["status_code"] == 500 and attempts[1]["error"] == "answered HTTP 500"
            assert {a["message_id"] for a in attempts} == {receiver.ids[0]}
            assert re.fullmatch(r"msg_[0-9A-HJKMNP-TV-Z]{26}", receiver.ids[0])

            # rotate, the overlap running: both secrets sign a test event
            res = api.post(
                f"/api/v1/webhook-endpoints/{eid}/rotate-secret",
                json={"overlap_seconds": 3 * 3600},
            )
            assert res.status_code == 200, res.text
            second = res.json()["secret"]
            receiver.secret = second
            queued = api.post(f"/api/v1/webhook-endpoints/{eid}/test")
            assert queued.status_code == 202 and queued.json()["event"] == "webhook.test"
            _send(engine)
            headers, body = receiver.raw[-1]
            assert headers["webhook-id"] == queued.json()["message_id"]
            assert len(headers["webhook-signature"].split()) == 2
            assert verify(first, headers, body) and verify(second, headers, body)
            assert json.loads(body)["data"]["endpoint_id"] == eid

            # rotate with an overlap already over: only the newest signs
            third = api.post(
                f"/api/v1/webhook-endpoints/{eid}/rotate-secret", json={"overlap_seconds": 3600}
            ).json()["secret"]
            receiver.secret = third
            api.post(f"/api/v1/webhook-endpoints/{eid}/test")
            _send(engine)
            headers, body = receiver.raw[-1]
            assert len(headers["webhook-signature"].split()) == 1
            assert verify(third, headers, body) and not verify(second, headers, body)
            assert not verify(first, headers, body)
            shown = api.get(f"/api/v1/webhook-endpoints/{eid}").json()
            assert all(s not in str(shown) for s in (first, second, third))

            # other events: an opt-out is no longer written for it
            before = shown["messages"]
            changed = api.patch(
                f"/api/v1/webhook-endpoints/{eid}",
                json={"events": ["reply.received"], "description": "crm"},
            ).json()
            assert changed["events"] == ["reply.received"] and changed["description"] == "crm"
            api.post(f"/api/v1/contacts/{cid}/opt-in")
            api.post(f"/api/v1/contacts/{cid}/opt-out")
            assert api.get(f"/api/v1/webhook-endpoints/{eid}").json()["messages"] == before

            # turned off: no test; refusals name the field; unknown ids are 404
            assert (
                api.patch(f"/api/v1/webhook-endpoints/{eid}", json={"enabled": False}).json()[
                    "enabled"
                ]
                is False
            )
            off = api.post(f"/api/v1/webhook-endpoints/{eid}/test")
            assert off.status_code == 409 and off.json()["code"] == "endpoint_disabled"
            for body_ in ({"url": None}, {"url": "ftp://x/"}, {"events": ["nope"]}, {"x": 1}):
                res = api.patch(f"/api/v1/webhook-endpoints/{eid}", json=body_)
                assert res.status_code == 422, (body_, res.text)
            res = api.post(
                f"/api/v1/webhook-endpoints/{eid}/rotate-secret", json={"overlap_seconds": -1}
            )
            assert res.status_code == 422
            for method, path in (
                ("PATCH", "/api/v1/webhook-endpoints/999"),
                ("POST", "/api/v1/webhook-endpoints/999/rotate-secret"),
                ("POST", "/api/v1/webhook-endpoints/999/test"),
                ("GET", "/api/v1/webhook-endpoints/999/attempts"),
            ):
                assert api.request(method, path, json={}).status_code == 404, path

            metrics = api.get("/metrics").text
            name = "gatecast_outbound_webhook_attempts_total"
            assert _metric(metrics, name + '{outcome="delivered"}') == 3
            assert _metric(metrics, name + '{outcome="retrying"}') == 1
            assert _metric(metrics, "gatecast_outbound_webhook_failures_total") == 1
            assert _metric(metrics, "gatecast_outbound_webhook_waiting") == 0
    finally:
        receiver.stop()


def test_message_ids_differ_across_databases(sqlite_engine: Engine, tmp_path: Path) -> None:
    """A second, new database does not start again at the first one's ids."""
    receiver = Receiver()
    other = make_engine(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        upgrade(other)
        for engine in (sqlite_engine, other):
            created = create_endpoint(engine, receiver.url, ["*"])
            receiver.secret = created.secret
            send_test_event(engine, created.endpoint.id)
            _send(engine)
        assert len(receiver.ids) == 2 and receiver.ids[0] != receiver.ids[1]
    finally:
        other.dispose()
        receiver.stop()
