"""The read side of campaigns: a listing and one campaign, as the faces show them.

Kept apart from :mod:`campaigns.service` (which re-exports every name here) so that a
command that only reads (``gatecast campaign show``, ``campaign list``) does not import
the write path's domain (rendering, audiences, materialisation, the spec's pydantic
models and Jinja): docs/architecture.md, decision 53.

:func:`get_campaign` validates the stored spec (:func:`campaigns.campaign_file.stored_spec`)
for the API, the dashboard and ``--json``. :func:`campaign_page` is what ``campaign show``
prints: the stored spec read as stored (``CampaignSpec.model_dump(mode="json")`` of a
spec validated when it was written), falling back to validating it when it is not the
shape a current spec is dumped as, or when it has variants or an A/B test (their
comparison needs the validated message).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Connection, Engine, Table, func, select

from campaigns.paging import Page
from storage import states, tables
from storage.queries import tallies

if TYPE_CHECKING:
    from campaigns.campaign_file import CampaignSpec

_campaigns: Table = tables.campaigns
_lists: Table = tables.lists

#: which campaigns a listing shows by their archive mark
ARCHIVED_FILTERS = ("no", "only", "any")


class CampaignNotFound(LookupError):
    """No campaign with that id."""

    def __init__(self, campaign_id: int) -> None:
        self.campaign_id = campaign_id
        super().__init__(f"campaign {campaign_id} does not exist")


@dataclass(frozen=True)
class CampaignSummary:
    """A campaign in a listing."""

    id: int
    name: str
    state: str
    message_type: str
    list_name: str | None
    start_at: datetime | None
    cron: str | None
    created_at: datetime
    total: int
    counts: dict[str, int]
    #: the ``[audience]`` in force by names (a segment expanded), None for a list or groups
    audience: dict[str, Any] | None = None
    #: when it was archived (hidden from the default list), None when it is not
    archived_at: datetime | None = None
    timezone: str = "UTC"


@dataclass(frozen=True)
class CampaignDetail:
    """One campaign with its spec, times and counts per delivery state."""

    id: int
    name: str
    state: str
    state_reason: str | None
    message_type: str
    list_name: str | None
    timezone: str
    start_at: datetime | None
    cron: str | None
    parent_id: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    spec: CampaignSpec
    counts: dict[str, int] = field(default_factory=dict)
    #: the ``[audience]`` in force by names (a segment expanded), None for a list or groups
    audience: dict[str, Any] | None = None
    archived_at: datetime | None = None
    #: when it was deleted (campaigns.archive.delete_campaign); its rows stay for reports
    deleted_at: datetime | None = None
    #: the A/B variants compared, the test and its pick (``campaigns.variants``); {} without
    variants: dict[str, Any] = field(default_factory=dict)
    #: its follow-up steps, each with its rows' counts per state (campaigns.followups)
    steps: list[Any] = field(default_factory=list)

    @property
    def total(self) -> int:
        """All delivery rows."""
        return sum(self.counts.values())


@dataclass(frozen=True)
class SpecView:
    """What ``campaign show`` prints of a campaign's spec, in plain values."""

    groups: tuple[str, ...]
    instances: tuple[str, ...]
    #: the daily window as written (``HH:MM``, the whole day ``00:00``-``24:00``), or None
    window: tuple[str, str] | None
    recipient_timezone: bool
    per_minute: float
    delay_seconds: tuple[float, float]
    daily_cap: int | None
    max_attempts: int
    retry_every: str | None
    retry_until: str | None

    @classmethod
    def of(cls, spec: CampaignSpec) -> SpecView:
        """The view of a validated spec."""
        from campaigns.campaign_file import window_texts

        sched, pace, retry = spec.schedule, spec.pace, spec.retry
        return cls(
            groups=tuple(spec.groups),
            instances=tuple(spec.instances),
            window=window_texts(sched.window) if sched.window else None,
            recipient_timezone=sched.recipient_timezone,
            per_minute=pace.per_minute,
            delay_seconds=(pace.delay_seconds[0], pace.delay_seconds[1]),
            daily_cap=pace.daily_cap,
            max_attempts=retry.max_attempts,
            retry_every=retry.every,
            retry_until=retry.until,
        )


