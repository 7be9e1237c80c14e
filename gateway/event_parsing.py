"""Webhook bodies -> typed events, whatever the dialect.

Two vocabularies are understood (gateway-field-notes.md and docs/sandbox.md):

- the reference envelope ``{"instance_id": ID, "data": {"event": NAME, "data": PAYLOAD}}``
  with Baileys payloads: ``messages.update``, ``messages.upsert`` (``{"messages": [...]}`` or a
  bare list; int or string status enums; int, string or Long timestamps),
  ``presence.update``, ``connection.update`` (QR and connection state);
- the spec's flat events ``{"event": NAME, "instance_id": ID, "data": {...}}`` with NAME
  ``message``, ``message_status``, ``presence``, ``qr`` or ``connection``;
- Evolution API v2's ``{"event": NAME, "instance": INSTANCE_NAME, "data": {...}, ...}``
  (docs/gateways.md): ``messages.upsert`` (one Baileys message), ``messages.update`` (a
  flat ``{"keyId", "remoteJid", "fromMe", "status": "DELIVERY_ACK"...}``),
  ``qrcode.updated`` (``{"qrcode": {"base64": ...}}``), ``connection.update``
  (``{"state", "statusReason"}``) and ``presence.update``. The instance name is the
  instance id.

Anything else that is well formed comes back as :class:`UnknownEvent`. A body that is not an
event (not JSON, or a required field missing or of the wrong type) raises
:class:`MalformedEvent` whose message names the place, e.g. ``data.data[2].key.id: missing``.
Characters no database stores (NUL, lone surrogates: :mod:`gateway.text`) are removed from
the decoded JSON, so such an event is stored and applied like any other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

from gateway.events import (
    ConnectionStatus,
    DeliveryStatus,
    Event,
    IncomingMessage,
    MalformedEvent,
    MessageStatus,
    Presence,
    QrCode,
    UnknownEvent,
)
from gateway.text import storable

_STATUS_BY_CODE: dict[int, DeliveryStatus] = {
    0: DeliveryStatus.FAILED,
    1: DeliveryStatus.PENDING,
    2: DeliveryStatus.SENT,
    3: DeliveryStatus.DELIVERED,
    4: DeliveryStatus.READ,
    5: DeliveryStatus.PLAYED,
}
_STATUS_BY_NAME: dict[str, DeliveryStatus] = {
    "error": DeliveryStatus.FAILED,
    "failed": DeliveryStatus.FAILED,
    "fail": DeliveryStatus.FAILED,
    "pending": DeliveryStatus.PENDING,
    "server_ack": DeliveryStatus.SENT,
    "sent": DeliveryStatus.SENT,
    "delivery_ack": DeliveryStatus.DELIVERED,
    "delivered": DeliveryStatus.DELIVERED,
    "read": DeliveryStatus.READ,
    "seen": DeliveryStatus.READ,
    "played": DeliveryStatus.PLAYED,
}
_CONNECTION_STATES: dict[str, str] = {
    "open": "connected",
    "connected": "connected",
    "online": "connected",
    "close": "disconnected",
    "closed": "disconnected",
    "disconnected": "disconnected",
    "offline": "disconnected",
    "connecting": "waiting_scan",
    "waiting_scan": "waiting_scan",
    "qr": "waiting_scan",
    "logged_out": "logged_out",
    "loggedout": "logged_out",
    "logout": "logged_out",
    "refused": "logged_out",  # Evolution API: the QR limit was reached, the session ended
}
_WRAPPERS = (
    "ephemeralMessage",
    "viewOnceMessage",
    "viewOnceMessageV2",
    "viewOnceMessageV2Extension",
    "documentWithCaptionMessage",
    "editedMessage",
)
_PERSONAL_SUFFIXES = ("@s.whatsapp.net", "@c.us")

_Json = Any


#: a JSON escape of a character no database stores (NUL, a surrogate): a body holding none
#: is not walked (gateway.text)
_UNSTORABLE_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")


def _loads(text: str) -> Any:
    """``text`` as JSON, without the characters no database stores (NUL, lone
    surrogates: removed, so the event is stored and applied, never lost for one)."""
    value = json.loads(text)
    return storable(value) if _UNSTORABLE_ESCAPE.search(text) else value


def parse_webhook(body: bytes | str | Mapping[str, Any] | list[Any]) -> list[Event]:
    """Every event in one webhook body (a body may carry several, or none we act on)."""
    if isinstance(body, bytes | bytearray):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedEvent(
                f"body: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
    if isinstance(body, str):
        if not body.strip():
            raise MalformedEvent("body: empty")
        try:
            body = _loads(body)
        except ValueError as exc:
            raise MalformedEvent(f"body: not JSON ({exc})") from None
        except RecursionError:
            raise MalformedEvent("body: JSON nested too deeply") from None
    if isinstance(body, list):
        events: list[Event] = []
        for i, item in enumerate(body):
            events.extend(_parse_one(item, f"[{i}]"))
        return events
    return _parse_one(body, "")


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _where(path: str) -> str:
    return path or "body"


def _obj(value: _Json, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedEvent(f"{_where(path)}: expected an object, got {_kind(value)}")
    return value


def _kind(value: _Json) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
    }.get(type(value), "an object" if isinstance(value, Mapping) else type(value).__name__)


def _req_str(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    p = _join(path, key)
    if value is None:
        raise MalformedEvent(f"{p}: missing")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise MalformedEvent(f"{p}: expected a string, got {_kind(value)}")
    text = str(value)
    if not text:
        raise MalformedEvent(f"{p}: empty")
    return text


def _opt_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise MalformedEvent(f"{_join(path, key)}: expected a string, got {_kind(value)}")
    return str(value)


def _first_str(obj: Mapping[str, Any], keys: tuple[str, ...], path: str) -> str | None:
    for key in keys:
        value = _opt_str(obj, key, path)
        if value:
            return value
    return None


def _truthy(value: _Json) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _timestamp(value: _Json) -> datetime | None:
    """Epoch seconds or milliseconds (int, float, digit string, protobuf Long), or ISO 8601."""
    if isinstance(value, Mapping) and "low" in value:  # protobuf Long as JSON
        low, high = value.get("low"), value.get("high", 0)
        if isinstance(low, int) and isinstance(high, int):
            value = (high << 32) | (low & 0xFFFFFFFF)
    if isinstance(value, bool):
        return None
    number: float | None = None
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:
            return None
    elif isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except (ValueError, OverflowError):
            try:
                parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if number is None or number != number or number <= 0:
        return None
    if number > 1e11:  # milliseconds
        number /= 1000.0
    try:
        return datetime.fromtimestamp(number, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _status(value: _Json, path: str) -> DeliveryStatus | None:
    """A status from an int code, a Baileys enum name or a spec name; None when unknown."""
    if isinstance(value, bool) or value is None:
        raise MalformedEvent(f"{path}: expected a status code or name, got {_kind(value)}")
    if isinstance(value, int):
        return _STATUS_BY_CODE.get(value)
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            return _STATUS_BY_CODE.get(int(text))
        return _STATUS_BY_NAME.get(text.lower())
    raise MalformedEvent(f"{path}: expected a status code or name, got {_kind(value)}")


def _phone_of(jid: str) -> str | None:
    """Digits of a personal JID (``<digits>@s.whatsapp.net`` / ``@c.us``), else None."""
    for suffix in _PERSONAL_SUFFIXES:
        if jid.endswith(suffix):
            user = jid[: -len(suffix)].split(":", 1)[0]
            return user if user.isascii() and user.isdigit() else None
    return None


# --------------------------------------------------------------------------- dispatch
def _parse_one(body: _Json, path: str) -> list[Event]:
    top = _obj(body, path)
    if "session" in top and "payload" in top and isinstance(top.get("event"), str):
        return _waha(top, path)  # WAHA's envelope (docs/gateways.md)
    instance_id = _opt_str(top, "instance_id", path) or _opt_str(top, "instanceId", path)
    if instance_id is None and isinstance(top.get("instance"), str):  # Evolution API
        instance_id = top["instance"].strip() or None
    name_value = top.get("event")
    payload_path = _join(path, "data")
    if name_value is None:
        inner = top.get("data")
        if isinstance(inner, Mapping) and "event" in inner:
            name_value = inner.get("event")
            payload = inner.get("data")
            payload_path = _join(payload_path, "data")
            name_path = _join(_join(path, "data"), "event")
            instance_id = instance_id or _opt_str(inner, "instance_id", _join(path, "data"))
        else:
            raise MalformedEvent(
                f"{_where(path)}: no event name (expected 'event' or 'data.event')"
            )
    else:
        payload = top.get("data")
        name_path = _join(path, "event")
    if not isinstance(name_value, str) or not name_value:
        raise MalformedEvent(f"{name_path}: expected an event name, got {_kind(name_value)}")
    name = name_value.strip()
    key = name.lower().replace("-", "_")
    if isinstance(payload, str) and payload.lstrip().startswith(("{", "[")):
        try:  # some forwarders encode the payload twice
            payload = _loads(payload)
        except ValueError:
            raise MalformedEvent(f"{payload_path}: a string that is not JSON") from None
    handler = _HANDLERS.get(key)
    if handler is None:
        return [UnknownEvent(instance_id, name, payload)]
    return handler(instance_id, name, payload, payload_path)


def _items(payload: _Json, path: str, list_key: str | None = None) -> list[tuple[Any, str]]:
    """A payload that may be one object, a list, or ``{list_key: [...]}``."""
    if list_key is not None and isinstance(payload, Mapping) and list_key in payload:
        inner = payload[list_key]
        p = _join(path, list_key)
        if not isinstance(inner, list):
            raise MalformedEvent(f"{p}: expected an array, got {_kind(inner)}")
        return [(item, _join(p, i)) for i, item in enumerate(inner)]
    if isinstance(payload, list):
        return [(item, _join(path, i)) for i, item in enumerate(payload)]
    if isinstance(payload, Mapping):
        return [(payload, path)]
    raise MalformedEvent(f"{_where(path)}: expected an object or an array, got {_kind(payload)}")


# --------------------------------------------------------------------------- statuses
def _messages_update(iid: str | None, name: str, payload: _Json, path: str) -> list[Event]:
    out: list[Event] = []
    for item, p in _items(payload, path):
        entry = _obj(item, p)
        if "key" not in entry and "keyId" in entry:  # Evolution API's flat update
            out.append(_evolution_update(iid, name, entry, p))
            continue
        key = _obj(entry.get("key"), _join(p, "key"))
        mid = _req_str(key, "id", _join(p, "key"))
        update = entry.get("update")
        if update is None or (isinstance(update, Mapping) and "status" not in update):
            out.append(UnknownEvent(iid, name, entry))
            continue
        upd = _obj(update, _join(p, "update"))
        if "fromMe" in key and not _truthy(key.get("fromMe")):
            out.append(UnknownEvent(iid, name, entry))  # a status of a message we received
            continue
        status = _status(upd.get("status"), _join(_join(p, "update"), "status"))
        if status is None:
            out.append(UnknownEvent(iid, name, entry))
            continue
        chat = _opt_str(key, "remoteJid", _join(p, "key"))
        at = upd.get("messageTimestamp", entry.get("messageTimestamp"))
        out.append(_status_event(iid, mid, status, chat, upd, _join(p, "update"), at))
    return out


def _evolution_update(iid: str | None, name: str, entry: Mapping[str, Any], p: str) -> Event:
    """Evolution API's ``messages.update`` item: ``{"keyId", "remoteJid", "fromMe",
    "status": "SERVER_ACK" | "DELIVERY_ACK" | "READ" | "PLAYED" | "ERROR" | "DELETED"}``."""
    mid = _req_str(entry, "keyId", p)
    if "fromMe" in entry and not _truthy(entry.get("fromMe")):
        return UnknownEvent(iid, name, entry)  # a status of a message we received
    if "status" not in entry:
        return UnknownEvent(iid, name, entry)  # a poll vote or an edit
    status = _status(entry.get("status"), _join(p, "status"))
    if status is None:  # DELETED and other non-delivery states
        return UnknownEvent(iid, name, entry)
    chat = _opt_str(entry, "remoteJid", p)
    return _status_event(iid, mid, status, chat, entry, p, entry.get("messageTimestamp"))


def _status_event(
    iid: str | None,
    mid: str,
    status: DeliveryStatus,
    chat: str | None,
    obj: Mapping[str, Any],
    path: str,
    at: Any,
) -> MessageStatus:
    """A message status; a failure's code is read from ``obj`` (at ``path``)."""
    failed = status is DeliveryStatus.FAILED
    return MessageStatus(
        instance_id=iid,
        message_id=mid,
        status=status,
        chat=chat,
        error_code=_error_code(obj, path) if failed else None,
        at=_timestamp(at),
    )


