"""The WAHA dialect: request mapping, answers, webhook events, conformance to WAHA's
request and webhook schemas (tests/gateway/schemas/waha-openapi-subset.json, written from
WAHA's DTOs: docs/sandbox.md names the files), and the client over real HTTP against the
sandbox in the waha dialect (docs/gateways.md)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from gateway.async_client import AsyncGatewayClient
from gateway.client import GatewayClient
from gateway.dialects import refusal_of, waha
from gateway.errors import GatewayError, RequestValidationError
from gateway.event_parsing import parse_webhook
from gateway.events import (
    ConnectionStatus,
    DeliveryStatus,
    IncomingMessage,
    MessageStatus,
    Presence,
    UnknownEvent,
)
from gateway.messages import (
    Button,
    Interactive,
    LegacyTemplate,
    ListMessage,
    ListRow,
    ListSection,
    Media,
    Message,
    TemplateButton,
    Text,
)
from gateway.outcomes import InstanceProblem, OutcomeKind
from gateway.requests import GatewayRequest
from gateway.sandbox import Sandbox, SandboxConfig, WebhookSink, run_sandbox_in_thread

NUMBER = "+1 202 555 0123"
NOT_ON_APP = "12025550143"
GROUP = "120363025246125486@g.us"
SCHEMA = json.loads(
    (Path(__file__).parent / "schemas" / "waha-openapi-subset.json").read_text(encoding="utf-8")
)
BUTTONS = Interactive(
    "Pick one",
    title="Offer",
    footer="Reply STOP to opt out",
    buttons=(
        Button("quick_reply", "Yes", id="yes"),
        Button("cta_url", "Shop", url="https://shop.example"),
        Button("cta_call", "Call", phone_number="+12025550100"),
        Button("cta_copy", "Code", copy_code="SAVE10"),
    ),
)
LIST = ListMessage(
    "Choose a size",
    "Sizes",
    title="Menu",
    footer="Thanks",
    sections=(ListSection("Sizes", rows=(ListRow("Small", "s", "250 ml"), ListRow("Big", "b"))),),
)


def _validator(name: str) -> Draft202012Validator:
    """A validator of one component schema, its refs resolved in the vendored document."""
    return Draft202012Validator(
        {"$ref": f"#/components/schemas/{name}", "components": SCHEMA["components"]}
    )


def _conforms(req: GatewayRequest) -> None:
    """``req`` goes to a route of WAHA's API with that method, and its body (if the route
    takes one) validates against the route's request schema."""
    path = "/" + req.endpoint
    for template, methods in SCHEMA["paths"].items():
        pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(pattern, path) and req.method.lower() in methods:
            operation = methods[req.method.lower()]
            break
    else:
        raise AssertionError(f"{req.method} {path} is not a WAHA route")
    body = operation.get("requestBody")
    if body is None:
        assert req.json is None, req
        return
    ref = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    errors = [e.message for e in _validator(ref).iter_errors(req.json)]
    assert not errors, (req.endpoint, errors, req.json)


def _webhook(event: str, payload: object, **extra: object) -> dict[str, object]:
    """webhooks.core.ts's body (``id`` and ``timestamp`` as later versions add them)."""
    return {
        "id": "evt_01aaaaaaaaaaaaaaaaaaaaaaaa",
        "timestamp": 1765100000000,
        "event": event,
        "session": "ABCDEF0123456789",
        "metadata": {},
        "me": {"id": "12025550100@c.us", "pushName": "Shop"},
        "payload": payload,
        "engine": "NOWEB",
        "environment": {"version": "2025.1.1", "engine": "NOWEB", "tier": "PLUS"},
        **extra,
    }


# ------------------------------------------------------------------------- requests
def test_text_goes_to_send_text_with_the_session_and_chat_id() -> None:
    req = waha.build_send("ABCDEF0123456789", NUMBER, Text("Hi Ana"))
    assert (req.method, req.endpoint) == ("POST", "api/sendText")
    assert req.json == {
        "session": "ABCDEF0123456789",
        "chatId": "12025550123@c.us",
        "text": "Hi Ana",
    }
    assert req.params == {} and req.credentials == "header"  # the key: X-Api-Key header


