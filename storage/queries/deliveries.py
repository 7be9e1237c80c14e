"""Hot SQL for delivery rows: claim, bulk outcome recording, lease expiry, cap counts.

The claim is one portable statement (DESIGN.md decision 2)::

    UPDATE deliveries SET state='sending', lease_until=:lease, attempts=attempts+1,
           attempted_at=:now
    WHERE id IN (SELECT id FROM deliveries WHERE campaign_id=:c AND sender=:s
                 AND state='queued' AND due_at <= :now ORDER BY due_at, id LIMIT :n
                 [FOR UPDATE SKIP LOCKED  -- PostgreSQL only])
    RETURNING id, target, target_kind, contact_id, sender, attempts, content

The inner SELECT is a range of ``ix_deliveries_queue`` (campaign, sender, due_at, id;
partial on ``state = 'queued'``, written literally here so that SQLite and a generic
PostgreSQL plan can use it): it reads the rows it returns and no others, whatever the
queue's length. The reads of the queue (a sender's next due row, the senders with queued
rows) go through the same index; ``sends_since`` is a range of (sender, sent_at).

Every writer here guards on ``state = 'sending'`` so that a row whose lease already
expired (and became ``unknown``) is never overwritten by a late outcome.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    RowMapping,
    bindparam,
    exists,
    false,
    func,
    literal_column,
    or_,
    select,
    text,
    union_all,
    update,
)

from storage import states, tables
from storage.predicates import QUEUED_ROWS, ZONED_QUEUED_ROWS
from storage.queries import delivery_search, paging, tallies
from storage.queries.moves import may_move, may_move_sql, new_state_sql
from storage.queries.sender_values import sender_chunks, senders_cte
from storage.states import Move

_d = tables.deliveries
_contacts = tables.contacts
_events = tables.status_events
_members = tables.list_members

#: ``state = 'queued'`` with the constant inline: the predicate of ``ix_deliveries_queue``
#: (a bound parameter would keep SQLite and PostgreSQL's generic plans off the index)
_QUEUED = _d.c.state == literal_column(f"'{states.QUEUED}'")
#: the predicate of ``ix_deliveries_zone_queue`` (queued rows with a recipient zone), inline
_ZONED_QUEUED = text(ZONED_QUEUED_ROWS)
#: ``state = 'sending'`` inline: the predicate of ``ix_deliveries_in_flight``
_SENDING = _d.c.state == literal_column(f"'{states.SENDING}'")


@dataclass(frozen=True)
class ClaimedRow:
    """A delivery row claimed for sending (state ``sending`` under a lease)."""

    id: int
    campaign_id: int
    target: str
    target_kind: str
    contact_id: int | None
    sender: str | None
    attempts: int
    content: dict[str, Any]
    #: when the row was due and when this claim took it (how late the claim came)
    due_at: datetime | None = None
    attempted_at: datetime | None = None
    #: when the row was made (the retry horizon counts from it)
    queued_at: datetime | None = None


#: what a claim returns of each row it takes (:class:`ClaimedRow`'s fields)
_CLAIMED_COLUMNS = (
    _d.c.id,
    _d.c.campaign_id,
    _d.c.target,
    _d.c.target_kind,
    _d.c.contact_id,
    _d.c.sender,
    _d.c.attempts,
    _d.c.content,
    _d.c.due_at,
    _d.c.attempted_at,
    _d.c.queued_at,
)


def _claimed_rows(result: Any) -> list[ClaimedRow]:
    """The rows a claim returned (its ``RETURNING`` :data:`_CLAIMED_COLUMNS`)."""
    return [
        ClaimedRow(
            id=r.id,
            campaign_id=r.campaign_id,
            target=r.target,
            target_kind=r.target_kind,
            contact_id=r.contact_id,
            sender=r.sender,
            attempts=r.attempts,
            content=dict(r.content or {}),
            due_at=r.due_at,
            attempted_at=r.attempted_at,
            queued_at=r.queued_at,
        )
        for r in result
    ]


def _due_picks(columns: Sequence[Any], queue: Sequence[Any], skip_locked: bool) -> Any:
    """The first ``n`` due rows of sender ``s`` in campaign ``c`` (parameters) among the
    rows ``queue`` selects (a partial index's predicate and its own conditions), in claim
    order; locked and skipped if locked on PostgreSQL."""
    sub = (
        select(*columns)
        .where(
            _d.c.campaign_id == bindparam("c"),
            *queue,
            _d.c.sender == bindparam("s"),
            _d.c.due_at <= bindparam("now", type_=_d.c.due_at.type),
        )
        .order_by(_d.c.due_at, _d.c.id)
        .limit(bindparam("n"))
    )
    return sub.with_for_update(skip_locked=True) if skip_locked else sub


@functools.cache
def _claim_statement(skip_locked: bool) -> Any:
    """The claim's UPDATE (module docstring), built once per flavour (its construction
    cost more than SQLite running it)."""
    return _claim_update(_due_picks([_d.c.id], [_QUEUED], skip_locked))


def _claim_update(picks: Any) -> Any:
    """The claim's UPDATE of the rows whose ids ``picks`` selects (parameters ``lease``
    and ``now``), returning :data:`_CLAIMED_COLUMNS`."""
    return (
        update(_d)
        .where(_d.c.id.in_(picks.scalar_subquery()))
        .values(
            state=states.SENDING,
            lease_until=bindparam("lease", type_=_d.c.lease_until.type),
            attempts=_d.c.attempts + 1,
            attempted_at=bindparam("now", type_=_d.c.attempted_at.type),
        )
        .returning(*_CLAIMED_COLUMNS)
    )


@functools.cache
def _zoned_claim_statement(zones: int, skip_locked: bool) -> Any:
    """The claim of a campaign in recipient time for ``zones`` open zones (``z0``,
    ``z1``...): the first ``n`` due rows of each zone, a range of
    ``ix_deliveries_zone_queue`` each, then the first ``n`` of those by (due_at, id)."""
    branches = []
    for i in range(zones):
        queue = [_ZONED_QUEUED, _d.c.recipient_tz == bindparam(f"z{i}")]
        sub = _due_picks([_d.c.id, _d.c.due_at], queue, skip_locked)
        zone = sub.subquery(f"z{i}")
        branches.append(select(zone.c.id, zone.c.due_at))
    picked = union_all(*branches).subquery("picked")
    ids = select(picked.c.id).order_by(picked.c.due_at, picked.c.id).limit(bindparam("n"))
    return _claim_update(ids)


def claim(
    conn: Connection,
    *,
    campaign_id: int,
    sender: str,
    now: datetime,
    lease_until: datetime,
    limit: int,
    zones: Sequence[str] | None = None,
) -> list[ClaimedRow]:
    """Claim up to ``limit`` due queued rows of one campaign and sender; one statement.

    On PostgreSQL the subquery takes ``FOR UPDATE SKIP LOCKED`` so concurrent workers
    never claim the same row; on SQLite the single writer lock gives the same guarantee.
    ``zones`` (a campaign in recipient time): only rows of these recipient zones, the
    ones whose window is open (:func:`_zoned_claim_statement`; none: nothing claimed).
    """
    if limit <= 0:
        return []
    params: dict[str, Any] = {
        "c": campaign_id,
        "s": sender,
        "now": now,
        "lease": lease_until,
        "n": limit,
    }
    skip_locked = conn.dialect.name == "postgresql"
    if zones is not None:
        if not zones:
            return []
        zones = sorted(set(zones))
        params.update({f"z{i}": zone for i, zone in enumerate(zones)})
        stmt = _zoned_claim_statement(len(zones), skip_locked)
    else:
        stmt = _claim_statement(skip_locked)
    claimed = _claimed_rows(conn.execute(stmt, params))
    claimed.sort(key=lambda c: c.id)
    return claimed


#: :func:`claim_first_of_each`'s statement per dialect: one correlated pick per sender
#: (PostgreSQL: a LATERAL join with ``FOR UPDATE SKIP LOCKED``; SQLite: ``json_each``)
#: ``state = 'queued'`` stays a literal: the predicate of ``ix_deliveries_queue`` (a bound
#: parameter keeps both databases off the partial index)
_CLAIM_FIRST_OF_EACH = {
    "postgresql": """
        SELECT d.id FROM unnest(CAST(:senders AS text[])) AS s(sender)
        CROSS JOIN LATERAL (
            SELECT id FROM deliveries
            WHERE campaign_id = :campaign_id AND sender = s.sender
              AND state = 'queued' AND due_at <= :now
            ORDER BY due_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) AS d""",
    "sqlite": """
        SELECT (SELECT d.id FROM deliveries AS d
                WHERE d.campaign_id = :campaign_id AND d.sender = s.value
                  AND d.state = 'queued' AND d.due_at <= :now
                ORDER BY d.due_at, d.id LIMIT 1)
        FROM json_each(:senders) AS s""",
}


def claim_first_of_each(
    conn: Connection,
    *,
    campaign_id: int,
    senders: Sequence[str],
    now: datetime,
    lease_until: datetime,
    zones: Sequence[str] | None = None,
) -> list[ClaimedRow]:
    """Claim the first due queued row (by ``due_at``, ``id``) of each of ``senders`` in
    one campaign: :func:`claim` with ``limit=1`` for many senders in one statement.
    Senders with nothing due claim nothing. Rows come back in sender order.

    ``zones`` (recipient time, :func:`claim`): one zoned claim per sender instead."""
    if not senders:
        return []
    if zones is not None:
        out: list[ClaimedRow] = []
        for sender in sorted(set(senders)):
            out += claim(
                conn,
                campaign_id=campaign_id,
                sender=sender,
                now=now,
                lease_until=lease_until,
                limit=1,
                zones=zones,
            )
        return out
    picks = text(_CLAIM_FIRST_OF_EACH[conn.dialect.name]).bindparams(
        bindparam("now", value=now, type_=_d.c.due_at.type),
        bindparam("campaign_id", value=campaign_id),
        bindparam(
            "senders",
            value=list(senders) if conn.dialect.name == "postgresql" else json.dumps(list(senders)),
        ),
    )
    stmt = (
        update(_d)
        .where(_d.c.id.in_(picks.columns(_d.c.id).scalar_subquery()))
        .values(
            state=states.SENDING,
            lease_until=lease_until,
            attempts=_d.c.attempts + 1,
            attempted_at=now,
        )
        .returning(*_CLAIMED_COLUMNS)
    )
    rows = _claimed_rows(conn.execute(stmt))
    return sorted(rows, key=lambda r: (r.sender or "", r.id))


def opted_out_contact_ids(conn: Connection, contact_ids: Sequence[int]) -> set[int]:
    """Which of ``contact_ids`` have opted out (checked at send time)."""
    if not contact_ids:
        return set()
    rows = conn.execute(
        select(_contacts.c.id).where(
            _contacts.c.id.in_(list(contact_ids)), _contacts.c.opted_out.is_(True)
        )
    )
    return {int(r[0]) for r in rows}


#: contact ids per statement of :func:`contacts_messaged_since`
_IDS_PER_STATEMENT = 5000


def contacts_messaged_since(
    conn: Connection, contact_ids: Sequence[int], since: datetime
) -> set[int]:
    """Which of ``contact_ids`` were sent a message (by any campaign) since ``since``: a
    range of ``ix_deliveries_contact_sent`` per contact."""
    out: set[int] = set()
    ids = list(dict.fromkeys(contact_ids))
    for at in range(0, len(ids), _IDS_PER_STATEMENT):
        rows = conn.execute(
            select(_d.c.contact_id)
            .where(_d.c.contact_id.in_(ids[at : at + _IDS_PER_STATEMENT]), _d.c.sent_at >= since)
            .distinct()
        )
        out.update(int(r[0]) for r in rows)
    return out


def skip_recently_messaged(
    conn: Connection, campaign_id: int, *, move: Move, since: datetime, error: str
) -> int:
    """``move`` (skip), with ``error``, the campaign's queued rows whose contact was sent a message
    (by any campaign) since ``since``; one statement (a probe of
    ``ix_deliveries_contact_sent`` per row). How many."""
    other = _d.alias("messaged")
    recent = (
        select(other.c.id)
        .where(other.c.contact_id == _d.c.contact_id, other.c.sent_at >= since)
        .exists()
    )
    stmt = (
        update(_d)
        .where(
            _d.c.campaign_id == campaign_id, may_move(move), _d.c.contact_id.is_not(None), recent
        )
        .values(state=move.to, error=error, due_at=None)
    )
    return int(conn.execute(stmt).rowcount or 0)


def _executemany(conn: Connection, stmt: Any, params: list[dict[str, Any]]) -> int:
    if not params:
        return 0
    result = conn.execute(stmt, params)
    return int(result.rowcount or 0)


def _from_sending(move: Move, **values: Any) -> Any:
    """The bulk UPDATE of an outcome: row ``b_id``, still ``sending`` (``move``'s
    from-state), takes ``move``'s state and ``values`` and leaves its lease."""
    return (
        update(_d)
        .where(_d.c.id == bindparam("b_id"), may_move(move))
        .values(lease_until=None, state=move.to, **values)
    )


