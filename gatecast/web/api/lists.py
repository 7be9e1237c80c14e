"""Contact lists (audiences) with member counts, and their members."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response, status
from pydantic import BaseModel, Field

from campaigns.audiences import ListSummary, clean_list_name, create_list, list_lists
from gatecast.web.api.common import Id, Limit, Offset, Page, RequestBody, field_error, not_found
from gatecast.web.api.contacts import ContactPublic, search_contacts
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once

router = APIRouter(tags=["lists"])
Ctx = Annotated[AppContext, Depends(get_ctx)]


class ListPublic(BaseModel):
    """A list with its member counts (``reachable``: members not opted out)."""

    id: int
    name: str
    description: str
    members: int
    opted_out: int
    reachable: int
    created_at: datetime


class ListCreate(RequestBody):
    """A new, empty list (imports create lists too)."""

    name: str = Field(min_length=1, max_length=200)


def _public(s: ListSummary) -> ListPublic:
    return ListPublic(
        id=s.id,
        name=s.name,
        description=s.description,
        members=s.members,
        opted_out=s.opted_out,
        reachable=s.reachable,
        created_at=s.created_at,
    )


def find_list(ctx: AppContext, list_id: int) -> ListPublic:
    """One list by id, or a 404."""
    found = next((s for s in list_lists(ctx.engine) if s.id == list_id), None)
    if found is None:
        raise not_found("list", list_id)
    return _public(found)


@router.get("/lists", response_model=Page[ListPublic])
def get_lists(ctx: Ctx, limit: Limit = 100, offset: Offset = 0) -> Page[ListPublic]:
    """Lists by name, with member counts; paged."""
    every = list_lists(ctx.engine)
    items = [_public(s) for s in every[offset : offset + limit]]
    return Page[ListPublic](items=items, total=len(every), limit=limit, offset=offset)


@router.post("/lists", response_model=ListPublic, status_code=201, dependencies=[IDEMPOTENT])
def post_list(body: ListCreate, ctx: Ctx, request: Request) -> Response:
    """Create an empty list (or return the existing one of that name).

    ``Idempotency-Key`` honoured (a repeat replays the first answer)."""

    def create() -> ListPublic:
        try:
            name = clean_list_name(body.name)
        except ValueError as exc:
            raise field_error(("body", "name"), str(exc)) from None
        return find_list(ctx, create_list(ctx.engine, name, now=ctx.clock()))

    return run_once(request, ctx, body, create, status.HTTP_201_CREATED, "/api/v1/lists/{id}")


@router.get("/lists/{list_id}", response_model=ListPublic)
def get_list(list_id: Id, ctx: Ctx) -> ListPublic:
    """One list with its member counts."""
    return find_list(ctx, list_id)


@router.get("/lists/{list_id}/contacts", response_model=Page[ContactPublic])
def get_list_contacts(
    list_id: Id, ctx: Ctx, q: str | None = None, limit: Limit = 50, offset: Offset = 0
) -> Page[ContactPublic]:
    """The members of one list, searchable by phone or name."""
    find_list(ctx, list_id)
    return search_contacts(ctx, q=q, list_id=list_id, opted_out=None, limit=limit, offset=offset)
