"""Outbound webhooks (Standard Webhooks): the events, the endpoints that receive them,
their secrets and the signature.

An endpoint is a URL (http or https only), a secret ``whsec_<base64 of 24 random bytes>``
shown once at creation (and once at each rotation), and the events it asked for (``*``:
all). The events themselves are written by triggers (migration 0010) in the transaction
of the change that causes them; ``scheduler.outbound`` delivers them. Each request
carries ``webhook-id`` (``msg_`` + a ULID, given once per message: unique across
databases, the same on every retry), ``webhook-timestamp`` and ``webhook-signature:
v1,<base64 HMAC-SHA256 of "id.timestamp.body">`` keyed with the secret's base64-decoded
part after ``whsec_``; during a rotation's overlap, one such value per secret, separated
by a space (decision 60 in docs/architecture.md).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Connection, Engine, RowMapping

from campaigns.webhook_events import EVENT_DATA, TEST_EVENT
from storage.queries import outbound as q
from storage.types import utcnow

#: every event an endpoint may ask for, in the order the docs list them (their schemas:
#: ``campaigns.webhook_events``)
EVENTS = tuple(EVENT_DATA)
ALL_EVENTS = "*"
SECRET_PREFIX = "whsec_"  # noqa: S105 (the format's prefix, not a secret)
SECRET_BYTES = 24
MAX_URL_LENGTH = 2000
MAX_DESCRIPTION = 500
#: how long a rotated-out secret still signs, unless the rotation says
DEFAULT_OVERLAP = timedelta(hours=24)
MAX_OVERLAP = timedelta(days=7)


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
    """One ``webhook-signature`` value: ``v1,<base64 HMAC-SHA256>`` of
    ``id.timestamp.body`` keyed with the secret's decoded part."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def signature_header(
    secret: str, previous: str | None, msg_id: str, timestamp: int, body: bytes
) -> str:
    """The ``webhook-signature`` header: the current secret's signature, then (during a
    rotation's overlap) the previous secret's, space-separated (Standard Webhooks): a
    receiver holding either secret verifies it."""
    values = [sign(secret, msg_id, timestamp, body)]
    if previous:
        values.append(sign(previous, msg_id, timestamp, body))
    return " ".join(values)


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_message_id() -> str:
    """A fresh ``webhook-id``: ``msg_`` + a ULID (48 bits of milliseconds, 80 random
    bits, Crockford base32): unique across databases, sortable by creation."""
    value = (int(time.time() * 1000) << 80) | secrets.randbits(80)
    chars = [_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5)]
    return "msg_" + "".join(chars)


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
    #: until when the secret before the last rotation also signs (None: never rotated)
    old_secret_valid_until: datetime | None = None

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
            "old_secret_valid_until": _iso(self.old_secret_valid_until),
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
        old_secret_valid_until=row["previous_secret_until"],
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
    _check_description(description)
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


def _check_description(description: str) -> None:
    if len(description) > MAX_DESCRIPTION:
        raise EndpointError("description", f"longer than {MAX_DESCRIPTION} characters")


def update_endpoint(
    engine: Engine,
    endpoint_id: int,
    *,
    url: str | None = None,
    events: Sequence[str] | None = None,
    description: str | None = None,
    enabled: bool | None = None,
) -> Endpoint | None:
    """Change what is given (None: unchanged); None if the endpoint is unknown,
    :class:`EndpointError` (nothing changed) for a bad value. ``enabled=False`` stops its
    events being written (its waiting messages wait); ``enabled=True`` takes it back (a
    failure run forgotten, its waiting messages sent). New events apply to what happens
    from now on; messages already written for the old ones are still sent."""
    values: dict[str, Any] = {}
    if url is not None:
        values["url"] = check_url(url)
    names = check_events(events) if events is not None else None
    if names is not None:
        values["events"] = names
    if description is not None:
        _check_description(description)
        values["description"] = description
    with engine.begin() as conn:
        row = q.get_endpoint(conn, endpoint_id)
        if row is None:
            return None
        now_enabled = bool(row["enabled"]) if enabled is None else enabled
        if enabled is False:
            values.update(enabled=False, disabled_reason=None)
        elif enabled is True and not row["enabled"]:
            values.update(
                enabled=True, disabled_reason=None, failing_since=None, consecutive_failures=0
            )
        resubscribe = names is not None or enabled is not None
        wanted = subscribed(names if names is not None else list(row["events"]))
        q.update_endpoint(
            conn,
            endpoint_id,
            values,
            subscribed=(wanted if now_enabled else []) if resubscribe else None,
        )
        return _endpoint_read(conn, endpoint_id)


