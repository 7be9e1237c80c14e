"""Campaign operations shared by the CLI and the HTTP API (each rule lives here once).

State changes go through :func:`campaigns.lifecycle.transition`; refused actions raise
:class:`campaigns.lifecycle.InvalidTransition`, unknown ids :class:`CampaignNotFound`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, Table, insert, select

from campaigns import delivery_lifecycle, lifecycle, variants
from campaigns.campaign_file import (
    DEFAULT_MAX_IDENTICAL_IN_ROW,
    CampaignSpec,
    MessageSpec,
    start_missed,
    stored_spec,
)
from campaigns.cooldown import count_cooled
from campaigns.delivery_rows import (
    Recipient,
    audience_recipients,
    group_recipients,
    list_recipients,
)
from campaigns.deployment_defaults import read_defaults, with_defaults
from campaigns.failure_reasons import plain_reason
from campaigns.gateway_events import settle_unknown
from campaigns.paging import CursorPage, cursors, decode_cursor
from campaigns.reading import (
    ARCHIVED_FILTERS,
    CampaignDetail,
    CampaignNotFound,
    CampaignSummary,
    get_campaign,
    list_campaigns,
)
from campaigns.reading import campaign_row as _row  # the module's own short name
from campaigns.recipient_time import recipient_zone
from campaigns.render import (
    RenderError,
    RenderLimit,
    recipient_rng,
    render_message,
    template_variables,
)
from campaigns.segments import (
    AudienceCount,
    AudienceError,
    CampaignAudience,
    campaign_audience,
    fold_value,
)
from campaigns.unrenderable import Unrenderable
from campaigns.variety import Variety, VarietyCount
from gateway.dialects import refusal_of
from gateway.messages import message_to_dict
from storage import states, tables
from storage.queries import campaigns as q
from storage.queries import deliveries as dq
from storage.queries import instances as iq
from storage.queries import tallies
from storage.queries.paging import KeysetRows
from storage.types import utcnow
from storage.wakeups import notify_work

_campaigns: Table = tables.campaigns
_lists: Table = tables.lists

#: rendered messages shown by ``campaign create``
PREVIEW_SIZE = 5
#: unrenderable recipients listed by name (all are counted)
UNRENDERABLE_LISTED = 1000

#: recipients a preview checks (the first ones of the list)
PREVIEW_SCAN = 5000
#: the spintax seed of previews (the campaign id seeds the stored messages)
PREVIEW_SEED = 0

CANCELLED_ERROR = "campaign cancelled"


class CampaignDeleted(ValueError):
    """The campaign was deleted: its history is kept (reports), nothing acts on it."""

    def __init__(self, campaign_id: int) -> None:
        self.campaign_id = campaign_id
        super().__init__(f"campaign {campaign_id} is deleted: only its reports remain")


class CampaignSetupError(ValueError):
    """A campaign that cannot be created as asked (e.g. its list does not exist).

    ``field`` is the path of the campaign file's field at fault (``list``,
    ``instances``, ``schedule.start``), or None.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class UnrenderableRecipients(CampaignSetupError):
    """Creation refused for recipients whose message cannot render: with ``strict`` any
    of them; without, when no recipient's message renders (``nothing``: nothing would be
    sent). ``causes`` tally them by the variable they lack (``campaigns.unrenderable``)."""

    def __init__(
        self,
        unrenderable: list[tuple[str, str]],
        total: int,
        *,
        reachable: int | None = None,
        causes: Unrenderable | None = None,
        noun: str = "contacts",
    ) -> None:
        self.unrenderable = unrenderable
        self.total = total
        self.reachable = total if reachable is None else reachable
        self.causes = causes.causes() if causes is not None else []
        #: no recipient's message renders: the campaign would send nothing
        self.nothing = total >= self.reachable
        words = causes.words(self.reachable, noun) if causes is not None else ""
        if not words:
            words = "; ".join(f"{t}: {r}" for t, r in unrenderable[:3])
        self.words = words
        if self.nothing:
            text = (
                f"nothing would be sent: {words}. Give the {noun} these values "
                "(edit them, or import them again with the column) or change the message"
            )
        else:
            text = (
                f"{total:,} of {self.reachable:,} {noun} cannot get this message (strict mode "
                f"refuses the campaign): {words}"
            )
        super().__init__(text, "message")


@dataclass(frozen=True)
class PreviewItem:
    """One rendered message as it will be stored and sent."""

    target: str
    name: str
    content: dict[str, Any]
    #: the variant it shows (``[[message.variants]]``), else None
    variant: str | None = None


