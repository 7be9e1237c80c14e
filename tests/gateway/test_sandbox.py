"""The sandbox over real HTTP (plain httpx, no gatecast client): lifecycle, errors, QR, sends."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx
import pytest

from gateway.sandbox import Sandbox, SandboxConfig, run_sandbox_in_thread
from tests.qr import decode_qr

TOKEN = "sandbox-token"
HTTP = httpx.Client(timeout=10)  # one client: httpx.get() builds an SSL context per call


def op(sb: Sandbox, name: str, base: str = "api", **params: str) -> dict[str, Any]:
    """Call an instance operation with the dialect's method; the JSON body."""
    method = "GET" if sb.config.dialect == "reference" else "POST"
    params.setdefault("access_token", TOKEN)
    resp = HTTP.request(method, f"{sb.url}/{base}/{name}", params=params)
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def send(sb: Sandbox, base: str = "api", method: str = "GET", **params: str) -> dict[str, Any]:
    params.setdefault("access_token", TOKEN)
    if method == "GET":
        resp = HTTP.get(f"{sb.url}/{base}/send", params=params)
    else:
        resp = HTTP.post(f"{sb.url}/{base}/send", json=params)
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


@pytest.fixture(params=["spec", "reference"])
def any_sandbox(request: pytest.FixtureRequest) -> Sandbox:
    name = "sandbox" if request.param == "spec" else "reference_sandbox"
    sb: Sandbox = request.getfixturevalue(name)
    return sb


def test_tokens_and_instances_refused_with_the_real_texts(any_sandbox: Sandbox) -> None:
    sb = any_sandbox
    assert op(sb, "create_instance", access_token="") == {
        "status": "error",
        "message": "Access token is required",
    }
    assert (
        op(sb, "create_instance", access_token="nope")["message"] == "Access token does not exist"
    )
    iid = op(sb, "create_instance")["instance_id"]
    assert re.fullmatch(r"[0-9A-F]{13}", iid)
    assert op(sb, "reboot")["message"] == "Instance ID is required"
    assert op(sb, "logout", instance_id="0000000000000")["message"] == "Instance ID Invalidated"
    body = send(sb, number="15551234567", type="text", message="hi", instance_id=iid)
    assert body == {"status": "error", "message": "This instance ID has not been activated yet"}


def test_another_tokens_instance_is_invalid() -> None:
    cfg = SandboxConfig(access_tokens=("tok-a", "tok-b"))
    with run_sandbox_in_thread(cfg) as sb:
        iid = op(sb, "create_instance", access_token="tok-a")["instance_id"]
        body = op(sb, "get_qrcode", access_token="tok-b", instance_id=iid)
        assert body["message"] == "Instance ID Invalidated"
        assert "tok-a" not in repr(sb.config) and "tok-a" not in repr(sb)


