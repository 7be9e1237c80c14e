"""SQL for sender care: warm-up use, the health score's row, known chats, the 463 lock.

Everything a claim reads here is one row per sender (``instances``) or one primary-key
probe per claimed row (``sender_chats``): the cost never follows the history.
The rules live in ``scheduler/warmup.py``, ``scheduler/health.py`` and
``scheduler/timelock.py``; this module only runs their statements.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
    bindparam,
    case,
    exists,
    func,
    insert,
    select,
    update,
)

from storage import states, tables
from storage.dialect import dialect_insert, insert_for
from storage.queries.moves import may_move
from storage.queries.sender_values import CHUNK, pairs_cte
from storage.states import Move

_i = tables.instances
_c = tables.sender_chats
_h = tables.sender_health_changes
_d = tables.deliveries
_e = tables.status_events

#: the group target kind of a delivery (groups flow under a 463 timelock)
GROUP_KIND = "group"


@dataclass(frozen=True)
class CareRow:
    """A sender's care columns, as one claim (or a face) reads them."""

    instance_id: str
    created_at: datetime
    paused_reason: str | None
    warmup_off: bool
    warmup_start_at: datetime | None
    warmup_ramp: str | None
    warmup_day_key: str | None
    warmup_used: float
    health_score: float
    health_at: datetime | None
    health_level: str
    health_resume_at: datetime | None
    lock_until: datetime | None
    lock_parked: bool


_CARE_COLUMNS = (
    _i.c.instance_id,
    _i.c.created_at,
    _i.c.paused_reason,
    _i.c.warmup_off,
    _i.c.warmup_start_at,
    _i.c.warmup_ramp,
    _i.c.warmup_day_key,
    _i.c.warmup_used,
    _i.c.health_score,
    _i.c.health_at,
    _i.c.health_level,
    _i.c.health_resume_at,
    _i.c.lock_until,
    _i.c.lock_parked,
)


def _care(row: Any) -> CareRow:
    return CareRow(
        instance_id=str(row[0]),
        created_at=row[1],
        paused_reason=row[2],
        warmup_off=bool(row[3]),
        warmup_start_at=row[4],
        warmup_ramp=row[5],
        warmup_day_key=row[6],
        warmup_used=float(row[7] or 0.0),
        health_score=float(row[8] or 0.0),
        health_at=row[9],
        health_level=str(row[10] or "low"),
        health_resume_at=row[11],
        lock_until=row[12],
        lock_parked=bool(row[13]),
    )


def care_rows(
    conn: Connection, instance_ids: Sequence[str], *, lock: bool = False
) -> dict[str, CareRow]:
    """``instance_id -> CareRow`` of the given ids (unknown ids absent); one read.
    ``lock``: the rows stay locked to this transaction (PostgreSQL ``FOR UPDATE``; SQLite's
    writers take turns anyway), so a read-modify-write of the score loses no signal."""
    if not instance_ids:
        return {}
    stmt = select(*_CARE_COLUMNS).where(_i.c.instance_id.in_(list(instance_ids)))
    if lock:
        stmt = stmt.with_for_update()
    return {str(r[0]): _care(r) for r in conn.execute(stmt)}


def care_rows_where_level_or_lock(conn: Connection) -> list[CareRow]:
    """The senders whose level is not ``low`` or that hold a lock (the few the sweep
    looks after: decay, cool-down ends, lock ends)."""
    rows = conn.execute(
        select(*_CARE_COLUMNS).where((_i.c.health_level != "low") | _i.c.lock_until.is_not(None))
    )
    return [_care(r) for r in rows]


# -- warm-up -----------------------------------------------------------------------------


def add_warmup_use(conn: Connection, uses: Sequence[tuple[str, str, float]]) -> None:
    """Add ``units`` to each ``(instance_id, day key, units)``'s use of that local day (a
    use of another day starts again from these units); one executemany."""
    if not uses:
        return
    same_day = _i.c.warmup_day_key == bindparam("k")
    stmt = (
        update(_i)
        .where(_i.c.instance_id == bindparam("iid"))
        .values(
            warmup_used=case((same_day, _i.c.warmup_used + bindparam("u")), else_=bindparam("u")),
            warmup_day_key=bindparam("k"),
        )
    )
    conn.execute(stmt, [{"iid": i, "k": k, "u": u} for i, k, u in uses])