@dataclass(frozen=True)
class CreatedCampaign:
    """What ``create_campaign`` made."""

    id: int
    state: str
    start_at: datetime
    recipients: int
    preview: list[PreviewItem]
    unrenderable: list[tuple[str, str]]
    unrenderable_count: int = 0
    opted_out: int = 0
    #: what an ``[audience]`` selected at create (None: a list or groups)
    audience: AudienceCount | None = None
    #: recipients messaged within the contact cooldown now (they would be skipped)
    cooldown_excluded: int = 0
    #: distinct rendered messages over a sample, and the warning when they are few
    variety: Variety | None = None
    #: who cannot get the message and why ("coupon is missing for 2 of 9 contacts: ...")
    unrenderable_words: str = ""


@dataclass(frozen=True)
class CampaignPreview:
    """A campaign rendered for its first recipients; nothing stored.

    ``spintax_varies``: the message has spintax, whose picks depend on the campaign id
    given at creation, so the stored messages may use other variants than these.
    """

    name: str
    message_type: str
    start_at: datetime | None
    timezone: str
    list_name: str | None
    recipients_checked: int
    opted_out: int
    preview: list[PreviewItem]
    unrenderable: list[tuple[str, str]]
    unrenderable_count: int
    spintax_varies: bool
    #: what an ``[audience]`` selects now (None: a list or groups)
    audience: AudienceCount | None = None
    #: recipients checked that were messaged within the contact cooldown (would be skipped)
    cooldown_excluded: int = 0
    #: distinct rendered messages over a sample, and the warning when they are few
    variety: Variety | None = None
    #: who cannot get the message and why ("coupon is missing for 2 of 9 contacts: ...")
    unrenderable_words: str = ""


def _list_id(conn: Connection, name: str) -> int | None:
    value = conn.execute(select(_lists.c.id).where(_lists.c.name == name)).scalar_one_or_none()
    return None if value is None else int(value)


def _recipients(
    conn: Connection, spec: CampaignSpec, list_id: int | None, audience: CampaignAudience | None
) -> Any:
    if spec.groups:
        yield group_recipients(spec.groups)
    elif audience is not None:
        yield from audience_recipients(conn, audience.filter)
    elif list_id is not None:
        yield from list_recipients(conn, list_id)


class _SpinWatch(random.Random):
    """An RNG that notes whether a render chose between different spintax options."""

    varied = False

    def choice(self, seq: Any) -> Any:
        if len(set(seq)) > 1:
            self.varied = True
        return super().choice(seq)


@dataclass
class _Scan:
    """One pass over a campaign's recipients: who renders, who does not, the first ones."""

    list_id: int | None = None
    audience: CampaignAudience | None = None
    total: int = 0
    opted_out: int = 0
    cooled: int = 0
    bad: int = 0
    unrenderable: list[tuple[str, str]] = field(default_factory=list)
    first: list[Recipient] = field(default_factory=list)
    spintax_varies: bool = False
    variety: VarietyCount = field(default_factory=VarietyCount)
    #: with ``targets``: each recipient that renders, ``(target, zone)`` (the zone in
    #: recipient time, else None), for the send-time estimate
    sendable: list[tuple[str, str | None]] | None = None
    #: the unrenderable recipients by cause (the variable they lack)
    causes: Unrenderable = field(default_factory=Unrenderable)
    #: what the recipients are called in words ("contacts", "groups")
    noun: str = "contacts"

    def audience_count(self) -> AudienceCount | None:
        """The audience's count, with the recipients the cooldown excludes."""
        if self.audience is None:
            return None
        return replace(self.audience.count, cooldown=self.cooled)

    def unrenderable_words(self) -> str:
        """ "coupon is missing for 2 of 9 contacts: Ana, Bob" ("" when all render)."""
        return self.causes.words(self.total - self.opted_out, self.noun)

    def refusal(self) -> UnrenderableRecipients:
        """The refusal of a create for the recipients that cannot render."""
        return UnrenderableRecipients(
            self.unrenderable,
            self.bad,
            reachable=self.total - self.opted_out,
            causes=self.causes,
            noun=self.noun,
        )


