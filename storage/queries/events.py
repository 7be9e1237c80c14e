"""Webhook event statements: status-event dedupe and application, inbound messages.

Status events are stored once per (message_id, status) (``ON CONFLICT DO NOTHING``) and
applied to deliveries by message id with guarded bulk UPDATEs, so a status only ever
moves a row forward (DESIGN.md decision 4) whatever the order and however many
duplicates arrive. Every function leaves the transaction to its caller.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Connection,
    Table,
    and_,
    bindparam,
    case,
    func,
    literal,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement

from storage import states
from storage.models import Campaign, Contact, Delivery, InboundMessage, Instance, StatusEvent

_d: Table = Delivery.__table__  # type: ignore[attr-defined]
_e: Table = StatusEvent.__table__  # type: ignore[attr-defined]
_in: Table = InboundMessage.__table__  # type: ignore[attr-defined]
_i: Table = Instance.__table__  # type: ignore[attr-defined]
_c: Table = Contact.__table__  # type: ignore[attr-defined]
_campaigns: Table = Campaign.__table__  # type: ignore[attr-defined]

#: ids per IN (...) lookup
BATCH = 1000
#: message ids per set-based apply (their event ids go into IN lists too)
APPLY_BATCH = 500
#: replies are matched against the deliveries of this many most recent campaigns
REPLY_CAMPAIGN_WINDOW = 50
#: how far a gateway's message time may trail our clock: its stamps are whole seconds
#: and its clock is not ours (a delivery sent later than reply time + this is not a match)
REPLY_CLOCK_SKEW = timedelta(minutes=5)

#: states a row may be in for each progress status to move it there
_FORWARD_FROM: dict[str, tuple[str, ...]] = {
    states.SENT: (states.QUEUED, states.SENDING, states.UNKNOWN),
    states.DELIVERED: (states.QUEUED, states.SENDING, states.UNKNOWN, states.SENT),
    states.READ: (states.QUEUED, states.SENDING, states.UNKNOWN, states.SENT, states.DELIVERED),
}
#: a failure only lands on a row that has not progressed past sent
FAILED_FROM = (states.SENDING, states.SENT, states.UNKNOWN)
#: paused_reason prefixes that a reconnect clears
CONNECTION_PAUSE_REASONS = ("relogin_required", "not_activated", "disconnected")


def _state_in(allowed: Sequence[str]) -> ColumnElement[bool]:
    """``state IN (...)`` with inline constants (one cached statement for every batch)."""
    return or_(*(_d.c.state == literal_column(f"'{s}'") for s in allowed))


def _insert(conn: Connection, table: Table) -> Any:
    return _insert_for(conn.dialect.name, table)


def _insert_for(dialect: str, table: Table) -> Any:
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported database: {dialect}")


def _chunks(items: Sequence[Any], size: int = BATCH) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def insert_status_events(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Store status events; a (message_id, status) already stored is dropped."""
    if not rows:
        return
    conn.execute(_insert_status_event(conn.dialect.name), [dict(r) for r in rows])


@functools.cache
def _insert_status_event(dialect: str) -> Any:
    """``INSERT ... ON CONFLICT (message_id, status) DO NOTHING``, built once per dialect."""
    return _insert_for(dialect, _e).on_conflict_do_nothing(index_elements=["message_id", "status"])


def unapplied_matching(conn: Connection, *, since: datetime, limit: int) -> list[str]:
    """Message ids of unapplied events received since ``since`` that now match a delivery."""
    rows = conn.execute(
        select(_e.c.message_id)
        .join(_d, _d.c.message_id == _e.c.message_id)
        .where(_e.c.applied.is_(False), _e.c.received_at >= since)
        .distinct()
        .limit(limit)
    ).scalars()
    return [str(m) for m in rows]


_ev = _e.alias("ev")
_ids: Any = bindparam("ids", expanding=True)
#: the events (``ids``) joined to their deliveries (``dids``, their primary keys: so every
#: planner starts from the few rows concerned, never from ``state`` over the whole table)
_match = and_(
    _d.c.id.in_(bindparam("dids", expanding=True)),
    _ev.c.id.in_(_ids),
    _ev.c.message_id == _d.c.message_id,
)