def _error_code(obj: Mapping[str, Any], path: str) -> str | None:
    params = obj.get("messageStubParameters")
    if isinstance(params, list) and params:
        first = params[0]
        if isinstance(first, str | int) and not isinstance(first, bool):
            return str(first)
    return _first_str(obj, ("error_code", "errorCode", "error"), path)


def _message_status(iid: str | None, name: str, payload: _Json, path: str) -> list[Event]:
    out: list[Event] = []
    for item, p in _items(payload, path, "statuses"):
        entry = _obj(item, p)
        if "key" in entry:  # a Baileys-shaped status under the spec's name
            out.extend(_messages_update(iid, name, [entry], p))
            continue
        mid = _first_str(entry, ("id", "message_id", "messageId"), p)
        if mid is None:
            raise MalformedEvent(f"{_join(p, 'id')}: missing")
        if "status" not in entry:
            raise MalformedEvent(f"{_join(p, 'status')}: missing")
        status = _status(entry.get("status"), _join(p, "status"))
        if status is None:
            out.append(UnknownEvent(iid, name, entry))
            continue
        chat = _first_str(entry, ("chat", "to", "remoteJid"), p)
        at = entry.get("timestamp", entry.get("messageTimestamp"))
        out.append(_status_event(iid, mid, status, chat, entry, p, at))
    return out