def _scan(
    conn: Connection,
    spec: CampaignSpec,
    *,
    first: int,
    now: datetime,
    at_most: int | None = None,
    targets: bool = False,
) -> _Scan:
    """Check every recipient (the first ``at_most``) renders; keep the first ``first``
    (and with ``targets`` every one that renders, with its recipient zone).

    The one rule for what creation and preview report: opted-out recipients are skipped,
    a recipient whose message cannot render is listed with the reason, recipients
    messaged within the contact cooldown at ``now`` are counted (they would be skipped).
    """
    out = _Scan()
    if spec.list is not None:
        out.list_id = _list_id(conn, spec.list)
        if out.list_id is None:
            raise CampaignSetupError(
                f"list {spec.list!r} does not exist (import contacts into it first)", "list"
            )
    if spec.audience is not None:
        try:
            out.audience = campaign_audience(conn, spec.audience)
        except AudienceError as exc:
            raise CampaignSetupError(str(exc), exc.field) from None
    watch = _SpinWatch(0)  # whether a message renders does not depend on the spintax choices
    needed = sorted({v for m in _messages(spec) for v in template_variables(m)})
    out.noun = "groups" if spec.groups else "contacts"
    zoned = spec.schedule.recipient_timezone
    if targets:
        out.sendable = []
    chunk: list[Recipient]
    for chunk in _recipients(conn, spec, out.list_id, out.audience):
        if spec.cooldown_hours > 0:
            checked = chunk if at_most is None else chunk[: max(0, at_most - out.total)]
            ids = [r.contact_id for r in checked if r.contact_id is not None and not r.opted_out]
            out.cooled += count_cooled(conn, ids, spec.cooldown_hours, now=now)
        for rcp in chunk:
            if at_most is not None and out.total >= at_most:
                out.spintax_varies = watch.varied
                return out
            out.total += 1
            if rcp.opted_out:
                out.opted_out += 1
                continue
            try:
                for message in _messages(spec):  # each one a recipient may get renders
                    rendered = render_message(message, rcp.contact, watch)
                if out.variety.sampled < out.variety.limit:
                    mine = variants.message_for(spec, 0, rcp.target)
                    if mine is not spec.message:  # variants: the recipient's own
                        rendered = render_message(mine, rcp.contact, watch)
                    out.variety.add(message_to_dict(rendered))
            except RenderLimit as exc:  # the template's fault, not this recipient's: stop
                raise CampaignSetupError(
                    f"the message cannot be rendered: {exc.reason}", "message"
                ) from None
            except RenderError as exc:
                out.bad += 1
                out.causes.add(rcp.contact, rcp.target, exc.reason, needed)
                if len(out.unrenderable) < UNRENDERABLE_LISTED:
                    out.unrenderable.append((rcp.target, exc.reason))
                continue
            if out.sendable is not None:
                zone = (
                    recipient_zone(rcp.target, rcp.contact.attributes, spec.schedule.timezone)
                    if zoned
                    else None
                )
                out.sendable.append((rcp.target, zone))
            if len(out.first) < first:
                out.first.append(rcp)
    out.spintax_varies = watch.varied
    return out


def _messages(spec: CampaignSpec) -> list[MessageSpec]:
    """The messages a recipient may get: every variant (an A/B test's rest may get any
    winner), or the one message."""
    return list(spec.message.variants) or [spec.message]


def _preview_items(spec: CampaignSpec, seed: int, recipients: list[Recipient]) -> list[PreviewItem]:
    return [
        PreviewItem(
            rcp.target,
            rcp.contact.name,
            message_to_dict(
                render_message(
                    variants.message_for(spec, seed, rcp.target),
                    rcp.contact,
                    recipient_rng(seed, rcp.target),
                )
            ),
            variants.variant_for(spec, seed, rcp.target),
        )
        for rcp in recipients
    ]


def preview_campaign(
    engine: Engine,
    spec: CampaignSpec,
    *,
    limit: int = PREVIEW_SIZE,
    default_cooldown_hours: float = 0.0,
    now: datetime | None = None,
    default_max_identical: int = DEFAULT_MAX_IDENTICAL_IN_ROW,
) -> CampaignPreview:
    """Render the first ``limit`` recipients' messages without storing anything.

    Checks the first :data:`PREVIEW_SCAN` recipients with the rules of
    :func:`create_campaign`. Spintax picks are seeded by the campaign id, which exists
    only once the campaign is created: when the message has spintax
    (``spintax_varies``) the preview shows one possible variant per recipient and
    ``campaign create`` shows the ones that will be sent.
    """
    spec = spec.with_cooldown_default(default_cooldown_hours)
    spec = spec.with_identical_default(default_max_identical)
    with engine.connect() as conn:
        scan = _scan(conn, spec, first=limit, now=now or utcnow(), at_most=PREVIEW_SCAN)
    return CampaignPreview(
        name=spec.name,
        message_type=spec.message.type,
        start_at=spec.start_at_utc(),
        timezone=spec.schedule.timezone,
        list_name=spec.list,
        recipients_checked=scan.total,
        opted_out=scan.opted_out,
        preview=_preview_items(spec, PREVIEW_SEED, scan.first),
        unrenderable=scan.unrenderable,
        unrenderable_count=scan.bad,
        spintax_varies=scan.spintax_varies,
        audience=scan.audience_count(),
        cooldown_excluded=scan.cooled,
        variety=scan.variety.result(spec.max_identical_in_row),
        unrenderable_words=scan.unrenderable_words(),
    )


