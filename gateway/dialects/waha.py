"""WAHA (WhatsApp HTTP API): its requests, and what its answers mean (docs/gateways.md).

Routes are ``{base_url}/api/sessions...`` for sessions, ``{base_url}/api/{session}/auth/qr``
for the QR code and ``{base_url}/api/send<Kind>`` for sends (the session name in the
body); the key goes in the ``X-Api-Key`` header (the client sets it once). The session
name is gatecast's instance id; the webhook lives in the session's config
(``PUT /api/sessions/{session}``). Sends answer HTTP 200/201 with the engine's sent
message (NOWEB/GOWS: ``key.id``; WEBJS: ``id.id``); errors are NestJS answers
``{"statusCode": N, "message": ..., "error": ...}`` (422 for a session that is not
WORKING, a feature of WAHA Plus or one the engine lacks). Builders raise
:class:`~gateway.errors.RequestValidationError` naming the field before any I/O, as
the other dialects' do (docs/architecture.md, the WAHA decision).
"""

from __future__ import annotations

import json
import mimetypes
import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

from gateway.classify import parse_body
from gateway.dialects import NOTHING_MORE, Capabilities
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
    is_group,
    template_body,
    validate_http_url,
    validate_instance_id,
)

#: no number check nor typing yet (decision 68)
CAPABILITIES: Capabilities = NOTHING_MORE
#: the webhook events gatecast subscribes to (gateway/event_parsing.py reads them, and
#: ``message`` too): ``message.any`` carries incoming messages on every engine (GOWS
#: posts it where the others post ``message``); subscribing to both would bring each
#: incoming message twice. Our own messages in it (``fromMe``) are ignored.
WEBHOOK_EVENTS: tuple[str, ...] = ("message.any", "message.ack", "session.status")
#: a voice note: WAHA's sendVoice wants OGG/Opus; other audio goes as a file
_VOICE_TYPES = ("audio/ogg", "audio/opus")
_NOT_WORKING = "session status is not as expected"
_NO_SESSION = ("session not found", "didn't find a session", "only 'default' session")
_REFUSED_MARKERS = ("available only in plus", "not implemented by the engine")


def unsupported_reason(message_type: str) -> str | None:
    """Why WAHA cannot send a message of ``message_type``, or None (it sends text, media,
    buttons and lists; buttons and lists need the NOWEB or GOWS engine, media WAHA Plus:
    docs/gateways.md)."""
    if message_type == "template":
        return (
            "WAHA cannot send template messages (legacy quick-reply templates); "
            "use an interactive message with quick_reply buttons"
        )
    return None


def new_session_name() -> str:
    """A fresh session name: 16 upper-case hex digits, as gatecast's other instance ids
    (WAHA's names are free text up to 54 characters)."""
    return secrets.token_hex(8).upper()


def _name(instance_id: str) -> str:
    return validate_instance_id(instance_id)


def _chat_id(to: str, message: Message) -> str:
    """WAHA's ``chatId``: ``<digits>@c.us`` for a person, the group's ``...@g.us``."""
    chat = recipient(to, message)
    return chat if is_group(chat) else chat + "@c.us"


def _media_endpoint(message: Media, url: str) -> tuple[str, str]:
    """WAHA's send route for a media file and its MIME type: images, videos, OGG/Opus
    voice notes without a caption to their own routes, everything else as a file."""
    name = message.filename or urlsplit(url).path.rsplit("/", 1)[-1]
    mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
    major = mime.split("/", 1)[0]
    if major == "image":
        return "sendImage", mime
    if major == "video":
        return "sendVideo", mime
    if mime in _VOICE_TYPES and not message.caption:
        return "sendVoice", mime
    return "sendFile", mime


def send_body(message: Message, session: str, chat_id: str) -> tuple[str, dict[str, Any]]:
    """The ``api/<endpoint>`` and JSON body of ``message`` (MessageTextRequest,
    MessageImageRequest/FileRequest/VideoRequest/VoiceRequest, SendButtonsRequest,
    SendListRequest in docs/gateways.md)."""
    base: dict[str, Any] = {"session": session, "chatId": chat_id}
    if isinstance(message, Text):
        if not isinstance(message.text, str) or not message.text.strip():
            raise RequestValidationError("message.text", "is required and must not be empty")
        return "sendText", {**base, "text": message.text}
    if isinstance(message, Media):
        url = validate_http_url(message.media_url, "message.media_url")
        endpoint, mime = _media_endpoint(message, url)
        file: dict[str, Any] = {"url": url, "mimetype": mime}
        name = file_name(message)
        if name:
            file["filename"] = name
        body = {**base, "file": file}
        if message.caption and endpoint != "sendVoice":
            body["caption"] = message.caption
        return endpoint, body
    if isinstance(message, Interactive):
        template_body(message)  # the spec dialect's checks: texts, ids used once
        buttons = [button_fields(b, i, "text") for i, b in enumerate(message.buttons)]
        body = {**base, "body": message.text, "buttons": buttons}
        if message.title:
            body["header"] = message.title
        if message.footer:
            body["footer"] = message.footer
        return "sendButtons", body
    if isinstance(message, ListMessage):
        checked = template_body(message)
        sections = [
            {
                "title": s["title"],
                "rows": [_row(r) for r in s["rows"]],
            }
            for s in checked["sections"]
        ]
        content: dict[str, Any] = {
            "title": message.title or message.text,
            "description": message.text,
            "button": message.button_text,
            "sections": sections,
        }
        if message.footer:
            content["footer"] = message.footer
        return "sendList", {**base, "message": content}
    reason = unsupported_reason(message_type(message))
    raise RequestValidationError("message", reason or f"{type(message).__name__} is not a message")


