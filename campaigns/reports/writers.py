"""The report files: CSV and XLSX rendered by the database, JSON from Python.

Rows are streamed (a server-side cursor on PostgreSQL), so a million-row report never
sits in memory. The CSV's lines and the XLSX's cells come from the database in the
report's format (``campaigns.reports.columns.FORMAT``); the XLSX summary sheet and its
chart come from openpyxl's write-only mode, and the "Deliveries" sheet is streamed as
XML by :mod:`campaigns.reports.xlsx_sheet`. A report is written to a temporary file and
moved into place, so a failure leaves no half-written file.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from sqlalchemy import Connection, Engine

from campaigns.reports import xlsx_sheet
from campaigns.reports.columns import COLUMNS, FORMAT, REPORT_COLUMNS, XLSX_COLUMNS
from campaigns.reports.columns import iter_report_rows as iter_report_rows
from campaigns.reports.summary import (
    DELIVERIES_SHEET,
    ReportError,
    ReportSummary,
    campaign_row,
    read_summary,
    summary_workbook,
)
from storage import reports as report_store
from storage.reports import sql as report_sql

FORMATS = (".csv", ".xlsx", ".json")
#: rows an Excel sheet holds, header included
XLSX_MAX_ROWS = 1_048_576

_BOM = "\ufeff"


def write_csv(conn: Connection, campaign_id: int, fh: IO[bytes]) -> None:
    """The CSV (UTF-8 with a BOM) with every line rendered by the database
    (:func:`storage.reports.write_csv_lines`); the bytes ``csv.writer`` writes of
    :func:`~campaigns.reports.columns.cells`. Memory stays flat."""
    fh.write((_BOM + ",".join(COLUMNS) + "\r\n").encode("utf-8"))
    report_store.write_csv_lines(conn, campaign_id, fh, FORMAT)


def write_json(conn: Connection, campaign_id: int, summary: ReportSummary, fh: IO[str]) -> None:
    """The JSON: the campaign, its summary and every row of :func:`iter_report_rows`."""
    camp = campaign_row(conn, campaign_id)
    head = {"id": int(camp.id), "name": camp.name, "state": camp.state}
    fh.write('{"campaign": ' + json.dumps(head, ensure_ascii=False))
    fh.write(', "summary": ' + json.dumps(summary.as_dict(), ensure_ascii=False))
    fh.write(', "deliveries": [')
    first = True
    for row in iter_report_rows(conn, campaign_id):
        fh.write(("\n" if first else ",\n") + json.dumps(row, ensure_ascii=False))
        first = False
    fh.write("\n]}\n")


def _layout() -> xlsx_sheet.Layout:
    """The fields of a row of ``xlsx_cells_*`` in sheet order: the times arrive as one
    field of cells the database rendered, fetched last."""
    kinds: list[xlsx_sheet.Kind] = []
    for c in REPORT_COLUMNS:
        kind: xlsx_sheet.Kind = (
            "cells" if c.kind == "time" else "number" if c.kind == "number" else "text"
        )
        if kind != "cells" or kinds[-1:] != ["cells"]:
            kinds.append(kind)
    return xlsx_sheet.Layout(tuple(kinds))


_XLSX_LAYOUT = _layout()


def _count(*kinds: str) -> int:
    return sum(c.kind in kinds for c in REPORT_COLUMNS)


#: the markers of ``xlsx_window_sqlite``'s rows: text values, numbers and dates
_XLSX_MARKED = xlsx_sheet.Marked(
    texts=_count("phone", "text", "enum", "yesno"),
    numbers=_count("number"),
    dates=_count("time"),
    date_start=report_sql.XLSX_DATE_START.encode(),
    date_end=report_sql.XLSX_DATE_END.encode(),
    date_style=report_sql.XLSX_DATE_STYLE,
    text_start=report_sql.XLSX_TEXT_START.encode(),
    text_end=report_sql.XLSX_TEXT_END.encode(),
    number_start=report_sql.XLSX_NUMBER_START.encode(),
    number_end=report_sql.XLSX_NUMBER_END.encode(),
    row_sep=report_sql.XLSX_ROW_SEP.encode(),
)


def xlsx_window_rows(items: Iterable[report_store.XlsxItem]) -> Iterator[str | bytes]:
    """The sheet's ``<row>`` elements: XML the database's windows expanded to, and rows
    of ``xlsx_cells_*`` (:data:`_XLSX_LAYOUT`) rendered one by one, numbered from 2."""
    r = 2
    for payload, n in items:
        if isinstance(payload, bytes):
            yield payload
        else:
            yield xlsx_sheet.render_rows(_XLSX_LAYOUT, payload, r)
        r += n


def write_xlsx(conn: Connection, campaign_id: int, summary: ReportSummary, target: Path) -> None:
    """The XLSX: openpyxl writes the summary, its chart and an empty "Deliveries" sheet
    to memory; :mod:`campaigns.reports.xlsx_sheet` copies that package to ``target``
    with the Deliveries sheet streamed from the database. Memory stays flat."""
    package = io.BytesIO()
    summary_workbook(summary).save(package)
    with report_store.xlsx_items(conn, campaign_id, FORMAT, expand=_XLSX_MARKED.expand) as items:
        xml = xlsx_sheet.sheet_xml(XLSX_COLUMNS, xlsx_window_rows(items))
        xlsx_sheet.replace_sheet(package, DELIVERIES_SHEET, xml, target)


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
                campaign_row(conn, campaign_id)
                with tmp.open("wb") as fh:
                    write_csv(conn, campaign_id, fh)
            else:
                summary = read_summary(conn, campaign_id)
                if suffix == ".xlsx" and summary.total >= XLSX_MAX_ROWS:
                    raise ReportError(
                        f"{path.name}: {summary.total:,} recipients do not fit in one Excel "
                        f"sheet ({XLSX_MAX_ROWS - 1:,} rows at most): write .csv or .json instead"
                    )
                if suffix == ".json":
                    with tmp.open("w", encoding="utf-8") as fh:
                        write_json(conn, campaign_id, summary, fh)
                else:
                    write_xlsx(conn, campaign_id, summary, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


__all__ = [
    "FORMATS",
    "XLSX_MAX_ROWS",
    "write_csv",
    "write_json",
    "write_report",
    "write_xlsx",
    "xlsx_window_rows",
]