def set_warmup(
    conn: Connection,
    instance_id: str,
    *,
    off: bool,
    start_at: datetime | None,
    ramp: str | None,
    now: datetime,
) -> bool:
    """Store a sender's warm-up override; False when there is no such instance."""
    result = conn.execute(
        update(_i)
        .where(_i.c.instance_id == instance_id)
        .values(warmup_off=off, warmup_start_at=start_at, warmup_ramp=ramp, updated_at=now)
    )
    return bool(result.rowcount == 1)


# -- known chats -------------------------------------------------------------------------


def chats_of(conn: Connection, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bool]:
    """``(sender, target) -> known`` for the pairs the sender has messaged or heard from
    (absent: never); one primary-key probe per pair, all in one statement per
    :data:`storage.queries.sender_values.CHUNK` pairs (a round trip per sender cost the
    dispatch thread a statement per paced send)."""
    unique = list(dict.fromkeys(pairs))
    out: dict[tuple[str, str], bool] = {}
    for start in range(0, len(unique), CHUNK):
        wanted = pairs_cte(unique[start : start + CHUNK])
        rows = conn.execute(
            select(_c.c.instance_id, _c.c.target, _c.c.known_at).join(
                wanted,
                and_(_c.c.instance_id == wanted.c.sender, _c.c.target == wanted.c.target),
            )
        )
        out.update({(str(r[0]), str(r[1])): r[2] is not None for r in rows})
    return out


def remember_sent(conn: Connection, pairs: Sequence[tuple[str, str]], *, now: datetime) -> None:
    """The sender messaged these targets (the first time is kept). Rows go in key order,
    as in :func:`mark_known`: two transactions writing the same chats in different orders
    would each wait for the other's insert (a deadlock, seen on PostgreSQL)."""
    unique = sorted(set(pairs))
    if not unique:
        return
    stmt = dialect_insert(conn, _c).on_conflict_do_nothing(
        index_elements=[_c.c.instance_id, _c.c.target]
    )
    conn.execute(stmt, [{"instance_id": s, "target": t, "first_sent_at": now} for s, t in unique])


def mark_known(conn: Connection, pairs: Sequence[tuple[str, str]], *, now: datetime) -> None:
    """These targets have a chat with the sender (a message delivered there, or theirs);
    in key order (:func:`remember_sent`)."""
    unique = sorted(set(pairs))
    if not unique:
        return
    rows = [{"instance_id": s, "target": t, "known_at": now} for s, t in unique]
    conn.execute(_mark_known(conn.dialect.name), rows)


@functools.cache
def _mark_known(dialect: str) -> Any:
    """:func:`mark_known`'s upsert, built once per dialect (every webhook batch runs it)."""
    stmt = insert_for(dialect, _c)
    return stmt.on_conflict_do_update(
        index_elements=[_c.c.instance_id, _c.c.target],
        set_={"known_at": func.coalesce(_c.c.known_at, stmt.excluded.known_at)},
    )


# -- the health score --------------------------------------------------------------------


def set_health(
    conn: Connection,
    instance_id: str,
    *,
    score: float,
    at: datetime,
    level: str,
    resume_at: datetime | None,
) -> None:
    """Store a sender's score as of ``at``, its level and its cool-down end."""
    conn.execute(
        update(_i)
        .where(_i.c.instance_id == instance_id)
        .values(health_score=score, health_at=at, health_level=level, health_resume_at=resume_at)
    )


def set_health_each(
    conn: Connection, scores: Sequence[tuple[str, float, datetime | None, str]], *, at: datetime
) -> None:
    """:func:`set_health` for several senders, ``(instance_id, score, resume_at, level)``
    each, as of ``at``: one statement (executemany), in key order."""
    if not scores:
        return
    stmt = (
        update(_i)
        .where(_i.c.instance_id == bindparam("iid"))
        .values(
            health_score=bindparam("score"),
            health_at=bindparam("at", type_=_i.c.health_at.type),
            health_level=bindparam("level"),
            health_resume_at=bindparam("resume_at", type_=_i.c.health_resume_at.type),
        )
    )
    conn.execute(
        stmt,
        [
            {"iid": i, "score": score, "at": at, "level": level, "resume_at": resume}
            for i, score, resume, level in sorted(scores)
        ],
    )


