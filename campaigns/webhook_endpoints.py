"""Outbound webhooks (Standard Webhooks): the events, the endpoints that receive them,
their secrets and the signature.

An endpoint is a URL (http or https only), a secret ``whsec_<base64 of 24 random bytes>``
shown once at creation, and the events it asked for (``*``: all). The events themselves
are written by triggers (migration 0010) in the transaction of the change that causes
them; ``scheduler.outbound`` delivers them. Each request carries ``webhook-id``,
``webhook-timestamp`` and ``webhook-signature: v1,<base64 HMAC-SHA256 of
"id.timestamp.body">`` keyed with the secret's base64-decoded part after ``whsec_``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Engine, RowMapping

from storage.queries import outbound as q
from storage.types import utcnow

#: every event an endpoint may ask for, in the order the docs list them
EVENTS = (
    "delivery.sent",
    "delivery.delivered",
    "delivery.read",
    "delivery.failed",
    "reply.received",
    "contact.opted_out",
    "campaign.state_changed",
    "campaign.held",
    "instance.state_changed",
)
ALL_EVENTS = "*"
SECRET_PREFIX = "whsec_"  # noqa: S105 (the format's prefix, not a secret)
SECRET_BYTES = 24
MAX_URL_LENGTH = 2000


class EndpointError(ValueError):
    """An endpoint refused: ``field`` names what is wrong (``url``, ``events``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def check_url(url: str) -> str:
    """The URL as stored, or :class:`EndpointError`: http or https with a host, no
    user name or password in it, at most 2000 characters."""
    url = url.strip()
    if not url:
        raise EndpointError("url", "give the address that receives the webhooks")
    if len(url) > MAX_URL_LENGTH:
        raise EndpointError("url", f"longer than {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise EndpointError("url", "not a valid URL") from None
    if parts.scheme not in ("http", "https"):
        raise EndpointError("url", "must start with http:// or https://")
    if not parts.hostname:
        raise EndpointError("url", "has no host name")
    if parts.username or parts.password:
        raise EndpointError("url", "must not hold a user name or password")
    if port == 0:
        raise EndpointError("url", "port 0 is not a port")
    return url


def check_events(events: Sequence[str]) -> list[str]:
    """The events as stored (``*`` alone, or known names without repeats), or
    :class:`EndpointError` naming the unknown ones and the known."""
    names = [e.strip() for e in events if e.strip()]
    if not names:
        raise EndpointError("events", f"choose at least one event, or {ALL_EVENTS!r} for all")
    if ALL_EVENTS in names:
        return [ALL_EVENTS]
    unknown = [e for e in names if e not in EVENTS]
    if unknown:
        raise EndpointError(
            "events",
            f"unknown event {', '.join(map(repr, unknown))}; "
            f"the events are {', '.join(EVENTS)} (or {ALL_EVENTS!r} for all)",
        )
    return list(dict.fromkeys(names))


def subscribed(events: Sequence[str]) -> list[str]:
    """The event names a stored list stands for (``*``: every event)."""
    return list(EVENTS) if ALL_EVENTS in events else list(events)


def new_secret() -> str:
    """A fresh signing secret: ``whsec_`` + base64 of 24 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header value: ``v1,<base64 HMAC-SHA256>`` of
    ``id.timestamp.body`` keyed with the secret's decoded part."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def message_header_id(message_id: int) -> str:
    """The ``webhook-id`` of a message (the same on every attempt and replay)."""
    return f"msg_{message_id}"


@dataclass(frozen=True)
class Endpoint:
    """An endpoint as its owner sees it (never its secret, shown once at creation)."""

    id: int
    url: str
    events: list[str]
    description: str
    enabled: bool
    disabled_reason: str | None
    failing_since: datetime | None
    consecutive_failures: int
    created_at: datetime
    messages: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, times in ISO 8601."""
        return {
            "id": self.id,
            "url": self.url,
            "events": self.events,
            "description": self.description,
            "enabled": self.enabled,
            "disabled_reason": self.disabled_reason,
            "failing_since": _iso(self.failing_since),
            "consecutive_failures": self.consecutive_failures,
            "created_at": _iso(self.created_at),
            "messages": self.messages,
        }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _endpoint(row: RowMapping, messages: dict[str, int] | None = None) -> Endpoint:
    return Endpoint(
        id=int(row["id"]),
        url=str(row["url"]),
        events=list(row["events"]),
        description=str(row["description"]),
        enabled=bool(row["enabled"]),
        disabled_reason=row["disabled_reason"],
        failing_since=row["failing_since"],
        consecutive_failures=int(row["consecutive_failures"]),
        created_at=row["created_at"],
        messages=messages,
    )


@dataclass(frozen=True)
class Created:
    """A new endpoint and its secret (shown this once)."""

    endpoint: Endpoint
    secret: str


def create_endpoint(
    engine: Engine,
    url: str,
    events: Sequence[str],
    *,
    description: str = "",
    now: datetime | None = None,
) -> Created:
    """Register an endpoint; :class:`EndpointError` (nothing stored) for a bad URL or
    unknown events."""
    url = check_url(url)
    names = check_events(events)
    if len(description) > 500:
        raise EndpointError("description", "longer than 500 characters")
    secret = new_secret()
    with engine.begin() as conn:
        endpoint_id = q.create_endpoint(
            conn,
            url=url,
            secret=secret,
            events=names,
            subscribed=subscribed(names),
            description=description,
            now=now or utcnow(),
        )
        row = q.get_endpoint(conn, endpoint_id)
    assert row is not None
    return Created(_endpoint(row), secret)


@dataclass(frozen=True)
class EndpointPage:
    """One page of endpoints."""

    items: list[Endpoint]
    total: int


def endpoints_page(engine: Engine, *, limit: int, offset: int = 0) -> EndpointPage:
    """The endpoints, by id."""
    with engine.connect() as conn:
        total, rows = q.endpoints_page(conn, limit=limit, offset=offset)
    return EndpointPage([_endpoint(r) for r in rows], total)


def get_endpoint(engine: Engine, endpoint_id: int) -> Endpoint | None:
    """One endpoint with its messages per state, or None."""
    with engine.connect() as conn:
        row = q.get_endpoint(conn, endpoint_id)
        if row is None:
            return None
        return _endpoint(row, q.message_counts(conn, endpoint_id))


def delete_endpoint(engine: Engine, endpoint_id: int) -> bool:
    """Remove an endpoint, its unsent messages and its log; False if unknown."""
    with engine.begin() as conn:
        return q.delete_endpoint(conn, endpoint_id)


@dataclass(frozen=True)
class Attempt:
    """One line of an endpoint's delivery log."""

    id: int
    message_id: str
    event: str
    attempt: int
    at: datetime
    status_code: int | None
    outcome: str
    error: str | None
    duration_ms: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {**self.__dict__, "at": self.at.isoformat()}


@dataclass(frozen=True)
class AttemptPage:
    """One page of a delivery log, newest first."""

    items: list[Attempt]
    total: int


def attempts_page(
    engine: Engine, endpoint_id: int, *, limit: int, offset: int = 0
) -> AttemptPage | None:
    """An endpoint's delivery log, newest first; None if the endpoint is unknown."""
    with engine.connect() as conn:
        if q.get_endpoint(conn, endpoint_id) is None:
            return None
        total, rows = q.attempts_page(conn, endpoint_id, limit=limit, offset=offset)
    items = [
        Attempt(
            id=int(r["id"]),
            message_id=message_header_id(int(r["message_id"])),
            event=str(r["event"]),
            attempt=int(r["attempt"]),
            at=r["at"],
            status_code=r["status_code"],
            outcome=str(r["outcome"]),
            error=r["error"],
            duration_ms=int(r["duration_ms"]),
        )
        for r in rows
    ]
    return AttemptPage(items, total)


def replay(engine: Engine, endpoint_id: int, *, since: datetime | None = None) -> int | None:
    """Send again: the endpoint is enabled again, its failed messages (and with
    ``since`` every message that happened since then) are due now, in their order.
    Answers how many were requeued; None if the endpoint is unknown."""
    with engine.begin() as conn:
        row = q.get_endpoint(conn, endpoint_id)
        if row is None:
            return None
        return q.replay(conn, endpoint_id, subscribed=subscribed(list(row["events"])), since=since)


__all__ = [
    "ALL_EVENTS",
    "EVENTS",
    "Attempt",
    "AttemptPage",
    "Created",
    "Endpoint",
    "EndpointError",
    "EndpointPage",
    "attempts_page",
    "check_events",
    "check_url",
    "create_endpoint",
    "delete_endpoint",
    "endpoints_page",
    "get_endpoint",
    "message_header_id",
    "new_secret",
    "replay",
    "sign",
    "subscribed",
]
