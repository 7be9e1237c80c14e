"""Campaign reports: the summary as JSON and per-recipient downloads (CSV, XLSX, JSON).

The files are written by ``campaigns.reports.write_report`` (the CLI's function) into a
private temporary directory, streamed, and deleted once sent.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse
from pydantic import BaseModel
from starlette.background import BackgroundTask

from campaigns.reports import ReportSummary, report_summary, write_report
from campaigns.service import get_campaign
from gatecast.web.api.common import Id
from gatecast.web.context import AppContext, get_ctx

router = APIRouter(tags=["reports"])
Ctx = Annotated[AppContext, Depends(get_ctx)]

ReportFormat = Literal["csv", "xlsx", "json"]

MEDIA_TYPES: dict[str, str] = {
    "csv": "text/csv; charset=utf-8",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "json": "application/json",
}


class TapPublic(BaseModel):
    """The taps of one button or list row."""

    kind: Literal["button", "row"]
    id: str
    title: str
    #: recipients whose first tap it was
    taps: int
    #: taps / sent (None: nothing sent)
    rate: float | None


class SummaryPublic(BaseModel):
    """Counts and rates of one campaign."""

    campaign_id: int
    name: str
    state: str
    total: int
    counts: dict[str, int]
    sent: int
    delivered: int
    read: int
    failed: int
    replied: int
    opted_out: int
    delivery_rate: float | None
    read_rate: float | None
    median_seconds_to_delivery: float | None
    median_seconds_to_read: float | None
    #: per quick-reply button and list row of the message (then any other id tapped)
    taps: list[TapPublic]


def _public(s: ReportSummary) -> SummaryPublic:
    return SummaryPublic.model_validate(s, from_attributes=True)


def report_filename(campaign_id: int, name: str, fmt: str) -> str:
    """``campaign-7-spring-sale.xlsx``: safe for any file system."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "report"
    return f"campaign-{campaign_id}-{slug}.{fmt}"


def build_report(ctx: AppContext, campaign_id: int, fmt: str) -> FileResponse:
    """Write the report to a temporary file and answer it as a download."""
    detail = get_campaign(ctx.engine, campaign_id)  # 404 for an unknown id
    folder = Path(tempfile.mkdtemp(prefix="gatecast-report-"))
    name = report_filename(campaign_id, detail.name, fmt)
    try:
        path = write_report(ctx.engine, campaign_id, folder / name)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return FileResponse(
        path,
        media_type=MEDIA_TYPES[fmt],
        filename=name,
        background=BackgroundTask(shutil.rmtree, folder, ignore_errors=True),
    )


@router.get("/campaigns/{campaign_id}/summary", response_model=SummaryPublic)
def get_summary(campaign_id: Id, ctx: Ctx) -> SummaryPublic:
    """Counts, delivery and read rates, median times to delivery and to read, taps per
    button and list row."""
    get_campaign(ctx.engine, campaign_id)
    return _public(report_summary(ctx.engine, campaign_id))


@router.get(
    "/campaigns/{campaign_id}/report.{fmt}",
    response_class=FileResponse,
    responses={
        200: {
            "content": {
                media: {"schema": {"type": "string", "format": "binary"}}
                for media in MEDIA_TYPES.values()
            },
            "description": "The per-recipient report as a download",
        }
    },
)
def get_report(campaign_id: Id, fmt: ReportFormat, ctx: Ctx) -> FileResponse:
    """Download the per-recipient report as CSV, XLSX or JSON.

    ``report.xlsx`` adds a summary sheet and a chart; ``report.json`` holds the summary
    and one object per recipient.
    """
    return build_report(ctx, campaign_id, fmt)
