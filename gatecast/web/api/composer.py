"""What the composer needs: the campaign file as TOML and back, the message for one
recipient, the final check (estimate), the next starts of a recurrence; and clone and
edit of a stored campaign.

Every rule lives below the faces: ``campaigns.campaign_toml`` (TOML),
``campaigns.editing`` (clone, edit, the preview for one recipient: ``campaigns.render``'s
rules), ``scheduler.estimate`` (the final check). Errors: 404 unknown id, 409 an edit of
a campaign that is neither scheduled nor paused, 422 naming the field.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Query, Request, Response, status
from pydantic import BaseModel, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from campaigns import editing
from campaigns.campaign_file import (
    parse_campaign,
    parse_schedule,
    parse_toml,
)
from campaigns.campaign_toml import spec_to_toml
from gatecast.web.api.campaigns import (
    CAMPAIGN_EXAMPLE,
    MAX_TOML_BYTES,
    CampaignCreated,
    PreviewMessage,
    Unrenderable,
    created_public,
)
from gatecast.web.api.common import Id, RequestBody, field_error
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once
from scheduler.estimate import FinalCheck

router = APIRouter(tags=["campaigns"])
Ctx = Annotated[AppContext, Depends(get_ctx)]


class TomlText(RequestBody):
    """A campaign file as TOML text."""

    toml: str = Field(max_length=MAX_TOML_BYTES, description="The campaign file (TOML)")


class SpecBody(BaseModel):
    """A campaign file's fields as JSON, validated (defaults filled in)."""

    spec: dict[str, Any]


class RecipientPreviewRequest(RequestBody):
    """A campaign file and the contact to render it for."""

    spec: dict[str, Any] = Field(description="The campaign file's fields as JSON")
    contact_id: int | None = Field(
        None, ge=1, le=2**63 - 1, description="The contact (null: the audience's first)"
    )
    campaign_id: int | None = Field(
        None,
        ge=1,
        le=2**63 - 1,
        description="Seed the spintax as this stored campaign does (null: the preview seed)",
    )


class CandidatePublic(BaseModel):
    """A recipient of the audience the preview can be shown for."""

    contact_id: int | None
    name: str
    target: str


class RecipientPreviewPublic(BaseModel):
    """The message as one recipient's phone shows it."""

    contact_id: int | None
    name: str
    target: str
    opted_out: bool
    content: dict[str, Any] | None = Field(
        description="The rendered message (the gateway's payload fields); null when it "
        "does not render for this recipient"
    )
    error: str | None = Field(description="Why it does not render (null when it does)")
    variables: list[str] = Field(description="Every variable the message reads")
    missing: list[str] = Field(description="Variables this recipient has no value for")
    variants: list[dict[str, Any]] = Field(description="The different spintax renderings")
    candidates: list[CandidatePublic] = Field(description="The audience's first recipients")


@pydantic_dataclass(frozen=True)
class FinalCheckPublic(FinalCheck):
    """What creating the campaign will do: messages, audience, senders, start, finish."""

    sentence: str = Field(
        kw_only=True, description="The check in one sentence, times in the campaign's zone"
    )


class RepeatPublic(BaseModel):
    """A recurrence as the schedule picker shows it (``campaigns.repeats``)."""

    every: str = Field(description="day, week (chosen weekdays) or month")
    times: list[str] = Field(description="Times of day, HH:MM in the campaign's timezone")
    days: list[str] = Field(description="Weekdays (mon ... sun) when every is week")
    day: int | None = Field(description="The day of the month when every is month")


class Occurrences(BaseModel):
    """The next starts of a recurrence, from its start."""

    cron: str
    timezone: str
    occurrences: list[datetime] = Field(
        description="The next five runs (UTC), at or after the start and not in the past"
    )
    repeat: RepeatPublic | None = Field(
        None, description="The picker's shape of the recurrence; null: crontab only (Advanced)"
    )
    summary: str = Field("", description='The recurrence in words ("Every Monday at 09:30")')


class CampaignEdited(BaseModel):
    """What an edit did."""

    id: int
    state: str
    start_at: datetime | None
    recipients: int
    rerendered: int = Field(description="Queued rows rendered again with the new message")
    skipped: int = Field(description="Queued rows skipped: the new message does not render")
    preview: list[PreviewMessage]
    unrenderable: list[Unrenderable]
    unrenderable_count: int
    opted_out: int


