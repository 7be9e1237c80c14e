"""An integrator's other system learns what happened: it registers a webhook endpoint
over the API, a campaign runs against the sandbox, and its receiver (a small HTTP server
here, verifying every signature as docs/webhooks.md shows) sees each recipient's events
in order. Then the receiver is down for a while (connections refused), events keep
coming, it comes back: nothing lost, order kept."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.journeys.harness import (
    QUICK_STATUSES,
    SAMPLES,
    Server,
    Workspace,
    assert_problem,
    wait_for,
)
from tests.journeys.harness import ok as _ok
from tests.webhook_receiver import Receiver

RANK = {"delivery.sent": 1, "delivery.delivered": 2, "delivery.read": 3, "delivery.failed": 4}
CONTACTS = 44  # samples/contacts.csv: 44 valid, distinct phones
NOT_ON_APP = "12125550115"  # Noah Brown in samples/contacts.csv: "not on the app"
#: the journeys' sandbox, with one sample number not on the app
SANDBOX_ARGS = (*QUICK_STATUSES, "--not-on-app", NOT_ON_APP)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def _setup(ws: Workspace, receiver: Receiver) -> tuple[Server, httpx.Client, int]:
    """serve, a linked sender, the sample list imported, an endpoint for every event."""
    server = ws.serve()
    api = server.api()
    refused = api.post("/api/v1/webhook-endpoints", json={"url": "ftp://x.example/", "events": []})
    problem = assert_problem(refused, 422, "invalid_request")
    assert "http://" in str(problem), problem
    unknown = api.post(
        "/api/v1/webhook-endpoints", json={"url": receiver.url, "events": ["delivery.bounced"]}
    )
    assert "delivery.bounced" in str(assert_problem(unknown, 422, "invalid_request"))
    assert _ok(api.get("/api/v1/webhook-endpoints"))["total"] == 0  # nothing half-written

    created = _ok(
        api.post("/api/v1/webhook-endpoints", json={"url": receiver.url, "events": ["*"]}), 201
    )
    assert created["secret"].startswith("whsec_")
    receiver.secret = created["secret"]
    shown = _ok(api.get(f"/api/v1/webhook-endpoints/{created['id']}"))
    assert "secret" not in shown and shown["enabled"]

    iid = _ok(api.post("/api/v1/instances", json={"label": "shop"}), 201)["instance_id"]
    api.post(f"/api/v1/instances/{iid}/link")
    wait_for(
        lambda: _ok(api.get(f"/api/v1/instances/{iid}"))["state"] == "connected",
        what="the instance to be connected",
    )
    with (SAMPLES / "contacts.csv").open("rb") as fh:
        job = _ok(
            api.post(
                "/api/v1/imports",
                files={"file": ("contacts.csv", fh, "text/csv")},
                data={"list_name": "customers"},
            ),
            202,
        )
    wait_for(
        lambda: _ok(api.get(f"/api/v1/imports/{job['id']}"))["status"] == "completed",
        what="the import",
    )
    return server, api, int(created["id"])


def _campaign(api: httpx.Client, name: str) -> int:
    body = {
        "name": name,
        "list": "customers",
        "message": {"type": "text", "text": "Hello {{ name }}"},
        "pace": {"per_minute": 1200, "delay_seconds": [0, 0.05]},
    }
    return int(_ok(api.post("/api/v1/campaigns", json=body), 201)["id"])


def _done(api: httpx.Client, cid: int) -> bool:
    return bool(_ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["done"])


def _by_recipient(receiver: Receiver, cid: int) -> dict[str, list[str]]:
    """Each recipient's delivery events in arrival order (a repeat, at least once, kept
    out by its webhook-id)."""
    seen: set[str] = set()
    out: dict[str, list[str]] = {}
    with receiver._lock:
        pairs = list(zip(receiver.ids, receiver.events, strict=True))
    for msg_id, event in pairs:
        if msg_id in seen or not event["type"].startswith("delivery."):
            continue
        seen.add(msg_id)
        if event["data"]["campaign_id"] == cid:
            out.setdefault(event["data"]["to"], []).append(event["type"])
    return out


def _finished(receiver: Receiver, cid: int) -> bool:
    """Every recipient's last event arrived (read, or failed for the one not on the app)."""
    got = _by_recipient(receiver, cid)
    return len(got) == CONTACTS and all(
        seq[-1] in ("delivery.read", "delivery.failed") for seq in got.values()
    )


def _assert_in_order(receiver: Receiver, cid: int) -> None:
    for target, seq in _by_recipient(receiver, cid).items():
        ranks = [RANK[t] for t in seq]
        assert ranks == sorted(set(ranks)), (target, seq)
    assert receiver.bad_signatures == 0


def _endpoint(api: httpx.Client, eid: int) -> dict[str, Any]:
    return dict(_ok(api.get(f"/api/v1/webhook-endpoints/{eid}")))