def pause_for_health(conn: Connection, instance_id: str, reason: str, *, now: datetime) -> bool:
    """Pause the sender with a health ``reason`` unless another reason paused it (a
    health pause is replaced: high becomes critical); False when nothing changed."""
    result = conn.execute(
        update(_i)
        .where(
            _i.c.instance_id == instance_id,
            _i.c.paused_reason.is_(None) | _i.c.paused_reason.startswith("health "),
        )
        .values(paused_reason=reason[:500], paused_at=now, updated_at=now)
    )
    return bool(result.rowcount == 1)


def reset_health(conn: Connection, instance_id: str, *, now: datetime, reason: str) -> None:
    """A person resumed the sender: its score starts again from 0 (the change logged)."""
    row = care_rows(conn, [instance_id]).get(instance_id)
    if row is None:
        return
    if row.health_level != "low":
        log_change(
            conn,
            instance_id,
            at=now,
            level_from=row.health_level,
            level_to="low",
            score=0.0,
            reason=reason,
        )
    set_health(conn, instance_id, score=0.0, at=now, level="low", resume_at=None)


def log_change(
    conn: Connection,
    instance_id: str,
    *,
    at: datetime,
    level_from: str,
    level_to: str,
    score: float,
    reason: str,
) -> None:
    """One row of the log of level changes."""
    conn.execute(
        insert(_h).values(
            instance_id=instance_id,
            at=at,
            level_from=level_from,
            level_to=level_to,
            score=score,
            reason=reason[:500],
        )
    )


def changes_by_level(conn: Connection) -> dict[str, int]:
    """How many level changes went to each level (the metric's counter)."""
    rows = conn.execute(select(_h.c.level_to, func.count()).group_by(_h.c.level_to))
    return {str(r[0]): int(r[1]) for r in rows}


def recent_changes(conn: Connection, instance_id: str, *, limit: int = 5) -> list[dict[str, Any]]:
    """The sender's latest level changes, newest first."""
    rows = conn.execute(
        select(_h.c.at, _h.c.level_from, _h.c.level_to, _h.c.score, _h.c.reason)
        .where(_h.c.instance_id == instance_id)
        .order_by(_h.c.id.desc())
        .limit(limit)
    )
    return [dict(r._mapping) for r in rows]


_COUNTERS = {
    "disconnect": _i.c.signal_disconnects,
    "logout": _i.c.signal_logouts,
    "reply": _i.c.signal_replies,
}


def count_signal(conn: Connection, instance_id: str, kind: str) -> None:
    """The webhook counts a signal (``disconnect``, ``logout``, ``reply``) on the row; the
    dispatcher folds it into the score (:func:`take_signals`)."""
    column = _COUNTERS[kind]
    conn.execute(update(_i).where(_i.c.instance_id == instance_id).values({column: column + 1}))


def take_signals(conn: Connection) -> dict[str, dict[str, int]]:
    """The counted signals of every sender that has some, taken off the rows."""
    cols = list(_COUNTERS.values())
    rows = conn.execute(
        select(_i.c.instance_id, *cols).where((cols[0] > 0) | (cols[1] > 0) | (cols[2] > 0))
    ).all()
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        counts = {kind: int(row[n + 1]) for n, kind in enumerate(_COUNTERS)}
        taken = conn.execute(  # taken once: another worker's sweep finds them gone
            update(_i)
            .where(
                _i.c.instance_id == row[0],
                *(_COUNTERS[k] >= v for k, v in counts.items()),
            )
            .values({_COUNTERS[k]: _COUNTERS[k] - v for k, v in counts.items()})
        )
        if taken.rowcount == 1:
            out[str(row[0])] = counts
    return out