@router.post("/campaigns/to-toml", response_model=TomlText)
def post_to_toml(
    body: Annotated[dict[str, Any], Body(examples=[CAMPAIGN_EXAMPLE])],
) -> TomlText:
    """Validate a campaign file's fields (JSON) and answer the same file as TOML, as the
    CLI's ``campaign create`` takes it (422 naming each field at fault)."""
    spec = parse_campaign(body, "request body")
    return TomlText(toml=spec_to_toml(spec, "request body"))


@router.post("/campaigns/from-toml", response_model=SpecBody)
def post_from_toml(body: TomlText) -> SpecBody:
    """Validate a TOML campaign file and answer its fields as JSON (what ``POST
    /campaigns`` takes; 422 naming each field at fault)."""
    spec = parse_toml(body.toml.encode("utf-8"), "the TOML")
    return SpecBody(spec=spec.model_dump(mode="json"))


@router.post("/campaigns/preview/recipient", response_model=RecipientPreviewPublic)
def post_preview_recipient(ctx: Ctx, body: RecipientPreviewRequest) -> RecipientPreviewPublic:
    """The message of a campaign file as one contact gets it: rendered (or why not), the
    variables that contact lacks, the spintax variants, the audience's first recipients.
    Nothing is stored."""
    spec = parse_campaign(body.spec, "request body")
    try:
        found = editing.preview_recipient(
            ctx.engine, spec, body.contact_id, campaign_id=body.campaign_id
        )
    except editing.ContactUnknown as exc:
        raise field_error(("body", "contact_id"), str(exc), "not_found") from None
    return RecipientPreviewPublic.model_validate(asdict(found))


@router.post("/campaigns/check", response_model=FinalCheckPublic)
def post_check(
    ctx: Ctx, body: Annotated[dict[str, Any], Body(examples=[CAMPAIGN_EXAMPLE])]
) -> FinalCheckPublic:
    """The final check before sending: "N messages to <audience> through <senders>,
    starting <time>, finishing around <time> at this pace", with the excluded and
    unrenderable counts (every recipient checked; nothing stored)."""
    from scheduler.estimate import final_check

    spec = parse_campaign(body, "request body")
    check = final_check(
        ctx.engine,
        spec,
        now=ctx.clock(),
        default_cooldown_hours=ctx.settings.contact_cooldown_hours,
    )
    return FinalCheckPublic(**check.to_dict())


@router.get("/campaigns/occurrences", response_model=Occurrences)
def get_occurrences(
    ctx: Ctx,
    cron: Annotated[
        str | None, Query(max_length=120, description="A five-field crontab line")
    ] = None,
    timezone: Annotated[str, Query(max_length=64, description="IANA zone")] = "UTC",
    start: Annotated[
        str | None,
        Query(max_length=40, description="The campaign's start, as schedule.start takes it"),
    ] = None,
    after: Annotated[datetime | None, Query(description="From this moment (default now)")] = None,
    every: Annotated[
        Literal["day", "week", "month"] | None,
        Query(description="Instead of cron: the picker's shape (every day, week or month)"),
    ] = None,
    times: Annotated[
        str | None, Query(max_length=200, description="With every: HH:MM, comma-separated")
    ] = None,
    days: Annotated[
        str | None, Query(max_length=60, description="With every=week: mon,thu ...")
    ] = None,
    day: Annotated[int | None, Query(ge=1, le=31, description="With every=month: the day")] = None,
) -> Occurrences:
    """The next five starts of a recurrence in its zone, from its ``start`` (never
    before now): a crontab line, or a shape of the schedule picker (``every``, ``times``,
    ``days``, ``day``) written as crontab for ``schedule.cron``. The answer names the
    shape a crontab line fits (null: Advanced). 422 naming the field at fault."""
    from campaigns.repeats import (
        RepeatError,
        describe_repeat,
        make_repeat,
        read_repeat,
        repeat_cron,
    )
    from scheduler.recurrence import upcoming_starts

    if every is not None:
        try:
            shape = make_repeat(every, (times or "").split(","), (days or "").split(","), day)
        except RepeatError as exc:
            raise field_error(("query", exc.field), exc.message) from None
        cron = repeat_cron(shape)
    elif not cron:
        raise field_error(("query", "cron"), "give a crontab line (or every and times)")
    fields: dict[str, Any] = {"cron": cron, "timezone": timezone}
    if start:
        fields["start"] = start
    schedule = parse_schedule(fields, "the query")
    now = ctx.clock()
    begin = schedule.start_at_utc() or (after if after is not None and after.tzinfo else now)
    repeat = read_repeat(cron)
    return Occurrences(
        cron=cron,
        timezone=timezone,
        occurrences=upcoming_starts(cron, timezone, begin, now),
        repeat=None if repeat is None else RepeatPublic.model_validate(repeat.as_dict()),
        summary=describe_repeat(repeat) if repeat else f"crontab {cron}",
    )