# --------------------------------------------------------------------------- messages
def _unwrap(content: Mapping[str, Any]) -> Mapping[str, Any]:
    for _ in range(4):
        for wrapper in _WRAPPERS:
            inner = content.get(wrapper)
            if isinstance(inner, Mapping) and isinstance(inner.get("message"), Mapping):
                content = inner["message"]
                break
        else:
            return content
    return content


def _dig(obj: Mapping[str, Any], *keys: str) -> str | None:
    cur: Any = obj
    for key in keys:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur if isinstance(cur, str) else None


def _text_of(content: Mapping[str, Any]) -> str:
    """The readable text of a Baileys message (replies to buttons and lists included)."""
    content = _unwrap(content)
    for path in (
        ("conversation",),
        ("extendedTextMessage", "text"),
        ("imageMessage", "caption"),
        ("videoMessage", "caption"),
        ("documentMessage", "caption"),
        ("buttonsResponseMessage", "selectedDisplayText"),
        ("templateButtonReplyMessage", "selectedDisplayText"),
        ("listResponseMessage", "title"),
        ("interactiveResponseMessage", "body", "text"),
    ):
        text = _dig(content, *path)
        if text:
            return text
    params = _dig(content, "interactiveResponseMessage", "nativeFlowResponseMessage", "paramsJson")
    if params:
        try:
            decoded = _loads(params)
        except ValueError:
            return ""
        if isinstance(decoded, Mapping):
            for key in ("display_text", "title", "id"):
                value = decoded.get(key)
                if isinstance(value, str) and value:
                    return value
    return ""


