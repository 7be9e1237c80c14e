"""SQL for idempotency keys: claim a key, store the answer it got, replay or release it.

A key is claimed by inserting its row; the unique (principal, key) constraint makes the
claim atomic across threads, processes and hosts, on SQLite and PostgreSQL alike. How
long keys live and when an unfinished claim counts as abandoned are the caller's policy
(passed in as times).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from storage import tables

_k = tables.idempotency_keys


@dataclass(frozen=True)
class KeyRequest:
    """A request that carries an idempotency key: who sent it, the key, and what it asks."""

    principal: str
    key: str
    fingerprint: str
    method: str
    path: str


@dataclass(frozen=True)
class StoredKey:
    """One key's row: the request it was first used for and, once done, its answer."""

    id: int
    fingerprint: str
    method: str
    path: str
    status_code: int | None  # None: the first request is still being processed
    response_body: str | None
    created_at: datetime
    expires_at: datetime

    @property
    def done(self) -> bool:
        """True once the first request's answer is stored."""
        return self.status_code is not None

    @classmethod
    def of(cls, row: Any) -> StoredKey:
        """From a row mapping of ``idempotency_keys``."""
        return cls(
            id=int(row["id"]),
            fingerprint=str(row["fingerprint"]),
            method=str(row["method"]),
            path=str(row["path"]),
            status_code=row["status_code"],
            response_body=row["response_body"],
            created_at=row["created_at"],
            expires_at=row["expires_at"],
        )


def find(engine: Engine, principal: str, key: str) -> StoredKey | None:
    """The row of ``key`` for ``principal``, or None."""
    with engine.connect() as conn:
        row = (
            conn.execute(select(_k).where(_k.c.principal == principal, _k.c.key == key))
            .mappings()
            .first()
        )
    return StoredKey.of(row) if row else None


def claim(
    engine: Engine,
    request: KeyRequest,
    *,
    now: datetime,
    expires_at: datetime,
    abandoned_before: datetime,
) -> tuple[bool, StoredKey]:
    """Claim ``key``: ``(True, row)`` when this caller inserted it, else ``(False, row)``
    with the row someone else claimed (done or still in progress).

    Expired rows (``expires_at <= now``, any key) and this key's unfinished claim started
    before ``abandoned_before`` (its process died) are deleted first.
    """
    principal, key = request.principal, request.key
    with engine.begin() as conn:
        conn.execute(delete(_k).where(_k.c.expires_at <= now))
        conn.execute(
            delete(_k).where(
                _k.c.principal == principal,
                _k.c.key == key,
                or_(
                    _k.c.expires_at <= now,
                    and_(_k.c.status_code.is_(None), _k.c.created_at < abandoned_before),
                ),
            )
        )
    values = {
        "principal": principal,
        "key": key,
        "fingerprint": request.fingerprint,
        "method": request.method,
        "path": request.path[:500],
        "status_code": None,
        "response_body": None,
        "created_at": now,
        "completed_at": None,
        "expires_at": expires_at,
    }
    try:
        with engine.begin() as conn:
            inserted = conn.execute(insert(_k).values(**values))
            pk = inserted.inserted_primary_key
            assert pk is not None
    except IntegrityError:
        existing = find(engine, principal, key)
        if existing is None:  # deleted between our insert and our read: try once more
            return claim(
                engine,
                request,
                now=now,
                expires_at=expires_at,
                abandoned_before=abandoned_before,
            )
        return False, existing
    return True, StoredKey.of({**values, "id": pk[0]})


def complete(
    engine: Engine, key_id: int, *, status_code: int, response_body: str, now: datetime
) -> None:
    """Store the answer of the request that claimed the key (its replays return it)."""
    with engine.begin() as conn:
        conn.execute(
            update(_k)
            .where(_k.c.id == key_id)
            .values(status_code=status_code, response_body=response_body, completed_at=now)
        )


def release(engine: Engine, key_id: int) -> None:
    """Forget a claim whose request failed, so the same key may be tried again."""
    with engine.begin() as conn:
        conn.execute(delete(_k).where(_k.c.id == key_id, _k.c.status_code.is_(None)))


__all__ = ["KeyRequest", "StoredKey", "claim", "complete", "find", "release"]
