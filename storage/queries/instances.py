"""SQL for sender instances: pace reservations, pausing, and the names of usable senders.

Pace state (``next_send_at``) lives in the ``instances`` row so a restart never bursts,
and the reservation is one conditional UPDATE so two workers never take the same slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    Connection,
    Select,
    String,
    and_,
    any_,
    bindparam,
    case,
    delete,
    insert,
    literal_column,
    or_,
    select,
    update,
)

from storage import states, tables

_i = tables.instances
_events = tables.status_events
_d = tables.deliveries
#: ``state = 'queued'`` inline: the predicate of the partial ``ix_deliveries_queue``
_QUEUED = _d.c.state == literal_column(f"'{states.QUEUED}'")

#: The state of an instance that no longer exists at the gateway (reset without a new
#: id, "Instance ID Invalidated", the demo's embedded sandbox stopped): it never sends.
GONE = "gone"
#: The state of an instance whose link an event or the gateway confirmed (or a send proved).
CONNECTED = "connected"
#: The state of an instance whose QR code was shown and whose link nothing confirmed yet
#: (a gateway that posts no connection event): it is used, and its first send proves
#: (``connected``) or disproves (``waiting_scan``, ``logged_out``) the link.
UNCONFIRMED = "unconfirmed"
#: States of an instance gatecast sends through unnamed (a campaign without ``instances``).
LINKED_STATES = (CONNECTED, UNCONFIRMED)
#: States in which an instance cannot send (a new login, a reconnect or nothing helps).
UNABLE_STATES = ("disconnected", "logged_out", GONE)


@dataclass(frozen=True)
class SenderHealth:
    """What decides whether a sender can send: its state and pause."""

    state: str
    paused_reason: str | None
    paused_at: datetime | None


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


def linked_states(conn: Connection) -> dict[str, str]:
    """``instance_id -> state`` of the instances that are linked (:data:`LINKED_STATES`:
    connected, or unconfirmed after a QR code was shown), paused or not, in id order."""
    rows = conn.execute(
        select(_i.c.instance_id, _i.c.state).where(_i.c.state.in_(LINKED_STATES)).order_by(_i.c.id)
    )
    return {str(r[0]): str(r[1]) for r in rows}


def linked_ids(conn: Connection) -> list[str]:
    """The ids of :func:`linked_states`, in id order."""
    return list(linked_states(conn))


def usable_ids(conn: Connection) -> list[str]:
    """Linked (:data:`LINKED_STATES`), unpaused instances, in id order: the senders a
    campaign without ``instances`` may hand recipients to."""
    rows = conn.execute(
        select(_i.c.instance_id)
        .where(_i.c.state.in_(LINKED_STATES), _i.c.paused_reason.is_(None))
        .order_by(_i.c.id)
    )
    return [str(r[0]) for r in rows]


def health(conn: Connection, instance_ids: Sequence[str]) -> dict[str, SenderHealth]:
    """``instance_id -> SenderHealth`` for the given ids (unknown ids are absent)."""
    if not instance_ids:
        return {}
    rows = conn.execute(
        select(_i.c.instance_id, _i.c.state, _i.c.paused_reason, _i.c.paused_at).where(
            _i.c.instance_id.in_(list(instance_ids))
        )
    )
    return {str(r[0]): SenderHealth(str(r[1]), r[2], r[3]) for r in rows}


def queued_targets(
    conn: Connection, campaign_id: int, sender: str | None, *, limit: int = 5000
) -> list[tuple[int, str]]:
    """``(delivery id, target)`` of the campaign's queued rows of ``sender`` (None: rows
    without a sender), at most ``limit``."""
    cond = _d.c.sender.is_(None) if sender is None else _d.c.sender == sender
    rows = conn.execute(
        select(_d.c.id, _d.c.target)
        .where(_d.c.campaign_id == campaign_id, _QUEUED, cond)
        .order_by(_d.c.id)
        .limit(limit)
    )
    return [(int(r[0]), str(r[1])) for r in rows]


def has_unassigned(conn: Connection, campaign_id: int) -> bool:
    """True when the campaign has queued rows without a sender (it was forgotten).

    Asked on every dispatcher tick: one probe of the partial ``ix_deliveries_unassigned``
    (migration 0023), whose predicate the WHERE states literally (:data:`_QUEUED` and
    ``sender IS NULL``), never a read of the campaign's queued rows."""
    return conn.execute(unassigned_probe(campaign_id)).first() is not None