def coded_events_since(
    conn: Connection, *, floor: datetime
) -> dict[str, list[tuple[str, str, datetime]]]:
    """Per sender: its status events with an error code received after it last looked
    (``signals_seen_at``, not before ``floor``): ``(error code, message id, received)``;
    the mark moves past them (each event is read by one sweep).
    One statement finds the senders with new events (a probe of
    ``ix_status_events_instance_code`` per sender), then one range of it per such sender:
    a cost in senders and new events, never in history."""

    def newer(since: Any) -> Any:
        return and_(
            _e.c.instance_id == _i.c.instance_id,
            _e.c.error_code.is_not(None),
            _e.c.received_at > since,
        )

    since = func.coalesce(_i.c.signals_seen_at, floor)
    fresh = conn.execute(
        select(_i.c.instance_id, _i.c.signals_seen_at).where(
            exists().where(newer(since), _e.c.received_at > floor)
        )
    ).all()
    out: dict[str, list[tuple[str, str, datetime]]] = {}
    for instance_id, seen in fresh:
        start = floor if seen is None or seen < floor else seen
        rows = conn.execute(
            select(_e.c.error_code, _e.c.message_id, _e.c.received_at)
            .where(
                _e.c.instance_id == instance_id,
                _e.c.error_code.is_not(None),
                _e.c.received_at > start,
            )
            .order_by(_e.c.received_at)
        ).all()
        if not rows:
            continue
        # read once: the mark moves only from where this read began (another worker's
        # sweep that read the same events finds it moved and counts nothing)
        same = _i.c.signals_seen_at.is_(None) if seen is None else _i.c.signals_seen_at == seen
        moved = conn.execute(
            update(_i)
            .where(_i.c.instance_id == instance_id, same)
            .values(signals_seen_at=max(r[2] for r in rows))
        )
        if moved.rowcount == 1:
            out[str(instance_id)] = [(str(r[0]), str(r[1]), r[2]) for r in rows]
    return out


# -- the 463 timelock --------------------------------------------------------------------


def set_lock(conn: Connection, instance_id: str, until: datetime | None) -> None:
    """Start (or move) the sender's timelock until ``until`` (None: lifted); its cold
    rows are parked again at the next claim."""
    conn.execute(
        update(_i)
        .where(_i.c.instance_id == instance_id)
        .values(lock_until=until, lock_parked=False)
    )


def park_cold(conn: Connection, instance_id: str, until: datetime) -> int:
    """Move the sender's queued rows to cold contacts (no known chat, not a group) to
    ``until``, and note the lock as parked. Once per lock: a walk over the sender's
    queued rows; claims then probe only the rows they take."""
    known = exists().where(
        _c.c.instance_id == instance_id,
        _c.c.target == _d.c.target,
        _c.c.known_at.is_not(None),
    )
    moved = conn.execute(
        update(_d)
        .where(
            _d.c.sender == instance_id,
            _d.c.state == states.QUEUED,
            _d.c.target_kind != GROUP_KIND,
            _d.c.due_at < until,
            ~known,
        )
        .values(due_at=until)
    )
    conn.execute(update(_i).where(_i.c.instance_id == instance_id).values(lock_parked=True))
    return int(moved.rowcount or 0)


def requeue_refused(
    conn: Connection,
    instance_id: str,
    message_ids: Sequence[str],
    *,
    move: Move,
    until: datetime,
    error: str,
) -> int:
    """The sender's deliveries whose messages the gateway refused under a timelock
    ``move`` (back to ``queued``), due at the lock's end (by message id: an indexed
    probe each)."""
    if not message_ids:
        return 0
    result = conn.execute(
        update(_d)
        .where(
            _d.c.message_id.in_(list(message_ids)),
            _d.c.sender == instance_id,
            may_move(move),
        )
        .values(
            state=move.to,
            due_at=until,
            error=error,
            error_code=None,
            failed_at=None,
            message_id=None,
            sent_at=None,
        )
    )
    return int(result.rowcount or 0)


def requeue_parked(
    conn: Connection, rows: Sequence[tuple[int, datetime]], *, move: Move, error: str
) -> None:
    """Claimed rows to cold contacts ``move`` (back to ``queued``, attempt refunded)
    until the lock's end."""
    if not rows:
        return
    stmt = (
        update(_d)
        .where(_d.c.id == bindparam("b_id"), may_move(move))
        .values(
            state=move.to,
            due_at=bindparam("b_due"),
            attempts=_d.c.attempts - 1,
            lease_until=None,
            error=error,
        )
    )
    conn.execute(stmt, [{"b_id": i, "b_due": d} for i, d in rows])


__all__ = [
    "GROUP_KIND",
    "CareRow",
    "add_warmup_use",
    "care_rows",
    "care_rows_where_level_or_lock",
    "changes_by_level",
    "chats_of",
    "coded_events_since",
    "count_signal",
    "log_change",
    "mark_known",
    "park_cold",
    "pause_for_health",
    "recent_changes",
    "remember_sent",
    "requeue_parked",
    "requeue_refused",
    "reset_health",
    "set_health",
    "set_lock",
    "set_warmup",
    "take_signals",
]