def test_full_lifecycle_with_scannable_rotating_qr(any_sandbox: Sandbox) -> None:
    sb = any_sandbox
    sb.state.clock = lambda: 1_700_000_000.0  # inside one 20 s QR bucket
    iid = op(sb, "create_instance")["instance_id"]
    # while unscanned, create_instance gives the same id back
    assert op(sb, "create_instance")["instance_id"] == iid
    qr = op(sb, "get_qrcode", instance_id=iid)
    assert qr["status"] == "success"
    content = decode_qr(qr["base64"])
    assert iid in content
    # the QR rotates with a time bucket (move the sandbox's clock by 21 s)
    sb.state.clock = lambda: 1_700_000_021.0
    assert decode_qr(op(sb, "get_qrcode", instance_id=iid)["base64"]) != content
    sb.state.clock = lambda: 1_700_000_000.0
    # scanning a stale code is refused, the current one links the instance
    stale = HTTP.post(f"{sb.url}/sandbox/instances/{iid}/scan", json={"code": "2@old"})
    assert stale.status_code == 409
    scan = HTTP.post(
        f"{sb.url}/sandbox/instances/{iid}/scan", json={"code": content, "phone": "15550001111"}
    )
    assert scan.status_code == 200 and scan.json()["state"] == "connected"
    assert op(sb, "get_qrcode", instance_id=iid)["status"] == "error"
    ok = send(sb, number="15551234567", type="text", message="hi", instance_id=iid)
    assert ok["status"] == "success"
    # connection lost -> reconnect
    HTTP.post(f"{sb.url}/sandbox/instances/{iid}/disconnect")
    gone = send(sb, number="15551234567", type="text", message="hi", instance_id=iid)
    assert gone["message"] == "This WhatsApp account relogin required"
    assert op(sb, "reconnect", instance_id=iid)["status"] == "success"
    assert send(sb, number="15551234567", type="text", message="x", instance_id=iid)["status"] == (
        "success"
    )
    # logout -> relogin required; reconnect says relogin
    assert op(sb, "logout", instance_id=iid)["status"] == "success"
    body = send(sb, number="15551234567", type="text", message="hi", instance_id=iid)
    assert body["message"] == "This WhatsApp account relogin required"
    assert op(sb, "reconnect", instance_id=iid) == {
        "status": "error",
        "message": "Error",
        "relogin": True,
    }
    # reboot -> a new scan is needed
    assert op(sb, "reboot", instance_id=iid)["status"] == "success"
    body = send(sb, number="15551234567", type="text", message="hi", instance_id=iid)
    assert body["message"] == "This instance ID has not been activated yet"
    sb.scan(iid)
    # reset -> a new id; the old one stops working
    reset = op(sb, "reset_instance", instance_id=iid)
    new_id = reset["instance_id"]
    assert re.fullmatch(r"[0-9A-F]{13}", new_id) and new_id != iid
    assert op(sb, "logout", instance_id=iid)["message"] == "Instance ID Invalidated"
    assert op(sb, "get_qrcode", instance_id=new_id)["status"] == "success"


def test_instance_routes_method_per_dialect(sandbox: Sandbox, reference_sandbox: Sandbox) -> None:
    for base in ("api", "messenger_api"):
        spec_get = HTTP.get(f"{sandbox.url}/{base}/create_instance", params={"access_token": TOKEN})
        assert spec_get.status_code == 405
        ref_post = HTTP.post(
            f"{reference_sandbox.url}/{base}/create_instance", params={"access_token": TOKEN}
        )
        assert ref_post.status_code == 405


def test_set_webhook_before_login_only_in_spec_dialect(
    sandbox: Sandbox, reference_sandbox: Sandbox
) -> None:
    for sb, expected in ((sandbox, "success"), (reference_sandbox, "error")):
        iid = op(sb, "create_instance")["instance_id"]
        body = op(
            sb, "set_webhook", instance_id=iid, webhook_url="http://127.0.0.1:9/h", enable="true"
        )
        assert body["status"] == expected
        sb.state.instances[iid].state = "connected"
        body = op(
            sb, "set_webhook", instance_id=iid, webhook_url="http://127.0.0.1:9/h", enable="true"
        )
        assert body == {"status": "success", "message": "Webhook URI Saved"}
        assert op(sb, "set_webhook", instance_id=iid, enable="false")["status"] == "success"
        assert sb.state.instances[iid].webhook_enabled is False


def test_both_bases_answer_identically(any_sandbox: Sandbox) -> None:
    sb = any_sandbox
    iid = sb.create_linked_instance()
    sb.state.clock = lambda: 1_700_000_000.0
    answers = []
    for base in ("api", "messenger_api"):
        sb.state.reset()  # the same starting point (message ids still differ: masked below)
        sb.state.instances[iid] = _linked(sb, iid)
        answers.append(
            send(
                sb,
                base=base,
                number="15551234567",
                type="text",
                message="hé & = #",
                instance_id=iid,
            )
        )
        answers.append(op(sb, "create_instance", base=base, access_token="bad"))
    ids = [answers[0]["message"]["key"].pop("id"), answers[2]["message"]["key"].pop("id")]
    assert ids[0] != ids[1]  # never repeated, even across a reset
    assert answers[0] == answers[2]
    assert answers[1] == answers[3]


