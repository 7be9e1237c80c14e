"""Per-recipient campaign reports (CSV, XLSX, JSON) and their summary.

Rows are streamed from the database (``yield_per``: a server-side cursor on
PostgreSQL), so a million-row report never sits in memory. The XLSX summary sheet and
its chart come from openpyxl's write-only mode; the "Deliveries" sheet is streamed as
XML by ``campaigns.xlsx_sheet``, which drops characters XML forbids from its cells (so
one bad reply text cannot fail the export). Phone numbers stay text, and cells that a
spreadsheet would read as a formula (starting with ``=``, ``+``, ``-``, ``@``, tab or
CR) are prefixed with ``'``, except E.164 phone numbers in the target column. Times are
ISO 8601 UTC text with a ``Z`` in CSV and JSON; in XLSX they are Excel dates in UTC (a
date-time number format; the header says "(UTC)") and the summary's rates are
percentages (``0.0%``). A report is written to a temporary file and moved into place, so
a failure leaves no half-written file.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Connection, Engine, Table, func, select

from campaigns import xlsx_sheet
from storage import reports as report_store
from storage import states, tables
from storage.queries.campaigns import delivery_counts
from storage.reports import sql as report_sql

_d: Table = tables.deliveries
_c: Table = tables.contacts
_campaigns: Table = tables.campaigns

FORMATS = (".csv", ".xlsx", ".json")
#: rows an Excel sheet holds, header included
XLSX_MAX_ROWS = 1_048_576
_DELIVERIES = "Deliveries"

COLUMNS = (
    "target",
    "name",
    "sender",
    "state",
    "attempts",
    "message_id",
    "error",
    "queued_at",
    "sent_at",
    "delivered_at",
    "read_at",
    "failed_at",
    "replied_at",
    "reply",
    "opted_out",
)
_TIMES = ("queued_at", "sent_at", "delivered_at", "read_at", "failed_at", "replied_at")
#: the XLSX "Deliveries" header: the times are Excel dates in UTC (a date cell has no zone)
XLSX_COLUMNS = tuple(f"{c} (UTC)" if c in _TIMES else c for c in COLUMNS)
#: number formats of the XLSX cells: times, rates
XLSX_DATE_FORMAT = "yyyy-mm-dd hh:mm:ss.000"
XLSX_RATE_FORMAT = "0.0%"
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_E164 = re.compile(r"^\+[1-9][0-9]{5,14}$")


class ReportError(ValueError):
    """A report that cannot be written as asked (unknown format, unknown campaign)."""


@dataclass(frozen=True)
class ReportSummary:
    """Counts and rates of one campaign."""

    campaign_id: int
    name: str
    state: str
    total: int
    counts: dict[str, int]
    sent: int  # rows that left (sent_at set), whatever happened next
    delivered: int
    read: int
    failed: int
    replied: int
    opted_out: int
    delivery_rate: float | None  # delivered / sent
    read_rate: float | None  # read / sent
    median_seconds_to_delivery: float | None  # of delivered_at - sent_at
    median_seconds_to_read: float | None  # of read_at - sent_at

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def iso(value: datetime | None) -> str:
    """ISO 8601 in UTC with a ``Z`` suffix, or "" for no time."""
    if value is None:
        return ""
    return value.isoformat().replace("+00:00", "Z")


def neutralise(value: str, *, phone_column: bool = False) -> str:
    """Prefix ``'`` to text a spreadsheet would run as a formula (E.164 targets exempt)."""
    if value.startswith(_FORMULA_START):
        if phone_column and _E164.match(value):
            return value
        return "'" + value
    return value


def _campaign(conn: Connection, campaign_id: int) -> Any:
    row = conn.execute(
        select(
            _campaigns.c.id, _campaigns.c.name, _campaigns.c.state, _campaigns.c.created_at
        ).where(_campaigns.c.id == campaign_id)
    ).one_or_none()
    if row is None:
        raise ReportError(f"campaign {campaign_id} does not exist")
    return row


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _median_seconds(micros: array[int]) -> float:
    """Median, in seconds, of an int64 array of microseconds, as ``statistics.median`` of
    the ``timedelta.total_seconds()`` floats gives it (exact below 2**53 us, 285 years)
    without a Python object per value: numpy partitions one copy of the buffer (a list
    of floats would take 33 MB for 750k deliveries)."""
    import numpy as np

    n = len(micros)
    k = n // 2
    middle = np.partition(np.frombuffer(micros, dtype=np.int64), [k - 1, k] if n % 2 == 0 else k)
    if n % 2:
        return float(middle[k]) / 1e6
    return (float(middle[k - 1]) / 1e6 + float(middle[k]) / 1e6) / 2


