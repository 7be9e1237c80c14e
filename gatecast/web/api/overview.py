"""The overview: what is sending now, each sender's day, replies waiting, senders needing
attention (``scheduler.overview``; the dashboard's first page shows the same)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic.dataclasses import dataclass as pydantic_dataclass

from gatecast.web.context import AppContext, get_ctx
from scheduler import overview as domain

router = APIRouter(tags=["overview"])


@pydantic_dataclass(frozen=True)
class OverviewPublic(domain.Overview):
    """The overview: running campaigns with progress and why one waits (``waiting``, with
    the ``action`` that lifts it), each sender's sends today against its daily cap and
    warm-up, replies and opt-outs received in the last 24 hours, and the senders that
    need attention with the action to take."""


def read_overview(ctx: AppContext) -> OverviewPublic:
    """The overview now (the dashboard's page reads it too)."""
    found = domain.overview(ctx.engine, ctx.clock())
    return OverviewPublic(**asdict(found))


@router.get("/overview", response_model=OverviewPublic)
def get_overview(ctx: Annotated[AppContext, Depends(get_ctx)]) -> OverviewPublic:
    """What is sending now, today's sends per sender, replies waiting, senders needing
    attention (read-only; every role)."""
    return read_overview(ctx)