def _linked(sb: Sandbox, iid: str) -> Any:
    from gateway.sandbox.state import Instance

    return Instance(id=iid, token=TOKEN, state="connected", phone="15550000000")


def test_accepted_send_shape_and_record(any_sandbox: Sandbox) -> None:
    sb = any_sandbox
    iid = sb.create_linked_instance()
    body = send(sb, number="919876543210", type="text", message="Hello\nworld 👋", instance_id=iid)
    assert body["status"] == "success"
    key = body["message"]["key"]
    assert key["remoteJid"] == "919876543210@s.whatsapp.net" and key["fromMe"] is True
    assert re.fullmatch(r"3EB0[0-9A-F]{18}", key["id"])
    assert body["message"]["status"] == "PENDING"
    assert body["message"]["messageTimestamp"].isdigit()
    rec = HTTP.get(f"{sb.url}/sandbox/messages/{key['id']}").json()
    assert rec["to"] == "919876543210" and rec["instance_id"] == iid
    assert rec["payload"] == {"type": "text", "message": "Hello\nworld 👋"}
    listed = HTTP.get(f"{sb.url}/sandbox/messages", params={"to": "919876543210"}).json()
    assert [m["message_id"] for m in listed] == [key["id"]]
    stats = HTTP.get(f"{sb.url}/sandbox/stats").json()
    assert stats["accepted"] == 1 and stats["per_recipient"] == {"919876543210": 1}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"type": "text", "message": "hi"}, "Phone number is required"),
        ({"number": "+15551234567", "type": "text", "message": "hi"}, "Invalid phone number"),
        ({"number": "1555 123 4567", "type": "text", "message": "hi"}, "Invalid phone number"),
        (
            {"number": "15551234567", "type": "text", "message": ""},
            "Please enter media url or message",
        ),
    ],
)
def test_invalid_sends_refused(any_sandbox: Sandbox, params: dict[str, str], message: str) -> None:
    iid = any_sandbox.create_linked_instance()
    assert send(any_sandbox, instance_id=iid, **params) == {"status": "error", "message": message}
    assert any_sandbox.stats()["accepted"] == 0


def test_media_needs_url_in_spec_and_reference_ignores_type(
    sandbox: Sandbox, reference_sandbox: Sandbox
) -> None:
    iid = sandbox.create_linked_instance()
    body = send(sandbox, number="15551234567", type="media", message="cap", instance_id=iid)
    assert body == {"status": "error", "message": "Media URL is required"}
    ok = send(
        sandbox,
        number="15551234567",
        type="media",
        message="cap",
        media_url="https://example.com/a/report.pdf",
        filename="Report May.pdf",
        instance_id=iid,
    )
    assert ok["message"]["message"]["documentMessage"]["fileName"] == "Report May.pdf"
    rid = reference_sandbox.create_linked_instance()
    ref = send(
        reference_sandbox,
        number="15551234567",
        type="text",
        message="cap",
        media_url="https://example.com/pic.jpg",
        instance_id=rid,
    )
    assert ref["message"]["message"] == {
        "imageMessage": {"url": "https://example.com/pic.jpg", "caption": "cap"}
    }


def test_json_body_post_and_group_id_rules(sandbox: Sandbox, reference_sandbox: Sandbox) -> None:
    for sb in (sandbox, reference_sandbox):
        iid = sb.create_linked_instance()
        body = send(
            sb, method="POST", number="15551234567", type="text", message="j", instance_id=iid
        )
        assert body["status"] == "success"
        fields = {"group_id": "120363041234567890@g.us", "type": "text", "message": "g"}
        auth = {"instance_id": iid, "access_token": TOKEN}
        by_json = HTTP.post(f"{sb.url}/api/send_group", json={**fields, **auth}).json()
        by_query = HTTP.get(f"{sb.url}/api/send_group", params={**fields, **auth}).json()
        by_form = HTTP.post(f"{sb.url}/api/send_group", data={**fields, **auth}).json()
        assert by_query["status"] == "success" and by_form["status"] == "success"
        assert by_query["message"]["key"]["remoteJid"] == "120363041234567890@g.us"
        if sb.config.dialect == "reference":  # group_id is never read from a JSON body
            assert by_json == {"status": "error", "message": "Group ID is required"}
        else:
            assert by_json["status"] == "success"
        bad = HTTP.get(f"{sb.url}/api/send_group", params={**fields, **auth, "group_id": "12345"})
        assert bad.json() == {"status": "error", "message": "Invalid group ID"}


