"""Outbound webhooks: endpoints and their subscriptions, the outbox the triggers of
migration 0010 fill, the sender's claim of due messages and its record of attempts.

Storage holds no policy: which events exist, the backoff and when an endpoint is
disabled are ``campaigns.webhook_endpoints`` and ``scheduler.outbound``'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    RowMapping,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.sql.expression import ColumnClause

from storage import tables
from storage.outbox import sync_triggers
from storage.queries import tallies
from storage.queries.paging import page

_e = tables.webhook_endpoints
_s = tables.webhook_subscriptions
_m = tables.webhook_messages
_a = tables.webhook_attempts
#: literal, so that SQLite and a generic PostgreSQL plan use the partial indexes
_PENDING: ColumnClause[str] = literal_column("'pending'")

ENDPOINT_COLUMNS = (
    "id",
    "url",
    "secret",
    "events",
    "description",
    "enabled",
    "disabled_reason",
    "failing_since",
    "consecutive_failures",
    "created_at",
    "previous_secret_until",
)


def create_endpoint(
    conn: Connection,
    *,
    url: str,
    secret: str,
    events: Sequence[str],
    subscribed: Sequence[str],
    description: str,
    now: datetime,
) -> int:
    """A new enabled endpoint and one subscription row per event of ``subscribed``."""
    endpoint_id = conn.execute(
        insert(_e)
        .values(
            url=url,
            secret=secret,
            events=list(events),
            description=description,
            enabled=True,
            consecutive_failures=0,
            created_at=now,
        )
        .returning(_e.c.id)
    ).scalar_one()
    _subscribe(conn, int(endpoint_id), subscribed)
    return int(endpoint_id)


def _subscribe(conn: Connection, endpoint_id: int, events: Sequence[str]) -> None:
    conn.execute(delete(_s).where(_s.c.endpoint_id == endpoint_id))
    if events:
        conn.execute(insert(_s), [{"event": e, "endpoint_id": endpoint_id} for e in events])
    sync_triggers(conn)


def endpoints_page(conn: Connection, *, limit: int, offset: int) -> tuple[int, list[RowMapping]]:
    """``(total, rows)`` of the endpoints, by id."""
    return page(conn, _e, ENDPOINT_COLUMNS, [], limit=limit, offset=offset)


def get_endpoint(conn: Connection, endpoint_id: int) -> RowMapping | None:
    """One endpoint's row, or None."""
    return (
        conn.execute(select(*(_e.c[c] for c in ENDPOINT_COLUMNS)).where(_e.c.id == endpoint_id))
        .mappings()
        .first()
    )


def delete_endpoint(conn: Connection, endpoint_id: int) -> bool:
    """Delete an endpoint with its subscriptions, messages and log; False if unknown."""
    for table in (_a, _m, _s):
        conn.execute(delete(table).where(table.c.endpoint_id == endpoint_id))
    sync_triggers(conn)
    return conn.execute(delete(_e).where(_e.c.id == endpoint_id)).rowcount > 0


def update_endpoint(
    conn: Connection,
    endpoint_id: int,
    values: dict[str, Any],
    *,
    subscribed: Sequence[str] | None,
) -> bool:
    """Change an endpoint's columns (``values``) and, with ``subscribed``, its
    subscription rows; False if unknown."""
    if values:
        found = conn.execute(update(_e).where(_e.c.id == endpoint_id).values(**values)).rowcount
    else:
        found = int(get_endpoint(conn, endpoint_id) is not None)
    if not found:
        return False
    if subscribed is not None:
        _subscribe(conn, endpoint_id, subscribed)
    return True


def rotate_secret(
    conn: Connection, endpoint_id: int, *, secret: str, old_valid_until: datetime
) -> bool:
    """Give an endpoint a new secret; the one it had signs too until ``old_valid_until``
    (a rotation during an overlap forgets the oldest). False if unknown."""
    return bool(
        conn.execute(
            update(_e)
            .where(_e.c.id == endpoint_id)
            .values(
                previous_secret=_e.c.secret, previous_secret_until=old_valid_until, secret=secret
            )
        ).rowcount
    )


def add_message(
    conn: Connection,
    endpoint_id: int,
    *,
    event: str,
    recipient: str,
    data: str,
    occurred_at: datetime,
    webhook_id: str,
) -> None:
    """One message for one endpoint, due now (what the triggers write, written by hand)."""
    conn.execute(
        insert(_m).values(
            endpoint_id=endpoint_id,
            event=event,
            recipient=recipient,
            data=data,
            occurred_at=occurred_at,
            state="pending",
            attempts=0,
            webhook_id=webhook_id,
        )
    )


