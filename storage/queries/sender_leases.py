"""SQL for sharing senders between workers: heartbeats and sender leases.

Every statement that takes a sender is conditional (an ``INSERT ... ON CONFLICT DO
NOTHING`` or an ``UPDATE`` of an expired lease), so two workers never both take one; the
rule for how many a worker takes lives in :mod:`scheduler.sender_leases`. Workers never
wait on each other in a cycle: rows are inserted in one global order (by sender id), and
another worker's rows (expired heartbeats, expired leases) are locked with ``SKIP
LOCKED`` (a no-op on SQLite, whose single writer cannot deadlock).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import Connection, delete, func, select, update

from storage import tables
from storage.dialect import dialect_insert

_w = tables.dispatch_workers
_l = tables.sender_leases


def heartbeat(conn: Connection, holder: str, *, now: datetime, until: datetime) -> int:
    """Mark ``holder`` alive until ``until``, forget workers that expired (and their expired
    leases, so a dead worker leaves no rows behind for senders nobody takes over), and
    return the number of live workers (``holder`` included)."""
    ins = dialect_insert(conn, _w).values(holder=holder, expires_at=until)
    conn.execute(
        ins.on_conflict_do_update(index_elements=[_w.c.holder], set_={"expires_at": until})
    )
    expired = (
        select(_w.c.holder)
        .where(_w.c.expires_at < now, _w.c.holder != holder)
        .with_for_update(skip_locked=True)
    )
    gone = conn.execute(
        delete(_w).where(_w.c.holder.in_(expired.scalar_subquery())).returning(_w.c.holder)
    )
    dead = [str(r[0]) for r in gone]
    if dead:
        conn.execute(delete(_l).where(_l.c.holder.in_(dead), _l.c.expires_at < now))
    return int(conn.execute(select(func.count()).select_from(_w)).scalar_one())


def renew(conn: Connection, holder: str, *, until: datetime) -> set[str]:
    """Extend every lease ``holder`` still holds to ``until``; the senders it holds."""
    result = conn.execute(
        update(_l).where(_l.c.holder == holder).values(expires_at=until).returning(_l.c.instance_id)
    )
    return {str(r[0]) for r in result}


def unheld(conn: Connection, instance_ids: Collection[str], *, now: datetime) -> set[str]:
    """The senders of ``instance_ids`` that nobody holds (no lease, or an expired one)."""
    if not instance_ids:
        return set()
    held = conn.execute(
        select(_l.c.instance_id).where(_l.c.instance_id.in_(instance_ids), _l.c.expires_at >= now)
    )
    return set(instance_ids) - {str(r[0]) for r in held}


def take(
    conn: Connection, holder: str, instance_ids: Collection[str], *, now: datetime, until: datetime
) -> set[str]:
    """Lease to ``holder`` those of ``instance_ids`` nobody holds; the ones it got."""
    if not instance_ids:
        return set()
    ordered = sorted(set(instance_ids))
    ins = dialect_insert(conn, _l).values(
        [{"instance_id": i, "holder": holder, "expires_at": until} for i in ordered]
    )
    got = {
        str(r[0])
        for r in conn.execute(
            ins.on_conflict_do_nothing(index_elements=[_l.c.instance_id]).returning(
                _l.c.instance_id
            )
        )
    }
    rest = [i for i in ordered if i not in got]
    if rest:  # leases of a dead worker: taken only if still expired
        expired = (
            select(_l.c.instance_id)
            .where(_l.c.instance_id.in_(rest), _l.c.expires_at < now)
            .with_for_update(skip_locked=True)
        )
        result = conn.execute(
            update(_l)
            .where(_l.c.instance_id.in_(expired.scalar_subquery()))
            .values(holder=holder, expires_at=until)
            .returning(_l.c.instance_id)
        )
        got |= {str(r[0]) for r in result}
    return got


def release(conn: Connection, holder: str, instance_ids: Collection[str]) -> int:
    """Give up ``holder``'s leases on ``instance_ids``; how many it gave up."""
    if not instance_ids:
        return 0
    result = conn.execute(
        delete(_l).where(_l.c.holder == holder, _l.c.instance_id.in_(instance_ids))
    )
    return int(result.rowcount or 0)


def retire(conn: Connection, holder: str) -> int:
    """Give up every lease of ``holder`` and its heartbeat; the leases given up."""
    result = conn.execute(delete(_l).where(_l.c.holder == holder))
    conn.execute(delete(_w).where(_w.c.holder == holder))
    return int(result.rowcount or 0)


def holders(conn: Connection, *, now: datetime) -> dict[str, str]:
    """Sender -> the worker holding a live lease on it."""
    rows = conn.execute(select(_l.c.instance_id, _l.c.holder).where(_l.c.expires_at >= now))
    return {str(i): str(h) for i, h in rows}
