"""The report's one column list and its formatting rules, each stated once.

Every rendering of a report row follows from here: the header, :func:`iter_report_rows`
and :func:`cells` in Python, and the SQL the database renders CSV lines and XLSX cells
with (``storage.reports.sql``, which gets :data:`FORMAT`: the columns and the rules as
data). The rules:

* text a spreadsheet would run as a formula (starting with one of
  :data:`FORMULA_START`) is prefixed with :data:`FORMULA_PREFIX`, except an E.164
  number (``+`` then :data:`E164_DIGITS` digits, the first not 0) in the phone column;
* times are ISO 8601 UTC text with a ``Z``, the fraction only when not zero
  (:func:`iso`); Excel dates in UTC in XLSX (:data:`XLSX_DATE_FORMAT`);
* the state (an enum) takes the delivery states (``storage.states.ALL``), written as
  they are; yes/no columns are :data:`YES_NO`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, Table, select

from storage import reports as report_store
from storage import states, tables
from storage.reports.sql import Kind, ReportFormat


class Column(NamedTuple):
    """One report column: its ``name`` (the header), the database ``field`` it shows
    (``d.`` deliveries, ``c.`` contacts) and its ``kind`` (how it is formatted)."""

    name: str
    field: str
    kind: Kind


_TIMES = ("queued_at", "sent_at", "delivered_at", "read_at", "failed_at", "replied_at")

#: the report's columns in sheet order
REPORT_COLUMNS: tuple[Column, ...] = (
    Column("target", "d.target", "phone"),
    Column("name", "c.name", "text"),
    Column("sender", "d.sender", "text"),
    Column("state", "d.state", "enum"),
    Column("attempts", "d.attempts", "number"),
    Column("message_id", "d.message_id", "text"),
    Column("error", "d.error", "text"),
    *(Column(t, f"d.{t}", "time") for t in _TIMES),
    Column("reply", "d.reply_text", "text"),
    Column("opted_out", "c.opted_out", "yesno"),
    Column("variant", "d.variant", "text"),
    # the first button or list row the recipient tapped: its id and title (last: a sheet
    # read by column position keeps its columns)
    Column("tapped_button_id", "d.tapped_button_id", "text"),
    Column("tapped_row_id", "d.tapped_row_id", "text"),
    Column("tapped_title", "d.tapped_title", "text"),
)
#: the header: the columns' names
COLUMNS = tuple(c.name for c in REPORT_COLUMNS)
#: the names of the time columns
TIMES = tuple(c.name for c in REPORT_COLUMNS if c.kind == "time")
#: the XLSX "Deliveries" header: the times are Excel dates in UTC (a date cell has no zone)
XLSX_COLUMNS = tuple(f"{c.name} (UTC)" if c.kind == "time" else c.name for c in REPORT_COLUMNS)
#: the number format of the XLSX time cells
XLSX_DATE_FORMAT = "yyyy-mm-dd hh:mm:ss.000"

#: text starting with one of these is a formula to a spreadsheet
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: what neutralises it
FORMULA_PREFIX = "'"
#: the digits of an E.164 number after its ``+`` (the first not 0): at least, at most
E164_DIGITS = (6, 15)
#: a yes/no column's words for true and false
YES_NO = ("yes", "no")
_E164 = re.compile(rf"^\+[1-9][0-9]{{{E164_DIGITS[0] - 1},{E164_DIGITS[1] - 1}}}$")

#: the column list and the rules as data, for the SQL renderings
FORMAT = ReportFormat(
    columns=REPORT_COLUMNS,
    formula_start=FORMULA_START,
    prefix=FORMULA_PREFIX,
    e164_digits=E164_DIGITS,
    enum_values=states.ALL,
    yes_no=YES_NO,
)


def iso(value: datetime | None) -> str:
    """ISO 8601 in UTC with a ``Z`` suffix, or "" for no time."""
    if value is None:
        return ""
    return value.isoformat().replace("+00:00", "Z")


def neutralise(value: str, *, phone_column: bool = False) -> str:
    """Prefix ``'`` to text a spreadsheet would run as a formula (E.164 targets exempt)."""
    if value.startswith(FORMULA_START):
        if phone_column and _E164.match(value):
            return value
        return FORMULA_PREFIX + value
    return value


_TABLES: dict[str, Table] = {"d": tables.deliveries, "c": tables.contacts}


def _column(field: str) -> Any:
    table, name = field.split(".")
    return _TABLES[table].c[name]


def _value(kind: Kind, value: Any, times: Callable[[datetime | None], Any]) -> Any:
    if kind == "text":
        return value or ""
    if kind == "number":
        return int(value)
    if kind == "time":
        return times(value)
    if kind == "yesno":
        return bool(value)
    return value  # phone, enum: never NULL


def iter_report_rows(
    conn: Connection, campaign_id: int, *, times: Callable[[datetime | None], Any] = iso
) -> Iterator[dict[str, Any]]:
    """Every recipient of the campaign as a dict of :data:`COLUMNS`, streamed in id order;
    each time as ``times`` renders it (ISO 8601 text by default)."""
    d, c = tables.deliveries, tables.contacts
    stmt = (
        select(*(_column(col.field) for col in REPORT_COLUMNS))
        .select_from(d.outerjoin(c, c.c.id == d.c.contact_id))
        .where(d.c.campaign_id == campaign_id)
        .order_by(d.c.id)
    )
    kinds = [col.kind for col in REPORT_COLUMNS]
    for r in conn.execution_options(yield_per=report_store.YIELD_PER).execute(stmt):
        yield {
            name: _value(kind, value, times)
            for name, kind, value in zip(COLUMNS, kinds, r, strict=True)
        }


def cells(row: dict[str, Any]) -> list[Any]:
    """A row of :func:`iter_report_rows` as the sheet's cells: text neutralised, yes/no
    for booleans."""
    out: list[Any] = []
    for col in REPORT_COLUMNS:
        value = row[col.name]
        if isinstance(value, str):
            value = neutralise(value, phone_column=col.kind == "phone")
        elif isinstance(value, bool):
            value = YES_NO[0] if value else YES_NO[1]
        out.append(value)
    return out


__all__ = [
    "COLUMNS",
    "E164_DIGITS",
    "FORMAT",
    "FORMULA_PREFIX",
    "FORMULA_START",
    "REPORT_COLUMNS",
    "TIMES",
    "XLSX_COLUMNS",
    "XLSX_DATE_FORMAT",
    "YES_NO",
    "Column",
    "cells",
    "iso",
    "iter_report_rows",
    "neutralise",
]