@pytest.mark.slow
def test_a_receiver_sees_each_recipients_events_signed_and_in_order(
    ws: Workspace, receiver: Receiver
) -> None:
    _, api, eid = _setup(ws, receiver)
    cid = _campaign(api, "Spring sale")
    wait_for(lambda: _done(api, cid), timeout=120, what="the campaign to finish")
    wait_for(lambda: _finished(receiver, cid), timeout=60, what="every recipient's last event")
    _assert_in_order(receiver, cid)
    got = _by_recipient(receiver, cid)
    assert [t for t, seq in got.items() if seq[-1] == "delivery.failed"] == [f"+{NOT_ON_APP}"]

    def states() -> list[str]:
        return [
            e["data"]["to"]
            for e in receiver.of_type("campaign.state_changed")
            if e["data"]["campaign_id"] == cid
        ]

    # the campaign completes after its last recipient's event: its message may come later
    wait_for(
        lambda: "completed" in states(), timeout=60, what="campaign.state_changed to completed"
    )
    assert states()[-1] == "completed", states()
    assert any(e["data"]["to"] == "connected" for e in receiver.of_type("instance."))

    wait_for(lambda: _endpoint(api, eid)["messages"]["pending"] == 0, what="the outbox to empty")
    shown = _endpoint(api, eid)
    assert shown["messages"]["failed"] == 0
    assert shown["messages"]["delivered"] == len(set(receiver.ids))
    log = _ok(api.get(f"/api/v1/webhook-endpoints/{eid}/deliveries", params={"limit": 5}))
    assert log["total"] >= shown["messages"]["delivered"]
    assert {a["status_code"] for a in log["items"]} == {200}
    # a recipient answers STOP: the reply, then the opt-out, in that order
    olivia = "12025550143"
    iid = _ok(api.get("/api/v1/instances"))["items"][0]["instance_id"]
    httpx.post(
        f"{ws.gateway_url}/sandbox/instances/{iid}/incoming",
        json={"from": olivia, "text": "STOP"},
        timeout=10,
    ).raise_for_status()
    opted = wait_for(lambda: receiver.of_type("contact.opted_out"), what="the opt-out to be told")
    assert opted[0]["data"]["phone"] == f"+{olivia}", opted
    with receiver._lock:
        kinds = [
            e["type"]
            for e in receiver.events
            if e["type"] in ("reply.received", "contact.opted_out")
        ]
    assert kinds[:2] == ["reply.received", "contact.opted_out"], kinds
    assert receiver.of_type("reply.received")[0]["data"]["text"] == "STOP"
    # the CLI lists the same endpoint
    listed = ws.run("webhook-endpoints", "list").output
    assert receiver.url in listed and "enabled" in listed


@pytest.mark.slow
def test_a_receiver_down_for_a_while_loses_nothing(ws: Workspace, receiver: Receiver) -> None:
    _, api, eid = _setup(ws, receiver)
    receiver.stop()  # connections refused from now on
    cid = _campaign(api, "While it is down")
    wait_for(lambda: _done(api, cid), timeout=120, what="the campaign to finish")
    wait_for(
        lambda: "could not connect" in ws.run("webhook-endpoints", "deliveries", str(eid)).output,
        what="failed attempts in the delivery log",
    )
    waiting = _endpoint(api, eid)
    assert waiting["messages"]["pending"] > 0 and waiting["consecutive_failures"] > 0
    assert waiting["enabled"]

    receiver.start()
    wait_for(lambda: _finished(receiver, cid), timeout=90, what="the backlog to arrive")
    _assert_in_order(receiver, cid)
    wait_for(lambda: _endpoint(api, eid)["messages"]["pending"] == 0, what="the outbox to empty")
    shown = _endpoint(api, eid)
    assert shown["messages"]["failed"] == 0 and shown["consecutive_failures"] == 0
    assert shown["messages"]["delivered"] == len(set(receiver.ids))  # nothing lost
    shown_cli = ws.run("webhook-endpoints", "show", str(eid)).output
    assert "0 waiting" in shown_cli and "0 failed" in shown_cli


def test_cli_manages_endpoints(ws: Workspace) -> None:
    bad = ws.run("webhook-endpoints", "add", "file:///etc/passwd", ok=False)
    assert bad.code == 1 and "url: must start with http:// or https://" in bad.output
    added = ws.run(
        "webhook-endpoints",
        "add",
        "https://x.example/h",
        "--events",
        "delivery.sent,reply.received",
    ).output
    assert "whsec_" in added and "delivery.sent, reply.received" in added
    assert "whsec_" not in ws.run("webhook-endpoints", "list").output
    assert (
        "0 messages" in ws.run("webhook-endpoints", "replay", "1", "--since", "2026-01-01").output
    )
    assert "removed" in ws.run("webhook-endpoints", "remove", "1").output
    gone = ws.run("webhook-endpoints", "deliveries", "1", ok=False)
    assert gone.code == 1 and "no webhook endpoint 1" in gone.output
