"""The Lease-table lock: exactly one scheduler fires starts and recurrences at a time.

Acquire and renew are one conditional UPDATE (take the lease if it is ours or has
expired), falling back to an INSERT when no row exists yet. Every process dispatches;
only the lease holder runs the APScheduler jobs.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Engine, delete, insert, or_, update
from sqlalchemy.exc import IntegrityError

from storage import tables

_leases = tables.leases

SCHEDULER_LEASE = "scheduler"


def try_acquire(engine: Engine, name: str, holder: str, *, now: datetime, ttl: float) -> bool:
    """Take or renew lease ``name`` for ``holder`` until ``now + ttl``; True if we hold it."""
    expires = now + timedelta(seconds=ttl)
    with engine.begin() as conn:
        result = conn.execute(
            update(_leases)
            .where(
                _leases.c.name == name,
                or_(_leases.c.holder == holder, _leases.c.expires_at < now),
            )
            .values(holder=holder, expires_at=expires)
        )
        if result.rowcount == 1:
            return True
    try:
        with engine.begin() as conn:
            conn.execute(insert(_leases).values(name=name, holder=holder, expires_at=expires))
        return True
    except IntegrityError:
        return False  # somebody else holds it (or just took it)


def release(engine: Engine, name: str, holder: str) -> None:
    """Give the lease up (only if ``holder`` still holds it)."""
    with engine.begin() as conn:
        conn.execute(delete(_leases).where(_leases.c.name == name, _leases.c.holder == holder))