class _Choice(NamedTuple):
    """What a message says beyond its text: the button or row chosen, the message quoted."""

    button_id: str | None = None
    row_id: str | None = None
    quoted_id: str | None = None


_NO_CHOICE = _Choice()


def _id_at(obj: Mapping[str, Any], *keys: str) -> str | None:
    """The id at ``keys`` (a string or a number) as :func:`_id_text` gives it."""
    cur: Any = obj
    for key in keys:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return _id_text(cur)


def _id_text(value: _Json) -> str | None:
    """An id as text (a string or a number; an empty one is none), at most 256 characters."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value).strip()
    return text[:256] or None


def _choice_of(content: Mapping[str, Any]) -> _Choice:
    """The button or list row a Baileys message chose and the message it quotes
    (``contextInfo.stanzaId`` of its one message kind)."""
    content = _unwrap(content)
    button = _id_at(content, "buttonsResponseMessage", "selectedButtonId") or _id_at(
        content, "templateButtonReplyMessage", "selectedId"
    )
    row = _id_at(content, "listResponseMessage", "singleSelectReply", "selectedRowId")
    if button is None and row is None:
        params = _dig(
            content, "interactiveResponseMessage", "nativeFlowResponseMessage", "paramsJson"
        )
        try:
            decoded = _loads(params) if params else None
        except ValueError:
            decoded = None
        if isinstance(decoded, Mapping):
            button = _id_text(decoded.get("id"))
    quoted = None
    for kind in content.values():
        if isinstance(kind, Mapping) and isinstance(kind.get("contextInfo"), Mapping):
            quoted = _id_at(kind, "contextInfo", "stanzaId")
            if quoted:
                break
    return _Choice(button, row, quoted and quoted[:128])


def _messages_upsert(iid: str | None, name: str, payload: _Json, path: str) -> list[Event]:
    out: list[Event] = []
    for item, p in _items(payload, path, "messages"):
        msg = _obj(item, p)
        key = _obj(msg.get("key"), _join(p, "key"))
        kp = _join(p, "key")
        chat = _req_str(key, "remoteJid", kp)
        if chat == "status@broadcast":
            continue
        mid = _req_str(key, "id", kp)
        at = _timestamp(msg.get("messageTimestamp"))
        if _truthy(key.get("fromMe")):
            if "status" in msg:
                status = _status(msg.get("status"), _join(p, "status"))
                if status is not None:
                    out.append(MessageStatus(iid, mid, status, chat=chat, at=at))
                    continue
            out.append(UnknownEvent(iid, name, msg))  # our own message echoed back
            continue
        content = msg.get("message")
        if content is None:
            out.append(UnknownEvent(iid, name, msg))  # a stub (e.g. a system notice)
            continue
        body = _obj(content, _join(p, "message"))
        out.append(_incoming(iid, mid, chat, _text_of(body), at, choice=_choice_of(body)))
    return out


def _incoming(
    iid: str | None,
    mid: str,
    chat: str,
    text: str,
    at: datetime | None,
    sender: str = "",
    *,
    choice: _Choice = _NO_CHOICE,
) -> IncomingMessage:
    """An incoming message; the sender's phone is known only outside groups."""
    is_group = chat.endswith("@g.us")
    return IncomingMessage(
        instance_id=iid,
        message_id=mid,
        chat=chat,
        text=text,
        sender_phone=None if is_group else _phone_of(sender or chat),
        is_group=is_group,
        at=at,
        button_id=choice.button_id,
        row_id=choice.row_id,
        quoted_id=choice.quoted_id,
    )