def _summary(conn: Connection, campaign_id: int) -> ReportSummary:
    camp = _campaign(conn, campaign_id)
    counts = delivery_counts(conn, campaign_id)
    agg = conn.execute(
        select(
            func.count(_d.c.sent_at),
            func.count(_d.c.delivered_at),
            func.count(_d.c.read_at),
            func.count(_d.c.replied_at),
        ).where(_d.c.campaign_id == campaign_id)
    ).one()
    opted = conn.execute(
        select(func.count())
        .select_from(_d.join(_c, _c.c.id == _d.c.contact_id))
        .where(_d.c.campaign_id == campaign_id, _c.c.opted_out.is_(True))
    ).scalar_one()
    to_delivery = report_store.micros_since_sent(conn, campaign_id, to="delivered")
    to_read = report_store.micros_since_sent(conn, campaign_id, to="read")
    sent, delivered, read, replied = (int(x) for x in agg)
    return ReportSummary(
        campaign_id=int(camp.id),
        name=str(camp.name),
        state=str(camp.state),
        total=sum(counts.values()),
        counts=counts,
        sent=sent,
        delivered=delivered,
        read=read,
        failed=counts.get(states.FAILED, 0),
        replied=replied,
        opted_out=int(opted),
        delivery_rate=_rate(delivered, sent),
        read_rate=_rate(read, sent),
        median_seconds_to_delivery=_median_or_none(to_delivery),
        median_seconds_to_read=_median_or_none(to_read),
    )


def _median_or_none(micros: array[int]) -> float | None:
    return round(_median_seconds(micros), 3) if micros else None


def report_summary(engine: Engine, campaign_id: int) -> ReportSummary:
    """The summary of campaign ``campaign_id`` (counts, rates, median times to delivery
    and to read)."""
    with engine.connect() as conn:
        return _summary(conn, campaign_id)


def iter_report_rows(
    conn: Connection, campaign_id: int, *, times: Callable[[datetime | None], Any] = iso
) -> Iterator[dict[str, Any]]:
    """Every recipient of the campaign as a dict of :data:`COLUMNS`, streamed in id order;
    each time as ``times`` renders it (ISO 8601 text by default)."""
    stmt = (
        select(
            _d.c.target,
            func.coalesce(_c.c.name, "").label("name"),
            _d.c.sender,
            _d.c.state,
            _d.c.attempts,
            _d.c.message_id,
            _d.c.error,
            *(_d.c[t] for t in _TIMES),
            _d.c.reply_text,
            _c.c.opted_out,
        )
        .select_from(_d.outerjoin(_c, _c.c.id == _d.c.contact_id))
        .where(_d.c.campaign_id == campaign_id)
        .order_by(_d.c.id)
    )
    for r in conn.execution_options(yield_per=report_store.YIELD_PER).execute(stmt):
        row: dict[str, Any] = {
            "target": r.target,
            "name": r.name or "",
            "sender": r.sender or "",
            "state": r.state,
            "attempts": int(r.attempts),
            "message_id": r.message_id or "",
            "error": r.error or "",
        }
        for t in _TIMES:
            row[t] = times(getattr(r, t))
        row["reply"] = r.reply_text or ""
        row["opted_out"] = bool(r.opted_out)
        yield row


def _cells(row: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for col in COLUMNS:
        value = row[col]
        if isinstance(value, str):
            value = neutralise(value, phone_column=col == "target")
        elif isinstance(value, bool):
            value = "yes" if value else "no"
        out.append(value)
    return out


def _write_csv_per_row(conn: Connection, campaign_id: int, fh: IO[str]) -> None:
    """The CSV through :func:`iter_report_rows` and :func:`_cells` (one Python step per
    row): the reference the fast path is tested against byte for byte."""
    writer = csv.writer(fh)
    writer.writerow(COLUMNS)
    for row in iter_report_rows(conn, campaign_id):
        writer.writerow(_cells(row))


_BOM = "\ufeff"


def _write_csv(conn: Connection, campaign_id: int, fh: IO[bytes]) -> None:
    """The CSV (UTF-8 with a BOM) with every line rendered by the database
    (:func:`storage.reports.write_csv_lines`); same bytes as :func:`_write_csv_per_row`.
    Memory stays flat."""
    fh.write((_BOM + ",".join(COLUMNS) + "\r\n").encode("utf-8"))
    if not report_store.supported(conn):  # pragma: no cover - SQLite and PostgreSQL only
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="")
        writer = csv.writer(text)
        for row in iter_report_rows(conn, campaign_id):
            writer.writerow(_cells(row))
        text.detach()
        return
    report_store.write_csv_lines(conn, campaign_id, fh)