@dataclass(frozen=True)
class RecipientCounts:
    """Every recipient of a campaign file checked now, as a create would: how many, and
    how many of them are excluded (opted out, in the contact cooldown) or cannot render."""

    recipients: int
    opted_out: int
    cooldown_excluded: int
    unrenderable: int
    #: what an ``[audience]`` selects (None: a list or groups)
    audience: AudienceCount | None = None
    #: each recipient that renders: ``(target, zone in recipient time or None)``
    sendable: list[tuple[str, str | None]] = field(default_factory=list)
    #: who cannot get the message and why ("coupon is missing for 2 of 9 contacts: ...")
    unrenderable_words: str = ""

    @property
    def messages(self) -> int:
        """The messages that would be sent."""
        excluded = self.opted_out + self.cooldown_excluded + self.unrenderable
        return max(0, self.recipients - excluded)


def count_recipients(
    engine: Engine,
    spec: CampaignSpec,
    *,
    default_cooldown_hours: float = 0.0,
    now: datetime | None = None,
) -> RecipientCounts:
    """Check every recipient of ``spec`` with the rules of :func:`create_campaign`
    (nothing stored); :class:`CampaignSetupError` as a create would raise it."""
    spec = spec.with_cooldown_default(default_cooldown_hours)
    with engine.connect() as conn:
        scan = _scan(conn, spec, first=0, now=now or utcnow(), targets=True)
    return RecipientCounts(
        recipients=scan.total,
        opted_out=scan.opted_out,
        cooldown_excluded=scan.cooled,
        unrenderable=scan.bad,
        audience=scan.audience_count(),
        sendable=scan.sendable or [],
        unrenderable_words=scan.unrenderable_words(),
    )


def _check_senders(conn: Connection, spec: CampaignSpec) -> None:
    """Every sender the campaign names must be one gatecast has a record of and that
    still exists at the gateway (not ``gone``); the error lists the usable ones."""
    if not spec.instances:
        return
    states = {i: h.state for i, h in iq.health(conn, spec.instances).items()}
    unknown = [i for i in spec.instances if i not in states]
    gone = [i for i in spec.instances if states.get(i) == iq.GONE]
    if not unknown and not gone:
        return
    problems = []
    if unknown:
        problems.append(f"gatecast has no sender instance {', '.join(unknown)}")
    if gone:
        problems.append(
            f"{', '.join(gone)} no longer {'exists' if len(gone) == 1 else 'exist'} at the "
            "gateway (gone)"
        )
    usable = iq.usable_ids(conn)
    choice = (
        f"the usable ones: {', '.join(usable)}"
        if usable
        else "no sender is usable now (create and link one first)"
    )
    raise CampaignSetupError(
        f"instances: {'; '.join(problems)}; {choice}. "
        "Omit instances to send through every linked sender.",
        "instances",
    )


def _check_kind(spec: CampaignSpec, gateway_kind: str) -> None:
    """Refuse a message kind the configured gateway cannot send (docs/architecture.md,
    the gateway-kinds decision): at create, never at send time."""
    for message in _messages(spec):
        reason = refusal_of(gateway_kind, message.type)
        if reason is not None:
            raise CampaignSetupError(reason, field="message.type")


#: the senders check, for the other ways of creating a campaign (direct messages)
check_senders = _check_senders


