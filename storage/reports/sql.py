"""Hot SQL for the CSV report: the database renders every line as ``csv.writer`` writes it.

One ``SELECT`` per dialect returns one text column per recipient: the whole CSV line
(without its ``\\r\\n``), formatted exactly as ``campaigns.reports`` formats and writes it
in Python (``iso()``, ``neutralise()``, ``_cells()``, ``csv.writer`` with its defaults), so
the export is ``fetchmany`` + ``"\\r\\n".join`` with no per-row Python:

* times: ISO 8601 UTC with a ``Z`` suffix, microseconds only when not zero (what
  ``datetime.isoformat()`` does), ``''`` for no time. SQLite holds SQLAlchemy's
  ``YYYY-MM-DD HH:MM:SS.ffffff`` text (naive UTC); PostgreSQL ``timestamptz``, rendered
  with ``::text`` (needs ``DateStyle`` ISO: :data:`PG_SESSION`), which drops a zero
  fraction and trailing zeros, so the fraction is padded back to six digits.
* text: ``NULL`` -> ``''``; a value starting with ``= + - @ TAB CR`` gets a ``'``
  prefix, except E.164 numbers in the target column. The E.164 test mirrors
  ``re.match(r"^\\+[1-9][0-9]{5,14}$")``, including Python's ``$`` matching before one
  trailing newline.
* CSV quoting (``QUOTE_MINIMAL``): a field containing ``"``, ``,``, CR or LF is wrapped
  in ``"`` with inner ``"`` doubled. Times, ``attempts`` and ``yes``/``no`` never need it.
* ``opted_out``: ``yes`` / ``no`` (``no`` without a contact).

SQLite: :data:`CSV_WINDOW_SQLITE` returns the lines of a window of ids as one blob
(walking the rowid range: no sort, no row per line crossing into Python), used when the
campaign's rows are dense in their id range (:func:`use_rowid_range`);
:data:`CSV_LINES_SQLITE` reads the campaign through its index and sorts by id, one line
per row. Parameters: ``?`` for sqlite3, ``%s`` for psycopg; no statement contains a ``%``
other than SQLite's ``printf`` format.
"""

from __future__ import annotations

from collections.abc import Callable

_TIMES = ("queued_at", "sent_at", "delivered_at", "read_at", "failed_at", "replied_at")
_FROM = "\nFROM deliveries AS d LEFT OUTER JOIN contacts AS c ON c.id = d.contact_id"


# ---------------------------------------------------------------------------------- SQLite
# Each function call costs SQLite's VDBE a few hundred instructions per row, so the common
# case takes few calls: E.164 targets and known states skip the quoting checks, a formula
# start is one GLOB, and the six times are one printf.

#: a value starting like a formula (= + - @ TAB CR: a real tab and CR in the class, and a
#: "-" before "]" is literal). GLOB reads up to a NUL byte, which starts no formula
_SQLITE_FORMULA = "'[=+@\t\r-]*'"
_QUOTE = "''''"  # the SQL literal of one '
_EMPTY = "''"


def _sqlite_needs_quotes(x: str) -> str:
    # instr, not GLOB: it compares bytes, so a NUL inside the text does not end the search
    return f"(instr({x}, '\"') OR instr({x}, ',') OR instr({x}, char(10)) OR instr({x}, char(13)))"


def _sqlite_quoted(x: str, prefix: str) -> str:
    return f"'\"' || {prefix} || replace({x}, '\"', '\"\"') || '\"'"


def _sqlite_field(x: str) -> str:
    """``neutralise(coalesce(x, ''))`` as one CSV field."""
    formula = f"{x} GLOB {_SQLITE_FORMULA}"
    prefix = f"CASE WHEN {formula} THEN {_QUOTE} ELSE {_EMPTY} END"
    return (
        f"CASE WHEN {_sqlite_needs_quotes(x)} THEN {_sqlite_quoted(x, prefix)}"
        f" WHEN {formula} THEN {_QUOTE} || {x} ELSE COALESCE({x}, '') END"
    )


def _sqlite_e164(t: str, *, newline: bool = False) -> str:
    """``t`` is ``+`` then 6-15 ASCII digits, the first not 0 (then one newline when
    ``newline``). Text equal to ``'+' || CAST(t AS INTEGER)`` is a plus and a canonical
    decimal: no zero first, no sign, space, dot or NUL (the comparison is of every byte);
    the GLOB before it excludes ``+-``."""
    low, high, tail = (8, 17, " || char(10)") if newline else (7, 16, "")
    return (
        f"({t} GLOB '+[1-9]*' AND length({t}) BETWEEN {low} AND {high}"
        f" AND {t} = '+' || CAST({t} AS INTEGER){tail})"
    )


