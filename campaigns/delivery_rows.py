"""Materialisation: one delivery row per recipient, before anything is sent (DESIGN.md 1).

Bulk and idempotent: list members are read in keyset-paged chunks (once the campaign
has rows, only members whose target has none: an anti-join on the unique index),
rendered, and inserted as driver-ready tuples with ``INSERT ... ON CONFLICT
(campaign_id, target) DO NOTHING``; targets that already have a row are not rendered
again. A crash halfway and a rerun complete the campaign without duplicates.
:func:`materialise` runs in the caller's transaction; :func:`materialise_committed`
commits chunk by chunk and renders outside its write transactions (big lists on
SQLite). Speed and what bounds it: docs/benchmarks.md (``bench/materialise.py``).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Select, Table, func, select

from campaigns import cooldown, variants
from campaigns.campaign_file import CampaignSpec, MessageSpec
from campaigns.delivery_lifecycle import OPTED_OUT_ERROR, SKIP_QUEUED
from campaigns.recipient_time import FirstDue, recipient_zone
from campaigns.render import ContactData, RenderError, recipient_rng, render_message
from campaigns.segments import evaluate_members
from gateway.messages import message_to_dict
from storage import states, tables
from storage.queries import audiences as aq
from storage.queries import deliveries as dq

_campaigns: Table = tables.campaigns
_contacts: Table = tables.contacts
_members: Table = tables.list_members
_audience: Table = tables.audience_members
_d: Table = tables.deliveries

#: recipients read, rendered and inserted per round trip
CHUNK = 5000


class CampaignMissing(LookupError):
    """The campaign to materialise does not exist."""


@dataclass(frozen=True)
class MaterialiseResult:
    """Rows created by one call (a rerun over a complete campaign creates none), and
    queued rows it skipped for the contact cooldown."""

    queued: int
    skipped: int
    cooled: int = 0


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


def audience_recipients(
    conn: Connection, audience: aq.AudienceFilter, *, chunk: int = CHUNK
) -> Iterator[list[Recipient]]:
    """The contacts an audience selects now, in chunks by contact id (keyset paging)."""
    last = 0
    while rows := aq.audience_page(conn, audience, after=last, limit=chunk):
        yield [
            Recipient(
                target=r["phone"],
                target_kind="phone",
                contact_id=int(r["id"]),
                contact=ContactData(
                    phone=r["phone"], name=r["name"] or "", attributes=r["attributes"] or {}
                ),
                opted_out=bool(r["opted_out"]),
            )
            for r in rows
        ]
        last = int(rows[-1]["id"])


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
            "recipient_tz": None,
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


class _LazyRng(random.Random):
    """:func:`campaigns.render.recipient_rng` ``(campaign_id, target)``, seeded on first use.

    Seeding a Mersenne Twister costs more than rendering a short text, and most messages
    never draw (no spintax). Every draw goes through the two primitives ``random()`` and
    ``getrandbits()`` (``choice``, ``shuffle``, ``randint``, ... are built on them), which
    are forwarded to the real generator, so the draws are exactly the eager one's.
    """

    def __init__(self, campaign_id: int, target: str) -> None:  # no seeding here
        self._key = (campaign_id, target)
        self._real: random.Random | None = None
        self.gauss_next = None

    def _rng(self) -> random.Random:
        if self._real is None:
            self._real = recipient_rng(*self._key)
        return self._real

    def random(self) -> float:
        return self._rng().random()

    def getrandbits(self, k: int, /) -> int:
        return self._rng().getrandbits(k)

    def getstate(self) -> tuple[Any, ...]:
        return self._rng().getstate()

    def setstate(self, state: tuple[Any, ...]) -> None:
        self._rng().setstate(state)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def is_static(message: MessageSpec) -> bool:
    """True when ``message`` renders the same for everyone: no ``{`` in any of its texts,
    so neither Jinja2 (``{{``, ``{%``, ``{#``) nor spintax (``{a|b}``) is involved."""
    return not any("{" in s for s in _strings(message.model_dump()))


#: one recipient as the row builder takes it: target, kind, contact id, data, opted out
_Input = tuple[str, str, int | None, ContactData, bool]


class _RowBuilder:
    """Delivery rows of one campaign as driver-ready tuples (:data:`NEW_DELIVERY_COLUMNS`).

    The same rows as :func:`build_rows`, cheaper: the constant values (times, the empty
    content, a static message) are converted once, the RNG is seeded only if drawn from,
    and there are no per-row dicts or statement parameters.
    """

    def __init__(
        self,
        conn: Connection,
        spec: CampaignSpec,
        campaign_id: int,
        *,
        now: datetime,
        pool: Sequence[str],
        start: datetime | None = None,
    ) -> None:
        """``start``: the campaign's start (recipient time: each zone's first due moment
        is its wall time there, not before ``now``)."""
        self.message = spec.message
        self.campaign_id = campaign_id
        self.pool = sorted(set(pool))
        self.content = dq.bind_processor(conn, "content")
        self.now = dq.bind_processor(conn, "due_at")(now)
        self.empty = self.content({})
        # recipient time: each row's zone, and its zone's first due moment (converted once)
        self.fallback_zone = spec.schedule.timezone
        self.first_due: FirstDue | None = None
        self.due_values: dict[str, Any] = {}
        self.convert_due = dq.bind_processor(conn, "due_at")
        if spec.schedule.recipient_timezone:
            self.first_due = FirstDue(start or now, spec.schedule.zone, now)
        self.static: Any = None
        self.choice = VariantChoice(spec, campaign_id, self.content)
        if not self.choice.active and is_static(spec.message):
            rendered = render_message(spec.message, ContactData(), _LazyRng(campaign_id, ""))
            self.static = self.content(message_to_dict(rendered))
        #: the insert's columns: with variants, each row's variant name too
        self.columns = dq.NEW_DELIVERY_COLUMNS + (("variant",) if self.choice.active else ())

    def senders(self, conn: Connection, todo: Sequence[_Input]) -> dict[str, str | None]:
        """The sender of each target: sticky (the last one it got a message from, if in
        the pool), else :func:`pick_sender`."""
        pool = self.pool
        if not pool:
            return {}
        if len(pool) == 1:
            return dict.fromkeys((r[0] for r in todo), pool[0])
        n = len(pool)
        out: dict[str, str | None] = {r[0]: pool[zlib.crc32(r[0].encode()) % n] for r in todo}
        last = _last_senders(conn, [r[2] for r in todo if r[2] is not None])
        if last:
            for target, _kind, contact_id, _data, _opted in todo:
                previous = last.get(contact_id) if contact_id is not None else None
                if previous in pool:
                    out[target] = previous
        return out

    def skipped(self, reason: str) -> tuple[Any, ...]:
        """The tail of a skipped row (state, attempts, due, content, error, created, zone)."""
        return (states.SKIPPED, 0, None, self.empty, reason, self.now, None)

    def zone_and_due(self, target: str, data: ContactData) -> tuple[str | None, Any]:
        """A queued row's recipient zone (None: campaign time) and its due value."""
        if self.first_due is None:
            return None, self.now
        zone = recipient_zone(target, data.attributes, self.fallback_zone)
        due = self.due_values.get(zone)
        if due is None:
            due = self.due_values[zone] = self.convert_due(self.first_due(zone))
        return zone, due

    def rows(
        self, todo: Sequence[_Input], senders: dict[str, str | None]
    ) -> tuple[list[tuple[Any, ...]], int]:
        """The rows for ``todo`` and how many of them are queued."""
        cid, now, content, static = self.campaign_id, self.now, self.content, self.static
        single = self.pool[0] if len(self.pool) == 1 else None
        out: list[tuple[Any, ...]] = []
        append = out.append
        queued = 0
        choice = self.choice
        tail: tuple[Any, ...] = ()
        for target, kind, contact_id, data, opted_out in todo:
            sender = single or senders.get(target)
            spec: MessageSpec | None = self.message
            body = static
            if choice.active:
                name, spec, body = choice.of(target)
                tail = (name,)
            if opted_out:
                skipped = self.skipped(OPTED_OUT_ERROR)
                append((cid, target, kind, contact_id, sender, *skipped, *tail))
                continue
            if body is None and spec is not None:
                try:
                    message = render_message(spec, data, _LazyRng(cid, target))
                except RenderError as exc:
                    skipped = self.skipped(exc.reason[:1000])
                    append((cid, target, kind, contact_id, sender, *skipped, *tail))
                    continue
                body = content(message_to_dict(message))
            zone, due = self.zone_and_due(target, data)
            if spec is None:  # an A/B test's rest: no content and no due time until the pick
                body, due = self.empty, None
            queued_row = (states.QUEUED, 0, due, body, None, now, zone)
            append((cid, target, kind, contact_id, sender, *queued_row, *tail))
            queued += 1
        return out, queued


class VariantChoice:
    """Which variant each recipient of a campaign with ``[[message.variants]]`` gets
    (``campaigns.variants.assign``), and whether it waits for an A/B test's pick: a
    recipient outside the test gets no variant (None) until the winner is known."""

    def __init__(self, spec: CampaignSpec, campaign_id: int, convert: Any) -> None:
        self.campaign_id = campaign_id
        self.message = spec.message
        self.active = bool(spec.message.variants)
        self.test_share = spec.ab.test_share if spec.ab is not None else None
        #: each variant's content when it renders the same for everyone (converted once)
        self.static: dict[str, Any] = {}
        for name, variant in zip(spec.message.variant_names(), spec.message.variants, strict=True):
            if is_static(variant):
                rendered = render_message(variant, ContactData(), _LazyRng(campaign_id, ""))
                self.static[name] = convert(message_to_dict(rendered))

    def of(self, target: str) -> tuple[str | None, MessageSpec | None, Any]:
        """``target``'s variant name, its message and its static content (None when it
        must be rendered); (None, None, None) for a recipient waiting for the pick."""
        cid = self.campaign_id
        if self.test_share is not None and not variants.in_test(cid, target, self.test_share):
            return None, None, None
        name, message = variants.assign(cid, target, self.message)
        return name, message, self.static.get(name)


#: where a campaign's recipients are read: a list's members (``list_members``, by list
#: id) or the campaign's evaluated audience (``audience_members``, by campaign id)
Source = tuple[Table, int]


def _source(campaign_id: int, list_id: int | None, audience: Any) -> Source | None:
    if audience is not None:
        return (_audience, campaign_id)
    return None if list_id is None else (_members, list_id)


def _missing_members(source: Source, campaign_id: int | None) -> Select[Any]:
    """Members of the source whose target has no row of the campaign yet (an anti-join
    on the unique ``(campaign_id, target)`` index: a rerun reads only what is missing);
    every member when ``campaign_id`` is None (a campaign without rows)."""
    members, key = source
    owner = members.c.list_id if members is _members else members.c.campaign_id
    stmt = (
        select(
            members.c.contact_id,
            _contacts.c.phone,
            _contacts.c.name,
            _contacts.c.attributes,
            _contacts.c.opted_out,
        )
        .select_from(members.join(_contacts, _contacts.c.id == members.c.contact_id))
        .where(owner == key)
    )
    if campaign_id is None:
        return stmt
    has_row = (
        select(_d.c.id)
        .where(_d.c.campaign_id == campaign_id, _d.c.target == _contacts.c.phone)
        .exists()
    )
    return stmt.where(~has_row)


def _inputs(rows: Sequence[Any]) -> list[_Input]:
    """Recipients from rows of :func:`_missing_members`."""
    return [
        (
            phone,
            "phone",
            contact_id,
            ContactData(phone=phone, name=name or "", attributes=attributes or {}),
            bool(opted_out),
        )
        for contact_id, phone, name, attributes, opted_out in rows
    ]


def _start_at(conn: Connection, campaign_id: int) -> datetime | None:
    """The campaign's start (an occurrence's own), or None."""
    value = conn.execute(
        select(_campaigns.c.start_at).where(_campaigns.c.id == campaign_id)
    ).scalar_one_or_none()
    return value if isinstance(value, datetime) else None


def _has_rows(conn: Connection, campaign_id: int) -> bool:
    """Whether the campaign has any delivery row yet."""
    first = select(_d.c.id).where(_d.c.campaign_id == campaign_id).limit(1)
    return conn.execute(first).first() is not None


def _missing_page(
    conn: Connection, source: Source, campaign_id: int | None, *, after: int, limit: int
) -> list[_Input]:
    """Keyset page of :func:`_missing_members`: contact ids above ``after``, in order.

    A first materialisation passes ``campaign_id=None``: no row exists, and on
    PostgreSQL the anti-join may be planned as a hash over the campaign's rows, whose
    cost would grow with every page written."""
    members = source[0]
    stmt = (
        _missing_members(source, campaign_id)
        .where(members.c.contact_id > after)
        .order_by(members.c.contact_id)
        .limit(limit)
    )
    return _inputs(conn.execute(stmt).all())


def _group_inputs(conn: Connection, campaign_id: int, groups: Sequence[str]) -> list[_Input]:
    todo = group_recipients(groups)
    existing = _existing_targets(conn, campaign_id, [r.target for r in todo])
    return [
        (r.target, r.target_kind, r.contact_id, r.contact, r.opted_out)
        for r in todo
        if r.target not in existing
    ]


def _load(conn: Connection, campaign_id: int) -> tuple[CampaignSpec, Source | None]:
    """The campaign's spec and where its recipients are read; an audience is evaluated
    into its members here, once (:func:`campaigns.segments.evaluate_members`)."""
    row = conn.execute(
        select(_campaigns.c.spec, _campaigns.c.list_id, _campaigns.c.audience).where(
            _campaigns.c.id == campaign_id
        )
    ).one_or_none()
    if row is None:
        raise CampaignMissing(f"campaign {campaign_id} does not exist")
    if row.audience is not None:
        evaluate_members(conn, campaign_id, row.audience)
    return CampaignSpec.model_validate(row.spec), _source(campaign_id, row.list_id, row.audience)


def _pages(
    conn: Connection, spec: CampaignSpec, campaign_id: int, source: Source | None, chunk: int
) -> Iterator[list[_Input]]:
    """The recipients still missing a row, in chunks, read on ``conn``."""
    if spec.groups:
        yield _group_inputs(conn, campaign_id, spec.groups)
        return
    if source is None:
        return
    after = 0
    probe = campaign_id if _has_rows(conn, campaign_id) else None
    while page := _missing_page(conn, source, probe, after=after, limit=chunk):
        yield page
        if after == 0 and len(page) == chunk:
            dq.refresh_statistics(conn)  # a big list: plan its pages on fresh statistics
        after = page[-1][2] or 0


def materialise(
    conn: Connection, campaign_id: int, *, now: datetime, instances: Sequence[str]
) -> MaterialiseResult:
    """Create the campaign's delivery rows (idempotent, bulk, in the caller's transaction).

    Each contact keeps the sender it last received from when that sender is among
    ``instances``; otherwise a stable hash of the target picks one. Then the queued rows
    of contacts in their cooldown (``safety.contact_cooldown_hours``) are skipped with the
    reason, in one statement (:func:`campaigns.cooldown.skip_cooled`): the start runs
    this last, in the transaction that makes the campaign running.
    """
    spec, source = _load(conn, campaign_id)
    start = _start_at(conn, campaign_id)
    builder = _RowBuilder(conn, spec, campaign_id, now=now, pool=instances, start=start)
    queued = total = 0
    for todo in _pages(conn, spec, campaign_id, source, CHUNK):
        rows, n = builder.rows(todo, builder.senders(conn, todo))
        dq.insert_new_deliveries(conn, rows, builder.columns)
        queued += n
        total += len(rows)
    cooled = cooldown.skip_cooled(conn, campaign_id, spec.cooldown_hours, move=SKIP_QUEUED, now=now)
    return MaterialiseResult(queued=queued, skipped=total - queued, cooled=cooled)


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
    Each chunk is read on a fresh connection (keyset pages: no long read snapshot that
    would keep SQLite's WAL from being checkpointed).
    """
    with engine.begin() as conn:  # an audience is evaluated here, in one statement
        spec, source = _load(conn, campaign_id)
    with engine.connect() as conn:
        start = _start_at(conn, campaign_id)
        builder = _RowBuilder(conn, spec, campaign_id, now=now, pool=instances, start=start)
        probe = campaign_id if _has_rows(conn, campaign_id) else None
    queued = total = 0
    after = 0
    while True:
        with engine.connect() as read:
            if spec.groups:
                page = _group_inputs(read, campaign_id, spec.groups) if after == 0 else []
            elif source is not None:
                page = _missing_page(read, source, probe, after=after, limit=chunk)
            else:
                page = []
            if not page:
                break
            senders = builder.senders(read, page)
        rows, n = builder.rows(page, senders)
        with engine.begin() as conn:
            dq.insert_new_deliveries(conn, rows, builder.columns)
            if after == 0 and len(page) == chunk:
                dq.refresh_statistics(conn)  # a long list: statistics for the next pages' plans
        queued += n
        total += len(rows)
        after = page[-1][2] or 1
    return MaterialiseResult(queued=queued, skipped=total - queued)


__all__ = [
    "CHUNK",
    "CampaignMissing",
    "MaterialiseResult",
    "Recipient",
    "Source",
    "audience_recipients",
    "build_rows",
    "group_recipients",
    "is_static",
    "list_recipients",
    "materialise",
    "materialise_committed",
    "member_page",
    "pick_sender",
]
