"""The names of a delivery's states: the vocabulary of ``deliveries.state``.

The rules between them (order, forward-only moves, what an outcome or a status event
makes of a row) live in ``campaigns.delivery_lifecycle``.
"""

from __future__ import annotations

from typing import NamedTuple

QUEUED = "queued"
SENDING = "sending"
SENT = "sent"
DELIVERED = "delivered"
READ = "read"
FAILED = "failed"
UNKNOWN = "unknown"  # ambiguous send: never resent automatically
SKIPPED = "skipped"  # opted out at send time, or the message could not render

#: every state, in lifecycle order
ALL = (QUEUED, SENDING, SENT, DELIVERED, READ, FAILED, UNKNOWN, SKIPPED)


class Move(NamedTuple):
    """One change of ``deliveries.state``: its name, the states a row may leave by it, and
    the state it takes. The moves are ``campaigns.delivery_lifecycle.MOVES``; a statement
    that changes a row's state receives its move (storage holds no policy)."""

    name: str
    from_states: tuple[str, ...]
    to: str
