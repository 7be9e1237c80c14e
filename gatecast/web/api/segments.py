"""Saved segments: audiences by lists, tags and attributes, with their count preview."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response, status
from pydantic import BaseModel, Field

from campaigns.segments import (
    AudienceCount,
    AudienceError,
    SegmentExists,
    SegmentRecord,
    change_segment,
    create_segment,
    delete_segment,
    get_segment,
    parse_segment,
    segments_page,
)
from gatecast.web.api.common import Limit, Offset, Page, RequestBody, field_error, not_found
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once
from gatecast.web.problems import Problem

router = APIRouter(tags=["segments"])
Ctx = Annotated[AppContext, Depends(get_ctx)]

Name = Annotated[str, Field(min_length=1, max_length=200)]
Names = list[Annotated[str, Field(max_length=200)]]


class AudienceCountPublic(BaseModel):
    """What a segment selects now: ``recipients`` = matched - excluded - opted out."""

    recipients: int
    matched: int
    opted_out: int
    excluded: int
    cooldown: int = Field(
        0, description="A campaign's count: contacts messaged within its contact cooldown"
    )
    summary: str = Field(description='"1,284 recipients; 12 opted out; 3 excluded"')


class SegmentPublic(BaseModel):
    """A saved segment (its definition by names) and, on one segment, its counts now."""

    id: int
    name: str
    lists: list[str]
    tags: list[str]
    where: dict[str, list[str]]
    exclude_lists: list[str]
    exclude_tags: list[str]
    created_at: datetime
    count: AudienceCountPublic | None = None


class SegmentChange(RequestBody):
    """A segment's definition: the fields of a campaign file's ``[audience]`` (without
    ``segment``)."""

    lists: Names = Field(default_factory=list, description="Members of any of these lists")
    tags: Names = Field(default_factory=list, description="Contacts with every one of these")
    where: dict[str, Any] = Field(
        default_factory=dict,
        description='Attribute equals a value or is one of a list: {"city": "Berlin"}',
    )
    exclude_lists: Names = Field(default_factory=list)
    exclude_tags: Names = Field(default_factory=list)


class SegmentCreate(SegmentChange):
    """A new segment: its name and definition."""

    name: Name


def _count(c: AudienceCount | None) -> AudienceCountPublic | None:
    return None if c is None else AudienceCountPublic.model_validate(c.to_dict())


def _public(r: SegmentRecord) -> SegmentPublic:
    d = r.definition
    return SegmentPublic(
        id=r.id,
        name=r.name,
        lists=d.get("lists", []),
        tags=d.get("tags", []),
        where=d.get("where", {}),
        exclude_lists=d.get("exclude_lists", []),
        exclude_tags=d.get("exclude_tags", []),
        created_at=r.created_at,
        count=_count(r.count),
    )


def _refused(exc: AudienceError) -> Problem:
    if isinstance(exc, SegmentExists):
        return Problem(status.HTTP_409_CONFLICT, "segment_exists", str(exc))
    text = str(exc)
    if not exc.field:
        return field_error(("body",), text, "audience")
    return field_error(
        ("body", *exc.field.split(".")), text.removeprefix(f"{exc.field}: "), "audience"
    )


@router.get("/segments", response_model=Page[SegmentPublic])
def get_segments(ctx: Ctx, limit: Limit = 50, offset: Offset = 0) -> Page[SegmentPublic]:
    """The saved segments, by id (counts: GET /segments/{name})."""
    page = segments_page(ctx.engine, limit=limit, offset=offset)
    return Page[SegmentPublic](
        items=[_public(r) for r in page.items], total=page.total, limit=limit, offset=offset
    )


@router.post("/segments", response_model=SegmentPublic, status_code=201, dependencies=[IDEMPOTENT])
def post_segment(body: SegmentCreate, ctx: Ctx, request: Request) -> Response:
    """Save a segment; the answer holds what it selects now.

    422 naming the field for an unknown list, tag or attribute (with the attribute names
    that exist), a malformed ``where`` or a segment that selects nobody; 409 when the
    name is taken. Nothing is stored then. ``Idempotency-Key`` honoured."""

    def create() -> SegmentPublic:
        data = body.model_dump(exclude={"name"}, exclude_defaults=True)
        try:
            record = create_segment(ctx.engine, body.name, parse_segment(data), now=ctx.clock())
        except AudienceError as exc:
            raise _refused(exc) from None
        return _public(record)

    return run_once(request, ctx, body, create, status.HTTP_201_CREATED, "/api/v1/segments/{name}")


@router.get("/segments/{name}", response_model=SegmentPublic)
def get_one(name: str, ctx: Ctx) -> SegmentPublic:
    """One segment with what it selects now."""
    record = get_segment(ctx.engine, name)
    if record is None:
        raise not_found("segment", name)
    return _public(record)


@router.put("/segments/{name}", response_model=SegmentPublic)
def put_segment(name: str, body: SegmentChange, ctx: Ctx) -> SegmentPublic:
    """Give a segment a new definition (its name stays); the answer holds what it
    selects now. Refused as a save is (422 naming the field; nothing changed); 404 for
    an unknown name. Campaigns created from it keep their audience. Sending the same
    definition again changes nothing more (no ``Idempotency-Key`` needed)."""
    data = body.model_dump(exclude_defaults=True)
    try:
        record = change_segment(ctx.engine, name, parse_segment(data))
    except AudienceError as exc:
        raise _refused(exc) from None
    if record is None:
        raise not_found("segment", name)
    return _public(record)


@router.delete("/segments/{name}", status_code=204)
def delete_one(name: str, ctx: Ctx) -> Response:
    """Delete a segment (campaigns created from it keep their audience)."""
    if not delete_segment(ctx.engine, name):
        raise not_found("segment", name)
    return Response(status_code=204)
