"""What the gateway families' dialects (``evolution.py``, ``waha.py``) do alike: the
recipient's checks, a button's fields, a file name, and an instance operation's error
answer in the spec's terms (docs/architecture.md, decisions 58 and 66)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NoReturn

from gateway.classify import classify_http_status
from gateway.errors import GatewayError, RequestValidationError
from gateway.messages import Button, Media, Message, Text, message_type
from gateway.outcomes import OutcomeKind, SendOutcome
from gateway.requests import button_params, is_group, normalise_number, validate_group_id

#: gatecast's button kinds -> the families' button ``type`` (both use these names)
BUTTON_TYPES = {"quick_reply": "reply", "cta_url": "url", "cta_call": "call", "cta_copy": "copy"}
_BUTTON_KEYS = (
    ("id", "id"),
    ("url", "url"),
    ("phone_number", "phoneNumber"),
    ("copy_code", "copyCode"),
)


def recipient(to: str, message: Message) -> str:
    """A group's ``...@g.us`` (which takes text and media only) or a number's digits."""
    if not isinstance(to, str):
        raise RequestValidationError("to", "must be a string")
    if is_group(to):
        if not isinstance(message, (Text, Media)):
            raise RequestValidationError(
                "message", f"groups take text and media only, not {message_type(message)}"
            )
        return validate_group_id(to, "to")
    return normalise_number(to, "to")


def button_fields(button: Button, index: int, text_key: str) -> dict[str, Any]:
    """One button as the families write it: ``type``, its words under ``text_key``, and
    ``id``/``url``/``phoneNumber``/``copyCode`` as its kind has."""
    params = button_params(button, f"message.buttons[{index}]")
    out: dict[str, Any] = {"type": BUTTON_TYPES[button.kind], text_key: params["display_text"]}
    for ours, theirs in _BUTTON_KEYS:
        if ours in params:
            out[theirs] = params[ours]
    return out


def file_name(message: Media) -> str | None:
    """The media's file name, refused when it is a path."""
    name = message.filename
    if name and ("/" in name or "\\" in name):
        raise RequestValidationError("message.filename", "must be a file name, not a path")
    return name or None


def operation_failed(
    operation: str,
    status: int,
    headers: Mapping[str, str],
    refused: SendOutcome | None,
    detail: str,
    now: datetime | None,
) -> NoReturn:
    """Raise the :class:`GatewayError` of an instance operation's error answer: the
    family's own reading (``refused``) or the HTTP status's, with its words."""
    outcome = refused or classify_http_status(status, headers, now=now)
    assert outcome is not None  # not 2xx
    reason = (
        f"{outcome.reason} ({detail[:200]})"
        if detail and detail not in outcome.reason
        else outcome.reason
    )
    raise GatewayError(outcome.kind, outcome.problem, f"{operation}: {reason}", http_status=status)


def not_an_object(operation: str, status: int) -> GatewayError:
    """A 2xx answer to an instance operation without the JSON object it should carry."""
    return GatewayError(
        OutcomeKind.AMBIGUOUS,
        None,
        f"{operation}: the gateway answered without a JSON object; whether it acted is unknown",
        http_status=status,
    )


def classify_error(
    status: int,
    headers: Mapping[str, str],
    refusal: Callable[[], SendOutcome | None],
    now: datetime | None,
) -> SendOutcome:
    """A send's error answer: the family's own reading, else the HTTP status's."""
    refused = refusal()
    if refused is not None:
        return refused
    by_status = classify_http_status(status, headers, now=now)
    assert by_status is not None  # not 2xx
    return by_status


__all__ = [
    "BUTTON_TYPES",
    "button_fields",
    "classify_error",
    "file_name",
    "not_an_object",
    "operation_failed",
    "recipient",
]
