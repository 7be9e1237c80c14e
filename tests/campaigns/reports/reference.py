"""Reference writers the fast report paths are tested against: every row through Python
(:func:`~campaigns.reports.columns.iter_report_rows` and
:func:`~campaigns.reports.columns.cells`), with ``csv.writer`` and openpyxl."""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Connection

from campaigns.reports.columns import (
    COLUMNS,
    XLSX_COLUMNS,
    XLSX_DATE_FORMAT,
    cells,
    iter_report_rows,
)
from campaigns.reports.summary import DELIVERIES_SHEET, ReportSummary, summary_workbook


def write_csv_per_row(conn: Connection, campaign_id: int, fh: IO[str]) -> None:
    """The CSV one Python step per row: the reference the database's lines are tested
    against byte for byte."""
    writer = csv.writer(fh)
    writer.writerow(COLUMNS)
    for row in iter_report_rows(conn, campaign_id):
        writer.writerow(cells(row))


def _excel_time(value: datetime | None) -> datetime | str:
    """A time as an XLSX cell value: naive UTC (Excel dates have no zone), "" for none."""
    return "" if value is None else value.astimezone(UTC).replace(tzinfo=None)


def write_xlsx_openpyxl(
    conn: Connection, campaign_id: int, summary: ReportSummary, target: Path
) -> None:
    """The XLSX with every row appended through openpyxl (about 5k rows/s): the reference
    ``campaigns.reports.writers.write_xlsx`` is tested against, cell by cell."""
    from openpyxl.cell import WriteOnlyCell

    wb = summary_workbook(summary)
    rows = wb[DELIVERIES_SHEET]
    rows.append(list(XLSX_COLUMNS))

    def date(value: datetime) -> Any:
        cell = WriteOnlyCell(rows, value)
        cell.number_format = XLSX_DATE_FORMAT
        return cell

    for row in iter_report_rows(conn, campaign_id, times=_excel_time):
        rows.append([date(v) if isinstance(v, datetime) else v for v in cells(row)])
    wb.save(target)
