"""Delivery states and their forward-only order (DESIGN.md decision 4)."""

from __future__ import annotations

QUEUED = "queued"
SENDING = "sending"
SENT = "sent"
DELIVERED = "delivered"
READ = "read"
FAILED = "failed"
UNKNOWN = "unknown"  # ambiguous send: never resent automatically
SKIPPED = "skipped"  # opted out at send time, or the message could not render

#: Rank of each progress state; a status event only ever raises the rank.
RANK: dict[str, int] = {QUEUED: 0, SENDING: 1, UNKNOWN: 1, SENT: 2, DELIVERED: 3, READ: 4}

#: States a row never leaves on its own.
TERMINAL = frozenset({FAILED, SKIPPED, READ})

ALL = (QUEUED, SENDING, SENT, DELIVERED, READ, FAILED, UNKNOWN, SKIPPED)