def _pg_from_sending(
    conn: Connection,
    move: Move,
    sets: str,
    arrays: dict[str, tuple[str, list[Any]]],
    **params: Any,
) -> int:
    """PostgreSQL: an outcome's bulk UPDATE as one statement over ``unnest``-ed arrays
    (``arrays``: column of ``v`` -> (SQL type, values); ``v.id`` the row ids): the rows
    still ``sending`` (``move``'s from-state) take ``move``'s state and ``sets`` and leave
    their lease. One statement, not one per row as an executemany runs, so the counting
    triggers (migration 0007) fire once."""
    names = list(arrays)
    sql = (
        f"UPDATE {_d.name} AS d SET lease_until = NULL, state = {new_state_sql(move)}, {sets} "
        f"FROM unnest({', '.join(f'CAST(:{n} AS {arrays[n][0]}[])' for n in names)}) "
        f"AS v({', '.join(names)}) WHERE d.id = v.id AND {may_move_sql(move, 'd')}"
    )
    values = {n: arrays[n][1] for n in names}
    return int(conn.execute(text(sql), {**values, **params}).rowcount or 0)


def record_sent(conn: Connection, rows: Sequence[tuple[int, str, datetime]], *, move: Move) -> int:
    """Bulk: rows ``(id, message_id, sent_at)`` were accepted by the gateway: ``move``
    (to ``sent``).

    ``sent_at`` is each row's own moment of acceptance (when the gateway's answer to that
    send came back), not the moment the batch is recorded.
    """
    if not rows:
        return 0
    if conn.dialect.name == "postgresql":
        return _pg_from_sending(
            conn,
            move,
            "message_id = v.mid, sent_at = v.at, error = NULL, error_code = NULL",
            {
                "id": ("bigint", [r[0] for r in rows]),
                "mid": ("text", [r[1] for r in rows]),
                "at": ("timestamptz", [r[2] for r in rows]),
            },
        )
    stmt = _from_sending(
        move,
        message_id=bindparam("b_mid"),
        sent_at=bindparam("b_at"),
        error=None,
        error_code=None,
    )
    return _executemany(conn, stmt, [{"b_id": i, "b_mid": m, "b_at": t} for i, m, t in rows])


