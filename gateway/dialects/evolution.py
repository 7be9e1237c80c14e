"""Evolution API v2: its requests, and what its answers mean (docs/gateways.md).

Routes are ``{base_url}/instance/...``, ``{base_url}/message/send<Kind>/{instance}`` and
``{base_url}/webhook/set/{instance}``; the key goes in the ``apikey`` header (the client
sets it once). The instance name is gatecast's instance id. Sends answer HTTP 201 with the
sent message (``key.id`` is its id); errors are HTTP 4xx/5xx with
``{"status": N, "error": "...", "response": {"message": [...]}}``. Builders raise
:class:`~gateway.errors.RequestValidationError` naming the field before any I/O, as the
spec dialect's do (gateway/requests.py).
"""

from __future__ import annotations

import mimetypes
import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

from gateway.classify import classify_send_response, parse_body
from gateway.dialects import Capabilities
from gateway.dialects.shared import (
    button_fields,
    classify_error,
    file_name,
    not_an_object,
    operation_failed,
    recipient,
)
from gateway.errors import GatewayError, RequestValidationError
from gateway.messages import (
    Interactive,
    LegacyTemplate,
    ListMessage,
    Media,
    Message,
    Text,
    message_type,
)
from gateway.outcomes import InstanceProblem, OutcomeKind, SendOutcome
from gateway.requests import (
    GatewayRequest,
    normalise_number,
    template_body,
    validate_http_url,
    validate_instance_id,
)

#: Evolution checks numbers (``/chat/whatsappNumbers``) and shows typing
#: (``/chat/sendPresence``); a check of 50 numbers is one Baileys query when uncached
CAPABILITIES = Capabilities(number_check=True, typing=True, check_batch=50)
#: the longest typing Evolution shows in one presence (it repeats past 20 s)
MAX_TYPING_MS = 20_000
#: the channel gatecast creates (Baileys: the WhatsApp Web protocol, linked by QR)
INTEGRATION = "WHATSAPP-BAILEYS"
#: the webhook events gatecast reads (gateway/event_parsing.py)
WEBHOOK_EVENTS: tuple[str, ...] = (
    "QRCODE_UPDATED",
    "CONNECTION_UPDATE",
    "MESSAGES_UPSERT",
    "MESSAGES_UPDATE",
    "PRESENCE_UPDATE",
)
_MEDIA_TYPES = ("image", "video", "audio")
_NOT_ON_APP = '"exists":false'
_CLOSED_MARKERS = ("connection closed", "not connected", "connection failure")


def unsupported_reason(message_type: str) -> str | None:
    """Why Evolution API cannot send a message of ``message_type``, or None (it sends
    text, media, interactive buttons and lists)."""
    if message_type == "template":
        return (
            "Evolution API cannot send template messages (legacy quick-reply templates); "
            "use an interactive message with quick_reply buttons"
        )
    return None


def new_instance_name() -> str:
    """A fresh instance name: 16 upper-case hex digits (Evolution's names are free text)."""
    return secrets.token_hex(8).upper()


def _path(instance_id: str) -> str:
    return quote(validate_instance_id(instance_id), safe="")


def _media_type(message: Media, url: str) -> tuple[str, str | None]:
    """Evolution's ``mediatype`` (image, video, audio or document) and the MIME type."""
    name = message.filename or urlsplit(url).path.rsplit("/", 1)[-1]
    mime, _ = mimetypes.guess_type(name)
    major = (mime or "").split("/", 1)[0]
    return (major if major in _MEDIA_TYPES else "document"), mime


def send_body(message: Message, number: str) -> tuple[str, dict[str, Any]]:
    """The ``message/<endpoint>`` and JSON body of ``message`` (SendTextDto,
    SendMediaDto, SendButtonsDto, SendListDto in docs/gateways.md)."""
    if isinstance(message, Text):
        if not isinstance(message.text, str) or not message.text.strip():
            raise RequestValidationError("message.text", "is required and must not be empty")
        return "sendText", {"number": number, "text": message.text}
    if isinstance(message, Media):
        url = validate_http_url(message.media_url, "message.media_url")
        kind, mime = _media_type(message, url)
        body: dict[str, Any] = {"number": number, "mediatype": kind, "media": url}
        if message.caption:
            body["caption"] = message.caption
        if mime:
            body["mimetype"] = mime
        name = file_name(message)
        if name:
            body["fileName"] = name
        return "sendMedia", body
    if isinstance(message, Interactive):
        template_body(message)  # the spec dialect's checks: texts, ids used once
        buttons = [button_fields(b, i, "displayText") for i, b in enumerate(message.buttons)]
        body = {
            "number": number,
            "title": message.title or message.text,
            "description": message.text,
            "footer": message.footer,
            "buttons": buttons,
        }
        return "sendButtons", body
    if isinstance(message, ListMessage):
        checked = template_body(message)
        sections = [
            {
                "title": s["title"],
                "rows": [
                    {"title": r["title"], "description": r["description"], "rowId": r["rowId"]}
                    for r in s["rows"]
                ],
            }
            for s in checked["sections"]
        ]
        body = {
            "number": number,
            "title": message.title or message.text,
            "description": message.text,
            "footerText": message.footer,
            "buttonText": message.button_text,
            "sections": sections,
        }
        return "sendList", body
    reason = unsupported_reason(message_type(message))
    raise RequestValidationError("message", reason or f"{type(message).__name__} is not a message")


