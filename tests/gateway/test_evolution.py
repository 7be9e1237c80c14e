"""The Evolution API v2 dialect: request mapping, answers, webhook events, and the client
over real HTTP against the sandbox in the evolution dialect (docs/gateways.md).

Payload shapes follow Evolution API's own code (EvolutionAPI/evolution-api):
src/api/routes/{instance,sendMessage,webhook}.router.ts for routes and methods,
src/api/dto/{sendMessage,webhook,instance}.dto.ts for bodies, and
src/api/integrations/channel/whatsapp/whatsapp.baileys.service.ts for the webhook data
(``messages.update`` flat ``{keyId, remoteJid, fromMe, participant, status, instanceId}``,
``qrcode.updated`` ``{qrcode: {instance, pairingCode, code, base64}}``,
``connection.update`` ``{instance, state, statusReason, wuid}``); the envelope
``{event, instance, data, destination, date_time, sender, server_url, apikey}`` is
src/api/integrations/event/webhook/webhook.controller.ts's.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import httpx
import pytest

from gateway.async_client import AsyncGatewayClient
from gateway.client import GatewayClient
from gateway.dialects import evolution as evo
from gateway.dialects import refusal_of
from gateway.errors import GatewayError, RequestValidationError
from gateway.event_parsing import parse_webhook
from gateway.events import (
    ConnectionStatus,
    DeliveryStatus,
    IncomingMessage,
    MessageStatus,
    QrCode,
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
    TemplateButton,
    Text,
)
from gateway.outcomes import InstanceProblem, OutcomeKind
from gateway.sandbox import Sandbox, SandboxConfig, WebhookSink, run_sandbox_in_thread

NUMBER = "+1 202 555 0123"
NOT_ON_APP = "12025550143"


def _envelope(event: str, data: object) -> dict[str, object]:
    """webhook.controller.ts's body."""
    return {
        "event": event,
        "instance": "ABCDEF0123456789",
        "data": data,
        "destination": "https://hooks.example/wh",
        "date_time": "2026-12-07T10:00:00.000Z",
        "sender": "5511999999999@s.whatsapp.net",
        "server_url": "https://evo.example",
        "apikey": "instance-hash",
    }


# ------------------------------------------------------------------------- requests
def test_text_goes_to_send_text_with_number_and_text() -> None:
    req = evo.build_send("ABCDEF0123456789", NUMBER, Text("Hi Ana"))
    assert (req.method, req.endpoint) == ("POST", "message/sendText/ABCDEF0123456789")
    assert req.json == {"number": "12025550123", "text": "Hi Ana"}
    assert req.params == {} and req.credentials == "header"  # the key: apikey header


def test_media_maps_to_send_media_with_its_mediatype() -> None:
    req = evo.build_send("I1", NUMBER, Media("https://cdn.example/menu.pdf", caption="Menu"))
    assert req.endpoint == "message/sendMedia/I1"
    assert req.json == {
        "number": "12025550123",
        "mediatype": "document",
        "media": "https://cdn.example/menu.pdf",
        "caption": "Menu",
        "mimetype": "application/pdf",
    }
    photo = evo.build_send("I1", NUMBER, Media("https://cdn.example/a.jpg"))
    assert photo.json is not None and photo.json["mediatype"] == "image"


