"""SQL for sender instances: pace reservations, pausing, and the names of usable senders.

Pace state (``next_send_at``) lives in the ``instances`` row so a restart never bursts,
and the reservation is one conditional UPDATE so two workers never take the same slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, func, insert, or_, select, update

from storage import states
from storage.models import Delivery, Instance, StatusEvent

_i = Instance.__table__  # type: ignore[attr-defined]
_events = StatusEvent.__table__  # type: ignore[attr-defined]
_d = Delivery.__table__  # type: ignore[attr-defined]

#: Paused reasons that a ConnectionStatus "connected" event clears.
CONNECTION_PROBLEMS = ("relogin_required", "not_activated", "disconnected")


def ensure(conn: Connection, instance_ids: Sequence[str], *, now: datetime) -> None:
    """Make sure a row exists for every id in ``instance_ids`` (state unchanged if present)."""
    if not instance_ids:
        return
    known = {
        str(r[0])
        for r in conn.execute(select(_i.c.instance_id).where(_i.c.instance_id.in_(instance_ids)))
    }
    missing = [i for i in dict.fromkeys(instance_ids) if i not in known]
    if missing:
        conn.execute(
            insert(_i),
            [
                {
                    "instance_id": i,
                    "label": "",
                    "state": "created",
                    "webhook_url_registered": False,
                    "created_at": now,
                    "updated_at": now,
                }
                for i in missing
            ],
        )


def connected_ids(conn: Connection) -> list[str]:
    """Instance ids known to gatecast whose state is ``connected``, in id order."""
    rows = conn.execute(select(_i.c.instance_id).where(_i.c.state == "connected").order_by(_i.c.id))
    return [str(r[0]) for r in rows]


def pause_state(conn: Connection, instance_ids: Sequence[str]) -> dict[str, str | None]:
    """``instance_id -> paused_reason`` for the given ids (missing ids are absent)."""
    if not instance_ids:
        return {}
    rows = conn.execute(
        select(_i.c.instance_id, _i.c.paused_reason).where(_i.c.instance_id.in_(list(instance_ids)))
    )
    return {str(r[0]): r[1] for r in rows}


def next_send_times(conn: Connection, instance_ids: Sequence[str]) -> dict[str, datetime | None]:
    """``instance_id -> next_send_at`` (the persisted pace state)."""
    if not instance_ids:
        return {}
    rows = conn.execute(
        select(_i.c.instance_id, _i.c.next_send_at).where(_i.c.instance_id.in_(list(instance_ids)))
    )
    return {str(r[0]): r[1] for r in rows}


def reserve_slot(conn: Connection, instance_id: str, *, now: datetime, next_at: datetime) -> bool:
    """Take the instance's next send slot if it is free at ``now``; one conditional UPDATE.

    Sets ``next_send_at = next_at``. False when the instance is paused, unknown, or its
    slot is not due yet (another worker took it).
    """
    result = conn.execute(
        update(_i)
        .where(
            _i.c.instance_id == instance_id,
            _i.c.paused_reason.is_(None),
            or_(_i.c.next_send_at.is_(None), _i.c.next_send_at <= now),
        )
        .values(next_send_at=next_at)
    )
    return bool(result.rowcount == 1)


def lock_unpaused(conn: Connection, instance_id: str) -> bool:
    """Lock the instance's row for this transaction (a no-op UPDATE); False when it is
    paused or unknown. Serialises count-then-claim of one sender across workers: on
    PostgreSQL the row lock, on SQLite the write lock taken before anything is read."""
    result = conn.execute(
        update(_i)
        .where(_i.c.instance_id == instance_id, _i.c.paused_reason.is_(None))
        .values(updated_at=_i.c.updated_at)
    )
    return bool(result.rowcount == 1)


def set_next_send(conn: Connection, instance_id: str, at: datetime) -> None:
    """Persist the instance's next send slot (after a claim took the current one)."""
    conn.execute(update(_i).where(_i.c.instance_id == instance_id).values(next_send_at=at))


