"""Hot SQL for the CSV report: the database renders every cell as the CSV writes it.

One ``SELECT`` per dialect returns the fifteen report columns already formatted exactly
as ``campaigns.reports`` formats them in Python (``iso()``, ``neutralise()``,
``_cells()``), so the export is ``fetchmany`` + ``csv.writer.writerows`` with no per-row
Python:

* times: ISO 8601 UTC with a ``Z`` suffix, microseconds only when not zero (what
  ``datetime.isoformat()`` does), ``''`` for no time. SQLite holds SQLAlchemy's
  ``YYYY-MM-DD HH:MM:SS.ffffff`` text (naive UTC); PostgreSQL ``timestamptz``.
* text: ``NULL`` -> ``''``; a value starting with ``= + - @ TAB CR`` gets a ``'``
  prefix, except E.164 numbers in the target column. The E.164 test mirrors
  ``re.match(r"^\\+[1-9][0-9]{5,14}$")``, including Python's ``$`` matching before one
  trailing newline.
* ``opted_out``: ``yes`` / ``no`` (``no`` without a contact).

The only parameter is the campaign id (``?`` for sqlite3, ``%s`` for psycopg; neither
statement contains a ``%``).
"""

from __future__ import annotations

_TIMES = ("queued_at", "sent_at", "delivered_at", "read_at", "failed_at", "replied_at")


def _neutralised(expr: str, *, tab: str, cr: str, exempt: str | None = None) -> str:
    """``neutralise(coalesce(expr, ''))`` as SQL; ``exempt``: a condition that keeps it."""
    value = f"COALESCE({expr}, '')"
    formula = f"substr({value}, 1, 1) IN ('=', '+', '-', '@', {tab}, {cr})"
    keep = f" AND NOT ({exempt})" if exempt else ""
    return f"CASE WHEN {formula}{keep} THEN '''' || {value} ELSE {value} END"


def _select(times: dict[str, str], *, tab: str, cr: str, e164: str) -> str:
    def text(expr: str, exempt: str | None = None) -> str:
        return _neutralised(expr, tab=tab, cr=cr, exempt=exempt)

    cells = [
        text("d.target", exempt=e164),
        text("c.name"),
        text("d.sender"),
        text("d.state"),
        "d.attempts",
        text("d.message_id"),
        text("d.error"),
        *(times[t] for t in _TIMES),
        text("d.reply_text"),
        "CASE WHEN c.opted_out THEN 'yes' ELSE 'no' END",
    ]
    return (
        "SELECT "
        + ",\n       ".join(cells)
        + "\nFROM deliveries AS d LEFT OUTER JOIN contacts AS c ON c.id = d.contact_id"
        + "\nWHERE d.campaign_id = {param}\nORDER BY d.id"
    )


def _sqlite_time(col: str) -> str:
    t = f"d.{col}"
    date_time = f"substr({t}, 1, 10) || 'T' || substr({t}, 12, 8)"
    return (
        f"CASE WHEN {t} IS NULL THEN '' "
        f"WHEN substr({t}, 20) IN ('', '.000000') THEN {date_time} || 'Z' "
        f"ELSE {date_time} || substr({t}, 20) || 'Z' END"
    )


def _pg_time(col: str) -> str:
    t = f"(d.{col} AT TIME ZONE 'UTC')"
    return (
        f"CASE WHEN d.{col} IS NULL THEN '' "
        f"ELSE to_char({t}, 'YYYY-MM-DD\"T\"HH24:MI:SS') "
        f"|| CASE WHEN to_char({t}, 'US') = '000000' THEN '' ELSE '.' || to_char({t}, 'US') END "
        "|| 'Z' END"
    )


def _sqlite_e164(t: str) -> str:
    """``t`` is ``+`` then 6-15 ASCII digits, the first not 0 (GLOB: no regex needed)."""
    return (
        f"(length({t}) BETWEEN 7 AND 16 AND {t} GLOB '+[1-9]*'"
        f" AND substr({t}, 3) NOT GLOB '*[^0-9]*')"
    )


_SQLITE_TARGET = "COALESCE(d.target, '')"
_SQLITE_E164 = (
    f"{_sqlite_e164(_SQLITE_TARGET)} OR (substr({_SQLITE_TARGET}, -1) = char(10) AND "
    + _sqlite_e164(f"substr({_SQLITE_TARGET}, 1, length({_SQLITE_TARGET}) - 1)")
    + ")"
)

#: the CSV rows of one campaign (parameter: campaign id), SQLite
CSV_ROWS_SQLITE = _select(
    {t: _sqlite_time(t) for t in _TIMES}, tab="char(9)", cr="char(13)", e164=_SQLITE_E164
).format(param="?")

#: the CSV rows of one campaign (parameter: campaign id), PostgreSQL
CSV_ROWS_POSTGRESQL = _select(
    {t: _pg_time(t) for t in _TIMES},
    tab="chr(9)",
    cr="chr(13)",
    e164="COALESCE(d.target, '') ~ '^\\+[1-9][0-9]{5,14}\\n?$'",
).replace("{param}", "%s")

__all__ = ["CSV_ROWS_POSTGRESQL", "CSV_ROWS_SQLITE"]
