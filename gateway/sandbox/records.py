"""What the sandbox keeps: instances, accepted messages, pending events and counters."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

# instance states
CREATED = "created"
WAITING_SCAN = "waiting_scan"
CONNECTED = "connected"
DISCONNECTED = "disconnected"
LOGGED_OUT = "logged_out"

STATUS_RANK = {"pending": 0, "sent": 1, "delivered": 2, "read": 3, "played": 4, "failed": 5}


def redact_url(url: str | None) -> str | None:
    """``url`` with its path and query hidden: webhook paths often carry a secret."""
    if not url:
        return url
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/***"


@dataclass
class Instance:
    """One messaging-app session."""

    id: str
    token: str
    state: str = CREATED
    phone: str | None = None
    webhook_url: str | None = None
    webhook_enabled: bool = False
    sends: int = 0
    #: ``sends`` when the quota was last renewed (``POST /sandbox/instances/{id}/renew-quota``)
    quota_from: int = 0
    sends_since_connect: int = 0
    created_at: float = 0.0
    # the cold-contact timelock mode (``SandboxConfig.cold_lock_after``)
    known_chats: set[str] = field(default_factory=set)
    cold_sent: int = 0
    locked_until: float = 0.0
    lock_used: bool = False

    def public(self) -> dict[str, Any]:
        """The inspection view (no token)."""
        return {
            "instance_id": self.id,
            "state": self.state,
            "phone": self.phone,
            "webhook_url": redact_url(self.webhook_url),
            "webhook_enabled": self.webhook_enabled,
            "sends": self.sends,
            "created_at": self.created_at,
        }


@dataclass(slots=True)
class SentMessage:
    """One accepted send, and its true status (moved forward as its events fall due)."""

    id: str
    instance_id: str
    to: str  # digits, or a group id
    chat: str  # the JID
    type: str
    payload: dict[str, Any]
    at: float
    endpoint: str
    status: str = "pending"
    error_code: str | None = None
    replied: str | None = None
    answered: str = "ok"  # ok, slow, dropped, backend_down
    #: the simulated person's answer to it (planning.answer_record), at most one
    answer: dict[str, Any] | None = None

    def public(self) -> dict[str, Any]:
        """The inspection view."""
        return {
            "message_id": self.id,
            "instance_id": self.instance_id,
            "to": self.to,
            "chat": self.chat,
            "type": self.type,
            "payload": self.payload,
            "at": self.at,
            "endpoint": self.endpoint,
            "status": self.status,
            "error_code": self.error_code,
            "replied": self.replied,
            "answered": self.answered,
            "answer": self.answer,
        }


@dataclass(slots=True)
class EventJob:
    """An event waiting for its time; ``truth`` moves the message's true status when due."""

    instance_id: str
    name: str
    body: dict[str, Any] | None  # None: a status body, built only when due (saves memory)
    message_id: str | None = None
    truth: str | None = None
    error_code: str | None = None
    chat: str = ""
    at: int = 0
    variant: int = 0


@dataclass
class Stats:
    """Counters for ``/sandbox/stats``."""

    requests: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    accepted: int = 0
    per_recipient: Counter[str] = field(default_factory=Counter)
