"""Webhook events from the sandbox, read back through ``parse_webhook`` (both dialects)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gateway.event_parsing import parse_webhook
from gateway.events import (
    ConnectionStatus,
    DeliveryStatus,
    Event,
    IncomingMessage,
    MessageStatus,
    Presence,
    QrCode,
    UnknownEvent,
)
from gateway.sandbox import Sandbox, SandboxConfig, WebhookSink, run_sandbox_in_thread

TOKEN = "sandbox-token"
HTTP = httpx.Client(timeout=10)  # one client: httpx.get() builds an SSL context per call
RANK = {
    DeliveryStatus.PENDING: 0,
    DeliveryStatus.SENT: 1,
    DeliveryStatus.DELIVERED: 2,
    DeliveryStatus.READ: 3,
    DeliveryStatus.PLAYED: 4,
}


def _hook(sb: Sandbox, iid: str, url: str) -> None:
    method = "GET" if sb.config.dialect == "reference" else "POST"
    params = {"instance_id": iid, "access_token": TOKEN, "webhook_url": url, "enable": "true"}
    assert HTTP.request(method, f"{sb.url}/api/set_webhook", params=params).json()["status"] == (
        "success"
    )


def _send(sb: Sandbox, iid: str, number: str, text: str = "hi") -> str:
    params = {"number": number, "type": "text", "message": text, "instance_id": iid}
    body = HTTP.get(f"{sb.url}/api/send", params={**params, "access_token": TOKEN}).json()
    mid: str = body["message"]["key"]["id"]
    return mid


def _events(sink: WebhookSink) -> list[Event]:
    out: list[Event] = []
    for body in list(sink.bodies):
        out.extend(parse_webhook(body))
    return out


def _final_states(events: list[Event]) -> dict[str, str]:
    """Forward-only application of statuses, as gatecast does (failed is terminal)."""
    final: dict[str, DeliveryStatus] = {}
    for e in events:
        if not isinstance(e, MessageStatus):
            continue
        cur = final.get(e.message_id)
        if e.status is DeliveryStatus.FAILED or cur is None:
            final[e.message_id] = e.status if cur is not DeliveryStatus.FAILED else cur
        elif cur is not DeliveryStatus.FAILED and RANK[e.status] > RANK[cur]:
            final[e.message_id] = e.status
    return {k: str(v) for k, v in final.items()}


@pytest.mark.parametrize("dialect", ["spec", "reference"])
@pytest.mark.parametrize("messy", [False, True], ids=["ordered", "dup+reorder"])
def test_events_reach_the_webhook_and_match_the_truth(
    webhook_sink: WebhookSink, dialect: str, messy: bool
) -> None:
    cfg = SandboxConfig(
        dialect="spec" if dialect == "spec" else "reference",
        seed=7,
        status_delays=(0.01, 0.02, 0.03),
        not_on_app=frozenset({"15550009999"}),
        read_rate=0.5,
        reply_rate=0.3,
        stop_rate=0.2,
        presence_events=True,
        duplicate_event_rate=0.5 if messy else 0.0,
        reorder_events=messy,
    )
    with run_sandbox_in_thread(cfg) as sb:
        iid = sb.create_linked_instance()
        _hook(sb, iid, webhook_sink.url)
        numbers = [f"1555000{i:04d}" for i in range(40)] + ["15550009999"]
        sent = {_send(sb, iid, n): n for n in numbers}
        assert sb.wait_idle(15)
        events = _events(webhook_sink)
        truth = {m["message_id"]: m for m in HTTP.get(f"{sb.url}/sandbox/messages").json()}
        stats = sb.stats()
    assert set(truth) == set(sent)
    assert stats["webhook_failed"] == 0 and stats["events_pending"] == 0
    final = _final_states(events)
    assert final == {mid: m["status"] for mid, m in truth.items()}
    failed = [
        e for e in events if isinstance(e, MessageStatus) and e.status is DeliveryStatus.FAILED
    ]
    assert {e.message_id for e in failed} == {mid for mid, n in sent.items() if n == "15550009999"}
    assert all(e.error_code == "404" for e in failed)
    incoming = [e for e in events if isinstance(e, IncomingMessage)]
    replied = {m["to"]: m["replied"] for m in truth.values() if m["replied"]}
    assert replied and "STOP" in replied.values()
    assert {e.sender_phone: e.text for e in incoming} == replied
    assert all(e.instance_id == iid for e in events if not isinstance(e, ConnectionStatus))
    assert any(isinstance(e, Presence) for e in events)


def test_reference_dialect_exercises_every_shape(webhook_sink: WebhookSink) -> None:
    cfg = SandboxConfig(
        dialect="reference", seed=3, status_delays=(0.0, 0.01, 0.02), reply_rate=1.0
    )
    with run_sandbox_in_thread(cfg) as sb:
        iid = sb.create_linked_instance()
        _hook(sb, iid, webhook_sink.url)
        for i in range(30):
            _send(sb, iid, f"1555000{i:04d}")
        assert sb.wait_idle(15)
    raw = [json.loads(b) for b in webhook_sink.bodies]
    names = {b["data"]["event"] for b in raw}
    assert {"messages.update", "messages.upsert"} <= names
    upserts = [b["data"]["data"] for b in raw if b["data"]["event"] == "messages.upsert"]
    assert any(isinstance(p, list) for p in upserts) and any(isinstance(p, dict) for p in upserts)
    stamps = [
        m["messageTimestamp"]
        for p in upserts
        for m in (p if isinstance(p, list) else p["messages"])
    ]
    assert any(isinstance(t, str) for t in stamps) and any(isinstance(t, int) for t in stamps)
    statuses = [
        m.get("status")
        for p in upserts
        for m in (p if isinstance(p, list) else p["messages"])
        if "status" in m
    ]
    assert any(isinstance(s, str) for s in statuses) and any(isinstance(s, int) for s in statuses)


def test_qr_and_connection_events(sandbox: Sandbox, webhook_sink: WebhookSink) -> None:
    iid = HTTP.post(f"{sandbox.url}/api/create_instance", params={"access_token": TOKEN}).json()[
        "instance_id"
    ]
    _hook(sandbox, iid, webhook_sink.url)
    qr = HTTP.post(
        f"{sandbox.url}/api/get_qrcode", params={"instance_id": iid, "access_token": TOKEN}
    ).json()
    sandbox.scan(iid, phone="15557654321")
    assert sandbox.wait_idle(15)
    events = _events(webhook_sink)
    assert QrCode(iid, qr["base64"]) in events
    states = [e.state for e in events if isinstance(e, ConnectionStatus)]
    assert states == ["waiting_scan", "connected"]
    assert [e.phone for e in events if isinstance(e, ConnectionStatus)][-1] == "15557654321"


def test_webhook_failures_are_swallowed_and_counted() -> None:
    with (
        WebhookSink(status=500) as sink,
        run_sandbox_in_thread(SandboxConfig(status_delays=(0.0, 0.0, 0.0))) as sb,
    ):
        iid = sb.create_linked_instance()
        # the linking events are due at once: let them go nowhere before the hook is set,
        # or the emitter (which looks the URL up when an event falls due) posts them too
        assert sb.wait_idle(15)
        _hook(sb, iid, sink.url)
        _send(sb, iid, "15551112222")
        assert sb.wait_idle(15)
        stats = sb.stats()
        assert stats["webhook_failed"] == 3 and stats["webhook_delivered"] == 0
        page = HTTP.get(f"{sb.url}/sandbox/events").json()
        status_events = [e for e in page["events"] if e["event"] == "status"]
        assert [e["delivered"] for e in status_events] == [False, False, False]
        assert status_events[0]["error"] == "HTTP 500"
        # events before the webhook was set are recorded, and say why they went nowhere
        assert {e["error"] for e in page["events"] if e["event"] != "status"} == {"no webhook"}
        # the truth moved on anyway: the gateway does not care whether we listened
        assert sb.messages()[0]["status"] == "read"


def test_incoming_message_injection(sandbox: Sandbox, webhook_sink: WebhookSink) -> None:
    iid = sandbox.create_linked_instance()
    _hook(sandbox, iid, webhook_sink.url)
    resp = HTTP.post(
        f"{sandbox.url}/sandbox/instances/{iid}/incoming",
        json={"from": "15553334444", "text": "STOP"},
    )
    mid = resp.json()["message_id"]
    assert sandbox.wait_idle(15)
    incoming = [e for e in _events(webhook_sink) if isinstance(e, IncomingMessage)]
    assert [(e.message_id, e.sender_phone, e.text) for e in incoming] == [
        (mid, "15553334444", "STOP")
    ]


def _run_seeded(seed: int) -> list[Any]:
    cfg = SandboxConfig(seed=seed, status_delays=(0.0, 0.0, 0.0), read_rate=0.5, reply_rate=0.5)
    with run_sandbox_in_thread(cfg) as sb:
        sb.state.clock = lambda: 1_700_000_000.0
        iid = sb.create_linked_instance()
        ids = [_send(sb, iid, f"1555000{i:04d}") for i in range(10)]
        assert sb.wait_idle(15)
        return [ids, [(m["status"], m["replied"]) for m in sb.messages()]]


def test_deterministic_for_a_seed() -> None:
    assert _run_seeded(11) == _run_seeded(11)
    assert _run_seeded(11) != _run_seeded(12)


def test_inspection_views_hide_the_webhook_path(
    sandbox: Sandbox, webhook_sink: WebhookSink
) -> None:
    iid = sandbox.create_linked_instance()
    secret_url = webhook_sink.url + "/s3cr3t-path?k=v"
    _hook(sandbox, iid, secret_url)
    _send(sandbox, iid, "15551112223")
    assert sandbox.wait_idle(15)
    views = (
        HTTP.get(f"{sandbox.url}/sandbox/events").text
        + HTTP.get(f"{sandbox.url}/sandbox/instances").text
    )
    assert "s3cr3t" not in views and "/***" in views
    assert webhook_sink.wait_for(3)  # the events still went to the full address


def test_reference_contact_noise_parses_as_unknown(webhook_sink: WebhookSink) -> None:
    cfg = SandboxConfig(dialect="reference", status_delays=(0.0, 0.0, 0.0), reply_rate=1.0)
    with run_sandbox_in_thread(cfg) as sb:
        iid = sb.create_linked_instance()
        _hook(sb, iid, webhook_sink.url)
        _send(sb, iid, "15551112224")
        assert sb.wait_idle(15)
    events = _events(webhook_sink)
    assert UnknownEvent(iid, "contacts.upsert") in events
    assert sum(isinstance(e, IncomingMessage) for e in events) == 1


def test_event_and_message_paging(sandbox: Sandbox) -> None:
    iid = sandbox.create_linked_instance()
    ids = [_send(sandbox, iid, f"1555222{i:04d}") for i in range(5)]
    page = HTTP.get(f"{sandbox.url}/sandbox/messages", params={"since": 1, "limit": 2}).json()
    assert [m["message_id"] for m in page] == ids[1:3]
    idle = HTTP.get(f"{sandbox.url}/sandbox/idle", params={"timeout": 5}).json()
    assert idle == {"idle": True, "pending": 0}
    first = HTTP.get(f"{sandbox.url}/sandbox/events", params={"limit": 4}).json()
    rest = HTTP.get(f"{sandbox.url}/sandbox/events", params={"since": first["next"]}).json()
    seqs = [e["seq"] for e in first["events"] + rest["events"]]
    assert seqs == list(range(first["total"])) and len(first["events"]) == 4
    status_ids = {
        e["message_id"] for e in first["events"] + rest["events"] if e["event"] == "status"
    }
    assert status_ids == set(ids)


@pytest.mark.slow
def test_soak_with_faults_truth_matches_parsed_events(webhook_sink: WebhookSink) -> None:
    """2,000 recipients through every fault at once; retry only what was refused."""
    cfg = SandboxConfig(
        dialect="reference",
        seed=99,
        status_delays=(0.01, 0.05, 0.1),
        fault_rate_5xx=0.05,
        fault_rate_429=0.05,
        drop_rate=0.03,
        slow_rate=0.02,
        slow_seconds=0.5,
        backend_down_rate=0.02,
        no_key_rate=0.02,
        not_on_app_rate=0.05,
        read_rate=0.7,
        reply_rate=0.1,
        stop_rate=0.05,
        duplicate_event_rate=0.2,
        reorder_events=True,
        presence_events=True,
    )
    numbers = [f"1666{i:07d}" for i in range(2000)]
    with run_sandbox_in_thread(cfg) as sb, httpx.Client(timeout=0.2) as client:
        iid = sb.create_linked_instance()
        _hook(sb, iid, webhook_sink.url)
        for n in numbers:
            for _ in range(10):
                params = {"number": n, "type": "text", "message": "soak", "instance_id": iid}
                try:
                    resp = client.get(
                        f"{sb.url}/api/send", params={**params, "access_token": TOKEN}
                    )
                except (httpx.ReadTimeout, httpx.RemoteProtocolError):
                    break  # ambiguous: never resent
                if resp.status_code in (429, 500, 502, 503) or resp.text == '{"status":"success"}':
                    continue  # refused before sending: safe to retry
                break
        assert sb.wait_idle(120)
        truth = {m["message_id"]: m for m in sb.messages()}
        stats = sb.stats()
    assert stats["recipients_with_several"] == []
    assert len(truth) > 1900
    final = _final_states(_events(webhook_sink))
    assert final == {mid: m["status"] for mid, m in truth.items()}


def test_each_event_carries_the_time_it_happened(webhook_sink: WebhookSink) -> None:
    """Statuses and the reply are stamped when they happen, not with the send's time."""
    cfg = SandboxConfig(seed=3, status_delays=(0.0, 1.1, 2.2), reply_rate=1.0)
    with run_sandbox_in_thread(cfg) as sb:
        iid = sb.create_linked_instance()
        _hook(sb, iid, webhook_sink.url)
        mid = _send(sb, iid, "15550001234")
        assert sb.wait_idle(15)
        events = _events(webhook_sink)
    at = {e.status: e.at for e in events if isinstance(e, MessageStatus) and e.message_id == mid}
    reply = [e for e in events if isinstance(e, IncomingMessage)]
    sent_at, read_at = at[DeliveryStatus.SENT], at[DeliveryStatus.READ]
    assert sent_at is not None and read_at is not None
    assert (read_at - sent_at).total_seconds() >= 2
    assert reply and reply[0].at is not None and reply[0].at >= read_at


