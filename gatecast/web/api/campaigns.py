"""Campaigns: create (JSON or a TOML upload), preview, list, progress, lifecycle actions.

Every rule is ``campaigns.service``'s (the CLI's functions); this module only maps HTTP
to them. Errors: 404 unknown id, 409 refused lifecycle action, 422 with field paths.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, replace
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import (
    APIRouter,
    Body,
    Depends,
    HTTPException,
    Query,
    Request,
    Response,
    UploadFile,
    status,
)
from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from campaigns import lifecycle, service
from campaigns.campaign_file import CampaignSpec, parse_campaign, parse_toml
from campaigns.service import (
    CampaignDetail,
    CampaignSummary,
    CreatedCampaign,
    cancel_campaign,
    create_campaign,
    get_campaign,
    list_campaigns,
    pause_campaign,
    resume_campaign,
    retry_campaign,
)
from gatecast.web.api.common import (
    REFUSED_TRANSITION,
    Id,
    Limit,
    Offset,
    Page,
    RequestBody,
    field_error,
    upload,
)
from gatecast.web.api.segments import AudienceCountPublic
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once
from scheduler.holds import CampaignHold, campaign_hold, campaign_holds, recipient_holds

router = APIRouter(tags=["campaigns"])
#: the ``Location`` of a new campaign
CAMPAIGN_LOCATION = "/api/v1/campaigns/{id}"
Ctx = Annotated[AppContext, Depends(get_ctx)]

#: largest TOML campaign file accepted
MAX_TOML_BYTES = 1024 * 1024
CAMPAIGN_EXAMPLE: dict[str, Any] = {
    "name": "Spring sale",
    "list": "customers",
    "message": {"type": "text", "text": "{Hi|Hello} {{ name }}, 20% off this week!"},
    "schedule": {"start": "2030-04-01T09:00:00", "timezone": "Europe/Berlin"},
    "pace": {"per_minute": 20, "delay_seconds": [5, 15], "daily_cap": 500},
}


class PreviewMessage(BaseModel):
    """One rendered message exactly as it will be sent."""

    target: str
    name: str
    content: dict[str, Any]
    variant: str | None = Field(None, description="The A/B variant it shows (null: none)")


class VarietyPublic(BaseModel):
    """Distinct rendered messages over the first recipients, and a warning when few."""

    sampled: int
    distinct: int
    warning: str | None = Field(
        description="Low variety: the identical-content guard will hold runs of the same "
        "message per sender; vary it with spintax or variables (null: enough variety)"
    )


class Unrenderable(BaseModel):
    """A recipient whose message cannot be rendered (it will be skipped)."""

    target: str
    reason: str

    @model_validator(mode="before")
    @classmethod
    def _from_pair(cls, value: Any) -> Any:
        """The domain's ``(target, reason)`` pair."""
        if isinstance(value, tuple):
            target, reason = value
            return {"target": target, "reason": reason}
        return value


class CampaignCreated(BaseModel):
    """What creating a campaign did."""

    id: int
    state: str
    start_at: datetime
    recipients: int
    opted_out: int
    preview: list[PreviewMessage]
    unrenderable: list[Unrenderable]
    unrenderable_count: int
    audience: AudienceCountPublic | None = Field(
        None, description="What an [audience] selected at create (null for a list or groups)"
    )
    cooldown_excluded: int = Field(
        0, description="Recipients messaged within the contact cooldown now (would be skipped)"
    )
    variety: VarietyPublic | None = None
    unrenderable_words: str = Field(
        "",
        description="Who cannot get the message and why, by the variable they lack "
        '("city is missing for 2 of 9 contacts: Ana, Bob"; "" when all render)',
    )


class CampaignPreview(BaseModel):
    """A campaign rendered for its first recipients, without storing anything.

    The same checks as creation (``campaigns.service.preview_campaign``)."""

    name: str
    message_type: str
    start_at: datetime | None
    timezone: str
    list_name: str | None
    recipients_checked: int = Field(description="Recipients checked (the first 5000 at most)")
    opted_out: int
    preview: list[PreviewMessage]
    unrenderable: list[Unrenderable]
    unrenderable_count: int
    spintax_varies: bool = Field(
        description="The message has spintax: the variant of each recipient is picked when "
        "the campaign is created (its id seeds the choice), so it may differ from this preview"
    )
    audience: AudienceCountPublic | None = Field(
        None, description="What an [audience] selects now (null for a list or groups)"
    )
    cooldown_excluded: int = Field(
        0, description="Recipients checked that were messaged within the contact cooldown"
    )
    variety: VarietyPublic | None = None
    unrenderable_words: str = Field(
        "",
        description="Who cannot get the message and why, by the variable they lack "
        '("city is missing for 2 of 9 contacts: Ana, Bob"; "" when all render)',
    )