def build_send(instance_id: str, to: str, message: Message) -> GatewayRequest:
    """The request that sends ``message`` to ``to`` (a phone number or ``...@g.us``)."""
    name = _path(instance_id)
    if not isinstance(message, (Text, Media, Interactive, LegacyTemplate, ListMessage)):
        raise RequestValidationError("message", f"{type(message).__name__} is not a message")
    number = recipient(to, message)
    endpoint, body = send_body(message, number)
    return GatewayRequest("POST", f"message/{endpoint}/{name}", json=body, credentials="header")


def build_operation(
    operation: str, instance_id: str | None, extra: Mapping[str, str]
) -> GatewayRequest:
    """The request of one of gatecast's instance operations (gateway/requests.py's
    INSTANCE_OPERATIONS) on Evolution: create, connect (the QR), webhook/set, logout,
    restart. ``reboot`` is a logout (the next QR starts a new scan); ``reconnect``
    restarts the connection; ``reset_instance`` (a new id in the spec) is refused."""
    if operation == "create_instance":
        body = {"instanceName": new_instance_name(), "integration": INTEGRATION, "qrcode": False}
        return GatewayRequest("POST", "instance/create", json=body, credentials="header")
    name = _path(instance_id or "")
    if operation == "get_qrcode":
        return GatewayRequest("GET", f"instance/connect/{name}", credentials="header")
    if operation == "set_webhook":
        url = validate_http_url(extra.get("webhook_url"), "webhook_url")
        webhook = {
            "enabled": extra.get("enable", "true") == "true",
            "url": url,
            "byEvents": False,
            "base64": False,
            "events": list(WEBHOOK_EVENTS),
        }
        return GatewayRequest(
            "POST", f"webhook/set/{name}", json={"webhook": webhook}, credentials="header"
        )
    if operation in ("reboot", "logout"):
        return GatewayRequest("DELETE", f"instance/logout/{name}", credentials="header")
    if operation == "reconnect":
        return GatewayRequest("POST", f"instance/restart/{name}", credentials="header")
    if operation == "reset_instance":  # the spec's reset deletes the id; Evolution has no such
        raise RequestValidationError(
            "operation",
            "Evolution API has no reset: log the instance out and show its QR code again, "
            "or create a new instance",
        )
    raise RequestValidationError("operation", f"{operation!r} is not an instance operation")


def build_number_check(instance_id: str, numbers: list[str]) -> GatewayRequest:
    """``POST /chat/whatsappNumbers/{name}`` ``{"numbers": [digits, ...]}`` (its
    WhatsAppNumberDto: unique, at least one)."""
    name = _path(instance_id)
    digits = sorted({normalise_number(n, "numbers") for n in numbers})
    if not digits:
        raise RequestValidationError("numbers", "must hold at least one number")
    return GatewayRequest(
        "POST", f"chat/whatsappNumbers/{name}", json={"numbers": digits}, credentials="header"
    )


def read_number_check(
    status: int, headers: Mapping[str, str], content: bytes, *, now: datetime | None = None
) -> dict[str, bool]:
    """``{digits: on the app}`` from the check's answer (200, a list of OnWhatsAppDto
    ``{"exists", "jid", "number", ...}``); raises :class:`GatewayError` for an error
    answer or one that is not such a list."""
    doc = parse_body(content).doc
    if not 200 <= status < 300:
        interpret_operation("check_numbers", status, headers, content, now=now)
    if not isinstance(doc, list):
        raise GatewayError(
            OutcomeKind.AMBIGUOUS,
            None,
            "check_numbers: the gateway answered without a list of numbers",
            http_status=status,
        )
    out: dict[str, bool] = {}
    for item in doc:
        if not isinstance(item, Mapping) or not isinstance(item.get("exists"), bool):
            continue
        number = item.get("number")
        if not isinstance(number, str) or not number.strip():
            jid = item.get("jid")
            number = jid.split("@", 1)[0] if isinstance(jid, str) else ""
        digits = "".join(ch for ch in number if ch.isdigit())
        if digits:
            out[digits] = bool(item["exists"])
    return out


