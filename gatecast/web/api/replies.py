"""The replies inbox: every incoming message, newest first (``campaigns.replies``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic.dataclasses import dataclass as pydantic_dataclass

from campaigns import replies as domain
from gatecast.web.api.common import Id, Limit, Offset, Page
from gatecast.web.context import AppContext, get_ctx

router = APIRouter(tags=["replies"])


@pydantic_dataclass(frozen=True)
class InboxReplyPublic(domain.Reply):
    """An incoming message, with the campaign whose message it answers (null: none)."""


def list_replies(
    ctx: AppContext,
    *,
    campaign_id: int | None,
    sender: str | None,
    opt_out: bool | None,
    limit: int,
    offset: int,
) -> Page[InboxReplyPublic]:
    """One page of the inbox (the dashboard's page reads it too)."""
    page = domain.replies_page(
        ctx.engine,
        campaign_id=campaign_id,
        sender=sender,
        opt_out=opt_out,
        limit=limit,
        offset=offset,
    )
    items = [InboxReplyPublic(**asdict(r)) for r in page.items]
    return Page[InboxReplyPublic](items=items, total=page.total, limit=limit, offset=offset)


@router.get("/replies", response_model=Page[InboxReplyPublic])
def get_replies(
    ctx: Annotated[AppContext, Depends(get_ctx)],
    campaign_id: Annotated[
        Id | None, Query(description="Only replies to this campaign's messages")
    ] = None,
    sender: Annotated[
        str | None, Query(max_length=64, description="Only messages this sender received")
    ] = None,
    opt_out: Annotated[
        bool | None, Query(description="true: only opt-outs (STOP); false: none of them")
    ] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[InboxReplyPublic]:
    """Incoming messages across campaigns, newest first; filtered and paged."""
    return list_replies(
        ctx, campaign_id=campaign_id, sender=sender, opt_out=opt_out, limit=limit, offset=offset
    )