def backlog(conn: Connection) -> tuple[int, datetime | None]:
    """``(count, occurred_at of the oldest)`` of the messages still waiting (every
    endpoint's)."""
    count = conn.execute(
        select(func.count()).select_from(_m).where(_m.c.state == _PENDING)
    ).scalar_one()
    oldest = conn.execute(
        select(_m.c.occurred_at).where(
            _m.c.id == select(func.min(_m.c.id)).where(_m.c.state == _PENDING).scalar_subquery()
        )
    ).scalar()
    return int(count), oldest


def message_counts(conn: Connection, endpoint_id: int) -> dict[str, int]:
    """An endpoint's messages per state (``pending``, ``delivered``, ``failed``)."""
    rows = conn.execute(
        select(_m.c.state, func.count()).where(_m.c.endpoint_id == endpoint_id).group_by(_m.c.state)
    ).all()
    counts = {"pending": 0, "delivered": 0, "failed": 0}
    counts.update({str(state): int(n) for state, n in rows})
    return counts


def attempts_page(
    conn: Connection, endpoint_id: int, *, limit: int, offset: int
) -> tuple[int, list[RowMapping]]:
    """``(total, rows)`` of an endpoint's delivery log, newest first, with each
    message's event."""
    total = conn.execute(
        select(func.count()).select_from(_a).where(_a.c.endpoint_id == endpoint_id)
    ).scalar_one()
    rows = conn.execute(
        select(
            _a.c.id,
            _a.c.message_id,
            _m.c.webhook_id,
            _m.c.event,
            _a.c.attempt,
            _a.c.at,
            _a.c.status_code,
            _a.c.outcome,
            _a.c.error,
            _a.c.duration_ms,
        )
        .join(_m, _m.c.id == _a.c.message_id)
        .where(_a.c.endpoint_id == endpoint_id)
        .order_by(_a.c.id.desc())
        .limit(limit)
        .offset(offset)
    ).mappings()
    return int(total), list(rows)


@dataclass(frozen=True)
class DueMessage:
    """A message whose turn has come: the first unsettled one of its recipient."""

    id: int
    endpoint_id: int
    url: str
    secret: str
    event: str
    data: str
    occurred_at: datetime
    attempts: int
    first_attempt_at: datetime | None
    webhook_id: str
    #: the endpoint's secret before its last rotation, while it still signs
    previous_secret: str | None = None


def claim_due(
    conn: Connection,
    *,
    now: datetime,
    hold_until: datetime,
    limit: int,
    new_id: Callable[[], str],
) -> list[DueMessage]:
    """Up to ``limit`` due messages of enabled endpoints, each the oldest unsettled one
    of its (endpoint, recipient), oldest first; they are held (not due) until
    ``hold_until`` so a later pass does not send them again while they are on their way.
    A message claimed for the first time is given its ``webhook_id`` (``new_id()``),
    kept from then on."""
    earlier = _m.alias("earlier")
    rows = conn.execute(
        select(
            _m.c.id,
            _m.c.endpoint_id,
            _e.c.url,
            _e.c.secret,
            _m.c.event,
            _m.c.data,
            _m.c.occurred_at,
            _m.c.attempts,
            _m.c.first_attempt_at,
            _m.c.webhook_id,
            case((_e.c.previous_secret_until > now, _e.c.previous_secret), else_=None),
        )
        .join(_e, and_(_e.c.id == _m.c.endpoint_id, _e.c.enabled.is_(True)))
        .where(
            _m.c.state == _PENDING,
            or_(_m.c.next_attempt_at.is_(None), _m.c.next_attempt_at <= now),
            ~exists().where(
                earlier.c.endpoint_id == _m.c.endpoint_id,
                earlier.c.recipient == _m.c.recipient,
                earlier.c.state == _PENDING,
                earlier.c.id < _m.c.id,
            ),
        )
        .order_by(_m.c.id)
        .limit(limit)
    ).all()
    due: list[DueMessage] = []
    fresh: list[dict[str, Any]] = []
    for r in rows:
        webhook_id = r[9]
        if webhook_id is None:
            webhook_id = new_id()
            fresh.append({"mid": r[0], "wid": webhook_id})
        due.append(
            DueMessage(
                id=r[0],
                endpoint_id=r[1],
                url=r[2],
                secret=r[3],
                event=r[4],
                data=r[5],
                occurred_at=r[6],
                attempts=r[7],
                first_attempt_at=r[8],
                webhook_id=webhook_id,
                previous_secret=r[10],
            )
        )
    due = _with_metadata(conn, due)
    if due:
        conn.execute(
            update(_m).where(_m.c.id.in_([d.id for d in due])).values(next_attempt_at=hold_until)
        )
    if fresh:
        conn.execute(
            update(_m).where(_m.c.id == bindparam("mid")).values(webhook_id=bindparam("wid")),
            fresh,
        )
    return due