class HoldPublic(BaseModel):
    """Why recipients wait and when that lifts (``scheduler/holds.py``; docs/http-api.md,
    "Holds")."""

    kind: str | None = Field(
        description="not_started, warmup_used, daily_cap, outside_window, sender_paused, "
        "no_usable_sender, health_cooldown, timelock, identical_content, retry_backoff, "
        "not_due, variant_test, campaign_paused, safety_pause (null: some senders send)"
    )
    words: str = Field(description="One sentence for a person, as every face says it")
    until: datetime | None = Field(description="When it lifts (UTC); null: when someone acts")
    action: str | None = Field(None, description="What the operator can do, in plain words")
    sender: str | None = Field(None, description="The sender it holds; null: the campaign")


class CampaignHoldPublic(HoldPublic):
    """A campaign's hold: the one that keeps everything from sending, and each held
    sender's when some senders send and others wait."""

    senders: list[HoldPublic] = Field(default_factory=list)


class RecipientHoldPublic(BaseModel):
    """A queued recipient and its own hold (null: due now, sent at the sender's pace)."""

    delivery_id: int
    target: str
    sender: str | None
    hold: HoldPublic | None


def hold_public(hold: CampaignHold) -> CampaignHoldPublic | None:
    """The API form of a campaign's hold (null when nothing waits)."""
    data = hold.as_dict()
    return None if data is None else CampaignHoldPublic.model_validate(data)


class CampaignPublic(BaseModel):
    """A campaign in a listing, with counts per delivery state."""

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
    audience: dict[str, Any] | None = Field(
        None, description="The [audience] in force by names (a segment expanded); null: list"
    )
    archived_at: datetime | None = Field(
        None, description="When it was archived (left out of the default list); null: not"
    )
    timezone: str = Field("UTC", description="The campaign's timezone (IANA)")
    hold: CampaignHoldPublic | None = Field(
        None, description="Why its queued recipients wait and when that lifts; null: none wait"
    )


class StepPublic(BaseModel):
    """A follow-up step (``[[steps]]``) and what it sent so far."""

    step: int = Field(description="Its number, from 1, in the file's order")
    when: str = Field(description="no_reply, read_no_reply, tapped or replied")
    condition: str = Field(description="The condition in words")
    message_type: str
    campaign_id: int | None = Field(
        None,
        description="The hidden campaign holding its sends (its report is the step's); "
        "null until it was first due for someone",
    )
    counts: dict[str, int] = Field(
        description="Its delivery rows per state (those it was due for so far)"
    )
    total: int = Field(description="How many contacts it was due for so far")


class CampaignDetailPublic(CampaignPublic):
    """One campaign: its validated file, times and counts."""

    state_reason: str | None
    deleted_at: datetime | None = Field(
        None, description="When it was deleted (its reports remain); null: not deleted"
    )
    parent_id: int | None
    started_at: datetime | None
    finished_at: datetime | None
    spec: dict[str, Any]
    variants: dict[str, Any] = Field(
        default_factory=dict,
        description="[[message.variants]] compared: each variant's recipients, sent and "
        "delivered, read, reply and opt-out rates, the two-proportion z-tests against the "
        "best, a significance note, and the [ab] test with its pick ({} without variants)",
    )
    recipient_holds: list[RecipientHoldPublic] | None = Field(
        None, description="With ?recipients=true: the first queued recipients, each's hold"
    )
    steps: list[StepPublic] = Field(
        default_factory=list, description="Its follow-up steps with their counts ([] without)"
    )

    @field_validator("steps", mode="before")
    @classmethod
    def _steps(cls, value: Any) -> Any:
        """The domain's step counts, with their totals."""
        return [
            {**vars(s), "total": sum(s.counts.values())} if not isinstance(s, dict) else s
            for s in value
        ]

    @field_validator("spec", mode="before")
    @classmethod
    def _spec_json(cls, value: Any) -> Any:
        """The domain's validated spec, as its JSON form."""
        return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


@pydantic_dataclass(frozen=True)
class CampaignProgress(service.CampaignProgress):
    """Live progress: counts per state and a cumulative timeline for the chart."""