def test_media_picks_its_route_by_type() -> None:
    routes = {
        "https://cdn.example/a.jpg": "sendImage",
        "https://cdn.example/a.mp4": "sendVideo",
        "https://cdn.example/menu.pdf": "sendFile",
        "https://cdn.example/note.ogg": "sendVoice",
        "https://cdn.example/song.mp3": "sendFile",
    }
    for url, endpoint in routes.items():
        req = waha.build_send("I1", NUMBER, Media(url))
        assert req.endpoint == f"api/{endpoint}", url
    pdf = waha.build_send("I1", NUMBER, Media("https://cdn.example/x", "Menu", "menu.pdf"))
    assert pdf.json == {
        "session": "I1",
        "chatId": "12025550123@c.us",
        "file": {
            "url": "https://cdn.example/x",
            "mimetype": "application/pdf",
            "filename": "menu.pdf",
        },
        "caption": "Menu",
    }
    # a voice note takes no caption: with one, the audio goes as a file
    noted = waha.build_send("I1", NUMBER, Media("https://cdn.example/n.ogg", caption="Hi"))
    assert noted.endpoint == "api/sendFile"


def test_buttons_and_lists_map_to_their_dtos() -> None:
    req = waha.build_send("I1", NUMBER, BUTTONS)
    assert req.endpoint == "api/sendButtons"
    assert req.json == {
        "session": "I1",
        "chatId": "12025550123@c.us",
        "header": "Offer",
        "body": "Pick one",
        "footer": "Reply STOP to opt out",
        "buttons": [
            {"type": "reply", "text": "Yes", "id": "yes"},
            {"type": "url", "text": "Shop", "url": "https://shop.example"},
            {"type": "call", "text": "Call", "phoneNumber": "+12025550100"},
            {"type": "copy", "text": "Code", "copyCode": "SAVE10"},
        ],
    }
    listed = waha.build_send("I1", NUMBER, LIST)
    assert listed.endpoint == "api/sendList"
    assert listed.json is not None and listed.json["message"] == {
        "title": "Menu",
        "description": "Choose a size",
        "button": "Sizes",
        "footer": "Thanks",
        "sections": [
            {
                "title": "Sizes",
                "rows": [
                    {"title": "Small", "rowId": "s", "description": "250 ml"},
                    {"title": "Big", "rowId": "b"},
                ],
            }
        ],
    }


def test_groups_take_text_and_media_at_their_g_us_id() -> None:
    req = waha.build_send("I1", GROUP, Text("Hello all"))
    assert req.json is not None and req.json["chatId"] == GROUP
    with pytest.raises(RequestValidationError, match="groups take text and media only"):
        waha.build_send("I1", GROUP, BUTTONS)


def test_templates_are_refused_at_campaign_create_and_before_any_request() -> None:
    assert refusal_of("waha", "template") is not None
    assert "WAHA cannot send template messages" in str(refusal_of("waha", "template"))
    for kind in ("text", "media", "interactive", "list"):
        assert refusal_of("waha", kind) is None, kind
    template = LegacyTemplate("Hi", buttons=(TemplateButton("Yes", "y"),))
    with pytest.raises(RequestValidationError, match="template"):
        waha.build_send("I1", NUMBER, template)


def test_operations_map_to_session_routes() -> None:
    created = waha.build_operation("create_instance", None, {})
    assert (created.method, created.endpoint) == ("POST", "api/sessions")
    assert created.json is not None and created.json["start"] is True
    assert re.fullmatch(r"[0-9A-F]{16}", created.json["name"])
    qr = waha.build_operation("get_qrcode", "S1", {})
    assert (qr.method, qr.endpoint, qr.params) == ("GET", "api/S1/auth/qr", {"format": "image"})
    hook = waha.build_operation("set_webhook", "S1", {"webhook_url": "https://h.example/w"})
    assert (hook.method, hook.endpoint) == ("PUT", "api/sessions/S1")
    assert hook.json == {
        "config": {
            "webhooks": [
                {
                    "url": "https://h.example/w",
                    "events": ["message.any", "message.ack", "session.status"],
                }
            ]
        }
    }
    off = waha.build_operation(
        "set_webhook", "S1", {"webhook_url": "https://h.example/w", "enable": "false"}
    )
    assert off.json == {"config": {"webhooks": []}}
    assert waha.build_operation("logout", "S1", {}).endpoint == "api/sessions/S1/logout"
    assert waha.build_operation("reboot", "S1", {}).endpoint == "api/sessions/S1/logout"
    assert waha.build_operation("reconnect", "S1", {}).endpoint == "api/sessions/S1/restart"
    with pytest.raises(RequestValidationError, match="WAHA has no reset"):
        waha.build_operation("reset_instance", "S1", {})