def _check_start(spec: CampaignSpec, now: datetime) -> None:
    """A start already missed (beyond the grace) would only fail: refuse it now."""
    start_at = spec.start_at_utc()
    grace = spec.schedule.missed_grace_minutes
    if start_at is None or not start_missed(start_at, now, grace):
        return
    zone = spec.schedule.zone
    shown = f"{start_at.astimezone(zone):%Y-%m-%d %H:%M}"
    current = f"{now.astimezone(zone):%Y-%m-%d %H:%M}"
    raise CampaignSetupError(
        f"schedule.start: {shown} {spec.schedule.timezone} is in the past (it is now "
        f"{current} {spec.schedule.timezone}); omit start to send now, or give a later time",
        "schedule.start",
    )


def insert_draft(
    conn: Connection, spec: CampaignSpec, *, now: datetime, start_at: datetime, **columns: Any
) -> int:
    """Store ``spec`` as a ``draft`` campaign starting at ``start_at`` (``columns``: the
    others, e.g. ``list_id`` or ``audience``); its id. The caller moves it on."""
    return int(
        conn.execute(
            insert(_campaigns)
            .values(
                name=spec.name,
                state=lifecycle.DRAFT,
                spec=spec.model_dump(mode="json"),
                message_type=spec.message.type,
                timezone=spec.schedule.timezone,
                start_at=start_at,
                cron=spec.schedule.cron,
                created_at=now,
                updated_at=now,
                **columns,
            )
            .returning(_campaigns.c.id)
        ).scalar_one()
    )


def create_campaign(
    engine: Engine,
    spec: CampaignSpec,
    *,
    strict: bool = False,
    allow_unrenderable: bool = False,
    now: datetime | None = None,
    default_cooldown_hours: float = 0.0,
    default_max_identical: int = DEFAULT_MAX_IDENTICAL_IN_ROW,
    gateway_kind: str = "spec",
) -> CreatedCampaign:
    """Store a campaign in state ``scheduled`` (start: the file's, else ``now``).

    Refused with :class:`CampaignSetupError` naming the field: a list that does not
    exist, an ``[audience]`` naming a segment, list, tag or attribute that does not exist
    or selecting nobody (a segment is expanded into the stored audience), a sender
    instance gatecast has no record of, a start already missed (later
    than ``schedule.missed_grace_minutes`` ago), a message kind the gateway
    (``gateway_kind``, the ``GATECAST_GATEWAY_KIND`` setting the faces pass) cannot send.

    Renders every recipient once to list those whose message cannot render (they will be
    skipped with the reason); with ``strict`` any such recipient refuses the campaign and
    nothing is stored. When no recipient's message renders (each one that is not opted
    out lacks a variable: the campaign would send nothing) it is refused too, saying which
    variables are missing for whom (:class:`UnrenderableRecipients`), unless
    ``allow_unrenderable`` (e.g. a recurrence whose contacts get the values later).
    The preview shows the first messages exactly as they will be sent.
    An omitted ``safety.contact_cooldown_hours`` is stored as ``default_cooldown_hours``
    (the ``GATECAST_CONTACT_COOLDOWN_HOURS`` setting the faces pass), an omitted
    ``safety.max_identical_in_row`` as ``default_max_identical``
    (``GATECAST_MAX_IDENTICAL_IN_ROW``). ``variety`` counts the distinct messages of
    the first recipients and warns when they are few (``campaigns.variety``).
    The render pass only reads, so a big list never holds the database's write lock.
    A file without ``[pace]`` or a window gets the deployment's stored defaults
    (``campaigns.deployment_defaults``, decision 65), kept in the stored file.
    """
    now = now or utcnow()
    spec = with_defaults(spec, read_defaults(engine))
    spec = spec.with_cooldown_default(default_cooldown_hours)
    spec = spec.with_identical_default(default_max_identical)
    start_at = spec.start_at_utc() or now
    _check_start(spec, now)
    _check_kind(spec, gateway_kind)
    with engine.connect() as conn:
        _check_senders(conn, spec)
        scan = _scan(conn, spec, first=PREVIEW_SIZE, now=now)
    nothing_renders = scan.bad and scan.bad >= scan.total - scan.opted_out
    if scan.bad and (strict or (nothing_renders and not allow_unrenderable)):
        raise scan.refusal()
    with engine.begin() as conn:
        campaign_id = insert_draft(
            conn,
            spec,
            now=now,
            start_at=start_at,
            list_id=scan.list_id,
            audience=None if scan.audience is None else scan.audience.definition,
        )
        lifecycle.transition(conn, campaign_id, lifecycle.SCHEDULED, now=now)
    return CreatedCampaign(
        id=campaign_id,
        state=lifecycle.SCHEDULED,
        start_at=start_at,
        recipients=scan.total,
        preview=_preview_items(spec, campaign_id, scan.first),
        unrenderable=scan.unrenderable,
        unrenderable_count=scan.bad,
        opted_out=scan.opted_out,
        audience=scan.audience_count(),
        cooldown_excluded=scan.cooled,
        variety=scan.variety.result(spec.max_identical_in_row),
        unrenderable_words=scan.unrenderable_words(),
    )