def _sqlite_target(t: str = "d.target") -> str:
    """An E.164 target as it is (digits: nothing to quote); any other neutralised unless
    E.164 before one final newline (Python's ``$``), and quoted as needed."""
    exempt = _sqlite_e164(t, newline=True)
    prefix = (
        f"CASE WHEN {t} GLOB {_SQLITE_FORMULA} AND NOT {exempt} THEN {_QUOTE} ELSE {_EMPTY} END"
    )
    return (
        f"CASE WHEN {_sqlite_e164(t)} THEN {t}"
        f" WHEN {_sqlite_needs_quotes(t)} THEN {_sqlite_quoted(t, prefix)}"
        f" ELSE {prefix} || COALESCE({t}, '') END"
    )


#: the delivery states (``storage.states.ALL``): lowercase words, written as they are
_STATES = ("queued", "sending", "sent", "delivered", "read", "failed", "unknown", "skipped")


def _sqlite_state(x: str = "d.state") -> str:
    known = ", ".join(f"'{s}'" for s in _STATES)
    return f"CASE WHEN {x} IN ({known}) THEN {x} ELSE {_sqlite_field(x)} END"


# the six times with their Z (printf writes NULL as ''), then two replaces over the
# segment: '.000000Z' only occurs as a zero fraction, and a space only between a date
# and its time
_SQLITE_TIMES = (
    "replace(replace(printf('%s,%s,%s,%s,%s,%s', "
    + ", ".join(f"d.{t} || 'Z'" for t in _TIMES)
    + "), '.000000Z', 'Z'), ' ', 'T')"
)

_SQLITE_CELLS = (
    _sqlite_target(),
    _sqlite_field("c.name"),
    _sqlite_field("d.sender"),
    _sqlite_state(),
    "COALESCE(d.attempts, '')",
    _sqlite_field("d.message_id"),
    _sqlite_field("d.error"),
    _SQLITE_TIMES,
    _sqlite_field("d.reply_text"),
    "CASE WHEN c.opted_out THEN 'yes' ELSE 'no' END",
)
_SQLITE_NUL = " OR ".join(
    f"instr({x}, char(0))"
    for x in (
        "d.target",
        "c.name",
        "d.sender",
        "d.state",
        "d.message_id",
        "d.error",
        "d.reply_text",
    )
)

#: one CSV line, never NULL (a NULL line would be left out of a window's group_concat).
#: printf joins the cells in one allocation where ``||`` allocates and copies the line
#: so far at each step; but printf's ``%s`` ends at a NUL byte, so a row with a NUL in
#: its text is joined with ``||``
_SQLITE_LINE = (
    f"CASE WHEN {_SQLITE_NUL}\nTHEN "
    + "\n    || ',' || ".join(f"({c})" for c in _SQLITE_CELLS)
    + "\nELSE printf('"
    + ",".join(["%s"] * len(_SQLITE_CELLS))
    + "',\n    "
    + ",\n    ".join(_SQLITE_CELLS)
    + ") END"
)

#: the CSV lines of one campaign in id order (parameter: campaign id), SQLite
CSV_LINES_SQLITE = f"SELECT {_SQLITE_LINE}{_FROM}\nWHERE d.campaign_id = ?\nORDER BY d.id"

#: the lines of a window of ids of one campaign as one UTF-8 blob joined by CRLF, NULL
#: for a window without its rows (parameters: first id, last id, campaign id). ``+``
#: keeps SQLite off the campaign index: the subquery walks the rowid range in id order
#: (no sort), as a co-routine. SQLite before 3.44 has no ORDER BY inside an aggregate:
#: ``group_concat`` takes the rows as the co-routine yields them, and SQLite keeps the
#: ORDER BY of a FROM-clause subquery under a single-table aggregate (it drops one only
#: under a join or an outer ORDER BY); the tests check the order
CSV_WINDOW_SQLITE = (
    "SELECT CAST(group_concat(line, char(13, 10)) AS BLOB) FROM (\n"
    f"SELECT {_SQLITE_LINE} AS line{_FROM}\n"
    "WHERE d.id BETWEEN ? AND ? AND +d.campaign_id = ?\nORDER BY d.id)"
)

#: first id, last id and number of rows of one campaign (parameter: campaign id), SQLite
CAMPAIGN_SPAN_SQLITE = "SELECT min(id), max(id), count(*) FROM deliveries WHERE campaign_id = ?"