def test_every_request_conforms_to_wahas_request_schemas() -> None:
    messages: list[Message] = [
        Text("Hi"),
        Media("https://cdn.example/a.jpg", caption="Look"),
        Media("https://cdn.example/a.mp4"),
        Media("https://cdn.example/n.ogg"),
        Media("https://cdn.example/x", "Menu", "menu.pdf"),
        BUTTONS,
        Interactive("Just one", buttons=(Button("quick_reply", "Ok", id="ok"),)),
        LIST,
    ]
    requests = [waha.build_send("S1", NUMBER, m) for m in messages]
    requests += [waha.build_send("S1", GROUP, m) for m in messages[:2]]
    requests += [
        waha.build_operation(op, "S1", {"webhook_url": "https://h.example/w", "enable": on})
        for op in ("create_instance", "get_qrcode", "logout", "reboot", "reconnect")
        for on in ("true",)
    ]
    for on in ("true", "false"):
        requests.append(
            waha.build_operation("set_webhook", "S1", {"webhook_url": "https://h/w", "enable": on})
        )
    for req in requests:
        _conforms(req)
    # the check can fail: a field WAHA does not know is refused in its strict mode
    wrong = GatewayRequest("POST", "api/sendText", json={"chatId": "1@c.us", "text": "x", "to": 1})
    with pytest.raises(AssertionError):
        _conforms(wrong)


# ------------------------------------------------------------------------- answers
def _classify(status: int, body: object) -> Any:
    return waha.classify_send(status, {}, json.dumps(body).encode())


def test_send_answers_of_each_engine_give_the_bare_message_id() -> None:
    noweb = {"key": {"remoteJid": "1@s.whatsapp.net", "fromMe": True, "id": "BAE5F1"}}
    webjs = {"id": {"fromMe": True, "remote": "1@c.us", "id": "3EB0AB", "_serialized": "x"}}
    serialized = {"id": "true_12025550123@c.us_3EB0CD", "ack": 0}
    for body, mid in ((noweb, "BAE5F1"), (webjs, "3EB0AB"), (serialized, "3EB0CD")):
        outcome = _classify(201, body)
        assert (outcome.kind, outcome.message_id) == (OutcomeKind.ACCEPTED, mid)
    assert _classify(201, {"result": True}).kind is OutcomeKind.AMBIGUOUS


def test_error_answers_are_classified_from_wahas_words() -> None:
    not_working = {
        "error": "Session status is not as expected. Try again later or restart the session",
        "session": "S1",
        "status": "SCAN_QR_CODE",
        "expected": ["WORKING"],
    }
    outcome = _classify(422, not_working)
    assert outcome.problem is InstanceProblem.RELOGIN_REQUIRED
    starting = _classify(422, {**not_working, "status": "STARTING"})
    assert starting.kind is OutcomeKind.RETRYABLE
    missing = _classify(
        404, {"statusCode": 404, "message": "Session not found", "error": "Not Found"}
    )
    assert missing.problem is InstanceProblem.INVALID_INSTANCE
    plus = _classify(
        422,
        {
            "statusCode": 422,
            "message": "Sending media (image, video, pdf) is available only in Plus version.",
            "error": "Unprocessable Entity",
        },
    )
    assert plus.kind is OutcomeKind.PERMANENT and "Plus" in plus.reason
    bad = _classify(400, {"statusCode": 400, "message": ["chatId must be a string"]})
    assert (bad.kind, bad.reason) == (OutcomeKind.PERMANENT, "chatId must be a string")
    assert _classify(401, {"message": "Unauthorized", "statusCode": 401}).problem is (
        InstanceProblem.BAD_TOKEN
    )
    assert _classify(503, {}).kind is OutcomeKind.RETRYABLE


def test_a_qr_asked_of_a_working_session_reads_as_already_logged_in() -> None:
    body = json.dumps(
        {"error": "Session status is not as expected", "status": "WORKING", "expected": ["X"]}
    ).encode()
    with pytest.raises(GatewayError, match="already logged in"):
        waha.interpret_operation("get_qrcode", 422, {}, body)
    qr = waha.interpret_operation(
        "get_qrcode", 200, {}, json.dumps({"mimetype": "image/png", "data": "iVBOR"}).encode()
    )
    assert qr == {"base64": "data:image/png;base64,iVBOR"}