def campaign_counts(conn_or_engine: Connection | Engine, campaign_id: int) -> dict[str, int]:
    """Rows per delivery state for one campaign."""
    if isinstance(conn_or_engine, Connection):
        return tallies.delivery_counts(conn_or_engine, campaign_id)
    with conn_or_engine.connect() as conn:
        return tallies.delivery_counts(conn, campaign_id)


def campaign_state(engine: Engine, campaign_id: int) -> tuple[str, str | None] | None:
    """``(state, reason)`` of a campaign, or None when it does not exist."""
    with engine.connect() as conn:
        try:
            r = _row(conn, campaign_id)
        except CampaignNotFound:
            return None
    return str(r.state), r.state_reason


def campaign_instances(engine: Engine, campaign_id: int) -> list[str]:
    """The senders the campaign's spec names (empty: any usable sender; or no campaign)."""
    with engine.connect() as conn:
        try:
            r = _row(conn, campaign_id)
        except CampaignNotFound:
            return []
    return list(stored_spec(r.spec or {}).instances)


def reply_stats(engine: Engine, campaign_id: int) -> tuple[int, int]:
    """``(replies, opted_out)``: the campaign's rows with a reply, and those whose contact
    opted out."""
    with engine.connect() as conn:
        return q.replied_count(conn, campaign_id), q.opted_out_count(conn, campaign_id)


def _state(conn: Connection, campaign_id: int) -> str:
    """The state of a campaign an action may change (:class:`CampaignDeleted` if deleted)."""
    row = _row(conn, campaign_id)
    if row.deleted_at is not None:
        raise CampaignDeleted(campaign_id)
    return str(row.state)


def pause_campaign(
    engine: Engine, campaign_id: int, reason: str = "paused by user", *, now: datetime | None = None
) -> str:
    """Pause a scheduled or running campaign; returns the new state."""
    with engine.begin() as conn:
        _state(conn, campaign_id)
        lifecycle.transition(
            conn, campaign_id, lifecycle.PAUSED, reason=reason, now=now, action="paused"
        )
    return lifecycle.PAUSED


def resume_campaign(engine: Engine, campaign_id: int, *, now: datetime | None = None) -> str:
    """Resume a paused campaign: running if it had started, else scheduled again."""
    with engine.begin() as conn:
        _state(conn, campaign_id)
        return lifecycle.resume(conn, campaign_id, now=now)


def cancel_campaign(engine: Engine, campaign_id: int, *, now: datetime | None = None) -> int:
    """Cancel a campaign; its queued rows become skipped ("campaign cancelled").

    Returns how many rows were skipped. Rows being sent right now finish normally.
    """
    now = now or utcnow()
    with engine.begin() as conn:
        _state(conn, campaign_id)
        lifecycle.transition(
            conn, campaign_id, lifecycle.CANCELLED, reason="cancelled", now=now, action="cancelled"
        )
        return q.skip_queued(
            conn, campaign_id, CANCELLED_ERROR, move=delivery_lifecycle.SKIP_QUEUED, now=now
        )


@dataclass(frozen=True)
class RetryOutcome:
    """What a retry did: rows re-queued, and the ``unknown`` rows it left alone and why."""

    requeued: int
    #: ``unknown`` rows settled from stored evidence (a status event for their recipient
    #: and sender in the attempt's window) instead of being sent again
    settled: int = 0
    #: ``unknown`` rows attempted less than the settle period ago: their evidence may
    #: still come, so they are left alone until ``waiting_until``
    waiting: int = 0
    waiting_until: datetime | None = None

    @property
    def left_alone(self) -> int:
        """``unknown`` rows not re-queued."""
        return self.settled + self.waiting

    def describe(self) -> str:
        """The ``unknown`` rows left alone and why, in words ("" when none)."""
        parts: list[str] = []
        if self.settled:
            parts.append(
                f"{self.settled} settled from the gateway's status events (they had left: "
                "not sent again)"
            )
        if self.waiting:
            until = self.waiting_until.isoformat() if self.waiting_until else "later"
            parts.append(
                f"{self.waiting} attempted too recently to know (their status events may "
                f"still come): retry them after {until}"
            )
        if not parts:
            return ""
        return f"{self.left_alone} unknown recipient(s) left alone: " + "; ".join(parts)