class ActionResult(BaseModel):
    """What a lifecycle action did."""

    id: int
    state: str
    detail: str
    rows: int | None = Field(None, description="Rows skipped (cancel) or re-queued (retry)")


class RetryResult(ActionResult):
    """What a retry did, and the 'unknown' rows it left alone and why."""

    left_alone: int = Field(0, description="'unknown' rows not re-queued: settled + waiting")
    settled: int = Field(
        0, description="'unknown' rows settled from the gateway's status events (not resent)"
    )
    waiting: int = Field(
        0,
        description="'unknown' rows attempted less than the settle period ago (their status "
        "events may still come): left alone until waiting_until",
    )
    waiting_until: datetime | None = None


class RetryRequest(RequestBody):
    """Which recipients to send again."""

    include_unknown: bool = Field(
        False,
        description="Also resend 'unknown' rows that no status event settled and that were "
        "attempted at least the settle period ago (may have left: the person may get it twice)",
    )


def _summary(s: CampaignSummary) -> CampaignPublic:
    return CampaignPublic.model_validate(s, from_attributes=True)


def detail_public(d: CampaignDetail) -> CampaignDetailPublic:
    """The API form of a campaign."""
    return CampaignDetailPublic.model_validate(d, from_attributes=True)


def created_public(c: CreatedCampaign) -> CampaignCreated:
    """The API form of a created campaign."""
    out = CampaignCreated.model_validate(replace(c, audience=None), from_attributes=True)
    if c.audience is not None:
        out.audience = AudienceCountPublic.model_validate(c.audience.to_dict())
    return out


def parse_toml_upload(raw: bytes, filename: str) -> CampaignSpec:
    """A TOML campaign file's bytes -> a validated spec (CampaignFileError otherwise)."""
    source = filename or "upload.toml"
    if len(raw) > MAX_TOML_BYTES:
        raise HTTPException(
            status.HTTP_413_CONTENT_TOO_LARGE,
            detail=f"{source}: a campaign file may hold at most {MAX_TOML_BYTES} bytes",
        )
    return parse_toml(raw, source)


def preview_public(p: service.CampaignPreview) -> CampaignPreview:
    """The API form of a preview (the first 100 unrenderable recipients listed)."""
    shown = replace(p, unrenderable=p.unrenderable[:100], audience=None)
    out = CampaignPreview.model_validate(shown, from_attributes=True)
    if p.audience is not None:
        out.audience = AudienceCountPublic.model_validate(p.audience.to_dict())
    return out


def campaign_progress(ctx: AppContext, campaign_id: int, points: int = 30) -> CampaignProgress:
    """Counts per state and a cumulative sent/delivered/read/failed timeline."""
    return CampaignProgress(**asdict(service.campaign_progress(ctx.engine, campaign_id, points)))


@router.get("/campaigns", response_model=Page[CampaignPublic])
def get_campaigns(
    ctx: Ctx,
    state: Annotated[
        str | None, Query(description=f"Only this state: {', '.join(lifecycle.STATES)}")
    ] = None,
    q: Annotated[
        str | None, Query(max_length=200, description="Only names containing this (any case)")
    ] = None,
    archived: Annotated[
        str,
        Query(description="no: leave archived campaigns out (default); only: only them; any: both"),
    ] = "no",
    limit: Limit = 100,
    offset: Offset = 0,
) -> Page[CampaignPublic]:
    """Campaigns newest first, with counts per delivery state; filtered and paged
    (deleted campaigns are never listed)."""
    if archived not in service.ARCHIVED_FILTERS:
        raise field_error(
            ("query", "archived"),
            f"archived must be one of: {', '.join(service.ARCHIVED_FILTERS)}",
            "enum",
        )
    if state is not None and state not in lifecycle.STATES:
        raise field_error(
            ("query", "state"),
            f"unknown campaign state {state!r}; one of: {', '.join(lifecycle.STATES)}",
            "enum",
        )
    page = list_campaigns(
        ctx.engine,
        state=state,
        name=q,
        archived=archived,
        limit=limit,
        offset=offset,
    )
    found = campaign_holds(ctx.engine, [s.id for s in page.items], ctx.clock())
    items = [
        _summary(s).model_copy(update={"hold": hold_public(found[s.id])})
        if s.id in found
        else _summary(s)
        for s in page.items
    ]
    return Page[CampaignPublic](items=items, total=page.total, limit=limit, offset=offset)