def record_requeued(
    conn: Connection,
    rows: Sequence[tuple[int, datetime, str | None]],
    *,
    move: Move,
    refund_attempt: bool = False,
) -> int:
    """Bulk: rows ``(id, due_at, error)`` provably not sent ``move`` (back to ``queued``).

    ``refund_attempt`` gives the attempt back (instance problems do not burn retries).
    """
    if not rows:
        return 0
    if conn.dialect.name == "postgresql":
        return _pg_from_sending(
            conn,
            move,
            "due_at = v.due, error = v.err"
            + (", attempts = d.attempts - 1" if refund_attempt else ""),
            {
                "id": ("bigint", [r[0] for r in rows]),
                "due": ("timestamptz", [r[1] for r in rows]),
                "err": ("text", [r[2] for r in rows]),
            },
        )
    attempts = _d.c.attempts - 1 if refund_attempt else _d.c.attempts
    stmt = _from_sending(
        move, due_at=bindparam("b_due"), error=bindparam("b_err"), attempts=attempts
    )
    return _executemany(conn, stmt, [{"b_id": i, "b_due": d, "b_err": e} for i, d, e in rows])


def record_terminal(
    conn: Connection,
    rows: Sequence[tuple[int, str | None, str | None]],
    *,
    move: Move,
    now: datetime,
) -> int:
    """Bulk: rows ``(id, error, error_code)`` ``move`` (to ``failed``, ``unknown`` or
    ``skipped``)."""
    state = move.to
    if not rows:
        return 0
    if conn.dialect.name == "postgresql":
        sets = "error = v.err, error_code = v.code"
        if state == states.FAILED:
            sets += ", failed_at = :now"
        if state == states.SKIPPED:
            sets += ", attempts = d.attempts - 1"  # a skip at send time was never an attempt
        return _pg_from_sending(
            conn,
            move,
            sets,
            {
                "id": ("bigint", [r[0] for r in rows]),
                "err": ("text", [r[1] for r in rows]),
                "code": ("text", [r[2] for r in rows]),
            },
            now=now,
        )
    values: dict[str, Any] = {
        "error": bindparam("b_err"),
        "error_code": bindparam("b_code"),
    }
    if state == states.FAILED:
        values["failed_at"] = now
    if state == states.SKIPPED:
        # a skip at send time was never an attempt
        values["attempts"] = _d.c.attempts - 1
    return _executemany(
        conn,
        _from_sending(move, **values),
        [{"b_id": i, "b_err": e, "b_code": c} for i, e, c in rows],
    )