def test_buttons_and_lists_map_to_their_dtos() -> None:
    buttons = Interactive(
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
    req = evo.build_send("I1", NUMBER, buttons)
    assert req.endpoint == "message/sendButtons/I1"
    assert req.json == {
        "number": "12025550123",
        "title": "Offer",
        "description": "Pick one",
        "footer": "Reply STOP to opt out",
        "buttons": [
            {"type": "reply", "displayText": "Yes", "id": "yes"},
            {"type": "url", "displayText": "Shop", "url": "https://shop.example"},
            {"type": "call", "displayText": "Call", "phoneNumber": "+12025550100"},
            {"type": "copy", "displayText": "Code", "copyCode": "SAVE10"},
        ],
    }
    lst = ListMessage(
        "Choose a size",
        "Sizes",
        sections=(ListSection("All", rows=(ListRow("Small", "s", "up to 1 kg"),)),),
        footer="f",
    )
    sent = evo.build_send("I1", NUMBER, lst)
    assert sent.endpoint == "message/sendList/I1"
    assert sent.json == {
        "number": "12025550123",
        "title": "Choose a size",
        "description": "Choose a size",
        "footerText": "f",
        "buttonText": "Sizes",
        "sections": [
            {
                "title": "All",
                "rows": [{"title": "Small", "description": "up to 1 kg", "rowId": "s"}],
            }
        ],
    }


def test_templates_are_refused_before_any_request_and_at_campaign_create() -> None:
    template = LegacyTemplate("Hi", buttons=(TemplateButton("Yes", "y"),))
    with pytest.raises(RequestValidationError, match="cannot send template"):
        evo.build_send("I1", NUMBER, template)
    assert refusal_of("evolution", "template") is not None
    assert refusal_of("spec", "template") is None
    assert all(refusal_of("evolution", t) is None for t in ("text", "media", "interactive", "list"))


def test_groups_take_text_by_their_jid() -> None:
    req = evo.build_send("I1", "120363025246125486@g.us", Text("hello all"))
    assert req.json == {"number": "120363025246125486@g.us", "text": "hello all"}


def test_instance_operations_use_evolutions_routes_and_methods() -> None:
    create = evo.build_operation("create_instance", None, {})
    assert (create.method, create.endpoint) == ("POST", "instance/create")
    assert create.json is not None and create.json["integration"] == "WHATSAPP-BAILEYS"
    assert len(create.json["instanceName"]) == 16
    routes = {
        op: (r.method, r.endpoint)
        for op in ("get_qrcode", "logout", "reboot", "reconnect")
        for r in [evo.build_operation(op, "I1", {})]
    }
    assert routes == {
        "get_qrcode": ("GET", "instance/connect/I1"),
        "logout": ("DELETE", "instance/logout/I1"),
        "reboot": ("DELETE", "instance/logout/I1"),
        "reconnect": ("POST", "instance/restart/I1"),
    }
    with pytest.raises(RequestValidationError, match="Evolution API has no reset"):
        evo.build_operation("reset_instance", "I1", {})
    hook = evo.build_operation(
        "set_webhook",
        "I1",
        {"webhook_url": "https://g.example/webhooks/gateway/s", "enable": "true"},
    )
    assert hook.endpoint == "webhook/set/I1" and hook.json is not None
    assert hook.json["webhook"]["url"] == "https://g.example/webhooks/gateway/s"
    assert hook.json["webhook"]["enabled"] is True
    assert {"MESSAGES_UPDATE", "MESSAGES_UPSERT", "CONNECTION_UPDATE"} <= set(
        hook.json["webhook"]["events"]
    )


# ------------------------------------------------------------------------- answers
def _err(status: int, message: object) -> bytes:
    """Evolution's HttpExceptionFilter body."""
    return json.dumps({"status": status, "error": "x", "response": {"message": message}}).encode()


def test_send_answers_are_classified_as_evolution_means_them() -> None:
    sent = json.dumps(
        {
            "key": {"remoteJid": "12025550123@s.whatsapp.net", "fromMe": True, "id": "3EB0AA"},
            "status": "PENDING",
            "messageType": "conversation",
        }
    ).encode()
    assert evo.classify_send(201, {}, sent).message_id == "3EB0AA"
    gone = evo.classify_send(400, {}, _err(400, [{"jid": "x", "exists": False, "number": "1"}]))
    assert (gone.kind, gone.reason) == (OutcomeKind.PERMANENT, "not on WhatsApp")
    missing = evo.classify_send(404, {}, _err(404, ['The "I1" instance does not exist']))
    assert missing.problem is InstanceProblem.INVALID_INSTANCE
    closed = evo.classify_send(400, {}, _err(400, ["Connection Closed"]))
    assert (closed.kind, closed.problem) == (OutcomeKind.INSTANCE, InstanceProblem.RELOGIN_REQUIRED)
    assert (
        evo.classify_send(401, {}, _err(401, "Unauthorized")).problem is InstanceProblem.BAD_TOKEN
    )
    assert evo.classify_send(503, {}, b"").kind is OutcomeKind.RETRYABLE


def test_an_instance_operation_error_names_evolutions_words() -> None:
    with pytest.raises(GatewayError, match="instance does not exist") as caught:
        evo.interpret_operation("logout", 404, {}, _err(404, ['The "I1" instance does not exist']))
    assert caught.value.problem is InstanceProblem.INVALID_INSTANCE
    created = json.dumps({"instance": {"instanceName": "ABC", "status": "connecting"}}).encode()
    assert evo.interpret_operation("create_instance", 201, {}, created) == {"instance_id": "ABC"}


# ------------------------------------------------------------------------- events
def test_message_updates_become_statuses() -> None:
    for raw, status in (
        ("SERVER_ACK", DeliveryStatus.SENT),
        ("DELIVERY_ACK", DeliveryStatus.DELIVERED),
        ("READ", DeliveryStatus.READ),
        ("PLAYED", DeliveryStatus.PLAYED),
        ("ERROR", DeliveryStatus.FAILED),
    ):
        data = {
            "keyId": "3EB0AA",
            "remoteJid": "12025550123@s.whatsapp.net",
            "fromMe": True,
            "participant": "12025550123@s.whatsapp.net",
            "status": raw,
            "instanceId": "uuid",
        }
        (event,) = parse_webhook(json.dumps(_envelope("messages.update", data)))
        assert isinstance(event, MessageStatus), raw
        assert (event.instance_id, event.message_id, event.status) == (
            "ABCDEF0123456789",
            "3EB0AA",
            status,
        )
    deleted = {"keyId": "3EB0AA", "remoteJid": "x@s.whatsapp.net", "fromMe": True}
    (event,) = parse_webhook(_envelope("messages.update", {**deleted, "status": "DELETED"}))
    assert isinstance(event, UnknownEvent)


def test_an_incoming_message_is_a_reply() -> None:
    data = {
        "key": {"remoteJid": "12025550123@s.whatsapp.net", "fromMe": False, "id": "ABCD"},
        "pushName": "Ana",
        "message": {"conversation": "STOP"},
        "messageType": "conversation",
        "messageTimestamp": 1765100000,
        "instanceId": "uuid",
        "source": "android",
    }
    (event,) = parse_webhook(_envelope("messages.upsert", data))
    assert isinstance(event, IncomingMessage)
    assert (event.text, event.sender_phone, event.instance_id) == (
        "STOP",
        "12025550123",
        "ABCDEF0123456789",
    )


def test_qr_and_connection_updates() -> None:
    qr = {
        "qrcode": {
            "instance": "I",
            "pairingCode": None,
            "code": "2@x",
            "base64": "data:image/png;base64,iVBOR",
        }
    }
    (event,) = parse_webhook(_envelope("qrcode.updated", qr))
    assert isinstance(event, QrCode) and event.data_uri.startswith("data:image/png")
    limit = {"message": "QR code limit reached, please login again", "statusCode": 500}
    assert isinstance(parse_webhook(_envelope("qrcode.updated", limit))[0], UnknownEvent)
    states = {}
    for state, reason in (("open", 200), ("connecting", 200), ("close", 428), ("close", 401)):
        data = {
            "instance": "I",
            "state": state,
            "statusReason": reason,
            "wuid": "5511@s.whatsapp.net",
        }
        (event,) = parse_webhook(_envelope("connection.update", data))
        assert isinstance(event, ConnectionStatus)
        states[(state, reason)] = event.state
    assert states == {
        ("open", 200): "connected",
        ("connecting", 200): "waiting_scan",
        ("close", 428): "disconnected",
        ("close", 401): "logged_out",
    }


# ------------------------------------------------------------------------- over HTTP
@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    cfg = SandboxConfig(
        dialect="evolution",
        seed=3,
        not_on_app=frozenset({NOT_ON_APP}),
        status_delays=(0.05, 0.1, 0.2),
    )
    with run_sandbox_in_thread(cfg) as sb:
        yield sb


def test_the_client_drives_the_evolution_sandbox(sandbox: Sandbox) -> None:
    with GatewayClient(sandbox.url, sandbox.access_token, kind="evolution") as client:
        iid = client.create_instance()
        qr = client.get_qrcode(iid)
        assert qr.data_uri is not None and qr.data_uri.startswith("data:image/png;base64,")
        httpx.post(f"{sandbox.url}/sandbox/instances/{iid}/scan", timeout=10)
        with pytest.raises(GatewayError, match="already logged in"):  # linked: no QR
            client.get_qrcode(iid)
        accepted = client.send(iid, NUMBER, Text("Hi"))
        assert accepted.kind is OutcomeKind.ACCEPTED and accepted.message_id
        listed = ListMessage(
            "Pick", "Open", sections=(ListSection("s", rows=(ListRow("A", "a"),)),)
        )
        assert client.send(iid, NUMBER, listed).accepted
        refused = client.send(iid, "+" + NOT_ON_APP, Text("Hi"))
        assert (refused.kind, refused.reason) == (OutcomeKind.PERMANENT, "not on WhatsApp")
        wrong = client.send("NOSUCHNAME", NUMBER, Text("Hi"))
        assert wrong.problem is InstanceProblem.INVALID_INSTANCE
        client.logout(iid)
        closed = client.send(iid, NUMBER, Text("Hi"))
        assert closed.problem is InstanceProblem.RELOGIN_REQUIRED
    with GatewayClient(sandbox.url, "wrong-key", kind="evolution") as bad:
        assert bad.send(iid, NUMBER, Text("Hi")).problem is InstanceProblem.BAD_TOKEN


def test_its_webhook_events_read_back_as_statuses_and_replies(sandbox: Sandbox) -> None:
    with (
        WebhookSink() as sink,
        GatewayClient(sandbox.url, sandbox.access_token, kind="evolution") as client,
    ):
        iid = client.create_instance()
        client.get_qrcode(iid)
        httpx.post(f"{sandbox.url}/sandbox/instances/{iid}/scan", timeout=10)
        client.set_webhook(iid, sink.url)
        sent = client.send(iid, NUMBER, Text("Hi"))
        httpx.post(
            f"{sandbox.url}/sandbox/instances/{iid}/incoming",
            json={"from": "12025550123", "text": "STOP"},
            timeout=10,
        )
        deadline = time.monotonic() + 10
        seen: set[DeliveryStatus] = set()
        replies: list[str] = []
        while time.monotonic() < deadline and not (DeliveryStatus.READ in seen and replies):
            time.sleep(0.05)
            seen, replies = set(), []
            for body in list(sink.bodies):
                assert json.loads(body)["instance"] == iid  # Evolution's envelope
                for event in parse_webhook(body):
                    if isinstance(event, MessageStatus) and event.message_id == sent.message_id:
                        seen.add(event.status)
                    if isinstance(event, IncomingMessage):
                        replies.append(event.text)
        assert {DeliveryStatus.DELIVERED, DeliveryStatus.READ} <= seen, seen
        assert replies == ["STOP"]


def test_the_async_client_speaks_the_dialect_too(sandbox: Sandbox) -> None:
    async def run() -> tuple[OutcomeKind, OutcomeKind]:
        async with AsyncGatewayClient(sandbox.url, sandbox.access_token, kind="evolution") as c:
            iid = await c.create_instance()
            await c.get_qrcode(iid)
            httpx.post(f"{sandbox.url}/sandbox/instances/{iid}/scan", timeout=10)
            ok = await c.send(iid, NUMBER, Media("https://cdn.example/a.jpg", caption="Hi"))
            gone = await c.send(iid, "+" + NOT_ON_APP, Text("Hi"))
            return ok.kind, gone.kind

    assert asyncio.run(run()) == (OutcomeKind.ACCEPTED, OutcomeKind.PERMANENT)


# ------------------------------------------------- number check and typing (item 2)
def test_the_number_check_and_typing_are_evolutions_chat_routes() -> None:
    """chat.router.ts: ``whatsappNumbers`` (WhatsAppNumberDto ``{numbers}``, answered 200
    with OnWhatsAppDto ``{jid, exists, number, name, lid}``) and ``sendPresence``
    (SendPresenceDto ``{number, presence, delay}``, all required by presenceSchema)."""
    req = evo.build_number_check("I1", ["+1 202 555 0123", "12025550123", "+44 20 7946 0000"])
    assert (req.method, req.endpoint) == ("POST", "chat/whatsappNumbers/I1")
    assert req.json == {"numbers": ["12025550123", "442079460000"]}  # unique digits
    with pytest.raises(RequestValidationError, match="numbers"):
        evo.build_number_check("I1", [])
    typing = evo.build_typing("I1", NUMBER, 2.5)
    assert (typing.endpoint, typing.json) == (
        "chat/sendPresence/I1",
        {"number": "12025550123", "presence": "composing", "delay": 2500},
    )
    answer = [
        {"jid": "12025550123@s.whatsapp.net", "exists": True, "number": "12025550123"},
        {"jid": "442079460000@s.whatsapp.net", "exists": False, "number": "442079460000"},
        {"jid": "x@g.us", "number": "1203"},  # no exists: ignored
    ]
    assert evo.read_number_check(200, {}, json.dumps(answer).encode()) == {
        "12025550123": True,
        "442079460000": False,
    }
    with pytest.raises(GatewayError, match="Connection Closed"):
        body = {
            "status": 400,
            "error": "Bad Request",
            "response": {"message": ["Connection Closed"]},
        }
        evo.read_number_check(400, {}, json.dumps(body).encode())
    assert refusal_of("spec", "template") is None


def test_only_evolution_offers_the_check_and_typing() -> None:
    from gateway.dialects import NOTHING_MORE, capabilities

    assert capabilities("spec") == NOTHING_MORE
    assert not NOTHING_MORE.number_check and not NOTHING_MORE.typing
    assert capabilities("evolution").number_check and capabilities("evolution").typing
    with GatewayClient("http://127.0.0.1:9", "k") as spec:
        assert spec.capabilities == NOTHING_MORE
        assert spec.show_typing("I1", NUMBER, 1.0) is False  # no request at all
        with pytest.raises(GatewayError, match="no number check"):
            spec.check_numbers("I1", [NUMBER])


def test_the_sandbox_answers_the_check_and_shows_typing(sandbox: Sandbox) -> None:
    with GatewayClient(sandbox.url, sandbox.access_token, kind="evolution") as client:
        iid = client.create_instance()
        with pytest.raises(GatewayError, match="Connection Closed"):  # not linked yet
            client.check_numbers(iid, [NUMBER])
        client.get_qrcode(iid)
        httpx.post(f"{sandbox.url}/sandbox/instances/{iid}/scan", timeout=10)
        answers = client.check_numbers(iid, [NUMBER, "+" + NOT_ON_APP])
        assert answers == {NUMBER: True, "+" + NOT_ON_APP: False}
        assert client.show_typing(iid, NUMBER, 0.05) is True
        assert client.show_typing(iid, "+" + NOT_ON_APP, 0.05) is False  # Evolution refuses
    calls = httpx.get(f"{sandbox.url}/sandbox/chat", timeout=10).json()
    mine = [c for c in calls if c["instance_id"] == iid]
    assert [c["kind"] for c in mine] == ["check", "presence"]
    assert mine[0]["numbers"] == ["12025550123", NOT_ON_APP]
    assert (mine[1]["to"], mine[1]["presence"], mine[1]["delay"]) == (
        "12025550123",
        "composing",
        50,
    )