def use_rowid_range(first: int | None, last: int | None, rows: int) -> bool:
    """Walk the rowid range when it holds at most 4 ids per row of the campaign: a row
    skipped costs far less than sorting a row (``first``/``last``: the span's ids)."""
    return first is not None and last is not None and last - first + 1 <= 4 * rows


# ------------------------------------------------------------------------------ PostgreSQL

#: run before :data:`CSV_LINES_POSTGRESQL` and :data:`XLSX_CELLS_POSTGRESQL` in the same
#: transaction (``SET LOCAL``: they end with it). ``::text`` of a timestamp is
#: ``YYYY-MM-DD HH:MM:SS[.ffffff]`` only under DateStyle ISO; ``float8::text`` is the
#: shortest exact text with extra_float_digits 1. The planner sizes the export from
#: statistics that may be stale (an unanalysed campaign looks like a few hundred rows):
#: without setup and transfer costs it plans parallel workers (up to
#: ``max_parallel_workers_per_gather``), which evaluate the lines side by side and merge
#: them in id order
PG_SESSION = (
    "SET LOCAL DateStyle = 'ISO, MDY'",
    "SET LOCAL extra_float_digits = 1",  # float8::text reads back as the same double
    "SET LOCAL parallel_setup_cost = 0",
    "SET LOCAL parallel_tuple_cost = 0",
    "SET LOCAL min_parallel_table_scan_size = 0",
    "SET LOCAL min_parallel_index_scan_size = 0",
)


def _pg_cell(expr: str, *, needs_quotes: str, tab: str, cr: str, exempt: str | None = None) -> str:
    """``neutralise(coalesce(expr, ''))`` as one CSV field; ``exempt`` keeps the value."""
    keep = f" AND NOT ({exempt})" if exempt else ""
    prefix = (
        f"CASE WHEN substr({expr}, 1, 1) IN ('=', '+', '-', '@', {tab}, {cr}){keep} "
        "THEN '''' ELSE '' END"
    )
    quoted = f"'\"' || {prefix} || replace({expr}, '\"', '\"\"') || '\"'"
    return f"CASE WHEN {needs_quotes} THEN {quoted} ELSE {prefix} || COALESCE({expr}, '') END"


def _pg_line(times: str, field: dict[str, str]) -> str:
    cells = [
        field["d.target"],
        field["c.name"],
        field["d.sender"],
        field["d.state"],
        "d.attempts",
        field["d.message_id"],
        field["d.error"],
        times,
        field["d.reply_text"],
        "CASE WHEN c.opted_out THEN 'yes' ELSE 'no' END",
    ]
    return "SELECT " + "\n    || ',' || ".join(f"({c})" for c in cells) + _FROM


_TEXT = ("d.target", "c.name", "d.sender", "d.state", "d.message_id", "d.error", "d.reply_text")


def _pg_field(expr: str, exempt: str | None = None) -> str:
    needs = (
        f"strpos({expr}, '\"') + strpos({expr}, ',') + strpos({expr}, chr(10))"
        f" + strpos({expr}, chr(13)) > 0"
    )
    return _pg_cell(expr, needs_quotes=needs, tab="chr(9)", cr="chr(13)", exempt=exempt)


# ``::text`` gives 'YYYY-MM-DD HH:MM:SS' or '...SS.f' with 1-6 digits: rpad to 26 with '0'
# makes the fraction six digits, and turns a missing one into seven zeros after the
# seconds, which only then precede the 'Z' ('.ffffff' has a dot): replaced by 'Z'
_PG_TIMES = (
    "replace(replace("
    + " || ',' || ".join(
        f"COALESCE(rpad((d.{t} AT TIME ZONE 'UTC')::text, 26, '0') || 'Z', '')" for t in _TIMES
    )
    + ", '0000000Z', 'Z'), ' ', 'T')"
)

# E.164 without a regex (about 2x cheaper): ASCII digits are what ltrim strips; the first
# digit is compared with IN, not BETWEEN, which would follow the collation
_PG_E164 = (
    "substr(d.target, 1, 1) = '+'"
    " AND length(d.target) - (right(d.target, 1) = chr(10))::int BETWEEN 7 AND 16"
    " AND substr(d.target, 2, 1) IN ('1', '2', '3', '4', '5', '6', '7', '8', '9')"
    " AND ltrim(substr(d.target, 2), '0123456789') IN ('', chr(10))"
)

#: the CSV lines of one campaign in id order (parameter: campaign id), PostgreSQL
CSV_LINES_POSTGRESQL = (
    _pg_line(_PG_TIMES, {c: _pg_field(c, _PG_E164 if c == "d.target" else None) for c in _TEXT})
    + "\nWHERE d.campaign_id = %s\nORDER BY d.id"
)