def build_typing(instance_id: str, to: str, seconds: float) -> GatewayRequest:
    """``POST /chat/sendPresence/{name}`` ``{"number", "presence": "composing",
    "delay": ms}`` (its SendPresenceDto): Evolution shows typing for ``delay`` ms, then
    paused, and answers after it."""
    name = _path(instance_id)
    number = normalise_number(to, "to")
    delay = max(0, min(MAX_TYPING_MS, round(seconds * 1000)))
    body = {"number": number, "presence": "composing", "delay": delay}
    return GatewayRequest("POST", f"chat/sendPresence/{name}", json=body, credentials="header")


def error_text(doc: Any) -> str:
    """The words of an Evolution error body (``response.message``: a string or a list)."""
    if not isinstance(doc, Mapping):
        return ""
    response = doc.get("response")
    found = response.get("message") if isinstance(response, Mapping) else doc.get("message")
    if isinstance(found, list):
        parts = [
            item if isinstance(item, str) else _compact(item) for item in found if item is not None
        ]
        return "; ".join(p for p in parts if p)
    if isinstance(found, str):
        return found.strip()
    error = doc.get("error")
    return error.strip() if isinstance(error, str) else ""


def _compact(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)[:300]


def _refusal(status: int, text: str) -> SendOutcome | None:
    """What Evolution's own error answers mean; None: read the HTTP status alone."""
    low = text.lower()
    if status == 400 and _NOT_ON_APP in low.replace(" ", ""):
        return SendOutcome(OutcomeKind.PERMANENT, reason="not on WhatsApp", http_status=status)
    if any(marker in low for marker in _CLOSED_MARKERS):
        return SendOutcome(
            OutcomeKind.INSTANCE,
            reason=f"the sender is not connected ({text[:200]})",
            problem=InstanceProblem.RELOGIN_REQUIRED,
            http_status=status,
        )
    if status == 404 and "instance does not exist" in low:
        return SendOutcome(
            OutcomeKind.INSTANCE,
            reason=text[:200],
            problem=InstanceProblem.INVALID_INSTANCE,
            http_status=status,
        )
    if status == 400 and text:
        return SendOutcome(OutcomeKind.PERMANENT, reason=text[:300], http_status=status)
    return None


def classify_send(
    status: int, headers: Mapping[str, str], content: bytes, *, now: datetime | None = None
) -> SendOutcome:
    """The outcome of a ``message/send...`` answer: 201 with ``key.id`` is accepted; a
    number not on WhatsApp (400, ``exists: false``) is permanent; a closed connection
    pauses the sender; a missing instance (404) is an instance problem; the rest as the
    spec dialect's HTTP statuses (gateway/classify.py)."""
    if 200 <= status < 300:
        return classify_send_response(status, headers, content, now=now)
    text = error_text(parse_body(content).doc)
    return classify_error(status, headers, lambda: _refusal(status, text), now)


def interpret_operation(
    operation: str,
    status: int,
    headers: Mapping[str, str],
    content: bytes,
    *,
    now: datetime | None = None,
) -> Mapping[str, Any]:
    """The answer of an instance operation in the spec's terms (``instance_id``,
    ``base64``, ``message``); raises :class:`GatewayError` for an error answer, and for a
    QR asked of a linked instance ("already logged in", as the spec's gateways say)."""
    doc = parse_body(content).doc
    if not 200 <= status < 300:
        detail = error_text(doc)
        operation_failed(operation, status, headers, _refusal(status, detail), detail, now)
    if not isinstance(doc, Mapping):
        raise not_an_object(operation, status)
    if operation == "create_instance":
        instance = doc.get("instance")
        name = instance.get("instanceName") if isinstance(instance, Mapping) else None
        return {"instance_id": name} if isinstance(name, str) and name.strip() else {}
    if operation == "get_qrcode":
        base64 = doc.get("base64")
        if isinstance(base64, str) and base64.strip():
            return {"base64": base64.strip()}
        instance = doc.get("instance")
        state = instance.get("state") if isinstance(instance, Mapping) else None
        if state == "open":  # the spec gateways' refusal, which campaigns/instances.py reads
            raise GatewayError(
                OutcomeKind.PERMANENT,
                None,
                f"{operation}: This instance is already logged in",
                http_status=status,
            )
        return {"message": "the QR code comes through the webhook (qrcode.updated)"}
    return doc


__all__ = [
    "CAPABILITIES",
    "INTEGRATION",
    "MAX_TYPING_MS",
    "WEBHOOK_EVENTS",
    "build_number_check",
    "build_operation",
    "build_send",
    "build_typing",
    "classify_send",
    "error_text",
    "interpret_operation",
    "new_instance_name",
    "read_number_check",
    "send_body",
    "unsupported_reason",
]