#: each progress status's own time column (sent has none: ``sent_at`` is set where missing)
_OWN_COLUMN = {states.SENT: None, states.DELIVERED: "delivered_at", states.READ: "read_at"}


def _progress_statement(status: str) -> Any:
    """One UPDATE moving the events' (``ids``) deliveries forward to ``status``.

    Rows still below ``status`` move up, with every time up to it set where missing. The
    status's own time column also takes an earlier event time over a later one already
    stored, whatever the row's state (events arrive in any order). All of it in one
    statement: every SET expression reads the row as it was.
    """
    at = _ev.c.occurred_at
    forward = _state_in(_FORWARD_FROM[status])
    times = ["sent_at", "delivered_at", "read_at"]
    times = times[: times.index(_OWN_COLUMN[status] or "sent_at") + 1]
    values: dict[str, Any] = {"state": case((forward, literal(status)), else_=_d.c.state)}
    for name in times:
        col = _d.c[name]
        if name == _OWN_COLUMN[status]:
            values[name] = case((and_(forward, col.is_(None)), at), (col > at, at), else_=col)
        else:
            values[name] = case((forward, func.coalesce(col, at)), else_=col)
    own = _OWN_COLUMN[status]
    moves = forward if own is None else or_(forward, _d.c[own] > at)
    return update(_d).where(_match, moves).values(values)


#: statements built once (SQLAlchemy then reuses their compiled form for every batch)
_PROGRESS = {s: _progress_statement(s) for s in (states.SENT, states.DELIVERED, states.READ)}
_FAILED = (
    update(_d)
    .where(_match, _state_in(FAILED_FROM))
    .values(
        state=states.FAILED,
        failed_at=_ev.c.occurred_at,
        error_code=_ev.c.error_code,
        error=case(
            (
                _ev.c.error_code.is_not(None),
                literal("failed by the gateway (code ") + _ev.c.error_code + literal(")"),
            ),
            else_=literal("failed by the gateway"),
        ),
        lease_until=None,
    )
)
#: ``coalesce(applied)``, not ``applied``: the lookup must go through the message ids
#: (uq_status_event), never scan the ``applied`` index over every event still unapplied
#: (status events of messages that other tools sent through the same instance never match
#: a delivery and stay unapplied for good)
_UNAPPLIED = (
    select(_e.c.id, _e.c.status, _d.c.id)
    .join(_d, _d.c.message_id == _e.c.message_id)
    .where(
        _e.c.message_id.in_(bindparam("mids", expanding=True)),
        func.coalesce(_e.c.applied, True).is_(False),
    )
)
_MARK_APPLIED = update(_e).where(_e.c.id.in_(_ids)).values(applied=True)


def apply_unapplied(conn: Connection, message_ids: Sequence[str]) -> int:
    """Apply the stored, unapplied status events of ``message_ids`` to their deliveries.

    Set-based: per chunk of ids one ``SELECT`` of the events that match a delivery, then one
    ``UPDATE ... FROM status_events`` per status present (progress in rank order, so a
    delivered or read event beats a failed one), then those events (by id: never one that
    committed meanwhile) are flagged applied. Forward only and idempotent. Returns how
    many events were applied; the transaction is the caller's.
    """
    applied = 0
    for chunk in _chunks(sorted(set(message_ids)), APPLY_BATCH):
        found = conn.execute(_UNAPPLIED, {"mids": list(chunk)}).all()
        if not found:
            continue
        by_status: dict[str, dict[str, list[int]]] = {}
        for event_id, status, delivery_id in found:
            params = by_status.setdefault(status, {"ids": [], "dids": []})
            params["ids"].append(int(event_id))
            params["dids"].append(int(delivery_id))
        for status, statement in _PROGRESS.items():  # rank order
            if status in by_status:
                conn.execute(statement, by_status[status])
        if states.FAILED in by_status:
            conn.execute(_FAILED, by_status[states.FAILED])
        ids = sorted({int(row[0]) for row in found})
        conn.execute(_MARK_APPLIED, {"ids": ids})
        applied += len(ids)
    return applied


