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

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse
from pydantic import BaseModel
from starlette.background import BackgroundTask

from campaigns.reports import ReportSummary, report_summary, write_report
from campaigns.service import get_campaign
from gatecast.web.api.common import CSV, XLSX, Id, download, labelled
from gatecast.web.context import AppContext, get_ctx

router = APIRouter(tags=["reports"])
Ctx = Annotated[AppContext, Depends(get_ctx)]

ReportFormat = Literal["csv", "xlsx", "json"]

MEDIA_TYPES: dict[str, str] = {"csv": CSV, "xlsx": XLSX, "json": "application/json"}


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


class ReportCampaignPublic(BaseModel):
    """The campaign a JSON report is of."""

    id: int
    name: str
    state: str


class ReportJsonPublic(BaseModel):
    """``report.json``: the campaign, its summary and one object per recipient (the
    report's columns, docs/reports.md)."""

    campaign: ReportCampaignPublic
    summary: SummaryPublic
    deliveries: list[dict[str, str | int | float | bool | None]]


def _public(s: ReportSummary) -> SummaryPublic:
    return SummaryPublic.model_validate(s, from_attributes=True)


def report_filename(campaign_id: int, name: str, fmt: str) -> str:
    """``campaign-7-spring-sale.xlsx``: safe for any file system."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "report"
    return f"campaign-{campaign_id}-{slug}.{fmt}"


def build_report(
    ctx: AppContext, campaign_id: int, fmt: str, media_type: str | None = None
) -> FileResponse:
    """Write the report to a temporary file and answer it as a download (as
    ``media_type``, else the format's own)."""
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
        media_type=media_type or MEDIA_TYPES[fmt],
        filename=name,
        background=BackgroundTask(shutil.rmtree, folder, ignore_errors=True),
    )


@router.get("/campaigns/{campaign_id}/summary", response_model=SummaryPublic)
def get_summary(campaign_id: Id, ctx: Ctx) -> SummaryPublic:
    """Counts, delivery and read rates, median times to delivery and to read, taps per
    button and list row."""
    get_campaign(ctx.engine, campaign_id)
    return _public(report_summary(ctx.engine, campaign_id))


#: one operation per format, so each declares the one type it answers and a generated
#: client reads it as that (text, a typed body, bytes: decision 69)
_REPORT_TEXT = (
    "Download the per-recipient report as {what}.\n\n"
    "{more}One row per recipient; the columns are docs/reports.md's."
)


@router.get(
    "/campaigns/{campaign_id}/report.csv",
    response_class=FileResponse,
    responses=download("The per-recipient report as CSV", "text/csv"),
    description=_REPORT_TEXT.format(what="CSV", more=""),
)
def get_report_csv(campaign_id: Id, ctx: Ctx) -> FileResponse:
    return build_report(ctx, campaign_id, "csv")


@router.get(
    "/campaigns/{campaign_id}/report.json",
    response_class=FileResponse,
    responses={200: {"model": ReportJsonPublic, "description": "The report as JSON"}},
    description=_REPORT_TEXT.format(
        what="JSON", more="The campaign, its summary and one object per recipient. "
    ),
)
def get_report_json(campaign_id: Id, ctx: Ctx) -> FileResponse:
    return build_report(ctx, campaign_id, "json")


@router.get(
    "/campaigns/{campaign_id}/report.xlsx",
    response_class=FileResponse,
    responses=download("The per-recipient report as an Excel workbook", XLSX),
    description=_REPORT_TEXT.format(
        what="XLSX",
        more="A summary sheet with a chart, then the deliveries; `Accept: "
        "application/octet-stream` labels the same bytes so. ",
    ),
)
def get_report_xlsx(campaign_id: Id, ctx: Ctx, request: Request) -> FileResponse:
    return build_report(ctx, campaign_id, "xlsx", labelled(request, XLSX))


@router.get("/campaigns/{campaign_id}/report.{fmt}", include_in_schema=False)
def get_report(campaign_id: Id, fmt: ReportFormat, ctx: Ctx) -> FileResponse:
    """Any other suffix: 422 naming ``fmt`` (the three formats have their own routes)."""
    return build_report(ctx, campaign_id, fmt)
