"""Building and validating gateway requests (no I/O here).

Every builder checks its input first and raises
:class:`~gateway.errors.RequestValidationError` naming the field, so nothing malformed
ever reaches the wire. Builders never see the access token: the client adds it where
the endpoint wants it (``credentials`` says whether that is the query or the JSON body).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import phonenumbers
from phonenumbers import NumberParseException, ValidationResult

from gateway.errors import RequestValidationError
from gateway.messages import (
    Button,
    Interactive,
    LegacyTemplate,
    ListMessage,
    Media,
    Message,
    Text,
    message_type,
)

HttpMethod = Literal["GET", "POST"]
#: every method a request goes out with (Evolution API logs out with DELETE; WAHA
#: updates a session's config with PUT)
WireMethod = Literal["GET", "POST", "PUT", "DELETE"]
SendMethod = Literal["get", "post"]
Prefix = Literal["api", "messenger_api"]
PREFIXES: tuple[str, ...] = ("api", "messenger_api")

INSTANCE_OPERATIONS: tuple[str, ...] = (
    "create_instance",
    "get_qrcode",
    "set_webhook",
    "reboot",
    "reset_instance",
    "reconnect",
    "logout",
)

GROUP_SUFFIX = "@g.us"
_PERSONAL_SUFFIXES = ("@s.whatsapp.net", "@c.us")
_SEPARATORS = re.compile(r"[\s\-().\u00a0/]")
_GROUP_LOCAL = re.compile(r"^[0-9A-Za-z_\-.:]+$")
_E164_MIN, _E164_MAX = 8, 15


@dataclass(frozen=True)
class GatewayRequest:
    """One HTTP request to the gateway, relative to ``{base_url}/{prefix}/``.

    ``params`` go in the query string, ``json`` (when not None) is the body.
    ``credentials`` says where the client adds ``access_token``: ``"query"`` or ``"body"``;
    ``"header"``: nowhere, the client's headers carry it (Evolution API's ``apikey``,
    WAHA's ``X-Api-Key``).
    """

    method: WireMethod
    endpoint: str
    params: dict[str, str] = field(default_factory=dict)
    json: dict[str, Any] | None = None
    credentials: Literal["query", "body", "header"] = "query"


def _digits_of(value: str, field_name: str) -> str:
    raw = value.strip()
    if not raw:
        raise RequestValidationError(field_name, "is empty")
    cleaned = _SEPARATORS.sub("", raw)
    if cleaned.startswith("+"):
        cleaned = cleaned[1:]
    elif cleaned.startswith("00"):
        cleaned = cleaned[2:]
    if not cleaned.isascii() or not cleaned.isdigit():
        raise RequestValidationError(
            field_name, f"{value!r} is not a phone number (only digits, an optional leading +)"
        )
    if not _E164_MIN <= len(cleaned) <= _E164_MAX:
        raise RequestValidationError(
            field_name,
            f"{value!r} has {len(cleaned)} digits; an international number has "
            f"{_E164_MIN} to {_E164_MAX} (country code included)",
        )
    try:
        parsed = phonenumbers.parse("+" + cleaned, None)
    except NumberParseException as exc:
        if exc.error_type == NumberParseException.INVALID_COUNTRY_CODE:
            problem = f"{value!r} has no valid country code"
            raise RequestValidationError(field_name, problem) from exc
        raise RequestValidationError(field_name, f"{value!r} is not a phone number") from exc
    reason = phonenumbers.is_possible_number_with_reason(parsed)
    if reason == ValidationResult.INVALID_COUNTRY_CODE:
        raise RequestValidationError(field_name, f"{value!r} has no valid country code")
    if reason in (
        ValidationResult.TOO_SHORT,
        ValidationResult.TOO_LONG,
        ValidationResult.INVALID_LENGTH,
    ):
        raise RequestValidationError(
            field_name, f"{value!r} has the wrong length for its country (+{parsed.country_code})"
        )
    return cleaned


def normalise_number(value: str, field_name: str = "number") -> str:
    """A phone number in any common format as the gateway wants it: digits, no ``+``.

    Accepts ``+`` or ``00`` prefixes, spaces, dashes, dots and brackets, and the chat
    suffixes ``@s.whatsapp.net`` / ``@c.us``; rejects letters and impossible lengths.
    """
    raw = value.strip()
    for suffix in _PERSONAL_SUFFIXES:
        if raw.endswith(suffix):
            raw = raw[: -len(suffix)]
    return _digits_of(raw, field_name)


def validate_group_id(value: str, field_name: str = "group_id") -> str:
    """A group id, checked: ``<id>@g.us`` with no spaces."""
    raw = value.strip()
    if not raw.endswith(GROUP_SUFFIX):
        raise RequestValidationError(field_name, f"{value!r} does not end in {GROUP_SUFFIX}")
    local = raw[: -len(GROUP_SUFFIX)]
    if not local or not _GROUP_LOCAL.match(local):
        raise RequestValidationError(field_name, f"{value!r} is not a group id")
    return raw


def is_group(to: str) -> bool:
    """True when ``to`` names a group (ends in ``@g.us``)."""
    return to.strip().endswith(GROUP_SUFFIX)


def validate_http_url(value: str | None, field_name: str) -> str:
    """``value`` if it is an absolute http(s) URL with a host, else a validation error."""
    if value is None or not value.strip():
        raise RequestValidationError(field_name, "is required (an http or https URL)")
    url = value.strip()
    if any(ch.isspace() for ch in url):
        raise RequestValidationError(field_name, f"{value!r} contains whitespace")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise RequestValidationError(field_name, f"{value!r} is not a URL: {exc}") from exc
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise RequestValidationError(field_name, f"{value!r} is not an http or https URL")
    return url


def validate_instance_id(value: str, field_name: str = "instance_id") -> str:
    """A non-empty instance id without whitespace."""
    if not isinstance(value, str) or not value.strip():
        raise RequestValidationError(field_name, "is required")
    if any(ch.isspace() for ch in value.strip()):
        raise RequestValidationError(field_name, f"{value!r} contains whitespace")
    return value.strip()


def _require_text(value: str, field_name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RequestValidationError(field_name, "is required and must not be empty")
    return value


def _cta_phone(value: str | None, field_name: str) -> str:
    if value is None or not value.strip():
        raise RequestValidationError(field_name, 'is required (a number with a leading "+")')
    raw = _SEPARATORS.sub("", value.strip())
    if not raw.startswith("+"):
        raise RequestValidationError(field_name, f'{value!r} must start with "+"')
    return "+" + _digits_of(raw, field_name)


def button_params(button: Button, path: str) -> dict[str, str]:
    """The ``buttonParamsJson`` keys of ``button`` (exactly those the spec lists)."""
    display = _require_text(button.display_text, f"{path}.display_text")
    if button.kind == "quick_reply":
        return {"display_text": display, "id": _require_text(button.id or "", f"{path}.id")}
    if button.kind == "cta_url":
        return {"display_text": display, "url": validate_http_url(button.url, f"{path}.url")}
    if button.kind == "cta_call":
        return {
            "display_text": display,
            "phone_number": _cta_phone(button.phone_number, f"{path}.phone_number"),
        }
    if button.kind == "cta_copy":
        code = _require_text(button.copy_code or "", f"{path}.copy_code")
        return {"display_text": display, "copy_code": code}
    raise RequestValidationError(
        f"{path}.kind",
        f"{button.kind!r} is not one of quick_reply, cta_url, cta_call, cta_copy",
    )


def template_body(message: Interactive | LegacyTemplate | ListMessage) -> dict[str, Any]:
    """The ``message`` object of a send_template body, validated."""
    if isinstance(message, Interactive):
        _require_text(message.text, "message.text")
        buttons = []
        ids: set[str] = set()
        for i, b in enumerate(message.buttons):
            params = button_params(b, f"message.buttons[{i}]")
            if b.kind == "quick_reply":
                if params["id"] in ids:
                    raise RequestValidationError(
                        f"message.buttons[{i}].id", f"{params['id']!r} is used twice"
                    )
                ids.add(params["id"])
            buttons.append(
                {"name": b.kind, "buttonParamsJson": json.dumps(params, ensure_ascii=False)}
            )
        if not buttons:
            raise RequestValidationError("message.buttons", "an interactive message needs buttons")
        return {
            "text": message.text,
            "title": message.title,
            "subtitle": message.subtitle,
            "footer": message.footer,
            "interactiveButtons": buttons,
        }
    if isinstance(message, LegacyTemplate):
        _require_text(message.text, "message.text")
        if not message.buttons:
            raise RequestValidationError("message.buttons", "a template message needs buttons")
        template_buttons = []
        for i, tb in enumerate(message.buttons):
            template_buttons.append(
                {
                    "index": i + 1,
                    "quickReplyButton": {
                        "displayText": _require_text(
                            tb.display_text, f"message.buttons[{i}].display_text"
                        ),
                        "id": _require_text(tb.id, f"message.buttons[{i}].id"),
                    },
                }
            )
        return {"text": message.text, "footer": message.footer, "templateButtons": template_buttons}
    _require_text(message.text, "message.text")
    _require_text(message.button_text, "message.button_text")
    if not message.sections:
        raise RequestValidationError("message.sections", "a list message needs sections")
    sections = []
    row_ids: set[str] = set()
    for si, s in enumerate(message.sections):
        if not s.rows:
            raise RequestValidationError(f"message.sections[{si}].rows", "a section needs rows")
        rows = []
        for ri, r in enumerate(s.rows):
            path = f"message.sections[{si}].rows[{ri}]"
            _require_text(r.title, f"{path}.title")
            _require_text(r.row_id, f"{path}.row_id")
            if r.row_id in row_ids:
                raise RequestValidationError(f"{path}.row_id", f"{r.row_id!r} is used twice")
            row_ids.add(r.row_id)
            rows.append({"title": r.title, "rowId": r.row_id, "description": r.description})
        sections.append({"title": s.title, "rows": rows})
    return {
        "text": message.text,
        "footer": message.footer,
        "title": message.title,
        "buttonText": message.button_text,
        "sections": sections,
    }


def _plain_fields(message: Text | Media) -> dict[str, str]:
    if isinstance(message, Text):
        return {"type": "text", "message": _require_text(message.text, "message.text")}
    fields = {
        "type": "media",
        "message": message.caption or "",
        "media_url": validate_http_url(message.media_url, "message.media_url"),
    }
    if message.filename:
        if "/" in message.filename or "\\" in message.filename:
            raise RequestValidationError("message.filename", "must be a file name, not a path")
        fields["filename"] = message.filename
    return fields


def build_send(
    instance_id: str, to: str, message: Message, *, send_method: SendMethod = "get"
) -> GatewayRequest:
    """The request that sends ``message`` to ``to`` (a phone number or ``...@g.us``).

    Text and media go to ``/send`` or ``/send_group`` (GET query string, or POST JSON body
    when ``send_method="post"``); interactive, template and list go to ``/send_template``.
    """
    iid = validate_instance_id(instance_id)
    if send_method not in ("get", "post"):
        raise RequestValidationError("send_method", f"{send_method!r} is not 'get' or 'post'")
    if not isinstance(message, (Text, Media, Interactive, LegacyTemplate, ListMessage)):
        raise RequestValidationError("message", f"{type(message).__name__} is not a message")
    if not isinstance(to, str):
        raise RequestValidationError("to", "must be a string")
    if is_group(to):
        group_id = validate_group_id(to, "to")
        if not isinstance(message, (Text, Media)):
            raise RequestValidationError(
                "message", f"groups take text and media only, not {message_type(message)}"
            )
        fields = {"group_id": group_id, **_plain_fields(message), "instance_id": iid}
        endpoint = "send_group"
    else:
        number = normalise_number(to, "to")
        if isinstance(message, (Interactive, LegacyTemplate, ListMessage)):
            body = {
                "number": number,
                "type": message_type(message),
                "message": template_body(message),
            }
            return GatewayRequest("POST", "send_template", params={"instance_id": iid}, json=body)
        fields = {"number": number, **_plain_fields(message), "instance_id": iid}
        endpoint = "send"
    if send_method == "get":
        return GatewayRequest("GET", endpoint, params=fields)
    return GatewayRequest("POST", endpoint, json=dict(fields), credentials="body")


def build_instance_operation(
    operation: str,
    instance_id: str | None = None,
    *,
    method: HttpMethod = "POST",
    extra: dict[str, str] | None = None,
) -> GatewayRequest:
    """The request of an instance operation (parameters in the query string)."""
    if operation not in INSTANCE_OPERATIONS:
        raise RequestValidationError("operation", f"{operation!r} is not an instance operation")
    params: dict[str, str] = {}
    if operation != "create_instance":
        params["instance_id"] = validate_instance_id(instance_id or "")
    params.update(extra or {})
    return GatewayRequest(method, operation, params=params)


def build_set_webhook(
    instance_id: str, url: str, enable: bool = True, *, method: HttpMethod = "POST"
) -> GatewayRequest:
    """The set_webhook request (``enable`` as the strings ``"true"`` / ``"false"``)."""
    webhook_url = validate_http_url(url, "webhook_url")
    return build_instance_operation(
        "set_webhook",
        instance_id,
        method=method,
        extra={"webhook_url": webhook_url, "enable": "true" if enable else "false"},
    )


def base_path(base_url: str, prefix: str) -> str:
    """``{base_url}/{prefix}/`` checked: an http(s) URL and a known prefix."""
    url = validate_http_url(base_url, "base_url").rstrip("/")
    if prefix not in PREFIXES:
        raise RequestValidationError("prefix", f"{prefix!r} is not one of {', '.join(PREFIXES)}")
    return f"{url}/{prefix}/"


__all__ = [
    "GROUP_SUFFIX",
    "INSTANCE_OPERATIONS",
    "GatewayRequest",
    "build_instance_operation",
    "build_send",
    "build_set_webhook",
    "button_params",
    "is_group",
    "normalise_number",
    "template_body",
    "validate_group_id",
    "validate_http_url",
    "validate_instance_id",
]
