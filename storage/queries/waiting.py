"""SQL for what waits in a campaign's queue: each sender's first queued row, read by
index probes of ``ix_deliveries_queue`` (a few per sender, never a read of every queued
row), for :mod:`scheduler.holds`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, exists, literal_column, select, update

from storage import states, tables
from storage.queries.sender_values import sender_chunks, senders_cte

_d = tables.deliveries
_c = tables.campaigns
_QUEUED = _d.c.state == literal_column(f"'{states.QUEUED}'")


@dataclass(frozen=True)
class FirstQueued:
    """A sender's first queued row in claim order, and whether rows wait with no due
    time (the rest of an A/B test before its pick)."""

    due_at: datetime | None
    attempts: int
    error: str | None
    undated: bool


def first_queued(
    conn: Connection, campaign_id: int, senders: Sequence[str | None]
) -> dict[str | None, FirstQueued]:
    """Per sender of ``senders`` (None: rows without a sender) that has queued rows in the
    campaign: its first dated queued row and whether undated ones wait.

    Two index probes of ``ix_deliveries_queue`` per sender, as correlated subqueries of
    one statement over the senders (then one read of the first rows by id): a round trip
    per sender made the dispatcher's hold check cost 1,000 statements with 500 senders,
    every few seconds, on the dispatch thread."""
    wanted = list(dict.fromkeys(senders))
    found: dict[str | None, FirstQueued] = {}
    if None in wanted:
        found.update(_first_queued_unassigned(conn, campaign_id))
    for chunk in sender_chunks([s for s in wanted if s is not None]):
        found.update(_first_queued_named(conn, campaign_id, chunk))
    return {s: found[s] for s in wanted if s in found}


def _first_queued_named(
    conn: Connection, campaign_id: int, senders: list[str]
) -> dict[str | None, FirstQueued]:
    who = senders_cte(senders)
    base = (_d.c.campaign_id == campaign_id, _QUEUED, _d.c.sender == who.c.sender)
    first_id = (
        select(_d.c.id)
        .where(*base, _d.c.due_at.is_not(None))
        .order_by(_d.c.due_at, _d.c.id)
        .limit(1)
        .correlate(who)
        .scalar_subquery()
    )
    undated = exists().where(*base, _d.c.due_at.is_(None)).correlate(who)
    probes = conn.execute(
        select(who.c.sender, first_id.label("first_id"), undated.label("undated"))
    ).all()
    ids = [int(r.first_id) for r in probes if r.first_id is not None]
    firsts: dict[int, tuple[Any, ...]] = {}
    if ids:
        rows = conn.execute(
            select(_d.c.id, _d.c.due_at, _d.c.attempts, _d.c.error).where(_d.c.id.in_(ids))
        )
        firsts = {int(r[0]): tuple(r[1:]) for r in rows}
    out: dict[str | None, FirstQueued] = {}
    for sender, fid, waits in probes:
        first = firsts.get(int(fid)) if fid is not None else None
        if first is None and not waits:
            continue
        out[str(sender)] = _first(first, bool(waits))
    return out


def _first_queued_unassigned(conn: Connection, campaign_id: int) -> dict[str | None, FirstQueued]:
    base = (_d.c.campaign_id == campaign_id, _QUEUED, _d.c.sender.is_(None))
    first = conn.execute(
        select(_d.c.due_at, _d.c.attempts, _d.c.error)
        .where(*base, _d.c.due_at.is_not(None))
        .order_by(_d.c.due_at, _d.c.id)
        .limit(1)
    ).first()
    undated = (
        conn.execute(select(_d.c.id).where(*base, _d.c.due_at.is_(None)).limit(1)).first()
        is not None
    )
    if first is None and not undated:
        return {}
    return {None: _first(None if first is None else tuple(first), undated)}


def _first(first: tuple[Any, ...] | None, undated: bool) -> FirstQueued:
    return FirstQueued(
        due_at=None if first is None else first[0],
        attempts=0 if first is None else int(first[1] or 0),
        error=None if first is None else first[2],
        undated=undated,
    )


@dataclass(frozen=True)
class CampaignRow:
    """What the holds read of a campaign row."""

    id: int
    state: str
    state_reason: str | None
    spec: dict[str, Any]
    timezone: str
    start_at: datetime | None
    started_at: datetime | None
    updated_at: datetime | None
    ab_picked: bool


def campaign_rows(conn: Connection, campaign_ids: Sequence[int]) -> list[CampaignRow]:
    """The rows of ``campaign_ids`` (missing ids left out), in one read."""
    if not campaign_ids:
        return []
    c = _c.c
    rows = conn.execute(
        select(
            c.id,
            c.state,
            c.state_reason,
            c.spec,
            c.timezone,
            c.start_at,
            c.started_at,
            c.updated_at,
            c.ab_pick,
        ).where(c.id.in_(list(campaign_ids)))
    )
    return [
        CampaignRow(
            int(r[0]),
            str(r[1]),
            r[2],
            dict(r[3] or {}),
            str(r[4]),
            r[5],
            r[6],
            r[7],
            r[8] is not None,
        )
        for r in rows
    ]


def queued_page(
    conn: Connection, campaign_id: int, *, after: int, limit: int
) -> list[tuple[int, str, str | None, datetime | None, int, str | None, str | None]]:
    """Up to ``limit`` queued rows of the campaign with id above ``after``, by id:
    ``(id, target, sender, due_at, attempts, error, recipient_tz)``."""
    rows = conn.execute(
        select(
            _d.c.id,
            _d.c.target,
            _d.c.sender,
            _d.c.due_at,
            _d.c.attempts,
            _d.c.error,
            _d.c.recipient_tz,
        )
        .where(_d.c.campaign_id == campaign_id, _QUEUED, _d.c.id > after)
        .order_by(_d.c.id)
        .limit(limit)
    )
    return [(int(r[0]), str(r[1]), r[2], r[3], int(r[4] or 0), r[5], r[6]) for r in rows]


def announce(
    conn: Connection,
    held: Sequence[tuple[int, str | None, str | None, datetime | None]],
    *,
    now: datetime,
) -> int:
    """Store each campaign's hold ``(id, kind, words, until)`` where its kind changed
    (the ``campaign.held`` trigger writes the event of a new kind); how many changed."""
    changed = 0
    for cid, kind, words, until in held:
        result = conn.execute(
            update(_c)
            .where(_c.c.id == cid, _c.c.held_kind.is_distinct_from(kind))
            .values(held_kind=kind, held_words=words, held_until=until, held_at=now)
        )
        changed += result.rowcount or 0
    return changed


__all__ = ["CampaignRow", "FirstQueued", "announce", "campaign_rows", "first_queued", "queued_page"]
