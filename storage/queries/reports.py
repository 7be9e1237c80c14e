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

:data:`CSV_LINES_SQLITE` reads the campaign through its index and sorts by id;
:data:`CSV_LINES_SQLITE_RANGE` walks the rowid range of the campaign instead (already in
id order: no sort, so the first rows come at once and evaluation streams), for campaigns
whose rows are dense in that range (:func:`use_rowid_range`). Parameters: ``?`` for
sqlite3, ``%s`` for psycopg; no statement contains a ``%``.
"""

from __future__ import annotations

_TIMES = ("queued_at", "sent_at", "delivered_at", "read_at", "failed_at", "replied_at")
_FROM = "\nFROM deliveries AS d LEFT OUTER JOIN contacts AS c ON c.id = d.contact_id"


def _field(expr: str, *, needs_quotes: str, tab: str, cr: str, exempt: str | None = None) -> str:
    """``neutralise(coalesce(expr, ''))`` as one CSV field; ``exempt`` keeps the value."""
    keep = f" AND NOT ({exempt})" if exempt else ""
    prefix = (
        f"CASE WHEN substr({expr}, 1, 1) IN ('=', '+', '-', '@', {tab}, {cr}){keep} "
        "THEN '''' ELSE '' END"
    )
    quoted = f"'\"' || {prefix} || replace({expr}, '\"', '\"\"') || '\"'"
    return f"CASE WHEN {needs_quotes} THEN {quoted} ELSE {prefix} || COALESCE({expr}, '') END"


def _line(times: str, field: dict[str, str]) -> str:
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

# ---------------------------------------------------------------------------------- SQLite


def _sqlite_e164(t: str) -> str:
    """``t`` is ``+`` then 6-15 ASCII digits, the first not 0 (GLOB: no regex needed)."""
    return (
        f"(length({t}) BETWEEN 7 AND 16 AND {t} GLOB '+[1-9]*'"
        f" AND substr({t}, 3) NOT GLOB '*[^0-9]*')"
    )


# length() and GLOB stop at a NUL byte, which SQLite text may hold: such text is no number
_SQLITE_E164 = (
    f"({_sqlite_e164('d.target')} OR (substr(d.target, -1) = char(10) AND "
    + _sqlite_e164("substr(d.target, 1, length(d.target) - 1)")
    + ")) AND instr(d.target, char(0)) = 0"
)


def _sqlite_field(expr: str, exempt: str | None = None) -> str:
    # instr, not GLOB: it compares bytes, so a NUL inside the text does not end the search
    needs = (
        f"(instr({expr}, '\"') OR instr({expr}, ',')"
        f" OR instr({expr}, char(10)) OR instr({expr}, char(13)))"
    )
    return _field(expr, needs_quotes=needs, tab="char(9)", cr="char(13)", exempt=exempt)


# the six times with their Z, then two replaces over the segment: '.000000Z' only occurs
# as a zero fraction, and a space only between a date and its time
_SQLITE_TIMES = (
    "replace(replace("
    + " || ',' || ".join(f"COALESCE(d.{t} || 'Z', '')" for t in _TIMES)
    + ", '.000000Z', 'Z'), ' ', 'T')"
)

_SQLITE_LINE = _line(
    _SQLITE_TIMES,
    {c: _sqlite_field(c, _SQLITE_E164 if c == "d.target" else None) for c in _TEXT},
)

#: the CSV lines of one campaign in id order (parameter: campaign id), SQLite
CSV_LINES_SQLITE = _SQLITE_LINE + "\nWHERE d.campaign_id = ?\nORDER BY d.id"

#: the same lines walking the rowid range (parameters: first id, last id, campaign id);
#: ``+`` keeps SQLite off the campaign index, so the rows come in rowid order unsorted
CSV_LINES_SQLITE_RANGE = (
    _SQLITE_LINE + "\nWHERE d.id BETWEEN ? AND ? AND +d.campaign_id = ?\nORDER BY d.id"
)

#: first id, last id and number of rows of one campaign (parameter: campaign id), SQLite
CAMPAIGN_SPAN_SQLITE = "SELECT min(id), max(id), count(*) FROM deliveries WHERE campaign_id = ?"


def use_rowid_range(first: int | None, last: int | None, rows: int) -> bool:
    """Walk the rowid range when it holds at most 4 ids per row of the campaign: a row
    skipped costs far less than sorting a row (``first``/``last``: the span's ids)."""
    return first is not None and last is not None and last - first + 1 <= 4 * rows


# ------------------------------------------------------------------------------ PostgreSQL

#: run before :data:`CSV_LINES_POSTGRESQL` in the same transaction (``SET LOCAL``: they
#: end with it). ``::text`` of a timestamp is ``YYYY-MM-DD HH:MM:SS[.ffffff]`` only under
#: DateStyle ISO. The planner sizes the export from statistics that may be stale (an
#: unanalysed campaign looks like a few hundred rows): without setup and transfer costs it
#: plans parallel workers (up to ``max_parallel_workers_per_gather``), which evaluate the
#: lines side by side and merge them in id order
PG_SESSION = (
    "SET LOCAL DateStyle = 'ISO, MDY'",
    "SET LOCAL parallel_setup_cost = 0",
    "SET LOCAL parallel_tuple_cost = 0",
    "SET LOCAL min_parallel_table_scan_size = 0",
    "SET LOCAL min_parallel_index_scan_size = 0",
)


def _pg_field(expr: str, exempt: str | None = None) -> str:
    needs = (
        f"strpos({expr}, '\"') + strpos({expr}, ',') + strpos({expr}, chr(10))"
        f" + strpos({expr}, chr(13)) > 0"
    )
    return _field(expr, needs_quotes=needs, tab="chr(9)", cr="chr(13)", exempt=exempt)


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
    _line(_PG_TIMES, {c: _pg_field(c, _PG_E164 if c == "d.target" else None) for c in _TEXT})
    + "\nWHERE d.campaign_id = %s\nORDER BY d.id"
)

__all__ = [
    "CAMPAIGN_SPAN_SQLITE",
    "CSV_LINES_POSTGRESQL",
    "CSV_LINES_SQLITE",
    "CSV_LINES_SQLITE_RANGE",
    "PG_SESSION",
    "use_rowid_range",
]
