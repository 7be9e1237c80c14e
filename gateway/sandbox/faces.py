"""What the sandbox's faces of other gateway families (``evolution.py``, ``waha.py``)
share: a JSON answer, a request's JSON body, a string field, and their buttons in the
spec's interactive terms for the sandbox's own validation (docs/sandbox.md)."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.sandbox.refusals import GatewayRefusal
from gateway.sandbox.validation import ValidSend, validate_group, validate_send, validate_template

#: the families' button ``type`` -> the spec's interactive button name and its keys
_BUTTONS = {
    "reply": ("quick_reply", ("id", "id")),
    "url": ("cta_url", ("url", "url")),
    "call": ("cta_call", ("phoneNumber", "phone_number")),
    "copy": ("cta_copy", ("copyCode", "copy_code")),
}


def answer(body: Any, status: int = 200) -> Response:
    """A compact JSON answer."""
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(data, status_code=status, media_type="application/json")


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object ({} when it is not one)."""
    raw = await request.body()
    try:
        body = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def text(value: Any) -> str:
    """A string field, "" when it is not a string."""
    return value if isinstance(value, str) else ""


def spec_buttons(buttons: Any, text_key: str, default: str | None = None) -> list[dict[str, str]]:
    """A family's buttons (``type``, their words under ``text_key``, ``id``/``url``/
    ``phoneNumber``/``copyCode``) as the spec's ``interactiveButtons``."""
    out = []
    for b in buttons or []:
        kind = b.get("type", default) if isinstance(b, dict) else None
        if kind not in _BUTTONS:
            raise GatewayRefusal("Invalid button type: use reply, url, call or copy")
        name, (theirs, ours) = _BUTTONS[kind]
        fields = {"display_text": b.get(text_key), ours: b.get(theirs)}
        out.append({"name": name, "buttonParamsJson": json.dumps(fields)})
    return out


def spec_send(number: str, params: dict[str, str]) -> ValidSend:
    """A text or media send (``params`` in the spec's names) to a number or a group."""
    if number.endswith("@g.us"):
        return validate_group({"group_id": number, **params}, "spec")
    return validate_send({"number": number, **params}, "spec")


def spec_interactive(number: str, words: str, buttons: list[dict[str, str]]) -> ValidSend:
    """A buttons message checked as the spec's interactive template."""
    message: dict[str, Any] = {"text": words, "interactiveButtons": buttons}
    return validate_template({"number": number, "type": "interactive", "message": message})


def spec_list(number: str, words: str, button_text: str, sections: Any) -> ValidSend:
    """A list message checked as the spec's list template."""
    template = {"text": words, "buttonText": button_text, "sections": sections}
    return validate_template({"number": number, "type": "list", "message": template})


__all__ = [
    "answer",
    "json_body",
    "spec_buttons",
    "spec_interactive",
    "spec_list",
    "spec_send",
    "text",
]