def _write_json(conn: Connection, campaign_id: int, summary: ReportSummary, fh: IO[str]) -> None:
    camp = _campaign(conn, campaign_id)
    head = {"id": int(camp.id), "name": camp.name, "state": camp.state}
    fh.write('{"campaign": ' + json.dumps(head, ensure_ascii=False))
    fh.write(', "summary": ' + json.dumps(summary.as_dict(), ensure_ascii=False))
    fh.write(', "deliveries": [')
    first = True
    for row in iter_report_rows(conn, campaign_id):
        fh.write(("\n" if first else ",\n") + json.dumps(row, ensure_ascii=False))
        first = False
    fh.write("\n]}\n")


def _excel_time(value: datetime | None) -> datetime | str:
    """A time as an XLSX cell value: naive UTC (Excel dates have no zone), "" for none."""
    return "" if value is None else value.astimezone(UTC).replace(tzinfo=None)


def _summary_workbook(summary: ReportSummary) -> Any:
    """A write-only openpyxl workbook: the "Summary" sheet with its funnel chart, then an
    empty "Deliveries" sheet (returned as the workbook's second sheet). Its first cell
    style is the date format (``storage.reports.sql.XLSX_DATE_STYLE``, which the
    database's date cells name); rates are percentages."""
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.chart import BarChart, Reference

    wb = Workbook(write_only=True)
    ws = wb.create_sheet("Summary")
    date = WriteOnlyCell(ws)
    date.number_format = XLSX_DATE_FORMAT
    if date.style_id != report_sql.XLSX_DATE_STYLE:  # pragma: no cover - openpyxl changed
        raise RuntimeError(f"the XLSX date style is {date.style_id}, not the one the SQL names")

    def rate(value: float | None) -> Any:
        cell = WriteOnlyCell(ws, value)
        cell.number_format = XLSX_RATE_FORMAT
        return cell

    ws.append(["Campaign", neutralise(summary.name)])
    ws.append(["Campaign id", summary.campaign_id])
    ws.append(["State", summary.state])
    ws.append(["Recipients", summary.total])
    ws.append([])
    ws.append(["Stage", "Recipients"])  # row 6: the funnel the chart draws
    funnel_start = 7
    for label, value in (
        ("Sent", summary.sent),
        ("Delivered", summary.delivered),
        ("Read", summary.read),
        ("Failed", summary.failed),
    ):
        ws.append([label, value])
    ws.append([])
    ws.append(["Delivery rate (of sent)", rate(summary.delivery_rate)])
    ws.append(["Read rate (of sent)", rate(summary.read_rate)])
    ws.append(["Median seconds to delivery", summary.median_seconds_to_delivery])
    ws.append(["Median seconds to read", summary.median_seconds_to_read])
    ws.append(["Replied", summary.replied])
    ws.append(["Opted out", summary.opted_out])
    ws.append(["Times in", "UTC"])
    ws.append([])
    ws.append(["State", "Recipients"])
    for state, n in summary.counts.items():
        ws.append([state, n])
    chart = BarChart()
    chart.type = "bar"  # horizontal bars, top to bottom: a funnel
    chart.title = "Funnel"
    chart.y_axis.title = "Recipients"
    chart.legend = None
    data = Reference(ws, min_col=2, min_row=funnel_start - 1, max_row=funnel_start + 3)
    labels = Reference(ws, min_col=1, min_row=funnel_start, max_row=funnel_start + 3)
    chart.add_data(data, titles_from_data=True)
    chart.set_categories(labels)
    chart.x_axis.scaling.orientation = "maxMin"  # Sent on top
    ws.add_chart(chart, "D2")
    wb.create_sheet(_DELIVERIES)
    return wb