def pause(conn: Connection, instance_id: str, reason: str, *, now: datetime) -> bool:
    """Stop sending through ``instance_id`` with ``reason``; False when already paused."""
    result = conn.execute(
        update(_i)
        .where(_i.c.instance_id == instance_id, _i.c.paused_reason.is_(None))
        .values(paused_reason=reason[:500], paused_at=now, updated_at=now)
    )
    return bool(result.rowcount == 1)


def resume(conn: Connection, instance_id: str, *, now: datetime) -> bool:
    """Clear the pause of ``instance_id`` (``paused_at`` stays as the last pause time)."""
    result = conn.execute(
        update(_i)
        .where(_i.c.instance_id == instance_id, _i.c.paused_reason.is_not(None))
        .values(paused_reason=None, updated_at=now)
    )
    return bool(result.rowcount == 1)


def pause_on_restriction_events(conn: Connection, *, now: datetime, code: str = "463") -> list[str]:
    """Pause every unpaused instance that got a failed status with ``code`` since its last pause.

    Error 463 means the account may not reach new contacts for a while: an early ban sign.
    Returns the instance ids paused now.
    """
    latest = (
        select(_events.c.instance_id, func.max(_events.c.received_at).label("last"))
        .where(_events.c.error_code == code, _events.c.instance_id.is_not(None))
        .group_by(_events.c.instance_id)
        .subquery()
    )
    rows = conn.execute(
        select(_i.c.instance_id, _i.c.paused_at, latest.c.last)
        .join(latest, latest.c.instance_id == _i.c.instance_id)
        .where(_i.c.paused_reason.is_(None))
    ).all()
    paused: list[str] = []
    for instance_id, paused_at, last in rows:
        if paused_at is None or (last is not None and last > paused_at):
            reason = f"error {code} reported by the gateway (may not reach new contacts)"
            if pause(conn, str(instance_id), reason, now=now):
                paused.append(str(instance_id))
    return paused


__all__ = [
    "CONNECTION_PROBLEMS",
    "all_ids",
    "connected_ids",
    "ensure",
    "mark_state",
    "move_waiting_deliveries",
    "next_send_times",
    "pause",
    "pause_on_restriction_events",
    "pause_state",
    "reserve_slot",
    "resume",
    "resume_connection_pause",
    "set_next_send",
]


def mark_state(
    conn: Connection,
    instance_id: str,
    state: str,
    *,
    now: datetime,
    phone: str | None = None,
    webhook_registered: bool | None = None,
) -> None:
    """Create or update the row of ``instance_id`` with a connection ``state``."""
    ensure(conn, [instance_id], now=now)
    values: dict[str, object] = {"state": state[:32], "updated_at": now}
    if phone:
        values["phone"] = phone[:32]
    if webhook_registered is not None:
        values["webhook_url_registered"] = webhook_registered
    conn.execute(update(_i).where(_i.c.instance_id == instance_id).values(**values))


def all_ids(conn: Connection) -> list[str]:
    """Every instance id known to gatecast, in id order."""
    return [str(r[0]) for r in conn.execute(select(_i.c.instance_id).order_by(_i.c.id))]


def resume_connection_pause(conn: Connection, instance_id: str, *, now: datetime) -> str | None:
    """Clear the pause of ``instance_id`` when a connection problem caused it.

    Returns the reason cleared, or None when it was not paused for a connection problem.
    """
    row = conn.execute(select(_i.c.paused_reason).where(_i.c.instance_id == instance_id)).first()
    reason = row[0] if row else None
    if reason is None or not str(reason).startswith(CONNECTION_PROBLEMS):
        return None
    conn.execute(
        update(_i)
        .where(_i.c.instance_id == instance_id, _i.c.paused_reason == reason)
        .values(paused_reason=None, updated_at=now)
    )
    return str(reason)


def move_waiting_deliveries(conn: Connection, old_id: str, new_id: str) -> int:
    """Re-point deliveries still waiting to go (queued or sending) from ``old_id`` to
    ``new_id``; one bulk UPDATE. Returns how many rows moved."""
    result = conn.execute(
        update(_d)
        .where(_d.c.sender == old_id, _d.c.state.in_((states.QUEUED, states.SENDING)))
        .values(sender=new_id)
    )
    return int(result.rowcount or 0)
