"""Response -> :class:`~gateway.outcomes.SendOutcome` (DESIGN.md decision 3).

A send is accepted only when a message id came back. Everything else is one of:
retryable (certainly refused before sending), ambiguous (may have left: never resend
automatically), permanent (this recipient or content will never work), or instance (the
sender cannot send: pause it). The rules and their reasons are tabled in
``docs/gateway-client.md``; every trap of the field notes has a test.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from gateway.errors import GatewayError
from gateway.outcomes import InstanceProblem, OutcomeKind, SendOutcome

# (substring of the lower-cased error text, kind, problem); first match wins.
_ERROR_TEXT_RULES: tuple[tuple[str, OutcomeKind, InstanceProblem | None], ...] = (
    ("access token", OutcomeKind.INSTANCE, InstanceProblem.BAD_TOKEN),
    ("access_token", OutcomeKind.INSTANCE, InstanceProblem.BAD_TOKEN),
    ("instance id invalidated", OutcomeKind.INSTANCE, InstanceProblem.INVALID_INSTANCE),
    ("instance id is required", OutcomeKind.INSTANCE, InstanceProblem.INVALID_INSTANCE),
    ("instance id does not exist", OutcomeKind.INSTANCE, InstanceProblem.INVALID_INSTANCE),
    ("invalid instance", OutcomeKind.INSTANCE, InstanceProblem.INVALID_INSTANCE),
    ("has not been activated", OutcomeKind.INSTANCE, InstanceProblem.NOT_ACTIVATED),
    ("not activated", OutcomeKind.INSTANCE, InstanceProblem.NOT_ACTIVATED),
    ("relogin", OutcomeKind.INSTANCE, InstanceProblem.RELOGIN_REQUIRED),
    ("exceeded the maximum limit", OutcomeKind.INSTANCE, InstanceProblem.QUOTA_EXHAUSTED),
    ("you can only add up to", OutcomeKind.INSTANCE, InstanceProblem.QUOTA_EXHAUSTED),
    ("phone number is required", OutcomeKind.PERMANENT, None),
    ("please enter media url or message", OutcomeKind.PERMANENT, None),
    ("invalid number", OutcomeKind.PERMANENT, None),
    ("invalid phone", OutcomeKind.PERMANENT, None),
    ("not a valid", OutcomeKind.PERMANENT, None),
    ("not on whatsapp", OutcomeKind.PERMANENT, None),
    ("not registered", OutcomeKind.PERMANENT, None),
    ("group id is required", OutcomeKind.PERMANENT, None),
    ("media url is required", OutcomeKind.PERMANENT, None),
    ("invalid group", OutcomeKind.PERMANENT, None),
    ("invalid media", OutcomeKind.PERMANENT, None),
    ("invalid message", OutcomeKind.PERMANENT, None),
    ("invalid json", OutcomeKind.PERMANENT, None),
)
_QUOTA_MARKER = "exceeded the maximum limit"
_AMBIGUOUS_STATUSES = frozenset({504, 522, 524})  # gateway/proxy timeouts: may have gone out
_MAX_REASON = 300


@dataclass(frozen=True)
class ParsedBody:
    """A response body read leniently: the JSON document, or why there is none."""

    doc: Any
    problem: str | None  # "empty body", "non-JSON body", ...


def parse_body(content: bytes) -> ParsedBody:
    """Decode a response body as JSON without raising."""
    if not content.strip():
        return ParsedBody(None, "empty body")
    try:
        return ParsedBody(json.loads(content), None)
    except (ValueError, UnicodeDecodeError):
        return ParsedBody(None, "non-JSON body")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 3] + "..."


def _key_id(node: Any) -> str | None:
    if isinstance(node, Mapping):
        key = node.get("key")
        if isinstance(key, Mapping):
            mid = key.get("id")
            if isinstance(mid, str) and mid.strip():
                return mid.strip()
    return None


def extract_message_id(doc: Any) -> str | None:
    """The message id of a send response: ``message.key.id``, ``data.key.id`` or ``key.id``."""
    if not isinstance(doc, Mapping):
        return None
    for node in (doc.get("message"), doc.get("data"), doc):
        mid = _key_id(node)
        if mid:
            return mid
    data = doc.get("data")
    if isinstance(data, Mapping):
        return _key_id(data.get("message"))
    return None


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if value is None or not value.strip():
        return None
    raw = value.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        current = now or datetime.now(UTC)
        return max(0.0, (when - current).total_seconds())
    if seconds != seconds or seconds in (float("inf"), float("-inf")):  # NaN / inf
        return None
    return max(0.0, seconds)


def classify_error_text(text: str) -> tuple[OutcomeKind, InstanceProblem | None]:
    """Kind and instance problem of a gateway error message (unknown texts: retryable)."""
    low = text.lower()
    for marker, kind, problem in _ERROR_TEXT_RULES:
        if marker in low:
            return kind, problem
    return OutcomeKind.RETRYABLE, None


def _message_text(doc: Mapping[str, Any]) -> str:
    for key in ("message", "error", "msg", "detail"):
        value = doc.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def classify_http_status(
    status: int, headers: Mapping[str, str], *, now: datetime | None = None
) -> SendOutcome | None:
    """The outcome implied by a non-2xx status alone, or None for 2xx."""
    if 200 <= status < 300:
        return None
    retry_after = parse_retry_after(headers.get("retry-after"), now)
    if status in (429, 408, 425) or (status >= 500 and status not in _AMBIGUOUS_STATUSES):
        return SendOutcome(
            OutcomeKind.RETRYABLE,
            reason=f"HTTP {status} from the gateway: refused, retry later",
            retry_after=retry_after,
            http_status=status,
        )
    if status in _AMBIGUOUS_STATUSES:
        return SendOutcome(
            OutcomeKind.AMBIGUOUS,
            reason=f"HTTP {status} (gateway timeout): the message may have been sent",
            retry_after=retry_after,
            http_status=status,
        )
    if status in (401, 403):
        return SendOutcome(
            OutcomeKind.INSTANCE,
            reason=f"HTTP {status}: the gateway refused the credentials",
            problem=InstanceProblem.BAD_TOKEN,
            http_status=status,
        )
    if status in (404, 405):
        return SendOutcome(
            OutcomeKind.INSTANCE,
            reason=(
                f"HTTP {status}: the gateway has no such route; check "
                "GATECAST_GATEWAY_URL, GATECAST_GATEWAY_PREFIX and GATECAST_SEND_METHOD"
            ),
            problem=InstanceProblem.GATEWAY_MISCONFIGURED,
            http_status=status,
        )
    if status == 414:
        return SendOutcome(
            OutcomeKind.PERMANENT,
            reason="HTTP 414: the message is too long for a query string (use send_method=post)",
            http_status=status,
        )
    if 300 <= status < 400:
        return SendOutcome(
            OutcomeKind.INSTANCE,
            reason=f"HTTP {status}: the gateway redirects; check GATECAST_GATEWAY_URL",
            problem=InstanceProblem.GATEWAY_MISCONFIGURED,
            http_status=status,
        )
    return SendOutcome(
        OutcomeKind.PERMANENT,
        reason=f"HTTP {status}: the gateway rejected the request",
        http_status=status,
    )


def classify_send_response(
    status: int, headers: Mapping[str, str], content: bytes, *, now: datetime | None = None
) -> SendOutcome:
    """Classify the response to a send (``/send``, ``/send_group``, ``/send_template``)."""
    by_status = classify_http_status(status, headers, now=now)
    if by_status is not None:
        return by_status
    body = parse_body(content)
    if body.problem is not None:
        return SendOutcome(
            OutcomeKind.AMBIGUOUS,
            reason=f"{body.problem} from the gateway: whether the message left is unknown",
            http_status=status,
        )
    doc = body.doc
    if not isinstance(doc, Mapping):
        shape = "[]" if doc == [] else type(doc).__name__
        return SendOutcome(
            OutcomeKind.AMBIGUOUS,
            reason=f"unexpected body ({shape}): whether the message left is unknown",
            http_status=status,
        )
    message_id = extract_message_id(doc)
    state = str(doc.get("status", "")).strip().lower()
    text = _message_text(doc)
    if message_id and state not in ("error", "failed", "fail"):
        return SendOutcome(OutcomeKind.ACCEPTED, message_id=message_id, http_status=status)
    if _QUOTA_MARKER in text.lower():
        return SendOutcome(
            OutcomeKind.INSTANCE,
            reason=_short(text),
            problem=InstanceProblem.QUOTA_EXHAUSTED,
            http_status=status,
        )
    if doc.get("relogin") is True:
        return SendOutcome(
            OutcomeKind.INSTANCE,
            reason=_short(text or "relogin required"),
            problem=InstanceProblem.RELOGIN_REQUIRED,
            http_status=status,
        )
    kind, problem = classify_error_text(text)
    if kind is OutcomeKind.RETRYABLE and (state == "success" or not text):
        return SendOutcome(
            OutcomeKind.RETRYABLE,
            reason="the gateway answered without a message id: the send failed",
            http_status=status,
        )
    return SendOutcome(
        kind,
        reason=_short(text or f"gateway error (status {state!r})"),
        problem=problem,
        http_status=status,
    )


def classify_transport_error(exc: httpx.HTTPError) -> SendOutcome:
    """Classify a failure to get a response.

    Connect errors and timeouts, pool timeouts and proxy errors happen before the request
    reaches the gateway: retryable. Anything after that (read timeout, dropped connection,
    protocol error, write failure) is ambiguous: the gateway may have acted on it.
    """
    name = type(exc).__name__
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return SendOutcome(OutcomeKind.RETRYABLE, reason=f"{name}: the gateway was not reached")
    if isinstance(exc, httpx.ProxyError):
        return SendOutcome(OutcomeKind.RETRYABLE, reason=f"{name}: the proxy refused the request")
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return SendOutcome(
            OutcomeKind.INSTANCE,
            reason=f"{name}: the gateway URL is not usable; check GATECAST_GATEWAY_URL",
            problem=InstanceProblem.GATEWAY_MISCONFIGURED,
        )
    if isinstance(exc, httpx.ReadTimeout):
        return SendOutcome(
            OutcomeKind.AMBIGUOUS,
            reason="ReadTimeout: the request went out but no answer came; it may have been sent",
        )
    return SendOutcome(
        OutcomeKind.AMBIGUOUS,
        reason=f"{name}: the connection failed after the request went out; it may have been sent",
    )


def is_certainly_unsent(exc: BaseException) -> bool:
    """True for failures that guarantee the gateway never saw the request (safe to retry now)."""
    return isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))


__all__ = [
    "ParsedBody",
    "classify_error_text",
    "classify_http_status",
    "classify_send_response",
    "classify_transport_error",
    "extract_message_id",
    "instance_id_of",
    "interpret_instance_response",
    "is_certainly_unsent",
    "parse_body",
    "parse_retry_after",
    "qr_data_uri_of",
]


def _find_instance_id(doc: Mapping[str, Any]) -> str | None:
    for node in (doc, doc.get("data")):
        if isinstance(node, Mapping):
            value = node.get("instance_id")
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def interpret_instance_response(
    operation: str,
    status: int,
    headers: Mapping[str, str],
    content: bytes,
    *,
    now: datetime | None = None,
) -> Mapping[str, Any]:
    """The JSON document of a successful instance-operation response.

    Raises :class:`~gateway.errors.GatewayError` (kind and problem classified as for
    sends) for HTTP errors, error bodies, and empty or non-JSON bodies (ambiguous).
    """
    by_status = classify_http_status(status, headers, now=now)
    if by_status is not None:
        raise GatewayError(
            by_status.kind,
            by_status.problem,
            f"{operation}: {by_status.reason}",
            http_status=status,
        )
    body = parse_body(content)
    doc = body.doc
    if body.problem is not None or not isinstance(doc, Mapping):
        what = body.problem or ("[]" if doc == [] else f"a JSON {type(doc).__name__}")
        raise GatewayError(
            OutcomeKind.AMBIGUOUS,
            None,
            f"{operation}: the gateway answered with {what}; whether it acted is unknown",
            http_status=status,
        )
    state = str(doc.get("status", "")).strip().lower()
    text = _message_text(doc)
    if doc.get("relogin") is True:
        raise GatewayError(
            OutcomeKind.INSTANCE,
            InstanceProblem.RELOGIN_REQUIRED,
            f"{operation}: {_short(text or 'relogin required')}",
            http_status=status,
        )
    if state in ("error", "failed", "fail") or _QUOTA_MARKER in text.lower():
        kind, problem = classify_error_text(text)
        raise GatewayError(
            kind, problem, f"{operation}: {_short(text or 'gateway error')}", http_status=status
        )
    return doc


def instance_id_of(doc: Mapping[str, Any]) -> str | None:
    """The ``instance_id`` in a create/reset response (top level or under ``data``)."""
    return _find_instance_id(doc)


def qr_data_uri_of(doc: Mapping[str, Any]) -> str | None:
    """The QR code of a get_qrcode response as a ``data:image/...`` URI, or None.

    The reference answers ``base64`` synchronously; the spec says the QR comes through the
    webhook, in which case there is nothing here.
    """
    nodes: list[Any] = [doc]
    if isinstance(doc.get("data"), Mapping):
        nodes.append(doc["data"])
    for node in nodes:
        for key in ("base64", "qrcode", "qr_code", "qr", "data", "image"):
            value = node.get(key)
            if not isinstance(value, str) or not value.strip():
                continue
            value = value.strip()
            if value.startswith("data:image/"):
                return value
            if key != "data" and len(value) > 64 and " " not in value:
                return "data:image/png;base64," + value
    return None