def unassigned_probe(campaign_id: int) -> Select[tuple[int]]:
    """The statement of :func:`has_unassigned` (its plan is tested)."""
    return (
        select(_d.c.id)
        .where(_d.c.campaign_id == campaign_id, _QUEUED, _d.c.sender.is_(None))
        .limit(1)
    )


def reassign_queued(conn: Connection, moves: Sequence[tuple[int, str]]) -> int:
    """Give each ``(delivery id, sender)`` its new sender while the row is still queued."""
    if not moves:
        return 0
    result = conn.execute(
        update(_d)
        .where(_d.c.id == bindparam("row_id"), _d.c.state == states.QUEUED)
        .values(sender=bindparam("new_sender")),
        [{"row_id": i, "new_sender": s} for i, s in moves],
    )
    return int(result.rowcount or 0)


def mark_linked_by_send(
    conn: Connection,
    proofs: Sequence[tuple[str, datetime]],
    *,
    now: datetime,
    clears: Sequence[str],
) -> list[str]:
    """An accepted send proves the session is linked: each ``(instance id, when its send
    started)`` row becomes ``connected`` (gateways that post no connection events), and a
    pause whose reason starts with one of ``clears`` (the connection problems) is lifted.
    Returns the ids that were not connected before (newly linked), in ``proofs``' order.

    An unable state (:data:`UNABLE_STATES`) recorded after the send started (a drop or a
    logout meanwhile: ``state_at``) is newer than the proof and stays; ``gone`` stays
    gone. One read when every sender is already connected and unpaused (the usual batch)."""
    if not proofs:
        return []
    started = dict(proofs)
    unproven = conn.execute(
        select(_i.c.instance_id, _i.c.state).where(
            _i.c.instance_id.in_(list(started)),
            _i.c.state != GONE,
            or_(_i.c.state != CONNECTED, _i.c.paused_reason.is_not(None)),
        )
    )
    was = {str(r[0]): str(r[1]) for r in unproven}
    linked: list[str] = []
    for instance_id in [i for i in started if i in was]:
        since = started[instance_id]
        done = conn.execute(
            update(_i)
            .where(
                _i.c.instance_id == instance_id,
                _i.c.state != GONE,
                or_(_i.c.state != CONNECTED, _i.c.paused_reason.is_not(None)),
                or_(
                    _i.c.state.not_in(UNABLE_STATES),
                    _i.c.state_at.is_(None),
                    _i.c.state_at <= since,
                ),
            )
            .values(
                state=CONNECTED,
                state_at=now,
                updated_at=now,
                paused_reason=case(
                    (or_(*(_i.c.paused_reason.startswith(p) for p in clears)), None),
                    else_=_i.c.paused_reason,
                ),
            )
        )
        if done.rowcount and was[instance_id] != CONNECTED:
            linked.append(instance_id)
    return linked


def mark_unlinked_by_send(
    conn: Connection,
    instance_id: str,
    state: str,
    *,
    started: datetime,
    now: datetime,
    kept: Sequence[str],
) -> str | None:
    """A send that ``started`` then was refused because the session is not linked: record
    ``state`` (``logged_out``, ``waiting_scan``) unless the row's state is one of ``kept``;
    the state it had before. None when there is no row, or when its state was recorded
    after the send started (a reconnect meanwhile: the refusal is older news, decision 48
    in docs/architecture.md), and then nothing changes."""
    row = conn.execute(
        select(_i.c.state, _i.c.state_at).where(_i.c.instance_id == instance_id)
    ).first()
    if row is None or (row.state_at is not None and row.state_at > started):
        return None
    before = str(row.state)
    if before not in kept and before != state:
        conn.execute(
            update(_i)
            .where(_i.c.instance_id == instance_id)
            .values(state=state, state_at=now, updated_at=now)
        )
    return before


def set_webhook_registered(
    conn: Connection, instance_id: str, registered: bool, *, now: datetime
) -> None:
    """Record whether the instance's webhook points at gatecast (row created if missing)."""
    ensure(conn, [instance_id], now=now)
    conn.execute(
        update(_i)
        .where(_i.c.instance_id == instance_id)
        .values(webhook_url_registered=registered, updated_at=now)
    )