def _strs(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def plain_view(data: Any) -> SpecView | None:
    """The view of a stored spec read as stored, or None when it is not exactly the shape
    a current spec is dumped as (a key missing, a value of another type) or it has
    variants or an A/B test: then the caller validates it (:meth:`SpecView.of`)."""
    if not isinstance(data, Mapping):
        return None
    message, sched, pace, retry = (data.get(k) for k in ("message", "schedule", "pace", "retry"))
    if not (
        isinstance(message, Mapping)
        and isinstance(sched, Mapping)
        and isinstance(pace, Mapping)
        and isinstance(retry, Mapping)
    ):
        return None
    if message.get("variants") != [] or data.get("ab", ()) is not None:
        return None
    groups, instances = _strs(data.get("groups")), _strs(data.get("instances"))
    window, delays = sched.get("window", ()), pace.get("delay_seconds")
    written = _strs(window) if window is not None else None
    cap, attempts = pace.get("daily_cap", ()), retry.get("max_attempts")
    every, until = retry.get("every", ()), retry.get("until", ())
    plain = (
        groups is not None
        and instances is not None
        and (window is None or (written is not None and len(written) == 2))
        and isinstance(sched.get("recipient_timezone"), bool)
        and _number(pace.get("per_minute"))
        and isinstance(delays, list)
        and len(delays) == 2
        and all(_number(d) for d in delays)
        and (cap is None or (isinstance(cap, int) and not isinstance(cap, bool)))
        and isinstance(attempts, int)
        and not isinstance(attempts, bool)
        and (every is None or isinstance(every, str))
        and (until is None or isinstance(until, str))
    )
    if not plain:
        return None
    assert groups is not None and instances is not None
    assert isinstance(attempts, int) and isinstance(delays, list)
    return SpecView(
        groups=groups,
        instances=instances,
        window=None if written is None else (written[0], written[1]),
        recipient_timezone=sched["recipient_timezone"],
        per_minute=float(pace["per_minute"]),
        delay_seconds=(float(delays[0]), float(delays[1])),
        daily_cap=cap,
        max_attempts=attempts,
        retry_every=every,
        retry_until=until,
    )


@dataclass(frozen=True)
class CampaignPage:
    """One campaign as ``campaign show`` prints it: its row, counts, spec and variants."""

    id: int
    name: str
    state: str
    state_reason: str | None
    message_type: str
    list_name: str | None
    timezone: str
    start_at: datetime | None
    cron: str | None
    started_at: datetime | None
    finished_at: datetime | None
    audience: dict[str, Any] | None
    spec: SpecView
    counts: dict[str, int]
    #: as :attr:`CampaignDetail.variants`
    variants: dict[str, Any]
    #: as :attr:`CampaignDetail.steps`
    steps: list[Any] = field(default_factory=list)

    @property
    def total(self) -> int:
        """All delivery rows."""
        return sum(self.counts.values())


def campaign_row(conn: Connection, campaign_id: int) -> Any:
    """The campaign's row with its list's name (``list_name``); :class:`CampaignNotFound`."""
    row = conn.execute(
        select(_campaigns, _lists.c.name.label("list_name"))
        .select_from(_campaigns.outerjoin(_lists, _lists.c.id == _campaigns.c.list_id))
        .where(_campaigns.c.id == campaign_id)
    ).one_or_none()
    if row is None:
        raise CampaignNotFound(campaign_id)
    return row


def list_campaigns(
    engine: Engine,
    *,
    state: str | None = None,
    name: str | None = None,
    archived: str = "no",
    limit: int | None = None,
    offset: int = 0,
) -> Page[CampaignSummary]:
    """Campaigns newest first, with counts per delivery state: those in ``state`` whose
    name contains ``name`` (any case), ``limit`` of them from ``offset``, and how many
    match in all. ``archived``: ``no`` (the default) leaves archived campaigns out,
    ``only`` shows only them, ``any`` both; deleted campaigns are never listed."""
    where: list[ColumnElement[bool]] = [
        _campaigns.c.deleted_at.is_(None),
        _campaigns.c.direct.is_(False),  # messages of POST /api/v1/messages: not campaigns
    ]
    if archived == "no":
        where.append(_campaigns.c.archived_at.is_(None))
    elif archived == "only":
        where.append(_campaigns.c.archived_at.is_not(None))
    if state is not None:
        where.append(_campaigns.c.state == state)
    if name:
        where.append(func.lower(_campaigns.c.name).contains(name.lower(), autoescape=True))
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(_campaigns).where(*where))
        matching = int(total.scalar_one())
        stmt = (
            select(_campaigns, _lists.c.name.label("list_name"))
            .select_from(_campaigns.outerjoin(_lists, _lists.c.id == _campaigns.c.list_id))
            .where(*where)
            .order_by(_campaigns.c.id.desc())
            .limit(limit)
            .offset(offset)
        )
        rows = conn.execute(stmt).all()
        counts = tallies.delivery_counts_by_campaign(conn, [int(r.id) for r in rows])
    out = []
    for r in rows:
        c = counts.get(int(r.id), dict.fromkeys(states.ALL, 0))
        out.append(
            CampaignSummary(
                id=int(r.id),
                name=r.name,
                state=r.state,
                message_type=r.message_type,
                list_name=r.list_name,
                start_at=r.start_at,
                cron=r.cron,
                created_at=r.created_at,
                total=sum(c.values()),
                counts=c,
                audience=r.audience,
                archived_at=r.archived_at,
                timezone=r.timezone,
            )
        )
    return Page(out, matching)


