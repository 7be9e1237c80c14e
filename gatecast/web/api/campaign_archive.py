"""Archive, unarchive and delete a campaign (``campaigns.archive`` holds the rules):
404 unknown, 409 refused (running, or already deleted)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from campaigns import archive
from campaigns.service import get_campaign
from gatecast.web.api.campaigns import ActionResult
from gatecast.web.api.common import DELETE_REFUSED, Id
from gatecast.web.context import AppContext, get_ctx

router = APIRouter(tags=["campaigns"])
Ctx = Annotated[AppContext, Depends(get_ctx)]


@router.post(
    "/campaigns/{campaign_id}/archive", response_model=ActionResult, responses=DELETE_REFUSED
)
def post_archive(campaign_id: Id, ctx: Ctx) -> ActionResult:
    """Archive a campaign: left out of the default list (``archived=only`` shows it)."""
    archive.archive_campaign(ctx.engine, campaign_id, now=ctx.clock())
    state = get_campaign(ctx.engine, campaign_id).state
    return ActionResult(id=campaign_id, state=state, detail="archived")


@router.post(
    "/campaigns/{campaign_id}/unarchive", response_model=ActionResult, responses=DELETE_REFUSED
)
def post_unarchive(campaign_id: Id, ctx: Ctx) -> ActionResult:
    """Bring an archived campaign back into the default list."""
    archive.unarchive_campaign(ctx.engine, campaign_id, now=ctx.clock())
    state = get_campaign(ctx.engine, campaign_id).state
    return ActionResult(id=campaign_id, state=state, detail="unarchived")


@router.delete("/campaigns/{campaign_id}", response_model=ActionResult, responses=DELETE_REFUSED)
def delete_campaign(campaign_id: Id, ctx: Ctx) -> ActionResult:
    """Delete a campaign (409 while running). Its sent history stays in its reports; a
    scheduled or paused campaign is cancelled first (queued rows skipped)."""
    skipped = archive.delete_campaign(ctx.engine, campaign_id, now=ctx.clock())
    state = get_campaign(ctx.engine, campaign_id).state
    return ActionResult(
        id=campaign_id,
        state=state,
        detail=f"deleted; {skipped} queued row(s) skipped" if skipped else "deleted",
        rows=skipped,
    )
