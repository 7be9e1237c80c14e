"""An integrator manages a webhook endpoint over the API, against ``gatecast serve`` and a
small receiver of its own (verifying each request with the documented HMAC scheme, the
way ``standardwebhooks`` does: the library is not installed here): it subscribes, sends a
test event, rotates the secret (events during the overlap verify with the old secret and
the new one; after it, only with the new), reads the attempts, changes the events it
asks for and sees the filtering, reads the outbound metrics; the CLI does the same."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import httpx
import pytest

from tests.journeys.harness import Workspace, assert_problem, wait_for
from tests.journeys.harness import ok as _ok
from tests.webhook_receiver import Receiver, verify

ULID_ID = re.compile(r"^msg_[0-9A-HJKMNP-TV-Z]{26}$")


def _arrived(receiver: Receiver, msg_id: str) -> tuple[dict[str, str], bytes] | None:
    with receiver._lock:
        return next((r for r in receiver.raw if r[0]["webhook-id"] == msg_id), None)


def _test_event(api: httpx.Client, receiver: Receiver, eid: int) -> tuple[dict[str, str], bytes]:
    """POST .../test and wait for it to arrive; answers its headers and body."""
    queued = _ok(api.post(f"/api/v1/webhook-endpoints/{eid}/test"), 202)
    assert queued["event"] == "webhook.test" and ULID_ID.match(queued["message_id"]), queued
    found: tuple[dict[str, str], bytes] = wait_for(
        lambda: _arrived(receiver, queued["message_id"]), what="the test event"
    )
    return found


def _opted_out(receiver: Receiver, contact_id: int) -> list[tuple[dict[str, str], bytes]]:
    with receiver._lock:
        pairs = list(zip(receiver.events, receiver.raw, strict=True))
    return [
        raw
        for event, raw in pairs
        if event["type"] == "contact.opted_out" and event["data"]["contact_id"] == contact_id
    ]


def _opt_out(
    api: httpx.Client, receiver: Receiver, contact_id: int
) -> tuple[dict[str, str], bytes]:
    before = len(_opted_out(receiver, contact_id))
    _ok(api.post(f"/api/v1/contacts/{contact_id}/opt-in"))
    _ok(api.post(f"/api/v1/contacts/{contact_id}/opt-out", json={"reason": "asked"}))
    found: list[tuple[dict[str, str], bytes]] = wait_for(
        lambda: _opted_out(receiver, contact_id)[before:][:1] or None, what="the opt-out event"
    )
    return found[0]


def _signatures(headers: dict[str, str]) -> list[str]:
    return headers["webhook-signature"].split()


@pytest.mark.parametrize(
    "database",
    ["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, pytest.mark.slow])],
)
def test_an_integrator_manages_its_endpoint(
    ws: Workspace, database: str, request: pytest.FixtureRequest
) -> None:
    if database == "postgresql":
        ws.settings["GATECAST_DATABASE_URL"] = str(request.getfixturevalue("pg_url"))
        ws.run("db", "upgrade")  # a fresh database, as the CLI asks
    receiver = Receiver()
    try:
        server = ws.serve()
        api = server.api()
        created = _ok(
            api.post(
                "/api/v1/webhook-endpoints",
                json={"url": receiver.url, "events": ["contact.opted_out"]},
            ),
            201,
        )
        eid, old = int(created["id"]), str(created["secret"])
        receiver.secret = old
        contact = _ok(api.post("/api/v1/contacts", json={"phone": "+12025550143"}), 201)
        cid = int(contact["id"])

        # a test event and a real one, each verified with the secret
        headers, body = _test_event(api, receiver, eid)
        assert verify(old, headers, body) and len(_signatures(headers)) == 1
        headers, body = _opt_out(api, receiver, cid)
        assert verify(old, headers, body)

        # rotate: the new secret is shown once; during the overlap both secrets verify
        rotated = _ok(
            api.post(
                f"/api/v1/webhook-endpoints/{eid}/rotate-secret", json={"overlap_seconds": 3600}
            )
        )
        new = str(rotated["secret"])
        assert new.startswith("whsec_") and new != old
        receiver.secret = new
        shown = _ok(api.get(f"/api/v1/webhook-endpoints/{eid}"))
        assert old not in str(shown) and new not in str(shown)
        assert shown["old_secret_valid_until"] is not None
        for headers, body in (_test_event(api, receiver, eid), _opt_out(api, receiver, cid)):
            assert len(_signatures(headers)) == 2, headers
            assert verify(old, headers, body) and verify(new, headers, body)

        # a rotation with a 1 s overlap: once it has passed only the newest secret signs
        third = _ok(
            api.post(f"/api/v1/webhook-endpoints/{eid}/rotate-secret", json={"overlap_seconds": 1})
        )
        newest = str(third["secret"])
        until = datetime.fromisoformat(
            _ok(api.get(f"/api/v1/webhook-endpoints/{eid}"))["old_secret_valid_until"]
        )
        while datetime.now(UTC) <= until:
            time.sleep(0.2)
        receiver.secret = newest
        for headers, body in (_test_event(api, receiver, eid), _opt_out(api, receiver, cid)):
            assert len(_signatures(headers)) == 1, headers
            assert verify(newest, headers, body)
            assert not verify(new, headers, body) and not verify(old, headers, body)
        assert receiver.bad_signatures == 0

        # the attempts: status, time, duration; ids unique, never a secret or a payload
        # (an attempt is recorded once the receiver has answered: wait for the record)
        attempts = wait_for(
            lambda: (
                (a := _ok(api.get(f"/api/v1/webhook-endpoints/{eid}/attempts")))["total"] == 6 and a
            ),
            what="six attempts recorded",
        )
        assert len(receiver.raw) == 6
        item = attempts["items"][0]
        assert item["status_code"] == 200 and item["outcome"] == "delivered"
        assert item["duration_ms"] >= 0 and item["at"]
        ids = [a["message_id"] for a in attempts["items"]]
        assert len(set(ids)) == 6 and all(ULID_ID.match(i) for i in ids), ids
        assert set(ids) == {h["webhook-id"] for h, _ in receiver.raw}
        text = str(attempts)
        assert all(s not in text for s in (old, new, newest)) and "+12025550143" not in text

        # change the events asked for: an opt-out is no longer sent, a reply would be
        changed = _ok(
            api.patch(f"/api/v1/webhook-endpoints/{eid}", json={"events": ["reply.received"]})
        )
        assert changed["events"] == ["reply.received"] and changed["enabled"]
        _ok(api.post(f"/api/v1/contacts/{cid}/opt-in"))
        _ok(api.post(f"/api/v1/contacts/{cid}/opt-out"))
        _test_event(api, receiver, eid)  # written after the opt-out: it would have come first
        wait_for(
            lambda: _ok(api.get(f"/api/v1/webhook-endpoints/{eid}"))["messages"]["pending"] == 0,
            what="nothing waiting",
        )
        assert len(_opted_out(receiver, cid)) == 3
        changed = _ok(
            api.patch(
                f"/api/v1/webhook-endpoints/{eid}",
                json={"events": ["contact.opted_out"], "description": "crm"},
            )
        )
        assert changed["description"] == "crm"
        _opt_out(api, receiver, cid)
        assert len(_opted_out(receiver, cid)) == 4

        # refusals name the field and change nothing; a disabled endpoint gets no test
        bad = api.patch(f"/api/v1/webhook-endpoints/{eid}", json={"url": "ftp://x.example/"})
        assert "url" in str(assert_problem(bad, 422, "invalid_request"))
        bad = api.patch(f"/api/v1/webhook-endpoints/{eid}", json={"events": ["delivery.bounced"]})
        assert "delivery.bounced" in str(assert_problem(bad, 422, "invalid_request"))
        off = _ok(api.patch(f"/api/v1/webhook-endpoints/{eid}", json={"enabled": False}))
        assert not off["enabled"] and off["url"] == receiver.url
        assert_problem(api.post(f"/api/v1/webhook-endpoints/{eid}/test"), 409, "endpoint_disabled")
        assert_problem(api.post("/api/v1/webhook-endpoints/999/test"), 404, "not_found")
        _ok(api.patch(f"/api/v1/webhook-endpoints/{eid}", json={"enabled": True}))

        # the metrics count the attempts; nothing waits
        delivered = 'gatecast_outbound_webhook_attempts_total{outcome="delivered"}'
        metrics = wait_for(
            lambda: (m := api.get("/metrics").text) and _metric(m, delivered) == 8 and m,
            what="eight deliveries counted",
        )
        assert len(receiver.raw) == 8
        assert _metric(metrics, "gatecast_outbound_webhook_waiting") == 0
        assert _metric(metrics, "gatecast_outbound_webhook_lag_seconds") == 0

        # the CLI: attempts, update, test, rotate (the secrets never in a log)
        listed = ws.run("webhook-endpoints", "attempts", str(eid)).output
        assert "webhook.test" in listed and "delivered" in listed
        updated = ws.run(
            "webhook-endpoints", "update", str(eid), "--events", "contact.opted_out,reply.received"
        ).output
        assert "contact.opted_out, reply.received" in updated
        queued = ws.run("webhook-endpoints", "test", str(eid)).output
        msg_id = re.search(r"msg_\w+", queued)
        assert msg_id is not None, queued
        wait_for(lambda: _arrived(receiver, msg_id.group(0)), what="the CLI's test event")
        cli_rotated = ws.run("webhook-endpoints", "rotate-secret", str(eid)).output
        assert "whsec_" in cli_rotated and "also signs until" in cli_rotated
        assert "whsec_" not in ws.run("webhook-endpoints", "show", str(eid)).output
        log = server.process.output()
        assert all(s not in log for s in (old, new, newest)), "a secret in the log"
    finally:
        receiver.stop()


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")