def mark_gone(conn: Connection, instance_id: str, reason: str, *, now: datetime) -> None:
    """State ``gone`` (the gateway no longer knows the id), paused with ``reason``
    unless already paused; its webhook no longer counts as registered."""
    ensure(conn, [instance_id], now=now)
    conn.execute(
        update(_i)
        .where(_i.c.instance_id == instance_id)
        .values(state=GONE, state_at=now, webhook_url_registered=False, updated_at=now)
    )
    pause(conn, instance_id, reason, now=now)


def webhook_registered(conn: Connection, instance_ids: Sequence[str]) -> dict[str, bool]:
    """``instance_id -> webhook_url_registered`` for the given ids (unknown ids absent)."""
    if not instance_ids:
        return {}
    rows = conn.execute(
        select(_i.c.instance_id, _i.c.webhook_url_registered).where(
            _i.c.instance_id.in_(list(instance_ids))
        )
    )
    return {str(r[0]): bool(r[1]) for r in rows}


def webhook_digests(conn: Connection, instance_ids: Sequence[str]) -> dict[str, str | None]:
    """``instance_id -> webhook_digest`` for the given ids (unknown ids absent)."""
    if not instance_ids:
        return {}
    rows = conn.execute(
        select(_i.c.instance_id, _i.c.webhook_digest).where(
            _i.c.instance_id.in_(list(instance_ids))
        )
    )
    return {str(r[0]): r[1] for r in rows}


def forget(conn: Connection, instance_id: str) -> int | None:
    """Delete the row of ``instance_id``; its queued deliveries lose their sender (the
    dispatcher hands them to the campaign's other senders). None when there was no row,
    else how many queued rows lost their sender. Sent rows keep it (reports)."""
    deleted = conn.execute(delete(_i).where(_i.c.instance_id == instance_id))
    if not deleted.rowcount:
        return None
    moved = conn.execute(
        update(_d)
        .where(_d.c.sender == instance_id, _d.c.state == states.QUEUED)
        .values(sender=None)
    )
    return int(moved.rowcount or 0)


def pause_state(conn: Connection, instance_ids: Sequence[str]) -> dict[str, str | None]:
    """``instance_id -> paused_reason`` for the given ids (missing ids are absent)."""
    if not instance_ids:
        return {}
    rows = conn.execute(
        select(_i.c.instance_id, _i.c.paused_reason).where(_i.c.instance_id.in_(list(instance_ids)))
    )
    return {str(r[0]): r[1] for r in rows}


