"""Materialisation: one delivery row per recipient, before anything is sent (DESIGN.md 1).

Bulk and idempotent: list members are read in keyset-paged chunks with Core, rendered,
and inserted with executemany ``INSERT ... ON CONFLICT (campaign_id, target) DO
NOTHING``; targets that already have a row are not rendered again. A crash halfway and
a rerun complete the campaign without duplicates. :func:`materialise` runs in the
caller's transaction; :func:`materialise_committed` commits chunk by chunk and renders
outside its write transactions (big lists on SQLite).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Table, func, select

from campaigns.campaign_file import CampaignSpec
from campaigns.render import ContactData, RenderError, recipient_rng, render_message
from gateway.messages import message_to_dict
from storage import states
from storage.models import Campaign, Contact, Delivery, ListMember
from storage.queries.campaigns import insert_deliveries

_campaigns: Table = Campaign.__table__  # type: ignore[attr-defined]
_contacts: Table = Contact.__table__  # type: ignore[attr-defined]
_members: Table = ListMember.__table__  # type: ignore[attr-defined]
_d: Table = Delivery.__table__  # type: ignore[attr-defined]

#: recipients read, rendered and inserted per round trip
CHUNK = 5000

OPTED_OUT_ERROR = "opted out"


class CampaignMissing(LookupError):
    """The campaign to materialise does not exist."""


@dataclass(frozen=True)
class MaterialiseResult:
    """Rows created by one call (a rerun over a complete campaign creates none)."""

    queued: int
    skipped: int


@dataclass(frozen=True)
class Recipient:
    """One recipient as read for materialisation."""

    target: str
    target_kind: str
    contact_id: int | None
    contact: ContactData
    opted_out: bool


def pick_sender(target: str, instances: Sequence[str]) -> str | None:
    """A stable choice of sender for ``target`` among ``instances`` (order-independent)."""
    if not instances:
        return None
    pool = sorted(set(instances))
    return pool[zlib.crc32(target.encode()) % len(pool)]


def member_page(conn: Connection, list_id: int, *, after: int, limit: int) -> list[Recipient]:
    """Up to ``limit`` members of list ``list_id`` with contact id above ``after``, in order."""
    rows = conn.execute(
        select(
            _contacts.c.id,
            _contacts.c.phone,
            _contacts.c.name,
            _contacts.c.attributes,
            _contacts.c.opted_out,
        )
        .select_from(_members.join(_contacts, _contacts.c.id == _members.c.contact_id))
        .where(_members.c.list_id == list_id, _members.c.contact_id > after)
        .order_by(_members.c.contact_id)
        .limit(limit)
    ).all()
    return [
        Recipient(
            target=r.phone,
            target_kind="phone",
            contact_id=r.id,
            contact=ContactData(phone=r.phone, name=r.name or "", attributes=r.attributes or {}),
            opted_out=bool(r.opted_out),
        )
        for r in rows
    ]


def list_recipients(
    conn: Connection, list_id: int, *, chunk: int = CHUNK
) -> Iterator[list[Recipient]]:
    """The members of list ``list_id`` in chunks, ordered by contact id (keyset paging)."""
    last = 0
    while True:
        page = member_page(conn, list_id, after=last, limit=chunk)
        if not page:
            return
        yield page
        last = page[-1].contact_id or 0


def group_recipients(groups: Sequence[str]) -> list[Recipient]:
    """One recipient per group id (templates see ``name`` = ``phone`` = "" and ``group``)."""
    return [
        Recipient(
            target=g,
            target_kind="group",
            contact_id=None,
            contact=ContactData(attributes={"group": g}),
            opted_out=False,
        )
        for g in dict.fromkeys(groups)
    ]


def _last_senders(conn: Connection, contact_ids: Sequence[int]) -> dict[int, str]:
    """The instance each contact last received a message from (rows with ``sent_at``)."""
    if not contact_ids:
        return {}
    newest = (
        select(_d.c.contact_id, func.max(_d.c.id).label("last_id"))
        .where(
            _d.c.contact_id.in_(contact_ids), _d.c.sent_at.is_not(None), _d.c.sender.is_not(None)
        )
        .group_by(_d.c.contact_id)
        .subquery()
    )
    rows = conn.execute(
        select(_d.c.contact_id, _d.c.sender).join(newest, _d.c.id == newest.c.last_id)
    ).all()
    return {int(r.contact_id): str(r.sender) for r in rows}


def _existing_targets(conn: Connection, campaign_id: int, targets: Sequence[str]) -> set[str]:
    rows = conn.execute(
        select(_d.c.target).where(_d.c.campaign_id == campaign_id, _d.c.target.in_(targets))
    ).scalars()
    return set(rows)


def build_rows(
    spec: CampaignSpec,
    campaign_id: int,
    recipients: Sequence[Recipient],
    *,
    now: datetime,
    senders: dict[str, str | None],
) -> list[dict[str, Any]]:
    """Delivery rows for ``recipients`` (rendered; opted-out and unrenderable skipped)."""
    out: list[dict[str, Any]] = []
    for rcp in recipients:
        row: dict[str, Any] = {
            "campaign_id": campaign_id,
            "target": rcp.target,
            "target_kind": rcp.target_kind,
            "contact_id": rcp.contact_id,
            "sender": senders.get(rcp.target),
            "state": states.QUEUED,
            "attempts": 0,
            "due_at": now,
            "content": {},
            "error": None,
            "queued_at": now,
        }
        if rcp.opted_out:
            row.update(state=states.SKIPPED, error=OPTED_OUT_ERROR, due_at=None)
        else:
            try:
                message = render_message(
                    spec.message, rcp.contact, recipient_rng(campaign_id, rcp.target)
                )
            except RenderError as exc:
                row.update(state=states.SKIPPED, error=exc.reason[:1000], due_at=None)
            else:
                row["content"] = message_to_dict(message)
        out.append(row)
    return out


def _chunks(conn: Connection, spec: CampaignSpec, list_id: int | None) -> Iterator[list[Recipient]]:
    if spec.groups:
        yield group_recipients(spec.groups)
        return
    if list_id is None:
        return
    yield from list_recipients(conn, list_id)


def _load(conn: Connection, campaign_id: int) -> tuple[CampaignSpec, int | None]:
    row = conn.execute(
        select(_campaigns.c.spec, _campaigns.c.list_id).where(_campaigns.c.id == campaign_id)
    ).one_or_none()
    if row is None:
        raise CampaignMissing(f"campaign {campaign_id} does not exist")
    return CampaignSpec.model_validate(row.spec), row.list_id


def _prepare(
    conn: Connection,
    spec: CampaignSpec,
    campaign_id: int,
    chunk: Sequence[Recipient],
    *,
    now: datetime,
    pool: Sequence[str],
) -> list[dict[str, Any]]:
    """The rows still missing for ``chunk``, rendered, with their senders (reads only)."""
    existing = _existing_targets(conn, campaign_id, [r.target for r in chunk])
    todo = [r for r in chunk if r.target not in existing]
    if not todo:
        return []
    senders: dict[str, str | None] = {r.target: pick_sender(r.target, pool) for r in todo}
    if len(pool) > 1:
        last = _last_senders(conn, [r.contact_id for r in todo if r.contact_id is not None])
        for r in todo:
            previous = last.get(r.contact_id) if r.contact_id is not None else None
            if previous in pool:
                senders[r.target] = previous
    return build_rows(spec, campaign_id, todo, now=now, senders=senders)


def _tally(rows: Sequence[dict[str, Any]]) -> MaterialiseResult:
    queued = sum(1 for r in rows if r["state"] == states.QUEUED)
    return MaterialiseResult(queued=queued, skipped=len(rows) - queued)


def materialise(
    conn: Connection, campaign_id: int, *, now: datetime, instances: Sequence[str]
) -> MaterialiseResult:
    """Create the campaign's delivery rows (idempotent, bulk, in the caller's transaction).

    Each contact keeps the sender it last received from when that sender is among
    ``instances``; otherwise a stable hash of the target picks one.
    """
    spec, list_id = _load(conn, campaign_id)
    pool = sorted(set(instances))
    queued = skipped = 0
    for chunk in _chunks(conn, spec, list_id):
        rows = _prepare(conn, spec, campaign_id, chunk, now=now, pool=pool)
        insert_deliveries(conn, rows)
        tally = _tally(rows)
        queued += tally.queued
        skipped += tally.skipped
    return MaterialiseResult(queued=queued, skipped=skipped)


def materialise_committed(
    engine: Engine,
    campaign_id: int,
    *,
    now: datetime,
    instances: Sequence[str],
    chunk: int = CHUNK,
) -> MaterialiseResult:
    """:func:`materialise` in one short write transaction per chunk.

    Reading and rendering happen outside the write transactions, so a list of a million
    contacts never holds SQLite's write lock for long. A crash halfway leaves complete
    chunks; calling it (or :func:`materialise`) again adds the rest. Rows of a campaign
    that is not running yet are not sent, so a start may run this first and then
    :func:`materialise` inside its own transaction, which then finds nothing left to do.
    """
    with engine.connect() as conn:
        spec, list_id = _load(conn, campaign_id)
    pool = sorted(set(instances))
    queued = skipped = 0
    after = 0
    while True:
        with engine.connect() as conn:
            if spec.groups:
                page = group_recipients(spec.groups) if after == 0 else []
            elif list_id is not None:
                page = member_page(conn, list_id, after=after, limit=chunk)
            else:
                page = []
            if not page:
                break
            rows = _prepare(conn, spec, campaign_id, page, now=now, pool=pool)
        if rows:
            with engine.begin() as conn:
                insert_deliveries(conn, rows)
        tally = _tally(rows)
        queued += tally.queued
        skipped += tally.skipped
        after = page[-1].contact_id or 1
    return MaterialiseResult(queued=queued, skipped=skipped)


__all__ = [
    "CHUNK",
    "OPTED_OUT_ERROR",
    "CampaignMissing",
    "MaterialiseResult",
    "Recipient",
    "build_rows",
    "group_recipients",
    "list_recipients",
    "materialise",
    "materialise_committed",
    "member_page",
    "pick_sender",
]
