"""Outbound webhook endpoints over HTTP: register (the secret once), refusals that store
nothing, list, show, the delivery log, replay, remove."""

from __future__ import annotations

from sqlalchemy import Engine, update

from scheduler.outbound import OutboundPolicy, OutboundSender
from storage import tables
from storage.types import utcnow
from tests.scheduler.helpers import BASE_SPEC, add_instances, add_running_campaign
from tests.web.conftest import LiveApp
from tests.webhook_receiver import Receiver


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
