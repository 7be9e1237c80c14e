"""Webhook event statements: status-event dedupe and application, inbound messages.

Status events are stored once per (message_id, status) (``ON CONFLICT DO NOTHING``) and
applied to deliveries by message id with guarded bulk UPDATEs, so a status only ever
moves a row forward (DESIGN.md decision 4) whatever the order and however many
duplicates arrive. The rules (which states a status moves a row from, the bounds of
its time, the reply window) are ``campaigns.delivery_lifecycle``'s, passed in; the
statements are built once per set of rules. Every function leaves the transaction to its
caller.

On SQLite the status-event statements (the webhook's hot path) run on the driver cursor
of the caller's connection, rendered once from the same SQLAlchemy constructs as the
PostgreSQL path, and driver errors are raised as SQLAlchemy's.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    Connection,
    Select,
    Table,
    and_,
    bindparam,
    case,
    delete,
    func,
    literal,
    literal_column,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import ColumnElement

from storage import states, tables
from storage.dialect import dialect_insert, insert_for

_d: Table = tables.deliveries
_e: Table = tables.status_events
_in: Table = tables.inbound_messages
_i: Table = tables.instances
_c: Table = tables.contacts
_campaigns: Table = tables.campaigns

#: ids per IN (...) lookup
BATCH = 1000
#: message ids per set-based apply (their event ids go into IN lists too)
APPLY_BATCH = 500


@dataclass(frozen=True)
class StatusRules:
    """How status events move deliveries (``campaigns.delivery_lifecycle.STATUS_RULES``).

    ``forward_from``: per progress status, in rank order, the states a row may be in to
    move there; ``failed_from``: the states a failure lands on; ``failed_error``: the
    error a failure records (the gateway's code follows in parentheses when it gave one);
    ``times``: per status, the states whose times bound its time from below (the first
    one set) and from above (see :func:`status_time`).
    """

    forward_from: tuple[tuple[str, tuple[str, ...]], ...]
    failed_from: tuple[str, ...]
    failed_error: str
    times: tuple[tuple[str, tuple[tuple[str, ...], tuple[str, ...]]], ...]
    #: (gateway code, the error recorded for it) for the codes with words of their own
    #: (``campaigns.failure_reasons.GATEWAY_CODE_ERRORS``); other codes: ``failed_error``
    code_errors: tuple[tuple[str, str], ...] = ()

    def bounds(self, status: str) -> tuple[Any, Any]:
        """``status``'s lower and upper time bounds as column expressions (or None)."""
        lower, upper = dict(self.times)[status]
        return _time_of(lower), _time_of(upper)


def _time_of(names: tuple[str, ...]) -> Any:
    """The time of the first of the states ``names`` that is set (None: no bound)."""
    cols = [_d.c[f"{name}_at"] for name in names]
    if not cols:
        return None
    return cols[0] if len(cols) == 1 else func.coalesce(*cols)


def _state_in(allowed: Sequence[str]) -> ColumnElement[bool]:
    """``state IN (...)`` with inline constants (one cached statement for every batch)."""
    return or_(*(_d.c.state == literal_column(f"'{s}'") for s in allowed))


def _chunks(items: Sequence[Any], size: int = BATCH) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def insert_status_events(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Store status events; a (message_id, status) already stored is dropped.

    On SQLite through the driver's ``executemany`` (see :func:`_sqlite_cursor`); the
    times must be timezone-aware there too (stored as :class:`storage.types.UTCDateTime`
    stores them).
    """
    if not rows:
        return
    if conn.dialect.name == "sqlite":
        times: dict[datetime, str] = {}  # a batch shares its received time, often its stamps
        with _sqlite_cursor(conn, _SQLITE_INSERT_EVENT) as cur:
            cur.executemany(_SQLITE_INSERT_EVENT, [_sqlite_event_row(r, times) for r in rows])
        return
    if conn.dialect.name == "postgresql":
        # one statement over arrays (unnest), not one INSERT per row in a pipeline: the
        # server's per-statement work is CPU on the receiver's machine too
        conn.exec_driver_sql(
            pg_insert_status_events_sql(conn.dialect), pg_status_event_columns(rows)
        )
        return
    conn.execute(_insert_status_event(conn.dialect.name), [dict(r) for r in rows])


_EVENT_COLUMNS = (
    "message_id",
    "instance_id",
    "chat",
    "status",
    "error_code",
    "occurred_at",
    "received_at",
    "applied",
)


@functools.cache
def pg_insert_status_events_sql(dialect: Dialect) -> str:
    """``INSERT ... SELECT * FROM unnest(arrays) ON CONFLICT DO NOTHING``, built once.

    psycopg ``%s`` placeholders, one array per column: :func:`pg_status_event_columns`.
    """
    types = [_e.c[c].type.compile(dialect) for c in _EVENT_COLUMNS]
    return (
        f"INSERT INTO {_e.name} ({', '.join(_EVENT_COLUMNS)}) "
        f"SELECT * FROM unnest({', '.join(f'%s::{t}[]' for t in types)}) "
        "ON CONFLICT (message_id, status) DO NOTHING"
    )


def pg_status_event_columns(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Any], ...]:
    """The parameters of :func:`pg_insert_status_events_sql`: one list per column."""
    for row in rows:
        for name in ("occurred_at", "received_at"):
            if row[name].tzinfo is None:
                raise ValueError("naive datetime refused: pass a timezone-aware (UTC) datetime")
    return tuple(
        [bool(r.get(c)) if c == "applied" else r.get(c) for r in rows] for c in _EVENT_COLUMNS
    )


@functools.cache
def _insert_status_event(dialect: str) -> Any:
    """``INSERT ... ON CONFLICT (message_id, status) DO NOTHING``, built once per dialect."""
    return insert_for(dialect, _e).on_conflict_do_nothing(index_elements=["message_id", "status"])


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


def status_time(low: Any = None, high: Any = None) -> ColumnElement[Any]:
    """The time a status event (``ev``) gives its state, in SQL (the bounds per status
    are the lifecycle's, :attr:`StatusRules.times`).

    The gateway's own stamp (``occurred_at``: the receipt time when it gave none) when it
    is plausible: not after the event's receipt (``received_at``), not before ``low``,
    the time of the state before (a gateway stamps whole seconds of its own clock, so a
    stamp can fall before the send it follows), not after ``high``, the time of a later
    state already recorded (a ``read`` that came before its ``delivered``). Else the
    receipt time, kept within ``[low, high]``. A NULL bound bounds nothing. So sent_at <=
    delivered_at <= read_at whatever order the events arrive in. One flat ``CASE``.
    """
    at, received = _ev.c.occurred_at, _ev.c.received_at
    plausible = [at <= received]
    if low is not None:
        plausible.append(func.coalesce(low, at) <= at)
    if high is not None:
        plausible.append(at <= func.coalesce(high, at))
    whens: list[tuple[Any, Any]] = [(and_(*plausible), at)]
    if low is not None:
        whens.append((received < low, low))  # NULL low: the condition is NULL, not true
    if high is not None:
        whens.append((received > high, high))
    return case(*whens, else_=received)


def _earliest(col: Any, t: Any, forward: ColumnElement[bool]) -> Any:
    """A status's own time column: set on a row moving forward, else the earlier of the
    stored time and ``t`` (the earliest event of a status wins, in any order)."""
    return case((and_(forward, col.is_(None)), t), (col > t, t), else_=col)


def _progress_statement(
    status: str, rules: StatusRules, match: ColumnElement[bool] = _match
) -> Any:
    """One UPDATE moving the events' (``ids``) deliveries forward to ``status``.

    Rows still below ``status`` move up, with every time up to it set where missing (a
    ``read`` without a ``delivered`` sets both). The status's own time column also takes
    an earlier event time over a later one already stored, whatever the row's state
    (events arrive in any order). Times follow :func:`status_time`, bounded by the times
    of the states around them. All of it in one statement: every SET expression reads
    the row as it was.
    """
    sent, delivered, read = _d.c.sent_at, _d.c.delivered_at, _d.c.read_at
    forward = _state_in(dict(rules.forward_from)[status])
    values: dict[str, Any] = {"state": case((forward, literal(status)), else_=_d.c.state)}
    t = status_time(*rules.bounds(status))
    if status == states.SENT:  # sent has no column of its own: sent_at set where missing
        values["sent_at"] = case((forward, func.coalesce(sent, t)), else_=sent)
        return update(_d).where(match, forward).values(values)
    if status == states.DELIVERED:
        own = delivered
    else:
        own = read
        values["delivered_at"] = case((forward, func.coalesce(delivered, t)), else_=delivered)
    values["sent_at"] = case((forward, func.coalesce(sent, t)), else_=sent)
    values[own.name] = _earliest(own, t, forward)
    return update(_d).where(match, or_(forward, own > t)).values(values)


def _failed_statement(rules: StatusRules, match: ColumnElement[bool] = _match) -> Any:
    """One UPDATE failing the events' (``ids``) deliveries that have not progressed."""
    return (
        update(_d)
        .where(match, _state_in(rules.failed_from))
        .values(
            state=states.FAILED,
            failed_at=status_time(*rules.bounds(states.FAILED)),
            error_code=_ev.c.error_code,
            error=case(
                *((_ev.c.error_code == code, literal(error)) for code, error in rules.code_errors),
                (
                    _ev.c.error_code.is_not(None),
                    literal(f"{rules.failed_error} (code ") + _ev.c.error_code + literal(")"),
                ),
                else_=literal(rules.failed_error),
            ),
            lease_until=None,
        )
    )


@functools.cache
def _statements(rules: StatusRules) -> tuple[dict[str, Any], Any]:
    """The progress UPDATEs (rank order) and the failure UPDATE, built once per rules
    (SQLAlchemy then reuses their compiled form for every batch)."""
    progress = {s: _progress_statement(s, rules) for s, _ in rules.forward_from}
    return progress, _failed_statement(rules)


#: ``applied = false`` written literally: the predicate of ``ix_status_events_unapplied``
#: (PostgreSQL), so the lookup goes through the message ids among the unapplied events only (never
#: through ``uq_status_event``, whose random leaf pages over the whole history a dispatch
#: would read once per message recorded, nor over the ``applied`` index, which holds every
#: event still unapplied: those of messages other tools sent through the same instance
#: never match a delivery and stay unapplied for good)
_IS_UNAPPLIED = _e.c.applied == literal_column("false")
_UNAPPLIED = (
    select(_e.c.id, _e.c.status, _d.c.id, _e.c.occurred_at, _d.c.sent_at)
    .join(_d, _d.c.message_id == _e.c.message_id)
    .where(_e.c.message_id.in_(bindparam("mids", expanding=True)), _IS_UNAPPLIED)
)
_MARK_APPLIED = update(_e).where(_e.c.id.in_(_ids)).values(applied=True)


#: (status, the event's time, the delivery's sent_at) of each event an apply took
Timing = tuple[str, datetime, datetime]


def apply_unapplied(
    conn: Connection,
    message_ids: Sequence[str],
    rules: StatusRules,
    timings: list[Timing] | None = None,
) -> int:
    """Apply the stored, unapplied status events of ``message_ids`` to their deliveries.

    Set-based: per chunk of ids one ``SELECT`` of the events that match a delivery, then one
    ``UPDATE ... FROM status_events`` per status present (progress in rank order, so a
    delivered or read event beats a failed one), then those events (by id: never one that
    committed meanwhile) are flagged applied. Forward only and idempotent. Returns how
    many events were applied; the transaction is the caller's. On SQLite the same
    statements run on the driver (:func:`_apply_unapplied_sqlite`). ``timings``: a list
    that gets a :data:`Timing` for each event taken whose delivery has a ``sent_at`` (the
    same rows the ``SELECT`` reads anyway).
    """
    if conn.dialect.name == "sqlite":
        return _apply_unapplied_sqlite(conn, message_ids, rules, timings)
    progress, failed = _statements(rules)
    applied = 0
    for chunk in _chunks(sorted(set(message_ids)), APPLY_BATCH):
        found = conn.execute(_UNAPPLIED, {"mids": list(chunk)}).all()
        if not found:
            continue
        by_status: dict[str, dict[str, list[int]]] = {}
        for event_id, status, delivery_id, occurred_at, sent_at in found:
            if timings is not None and sent_at is not None:
                timings.append((status, occurred_at, sent_at))
            params = by_status.setdefault(status, {"ids": [], "dids": []})
            params["ids"].append(int(event_id))
            params["dids"].append(int(delivery_id))
        for status, statement in progress.items():  # rank order
            if status in by_status:
                conn.execute(statement, by_status[status])
        if states.FAILED in by_status:
            conn.execute(failed, by_status[states.FAILED])
        ids = sorted({int(row[0]) for row in found})
        conn.execute(_MARK_APPLIED, {"ids": ids})
        applied += len(ids)
    return applied


# --- SQLite: the same statements through the driver ------------------------------------------
# A batch of webhook events is a handful of small statements; SQLAlchemy's per-statement work
# (parameter processing, expanding IN lists, result set-up) cost about twice what SQLite
# spends executing them (bench/webhooks.py). The SQL is rendered once from the constructs
# above, so both paths run the same statements.

#: stands for an ``IN`` list in the rendered SQL; replaced by ``?, ?, ...``
_IN = "(__in_list__)"
_in_marker: Any = literal_column(_IN)


def _sqlite_sql(stmt: Any) -> str:
    """``stmt`` rendered for SQLite with its constants inline (only ``_IN`` left to fill)."""
    sql = str(stmt.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    assert "?" not in sql and sql.count(_IN) == 1, sql
    return sql


def _sqlite_match() -> ColumnElement[bool]:
    # no IN list of delivery ids here: SQLite would probe the index once per (event,
    # delivery) pair (quadratic in the batch); from the event's rowid through
    # ix_deliveries_message_id it is one probe per event
    return and_(_ev.c.id.op("IN")(_in_marker), _ev.c.message_id == _d.c.message_id)


@functools.cache
def _sqlite_statements(rules: StatusRules) -> tuple[dict[str, str], str]:
    """:func:`_statements` rendered for the SQLite driver, once per rules."""
    progress = {
        s: _sqlite_sql(_progress_statement(s, rules, _sqlite_match()))
        for s, _ in rules.forward_from
    }
    return progress, _sqlite_sql(_failed_statement(rules, _sqlite_match()))


_SQLITE_UNAPPLIED = _sqlite_sql(
    select(_e.c.id, _e.c.status, _e.c.occurred_at, _d.c.sent_at)
    .join(_d, _d.c.message_id == _e.c.message_id)
    # SQLite would take ``applied = false`` through ix_status_events_applied_received
    # (every unapplied event): ``coalesce`` keeps it on uq_status_event, as before 0013
    .where(_e.c.message_id.op("IN")(_in_marker), func.coalesce(_e.c.applied, True).is_(False))
)
_SQLITE_MARK_APPLIED = _sqlite_sql(
    update(_e).where(_e.c.id.op("IN")(_in_marker)).values(applied=True)
)
_SQLITE_INSERT_EVENT = (
    "INSERT INTO status_events (message_id, instance_id, chat, status, error_code,"
    " occurred_at, received_at, applied) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (message_id, status) DO NOTHING"
)


@contextmanager
def _sqlite_cursor(conn: Connection, what: str) -> Iterator[Any]:
    """A driver cursor inside ``conn``'s transaction (pysqlite begins it on the first write).

    Driver errors are raised as SQLAlchemy's (e.g. :class:`sqlalchemy.exc.OperationalError`
    for "database is locked"), as if the statements had gone through SQLAlchemy.
    """
    raw = conn.connection.driver_connection
    assert raw is not None
    cur = raw.cursor()
    try:
        yield cur
    except sqlite3.Error as exc:
        raise DBAPIError.instance(
            what, None, exc, sqlite3.Error, hide_parameters=True, dialect=conn.dialect
        ) from exc
    finally:
        cur.close()


def _sqlite_time(at: datetime) -> str:
    """``at`` as :class:`storage.types.UTCDateTime` stores it on SQLite (naive UTC text)."""
    if at.tzinfo is None:
        raise ValueError("naive datetime refused: pass a timezone-aware (UTC) datetime")
    t = at.astimezone(UTC)
    return (
        f"{t.year:04d}-{t.month:02d}-{t.day:02d} "
        f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}.{t.microsecond:06d}"
    )


def _sqlite_event_row(row: Mapping[str, Any], times: dict[datetime, str]) -> tuple[Any, ...]:
    occurred, received = row["occurred_at"], row["received_at"]
    if occurred not in times:
        times[occurred] = _sqlite_time(occurred)
    if received not in times:
        times[received] = _sqlite_time(received)
    return (
        row["message_id"],
        row.get("instance_id"),
        row.get("chat"),
        row["status"],
        row.get("error_code"),
        times[occurred],
        times[received],
        1 if row.get("applied") else 0,
    )


def _in_list(sql: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """``sql`` with its ``IN`` list of ``values``, padded to a power of two by repeating the
    last value (same result), so the driver's statement cache sees few distinct texts."""
    size = 1
    while size < len(values):
        size *= 2
    padded = [*values, *([values[-1]] * (size - len(values)))]
    return sql.replace(_IN, "(" + ",".join("?" * size) + ")"), padded


def _apply_unapplied_sqlite(
    conn: Connection,
    message_ids: Sequence[str],
    rules: StatusRules,
    timings: list[Timing] | None = None,
) -> int:
    """:func:`apply_unapplied` on SQLite: the same statements, executed by the driver."""
    progress, failed = _sqlite_statements(rules)
    stamp = _e.c.occurred_at.type.dialect_impl(conn.dialect)
    as_time = stamp.result_processor(conn.dialect, None) or (lambda v: v)
    applied = 0
    with _sqlite_cursor(conn, "apply status events") as cur:
        for chunk in _chunks(sorted(set(message_ids)), APPLY_BATCH):
            found = cur.execute(*_in_list(_SQLITE_UNAPPLIED, chunk)).fetchall()
            if not found:
                continue
            by_status: dict[str, list[int]] = {}
            for event_id, status, occurred_at, sent_at in found:
                by_status.setdefault(status, []).append(int(event_id))
                if timings is not None and sent_at is not None:
                    timings.append(cast(Timing, (status, as_time(occurred_at), as_time(sent_at))))
            for status, sql in progress.items():  # rank order
                if status in by_status:
                    cur.execute(*_in_list(sql, by_status[status]))
            if states.FAILED in by_status:
                cur.execute(*_in_list(failed, by_status[states.FAILED]))
            ids = sorted({int(row[0]) for row in found})
            cur.execute(*_in_list(_SQLITE_MARK_APPLIED, ids))
            applied += len(ids)
    return applied


@functools.cache
def _unknown_evidence() -> Any:
    """:func:`unknown_evidence`'s statement, built once (its two aliases of ``deliveries``
    cost more to build than the statement costs to run: every inbox pass runs it)."""
    other = _d.alias("other")
    in_flight = _d.alias("in_flight")
    return (
        select(_d.c.id, _d.c.attempted_at, _e.c.message_id, _e.c.occurred_at, _e.c.received_at)
        .join(_e, and_(_e.c.chat == _d.c.target, _e.c.instance_id == _d.c.sender))
        .where(
            _d.c.state == states.UNKNOWN,
            _d.c.attempted_at >= bindparam("since"),
            ~select(other.c.id).where(other.c.message_id == _e.c.message_id).exists(),
            # another send to the recipient through the sender is in flight: the event may
            # be its own, whose message id is about to be recorded (decide later). Looked up
            # through the few rows in flight (``coalesce`` keeps SQLite off the sender index,
            # which would walk every queued row of the sender), per event found (the event's
            # columns, not the delivery's: so it runs after the join, not per unknown row)
            ~select(in_flight.c.id)
            .where(
                in_flight.c.state == states.SENDING,
                in_flight.c.target == _e.c.chat,
                func.coalesce(in_flight.c.sender, "") == _e.c.instance_id,
            )
            .exists(),
        )
        .order_by(_d.c.id, _e.c.occurred_at, _e.c.id)
        .limit(bindparam("limit"))
    )


def unknown_evidence(
    conn: Connection, *, since: datetime, limit: int = 10_000
) -> list[tuple[int, datetime, str, datetime, datetime]]:
    """Candidate evidence for ``unknown`` deliveries whose last attempt started since
    ``since``: ``(delivery id, attempted_at, message id, occurred_at, received_at)`` of the
    status events of the delivery's sender whose chat is its target, on message ids no
    delivery carries, while no other send to that target through that sender is in flight;
    by delivery, then event time. The caller judges the times."""
    rows = conn.execute(_unknown_evidence(), {"since": since, "limit": limit}).all()
    return [(int(r[0]), r[1], str(r[2]), r[3], r[4]) for r in rows]


_TAKE_MESSAGE_ID = (
    update(_d)
    .where(
        _d.c.id == bindparam("b_id"),
        _d.c.state == states.UNKNOWN,
        _d.c.message_id.is_(None),
    )
    .values(message_id=bindparam("b_mid"), error=None)
)


def take_message_ids(conn: Connection, pairs: Sequence[tuple[int, str]]) -> list[str]:
    """Give each ``unknown`` delivery of ``pairs`` (id, message id) without a message id
    its evidence's message id; returns the message ids taken (apply their events next)."""
    taken: list[str] = []
    for delivery_id, message_id in pairs:
        result = conn.execute(_TAKE_MESSAGE_ID, {"b_id": delivery_id, "b_mid": message_id})
        if result.rowcount:
            taken.append(message_id)
    return taken


def prune_applied_events(conn: Connection, *, received_before: datetime, limit: int) -> int:
    """Delete up to ``limit`` status events that were applied to their delivery and were
    received before ``received_before``, oldest first; returns how many.

    The oldest applied events are the head of ``ix_status_events_applied_received``, so a
    batch reads what it deletes. Unapplied events are never touched (an event no delivery
    carries may still settle an ``unknown`` row).
    """
    oldest = (
        select(_e.c.id)
        .where(_e.c.applied == true(), _e.c.received_at < received_before)
        .order_by(_e.c.received_at)
        .limit(max(0, limit))
    )
    result = conn.execute(delete(_e).where(_e.c.id.in_(oldest.scalar_subquery())))
    return int(result.rowcount or 0)


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
    stmt = dialect_insert(conn, _in).on_conflict_do_nothing(index_elements=["message_id"])
    conn.execute(stmt, [dict(r) for r in rows])


def reply_target(
    conn: Connection, phone: str, *, latest: datetime, campaigns: int
) -> tuple[int, datetime | None] | None:
    """``(id, sent_at)`` of the newest delivery to ``phone`` that a reply can answer.

    Candidates are the deliveries of the ``campaigns`` most recent campaigns (the
    (campaign_id, target) index) and of the direct messages to ``phone``'s contact (the
    (contact_id, sent_at) index: a one-recipient campaign each, so they neither count
    towards nor crowd out the window), sent no later than ``latest``, and rows in flight
    (``sending``: the reply beat the dispatcher recording the send), which count as the
    newest. None when no delivery matches.
    """
    recent = (
        select(_campaigns.c.id)
        .where(_campaigns.c.direct.is_(False))
        .order_by(_campaigns.c.id.desc())
        .limit(campaigns)
        .scalar_subquery()
    )
    in_window = select(_d.c.id, _d.c.sent_at).where(_d.c.campaign_id.in_(recent))
    direct = (
        select(_d.c.id, _d.c.sent_at)
        .join(_campaigns, and_(_campaigns.c.id == _d.c.campaign_id, _campaigns.c.direct.is_(True)))
        .where(_d.c.contact_id == select(_c.c.id).where(_c.c.phone == phone).scalar_subquery())
    )
    found = [_newest_to(conn, stmt, phone, latest) for stmt in (in_window, direct)]
    rows = [r for r in found if r is not None]
    if not rows:
        return None
    best = max(rows, key=lambda r: (r.sent_at is None, r.sent_at or latest, r.id))
    return int(best.id), best.sent_at


def _newest_to(conn: Connection, stmt: Select[Any], phone: str, latest: datetime) -> Any:
    """The newest of ``stmt``'s deliveries to ``phone`` a reply at ``latest`` can answer
    (:func:`reply_target`'s order), or None."""
    return conn.execute(
        stmt.where(
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


class Quoted(NamedTuple):
    """A delivery a reply quotes: its id, target and sent time."""

    id: int
    target: str
    sent_at: datetime | None


def quoted_deliveries(conn: Connection, message_ids: Sequence[str]) -> dict[str, Quoted]:
    """The deliveries carrying ``message_ids`` (the messages a batch's replies quote), by
    message id: one indexed lookup per :data:`BATCH` ids, for the whole batch."""
    out: dict[str, Quoted] = {}
    for chunk in _chunks(sorted(set(message_ids))):
        for mid, did, target, sent_at in conn.execute(
            select(_d.c.message_id, _d.c.id, _d.c.target, _d.c.sent_at).where(
                _d.c.message_id.in_(chunk)
            )
        ):
            out[str(mid)] = Quoted(int(did), str(target), sent_at)
    return out


def set_tap(
    conn: Connection, delivery_id: int, *, button_id: str | None, row_id: str | None, title: str
) -> bool:
    """Record the button or list row tapped in answer to the delivery; False when it
    already has one (the first tap is kept)."""
    result = conn.execute(
        update(_d)
        .where(
            _d.c.id == delivery_id,
            _d.c.tapped_button_id.is_(None),
            _d.c.tapped_row_id.is_(None),
        )
        .values(tapped_button_id=button_id, tapped_row_id=row_id, tapped_title=title[:256])
    )
    return bool(result.rowcount)


def set_reply(conn: Connection, delivery_id: int, text: str, replied_at: datetime) -> bool:
    """Attach a reply to the delivery; False when it already has one."""
    result = conn.execute(
        update(_d)
        .where(_d.c.id == delivery_id, _d.c.replied_at.is_(None))
        .values(replied_at=replied_at, reply_text=text[:4000])
    )
    return bool(result.rowcount)


def set_instance_state(
    conn: Connection,
    instance_id: str,
    state: str,
    *,
    phone: str | None,
    now: datetime,
    clears: Sequence[str],
) -> bool:
    """Record an instance's connection state; "connected" clears a pause whose reason
    starts with one of ``clears`` (the connection problems)."""
    values: dict[str, Any] = {"state": state[:32], "state_at": now, "updated_at": now}
    if phone:
        values["phone"] = phone[:32]
    result = conn.execute(update(_i).where(_i.c.instance_id == instance_id).values(**values))
    if state == "connected":
        conn.execute(
            update(_i)
            .where(
                _i.c.instance_id == instance_id,
                or_(*(_i.c.paused_reason.startswith(p) for p in clears)),
            )
            .values(paused_reason=None, updated_at=now)
        )
    return bool(result.rowcount)


__all__ = [
    "APPLY_BATCH",
    "Quoted",
    "StatusRules",
    "Timing",
    "apply_unapplied",
    "contact_ids_by_phone",
    "existing_inbound",
    "insert_inbound",
    "insert_status_events",
    "pg_insert_status_events_sql",
    "pg_status_event_columns",
    "prune_applied_events",
    "quoted_deliveries",
    "reply_target",
    "set_instance_state",
    "set_reply",
    "set_tap",
    "status_time",
    "take_message_ids",
    "unapplied_matching",
    "unknown_evidence",
]
