"""Request keys: a creation done at most once per client-chosen key (the rule the HTTP
``Idempotency-Key`` header follows).

The first request with a key claims it and, once done, stores its answer; a repeat finds
that answer. A key lives :data:`KEEP_FOR`; a claim still unfinished after
:data:`ABANDONED_AFTER` belongs to a process that died and may be claimed again. The rows
live in ``idempotency_keys`` (:mod:`storage.queries.idempotency`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Engine

from storage.queries import idempotency as q
from storage.queries.idempotency import KeyRequest, StoredKey

#: how long a key and its answer are kept
KEEP_FOR = timedelta(hours=24)
#: a claim still unfinished after this long belongs to a process that died
ABANDONED_AFTER = timedelta(minutes=10)


def claim(engine: Engine, request: KeyRequest, *, now: datetime) -> tuple[bool, StoredKey]:
    """Claim ``request``'s key for its principal: ``(True, row)`` when this caller claimed
    it, else ``(False, row)`` with the claim someone else holds (done or still in progress)."""
    return q.claim(
        engine,
        request,
        now=now,
        expires_at=now + KEEP_FOR,
        abandoned_before=now - ABANDONED_AFTER,
    )


def complete(
    engine: Engine, key_id: int, *, status_code: int, response_body: str, now: datetime
) -> None:
    """Store the answer of the request that claimed the key (its repeats get it)."""
    q.complete(engine, key_id, status_code=status_code, response_body=response_body, now=now)


def release(engine: Engine, key_id: int) -> None:
    """Drop the claim of a request that failed, so the key may be used again."""
    q.release(engine, key_id)


__all__ = ["ABANDONED_AFTER", "KEEP_FOR", "KeyRequest", "StoredKey", "claim", "complete", "release"]
