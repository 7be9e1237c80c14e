"""The audit log (admins only): entries filtered and paged, newest first; a CSV export."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse
from pydantic import AwareDatetime, BaseModel, Field

from campaigns import audit
from gatecast.web.api.common import Limit, Offset, Page, download
from gatecast.web.context import AppContext, get_ctx

router = APIRouter(tags=["audit"])
Ctx = Annotated[AppContext, Depends(get_ctx)]


class EntryPublic(BaseModel):
    """One audit entry: who, when, what, from where, how it ended."""

    id: int
    at: datetime
    actor: str = Field(description='A user name, "owner key" or "cli:<os user>"')
    role: str
    action: str = Field(description='"POST /api/v1/campaigns/{campaign_id}/pause", "sign-in", ...')
    target_type: str | None
    target_id: str | None
    source: str = Field(description="The client's address (or the CLI's host)")
    outcome: Literal["ok", "refused", "failed"]
    status: int | None = Field(description="The HTTP status (the CLI's exit code)")
    detail: dict[str, Any]
    key_id: int | None = Field(
        None, description="The user's API key that acted (null: owner key, password, CLI)"
    )
    changes: dict[str, list[Any]] | None = Field(
        None, description='What a change replaced: {"role": ["operator", "viewer"]}'
    )


class AuditQuery(BaseModel):
    """The filters of the listing and the export."""

    actor: str | None = Field(None, max_length=100, description="Exactly this actor")
    action: str | None = Field(None, max_length=200, description="Actions containing this")
    target_type: str | None = Field(None, max_length=40)
    target_id: str | None = Field(None, max_length=100)
    outcome: Literal["ok", "refused", "failed"] | None = None
    since: AwareDatetime | None = Field(None, description="At or after this time")
    until: AwareDatetime | None = Field(None, description="Before this time")

    def where(self) -> audit.AuditFilter:
        """The storage filter."""
        return audit.AuditFilter(**self.model_dump())


Filters = Annotated[AuditQuery, Query()]


@router.get("/audit", response_model=Page[EntryPublic])
def get_audit(
    ctx: Ctx, filters: Filters, limit: Limit = 50, offset: Offset = 0
) -> Page[EntryPublic]:
    """The audit log, newest first, filtered by actor, action, target, outcome and time."""
    found = audit.entries(ctx.engine, filters.where(), limit=limit, offset=offset)
    return Page[EntryPublic](
        items=[EntryPublic.model_validate(e.__dict__) for e in found.items],
        total=found.total,
        limit=limit,
        offset=offset,
    )


@router.get(
    "/audit/export",
    response_class=StreamingResponse,
    responses=download("The matching entries as CSV", "text/csv"),
)
def export_audit(ctx: Ctx, filters: Filters) -> StreamingResponse:
    """The matching entries as CSV, oldest first (formula-like cells neutralised)."""
    return StreamingResponse(
        audit.export_lines(ctx.engine, filters.where()),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="audit.csv"'},
    )