# ----------------------------------------------------------------------------- XLSX cells
# The XLSX sheet takes its cells from the database as ``campaigns.reports._cells()`` gives
# them (neutralised text, ``''`` for NULL, ``yes``/``no``; attempts as text), which
# ``campaigns.xlsx_sheet`` escapes for XML, except the six times, which never need it:
# the last column holds them as the sheet's XML cells already: Excel dates (the serial
# number of days since 1899-12-30, UTC, styled with the workbook's date format
# :data:`XLSX_DATE_STYLE`), an empty cell for no time. The serial is the double openpyxl's
# ``to_excel`` computes (whole days + seconds of the day / 86400), written so that it
# reads back as that double: ``%!.17g`` on SQLite, ``float8::text`` (shortest exact) on
# PostgreSQL.

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


def _sqlite_cell(x: str) -> str:
    """``neutralise(coalesce(x, ''))``."""
    return f"CASE WHEN {x} GLOB {_SQLITE_FORMULA} THEN {_QUOTE} || {x} ELSE COALESCE({x}, '') END"


def _sqlite_target_cell(t: str = "d.target") -> str:
    """The target as it is when E.164, else neutralised (E.164 before one final newline
    is exempt too: Python's ``$``)."""
    formula = f"{t} GLOB {_SQLITE_FORMULA} AND NOT {_sqlite_e164(t, newline=True)}"
    return (
        f"CASE WHEN {_sqlite_e164(t)} THEN {t}"
        f" WHEN {formula} THEN {_QUOTE} || {t} ELSE COALESCE({t}, '') END"
    )


def _xlsx_select(target: str, cell: Callable[[str], str], attempts: str, time_cells: str) -> str:
    cells = [
        target,
        cell("c.name"),
        cell("d.sender"),
        cell("d.state"),
        attempts,
        cell("d.message_id"),
        cell("d.error"),
        cell("d.reply_text"),
        "CASE WHEN c.opted_out THEN 'yes' ELSE 'no' END",
        time_cells,
    ]
    return "SELECT " + ",\n    ".join(cells) + _FROM


# each time its own cell: a date, or an empty cell
_SQLITE_TIME_CELLS = (
    "printf('"
    + "%s" * len(_TIMES)
    + "', "
    + ", ".join(
        f"CASE WHEN d.{t} IS NULL THEN '{_EMPTY_CELL}'"
        f" ELSE printf('{_DATE_OPEN}%!.17g{_DATE_CLOSE}', {_sqlite_serial(f'd.{t}')}) END"
        for t in _TIMES
    )
    + ")"
)
_SQLITE_XLSX = _xlsx_select(
    _sqlite_target_cell(), _sqlite_cell, "CAST(d.attempts AS TEXT)", _SQLITE_TIME_CELLS
)

#: the XLSX cells of one campaign in id order through its index, sorted (parameter:
#: campaign id), SQLite
XLSX_CELLS_SQLITE = f"{_SQLITE_XLSX}\nWHERE d.campaign_id = ?\nORDER BY d.id"

#: the same walking the rowid range (no sort), for a campaign dense in its id range
#: (:func:`use_rowid_range`); parameters: first id, last id, campaign id
XLSX_CELLS_SQLITE_RANGE = (
    f"{_SQLITE_XLSX}\nWHERE d.id BETWEEN ? AND ? AND +d.campaign_id = ?\nORDER BY d.id"
)