def _button(name: str, **params: str) -> dict[str, str]:
    return {"name": name, "buttonParamsJson": json.dumps(params)}


def test_send_template_kinds_and_validation(sandbox: Sandbox) -> None:
    iid = sandbox.create_linked_instance()
    url = f"{sandbox.url}/messenger_api/send_template"
    q = {"instance_id": iid, "access_token": TOKEN}
    interactive = {
        "number": "15551234567",
        "type": "interactive",
        "message": {
            "text": "Pick",
            "title": "T",
            "subtitle": "S",
            "footer": "F",
            "interactiveButtons": [
                _button("quick_reply", display_text="Yes", id="yes"),
                _button("cta_url", display_text="Site", url="https://example.com"),
                _button("cta_call", display_text="Call", phone_number="+15551234567"),
                _button("cta_copy", display_text="Code", copy_code="X1"),
            ],
        },
    }
    assert HTTP.post(url, params=q, json=interactive).json()["status"] == "success"
    template = {
        "number": "15551234567",
        "type": "template",
        "message": {
            "text": "t",
            "footer": "f",
            "templateButtons": [{"index": 1, "quickReplyButton": {"displayText": "A", "id": "a"}}],
        },
    }
    assert HTTP.post(url, params=q, json=template).json()["status"] == "success"
    listing = {
        "number": "15551234567",
        "type": "list",
        "message": {
            "text": "t",
            "footer": "f",
            "title": "T",
            "buttonText": "Open",
            "sections": [
                {"title": "S", "rows": [{"title": "R", "rowId": "r1", "description": "d"}]}
            ],
        },
    }
    assert HTTP.post(url, params=q, json=listing).json()["status"] == "success"
    broken = json.loads(json.dumps(interactive))
    broken["message"]["interactiveButtons"][2] = _button(
        "cta_call", display_text="C", phone_number="1555"
    )
    err = HTTP.post(url, params=q, json=broken).json()
    assert err["status"] == "error" and "interactiveButtons[2]" in err["message"]
    not_string = json.loads(json.dumps(interactive))
    not_string["message"]["interactiveButtons"][0]["buttonParamsJson"] = {"id": "x"}
    err = HTTP.post(url, params=q, json=not_string).json()
    assert "buttonParamsJson must be a JSON string" in err["message"]
    assert sandbox.stats()["accepted"] == 3


def test_each_recipient_counted_once(sandbox: Sandbox) -> None:
    iid = sandbox.create_linked_instance()
    numbers = [f"1555000{i:04d}" for i in range(30)]
    for n in numbers:
        send(sandbox, number=n, type="text", message="hi", instance_id=iid)
    send(sandbox, number=numbers[0], type="text", message="again", instance_id=iid)
    stats = HTTP.get(f"{sandbox.url}/sandbox/stats").json()
    assert stats["recipients"] == 30 and stats["recipients_with_several"] == [numbers[0]]
    assert HTTP.post(f"{sandbox.url}/sandbox/reset").json() == {"status": "reset"}
    assert HTTP.get(f"{sandbox.url}/sandbox/stats").json()["accepted"] == 0