def expire_leases(
    conn: Connection, *, move: Move, now: datetime, error: str, campaign_id: int | None = None
) -> int:
    """Rows still ``sending`` after their lease ran out ``move`` (to ``unknown``) with
    ``error``.

    The process that claimed them died mid-send: the message may or may not have left,
    so it is never resent automatically (``campaign retry --unknown`` re-queues them).
    """
    cond = [may_move(move), _d.c.lease_until < now]
    if campaign_id is not None:
        cond.append(_d.c.campaign_id == campaign_id)
    result = conn.execute(
        update(_d).where(*cond).values(state=move.to, error=error, lease_until=None)
    )
    return int(result.rowcount or 0)


@functools.cache
def _sends_since_statement(capped: bool) -> Any:
    """:func:`sends_since`'s two counts in one SELECT, built once per flavour."""
    sent = select(_d.c.id).where(
        _d.c.sender == bindparam("s"),
        _d.c.sent_at >= bindparam("since", type_=_d.c.sent_at.type),
    )
    if capped:
        sent = sent.limit(bindparam("cap"))
    sending = select(func.count()).where(
        _SENDING, _d.c.sender == bindparam("s"), _d.c.sent_at.is_(None)
    )
    return select(
        select(func.count()).select_from(sent.subquery()).scalar_subquery(),
        sending.scalar_subquery(),
    )