def paused_with(
    conn: Connection, instance_ids: Sequence[str], reason: str
) -> dict[str, datetime | None]:
    """``instance_id -> paused_at`` of the given ids paused with exactly ``reason``."""
    if not instance_ids:
        return {}
    rows = conn.execute(
        select(_i.c.instance_id, _i.c.paused_at).where(
            _i.c.instance_id.in_(list(instance_ids)), _i.c.paused_reason == reason
        )
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


def _among(conn: Connection, instance_ids: Sequence[str]) -> ColumnElement[bool]:
    """``instance_id`` is one of ``instance_ids``: on PostgreSQL ``= ANY`` of one array
    parameter, where an ``IN`` list binds (and the server plans) one parameter per id:
    the dispatch thread reads its senders' pace state every tick, 500 of them for a
    campaign of 500 senders (half its CPU for that read)."""
    if conn.dialect.name == "postgresql":
        ids = bindparam("instance_ids", list(instance_ids), type_=ARRAY(String))
        return _i.c.instance_id == any_(ids)
    return _i.c.instance_id.in_(list(instance_ids))


def pace_state(
    conn: Connection, instance_ids: Sequence[str]
) -> dict[str, tuple[str | None, datetime | None]]:
    """``instance_id -> (paused_reason, next_send_at)`` in one read (missing ids absent):
    :func:`pause_state` and :func:`next_send_times` together."""
    if not instance_ids:
        return {}
    rows = conn.execute(
        select(_i.c.instance_id, _i.c.paused_reason, _i.c.next_send_at).where(
            _among(conn, instance_ids)
        )
    )
    return {str(r[0]): (r[1], r[2]) for r in rows}


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


def reserve_slots(conn: Connection, instance_ids: Sequence[str], *, now: datetime) -> list[str]:
    """Take the send slot of every instance in ``instance_ids`` that is free at ``now``
    (unpaused, slot due); one UPDATE for all, setting ``next_send_at = now`` until the
    caller sets the next slot (:func:`set_next_sends`). Returns the ids taken.

    On PostgreSQL the instance rows another transaction holds are skipped (``FOR UPDATE
    SKIP LOCKED``): another worker is claiming for them, and workers never wait for or
    deadlock on each other's claims.
    """
    if not instance_ids:
        return []
    free = and_(
        _i.c.instance_id.in_(list(instance_ids)),
        _i.c.paused_reason.is_(None),
        or_(_i.c.next_send_at.is_(None), _i.c.next_send_at <= now),
    )
    stmt = update(_i).where(free)
    if conn.dialect.name == "postgresql":
        unlocked = select(_i.c.instance_id).where(free).with_for_update(skip_locked=True)
        stmt = stmt.where(_i.c.instance_id.in_(unlocked.scalar_subquery()))
    rows = conn.execute(stmt.values(next_send_at=now).returning(_i.c.instance_id))
    return sorted(str(r[0]) for r in rows)


def set_next_sends(conn: Connection, slots: Sequence[tuple[str, datetime]]) -> None:
    """Persist several instances' next send slots (``(instance_id, at)``); one
    executemany."""
    if not slots:
        return
    stmt = (
        update(_i).where(_i.c.instance_id == bindparam("iid")).values(next_send_at=bindparam("at"))
    )
    conn.execute(stmt, [{"iid": iid, "at": at} for iid, at in slots])


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


__all__ = [
    "CONNECTED",
    "GONE",
    "LINKED_STATES",
    "UNABLE_STATES",
    "UNCONFIRMED",
    "SenderHealth",
    "ensure",
    "forget",
    "has_unassigned",
    "health",
    "held_ids",
    "linked_ids",
    "linked_states",
    "mark_gone",
    "mark_linked_by_send",
    "mark_state",
    "mark_unlinked_by_send",
    "move_waiting_deliveries",
    "next_send_times",
    "pause",
    "pause_state",
    "paused_with",
    "queued_targets",
    "reassign_queued",
    "reconnect_candidates",
    "reserve_slot",
    "resume",
    "resume_connection_pause",
    "set_next_send",
    "set_webhook_registered",
    "unassigned_probe",
    "usable_ids",
    "webhook_digests",
    "webhook_registered",
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
    values: dict[str, object] = {"state": state[:32], "state_at": now, "updated_at": now}
    if phone:
        values["phone"] = phone[:32]
    if webhook_registered is not None:
        values["webhook_url_registered"] = webhook_registered
    conn.execute(update(_i).where(_i.c.instance_id == instance_id).values(**values))


def reconnect_candidates(conn: Connection, *, dropped: str, refused: str) -> list[str]:
    """The instances a reconnect may heal, in id order: state ``dropped`` (a connection
    event said so), or ``logged_out`` by a send's refusal whose pause starts with
    ``refused`` (a drop or a logout: the reconnect tells, decision 48)."""
    rows = conn.execute(
        select(_i.c.instance_id)
        .where(
            or_(
                _i.c.state == dropped,
                and_(_i.c.state == "logged_out", _i.c.paused_reason.startswith(refused)),
            )
        )
        .order_by(_i.c.instance_id)
    )
    return [str(r[0]) for r in rows]


def held_ids(conn: Connection) -> set[str]:
    """The instance ids gatecast holds: a row that is not ``gone`` (webhook events of
    any other id are refused)."""
    return {str(r[0]) for r in conn.execute(select(_i.c.instance_id).where(_i.c.state != GONE))}


def resume_connection_pause(
    conn: Connection, instance_id: str, *, now: datetime, reasons: tuple[str, ...]
) -> str | None:
    """Clear the pause of ``instance_id`` when its reason starts with one of ``reasons``
    (the connection problems). Returns the reason cleared, or None."""
    row = conn.execute(select(_i.c.paused_reason).where(_i.c.instance_id == instance_id)).first()
    reason = row[0] if row else None
    if reason is None or not str(reason).startswith(reasons):
        return None
    conn.execute(
        update(_i)
        .where(_i.c.instance_id == instance_id, _i.c.paused_reason == reason)
        .values(paused_reason=None, updated_at=now)
    )
    return str(reason)


def move_waiting_deliveries(
    conn: Connection, old_id: str, new_id: str, *, waiting: Sequence[str]
) -> int:
    """Re-point deliveries still waiting to go (in the states ``waiting``) from ``old_id``
    to ``new_id``; one bulk UPDATE. Returns how many rows moved."""
    result = conn.execute(
        update(_d).where(_d.c.sender == old_id, _d.c.state.in_(list(waiting))).values(sender=new_id)
    )
    return int(result.rowcount or 0)