def _endpoint_read(conn: Connection, endpoint_id: int) -> Endpoint | None:
    row = q.get_endpoint(conn, endpoint_id)
    return None if row is None else _endpoint(row, q.message_counts(conn, endpoint_id))


@dataclass(frozen=True)
class Rotated:
    """An endpoint after a rotation and its new secret (shown this once)."""

    endpoint: Endpoint
    secret: str


def rotate_secret(
    engine: Engine,
    endpoint_id: int,
    *,
    overlap: timedelta = DEFAULT_OVERLAP,
    now: datetime | None = None,
) -> Rotated | None:
    """A new signing secret for an endpoint; the one it had still signs for ``overlap``
    (0 to 7 days; both signatures are sent meanwhile), then only the new one does. None
    if the endpoint is unknown; :class:`EndpointError` for an overlap out of range. The
    old secret is never shown again."""
    if not timedelta(0) <= overlap <= MAX_OVERLAP:
        raise EndpointError("overlap", "from 0 to 7 days")
    secret = new_secret()
    with engine.begin() as conn:
        if not q.rotate_secret(
            conn, endpoint_id, secret=secret, old_valid_until=(now or utcnow()) + overlap
        ):
            return None
        found = _endpoint_read(conn, endpoint_id)
    assert found is not None
    return Rotated(found, secret)


class EndpointDisabled(Exception):
    """The endpoint is disabled: nothing is sent to it until it is enabled or replayed."""


def send_test_event(engine: Engine, endpoint_id: int, *, now: datetime | None = None) -> str | None:
    """Write a ``webhook.test`` message for the endpoint, due now: it goes through the
    same signed, retried delivery as every event. Answers its ``webhook-id``; None if the
    endpoint is unknown; :class:`EndpointDisabled` if it is disabled."""
    at = now or utcnow()
    webhook_id = new_message_id()
    with engine.begin() as conn:
        row = q.get_endpoint(conn, endpoint_id)
        if row is None:
            return None
        if not row["enabled"]:
            raise EndpointDisabled(f"webhook endpoint {endpoint_id} is disabled")
        data = {"endpoint_id": endpoint_id, "text": "a test event from gatecast"}
        q.add_message(
            conn,
            endpoint_id,
            event=TEST_EVENT,
            recipient="test",
            data=json.dumps(data),
            occurred_at=at,
            webhook_id=webhook_id,
        )
    return webhook_id


@dataclass(frozen=True)
class Backlog:
    """The messages waiting to be sent, over every endpoint."""

    waiting: int
    oldest_at: datetime | None


def backlog(conn: Connection) -> Backlog:
    """How many messages wait and when the oldest of them happened (the lag)."""
    count, oldest = q.backlog(conn)
    return Backlog(count, oldest)


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
        return _endpoint_read(conn, endpoint_id)


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
            message_id=str(r["webhook_id"]),
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
    "DEFAULT_OVERLAP",
    "EVENTS",
    "TEST_EVENT",
    "Attempt",
    "AttemptPage",
    "Backlog",
    "Created",
    "Endpoint",
    "EndpointDisabled",
    "EndpointError",
    "EndpointPage",
    "Rotated",
    "attempts_page",
    "backlog",
    "check_events",
    "check_url",
    "create_endpoint",
    "delete_endpoint",
    "endpoints_page",
    "get_endpoint",
    "new_message_id",
    "new_secret",
    "replay",
    "rotate_secret",
    "send_test_event",
    "sign",
    "signature_header",
    "subscribed",
    "update_endpoint",
]