class VariablePublic(BaseModel):
    """A variable a message can read (``{{ name }}``)."""

    name: str
    kind: Literal["built-in", "attribute"] = Field(
        description="built-in (every contact has it) or attribute (imported)"
    )
    description: str
    contacts: int | None = Field(
        description="How many of the audience's contacts have it (null: every one)"
    )


class VariablesPublic(BaseModel):
    """What the composer's "Insert a variable" menu offers for an audience."""

    contacts: int = Field(description="Contacts in the audience (groups: their number)")
    variables: list[VariablePublic]


@router.get("/campaigns/variables", response_model=VariablesPublic)
def get_variables(
    ctx: Ctx,
    list_: Annotated[
        list[str],
        Query(alias="list", max_length=50, description="Contacts of these lists (repeatable)"),
    ] = [],  # noqa: B006  (FastAPI copies a query's default)
    segment: Annotated[
        str | None, Query(max_length=200, description="The contacts a saved segment selects")
    ] = None,
    groups: Annotated[int, Query(ge=0, le=10_000, description="A message to this many groups")] = 0,
) -> VariablesPublic:
    """The variables a message to this audience can read: ``name`` and ``phone``, and
    the attributes its contacts have, each with how many have it (no list and no
    segment: every contact; ``groups``: ``group``). 422 naming an unknown list or
    segment."""
    from campaigns.segments import AudienceError
    from campaigns.variables import audience_variables

    if any(len(name) > 200 for name in list_):
        raise field_error(("query", "list"), "a list name is at most 200 characters")
    try:
        found = audience_variables(ctx.engine, lists=list_, segment=segment, groups=groups)
    except AudienceError as exc:
        raise field_error(("query", exc.field or "list"), str(exc)) from None
    return VariablesPublic.model_validate(found.to_dict())


@router.post(
    "/campaigns/{campaign_id}/clone",
    response_model=CampaignCreated,
    status_code=201,
    dependencies=[IDEMPOTENT],
)
def post_clone(
    campaign_id: Id,
    ctx: Ctx,
    request: Request,
    body: Annotated[
        dict[str, Any] | None,
        Body(examples=[{"name": "Spring sale again", "schedule": {"start": "2030-05-01T09:00"}}]),
    ] = None,
) -> Response:
    """Create a copy of a campaign (any state): its file, named "<name> (copy)", with
    the top-level fields given here replaced (``null`` removes one: ``"schedule": null``
    sends now). The rules of a create apply (a start already past: 422 naming
    ``schedule.start``). ``Idempotency-Key`` honoured (a repeat replays the first answer)."""

    def create() -> CampaignCreated:
        created = editing.clone_campaign(
            ctx.engine,
            campaign_id,
            body or {},
            now=ctx.clock(),
            default_cooldown_hours=ctx.settings.contact_cooldown_hours,
            gateway_kind=ctx.settings.gateway_kind,
        )
        return created_public(created)

    return run_once(
        request, ctx, body or {}, create, status.HTTP_201_CREATED, "/api/v1/campaigns/{id}"
    )


@router.put("/campaigns/{campaign_id}", response_model=CampaignEdited)
def put_campaign(
    campaign_id: Id,
    ctx: Ctx,
    body: Annotated[dict[str, Any], Body(examples=[CAMPAIGN_EXAMPLE])],
) -> CampaignEdited:
    """Replace the file of a scheduled or paused campaign (409 in any other state). Its
    rows not yet sent are rendered again; once started, its recipients and senders are
    fixed (a changed ``list``, ``audience``, ``groups`` or ``instances``: 422 naming it)."""
    spec = parse_campaign(body, "request body")
    edited = editing.edit_campaign(
        ctx.engine,
        campaign_id,
        spec,
        now=ctx.clock(),
        default_cooldown_hours=ctx.settings.contact_cooldown_hours,
        gateway_kind=ctx.settings.gateway_kind,
    )
    return CampaignEdited.model_validate(asdict(edited))


__all__ = ["router"]
