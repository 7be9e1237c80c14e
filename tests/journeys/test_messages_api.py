"""An integrator's CRM sends single messages with ``POST /api/v1/messages`` to a running
``gatecast serve`` and a ``gatecast sandbox`` gateway: they go through the paced path
(the daily cap holds the third, an opted-out contact's is skipped), a repeated
``Idempotency-Key`` makes one message, ``GET /messages/{id}`` says where each is, and a
subscribed webhook receiver gets each message's events with the integrator's metadata.
An operator answers a reply from the inbox the same way (``POST /replies/{id}/answer``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.journeys.harness import (
    Process,
    Workspace,
    assert_problem,
    link_sender_over_api,
    wait_for,
)
from tests.journeys.harness import ok as _ok
from tests.webhook_receiver import Receiver

PHONES = ("+12125550761", "+12125550762", "+12125550763")
OPTED_OUT = "+12125550764"
#: a sender allowed two sends a day, sending as fast as it may
PACE = {"per_minute": 0, "delay_seconds": [0, 0], "daily_cap": 2}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def _received(sandbox: Process, phone: str) -> list[str]:
    got = httpx.get(f"{sandbox.url}/sandbox/messages", params={"to": phone.lstrip("+")}, timeout=10)
    return [str(m["payload"]) for m in got.json()]


def _send(api: httpx.Client, to: str, n: int, key: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {
        "to": to,
        "message": {"type": "text", "text": f"Your order {n} has shipped"},
        "pace": PACE,
        "metadata": {"crm_ticket": f"T-{n}", "n": n},
    }
    headers = {"Idempotency-Key": key} if key else {}
    return api.post("/api/v1/messages", json=body, headers=headers)


def test_messages_are_paced_capped_opted_out_idempotent_and_echo_metadata(
    ws: Workspace, sandbox_process: Process, receiver: Receiver
) -> None:
    server = ws.serve()
    api = server.api()
    endpoint = _ok(
        api.post("/api/v1/webhook-endpoints", json={"url": receiver.url, "events": ["*"]}), 201
    )
    receiver.secret = endpoint["secret"]
    link_sender_over_api(api)
    contact = _ok(api.post("/api/v1/contacts", json={"phone": OPTED_OUT, "name": "Ola"}), 201)
    _ok(api.post("/api/v1/contacts/bulk/opt-out", json={"ids": [contact["id"]]}))

    # the same Idempotency-Key twice: one message
    first = _send(api, PHONES[0], 1, key="crm-order-1")
    again = _send(api, PHONES[0], 1, key="crm-order-1")
    assert first.status_code == again.status_code == 201, (first.text, again.text)
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json()["id"] == first.json()["id"]
    ids = [first.json()["id"]]
    ids += [_ok(_send(api, phone, n), 201)["id"] for n, phone in enumerate(PHONES[1:], 2)]
    skipped_id = _ok(_send(api, OPTED_OUT, 4), 201)["id"]
    assert len(set(ids)) == 3

    def states() -> dict[int, dict[str, Any]]:
        return {i: _ok(api.get(f"/api/v1/messages/{i}")) for i in [*ids, skipped_id]}

    def settled() -> dict[int, dict[str, Any]] | None:
        now = states()
        done = [m for m in now.values() if m["state"] in ("sent", "delivered", "read")]
        waiting = [m for m in now.values() if m["state"] == "queued" and m["hold"]]
        ok = len(done) == 2 and len(waiting) == 1 and now[skipped_id]["state"] == "skipped"
        return now if ok else None

    found = wait_for(settled, what="two messages sent, one held by the daily cap")
    # the opted-out contact's message is skipped with the reason
    assert found[skipped_id]["reason"] == "opted out", found[skipped_id]
    assert _received(sandbox_process, OPTED_OUT) == []
    # the third waits for the next day with the reason, and the gateway never got it
    held = next(m for m in found.values() if m["state"] == "queued")
    assert held["hold"]["kind"] == "daily_cap", held
    assert "daily cap" in held["hold"]["words"], held
    assert _received(sandbox_process, held["to"]) == []
    # the two sent are in the sandbox's record, each once
    for m in found.values():
        if m["state"] in ("sent", "delivered", "read"):
            got = _received(sandbox_process, m["to"])
            assert len(got) == 1 and "has shipped" in got[0], got
            assert m["message_id"] and m["sender"]

    # the receiver gets each sent message's events with its metadata
    def events() -> list[dict[str, Any]] | None:
        got = receiver.of_type("delivery.sent")
        return got if len(got) == 2 else None

    sent_events = wait_for(events, what="two delivery.sent events")
    by_campaign = {e["data"]["campaign_id"]: e["data"] for e in sent_events}
    for mid, m in found.items():
        if m["state"] in ("sent", "delivered", "read"):
            data = by_campaign[mid]
            assert (
                data["metadata"]
                == m["metadata"]
                == {"crm_ticket": f"T-{ids.index(mid) + 1}", "n": ids.index(mid) + 1}
            )
            assert data["to"] == m["to"]

    # the skipped message's events (its campaign's states) carry its metadata too
    def skipped_events() -> list[dict[str, Any]]:
        about = [e for e in receiver.of_type("campaign.") if e["data"]["campaign_id"] == skipped_id]
        return [e for e in about if e["data"]["to"] == "completed"]

    done = wait_for(skipped_events, what="the skipped message's campaign.state_changed")
    assert done[0]["data"]["metadata"] == {"crm_ticket": "T-4", "n": 4}, done
    assert receiver.bad_signatures == 0

    # the campaign list is not flooded by messages
    assert _ok(api.get("/api/v1/campaigns"))["total"] == 0
    assert api.get("/api/v1/messages/999999").status_code == 404


def test_refused_messages_name_the_field(ws: Workspace) -> None:
    api = ws.serve().api()
    bad_phone = api.post(
        "/api/v1/messages", json={"to": "not a phone", "message": {"type": "text", "text": "Hi"}}
    )
    assert assert_problem(bad_phone, 422, "invalid_request")["errors"][0]["loc"] == ["body", "to"]
    big = {
        "to": PHONES[0],
        "message": {"type": "text", "text": "Hi"},
        "metadata": {"x": "y" * 5000},
    }
    too_big = assert_problem(api.post("/api/v1/messages", json=big), 422, "invalid_request")
    assert "4096" in str(too_big), too_big
    bad_message = {"to": PHONES[0], "message": {"type": "text"}}
    problem = api.post("/api/v1/messages", json=bad_message)
    assert problem.status_code == 422 and "message.text" in problem.text, problem.text
    # nothing was stored: no contact was made for a refused message
    assert _ok(api.get("/api/v1/contacts"))["total"] == 0


def test_an_operator_answers_a_reply_from_the_inbox(
    ws: Workspace, sandbox_process: Process
) -> None:
    """A person writes in; an operator finds it among the unhandled replies, answers it
    over the API; the person gets the answer from the sender they wrote to, and the
    reply leaves the unhandled list (issue 32, item 4)."""
    api = ws.serve().api()
    iid = link_sender_over_api(api)
    writer = "+12125550771"
    httpx.post(
        f"{sandbox_process.url}/sandbox/instances/{iid}/incoming",
        json={"from": writer.lstrip("+"), "text": "Where is my order?"},
        timeout=10,
    ).raise_for_status()

    def unhandled() -> dict[str, Any] | None:
        page = _ok(api.get("/api/v1/replies", params={"handled": "false"}))
        return page if page["total"] == 1 else None

    reply = wait_for(unhandled, what="the reply in the inbox")["items"][0]
    assert reply["text"] == "Where is my order?" and reply["handled_at"] is None
    body = {"text": "It ships today", "metadata": {"ticket": "T-9"}}
    key = {"Idempotency-Key": "answer-1"}
    answer = _ok(api.post(f"/api/v1/replies/{reply['id']}/answer", json=body, headers=key), 201)
    assert answer["to"] == writer and answer["metadata"] == {"ticket": "T-9"}
    again = api.post(f"/api/v1/replies/{reply['id']}/answer", json=body, headers=key)
    assert again.headers.get("Idempotent-Replayed") == "true" and again.json() == answer

    def sent() -> dict[str, Any] | None:
        m = _ok(api.get(f"/api/v1/messages/{answer['id']}"))
        return m if m["state"] in ("sent", "delivered", "read") else None

    done = wait_for(sent, what="the answer sent")
    assert done["sender"] == iid
    answers = [got for got in _received(sandbox_process, writer) if "It ships today" in got]
    assert len(answers) == 1, answers  # the repeated key made no second message
    assert _ok(api.get("/api/v1/replies", params={"handled": "false"}))["total"] == 0
    handled = _ok(api.get("/api/v1/replies", params={"handled": "true"}))["items"]
    assert [r["id"] for r in handled] == [reply["id"]] and handled[0]["handled_at"]
    # marking it handled again changes nothing; an unknown reply is a 404
    again = _ok(api.post(f"/api/v1/replies/{reply['id']}/handled"))
    assert again["handled_at"] == handled[0]["handled_at"]
    assert api.post("/api/v1/replies/999999/answer", json={"text": "Hi"}).status_code == 404
    assert api.post("/api/v1/replies/999999/handled").status_code == 404
    # the answer is no campaign of the list
    assert _ok(api.get("/api/v1/campaigns"))["total"] == 0