def sends_since(
    conn: Connection, sender: str, since: datetime, *, at_most: int | None = None
) -> int:
    """How many messages ``sender`` sent (or is sending) since ``since``, all campaigns.

    Used for the daily cap: ``since`` is the start of the local day. The rows sent are a
    range of ``ix_deliveries_sender_sent``; with ``at_most`` (the cap) their count stops
    there, so a claim under a cap reads at most that many index entries however many
    messages went out. The rows being sent (no ``sent_at`` yet) are the few in flight,
    read through the partial ``ix_deliveries_in_flight``.
    """
    stmt = _sends_since_statement(at_most is not None)
    params: dict[str, Any] = {"s": sender, "since": since}
    if at_most is not None:
        params["cap"] = max(0, at_most)
    n_sent, n_sending = conn.execute(stmt, params).one()
    return int(n_sent) + int(n_sending)


def next_due_at(
    conn: Connection,
    campaign_id: int,
    senders: Sequence[str],
    zones: Sequence[str] | None = None,
) -> datetime | None:
    """The earliest ``due_at`` of the campaign's queued rows for ``senders``: the first
    entry of each sender's range of ``ix_deliveries_queue``; with ``zones`` (recipient
    time) only rows of these zones, the first entry of each (zone, sender) range of
    ``ix_deliveries_zone_queue``."""
    queue: list[tuple[Any, ...]] = (
        [(_QUEUED,)]
        if zones is None
        else [(_ZONED_QUEUED, _d.c.recipient_tz == z) for z in dict.fromkeys(zones)]
    )
    found: list[datetime] = []
    for conds in queue:
        for sender in dict.fromkeys(senders):
            value = conn.execute(
                select(_d.c.due_at)
                .where(
                    _d.c.campaign_id == campaign_id,
                    *conds,
                    _d.c.sender == sender,
                    _d.c.due_at.is_not(None),
                )
                .order_by(_d.c.due_at, _d.c.id)
                .limit(1)
            ).scalar()
            if isinstance(value, datetime):
                found.append(value)
    return min(found, default=None)


#: the distinct senders of a campaign's queued rows by a loose scan of
#: ``ix_deliveries_queue``: one index probe per sender (a recursive CTE, as both
#: databases lack a skip scan), never a read of every queued row
_QUEUED_SENDERS = text(
    f"""
    WITH RECURSIVE s(sender) AS (
        SELECT (SELECT sender FROM {_d.name}
                WHERE campaign_id = :c AND {QUEUED_ROWS} AND sender IS NOT NULL
                ORDER BY sender LIMIT 1)
        UNION ALL
        SELECT (SELECT d.sender FROM {_d.name} d
                WHERE d.campaign_id = :c AND d.{QUEUED_ROWS} AND d.sender > s.sender
                ORDER BY d.sender LIMIT 1)
        FROM s WHERE s.sender IS NOT NULL
    )
    SELECT sender FROM s WHERE sender IS NOT NULL
    """
)


#: the distinct recipient zones of a campaign's queued rows by a loose scan of
#: ``ix_deliveries_zone_queue`` (as :data:`_QUEUED_SENDERS`): one probe per zone
_QUEUED_ZONES = text(
    f"""
    WITH RECURSIVE z(tz) AS (
        SELECT (SELECT recipient_tz FROM {_d.name}
                WHERE campaign_id = :c AND {ZONED_QUEUED_ROWS}
                ORDER BY recipient_tz LIMIT 1)
        UNION ALL
        SELECT (SELECT d.recipient_tz FROM {_d.name} d
                WHERE d.campaign_id = :c AND d.state = 'queued'
                  AND d.recipient_tz IS NOT NULL AND d.recipient_tz > z.tz
                ORDER BY d.recipient_tz LIMIT 1)
        FROM z WHERE z.tz IS NOT NULL
    )
    SELECT tz FROM z WHERE tz IS NOT NULL
    """
)