#: ``?strict=true``: refuse when any recipient's message cannot render
Strict = Annotated[bool, Query(description="Refuse if any recipient's message cannot render")]
#: ``?allow_unrenderable=true``: create even when no recipient's message renders
AllowUnrenderable = Annotated[
    bool,
    Query(
        description="Create even when no recipient's message renders (refused by default: "
        "422 `nothing_renders`, naming the missing variables and for whom)"
    ),
]


def _create(
    ctx: AppContext, spec: CampaignSpec, strict: bool, allow_unrenderable: bool = False
) -> CampaignCreated:
    """Create ``spec`` (an omitted contact cooldown takes the setting's default)."""
    cooldown = ctx.settings.contact_cooldown_hours
    created = create_campaign(
        ctx.engine,
        spec,
        strict=strict,
        allow_unrenderable=allow_unrenderable,
        now=ctx.clock(),
        default_cooldown_hours=cooldown,
        default_max_identical=ctx.settings.max_identical_in_row,
        gateway_kind=ctx.settings.gateway_kind,
    )
    return created_public(created)


@router.post(
    "/campaigns", response_model=CampaignCreated, status_code=201, dependencies=[IDEMPOTENT]
)
def post_campaign(
    ctx: Ctx,
    request: Request,
    body: Annotated[dict[str, Any], Body(examples=[CAMPAIGN_EXAMPLE])],
    strict: Strict = False,
    allow_unrenderable: AllowUnrenderable = False,
) -> Response:
    """Create a campaign from the campaign file's fields as JSON (scheduled at its start;
    no start: it starts sending at once).

    Recipients whose message cannot render are skipped and reported (``unrenderable``,
    ``unrenderable_words``); ``?strict=true`` refuses them instead (422
    ``campaign_setup``). When none renders, the campaign would send nothing: refused with
    422 ``nothing_renders`` saying which variables are missing for whom, unless
    ``?allow_unrenderable=true``. With an ``Idempotency-Key`` header, a repeat of the same
    request answers the first answer again instead of creating a second campaign.
    """

    def create() -> CampaignCreated:
        spec = parse_campaign(body, "request body")
        return _create(ctx, spec, strict, allow_unrenderable)

    return run_once(request, ctx, body, create, status.HTTP_201_CREATED, CAMPAIGN_LOCATION)


@router.post(
    "/campaigns/toml", response_model=CampaignCreated, status_code=201, dependencies=[IDEMPOTENT]
)
def post_campaign_toml(
    ctx: Ctx,
    request: Request,
    file: Annotated[UploadFile, upload("A TOML campaign file")],
    strict: Strict = False,
    allow_unrenderable: AllowUnrenderable = False,
) -> Response:
    """Create a campaign from an uploaded TOML campaign file (the rules of ``POST
    /campaigns``; ``Idempotency-Key`` honoured)."""
    raw = file.file.read(MAX_TOML_BYTES + 1)
    name = file.filename or ""
    upload = {"file": name, "sha256": hashlib.sha256(raw).hexdigest()}

    def create() -> CampaignCreated:
        spec = parse_toml_upload(raw, name)
        return _create(ctx, spec, strict, allow_unrenderable)

    return run_once(request, ctx, upload, create, status.HTTP_201_CREATED, CAMPAIGN_LOCATION)


def _preview(ctx: AppContext, spec: CampaignSpec) -> CampaignPreview:
    """Preview ``spec`` (omitted safety defaults take the settings' values)."""
    return preview_public(
        service.preview_campaign(
            ctx.engine,
            spec,
            default_cooldown_hours=ctx.settings.contact_cooldown_hours,
            now=ctx.clock(),
            default_max_identical=ctx.settings.max_identical_in_row,
        )
    )


@router.post("/campaigns/preview", response_model=CampaignPreview)
def post_preview(
    ctx: Ctx, body: Annotated[dict[str, Any], Body(examples=[CAMPAIGN_EXAMPLE])]
) -> CampaignPreview:
    """Validate and render a campaign for its first recipients, storing nothing."""
    spec = parse_campaign(body, "request body")
    return _preview(ctx, spec)


@router.post("/campaigns/preview/toml", response_model=CampaignPreview)
def post_preview_toml(
    ctx: Ctx, file: Annotated[UploadFile, upload("A TOML campaign file")]
) -> CampaignPreview:
    """Validate and render an uploaded TOML campaign file, storing nothing."""
    spec = parse_toml_upload(file.file.read(MAX_TOML_BYTES + 1), file.filename or "")
    return _preview(ctx, spec)