def retry_campaign(
    engine: Engine,
    campaign_id: int,
    *,
    include_unknown: bool = False,
    settle: timedelta = delivery_lifecycle.UNKNOWN_SETTLE_PERIOD,
    now: datetime | None = None,
) -> RetryOutcome:
    """Re-queue failed recipients (and ambiguous ``unknown`` ones if asked), due now.

    Rows already sent, delivered or read are never touched. With ``include_unknown``,
    ``unknown`` rows are first settled from the evidence stored
    (:func:`campaigns.gateway_events.settle_unknown`), and those whose attempt started
    less than ``settle`` ago are left alone (their evidence may still come); only the
    rest are sent again. A completed, failed or paused campaign becomes running again.
    """
    now = now or utcnow()
    move = delivery_lifecycle.RETRY_UNKNOWN if include_unknown else delivery_lifecycle.RETRY
    settled = waiting = 0
    waiting_until: datetime | None = None
    with engine.begin() as conn:
        current = _state(conn, campaign_id)
        if current in (lifecycle.CANCELLED, lifecycle.DRAFT):
            raise lifecycle.InvalidTransition(campaign_id, current, lifecycle.RUNNING)
        cutoff: datetime | None = None
        if include_unknown:
            before = tallies.delivery_counts(conn, campaign_id)[states.UNKNOWN]
            settle_unknown(conn, now=now, since=_EPOCH)
            settled = before - tallies.delivery_counts(conn, campaign_id)[states.UNKNOWN]
            cutoff = now - settle
            waiting, latest = q.unknown_waiting(conn, campaign_id, attempted_after=cutoff)
            waiting_until = latest + settle if latest is not None else None
        n = q.requeue(conn, campaign_id, move, now=now, unknown_attempted_before=cutoff)
        if n and current in (lifecycle.COMPLETED, lifecycle.FAILED, lifecycle.PAUSED):
            lifecycle.transition(
                conn, campaign_id, lifecycle.RUNNING, reason=f"retrying {n} recipient(s)", now=now
            )
        elif n:  # requeued in a running campaign: wake the workers (the transition does too)
            notify_work(conn)
    return RetryOutcome(n, settled, waiting, waiting_until)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --- deliveries and progress as the faces read them -------------------------------------------


@dataclass(frozen=True)
class DeliveryRecord:
    """One delivery row (no lease or rendered payload internals)."""

    id: int
    campaign_id: int
    target: str
    target_kind: str
    contact_id: int | None
    sender: str | None
    state: str
    attempts: int
    message_id: str | None
    error: str | None
    error_code: str | None
    due_at: datetime | None
    queued_at: datetime
    sent_at: datetime | None
    delivered_at: datetime | None
    read_at: datetime | None
    failed_at: datetime | None
    replied_at: datetime | None
    reply_text: str | None
    #: the first button or list row tapped in answer: its id and title (None: no tap)
    tapped_button_id: str | None
    tapped_row_id: str | None
    tapped_title: str | None
    #: the contact's name (None for a group or an unnamed contact)
    name: str | None = None
    #: the error in plain words (``campaigns.failure_reasons``)
    reason: str | None = None


_DELIVERY_COLUMNS = tuple(
    f.name for f in fields(DeliveryRecord) if f.name not in ("name", "reason")
)


#: one page of deliveries and how many match in all
DeliveryPage = CursorPage[DeliveryRecord]

#: a filtered listing (a target, a search, replied or not) counts its matches up to this
#: many; a listing by campaign and state reads its exact total from the kept counts
DELIVERY_COUNT_CAP = 10_000