def _spec_choice(entry: Mapping[str, Any]) -> _Choice:
    """The spec dialect's choice (``reply_id`` of a ``button_reply`` or ``list_reply``)
    and quoted message (``quoted_id``, or ``context.id``)."""
    reply_id = _id_text(entry.get("reply_id"))
    kind = entry.get("type")
    row = reply_id if kind == "list_reply" else None
    button = reply_id if reply_id is not None and row is None else None
    context = entry.get("context")
    quoted = _id_text(entry.get("quoted_id")) or (
        _id_text(context.get("id")) if isinstance(context, Mapping) else None
    )
    return _Choice(button, row, quoted and quoted[:128])


def _message(iid: str | None, name: str, payload: _Json, path: str) -> list[Event]:
    """The spec's ``message`` event (a Baileys-shaped payload is accepted too)."""
    out: list[Event] = []
    for item, p in _items(payload, path, "messages"):
        entry = _obj(item, p)
        if "key" in entry:
            out.extend(_messages_upsert(iid, name, [entry], p))
            continue
        mid = _first_str(entry, ("id", "message_id", "messageId"), p)
        if mid is None:
            raise MalformedEvent(f"{_join(p, 'id')}: missing")
        chat = _first_str(entry, ("chat", "from", "remoteJid"), p)
        if chat is None:
            raise MalformedEvent(f"{_join(p, 'chat')}: missing")
        if chat == "status@broadcast":
            continue
        at = _timestamp(entry.get("timestamp"))
        if _truthy(entry.get("from_me", entry.get("fromMe"))):
            status = _status(entry["status"], _join(p, "status")) if "status" in entry else None
            if status is not None:
                out.append(MessageStatus(iid, mid, status, chat=chat, at=at))
            else:
                out.append(UnknownEvent(iid, name, entry))
            continue
        text = _opt_str(entry, "text", p) or _opt_str(entry, "body", p) or ""
        sender = _first_str(entry, ("from", "chat"), p) or chat
        out.append(_incoming(iid, mid, chat, text, at, sender, choice=_spec_choice(entry)))
    return out