def existing_inbound(conn: Connection, message_ids: Sequence[str]) -> set[str]:
    """The inbound message ids already stored among ``message_ids``."""
    out: set[str] = set()
    for chunk in _chunks(sorted(set(message_ids))):
        out.update(
            conn.execute(select(_in.c.message_id).where(_in.c.message_id.in_(chunk))).scalars()
        )
    return out


def contact_ids_by_phone(conn: Connection, phones: Sequence[str]) -> dict[str, int]:
    """Contact ids of the E.164 ``phones`` that are known."""
    out: dict[str, int] = {}
    for chunk in _chunks(sorted(set(phones))):
        for phone, cid in conn.execute(select(_c.c.phone, _c.c.id).where(_c.c.phone.in_(chunk))):
            out[str(phone)] = int(cid)
    return out


def insert_inbound(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Store inbound messages; an id already stored is dropped."""
    if not rows:
        return
    stmt = _insert(conn, _in).on_conflict_do_nothing(index_elements=["message_id"])
    conn.execute(stmt, [dict(r) for r in rows])


def record_reply(
    conn: Connection, phone: str, text: str, at: datetime, *, received_at: datetime
) -> bool:
    """Attach a reply to the newest delivery to ``phone`` that it can answer.

    ``at`` is the gateway's time of the incoming message (whole seconds of the
    gateway's clock), ``received_at`` when gatecast received it (our clock). Candidates
    are deliveries sent no later than ``at + REPLY_CLOCK_SKEW`` (so a message sent after
    the reply is never credited with it, while a stamp truncated to the second or a
    gateway clock running behind ours still matches), and rows in flight (``sending``:
    the reply beat the dispatcher recording the send), which count as the newest.
    ``replied_at`` is ``at`` when it lies between the send and ``received_at``, else
    ``received_at`` (a truncated or skewed stamp says nothing better). Only the most recent
    campaigns are searched (the (campaign_id, target) index); returns False when no
    delivery matches or it already has a reply.
    """
    recent = (
        select(_campaigns.c.id)
        .order_by(_campaigns.c.id.desc())
        .limit(REPLY_CAMPAIGN_WINDOW)
        .scalar_subquery()
    )
    latest = at + REPLY_CLOCK_SKEW
    target = conn.execute(
        select(_d.c.id, _d.c.sent_at)
        .where(
            _d.c.campaign_id.in_(recent),
            _d.c.target == phone,
            or_(
                and_(_d.c.sent_at.is_not(None), _d.c.sent_at <= latest),
                and_(_d.c.sent_at.is_(None), _d.c.state == states.SENDING),
            ),
        )
        .order_by(
            case((_d.c.sent_at.is_(None), 0), else_=1),
            _d.c.sent_at.desc(),
            _d.c.id.desc(),
        )
        .limit(1)
    ).first()
    if target is None:
        return False
    plausible = at <= received_at and (target.sent_at is None or target.sent_at <= at)
    replied_at = at if plausible else received_at
    result = conn.execute(
        update(_d)
        .where(_d.c.id == target.id, _d.c.replied_at.is_(None))
        .values(replied_at=replied_at, reply_text=text[:4000])
    )
    return bool(result.rowcount)


def set_instance_state(
    conn: Connection, instance_id: str, state: str, *, phone: str | None, now: datetime
) -> bool:
    """Record an instance's connection state; "connected" clears a connection pause."""
    values: dict[str, Any] = {"state": state[:32], "updated_at": now}
    if phone:
        values["phone"] = phone[:32]
    result = conn.execute(update(_i).where(_i.c.instance_id == instance_id).values(**values))
    if state == "connected":
        conn.execute(
            update(_i)
            .where(
                _i.c.instance_id == instance_id,
                or_(*(_i.c.paused_reason.startswith(p) for p in CONNECTION_PAUSE_REASONS)),
            )
            .values(paused_reason=None, updated_at=now)
        )
    return bool(result.rowcount)


__all__ = [
    "APPLY_BATCH",
    "CONNECTION_PAUSE_REASONS",
    "FAILED_FROM",
    "REPLY_CAMPAIGN_WINDOW",
    "REPLY_CLOCK_SKEW",
    "apply_unapplied",
    "contact_ids_by_phone",
    "existing_inbound",
    "insert_inbound",
    "insert_status_events",
    "record_reply",
    "set_instance_state",
    "unapplied_matching",
]