# ------------------------------------------------------------------------- events
def test_acks_are_statuses_of_the_bare_message_id() -> None:
    levels = {
        -1: DeliveryStatus.FAILED,
        1: DeliveryStatus.SENT,
        2: DeliveryStatus.DELIVERED,
        3: DeliveryStatus.READ,
        4: DeliveryStatus.PLAYED,
    }
    names = {-1: "ERROR", 1: "SERVER", 2: "DEVICE", 3: "READ", 4: "PLAYED"}
    for ack, status in levels.items():
        payload = {
            "id": "true_12025550123@c.us_3EB0AA",
            "from": "12025550100@c.us",
            "to": "12025550123@c.us",
            "participant": None,
            "fromMe": True,
            "ack": ack,
            "ackName": names[ack],
        }
        body = _webhook("message.ack", payload)
        assert not list(_validator("Webhook:message.ack").iter_errors(body))
        (event,) = parse_webhook(json.dumps(body))
        assert isinstance(event, MessageStatus)
        assert (event.instance_id, event.message_id, event.status) == (
            "ABCDEF0123456789",
            "3EB0AA",
            status,
        )
    theirs = _webhook("message.ack", {**payload, "fromMe": False})
    assert isinstance(parse_webhook(theirs)[0], UnknownEvent)


def test_message_and_message_any_are_replies_with_taps() -> None:
    data = {
        "key": {"remoteJid": "12025550123@s.whatsapp.net", "fromMe": False, "id": "ABCD"},
        "message": {"listResponseMessage": {"singleSelectReply": {"selectedRowId": "s"}}},
    }
    payload = {
        "id": "false_12025550123@c.us_ABCD",
        "timestamp": 1765100000,
        "from": "12025550123@c.us",
        "fromMe": False,
        "to": "12025550100@c.us",
        "body": "Small",
        "hasMedia": False,
        "_data": data,
        "replyTo": {"id": "true_12025550123@c.us_3EB0AA", "body": "Sizes"},
    }
    for name in ("message", "message.any"):
        body = _webhook(name, payload, engine="GOWS" if name == "message.any" else "NOWEB")
        assert not list(_validator(f"Webhook:{name}").iter_errors(body))
        (event,) = parse_webhook(body)
        assert isinstance(event, IncomingMessage)
        assert (event.message_id, event.text, event.sender_phone) == (
            "ABCD",
            "Small",
            "12025550123",
        )
        assert (event.row_id, event.quoted_id) == ("s", "3EB0AA")
    ours = _webhook("message.any", {**payload, "fromMe": True})
    assert isinstance(parse_webhook(ours)[0], UnknownEvent)  # our own message, echoed


def test_session_status_and_presence() -> None:
    states = {}
    for status in ("WORKING", "SCAN_QR_CODE", "STOPPED", "FAILED", "STARTING"):
        body = _webhook("session.status", {"name": "ABCDEF0123456789", "status": status})
        assert not list(_validator("Webhook:session.status").iter_errors(body))
        (event,) = parse_webhook(body)
        states[status] = event.state if isinstance(event, ConnectionStatus) else None
        if status == "WORKING":
            assert isinstance(event, ConnectionStatus) and event.phone == "12025550100"
    assert states == {
        "WORKING": "connected",
        "SCAN_QR_CODE": "waiting_scan",
        "STOPPED": "disconnected",
        "FAILED": "logged_out",
        "STARTING": None,
    }
    presence = {
        "id": "12025550123@c.us",
        "presences": [{"participant": "12025550123@c.us", "lastKnownPresence": "online"}],
    }
    (event,) = parse_webhook(_webhook("presence.update", presence))
    assert isinstance(event, Presence) and event.status == "available"


# ------------------------------------------------------------------------- over HTTP
@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    cfg = SandboxConfig(
        dialect="waha",
        seed=3,
        not_on_app=frozenset({NOT_ON_APP}),
        status_delays=(0.05, 0.1, 0.2),
    )
    with run_sandbox_in_thread(cfg) as sb:
        yield sb


def _linked(client: GatewayClient, sandbox: Sandbox) -> str:
    iid = client.create_instance()
    qr = client.get_qrcode(iid)
    assert qr.data_uri is not None and qr.data_uri.startswith("data:image/png;base64,")
    httpx.post(f"{sandbox.url}/sandbox/instances/{iid}/scan", timeout=10).raise_for_status()
    return iid