def _row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A list row (``description`` only when it says something: WAHA's is optional)."""
    out = {"title": row["title"], "rowId": row["rowId"]}
    if row.get("description"):
        out["description"] = row["description"]
    return out


def build_send(instance_id: str, to: str, message: Message) -> GatewayRequest:
    """The request that sends ``message`` to ``to`` (a phone number or ``...@g.us``)."""
    session = _name(instance_id)
    if not isinstance(message, (Text, Media, Interactive, LegacyTemplate, ListMessage)):
        raise RequestValidationError("message", f"{type(message).__name__} is not a message")
    chat_id = _chat_id(to, message)
    endpoint, body = send_body(message, session, chat_id)
    return GatewayRequest("POST", f"api/{endpoint}", json=body, credentials="header")


def webhook_config(url: str) -> dict[str, Any]:
    """The session config gatecast sets: one webhook with the events it reads."""
    return {"webhooks": [{"url": url, "events": list(WEBHOOK_EVENTS)}]}


def build_operation(
    operation: str, instance_id: str | None, extra: Mapping[str, str]
) -> GatewayRequest:
    """The request of one of gatecast's instance operations (gateway/requests.py's
    INSTANCE_OPERATIONS) on WAHA: create (and start) a session, its QR code, its config's
    webhook, logout, restart. ``reboot`` is a logout (WAHA restarts a running session
    to a new QR); ``reset_instance`` (a new id in the spec) is refused."""
    if operation == "create_instance":
        body = {"name": new_session_name(), "start": True}
        return GatewayRequest("POST", "api/sessions", json=body, credentials="header")
    name = quote(_name(instance_id or ""), safe="")
    if operation == "get_qrcode":
        return GatewayRequest(
            "GET", f"api/{name}/auth/qr", params={"format": "image"}, credentials="header"
        )
    if operation == "set_webhook":
        url = validate_http_url(extra.get("webhook_url"), "webhook_url")
        config = webhook_config(url) if extra.get("enable", "true") == "true" else {"webhooks": []}
        return GatewayRequest(
            "PUT", f"api/sessions/{name}", json={"config": config}, credentials="header"
        )
    if operation in ("reboot", "logout"):
        return GatewayRequest("POST", f"api/sessions/{name}/logout", credentials="header")
    if operation == "reconnect":
        return GatewayRequest("POST", f"api/sessions/{name}/restart", credentials="header")
    if operation == "reset_instance":
        raise RequestValidationError(
            "operation",
            "WAHA has no reset: log the session out and show its QR code again, "
            "or create a new session",
        )
    raise RequestValidationError("operation", f"{operation!r} is not an instance operation")


def error_text(doc: Any) -> str:
    """The words of a WAHA error body: ``message`` (a string, a list of validation
    messages, or an object with ``error``), else ``error``."""
    if not isinstance(doc, Mapping):
        return ""
    found = doc.get("message")
    if isinstance(found, Mapping):
        inner = found.get("error")
        status = found.get("status")
        words = inner if isinstance(inner, str) else json.dumps(found)[:300]
        return f"{words} (status {status})" if isinstance(status, str) else words
    if isinstance(found, list):
        return "; ".join(str(item) for item in found if item is not None)
    if isinstance(found, str):
        return found.strip()
    exception = doc.get("exception")
    if isinstance(exception, Mapping) and isinstance(exception.get("message"), str):
        return str(exception["message"]).strip()
    error = doc.get("error")
    if not isinstance(error, str):
        return ""
    status = doc.get("status")
    return f"{error.strip()} (status {status})" if isinstance(status, str) else error.strip()


def _session_status(doc: Any) -> str | None:
    """The session status of a 422 "not as expected" answer: WAHA throws the object
    ``{"error", "session", "status", "expected"}`` itself (or, wrapped, ``message``)."""
    if not isinstance(doc, Mapping):
        return None
    for node in (doc, doc.get("message")):
        status = node.get("status") if isinstance(node, Mapping) else None
        if isinstance(status, str):
            return status
    return None


def _refusal(status: int, doc: Any) -> SendOutcome | None:
    """What WAHA's own error answers mean; None: read the HTTP status alone."""
    text = error_text(doc)
    low = text.lower()
    if status == 422 and _NOT_WORKING in low:
        state = _session_status(doc)
        if state == "STARTING":
            return SendOutcome(
                OutcomeKind.RETRYABLE,
                reason=f"the session is starting ({text[:200]})",
                retry_after=5.0,
                http_status=status,
            )
        return SendOutcome(
            OutcomeKind.INSTANCE,
            reason=f"the sender is not connected ({text[:200]})",
            problem=InstanceProblem.RELOGIN_REQUIRED,
            http_status=status,
        )
    if status in (404, 422) and any(marker in low for marker in _NO_SESSION):
        return SendOutcome(
            OutcomeKind.INSTANCE,
            reason=text[:300],
            problem=InstanceProblem.INVALID_INSTANCE,
            http_status=status,
        )
    if status in (400, 422) and text:
        return SendOutcome(OutcomeKind.PERMANENT, reason=text[:300], http_status=status)
    return None


def message_id_of(value: Any) -> str | None:
    """The message's own id from WAHA's forms: a serialized ``true_<chat>_<ID>[_...]``
    (events, WEBJS), ``{"_serialized", "id"}`` (WEBJS) or a Baileys ``key.id``
    (NOWEB, GOWS). gatecast keeps the bare ``<ID>`` so sends and events correlate."""
    if isinstance(value, str):
        parts = value.strip().split("_")
        if len(parts) >= 3 and parts[0] in ("true", "false"):
            return parts[2] or None
        return value.strip() or None
    if isinstance(value, Mapping):
        for key in ("id", "_serialized"):
            found = message_id_of(value.get(key)) if key in value else None
            if found:
                return found
    return None


def _sent_id(doc: Any) -> str | None:
    if not isinstance(doc, Mapping):
        return None
    key = doc.get("key")
    if isinstance(key, Mapping) and isinstance(key.get("id"), str) and key["id"].strip():
        return str(key["id"]).strip()
    return message_id_of(doc.get("id"))


def classify_send(
    status: int, headers: Mapping[str, str], content: bytes, *, now: datetime | None = None
) -> SendOutcome:
    """The outcome of an ``api/send...`` answer: 2xx with the message's id is accepted
    (without one, whether it left is unknown); a session that is not WORKING pauses the
    sender (STARTING: retry soon); a missing session is an instance problem; a feature
    of WAHA Plus or one the engine lacks is refused with WAHA's words; the rest as the
    spec dialect's HTTP statuses (gateway/classify.py)."""
    doc = parse_body(content).doc
    if 200 <= status < 300:
        message_id = _sent_id(doc)
        if message_id:
            return SendOutcome(OutcomeKind.ACCEPTED, message_id=message_id, http_status=status)
        return SendOutcome(
            OutcomeKind.AMBIGUOUS,
            reason="WAHA answered without the message's id: whether it left is unknown",
            http_status=status,
        )
    return classify_error(status, headers, lambda: _refusal(status, doc), now)


def interpret_operation(
    operation: str,
    status: int,
    headers: Mapping[str, str],
    content: bytes,
    *,
    now: datetime | None = None,
) -> Mapping[str, Any]:
    """The answer of an instance operation in the spec's terms (``instance_id``,
    ``base64``); raises :class:`GatewayError` for an error answer, and for a QR asked
    of a WORKING session ("already logged in", as the spec's gateways say)."""
    doc = parse_body(content).doc
    if not 200 <= status < 300:
        if operation == "get_qrcode" and _session_status(doc) == "WORKING":
            raise GatewayError(
                OutcomeKind.PERMANENT,
                None,
                f"{operation}: This instance is already logged in",
                http_status=status,
            )
        operation_failed(operation, status, headers, _refusal(status, doc), error_text(doc), now)
    if not isinstance(doc, Mapping):
        if doc is None and operation != "get_qrcode":
            return {}  # an empty 2xx body: done
        raise not_an_object(operation, status)
    if operation == "create_instance":
        name = doc.get("name")
        return {"instance_id": name} if isinstance(name, str) and name.strip() else {}
    if operation == "get_qrcode":
        data = doc.get("data")
        if isinstance(data, str) and data.strip():
            mime = doc.get("mimetype") if isinstance(doc.get("mimetype"), str) else "image/png"
            return {"base64": f"data:{mime};base64,{data.strip()}"}
        return {"message": "WAHA answered no QR code"}
    return doc


__all__ = [
    "CAPABILITIES",
    "WEBHOOK_EVENTS",
    "build_operation",
    "build_send",
    "classify_send",
    "error_text",
    "interpret_operation",
    "message_id_of",
    "new_session_name",
    "send_body",
    "unsupported_reason",
    "webhook_config",
]