def deliveries_page(
    engine: Engine,
    *,
    campaign_id: int | None = None,
    in_states: Sequence[str] | None = None,
    target: str | None = None,
    search: str | None = None,
    replied: bool | None = None,
    limit: int,
    offset: int = 0,
    cursor: str | None = None,
) -> DeliveryPage:
    """Deliveries of one campaign (or all) in ``in_states`` whose target contains
    ``target``, by id, with the contact's name and the error in plain words. ``search``:
    a name (folded as the contact search folds it) or a number's digits; ``replied``:
    only rows with (True) or without (False) a reply. The page starts at ``cursor`` (a
    ``next_cursor`` or ``prev_cursor`` of an earlier page, or "last"; flat cost), or
    ``offset`` rows in (the old way: a full count and a skip, slower as rows grow).
    :class:`CampaignNotFound` for an unknown ``campaign_id``; ``BadCursor`` for a
    cursor this listing did not give out."""
    at = decode_cursor("deliveries", cursor)
    found = None
    if search and search.strip():
        digits = "".join(ch for ch in search if ch.isdigit())
        found = (digits, fold_value(search))
    wanted = dq.DeliveryFilter(campaign_id, in_states, target, found, replied)
    with engine.connect() as conn:
        if campaign_id is not None:
            _row(conn, campaign_id)
        if offset:
            total, rows = dq.deliveries_page(
                conn, _DELIVERY_COLUMNS, wanted, limit=limit + 1, offset=offset
            )
            keyed = KeysetRows(rows[:limit], True, len(rows) > limit)
            exact = True
        else:
            total, exact, keyed = dq.deliveries_keyset(
                conn,
                _DELIVERY_COLUMNS,
                wanted,
                limit=limit,
                at=at,
                count_cap=DELIVERY_COUNT_CAP,
            )
        rows = keyed.rows
        names = dq.contact_names(conn, [r["contact_id"] for r in rows if r["contact_id"]])
    after, before = cursors("deliveries", keyed, [int(r["id"]) for r in rows])
    return DeliveryPage(
        [
            DeliveryRecord(
                **r,
                name=names.get(r["contact_id"]) if r["contact_id"] else None,
                reason=plain_reason(r["error"], r["error_code"]),
            )
            for r in rows
        ],
        total,
        total_exact=exact,
        next_cursor=after,
        prev_cursor=before,
    )


@dataclass(frozen=True)
class ProgressPoint:
    """Cumulative counts at one moment."""

    at: datetime
    sent: int
    delivered: int
    read: int
    failed: int


@dataclass(frozen=True)
class CampaignProgress:
    """Counts per delivery state and a cumulative timeline; ``done`` once the campaign
    is final and no row waits or is being sent."""

    id: int
    state: str
    state_reason: str | None
    total: int
    counts: dict[str, int]
    done: bool
    timeline: list[ProgressPoint]


#: campaign states that never send again on their own
_FINAL = (lifecycle.COMPLETED, lifecycle.CANCELLED, lifecycle.FAILED)


def campaign_progress(engine: Engine, campaign_id: int, points: int = 30) -> CampaignProgress:
    """Counts per state and a cumulative sent/delivered/read/failed timeline of ``points``
    moments from the first send to the latest change; :class:`CampaignNotFound` if none."""
    detail = get_campaign(engine, campaign_id)
    timeline: list[ProgressPoint] = []
    with engine.connect() as conn:
        first, last = q.progress_bounds(conn, campaign_id)
        if first is not None and last is not None:
            span = max(last - first, timedelta(seconds=1))
            moments = [first + span * i / (points - 1) for i in range(points)]
            counts = q.progress_counts(conn, campaign_id, moments)
            timeline = [ProgressPoint(at, *c) for at, c in zip(moments, counts, strict=True)]
    open_rows = sum(detail.counts.get(s, 0) for s in delivery_lifecycle.OPEN)
    return CampaignProgress(
        id=detail.id,
        state=detail.state,
        state_reason=detail.state_reason,
        total=detail.total,
        counts=detail.counts,
        done=detail.state in _FINAL and open_rows == 0,
        timeline=timeline,
    )


__all__ = [
    "ARCHIVED_FILTERS",
    "CANCELLED_ERROR",
    "PREVIEW_SCAN",
    "PREVIEW_SEED",
    "PREVIEW_SIZE",
    "CampaignDeleted",
    "CampaignDetail",
    "CampaignNotFound",
    "CampaignPreview",
    "CampaignProgress",
    "CampaignSetupError",
    "CampaignSummary",
    "CreatedCampaign",
    "DeliveryPage",
    "DeliveryRecord",
    "PreviewItem",
    "ProgressPoint",
    "RecipientCounts",
    "RetryOutcome",
    "UnrenderableRecipients",
    "campaign_counts",
    "campaign_instances",
    "campaign_progress",
    "campaign_state",
    "cancel_campaign",
    "check_senders",
    "count_recipients",
    "create_campaign",
    "deliveries_page",
    "get_campaign",
    "insert_draft",
    "list_campaigns",
    "pause_campaign",
    "preview_campaign",
    "reply_stats",
    "resume_campaign",
    "retry_campaign",
]