def _with_metadata(conn: Connection, due: list[DueMessage]) -> list[DueMessage]:
    """``due`` with what the outbox triggers cannot know added to their data (one query
    per kind for the batch; what is added never changes, so every attempt sends the same
    bytes): a ``reply.received`` gets the ``delivery_id`` it answers and its
    ``campaign_id`` (null when it matched none), and an event about a direct message
    (``POST /api/v1/messages``) the integrator's ``metadata``."""
    datas = {d.id: json.loads(d.data) for d in due}
    replies = {i: d["reply_id"] for i, d in datas.items() if "reply_id" in d}
    if replies:
        _in, _d = tables.inbound_messages, tables.deliveries
        answered = {
            int(r.id): (r.delivery_id, r.campaign_id)
            for r in conn.execute(
                select(_in.c.id, _in.c.delivery_id, _d.c.campaign_id)
                .select_from(_in.outerjoin(_d, _d.c.id == _in.c.delivery_id))
                .where(_in.c.id.in_(set(replies.values())))
            )
        }
        for i, reply_id in replies.items():
            delivery_id, campaign_id = answered.get(reply_id, (None, None))
            datas[i]["delivery_id"], datas[i]["campaign_id"] = delivery_id, campaign_id
    ids = {i: d["campaign_id"] for i, d in datas.items() if isinstance(d.get("campaign_id"), int)}
    meta: dict[int, Any] = {}
    if ids:
        c = tables.campaigns
        rows = conn.execute(
            select(c.c.id, c.c.message_metadata).where(
                c.c.id.in_(set(ids.values())), c.c.direct.is_(True)
            )
        ).all()
        meta = {int(r.id): r.message_metadata for r in rows}
    out = []
    for d in due:
        data, direct = datas[d.id], ids.get(d.id) in meta
        if direct:
            data["metadata"] = meta[ids[d.id]]
        if direct or d.id in replies:
            d = replace(d, data=json.dumps(data, ensure_ascii=False))
        out.append(d)
    return out


@dataclass(frozen=True)
class AttemptResult:
    """What one attempt came to: ``outcome`` is delivered, retrying (due again at
    ``next_attempt_at``) or failed (given up)."""

    message_id: int
    endpoint_id: int
    attempt: int
    at: datetime
    outcome: str
    status_code: int | None
    error: str | None
    duration_ms: int
    next_attempt_at: datetime | None


def record_attempts(conn: Connection, results: Sequence[AttemptResult]) -> None:
    """Log the attempts, count them by outcome (``outbound_attempts_<outcome>``
    counters) and settle (or reschedule) their messages."""
    if not results:
        return
    by_outcome: dict[str, int] = {}
    for r in results:
        by_outcome[f"outbound_attempts_{r.outcome}"] = (
            by_outcome.get(f"outbound_attempts_{r.outcome}", 0) + 1
        )
    tallies.add_counts(conn, by_outcome)
    conn.execute(
        insert(_a),
        [
            {
                "endpoint_id": r.endpoint_id,
                "message_id": r.message_id,
                "attempt": r.attempt,
                "at": r.at,
                "status_code": r.status_code,
                "error": r.error,
                "outcome": r.outcome,
                "duration_ms": r.duration_ms,
            }
            for r in results
        ],
    )
    for r in results:
        values: dict[str, Any] = {
            "attempts": r.attempt,
            "first_attempt_at": func.coalesce(_m.c.first_attempt_at, r.at),
        }
        if r.outcome == "retrying":
            values["next_attempt_at"] = r.next_attempt_at
        else:
            values.update(state=r.outcome, finished_at=r.at, next_attempt_at=None)
        conn.execute(update(_m).where(_m.c.id == r.message_id).values(**values))


