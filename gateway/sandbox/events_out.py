"""Webhook bodies the sandbox emits, in both dialects (shapes documented in docs/sandbox.md).

Reference dialect: the Waziper/Baileys envelope
``{"instance_id": ID, "data": {"event": NAME, "data": PAYLOAD}}``.
Spec dialect: gatecast's definition of the spec's "not shown" payloads,
``{"event": NAME, "instance_id": ID, "data": {...}}`` with NAME one of ``message``,
``message_status``, ``presence``, ``qr``, ``connection``.
Evolution dialect: Evolution API v2's ``{"event", "instance", "data", "destination",
"date_time", "sender", "server_url", "apikey"}`` with ``messages.update`` (a flat
``{"keyId", "remoteJid", "fromMe", "status"}``), ``messages.upsert`` (one message),
``presence.update``, ``qrcode.updated`` and ``connection.update`` (docs/gateways.md).
WAHA dialect: WAHA's ``{"id", "timestamp", "event", "session", "metadata", "me",
"payload", "engine", "environment"}`` with ``message.any`` (an incoming message, its
Baileys original under ``_data``), ``message.ack`` (``ack`` -1..4), ``session.status``
and ``presence.update`` (docs/gateways.md, docs/sandbox.md).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from gateway.sandbox.config import Dialect

# Baileys' numeric message status (proto WebMessageInfo.Status)
STATUS_CODES: dict[str, int] = {
    "failed": 0,
    "pending": 1,
    "sent": 2,
    "delivered": 3,
    "read": 4,
    "played": 5,
}
STATUS_NAMES: dict[str, str] = {
    "failed": "ERROR",
    "pending": "PENDING",
    "sent": "SERVER_ACK",
    "delivered": "DELIVERY_ACK",
    "read": "READ",
    "played": "PLAYED",
}


def _envelope(instance_id: str, event: str, payload: Any) -> dict[str, Any]:
    return {"instance_id": instance_id, "data": {"event": event, "data": payload}}


def _evolution(instance_id: str, event: str, data: Any, at: int | None = None) -> dict[str, Any]:
    """Evolution API's webhook envelope (the instance name is the instance id)."""
    when = datetime.fromtimestamp(at, UTC) if at is not None else datetime.now(UTC)
    return {
        "event": event,
        "instance": instance_id,
        "data": data,
        "destination": None,
        "date_time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "sender": None,
        "server_url": "http://sandbox",
        "apikey": None,
    }


#: WAHA's ack levels (WAMessageAck) of the sandbox's statuses
_WAHA_ACKS = {"pending": 0, "sent": 1, "delivered": 2, "read": 3, "played": 4, "failed": -1}
_WAHA_ACK_NAMES = {-1: "ERROR", 0: "PENDING", 1: "SERVER", 2: "DEVICE", 3: "READ", 4: "PLAYED"}
_WAHA_STATUSES = {
    "connected": "WORKING",
    "waiting_scan": "SCAN_QR_CODE",
    "created": "STARTING",
    "disconnected": "STOPPED",
    "logged_out": "FAILED",
}


def _cus(jid: str) -> str:
    """WAHA's ``@c.us`` form of a personal JID (groups keep ``@g.us``)."""
    return jid.replace("@s.whatsapp.net", "@c.us")


def waha_me(phone: str | None) -> dict[str, Any] | None:
    """The ``me`` of a linked session."""
    return {"id": f"{phone}@c.us", "pushName": "Sandbox sender"} if phone else None