@router.get("/campaigns/{campaign_id}", response_model=CampaignDetailPublic)
def get_one(
    campaign_id: Id,
    ctx: Ctx,
    recipients: Annotated[
        bool, Query(description="Also each of the first 100 queued recipients' own hold")
    ] = False,
) -> CampaignDetailPublic:
    """One campaign with its file, times, counts and hold (why it waits, until when)."""
    detail = detail_public(get_campaign(ctx.engine, campaign_id))
    now = ctx.clock()
    extra: dict[str, Any] = {"hold": hold_public(campaign_hold(ctx.engine, campaign_id, now))}
    if recipients:
        extra["recipient_holds"] = [
            RecipientHoldPublic.model_validate(r.as_dict())
            for r in recipient_holds(ctx.engine, campaign_id, now)
        ]
    return detail.model_copy(update=extra)


@router.get("/campaigns/{campaign_id}/progress", response_model=CampaignProgress)
def get_progress(
    campaign_id: Id, ctx: Ctx, points: Annotated[int, Query(ge=2, le=200)] = 30
) -> CampaignProgress:
    """Counts per state and a cumulative timeline of sent, delivered, read and failed."""
    return campaign_progress(ctx, campaign_id, points)


@router.post(
    "/campaigns/{campaign_id}/pause", response_model=ActionResult, responses=REFUSED_TRANSITION
)
def post_pause(campaign_id: Id, ctx: Ctx) -> ActionResult:
    """Pause a scheduled or running campaign; one paused already answers 200 "already
    paused" (a second click changes nothing); 409 in any other state."""
    try:
        new = pause_campaign(ctx.engine, campaign_id, now=ctx.clock())
    except lifecycle.InvalidTransition as exc:
        if exc.current != lifecycle.PAUSED:
            raise
        return ActionResult(id=campaign_id, state=lifecycle.PAUSED, detail="already paused")
    return ActionResult(id=campaign_id, state=new, detail="paused")


@router.post(
    "/campaigns/{campaign_id}/resume", response_model=ActionResult, responses=REFUSED_TRANSITION
)
def post_resume(campaign_id: Id, ctx: Ctx) -> ActionResult:
    """Resume a paused campaign; one scheduled or running already answers 200 "already
    <state>" (a second click changes nothing); 409 in any other state."""
    try:
        new = resume_campaign(ctx.engine, campaign_id, now=ctx.clock())
    except lifecycle.InvalidTransition as exc:
        if exc.current not in (lifecycle.SCHEDULED, lifecycle.RUNNING):
            raise
        return ActionResult(id=campaign_id, state=exc.current, detail=f"already {exc.current}")
    return ActionResult(id=campaign_id, state=new, detail="resumed")


@router.post(
    "/campaigns/{campaign_id}/cancel", response_model=ActionResult, responses=REFUSED_TRANSITION
)
def post_cancel(campaign_id: Id, ctx: Ctx) -> ActionResult:
    """Cancel a campaign; its queued recipients are skipped (409 when already final)."""
    skipped = cancel_campaign(ctx.engine, campaign_id, now=ctx.clock())
    return ActionResult(
        id=campaign_id, state="cancelled", detail=f"{skipped} queued row(s) skipped", rows=skipped
    )


@router.post(
    "/campaigns/{campaign_id}/retry", response_model=RetryResult, responses=REFUSED_TRANSITION
)
def post_retry(campaign_id: Id, ctx: Ctx, body: RetryRequest | None = None) -> RetryResult:
    """Send failed recipients again (and 'unknown' ones without evidence when asked)."""
    done = retry_campaign(
        ctx.engine,
        campaign_id,
        include_unknown=(body or RetryRequest()).include_unknown,
        settle=timedelta(seconds=ctx.settings.unknown_settle_seconds),
        now=ctx.clock(),
    )
    state = get_campaign(ctx.engine, campaign_id).state
    detail = "; ".join(filter(None, [f"{done.requeued} row(s) re-queued", done.describe()]))
    return RetryResult(
        id=campaign_id,
        state=state,
        detail=detail,
        rows=done.requeued,
        left_alone=done.left_alone,
        settled=done.settled,
        waiting=done.waiting,
        waiting_until=done.waiting_until,
    )