# --------------------------------------------------------------------------- WAHA
#: WAHA's ``ack`` levels (WAMessageAck): -1 ERROR .. 4 PLAYED
_WAHA_ACKS = {
    -1: DeliveryStatus.FAILED,
    0: DeliveryStatus.PENDING,
    1: DeliveryStatus.SENT,
    2: DeliveryStatus.DELIVERED,
    3: DeliveryStatus.READ,
    4: DeliveryStatus.PLAYED,
}
_WAHA_SESSION_STATES = {
    "WORKING": "connected",
    "SCAN_QR_CODE": "waiting_scan",
    "STOPPED": "disconnected",
    "FAILED": "logged_out",  # the session needs a new scan (or a restart)
}
_WAHA_PRESENCES = {"online": "available", "offline": "unavailable", "typing": "composing"}


def _waha(top: Mapping[str, Any], path: str) -> list[Event]:
    """WAHA's ``{"event", "session", "payload", "me", "engine", ...}``: ``message`` and
    ``message.any`` (GOWS) for incoming messages, ``message.ack`` (and
    ``message.ack.group``) for statuses, ``session.status``, ``presence.update``. The
    session name is the instance id; message ids are kept bare
    (:func:`gateway.dialects.waha.message_id_of`)."""
    from gateway.dialects.waha import message_id_of

    iid = _req_str(top, "session", path)
    name = str(top["event"]).strip()
    payload = top.get("payload")
    pp = _join(path, "payload")
    if name in ("message", "message.any"):
        msg = _obj(payload, pp)
        mid = message_id_of(msg.get("id"))
        if mid is None:
            raise MalformedEvent(f"{_join(pp, 'id')}: missing")
        chat = _req_str(msg, "from", pp)
        if _truthy(msg.get("fromMe")) or chat == "status@broadcast":
            return [UnknownEvent(iid, name, msg)]  # our own message (message.any)
        raw = msg.get("_data")
        content = raw.get("message") if isinstance(raw, Mapping) else None
        choice = _choice_of(content) if isinstance(content, Mapping) else _NO_CHOICE
        reply_to = msg.get("replyTo")
        if choice.quoted_id is None and isinstance(reply_to, Mapping):
            quoted = message_id_of(reply_to.get("id"))
            choice = _Choice(choice.button_id, choice.row_id, quoted and quoted[:128])
        text = _opt_str(msg, "body", pp) or (
            _text_of(_obj(content, pp)) if isinstance(content, Mapping) else ""
        )
        sender = _opt_str(msg, "participant", pp) or chat
        at = _timestamp(msg.get("timestamp"))
        return [_incoming(iid, mid, chat, text, at, sender, choice=choice)]
    if name in ("message.ack", "message.ack.group"):
        ack = _obj(payload, pp)
        mid = message_id_of(ack.get("id"))
        if mid is None:
            raise MalformedEvent(f"{_join(pp, 'id')}: missing")
        if "fromMe" in ack and not _truthy(ack.get("fromMe")):
            return [UnknownEvent(iid, name, ack)]  # a status of a message we received
        level = ack.get("ack")
        if isinstance(level, bool) or not isinstance(level, int):
            raise MalformedEvent(f"{_join(pp, 'ack')}: expected an ack level, got {_kind(level)}")
        status = _WAHA_ACKS.get(level)
        if status is None:
            return [UnknownEvent(iid, name, ack)]
        to = _opt_str(ack, "to", pp)
        at = _timestamp(top.get("timestamp"))  # the event's time (milliseconds)
        return [MessageStatus(iid, mid, status, chat=to, at=at)]
    if name == "session.status":
        data = _obj(payload, pp)
        raw_state = _req_str(data, "status", pp)
        state = _WAHA_SESSION_STATES.get(raw_state.upper())
        if state is None:  # STARTING: on its way
            return [UnknownEvent(iid, name, data)]
        me = top.get("me")
        me_id = me.get("id") if isinstance(me, Mapping) else None
        phone = _phone_of(me_id) if isinstance(me_id, str) else None
        return [ConnectionStatus(iid, state, raw_state, phone if state == "connected" else None)]
    if name == "presence.update":
        data = _obj(payload, pp)
        chat = _req_str(data, "id", pp)
        out: list[Event] = []
        for item, ip in _items(data.get("presences") or [], _join(pp, "presences")):
            last = _req_str(_obj(item, ip), "lastKnownPresence", ip).lower()
            out.append(Presence(iid, chat, _WAHA_PRESENCES.get(last, last)))
        return out
    return [UnknownEvent(iid, name, payload)]