def test_the_client_drives_the_waha_sandbox(sandbox: Sandbox) -> None:
    with GatewayClient(sandbox.url, sandbox.access_token, kind="waha") as client:
        iid = _linked(client, sandbox)
        with pytest.raises(GatewayError, match="already logged in"):  # linked: no QR
            client.get_qrcode(iid)
        for message in (Text("Hi"), Media("https://cdn.example/a.jpg", "Look"), BUTTONS, LIST):
            accepted = client.send(iid, NUMBER, message)
            assert accepted.kind is OutcomeKind.ACCEPTED and accepted.message_id, message
        assert client.send(iid, GROUP, Text("Hello all")).accepted
        # WAHA takes a number not on WhatsApp; the failure comes as message.ack ERROR
        assert client.send(iid, "+" + NOT_ON_APP, Text("Hi")).accepted
        wrong = client.send("NOSUCHNAME", NUMBER, Text("Hi"))
        assert wrong.problem is InstanceProblem.INVALID_INSTANCE
        client.reconnect(iid)
        client.logout(iid)  # WAHA restarts it to a new QR
        closed = client.send(iid, NUMBER, Text("Hi"))
        assert closed.problem is InstanceProblem.RELOGIN_REQUIRED, closed
    sent = httpx.get(f"{sandbox.url}/sandbox/messages", timeout=10).json()
    endpoints = {m["endpoint"] for m in sent if m["instance_id"] == iid}
    assert endpoints == {"sendText", "sendImage", "sendButtons", "sendList"}
    with GatewayClient(sandbox.url, "wrong-key", kind="waha") as bad:
        assert bad.send(iid, NUMBER, Text("Hi")).problem is InstanceProblem.BAD_TOKEN


def test_its_webhook_events_conform_and_read_back(sandbox: Sandbox) -> None:
    """WAHA's side: every body the sandbox posts validates against WAHA's webhook schema
    of its event, and reads back as statuses (ERROR for the number not on WhatsApp) and
    the reply."""
    with (
        WebhookSink() as sink,
        GatewayClient(sandbox.url, sandbox.access_token, kind="waha") as client,
    ):
        iid = _linked(client, sandbox)
        client.set_webhook(iid, sink.url)
        sent = client.send(iid, NUMBER, Text("Hi"))
        gone = client.send(iid, "+" + NOT_ON_APP, Text("Hi"))
        httpx.post(
            f"{sandbox.url}/sandbox/instances/{iid}/incoming",
            json={"from": "12025550123", "text": "STOP"},
            timeout=10,
        )
        deadline = time.monotonic() + 10
        seen: dict[str | None, set[DeliveryStatus]] = {}
        replies: list[str] = []
        while time.monotonic() < deadline and not (
            DeliveryStatus.READ in seen.get(sent.message_id, set()) and replies
        ):
            time.sleep(0.05)
            seen, replies = {}, []
            for body in list(sink.bodies):
                doc = json.loads(body)
                assert doc["session"] == iid  # WAHA's envelope
                errors = [e.message for e in _validator(f"Webhook:{doc['event']}").iter_errors(doc)]
                assert not errors, (errors, doc)
                for event in parse_webhook(body):
                    if isinstance(event, MessageStatus):
                        seen.setdefault(event.message_id, set()).add(event.status)
                    if isinstance(event, IncomingMessage):
                        replies.append(event.text)
        assert {DeliveryStatus.DELIVERED, DeliveryStatus.READ} <= seen[sent.message_id], seen
        assert seen.get(gone.message_id) == {DeliveryStatus.FAILED}, seen
        assert replies == ["STOP"]


def test_the_async_client_speaks_the_dialect_too(sandbox: Sandbox) -> None:
    async def run() -> tuple[OutcomeKind, OutcomeKind]:
        async with AsyncGatewayClient(sandbox.url, sandbox.access_token, kind="waha") as c:
            iid = await c.create_instance()
            await c.get_qrcode(iid)
            httpx.post(f"{sandbox.url}/sandbox/instances/{iid}/scan", timeout=10)
            ok = await c.send(iid, NUMBER, Media("https://cdn.example/a.mp4", caption="Hi"))
            gone = await c.send("NOSUCH", NUMBER, Text("Hi"))
            return ok.kind, gone.kind

    assert asyncio.run(run()) == (OutcomeKind.ACCEPTED, OutcomeKind.INSTANCE)
