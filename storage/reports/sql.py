"""Hot SQL for the reports: the database renders every CSV line as ``csv.writer`` writes
it, and every XLSX cell.

The statements are generated from a :class:`ReportFormat`: the column list and the
formatting rules of ``campaigns.reports.columns``, passed in as data (storage imports no
domain code), each statement built once per format (``functools.cache``). One
``SELECT`` per dialect returns one text column per recipient: the whole CSV line
(without its ``\\r\\n``), formatted exactly as ``campaigns.reports`` formats and writes
it in Python (``iso()``, ``neutralise()``, ``cells()``, ``csv.writer`` with its
defaults), so the export is ``fetchmany`` + ``"\\r\\n".join`` with no per-row Python:

* times: ISO 8601 UTC with a ``Z`` suffix, microseconds only when not zero (what
  ``datetime.isoformat()`` does), ``''`` for no time. SQLite holds SQLAlchemy's
  ``YYYY-MM-DD HH:MM:SS.ffffff`` text (naive UTC); PostgreSQL ``timestamptz``, rendered
  with ``::text`` (needs ``DateStyle`` ISO: :data:`PG_SESSION`), which drops a zero
  fraction and trailing zeros, so the fraction is padded back to six digits.
* text: ``NULL`` -> ``''``; a value starting with a formula start character gets the
  prefix, except E.164 numbers in the phone column. The E.164 test mirrors
  ``re.match(r"^\\+[1-9][0-9]{5,14}$")`` (for 6-15 digits), including Python's ``$``
  matching before one trailing newline. Enum values the format knows are written as
  they are (SQLite CSV: they skip the checks).
* CSV quoting (``QUOTE_MINIMAL``): a field containing ``"``, ``,``, CR or LF is wrapped
  in ``"`` with inner ``"`` doubled. Times, numbers and ``yes``/``no`` never need it.
* yes/no columns: the format's words (``no`` for NULL: a recipient without a contact).

Each dialect has one formula test (``_sqlite_formula``, ``_pg_formula``), one E.164 test
(``_sqlite_e164``, ``_pg_e164``) and one time rendering per target (ISO text, Excel
serial); the statements keep their fused shapes (SQLite pays per function call).

SQLite: :func:`csv_window_sqlite` returns the lines of a window of ids as one blob
(walking the rowid range: no sort, no row per line crossing into Python), used when the
campaign's rows are dense in their id range (:func:`use_rowid_range`);
:func:`csv_lines_sqlite` reads the campaign through its index and sorts by id, one line
per row. Parameters: ``?`` for sqlite3, ``%s`` for psycopg; no statement contains a ``%``
other than SQLite's ``printf`` format.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal, NamedTuple

#: what a column holds: how each dialect renders it
Kind = Literal["phone", "text", "enum", "number", "time", "yesno"]
#: the kinds held as text (neutralised, quoted as needed)
_TEXT_KINDS: tuple[Kind, ...] = ("phone", "text", "enum")


class ReportFormat(NamedTuple):
    """A report row as the caller defines it (``campaigns.reports.columns``), as data:
    hashable, so each statement below is built once per format."""

    #: (name, field, kind) in sheet order; a field is ``d.<column>`` of deliveries or
    #: ``c.<column>`` of contacts. The times are adjacent columns
    columns: tuple[tuple[str, str, Kind], ...]
    #: text starting with one of these is prefixed with :attr:`prefix`
    formula_start: tuple[str, ...]
    prefix: str
    #: E.164 (exempt in the phone column): ``+`` then (min, max) digits, the first not 0
    e164_digits: tuple[int, int]
    #: the enum's values: lowercase words, written as they are
    enum_values: tuple[str, ...]
    #: a yes/no column's words for true and false (or NULL): words, never quoted
    yes_no: tuple[str, str]


_FROM = "\nFROM deliveries AS d LEFT OUTER JOIN contacts AS c ON c.id = d.contact_id"
_EMPTY = "''"


def _literal(text: str) -> str:
    """The SQL string literal of ``text`` (both dialects)."""
    return "'" + text.replace("'", "''") + "'"


def _fields(fmt: ReportFormat, *kinds: Kind) -> list[str]:
    return [field for _name, field, kind in fmt.columns if kind in kinds]


def _pieces(
    fmt: ReportFormat, cell: Callable[[str, Kind], str], times: Callable[[list[str]], str]
) -> list[tuple[Kind, str]]:
    """Each column's SQL in sheet order as ``cell`` renders it, except the times: one
    piece, ``times`` of their fields, where the first of them stands."""
    times_at = [i for i, (_n, _f, kind) in enumerate(fmt.columns) if kind == "time"]
    if times_at and times_at != list(range(times_at[0], times_at[0] + len(times_at))):
        raise ValueError("the time columns of a report must be adjacent")
    pieces: list[tuple[Kind, str]] = []
    for i, (_name, field, kind) in enumerate(fmt.columns):
        if kind != "time":
            pieces.append((kind, cell(field, kind)))
        elif i == times_at[0]:
            pieces.append(("time", times(_fields(fmt, "time"))))
    return pieces


def _yes_no(x: str, fmt: ReportFormat) -> str:
    yes, no = (_literal(word) for word in fmt.yes_no)
    return f"CASE WHEN {x} THEN {yes} ELSE {no} END"


def _neutralised(x: str, formula: str, fmt: ReportFormat, first: str = "") -> str:
    """``neutralise(coalesce(x, ''))`` when ``formula`` tells a formula; ``first``: an
    earlier ``WHEN ... THEN ...`` branch."""
    return (
        f"CASE {first}WHEN {formula} THEN {_literal(fmt.prefix)} || {x} ELSE COALESCE({x}, '') END"
    )


def _csv_quoted(x: str, prefix: str) -> str:
    """``x`` (after ``prefix``) as a quoted CSV field: in ``"``, inner ``"`` doubled."""
    return f"'\"' || {prefix} || replace({x}, '\"', '\"\"') || '\"'"


# ---------------------------------------------------------------------------------- SQLite
# Each function call costs SQLite's VDBE a few hundred instructions per row, so the common
# case takes few calls: E.164 targets and known states skip the quoting checks, a formula
# start is one GLOB, and the six times are one printf.


def _sqlite_formula(x: str, fmt: ReportFormat, exempt: str | None = None) -> str:
    """``x`` starts like a formula, and is not ``exempt``: one GLOB of a class holding the
    start characters (a real tab and CR; a ``-`` last is literal). GLOB reads up to a
    NUL byte, which starts no formula."""
    chars = [c for c in fmt.formula_start if c != "-"]
    if any(c in "]^" for c in chars):
        raise ValueError("formula start characters ']' and '^' do not fit a GLOB class")
    dash = "-" if "-" in fmt.formula_start else ""
    keep = f" AND NOT {exempt}" if exempt else ""
    return f"{x} GLOB {_literal('[' + ''.join(chars) + dash + ']*')}{keep}"


def _sqlite_e164(t: str, fmt: ReportFormat, *, newline: bool = False) -> str:
    """``t`` is ``+`` then :attr:`ReportFormat.e164_digits` ASCII digits, the first not 0
    (then one newline when ``newline``). Text equal to ``'+' || CAST(t AS INTEGER)`` is a
    plus and a canonical decimal: no zero first, no sign, space, dot or NUL (the
    comparison is of every byte); the GLOB before it excludes ``+-``."""
    if fmt.e164_digits[1] > 18:
        raise ValueError("a number of more than 18 digits overflows SQLite's INTEGER")
    low, high = (n + 1 + newline for n in fmt.e164_digits)
    tail = " || char(10)" if newline else ""
    return (
        f"({t} GLOB '+[1-9]*' AND length({t}) BETWEEN {low} AND {high}"
        f" AND {t} = '+' || CAST({t} AS INTEGER){tail})"
    )


def _sqlite_needs_quotes(x: str) -> str:
    # instr, not GLOB: it compares bytes, so a NUL inside the text does not end the search
    return f"(instr({x}, '\"') OR instr({x}, ',') OR instr({x}, char(10)) OR instr({x}, char(13)))"


def _sqlite_csv_field(x: str, fmt: ReportFormat) -> str:
    """``neutralise(coalesce(x, ''))`` as one CSV field."""
    formula = _sqlite_formula(x, fmt)
    prefix = f"CASE WHEN {formula} THEN {_literal(fmt.prefix)} ELSE {_EMPTY} END"
    quoted = f"WHEN {_sqlite_needs_quotes(x)} THEN {_csv_quoted(x, prefix)} "
    return _neutralised(x, formula, fmt, quoted)


def _sqlite_csv_phone(t: str, fmt: ReportFormat) -> str:
    """An E.164 target as it is (digits: nothing to quote); any other neutralised unless
    E.164 before one final newline (Python's ``$``), and quoted as needed."""
    formula = _sqlite_formula(t, fmt, _sqlite_e164(t, fmt, newline=True))
    prefix = f"CASE WHEN {formula} THEN {_literal(fmt.prefix)} ELSE {_EMPTY} END"
    return (
        f"CASE WHEN {_sqlite_e164(t, fmt)} THEN {t}"
        f" WHEN {_sqlite_needs_quotes(t)} THEN {_csv_quoted(t, prefix)}"
        f" ELSE {prefix} || COALESCE({t}, '') END"
    )


def _sqlite_csv_enum(x: str, fmt: ReportFormat) -> str:
    """A known value as it is; any other as a text field."""
    known = ", ".join(_literal(v) for v in fmt.enum_values)
    return f"CASE WHEN {x} IN ({known}) THEN {x} ELSE {_sqlite_csv_field(x, fmt)} END"


def _sqlite_csv_times(fields: list[str]) -> str:
    """The times with their Z (printf writes NULL as ''), then two replaces over the
    segment: '.000000Z' only occurs as a zero fraction, and a space only between a
    date and its time."""
    return (
        "replace(replace(printf('"
        + ",".join(["%s"] * len(fields))
        + "', "
        + ", ".join(f"{t} || 'Z'" for t in fields)
        + "), '.000000Z', 'Z'), ' ', 'T')"
    )


def _sqlite_csv_cell(x: str, kind: Kind, fmt: ReportFormat) -> str:
    if kind == "phone":
        return _sqlite_csv_phone(x, fmt)
    if kind == "enum":
        return _sqlite_csv_enum(x, fmt)
    if kind == "number":
        return f"COALESCE({x}, '')"
    if kind == "yesno":
        return _yes_no(x, fmt)
    return _sqlite_csv_field(x, fmt)


def _sqlite_nul(fmt: ReportFormat) -> str:
    """A text value of the row holds a NUL byte (where printf's ``%s`` ends)."""
    return " OR ".join(f"instr({x}, char(0))" for x in _fields(fmt, *_TEXT_KINDS))


def _sqlite_csv_line(fmt: ReportFormat) -> str:
    """One CSV line, never NULL (a NULL line would be left out of a window's
    group_concat). printf joins the cells in one allocation where ``||`` allocates and
    copies the line so far at each step; but printf's ``%s`` ends at a NUL byte, so a
    row with a NUL in its text is joined with ``||``."""
    cells = [
        c
        for _kind, c in _pieces(
            fmt, lambda x, kind: _sqlite_csv_cell(x, kind, fmt), _sqlite_csv_times
        )
    ]
    return (
        f"CASE WHEN {_sqlite_nul(fmt)}\nTHEN "
        + "\n    || ',' || ".join(f"({c})" for c in cells)
        + "\nELSE printf('"
        + ",".join(["%s"] * len(cells))
        + "',\n    "
        + ",\n    ".join(cells)
        + ") END"
    )


@functools.cache
def csv_lines_sqlite(fmt: ReportFormat) -> str:
    """The CSV lines of one campaign in id order (parameter: campaign id), SQLite."""
    return f"SELECT {_sqlite_csv_line(fmt)}{_FROM}\nWHERE d.campaign_id = ?\nORDER BY d.id"


@functools.cache
def csv_window_sqlite(fmt: ReportFormat) -> str:
    """The lines of a window of ids of one campaign as one UTF-8 blob joined by CRLF, NULL
    for a window without its rows (parameters: first id, last id, campaign id). ``+``
    keeps SQLite off the campaign index: the subquery walks the rowid range in id order
    (no sort), as a co-routine. SQLite before 3.44 has no ORDER BY inside an aggregate:
    ``group_concat`` takes the rows as the co-routine yields them, and SQLite keeps the
    ORDER BY of a FROM-clause subquery under a single-table aggregate (it drops one only
    under a join or an outer ORDER BY); the tests check the order."""
    return (
        "SELECT CAST(group_concat(line, char(13, 10)) AS BLOB) FROM (\n"
        f"SELECT {_sqlite_csv_line(fmt)} AS line{_FROM}\n"
        "WHERE d.id BETWEEN ? AND ? AND +d.campaign_id = ?\nORDER BY d.id)"
    )


#: first id, last id and number of rows of one campaign (parameter: campaign id), SQLite
CAMPAIGN_SPAN_SQLITE = "SELECT min(id), max(id), count(*) FROM deliveries WHERE campaign_id = ?"


def use_rowid_range(first: int | None, last: int | None, rows: int) -> bool:
    """Walk the rowid range when it holds at most 4 ids per row of the campaign: a row
    skipped costs far less than sorting a row (``first``/``last``: the span's ids)."""
    return first is not None and last is not None and last - first + 1 <= 4 * rows


# ------------------------------------------------------------------------------ PostgreSQL

#: run before the PostgreSQL statements (:func:`csv_lines_postgresql`,
#: :func:`xlsx_cells_postgresql`) in the same transaction (``SET LOCAL``: they end with
#: it). ``::text`` of a timestamp is ``YYYY-MM-DD HH:MM:SS[.ffffff]`` only under DateStyle
#: ISO; ``float8::text`` is the shortest exact text with extra_float_digits 1. The
#: planner sizes the export from statistics that may be stale (an unanalysed campaign
#: looks like a few hundred rows): without setup and transfer costs it plans parallel
#: workers (up to ``max_parallel_workers_per_gather``), which evaluate the lines side by
#: side and merge them in id order
PG_SESSION = (
    "SET LOCAL DateStyle = 'ISO, MDY'",
    "SET LOCAL extra_float_digits = 1",  # float8::text reads back as the same double
    "SET LOCAL parallel_setup_cost = 0",
    "SET LOCAL parallel_tuple_cost = 0",
    "SET LOCAL min_parallel_table_scan_size = 0",
    "SET LOCAL min_parallel_index_scan_size = 0",
)


def _pg_char(c: str) -> str:
    return _literal(c) if c.isprintable() else f"chr({ord(c)})"


def _pg_formula(x: str, fmt: ReportFormat, exempt: str | None = None) -> str:
    """``x`` starts like a formula, and is not ``exempt``."""
    keep = f" AND NOT ({exempt})" if exempt else ""
    starts = ", ".join(_pg_char(c) for c in fmt.formula_start)
    return f"substr({x}, 1, 1) IN ({starts}){keep}"


def _pg_e164(t: str, fmt: ReportFormat) -> str:
    """E.164 without a regex (about 2x cheaper), before one final newline too (Python's
    ``$``): ASCII digits are what ltrim strips; the first digit is compared with IN, not
    BETWEEN, which would follow the collation."""
    low, high = (n + 1 for n in fmt.e164_digits)
    return (
        f"substr({t}, 1, 1) = '+'"
        f" AND length({t}) - (right({t}, 1) = chr(10))::int BETWEEN {low} AND {high}"
        f" AND substr({t}, 2, 1) IN ('1', '2', '3', '4', '5', '6', '7', '8', '9')"
        f" AND ltrim(substr({t}, 2), '0123456789') IN ('', chr(10))"
    )


def _pg_csv_field(x: str, fmt: ReportFormat, exempt: str | None = None) -> str:
    """``neutralise(coalesce(x, ''))`` as one CSV field; ``exempt`` keeps the value."""
    needs = (
        f"strpos({x}, '\"') + strpos({x}, ',') + strpos({x}, chr(10)) + strpos({x}, chr(13)) > 0"
    )
    prefix = f"CASE WHEN {_pg_formula(x, fmt, exempt)} THEN {_literal(fmt.prefix)} ELSE '' END"
    return f"CASE WHEN {needs} THEN {_csv_quoted(x, prefix)} ELSE {prefix} || COALESCE({x}, '') END"


def _pg_csv_times(fields: list[str]) -> str:
    """``::text`` gives 'YYYY-MM-DD HH:MM:SS' or '...SS.f' with 1-6 digits: rpad to 26 with
    '0' makes the fraction six digits, and turns a missing one into seven zeros after
    the seconds, which only then precede the 'Z' ('.ffffff' has a dot): replaced by 'Z'."""
    return (
        "replace(replace("
        + " || ',' || ".join(
            f"COALESCE(rpad(({t} AT TIME ZONE 'UTC')::text, 26, '0') || 'Z', '')" for t in fields
        )
        + ", '0000000Z', 'Z'), ' ', 'T')"
    )


def _pg_csv_cell(x: str, kind: Kind, fmt: ReportFormat) -> str:
    if kind == "phone":
        return _pg_csv_field(x, fmt, _pg_e164(x, fmt))
    if kind == "number":
        return x
    if kind == "yesno":
        return _yes_no(x, fmt)
    return _pg_csv_field(x, fmt)


@functools.cache
def csv_lines_postgresql(fmt: ReportFormat) -> str:
    """The CSV lines of one campaign in id order (parameter: campaign id), PostgreSQL."""
    pieces = _pieces(fmt, lambda x, kind: _pg_csv_cell(x, kind, fmt), _pg_csv_times)
    return (
        "SELECT "
        + "\n    || ',' || ".join(f"({c})" for _kind, c in pieces)
        + _FROM
        + "\nWHERE d.campaign_id = %s\nORDER BY d.id"
    )


# ----------------------------------------------------------------------------- XLSX cells
# The XLSX sheet takes its cells from the database as ``campaigns.reports`` gives them
# (``cells()``: neutralised text, ``''`` for NULL, ``yes``/``no``; numbers as text), which
# ``campaigns.reports.xlsx_sheet`` escapes for XML, except the times, which never need
# it: the last column holds them as the sheet's XML cells already: Excel dates (the
# serial number of days since 1899-12-30, UTC, styled with the workbook's date format
# :data:`XLSX_DATE_STYLE`), an empty cell for no time. The serial is the double
# openpyxl's ``to_excel`` computes (whole days + seconds of the day / 86400), written so
# that it reads back as that double: ``%!.17g`` on SQLite, ``float8::text`` (shortest
# exact) on PostgreSQL.

#: the ``cellXfs`` index of the date-time format in the report's workbook (the first style
#: ``campaigns.reports`` registers; it checks that openpyxl gave it this index)
XLSX_DATE_STYLE = 1

_EMPTY_CELL = '<c t="inlineStr"/>'
_DATE_OPEN = f'<c s="{XLSX_DATE_STYLE}"><v>'
_DATE_CLOSE = "</v></c>"


#: seconds from Excel's day 0 (1899-12-30) to the Unix epoch (days counted from there stay
#: positive, so integer division and remainder floor as openpyxl's ``timedelta.days`` does)
_EXCEL_EPOCH_SECONDS = 25569 * 86400


def _sqlite_serial(t: str) -> str:
    """The Excel serial of SQLite time text ``t`` (a REAL; NULL for NULL): the days of its
    date since 1899-12-30 (julianday of the date alone, 0.4 us; of the whole text 1 us)
    plus its hours, minutes, seconds and microseconds over 86400, in openpyxl's order."""
    return (
        f"(julianday(substr({t}, 1, 10)) - 2415018.5"
        f" + (substr({t}, 12, 2) * 3600 + substr({t}, 15, 2) * 60 + substr({t}, 18, 2)"
        f" + substr({t}, 21, 6) / 1000000.0) / 86400.0)"
    )


def _pg_serial(t: str) -> str:
    """The Excel serial of PostgreSQL ``timestamptz`` ``t`` (float8, NULL for NULL)."""
    micros = f"((extract(epoch FROM {t}) * 1000000)::bigint + {_EXCEL_EPOCH_SECONDS}000000)"
    secs = f"div({micros}, 1000000)"
    return (
        f"(div({secs}, 86400)::float8 + (mod({secs}, 86400)::float8"
        f" + mod({micros}, 1000000)::float8 / 1000000.0::float8) / 86400.0::float8)"
    )


def _sqlite_xlsx_cell(x: str, kind: Kind, fmt: ReportFormat, number: str) -> str:
    """The cell of ``x``: text ``neutralise(coalesce(x, ''))`` (the phone as it is when
    E.164, before one final newline too: Python's ``$``); ``number`` formats a number."""
    if kind == "phone":
        exempt = _sqlite_formula(x, fmt, _sqlite_e164(x, fmt, newline=True))
        return _neutralised(x, exempt, fmt, f"WHEN {_sqlite_e164(x, fmt)} THEN {x} ")
    if kind == "number":
        return number.format(x)
    if kind == "yesno":
        return _yes_no(x, fmt)
    return _neutralised(x, _sqlite_formula(x, fmt), fmt)


def _xlsx_select(cells: list[tuple[Kind, str]]) -> str:
    """The cells of a row, the time cells last."""
    ordered = [c for kind, c in cells if kind != "time"] + [c for k, c in cells if k == "time"]
    return "SELECT " + ",\n    ".join(ordered) + _FROM


def _sqlite_time_cells(fields: list[str]) -> str:
    """Each time its own cell: a date, or an empty cell."""
    return (
        "printf('"
        + "%s" * len(fields)
        + "', "
        + ", ".join(
            f"CASE WHEN {t} IS NULL THEN '{_EMPTY_CELL}'"
            f" ELSE printf('{_DATE_OPEN}%!.17g{_DATE_CLOSE}', {_sqlite_serial(t)}) END"
            for t in fields
        )
        + ")"
    )


def _sqlite_xlsx(fmt: ReportFormat) -> str:
    return _xlsx_select(
        _pieces(
            fmt,
            lambda x, kind: _sqlite_xlsx_cell(x, kind, fmt, "CAST({} AS TEXT)"),
            _sqlite_time_cells,
        )
    )


@functools.cache
def xlsx_cells_sqlite(fmt: ReportFormat) -> str:
    """The XLSX cells of one campaign in id order through its index, sorted (parameter:
    campaign id), SQLite."""
    return f"{_sqlite_xlsx(fmt)}\nWHERE d.campaign_id = ?\nORDER BY d.id"


@functools.cache
def xlsx_cells_sqlite_range(fmt: ReportFormat) -> str:
    """The same walking the rowid range (no sort), for a campaign dense in its id range
    (:func:`use_rowid_range`); parameters: first id, last id, campaign id."""
    return f"{_sqlite_xlsx(fmt)}\nWHERE d.id BETWEEN ? AND ? AND +d.campaign_id = ?\nORDER BY d.id"


#: markers of :func:`xlsx_window_sqlite`'s text: each text value between TEXT_START and
#: TEXT_END, a number between NUMBER_START and NUMBER_END, each time (an Excel serial,
#: empty for none) between DATE_START and DATE_END, rows joined by ROW_SEP. Control
#: characters XML forbids in text: a value holding one is found by counting them
XLSX_TEXT_START = "\x1f"
XLSX_TEXT_END = "\x1e"
XLSX_NUMBER_START = "\x1d"
XLSX_NUMBER_END = "\x1c"
XLSX_ROW_SEP = "\x1b"
XLSX_DATE_START = "\x19"
XLSX_DATE_END = "\x18"


def _xlsx_marked_times(fields: list[str]) -> str:
    """The times of a row as Excel serials, each between the date markers."""
    return (
        "printf('"
        + (XLSX_DATE_END + XLSX_DATE_START).join(["%s"] * len(fields))
        + "', "
        + ", ".join(
            f"CASE WHEN {t} IS NULL THEN '' ELSE printf('%!.17g', {_sqlite_serial(t)}) END"
            for t in fields
        )
        + ")"
    )


def _xlsx_marks(kind: Kind) -> tuple[str, str]:
    if kind == "number":
        return XLSX_NUMBER_START, XLSX_NUMBER_END
    if kind == "time":
        return XLSX_DATE_START, XLSX_DATE_END
    return XLSX_TEXT_START, XLSX_TEXT_END


def _xlsx_marked_line(fmt: ReportFormat) -> str:
    """One row's values with their markers (printf, or ``||`` when a value holds a NUL,
    where printf's ``%s`` ends)."""
    pieces = _pieces(fmt, lambda x, kind: _sqlite_xlsx_cell(x, kind, fmt, "{}"), _xlsx_marked_times)
    marks = [_xlsx_marks(kind) for kind, _c in pieces]
    cells = [c for _kind, c in pieces]
    return (
        f"CASE WHEN {_sqlite_nul(fmt)}\nTHEN "
        + "\n    || ".join(
            f"'{start}' || ({cell}) || '{end}'"
            for (start, end), cell in zip(marks, cells, strict=True)
        )
        + "\nELSE printf('"
        + "".join(f"{start}%s{end}" for start, end in marks)
        + "',\n    "
        + ",\n    ".join(cells)
        + ") END"
    )


@functools.cache
def xlsx_window_sqlite(fmt: ReportFormat) -> str:
    """The rows of a window of ids of one campaign as one UTF-8 blob, joined by
    :data:`XLSX_ROW_SEP`, and their number (parameters: first id, last id, campaign id);
    walks the rowid range in id order like :func:`csv_window_sqlite`."""
    return (
        f"SELECT CAST(group_concat(line, '{XLSX_ROW_SEP}') AS BLOB), count(*) FROM (\n"
        f"SELECT {_xlsx_marked_line(fmt)} AS line{_FROM}\n"
        "WHERE d.id BETWEEN ? AND ? AND +d.campaign_id = ?\nORDER BY d.id)"
    )


def _pg_xlsx_cell(x: str, kind: Kind, fmt: ReportFormat) -> str:
    """``neutralise(coalesce(x, ''))`` (the phone as it is when E.164)."""
    if kind == "number":
        return f"{x}::text"
    if kind == "yesno":
        return _yes_no(x, fmt)
    return _neutralised(x, _pg_formula(x, fmt, _pg_e164(x, fmt) if kind == "phone" else None), fmt)


def _pg_time_cells(fields: list[str]) -> str:
    """The time cells of a row: dates, or empty cells."""
    return "\n    || ".join(
        f"CASE WHEN {t} IS NULL THEN '{_EMPTY_CELL}'"
        f" ELSE '{_DATE_OPEN}' || ({_pg_serial(t)})::text || '{_DATE_CLOSE}' END"
        for t in fields
    )


@functools.cache
def xlsx_cells_postgresql(fmt: ReportFormat) -> str:
    """The XLSX cells of one campaign in id order (parameter: campaign id), PostgreSQL, run
    after :data:`PG_SESSION`."""
    pieces = _pieces(fmt, lambda x, kind: _pg_xlsx_cell(x, kind, fmt), _pg_time_cells)
    return _xlsx_select(pieces) + "\nWHERE d.campaign_id = %s\nORDER BY d.id"


# ------------------------------------------------------------------------ summary figures


def _micros_since_sent_sqlite(column: str) -> str:
    """Microseconds from ``sent_at`` to ``column``, at least 0, of each row of one campaign
    that has both (parameter ``:campaign_id``), SQLite: whole seconds through
    ``strftime('%s')`` of the time without its fraction (SQLite rounds a fraction to
    milliseconds, so .999999 would count as the next second), plus the difference of the
    six fraction digits (SQLAlchemy stores ``YYYY-MM-DD HH:MM:SS.ffffff``): exact, where
    julianday() is not."""
    return (
        f"SELECT max(0, (strftime('%s', substr({column}, 1, 19))"
        " - strftime('%s', substr(sent_at, 1, 19))) * 1000000"
        f" + CAST(substr({column}, 21, 6) AS INTEGER) - CAST(substr(sent_at, 21, 6) AS INTEGER))"
        " FROM deliveries"
        f" WHERE campaign_id = :campaign_id AND sent_at IS NOT NULL AND {column} IS NOT NULL"
    )


def _micros_since_sent_postgresql(column: str) -> str:
    """The same, PostgreSQL (``extract`` of an interval is exact numeric)."""
    return (
        f"SELECT greatest(0, (extract(epoch FROM {column} - sent_at) * 1000000)::bigint)"
        " FROM deliveries"
        f" WHERE campaign_id = :campaign_id AND sent_at IS NOT NULL AND {column} IS NOT NULL"
    )


#: microseconds from sent to delivered of each delivered row of one campaign
DELIVERY_MICROS_SQLITE = _micros_since_sent_sqlite("delivered_at")
DELIVERY_MICROS_POSTGRESQL = _micros_since_sent_postgresql("delivered_at")
#: microseconds from sent to read of each read row of one campaign
READ_MICROS_SQLITE = _micros_since_sent_sqlite("read_at")
READ_MICROS_POSTGRESQL = _micros_since_sent_postgresql("read_at")


__all__ = [
    "CAMPAIGN_SPAN_SQLITE",
    "DELIVERY_MICROS_POSTGRESQL",
    "DELIVERY_MICROS_SQLITE",
    "PG_SESSION",
    "READ_MICROS_POSTGRESQL",
    "READ_MICROS_SQLITE",
    "XLSX_DATE_END",
    "XLSX_DATE_START",
    "XLSX_DATE_STYLE",
    "XLSX_NUMBER_END",
    "XLSX_NUMBER_START",
    "XLSX_ROW_SEP",
    "XLSX_TEXT_END",
    "XLSX_TEXT_START",
    "Kind",
    "ReportFormat",
    "csv_lines_postgresql",
    "csv_lines_sqlite",
    "csv_window_sqlite",
    "use_rowid_range",
    "xlsx_cells_postgresql",
    "xlsx_cells_sqlite",
    "xlsx_cells_sqlite_range",
    "xlsx_window_sqlite",
]
