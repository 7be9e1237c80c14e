"""Per-recipient campaign reports (CSV, XLSX, JSON) and their summary.

Rows are streamed from the database by ``storage.reports`` (SQL rendered from the column
list, fetched ahead in a thread), so a million-row report never sits in memory. The XLSX
summary sheet and its chart come from openpyxl's write-only mode; the "Deliveries" sheet
is streamed as XML by ``campaigns.reports.xlsx_sheet``, which drops characters XML forbids from its
cells (so one bad reply text cannot fail the export). Phone numbers stay text, and cells
that a spreadsheet would read as a formula (starting with ``=``, ``+``, ``-``, ``@``,
tab or CR) are prefixed with ``'``, except E.164 phone numbers in the target column.
Times are ISO 8601 UTC text with a ``Z`` in CSV and JSON; in XLSX they are Excel dates
in UTC (a date-time number format; the header says "(UTC)") and the summary's rates are
percentages (``0.0%``). A report is written to a temporary file and moved into place,
so a failure leaves no half-written file.

Modules: ``columns`` (the one column list and the formatting rules), ``summary``,
``writers``, ``xlsx_sheet`` (the streamed sheet).
"""

from __future__ import annotations

from campaigns.reports.columns import COLUMNS, XLSX_COLUMNS, iso, iter_report_rows, neutralise
from campaigns.reports.summary import ReportError, ReportSummary, report_summary
from campaigns.reports.writers import FORMATS, write_report

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