def get_campaign(engine: Engine, campaign_id: int) -> CampaignDetail:
    """One campaign with its counts per delivery state; :class:`CampaignNotFound` if none."""
    from campaigns import followups, variants
    from campaigns.campaign_file import stored_spec

    with engine.connect() as conn:
        r = campaign_row(conn, campaign_id)
        counts = tallies.delivery_counts(conn, campaign_id)
        spec = stored_spec(r.spec, int(r.id))
        compared = variants.campaign_comparison(conn, campaign_id, spec)
        steps = followups.step_counts(conn, campaign_id, spec)
    return CampaignDetail(
        **_shown(r),
        parent_id=r.parent_id,
        created_at=r.created_at,
        spec=spec,
        counts=counts,
        archived_at=r.archived_at,
        deleted_at=r.deleted_at,
        variants=compared,
        steps=steps,
    )


def _shown(r: Any) -> dict[str, Any]:
    """The campaign row's fields that :class:`CampaignDetail` and :class:`CampaignPage`
    both show."""
    return {
        "id": int(r.id),
        "name": r.name,
        "state": r.state,
        "state_reason": r.state_reason,
        "message_type": r.message_type,
        "list_name": r.list_name,
        "timezone": r.timezone,
        "start_at": r.start_at,
        "cron": r.cron,
        "started_at": r.started_at,
        "finished_at": r.finished_at,
        "audience": r.audience,
    }


def campaign_page(engine: Engine, campaign_id: int) -> CampaignPage:
    """What ``campaign show`` prints of one campaign; :class:`CampaignNotFound` if none.
    The spec is validated only when :func:`plain_view` cannot read it as stored."""
    with engine.connect() as conn:
        r = campaign_row(conn, campaign_id)
        counts = tallies.delivery_counts(conn, campaign_id)
        view = plain_view(r.spec)
        compared: dict[str, Any] = {}
        if view is None:
            from campaigns import variants
            from campaigns.campaign_file import stored_spec

            spec = stored_spec(r.spec, int(r.id))
            view = SpecView.of(spec)
            compared = variants.campaign_comparison(conn, campaign_id, spec)
        steps: list[Any] = []
        if isinstance(r.spec, dict) and r.spec.get("steps"):
            from campaigns import followups
            from campaigns.campaign_file import stored_spec

            steps = followups.step_counts(conn, campaign_id, stored_spec(r.spec, int(r.id)))
    return CampaignPage(**_shown(r), spec=view, counts=counts, variants=compared, steps=steps)