def test_concurrent_sends_are_each_recorded_once(sandbox: Sandbox) -> None:
    import asyncio

    iid = sandbox.create_linked_instance()
    numbers = [f"1555333{i:04d}" for i in range(200)]

    async def main() -> list[str]:
        limits = httpx.Limits(max_connections=8)
        async with httpx.AsyncClient(base_url=sandbox.url, limits=limits) as client:

            async def one(n: str) -> str:
                params = {"number": n, "type": "text", "message": "c", "instance_id": iid}
                resp = await client.get("/api/send", params={**params, "access_token": TOKEN})
                mid: str = resp.json()["message"]["key"]["id"]
                return mid

            return await asyncio.gather(*(one(n) for n in numbers))

    ids = asyncio.run(main())
    assert len(set(ids)) == len(numbers)
    stats = HTTP.get(f"{sandbox.url}/sandbox/stats").json()
    assert stats["accepted"] == len(numbers) and stats["recipients_with_several"] == []
    assert set(stats["per_recipient"]) == set(numbers)


def test_in_process_asgi_app_without_sockets() -> None:
    import asyncio

    from gateway.sandbox import create_sandbox_app

    app = create_sandbox_app(SandboxConfig(dialect="reference", auto_link=True, drop_rate=1.0))

    async def main() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as client:
            created = await client.get("/api/create_instance", params={"access_token": TOKEN})
            iid = created.json()["instance_id"]
            params = {"number": "15551234567", "type": "text", "message": "x", "instance_id": iid}
            with pytest.raises(ConnectionResetError):  # a drop, without a socket to close
                await client.get("/api/send", params={**params, "access_token": TOKEN})

    try:
        asyncio.run(main())
        assert [m.answered for m in app.state.messages.values()] == ["dropped"]
    finally:
        app.state.close()


def test_strict_gateway_shows_no_link_but_by_a_send() -> None:
    with run_sandbox_in_thread(SandboxConfig(strict=True)) as sb:
        iid = op(sb, "create_instance")["instance_id"]
        assert op(sb, "get_qrcode", instance_id=iid)["base64"].startswith("data:image/png")
        sb.scan(iid)
        # linked: a QR request answers a QR code all the same, and the link stays
        again = op(sb, "get_qrcode", instance_id=iid)
        assert again["status"] == "success" and again["base64"], again
        assert sb.state.instances[iid].state == "connected"
        params = {"number": "15551234567", "type": "text", "message": "hi"}
        params.update(instance_id=iid, access_token=TOKEN)
        sent = HTTP.get(f"{sb.url}/api/send", params=params).json()
        assert sent["message"]["key"]["id"], sent
        op(sb, "logout", instance_id=iid)
        refused = HTTP.get(f"{sb.url}/api/send", params=params).json()
        assert refused == {"status": "error", "message": "This WhatsApp account relogin required"}
        events = HTTP.get(f"{sb.url}/sandbox/events").json()["events"]
        assert not [e for e in events if e["event"] == "connection"]


def test_no_connection_events_and_reset_without_id() -> None:
    cfg = SandboxConfig(connection_events=False, reset_returns_id=False)
    with run_sandbox_in_thread(cfg) as sb:
        iid = op(sb, "create_instance")["instance_id"]
        assert op(sb, "get_qrcode", instance_id=iid)["status"] == "success"
        sb.scan(iid)
        # linked, but nothing says so except a QR request
        assert (
            op(sb, "get_qrcode", instance_id=iid)["message"] == "This instance is already logged in"
        )
        deadline = time.monotonic() + 10  # events are emitted by a thread: wait for them
        events: list[dict[str, Any]] = []
        while not events and time.monotonic() < deadline:
            events = HTTP.get(f"{sb.url}/sandbox/events").json()["events"]
            time.sleep(0.05)
        assert events and not [e for e in events if e["event"] == "connection"]
        reset = op(sb, "reset_instance", instance_id=iid)
        assert reset == {"status": "success", "message": "Instance ID reset successfully"}
        assert op(sb, "logout", instance_id=iid)["message"] == "Instance ID Invalidated"
        # the reset instance exists, unscanned: create_instance hands its id back
        new_id = op(sb, "create_instance")["instance_id"]
        assert new_id != iid
        assert op(sb, "create_instance")["instance_id"] == new_id
