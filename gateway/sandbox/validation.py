"""Validate sends the way a real gateway does; refusals carry the gateway's error text.

Each validator returns a :class:`ValidSend`: the recipient, its JID, the message type, what
the sandbox records as the payload, and the Baileys-like ``message`` content echoed in the
success body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from gateway.sandbox.config import Dialect
from gateway.sandbox.refusals import (
    GROUP_REQUIRED,
    INVALID_GROUP,
    INVALID_NUMBER,
    MEDIA_OR_MESSAGE,
    MEDIA_URL_REQUIRED,
    PHONE_REQUIRED,
    GatewayRefusal,
)

DOC_EXTENSIONS = (".pdf", ".doc", ".docx", ".xls", ".xlsx", ".csv", ".txt", ".zip", ".ppt")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".webp")
VIDEO_EXTENSIONS = (".mp4", ".3gp", ".mov")
AUDIO_EXTENSIONS = (".mp3", ".ogg", ".opus", ".m4a", ".aac")
BUTTON_KEYS: dict[str, tuple[str, ...]] = {
    "quick_reply": ("display_text", "id"),
    "cta_url": ("display_text", "url"),
    "cta_call": ("display_text", "phone_number"),
    "cta_copy": ("display_text", "copy_code"),
}


@dataclass(frozen=True)
class ValidSend:
    """A send that passed validation."""

    to: str
    chat: str
    type: str
    payload: dict[str, Any]
    content: dict[str, Any]


def check_number(number: str | None) -> str:
    """Digits only, 7 to 15 of them (E.164 without the "+")."""
    if not number:
        raise GatewayRefusal(PHONE_REQUIRED)
    if not number.isdigit() or not number.isascii() or not 7 <= len(number) <= 15:
        raise GatewayRefusal(INVALID_NUMBER)
    return number


def _is_url(value: str) -> bool:
    parsed = urlparse(value)
    return parsed.scheme in ("http", "https") and bool(parsed.netloc)


def _media_content(media_url: str, caption: str, filename: str | None) -> dict[str, Any]:
    name = (filename or urlparse(media_url).path.rsplit("/", 1)[-1]).lower()
    if name.endswith(IMAGE_EXTENSIONS):
        return {"imageMessage": {"url": media_url, "caption": caption}}
    if name.endswith(VIDEO_EXTENSIONS):
        return {"videoMessage": {"url": media_url, "caption": caption}}
    if name.endswith(AUDIO_EXTENSIONS):
        return {"audioMessage": {"url": media_url}}
    return {
        "documentMessage": {
            "url": media_url,
            "fileName": filename or name or "file",
            "caption": caption,
        }
    }


def _text_or_media(
    params: dict[str, str], dialect: Dialect
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    message = params.get("message", "")
    media_url = params.get("media_url", "")
    filename = params.get("filename") or None
    kind = params.get("type", "")
    if dialect == "reference":
        # the reference ignores ``type``: media when media_url is non-empty
        if not media_url and not message:
            raise GatewayRefusal(MEDIA_OR_MESSAGE)
        kind = "media" if media_url else "text"
    else:
        if kind not in ("text", "media"):
            raise GatewayRefusal("Invalid message type: use text or media")
        if kind == "media" and not media_url:
            raise GatewayRefusal(MEDIA_URL_REQUIRED)
        if kind == "text" and not message:
            raise GatewayRefusal(MEDIA_OR_MESSAGE)
    if kind == "media":
        if not _is_url(media_url):
            raise GatewayRefusal("Invalid media url")
        payload: dict[str, Any] = {"type": "media", "message": message, "media_url": media_url}
        if filename:
            payload["filename"] = filename
        return kind, payload, _media_content(media_url, message, filename)
    return kind, {"type": "text", "message": message}, {"extendedTextMessage": {"text": message}}


def validate_send(params: dict[str, str], dialect: Dialect) -> ValidSend:
    """``/send``: text or media to a phone number."""
    number = check_number(params.get("number"))
    kind, payload, content = _text_or_media(params, dialect)
    return ValidSend(number, f"{number}@s.whatsapp.net", kind, payload, content)


def validate_group(params: dict[str, str], dialect: Dialect) -> ValidSend:
    """``/send_group``: text or media to a group (id ends with ``@g.us``)."""
    group_id = params.get("group_id", "")
    if not group_id:
        raise GatewayRefusal(GROUP_REQUIRED)
    local = group_id.removesuffix("@g.us")
    if (
        not group_id.endswith("@g.us")
        or not local
        or not all(c.isdigit() or c == "-" for c in local)
    ):
        raise GatewayRefusal(INVALID_GROUP)
    kind, payload, content = _text_or_media(params, dialect)
    return ValidSend(group_id, group_id, kind, payload, content)


def _need_str(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise GatewayRefusal(f"Invalid message: {where}.{key} must be a non-empty string")
    return value


def _need_list(obj: dict[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key)
    if not isinstance(value, list) or not value:
        raise GatewayRefusal(f"Invalid message: {where}.{key} must be a non-empty array")
    return value


def _need_obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise GatewayRefusal(f"Invalid message: {where} must be an object")
    return value


def _check_button(button: Any, where: str) -> None:
    b = _need_obj(button, where)
    name = b.get("name")
    if name not in BUTTON_KEYS:
        raise GatewayRefusal(
            f"Invalid message: {where}.name must be one of {', '.join(BUTTON_KEYS)}"
        )
    raw = b.get("buttonParamsJson")
    if not isinstance(raw, str):
        raise GatewayRefusal(f"Invalid message: {where}.buttonParamsJson must be a JSON string")
    try:
        params = json.loads(raw)
    except ValueError:
        raise GatewayRefusal(
            f"Invalid message: {where}.buttonParamsJson is not valid JSON"
        ) from None
    p = _need_obj(params, f"{where}.buttonParamsJson")
    for key in BUTTON_KEYS[name]:
        _need_str(p, key, f"{where}.buttonParamsJson")
    if name == "cta_url" and not _is_url(p["url"]):
        raise GatewayRefusal(f"Invalid message: {where}.buttonParamsJson.url must be a URL")
    if name == "cta_call":
        phone = p["phone_number"]
        if not phone.startswith("+") or not phone[1:].isdigit():
            raise GatewayRefusal(
                f"Invalid message: {where}.buttonParamsJson.phone_number must be + and digits"
            )


def validate_template(body: Any) -> ValidSend:
    """``/send_template``: interactive, legacy template or list, from the JSON body."""
    if not isinstance(body, dict):
        raise GatewayRefusal("Invalid JSON body")
    number = check_number(str(body["number"]) if "number" in body else None)
    kind = body.get("type")
    msg = body.get("message")
    if kind not in ("interactive", "template", "list"):
        raise GatewayRefusal("Invalid message type: use interactive, template or list")
    m = _need_obj(msg, "message")
    _need_str(m, "text", "message")
    content: dict[str, Any]
    if kind == "interactive":
        for i, button in enumerate(_need_list(m, "interactiveButtons", "message")):
            _check_button(button, f"message.interactiveButtons[{i}]")
        content = {
            "interactiveMessage": {
                "body": {"text": m["text"]},
                "nativeFlowMessage": {"buttons": m["interactiveButtons"]},
            }
        }
    elif kind == "template":
        for i, button in enumerate(_need_list(m, "templateButtons", "message")):
            where = f"message.templateButtons[{i}]"
            b = _need_obj(button, where)
            if not isinstance(b.get("index"), int) or isinstance(b.get("index"), bool):
                raise GatewayRefusal(f"Invalid message: {where}.index must be an integer")
            qr = _need_obj(b.get("quickReplyButton"), f"{where}.quickReplyButton")
            _need_str(qr, "displayText", f"{where}.quickReplyButton")
            _need_str(qr, "id", f"{where}.quickReplyButton")
        content = {"templateMessage": {"hydratedTemplate": {"hydratedContentText": m["text"]}}}
    else:
        _need_str(m, "buttonText", "message")
        for i, section in enumerate(_need_list(m, "sections", "message")):
            where = f"message.sections[{i}]"
            s = _need_obj(section, where)
            for j, row in enumerate(_need_list(s, "rows", where)):
                r = _need_obj(row, f"{where}.rows[{j}]")
                _need_str(r, "title", f"{where}.rows[{j}]")
                _need_str(r, "rowId", f"{where}.rows[{j}]")
        content = {"listMessage": {"description": m["text"], "buttonText": m["buttonText"]}}
    payload = {"type": kind, "message": m}
    return ValidSend(number, f"{number}@s.whatsapp.net", kind, payload, content)
