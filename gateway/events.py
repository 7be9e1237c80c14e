"""Typed webhook events. ``gateway.event_parsing.parse_webhook`` turns bodies into these."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class DeliveryStatus(StrEnum):
    """A message's status as the gateway reports it (normalised across dialects)."""

    PENDING = "pending"
    SENT = "sent"
    DELIVERED = "delivered"
    READ = "read"
    PLAYED = "played"  # voice/video played; gatecast treats it as read
    FAILED = "failed"


@dataclass(frozen=True)
class MessageStatus:
    """A status change of a message we sent; correlate by ``message_id`` only."""

    instance_id: str | None
    message_id: str
    status: DeliveryStatus
    chat: str | None = None
    error_code: str | None = None
    at: datetime | None = None


@dataclass(frozen=True)
class IncomingMessage:
    """A message someone sent to the instance (a reply, a button or list choice)."""

    instance_id: str | None
    message_id: str
    chat: str
    text: str
    sender_phone: str | None = None  # digits only; None for groups and hidden (@lid) senders
    is_group: bool = False
    at: datetime | None = None
    #: the id of the button tapped (a quick reply, a template button), of the list row
    #: chosen, and of the message this one quotes (``contextInfo.stanzaId``); None: none
    button_id: str | None = None
    row_id: str | None = None
    quoted_id: str | None = None


@dataclass(frozen=True)
class Presence:
    """Online/offline status of a user."""

    instance_id: str | None
    chat: str
    status: str
    at: datetime | None = None


@dataclass(frozen=True)
class ConnectionStatus:
    """The instance's connection state: connected, disconnected, logged_out, waiting_scan."""

    instance_id: str | None
    state: str
    reason: str = ""
    phone: str | None = None


@dataclass(frozen=True)
class QrCode:
    """A QR code to scan, as a ``data:image/png;base64,...`` URI."""

    instance_id: str | None
    data_uri: str


@dataclass(frozen=True)
class UnknownEvent:
    """An event gatecast does not act on; kept for logs, never a crash."""

    instance_id: str | None
    name: str
    payload: Any = field(default=None, compare=False)


Event = MessageStatus | IncomingMessage | Presence | ConnectionStatus | QrCode | UnknownEvent


class MalformedEvent(ValueError):
    """A webhook body that is not an event; the message says what is wrong and where."""