#: markers of :data:`XLSX_WINDOW_SQLITE`'s text: each text value between TEXT_START and
#: TEXT_END, the number (attempts) between NUMBER_START and NUMBER_END, each time (an
#: Excel serial, empty for none) between DATE_START and DATE_END, rows joined by ROW_SEP.
#: Control characters XML forbids in text: a value holding one is found by counting them
XLSX_TEXT_START = "\x1f"
XLSX_TEXT_END = "\x1e"
XLSX_NUMBER_START = "\x1d"
XLSX_NUMBER_END = "\x1c"
XLSX_ROW_SEP = "\x1b"
XLSX_DATE_START = "\x19"
XLSX_DATE_END = "\x18"
#: the six times of a row as Excel serials, each between the date markers
_XLSX_LINE_TIMES = (
    "printf('"
    + (XLSX_DATE_END + XLSX_DATE_START).join(["%s"] * len(_TIMES))
    + "', "
    + ", ".join(
        f"CASE WHEN d.{t} IS NULL THEN '' ELSE printf('%!.17g', {_sqlite_serial(f'd.{t}')}) END"
        for t in _TIMES
    )
    + ")"
)
_XLSX_LINE_CELLS = (
    _sqlite_target_cell(),
    _sqlite_cell("c.name"),
    _sqlite_cell("d.sender"),
    _sqlite_cell("d.state"),
    "d.attempts",
    _sqlite_cell("d.message_id"),
    _sqlite_cell("d.error"),
    _XLSX_LINE_TIMES,
    _sqlite_cell("d.reply_text"),
    "CASE WHEN c.opted_out THEN 'yes' ELSE 'no' END",
)
_XLSX_LINE_WRAPS = tuple(
    (XLSX_NUMBER_START, XLSX_NUMBER_END)
    if i == 4
    else (XLSX_DATE_START, XLSX_DATE_END)
    if i == 7
    else (XLSX_TEXT_START, XLSX_TEXT_END)
    for i in range(len(_XLSX_LINE_CELLS))
)
#: one row's 15 values with their markers (printf, or ``||`` when a value holds a NUL,
#: where printf's ``%s`` ends)
_XLSX_LINE = (
    f"CASE WHEN {_SQLITE_NUL}\nTHEN "
    + "\n    || ".join(
        f"'{start}' || ({cell}) || '{end}'"
        for (start, end), cell in zip(_XLSX_LINE_WRAPS, _XLSX_LINE_CELLS, strict=True)
    )
    + "\nELSE printf('"
    + "".join(f"{start}%s{end}" for start, end in _XLSX_LINE_WRAPS)
    + "',\n    "
    + ",\n    ".join(_XLSX_LINE_CELLS)
    + ") END"
)

#: the rows of a window of ids of one campaign as one UTF-8 blob, joined by
#: :data:`XLSX_ROW_SEP`, and their number (parameters: first id, last id, campaign id);
#: walks the rowid range in id order like :data:`CSV_WINDOW_SQLITE`
XLSX_WINDOW_SQLITE = (
    f"SELECT CAST(group_concat(line, '{XLSX_ROW_SEP}') AS BLOB), count(*) FROM (\n"
    f"SELECT {_XLSX_LINE} AS line{_FROM}\n"
    "WHERE d.id BETWEEN ? AND ? AND +d.campaign_id = ?\nORDER BY d.id)"
)


def _pg_xlsx_cell(x: str, exempt: str | None = None) -> str:
    """``neutralise(coalesce(x, ''))``; ``exempt`` keeps the value."""
    keep = f" AND NOT ({exempt})" if exempt else ""
    return (
        f"CASE WHEN substr({x}, 1, 1) IN ('=', '+', '-', '@', chr(9), chr(13)){keep}"
        f" THEN '''' || {x} ELSE COALESCE({x}, '') END"
    )


#: the six time cells of a row, PostgreSQL: dates, or empty cells
_PG_TIME_CELLS = "\n    || ".join(
    f"CASE WHEN d.{t} IS NULL THEN '{_EMPTY_CELL}'"
    f" ELSE '{_DATE_OPEN}' || ({_pg_serial(f'd.{t}')})::text || '{_DATE_CLOSE}' END"
    for t in _TIMES
)

#: the XLSX cells of one campaign in id order (parameter: campaign id), PostgreSQL, run
#: after :data:`PG_SESSION`
XLSX_CELLS_POSTGRESQL = (
    _xlsx_select(
        _pg_xlsx_cell("d.target", _PG_E164), _pg_xlsx_cell, "d.attempts::text", _PG_TIME_CELLS
    )
    + "\nWHERE d.campaign_id = %s\nORDER BY d.id"
)


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
    "CSV_LINES_POSTGRESQL",
    "CSV_LINES_SQLITE",
    "CSV_WINDOW_SQLITE",
    "DELIVERY_MICROS_POSTGRESQL",
    "DELIVERY_MICROS_SQLITE",
    "PG_SESSION",
    "READ_MICROS_POSTGRESQL",
    "READ_MICROS_SQLITE",
    "XLSX_CELLS_POSTGRESQL",
    "XLSX_CELLS_SQLITE",
    "XLSX_CELLS_SQLITE_RANGE",
    "XLSX_DATE_END",
    "XLSX_DATE_START",
    "XLSX_DATE_STYLE",
    "XLSX_NUMBER_END",
    "XLSX_NUMBER_START",
    "XLSX_ROW_SEP",
    "XLSX_TEXT_END",
    "XLSX_TEXT_START",
    "XLSX_WINDOW_SQLITE",
    "use_rowid_range",
]