def _waha(
    instance_id: str,
    event: str,
    payload: Any,
    at: int | None = None,
    me: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """WAHA's webhook body (the session name is the instance id)."""
    when = at if at is not None else int(datetime.now(UTC).timestamp())
    seed = json.dumps([instance_id, event, payload, when], sort_keys=True, default=str)
    return {
        "id": "evt_" + hashlib.sha1(seed.encode(), usedforsecurity=False).hexdigest()[:26],
        "timestamp": when * 1000,
        "event": event,
        "session": instance_id,
        "metadata": {},
        "me": me,
        "payload": payload,
        "engine": "NOWEB",
        "environment": {"version": "sandbox", "engine": "NOWEB", "tier": "PLUS"},
    }


def reference_body(instance_id: str, event: str, payload: Any) -> dict[str, Any]:
    """Any event in the reference envelope (e.g. ``contacts.upsert``)."""
    return _envelope(instance_id, event, payload)


def _spec(instance_id: str, event: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"event": event, "instance_id": instance_id, "data": data}


def status_body(
    dialect: Dialect,
    instance_id: str,
    message_id: str,
    chat: str,
    status: str,
    at: int,
    *,
    error_code: str | None = None,
    variant: int = 0,
) -> dict[str, Any]:
    """A status change of our own message.

    Reference ``variant``: 0 ``messages.update`` with an int status; 1 an echo of our own
    message as ``messages.upsert`` (``{"messages": [...]}``) with a string status and a
    string timestamp; 2 the same echo as a bare list with an int status.
    """
    if dialect == "waha":  # WAHA keeps no error code in message.ack
        ack = _WAHA_ACKS[status]
        body = {
            "id": f"true_{_cus(chat)}_{message_id}",
            "from": _cus(chat),
            "to": _cus(chat),
            "participant": None,
            "fromMe": True,
            "ack": ack,
            "ackName": _WAHA_ACK_NAMES[ack],
        }
        return _waha(instance_id, "message.ack", body, at)
    if dialect == "evolution":  # Evolution keeps no error code in messages.update
        flat = {
            "keyId": message_id,
            "remoteJid": chat,
            "fromMe": True,
            "participant": chat,
            "status": STATUS_NAMES[status],
            "instanceId": instance_id,
        }
        return _evolution(instance_id, "messages.update", flat, at)
    if dialect == "spec":
        data: dict[str, Any] = {"id": message_id, "chat": chat, "status": status, "timestamp": at}
        if error_code is not None:
            data["error_code"] = error_code
        return _spec(instance_id, "message_status", data)
    key = {"remoteJid": chat, "fromMe": True, "id": message_id}
    if variant == 0 or status == "failed":
        update: dict[str, Any] = {"status": STATUS_CODES[status]}
        if error_code is not None:
            update["messageStubParameters"] = [error_code]
        return _envelope(instance_id, "messages.update", [{"key": key, "update": update}])
    if variant == 1:
        echo = {
            "key": key,
            "messageTimestamp": str(at),
            "status": STATUS_NAMES[status],
        }
        return _envelope(instance_id, "messages.upsert", {"messages": [echo], "type": "append"})
    echo_list = [{"key": key, "messageTimestamp": at, "status": STATUS_CODES[status]}]
    return _envelope(instance_id, "messages.upsert", echo_list)


def incoming_body(
    dialect: Dialect,
    instance_id: str,
    message_id: str,
    sender_digits: str,
    text: str,
    at: int,
    *,
    reply_kind: str = "text",
    reply_id: str | None = None,
    variant: int = 0,
    push_name: str = "",
    quoted_id: str | None = None,
) -> dict[str, Any]:
    """A message someone sent to the instance.

    ``reply_kind``: ``text``, ``button`` (a quick-reply choice), ``template_button``
    (a legacy template choice) or ``list`` (a list row). Reference ``variant`` (bit 0):
    ``{"messages": [...], "type": "notify"}`` or a bare list; (bit 1) string timestamp;
    (bit 2) ``@c.us`` address and ``extendedTextMessage`` for plain text. ``quoted_id``:
    the message it quotes (reference: ``contextInfo.stanzaId`` of its message kind, plain
    text then an ``extendedTextMessage``; spec: ``quoted_id``).
    """
    if dialect == "spec":
        chat = f"{sender_digits}@s.whatsapp.net"
        data: dict[str, Any] = {
            "id": message_id,
            "chat": chat,
            "from": chat,
            "from_me": False,
            "type": {"text": "text", "list": "list_reply"}.get(reply_kind, "button_reply"),
            "text": text,
            "timestamp": at,
        }
        if reply_id is not None:
            data["reply_id"] = reply_id
        if quoted_id is not None:
            data["quoted_id"] = quoted_id
        return _spec(instance_id, "message", data)
    if dialect in ("evolution", "waha"):
        variant = 0  # Baileys' own shape: @s.whatsapp.net, a number timestamp
    suffix = "c.us" if variant & 4 else "s.whatsapp.net"
    content: dict[str, Any]
    if reply_kind == "button":
        content = {
            "buttonsResponseMessage": {"selectedButtonId": reply_id, "selectedDisplayText": text}
        }
    elif reply_kind == "template_button":
        content = {
            "templateButtonReplyMessage": {"selectedId": reply_id, "selectedDisplayText": text}
        }
    elif reply_kind == "list":
        content = {
            "listResponseMessage": {
                "title": text,
                "singleSelectReply": {"selectedRowId": reply_id},
            }
        }
    elif variant & 4 or quoted_id is not None:
        content = {"extendedTextMessage": {"text": text}}
    else:
        content = {"conversation": text}
    if quoted_id is not None:
        remote = f"{sender_digits}@{suffix}"
        for kind in content.values():
            kind["contextInfo"] = {"stanzaId": quoted_id, "participant": remote}
    msg = {
        "key": {"remoteJid": f"{sender_digits}@{suffix}", "fromMe": False, "id": message_id},
        "pushName": push_name,
        "message": content,
        "messageTimestamp": str(at) if variant & 2 else at,
    }
    if dialect == "waha":  # WAHA's WAMessage, the Baileys original under _data
        chat = f"{sender_digits}@c.us"
        message = {
            "id": f"false_{chat}_{message_id}",
            "timestamp": at,
            "from": chat,
            "fromMe": False,
            "to": None,
            "participant": None,
            "body": text,
            "hasMedia": False,
            "ack": 1,
            "ackName": "SERVER",
            "_data": msg,
        }
        if quoted_id is not None:
            message["replyTo"] = {"id": quoted_id, "participant": None, "body": None}
        return _waha(instance_id, "message.any", message, at)
    if dialect == "evolution":  # one message per event, with its type and source
        msg["messageType"] = next(iter(content))
        msg["instanceId"] = instance_id
        msg["source"] = "android"
        return _evolution(instance_id, "messages.upsert", msg, at)
    payload: Any = {"messages": [msg], "type": "notify"} if variant & 1 == 0 else [msg]
    return _envelope(instance_id, "messages.upsert", payload)


def presence_body(
    dialect: Dialect, instance_id: str, chat: str, status: str, at: int
) -> dict[str, Any]:
    """Online/offline (``available``/``unavailable``/``composing``) of a user."""
    if dialect == "spec":
        return _spec(instance_id, "presence", {"chat": chat, "status": status, "timestamp": at})
    if dialect == "waha":
        presence = {"online": "online", "available": "online", "composing": "typing"}
        last = presence.get(status, "offline")
        waha = {
            "id": _cus(chat),
            "presences": [{"participant": _cus(chat), "lastKnownPresence": last}],
        }
        return _waha(instance_id, "presence.update", waha, at)
    payload = {"id": chat, "presences": {chat: {"lastKnownPresence": status}}}
    if dialect == "evolution":
        return _evolution(instance_id, "presence.update", payload, at)
    return _envelope(instance_id, "presence.update", payload)


def qr_body(dialect: Dialect, instance_id: str, data_uri: str) -> dict[str, Any]:
    """The QR code to scan, as a PNG data URI."""
    if dialect == "spec":
        return _spec(instance_id, "qr", {"base64": data_uri})
    if dialect == "waha":  # WAHA posts no QR: the session waits for a scan
        return _waha(instance_id, "session.status", {"name": instance_id, "status": "SCAN_QR_CODE"})
    if dialect == "evolution":
        qrcode = {"instance": instance_id, "pairingCode": None, "code": "", "base64": data_uri}
        return _evolution(instance_id, "qrcode.updated", {"qrcode": qrcode})
    return _envelope(instance_id, "connection.update", {"qr": data_uri})


#: Baileys' disconnect codes as Evolution forwards them in ``statusReason``
_STATUS_REASONS = {"logged_out": 401, "disconnected": 428}
_REFERENCE_CONNECTION = {
    "connected": "open",
    "waiting_scan": "connecting",
    "disconnected": "close",
    "logged_out": "close",
}


def connection_body(
    dialect: Dialect, instance_id: str, state: str, *, reason: str = "", phone: str | None = None
) -> dict[str, Any]:
    """The instance's connection state (connected, waiting_scan, disconnected, logged_out)."""
    if dialect == "spec":
        return _spec(instance_id, "connection", {"state": state, "reason": reason, "phone": phone})
    if dialect == "waha":
        status = {"name": instance_id, "status": _WAHA_STATUSES.get(state, "STOPPED")}
        me = waha_me(phone) if state == "connected" else None
        return _waha(instance_id, "session.status", status, me=me)
    if dialect == "evolution":
        update: dict[str, Any] = {
            "instance": instance_id,
            "state": _REFERENCE_CONNECTION.get(state, state),
            "statusReason": _STATUS_REASONS.get(state, 200),
        }
        if phone:
            update["wuid"] = f"{phone}@s.whatsapp.net"
        return _evolution(instance_id, "connection.update", update)
    payload: dict[str, Any] = {"connection": _REFERENCE_CONNECTION.get(state, state)}
    if state == "logged_out":
        payload["lastDisconnect"] = {"error": {"output": {"statusCode": 401}}, "reason": reason}
    elif state == "disconnected":
        payload["lastDisconnect"] = {"error": {"output": {"statusCode": 428}}, "reason": reason}
    if phone:
        payload["me"] = {"id": f"{phone}@s.whatsapp.net"}
    return _envelope(instance_id, "connection.update", payload)