def release(conn: Connection, message_ids: Sequence[int], due_at: datetime | None) -> None:
    """Messages claimed but not tried: due again at ``due_at``, no attempt counted."""
    if message_ids:
        conn.execute(
            update(_m).where(_m.c.id.in_(list(message_ids))).values(next_attempt_at=due_at)
        )


def endpoint_succeeded(conn: Connection, endpoint_id: int) -> None:
    """The failure run of an endpoint ends."""
    conn.execute(
        update(_e).where(_e.c.id == endpoint_id).values(failing_since=None, consecutive_failures=0)
    )


def endpoint_failed(conn: Connection, endpoint_id: int, failures: int, at: datetime) -> RowMapping:
    """Add ``failures`` to an endpoint's failure run (begun at ``at`` if none was
    running); answers its ``failing_since`` and ``consecutive_failures`` after."""
    conn.execute(
        update(_e)
        .where(_e.c.id == endpoint_id)
        .values(
            failing_since=func.coalesce(_e.c.failing_since, at),
            consecutive_failures=_e.c.consecutive_failures + failures,
        )
    )
    row = (
        conn.execute(
            select(_e.c.failing_since, _e.c.consecutive_failures).where(_e.c.id == endpoint_id)
        )
        .mappings()
        .one()
    )
    return row


def disable_endpoint(conn: Connection, endpoint_id: int, reason: str) -> None:
    """Stop sending to an endpoint and writing messages for it (its subscriptions go;
    its unsettled messages wait for a replay)."""
    conn.execute(
        update(_e).where(_e.c.id == endpoint_id).values(enabled=False, disabled_reason=reason)
    )
    _subscribe(conn, endpoint_id, [])


def replay(
    conn: Connection, endpoint_id: int, *, subscribed: Sequence[str], since: datetime | None
) -> int:
    """Enable the endpoint again (its subscriptions back, its failure run forgotten) and
    make its failed messages, and with ``since`` every message that happened since then,
    pending and due now (with those still waiting). Answers how many messages were requeued."""
    conn.execute(
        update(_e)
        .where(_e.c.id == endpoint_id)
        .values(enabled=True, disabled_reason=None, failing_since=None, consecutive_failures=0)
    )
    _subscribe(conn, endpoint_id, subscribed)
    conn.execute(  # the messages still waiting: due now, attempts counted on
        update(_m)
        .where(_m.c.endpoint_id == endpoint_id, _m.c.state == _PENDING)
        .values(next_attempt_at=None)
    )
    which = _m.c.state == "failed"
    if since is not None:
        which = or_(which, and_(_m.c.state == "delivered", _m.c.occurred_at >= since))
    result = conn.execute(
        update(_m)
        .where(_m.c.endpoint_id == endpoint_id, which)
        .values(
            state="pending",
            attempts=0,
            next_attempt_at=None,
            first_attempt_at=None,
            finished_at=None,
        )
    )
    return int(result.rowcount)


def prune_history(conn: Connection, *, before: datetime, limit: int) -> int:
    """Delete up to ``limit`` attempts made before ``before`` and up to ``limit``
    settled (delivered or failed) messages finished before it, oldest first; returns
    how many rows went. Messages still waiting are never touched."""
    attempts = select(_a.c.id).where(_a.c.at < before).order_by(_a.c.id).limit(max(0, limit))
    gone = conn.execute(delete(_a).where(_a.c.id.in_(attempts.scalar_subquery()))).rowcount
    settled = (
        select(_m.c.id)
        .where(_m.c.state != _PENDING, _m.c.finished_at < before)
        .order_by(_m.c.id)
        .limit(max(0, limit))
    )
    gone += conn.execute(delete(_m).where(_m.c.id.in_(settled.scalar_subquery()))).rowcount
    return int(gone or 0)


__all__ = [
    "ENDPOINT_COLUMNS",
    "AttemptResult",
    "DueMessage",
    "add_message",
    "attempts_page",
    "backlog",
    "claim_due",
    "create_endpoint",
    "delete_endpoint",
    "disable_endpoint",
    "endpoint_failed",
    "endpoint_succeeded",
    "endpoints_page",
    "get_endpoint",
    "message_counts",
    "prune_history",
    "record_attempts",
    "release",
    "replay",
    "rotate_secret",
    "update_endpoint",
]