def queued_zones(conn: Connection, campaign_id: int) -> list[str]:
    """The distinct recipient zones of the campaign's queued rows (recipient time), in
    order (see :data:`_QUEUED_ZONES`)."""
    return [str(r[0]) for r in conn.execute(_QUEUED_ZONES, {"c": campaign_id})]


def queued_senders(conn: Connection, campaign_id: int) -> list[str]:
    """The distinct sender instances that still have queued rows in the campaign, in
    order (see :data:`_QUEUED_SENDERS`)."""
    return [str(r[0]) for r in conn.execute(_QUEUED_SENDERS, {"c": campaign_id})]


__all__ = [
    "NEW_DELIVERY_COLUMNS",
    "ClaimedRow",
    "DeliveryFilter",
    "bind_processor",
    "claim",
    "contacts_messaged_since",
    "deliveries_keyset",
    "deliveries_page",
    "expire_leases",
    "insert_new_deliveries",
    "next_due_at",
    "opted_out_contact_ids",
    "queued_senders",
    "queued_zones",
    "record_requeued",
    "record_sent",
    "record_terminal",
    "refresh_statistics",
    "sends_since",
    "sends_since_by_sender",
    "skip_recently_messaged",
]


def unapplied_known_message_ids(
    conn: Connection, *, received_since: datetime, limit: int = 1000
) -> list[str]:
    """Message ids with unapplied status events, received since ``received_since``, that a
    delivery row now carries.

    On PostgreSQL an event can commit (unapplied) just after the dispatcher recorded
    its message id and looked for pending events; a periodic sweep closes that gap. The
    events are a range of ``ix_status_events_applied_received`` (unapplied, recent): events
    that never match a delivery (messages other tools sent through the same instance)
    stay unapplied for good and are not read again once older than ``received_since``.
    """
    stmt = (
        select(_events.c.message_id)
        .where(
            _events.c.applied == false(),
            _events.c.received_at >= received_since,
            exists().where(_d.c.message_id == _events.c.message_id),
        )
        .group_by(_events.c.message_id)
        .limit(limit)
    )
    return [str(r[0]) for r in conn.execute(stmt)]


# --- materialisation inserts ---------------------------------------------------------------

#: the columns of :func:`insert_new_deliveries`'s rows, in this order
NEW_DELIVERY_COLUMNS = (
    "campaign_id",
    "target",
    "target_kind",
    "contact_id",
    "sender",
    "state",
    "attempts",
    "due_at",
    "content",
    "error",
    "queued_at",
    "recipient_tz",
)


def bind_processor(conn: Connection, column: str) -> Callable[[Any], Any]:
    """What turns a Python value of ``deliveries.<column>`` into the driver's value.

    The column type's own processor for ``conn``'s dialect (``UTCDateTime`` to naive UTC
    on SQLite, ``JSON`` to text, ...), so a value converted once can fill many rows.
    """
    dialect = conn.dialect
    process = _d.c[column].type.dialect_impl(dialect).bind_processor(dialect)
    if process is None:
        return lambda value: value
    return process