# ------------------------------------------------------------- presence, qr, connection
def _presence(iid: str | None, name: str, payload: _Json, path: str) -> list[Event]:
    data = _obj(payload, path)
    presences = data.get("presences")
    if presences is not None:  # Baileys presence.update
        pres = _obj(presences, _join(path, "presences"))
        out: list[Event] = []
        for jid, value in pres.items():
            vp = _join(_join(path, "presences"), str(jid))
            last = _req_str(_obj(value, vp), "lastKnownPresence", vp)
            out.append(Presence(iid, str(jid), last.lower()))
        return out
    chat = _first_str(data, ("chat", "id", "from", "jid"), path)
    if chat is None:
        raise MalformedEvent(f"{_join(path, 'chat')}: missing")
    status = _first_str(data, ("status", "presence", "state"), path)
    if status is None:
        raise MalformedEvent(f"{_join(path, 'status')}: missing")
    return [Presence(iid, chat, status.lower(), at=_timestamp(data.get("timestamp")))]


def _data_uri(value: str) -> str:
    if value.startswith("data:"):
        return value
    if value.startswith("iVBOR"):  # a bare base64 PNG
        return f"data:image/png;base64,{value}"
    return value


def _qr(iid: str | None, name: str, payload: _Json, path: str) -> list[Event]:
    if isinstance(payload, str) and payload:
        return [QrCode(iid, _data_uri(payload))]
    data = _obj(payload, path)
    if isinstance(data.get("qrcode"), Mapping):  # Evolution API's qrcode.updated
        data = data["qrcode"]
        path = _join(path, "qrcode")
    value = _first_str(data, ("base64", "qr", "qrcode", "data_uri", "image"), path)
    if value is None and "statusCode" in data:  # Evolution API: "QR code limit reached"
        return [UnknownEvent(iid, name, data)]
    if value is None:
        raise MalformedEvent(f"{_join(path, 'base64')}: missing")
    return [QrCode(iid, _data_uri(value))]


