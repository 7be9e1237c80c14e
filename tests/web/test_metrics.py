"""Prometheus metrics read from the database at scrape time."""

from __future__ import annotations

from datetime import timedelta
from importlib.metadata import version

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import insert

from gatecast.web.metrics import observe_send, process_value
from scheduler.recording import SendObserved
from storage import tables
from storage.models import HEAD_REVISION
from tests.web.conftest import LiveApp


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_figures_come_from_the_database(live: LiveApp) -> None:
    now = live.ctx.clock()
    engine = live.ctx.engine
    with engine.begin() as conn:
        conn.execute(
            insert(tables.instances),
            [
                {
                    "instance_id": "AAA",
                    "state": "connected",
                    "paused_reason": None,
                    "created_at": now,
                    "updated_at": now,
                },
                {
                    "instance_id": "BBB",
                    "state": "connected",
                    "paused_reason": "relogin_required",
                    "created_at": now,
                    "updated_at": now,
                },
            ],
        )
        cid = conn.execute(
            insert(tables.campaigns)
            .values(
                name="m",
                state="running",
                spec={},
                message_type="text",
                created_at=now,
                updated_at=now,
            )
            .returning(tables.campaigns.c.id)
        ).scalar_one()
        base = {
            "campaign_id": cid,
            "queued_at": now,
            "due_at": None,
            "sender": None,
            "sent_at": None,
            "error": None,
            "content": {},
        }
        conn.execute(
            insert(tables.deliveries),
            [
                {**base, "target": "+1", "state": "queued", "due_at": now - timedelta(seconds=1)},
                {**base, "target": "+2", "state": "queued", "due_at": now + timedelta(hours=1)},
                {**base, "target": "+3", "state": "read", "sender": "AAA", "sent_at": now},
                {**base, "target": "+4", "state": "delivered", "sender": "AAA", "sent_at": now},
                {
                    **base,
                    "target": "+5",
                    "state": "sent",
                    "sender": "AAA",
                    "sent_at": now - timedelta(days=2),
                },
                {**base, "target": "+6", "state": "failed", "error": "x"},
                {**base, "target": "+7", "state": "unknown", "sender": "BBB"},
            ],
        )
        conn.execute(
            insert(tables.status_events),
            [
                {"message_id": "m1", "status": "delivered", "occurred_at": now, "received_at": now},
                {"message_id": "m1", "status": "read", "occurred_at": now, "received_at": now},
                {"message_id": "m2", "status": "read", "occurred_at": now, "received_at": now},
            ],
        )
        conn.execute(
            insert(tables.inbound_messages),
            [{"message_id": "in1", "chat": "1@s.whatsapp.net", "text": "STOP", "received_at": now}],
        )
    observe_send(SendObserved("accepted", "text", 0.02, 1.5))

    with live.client() as api:
        res = api.get("/metrics")
    assert res.status_code == 200
    assert res.headers["content-type"].startswith("text/plain")
    m = _samples(res.text)
    assert m[("gatecast_queue_depth", ())] == 2
    assert m[("gatecast_queue_due", ())] == 1
    assert m[("gatecast_deliveries", (("state", "read"),))] == 1
    assert m[("gatecast_deliveries", (("state", "skipped"),))] == 0
    assert m[("gatecast_sends_total", (("outcome", "accepted"),))] == 3
    assert m[("gatecast_sends_total", (("outcome", "ambiguous"),))] == 1
    assert m[("gatecast_sends_total", (("outcome", "failed"),))] == 1
    assert m[("gatecast_webhook_events_total", (("kind", "status_read"),))] == 2
    assert m[("gatecast_webhook_events_total", (("kind", "status_delivered"),))] == 1
    assert m[("gatecast_webhook_events_total", (("kind", "message"),))] == 1
    assert m[("gatecast_instance_sends_today", (("instance", "AAA"),))] == 2  # not 2 days ago
    assert m[("gatecast_instance_sends_today", (("instance", "BBB"),))] == 0
    assert m[("gatecast_instance_paused", (("instance", "BBB"),))] == 1
    assert m[("gatecast_instance_paused", (("instance", "AAA"),))] == 0
    assert m[("gatecast_campaigns", (("state", "running"),))] == 1
    states = {k[1] for k, v in m.items() if k[0] == "gatecast_instance_state" and v == 1}
    assert {dict(labels)["instance"] for labels in states} == {"AAA", "BBB"}
    build = [dict(k[1]) for k in m if k[0] == "gatecast_build_info"]
    assert build == [{"version": version("gatecast"), "schema": HEAD_REVISION}]
    assert m[("process_cpu_seconds_total", ())] > 0  # this process's own figures
    assert m[("gatecast_send_attempts_total", (("outcome", "accepted"),))] >= 1


def test_http_answers_are_counted_by_route_template(live_sqlite: LiveApp) -> None:
    def count(route: str, method: str, status: str) -> float:
        return process_value(
            "gatecast_http_requests_total", route=route, method=method, status=status
        )

    one = "/api/v1/campaigns/{campaign_id}"
    before = (count(one, "GET", "404"), count("unmatched", "GET", "404"))
    hook = "/webhooks/gateway/{secret}"
    hooks_before = count(hook, "POST", "404")
    with live_sqlite.client() as api:
        assert api.get("/api/v1/campaigns/424242").status_code == 404
        assert api.get("/api/v1/campaigns/424243").status_code == 404
        assert api.get("/no/such/page").status_code == 404
        assert api.post("/webhooks/gateway/not-the-secret", json={}).status_code == 404
        text = api.get("/metrics").text
    assert (count(one, "GET", "404"), count("unmatched", "GET", "404")) == (
        before[0] + 2,
        before[1] + 1,
    )
    assert count(hook, "POST", "404") == hooks_before + 1
    assert "424242" not in text and "not-the-secret" not in text
    assert process_value("gatecast_http_request_seconds_count", route=one, method="GET") >= 2
