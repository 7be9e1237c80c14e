"""An integrator subscribes to the events it acts on and sees each arise from a real
cause, over real HTTP against ``gatecast serve`` and the sandbox (decision 67): the
sender linked (``instance.connected``), an import (``import.finished`` with its counts),
a STOP reply (``contact.opted_out``), an opt-in over the API (``contact.opted_in``), an
opted-out recipient of a campaign (``delivery.skipped``), pausing and resuming the
sender over the API (``sender.paused``, ``sender.resumed``), a logout from the phone
(``instance.disconnected``). Every request is verified with the documented signature
scheme (``standardwebhooks`` is not a dependency here: the project's own verifier), and
every body validates against the schema the OpenAPI document's ``webhooks`` declares.
The same server answers every request with its ``X-Request-Id``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from campaigns import webhook_events
from tests.journeys.harness import Workspace, assert_problem, import_samples, wait_for
from tests.journeys.harness import ok as _ok
from tests.webhook_receiver import Receiver

NEW_EVENTS = [
    "instance.connected",
    "instance.disconnected",
    "import.finished",
    "contact.opted_out",
    "contact.opted_in",
    "delivery.skipped",
    "delivery.unknown",
    "sender.paused",
    "sender.resumed",
    "sender.health_changed",
]
OLIVIA = "12025550143"  # samples/contacts.csv: she answers STOP
LIAM = "14155550178"  # samples/contacts.csv: opted out, then back in over the API


def _events(receiver: Receiver, kind: str) -> list[dict[str, Any]]:
    with receiver._lock:
        return [dict(e["data"]) for e in receiver.events if e["type"] == kind]


def _first(receiver: Receiver, kind: str, **match: Any) -> dict[str, Any]:
    """Wait for the first ``kind`` event whose data holds ``match``."""

    def found() -> dict[str, Any] | None:
        for data in _events(receiver, kind):
            if all(data.get(k) == v for k, v in match.items()):
                return data
        return None

    got: dict[str, Any] = wait_for(found, timeout=60, what=f"a {kind} event {match}")
    return got


def _contact_id(api: httpx.Client, digits: str) -> int:
    items = _ok(api.get("/api/v1/contacts", params={"q": digits}))["items"]
    assert len(items) == 1, items
    return int(items[0]["id"])


@pytest.mark.parametrize(
    "database",
    ["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, pytest.mark.slow])],
)
def test_each_state_an_integrator_acts_on_arrives_as_a_signed_event(
    ws: Workspace, database: str, request: pytest.FixtureRequest
) -> None:
    if database == "postgresql":
        ws.settings["GATECAST_DATABASE_URL"] = str(request.getfixturevalue("pg_url"))
        ws.run("db", "upgrade")
    receiver = Receiver()
    try:
        server = ws.serve(GATECAST_ACCESS_LOG="true")
        api = server.api()
        declared = _ok(api.get("/openapi.json"))["webhooks"]
        assert set(NEW_EVENTS) <= set(declared)
        created = _ok(
            api.post("/api/v1/webhook-endpoints", json={"url": receiver.url, "events": NEW_EVENTS}),
            201,
        )
        receiver.secret = created["secret"]

        # request ids: kept when sane, else made; echoed in a problem
        given = api.get("/api/v1/instances", headers={"X-Request-Id": "crm-7f3a.1"})
        assert given.headers["x-request-id"] == "crm-7f3a.1"
        made = api.get("/api/v1/instances", headers={"X-Request-Id": "bad id\twith spaces"})
        assert made.headers["x-request-id"] not in ("", "bad id\twith spaces")
        missing = api.get("/api/v1/campaigns/987654", headers={"X-Request-Id": "crm-404"})
        assert assert_problem(missing, 404, "not_found")["request_id"] == "crm-404"
        assert missing.headers["x-request-id"] == "crm-404"
        wait_for(  # the access log names it
            lambda: "request_id=crm-404" in server.process.output(), what="the access line"
        )

        # the sender is linked: instance.connected
        iid = _ok(api.post("/api/v1/instances", json={"label": "shop"}), 201)["instance_id"]
        api.post(f"/api/v1/instances/{iid}/link")
        connected = _first(receiver, "instance.connected", instance_id=iid)
        assert connected["label"] == "shop" and connected["to"] == "connected"

        # an import: import.finished with the counts the import reports
        job = import_samples(api)
        finished = _first(receiver, "import.finished", import_id=job["id"])
        run = _ok(api.get(f"/api/v1/imports/{job['id']}"))
        assert finished["status"] == run["status"] == "completed"
        assert finished["imported"] == run["imported"] == 44
        assert (finished["invalid"], finished["filename"]) == (run["invalid"], "contacts.csv")

        # a STOP reply: contact.opted_out; an opt-out lifted over the API: contact.opted_in
        httpx.post(
            f"{ws.gateway_url}/sandbox/instances/{iid}/incoming",
            json={"from": OLIVIA, "text": "STOP"},
            timeout=10,
        ).raise_for_status()
        olivia = _first(receiver, "contact.opted_out", phone="+" + OLIVIA)
        liam = _contact_id(api, LIAM)
        _ok(api.post(f"/api/v1/contacts/{liam}/opt-out", json={"reason": "asked by phone"}))
        _ok(api.post(f"/api/v1/contacts/{liam}/opt-in"))
        opted_in = _first(receiver, "contact.opted_in", contact_id=liam)
        assert opted_in["reason"] == "asked by phone"

        # a campaign to the list: Olivia is skipped, Liam is not
        body = {
            "name": "Winter sale",
            "list": "customers",
            "message": {"type": "text", "text": "Hello {{ name }}"},
            "pace": {"per_minute": 1200, "delay_seconds": [0, 0.05]},
        }
        cid = int(_ok(api.post("/api/v1/campaigns", json=body), 201)["id"])
        skipped = _first(receiver, "delivery.skipped", contact_id=olivia["contact_id"])
        assert skipped["campaign_id"] == cid and skipped["to"] == "+" + OLIVIA
        wait_for(
            lambda: _ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["done"],
            timeout=120,
            what="the campaign to finish",
        )
        assert [s for s in _events(receiver, "delivery.skipped") if s["contact_id"] == liam] == []

        # pausing and resuming the sender over the API
        paused = _ok(
            api.post(f"/api/v1/instances/{iid}/pause", json={"reason": "checking the account"})
        )
        assert paused["detail"] == "paused"
        said = _first(receiver, "sender.paused", instance_id=iid)
        assert said["reason"] == "paused by a person: checking the account"
        too_long = api.post(f"/api/v1/instances/{iid}/pause", json={"reason": "x" * 401})
        assert "reason" in str(assert_problem(too_long, 422, "invalid_request"))
        _ok(api.post(f"/api/v1/instances/{iid}/resume"))
        resumed = _first(receiver, "sender.resumed", instance_id=iid)
        assert resumed["reason"] == said["reason"]

        # the phone logs the sender out: instance.disconnected
        httpx.post(
            f"{ws.gateway_url}/sandbox/instances/{iid}/logout", timeout=10
        ).raise_for_status()
        gone = _first(receiver, "instance.disconnected", instance_id=iid)
        assert gone["from"] == "connected" and gone["to"] == "logged_out"

        # nothing forged, nothing outside the subscription, every body as declared
        assert receiver.bad_signatures == 0
        with receiver._lock:  # a repeat (at least once) is the same webhook-id
            bodies = list(dict(zip(receiver.ids, receiver.events, strict=True)).values())
        assert {b["type"] for b in bodies} <= set(NEW_EVENTS)
        for b in bodies:
            webhook_events.validate(b)
        ids = [b["data"].get("import_id") for b in bodies if b["type"] == "import.finished"]
        assert ids == [job["id"]], "one event per import, sent once"
    finally:
        receiver.stop()