def _write_xlsx_openpyxl(
    conn: Connection, campaign_id: int, summary: ReportSummary, target: Path
) -> None:
    """The XLSX with every row appended through openpyxl (about 5k rows/s): the reference
    :func:`_write_xlsx` is tested against, cell by cell."""
    from openpyxl.cell import WriteOnlyCell

    wb = _summary_workbook(summary)
    rows = wb[_DELIVERIES]
    rows.append(list(XLSX_COLUMNS))

    def date(value: datetime) -> Any:
        cell = WriteOnlyCell(rows, value)
        cell.number_format = XLSX_DATE_FORMAT
        return cell

    for row in iter_report_rows(conn, campaign_id, times=_excel_time):
        rows.append([date(v) if isinstance(v, datetime) else v for v in _cells(row)])
    wb.save(target)


#: the fields of a row of ``XLSX_CELLS_*`` in sheet order (:data:`COLUMNS`): the six
#: times arrive as one field of cells the database rendered, fetched last
_XLSX_LAYOUT = xlsx_sheet.Layout(
    ("text", "text", "text", "text", "number", "text", "text", "cells", "text", "text")
)


#: the markers of ``XLSX_WINDOW_SQLITE``'s rows: 8 text values, a number and 6 dates each
_XLSX_MARKED = xlsx_sheet.Marked(
    texts=8,
    numbers=1,
    dates=6,
    date_start=report_sql.XLSX_DATE_START.encode(),
    date_end=report_sql.XLSX_DATE_END.encode(),
    date_style=report_sql.XLSX_DATE_STYLE,
    text_start=report_sql.XLSX_TEXT_START.encode(),
    text_end=report_sql.XLSX_TEXT_END.encode(),
    number_start=report_sql.XLSX_NUMBER_START.encode(),
    number_end=report_sql.XLSX_NUMBER_END.encode(),
    row_sep=report_sql.XLSX_ROW_SEP.encode(),
)


def _xlsx_window_rows(items: Iterable[report_store.XlsxItem]) -> Iterator[str | bytes]:
    """The sheet's ``<row>`` elements: XML the database's windows expanded to, and rows
    of ``XLSX_CELLS_*`` (:data:`_XLSX_LAYOUT`) rendered one by one, numbered from 2."""
    r = 2
    for payload, n in items:
        if isinstance(payload, bytes):
            yield payload
        else:
            yield xlsx_sheet.render_rows(_XLSX_LAYOUT, payload, r)
        r += n


def _write_xlsx(conn: Connection, campaign_id: int, summary: ReportSummary, target: Path) -> None:
    """The XLSX: openpyxl writes the summary, its chart and an empty "Deliveries" sheet
    to memory; ``campaigns.xlsx_sheet`` copies that package to ``target`` with the
    Deliveries sheet streamed from the database. Memory stays flat."""
    if not report_store.supported(conn):  # pragma: no cover
        _write_xlsx_openpyxl(conn, campaign_id, summary, target)
        return
    package = io.BytesIO()
    _summary_workbook(summary).save(package)
    with report_store.xlsx_items(conn, campaign_id, expand=_XLSX_MARKED.expand) as items:
        xml = xlsx_sheet.sheet_xml(XLSX_COLUMNS, _xlsx_window_rows(items))
        xlsx_sheet.replace_sheet(package, _DELIVERIES, xml, target)


def write_report(engine: Engine, campaign_id: int, path: Path) -> Path:
    """Write the report of ``campaign_id`` to ``path``; the format follows the extension."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ReportError(
            f"{path.name}: unsupported report format {suffix or '(none)'!r} "
            f"(use {', '.join(FORMATS)})"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with engine.connect() as conn:
            if suffix == ".csv":  # a CSV has no summary: only check that the campaign exists
                _campaign(conn, campaign_id)
                with tmp.open("wb") as fh:
                    _write_csv(conn, campaign_id, fh)
            else:
                summary = _summary(conn, campaign_id)
                if suffix == ".xlsx" and summary.total >= XLSX_MAX_ROWS:
                    raise ReportError(
                        f"{path.name}: {summary.total:,} recipients do not fit in one Excel "
                        f"sheet ({XLSX_MAX_ROWS - 1:,} rows at most): write .csv or .json instead"
                    )
                if suffix == ".json":
                    with tmp.open("w", encoding="utf-8") as fh:
                        _write_json(conn, campaign_id, summary, fh)
                else:
                    _write_xlsx(conn, campaign_id, summary, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


__all__ = [
    "COLUMNS",
    "FORMATS",
    "XLSX_COLUMNS",
    "ReportError",
    "ReportSummary",
    "iso",
    "iter_report_rows",
    "neutralise",
    "report_summary",
    "write_report",
]