def insert_new_deliveries(
    conn: Connection,
    rows: Sequence[tuple[Any, ...]],
    columns: Sequence[str] = NEW_DELIVERY_COLUMNS,
    *,
    index_targets: bool = True,
) -> None:
    """Insert delivery rows given as tuples in ``columns`` order (default
    :data:`NEW_DELIVERY_COLUMNS`; fewer: an older schema's, as migration tests write), values
    already converted with :func:`bind_processor`; a row whose ``(campaign_id, target)``
    exists is left alone. One driver-level executemany: no per-row statement compilation
    or type processing (materialisation writes a million rows this way). The new rows'
    targets are indexed for the target search (:func:`delivery_search.index_new`) unless
    ``index_targets`` is false: a schema older than migration 0025 has no such index."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        # one statement over column arrays: the server runs one INSERT, not one per row
        types = [_d.c[c].type.compile(conn.dialect) for c in columns]
        conn.exec_driver_sql(
            f"INSERT INTO {_d.name} ({', '.join(columns)}) "
            f"SELECT * FROM unnest({', '.join(f'%s::{t}[]' for t in types)}) "
            "ON CONFLICT (campaign_id, target) DO NOTHING",
            tuple(list(column) for column in zip(*rows, strict=True)),
        )
        return
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    conn.exec_driver_sql(
        f"INSERT INTO {_d.name} ({', '.join(columns)}) "
        f"VALUES ({', '.join([mark] * len(columns))}) "
        "ON CONFLICT (campaign_id, target) DO NOTHING",
        list(rows),
    )
    if index_targets:
        delivery_search.index_new(conn)


def refresh_statistics(conn: Connection) -> None:
    """Refresh PostgreSQL's planner statistics of the tables a materialisation reads.

    A list imported minutes ago, or a ``deliveries`` table that was empty when last
    analysed, has no statistics yet; the planner then guesses a few hundred rows and
    picks plans that read and sort every remaining member for each keyset page, or scan
    the campaign's rows for each member: a start became quadratic in the list's size.
    ``ANALYZE`` samples a fixed number of rows (milliseconds to a fraction of a second).
    No-op on other databases.
    """
    if conn.dialect.name == "postgresql":
        names = (
            tables.list_members.name,
            tables.audience_members.name,
            tables.contacts.name,
            tables.deliveries.name,
        )
        conn.exec_driver_sql(f"ANALYZE {', '.join(names)}")


# --- reads for the faces -------------------------------------------------------------------


@dataclass(frozen=True)
class DeliveryFilter:
    """Which deliveries a listing shows: of one campaign (or all), in ``in_states``,
    whose target contains ``target``, with a reply or without (``replied``); ``search``
    is ``(digits, folded text)``: the target contains the digits or the contact's folded
    name contains the text."""

    campaign_id: int | None = None
    in_states: Sequence[str] | None = None
    target: str | None = None
    search: tuple[str, str] | None = None
    replied: bool | None = None

    @property
    def by_state_only(self) -> bool:
        """Whether the filter is only a campaign and states (what the counts know)."""
        return not self.target and self.search is None and self.replied is None


def _delivery_conds(f: DeliveryFilter, *, indexed: bool = True) -> list[Any]:
    """The conditions of a delivery ``f`` selects, each exact. Not ``indexed``: the
    campaign and the states written so that no index of ``deliveries`` serves them
    (``+ 0``, ``|| ''``), so SQLite's planner walks the target search's FTS5 matches
    instead of probing them once for each row of the campaign."""
    conds: list[Any] = []
    campaign: Any = _d.c.campaign_id if indexed else _d.c.campaign_id + 0
    state: Any = _d.c.state if indexed else _d.c.state + ""
    if f.campaign_id is not None:
        conds.append(campaign == f.campaign_id)
    if f.in_states:
        conds.append(state.in_(list(f.in_states)))
    if f.target:
        conds.append(_d.c.target.contains(f.target, autoescape=True))
    if f.replied is not None:
        conds.append(_d.c.replied_at.is_not(None) if f.replied else _d.c.replied_at.is_(None))
    if f.search is not None:
        digits, text = f.search
        named = select(tables.contacts.c.id).where(
            tables.contacts.c.folded_name.contains(text, autoescape=True)
        )
        either: list[ColumnElement[bool]] = [_d.c.contact_id.in_(named)] if text else []
        if digits:
            either.append(_d.c.target.contains(digits, autoescape=True))
        conds.append(or_(*either) if either else false())
    return conds


def deliveries_page(
    conn: Connection, columns: Sequence[str], f: DeliveryFilter, *, limit: int, offset: int
) -> tuple[int, list[RowMapping]]:
    """``(total, rows)``: how many deliveries match ``f`` (a full count) and one page of
    ``columns``, by id, ``offset`` rows in (the old way: costs grow with both)."""
    return paging.page(conn, _d, columns, _delivery_conds(f), limit=limit, offset=offset)


def deliveries_keyset(
    conn: Connection,
    columns: Sequence[str],
    f: DeliveryFilter,
    *,
    limit: int,
    at: paging.Keyset,
    count_cap: int,
) -> tuple[int, bool, paging.KeysetRows]:
    """``(total, exact, page)``: how many deliveries match ``f`` and one page of
    ``columns`` from ``at``, by id. The total is exact from the counts the triggers keep
    (``campaign_state_counts``) when ``f`` is only a campaign and states; otherwise the
    matches are counted up to ``count_cap`` (``exact`` False above)."""
    conds = _delivery_conds(f)
    key: Any = None
    narrow = delivery_search.target_match(conn, f.target) if f.target else None
    if narrow is not None:  # SQLite: walk the FTS5 matches in id order, not the campaign
        more, key = narrow
        conds = [*more, *_delivery_conds(f, indexed=False)]
    found = paging.keyset_page(conn, _d, columns, conds, limit=limit, at=at, key=key)
    if f.by_state_only:
        total = tallies.rows_in_states(conn, f.campaign_id, f.in_states)
        return total, True, found
    if paging.whole(at, found):
        return len(found.rows), True, found
    total, exact = paging.capped_count(conn, _d, conds, count_cap, key=key)
    return total, exact, found


def contact_names(conn: Connection, contact_ids: Sequence[int]) -> dict[int, str]:
    """``contact id -> name`` of the contacts given (those with a name)."""
    if not contact_ids:
        return {}
    c = tables.contacts
    rows = conn.execute(select(c.c.id, c.c.name).where(c.c.id.in_(sorted(set(contact_ids)))))
    return {int(i): str(n) for i, n in rows if n}


def sends_since_by_sender(
    conn: Connection, senders: Sequence[str], since: datetime, *, at_most: int | None = None
) -> dict[str, int]:
    """:func:`sends_since` for several senders (senders without any are left out): one
    range of (sender, sent_at) per sender as correlated subqueries
    (``storage.queries.sender_values``), not a round trip each; with ``at_most`` (the cap)
    each range stops there, as :func:`sends_since`'s does. The rows in flight are one
    grouped read of the few ``sending`` rows (the partial ``ix_deliveries_in_flight``): a
    probe per sender let PostgreSQL's planner, whose statistics rarely see a ``sending``
    row, walk every in-flight row on ``ix_deliveries_claim`` for each sender (88 ms for
    500 senders). Both reads are one statement (``UNION ALL``), so they see one snapshot:
    as two, a send recorded between them was counted in flight and sent (a sender shown
    one over its allowance)."""
    out: dict[str, int] = {}
    if not senders:
        return out
    in_flight = (
        select(_d.c.sender, func.count().label("n"))
        .where(_SENDING, _d.c.sent_at.is_(None))
        .group_by(_d.c.sender)
    )
    for chunk in sender_chunks(senders):
        wanted = set(chunk)
        who = senders_cte(chunk)
        rows = (
            select(_d.c.id).where(_d.c.sender == who.c.sender, _d.c.sent_at >= since).correlate(who)
        )
        if at_most is not None:
            rows = rows.limit(max(0, at_most))
        sent = select(func.count()).select_from(rows.subquery()).scalar_subquery()
        both = union_all(in_flight, select(who.c.sender, sent))
        for sender, n in conn.execute(both):
            if n and sender in wanted:
                out[str(sender)] = out.get(str(sender), 0) + int(n)
    return out


def queued_page(conn: Connection, campaign_id: int, *, after: int, limit: int) -> list[RowMapping]:
    """Up to ``limit`` queued rows of a campaign with id above ``after``, by id, each with
    its contact's phone, name and attributes (none for a group): what a re-render needs."""
    stmt = (
        select(
            _d.c.id,
            _d.c.target,
            _d.c.target_kind,
            _contacts.c.phone,
            _contacts.c.name,
            _contacts.c.attributes,
        )
        .select_from(_d.outerjoin(_contacts, _contacts.c.id == _d.c.contact_id))
        .where(_d.c.campaign_id == campaign_id, _d.c.state == states.QUEUED, _d.c.id > after)
        .order_by(_d.c.id)
        .limit(limit)
    )
    return list(conn.execute(stmt).mappings().all())


def rewrite_queued(
    conn: Connection,
    contents: Sequence[tuple[int, dict[str, Any]]],
    skips: Sequence[tuple[int, str]],
    *,
    skip: Move,
) -> tuple[int, int]:
    """New rendered content for queued rows, and queued rows ``skip``ped with a reason (a
    message that no longer renders for them); only rows still queued are touched.
    Returns (rewritten, skipped)."""
    rewritten = skipped = 0
    if contents:
        stmt = (
            update(_d)
            .where(_d.c.id == bindparam("row_id"), _d.c.state == states.QUEUED)
            .values(content=bindparam("new_content"))
        )
        params = [{"row_id": i, "new_content": c} for i, c in contents]
        rewritten = _executemany(conn, stmt, params)
    if skips:
        stmt = (
            update(_d)
            .where(_d.c.id == bindparam("row_id"), may_move(skip))
            .values(state=skip.to, error=bindparam("reason"), due_at=None)
        )
        params = [{"row_id": i, "reason": r[:1000]} for i, r in skips]
        skipped = _executemany(conn, stmt, params)
    return rewritten, skipped