def _connection_state(raw: str, reason: str, code: int | None) -> str:
    state = _CONNECTION_STATES.get(raw.strip().lower().replace(" ", "_"), raw.strip().lower())
    if state == "disconnected" and (
        code == 401 or "logged" in reason.lower() or "logout" in reason.lower()
    ):
        return "logged_out"
    return state


def _connection(iid: str | None, name: str, payload: _Json, path: str) -> list[Event]:
    data = _obj(payload, path)
    out: list[Event] = []
    qr = _first_str(data, ("qr", "base64", "qrcode"), path)
    if qr:
        out.append(QrCode(iid, _data_uri(qr)))
    raw = _first_str(data, ("state", "connection", "status"), path)
    if raw is None:
        if not out:
            if "isOnline" in data or "receivedPendingNotifications" in data or not data:
                return [UnknownEvent(iid, name, data)]
            raise MalformedEvent(f"{_join(path, 'state')}: missing")
        return out
    reason = _opt_str(data, "reason", path) or ""
    code: int | None = None
    last = data.get("lastDisconnect")
    if isinstance(last, Mapping):
        reason = reason or (_opt_str(last, "reason", _join(path, "lastDisconnect")) or "")
        err = last.get("error")
        output = err.get("output") if isinstance(err, Mapping) else None
        status_code = output.get("statusCode") if isinstance(output, Mapping) else None
        if isinstance(status_code, int) and not isinstance(status_code, bool):
            code = status_code
    reason_code = data.get("statusReason")  # Evolution API: the Baileys disconnect code
    if code is None and isinstance(reason_code, int) and not isinstance(reason_code, bool):
        code = reason_code
    phone = _opt_str(data, "phone", path)
    wuid = data.get("wuid")  # Evolution API: the linked number's JID
    if phone is None and isinstance(wuid, str):
        phone = _phone_of(wuid)
    me = data.get("me")
    if phone is None and isinstance(me, Mapping):
        me_id = me.get("id")
        if isinstance(me_id, str):
            phone = _phone_of(me_id)
    out.append(ConnectionStatus(iid, _connection_state(raw, reason, code), reason, phone))
    return out


_HANDLERS = {
    "messages.update": _messages_update,
    "messages_update": _messages_update,
    "message_status": _message_status,
    "message.status": _message_status,
    "message_ack": _message_status,
    "messages.upsert": _messages_upsert,
    "messages_upsert": _messages_upsert,
    "message": _message,
    "presence": _presence,
    "presence.update": _presence,
    "presence_update": _presence,
    "qr": _qr,
    "qrcode": _qr,
    "qr_code": _qr,
    "qrcode.updated": _qr,
    "qrcode_updated": _qr,
    "connection": _connection,
    "connection.update": _connection,
    "connection_update": _connection,
    "connection_status": _connection,
}

__all__ = ["parse_webhook"]