def test_replies_quote_the_message_they_answer() -> None:
    """A choice always quotes its message; text replies quote it at ``quote_rate``."""
    import random

    from gateway.sandbox.planning import reply_job
    from gateway.sandbox.records import SentMessage

    buttons = [
        {
            "name": "quick_reply",
            "buttonParamsJson": json.dumps({"id": "yes", "display_text": "Yes"}),
        }
    ]
    kinds: dict[str, dict[str, Any]] = {
        "interactive": {"message": {"interactiveButtons": buttons}},
        "text": {"message": {"text": "hello"}},
    }
    for rate, quoted_texts in ((0.0, 0), (1.0, 20)):
        cfg = SandboxConfig(dialect="reference", reply_rate=1.0, quote_rate=rate)
        rng = random.Random(7)
        texts = 0
        for i in range(20):
            for kind, payload in kinds.items():
                msg = SentMessage(f"3EB0{kind}{i}", "I1", "15551234567", "", kind, payload, 0.0, "")
                body = reply_job(cfg, rng, msg).body
                assert body is not None
                [event] = parse_webhook(body)
                assert isinstance(event, IncomingMessage)
                if kind == "interactive":
                    assert (event.button_id, event.quoted_id) == ("yes", msg.id)
                else:
                    texts += event.quoted_id == msg.id
        assert texts == quoted_texts
