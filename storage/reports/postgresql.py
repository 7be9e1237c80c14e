"""The PostgreSQL side of the report exports: the rows of a report statement (CSV lines
or XLSX cells) streamed in chunks through psycopg."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from storage.reports import sql as report_sql


def rows(
    dbapi: Any, sql: str, campaign_id: int, size: int
) -> tuple[Callable[[], list[Any]], Callable[[], None]]:
    """Fetch (``size`` rows a chunk) and close for the rows of ``sql`` (CSV lines or XLSX
    cells) on PostgreSQL.
    ``stream`` (libpq chunked rows mode, no cursor) lets the server run the query with
    parallel workers, which a named cursor forbids; before libpq 17 a named cursor is the
    streamed fallback."""
    from psycopg import pq

    for statement in report_sql.PG_SESSION:  # SET LOCAL: ends with the transaction
        dbapi.execute(statement)
    cur = dbapi.cursor()
    if pq.version() < 170000:  # pragma: no cover - psycopg[binary] ships a newer libpq
        cur = dbapi.cursor(name=f"gatecast_report_{campaign_id}")
        cur.itersize = size
        cur.execute(sql, (campaign_id,))
        return lambda: list(cur.fetchmany(size)), cur.close
    stream = cur.stream(sql, (campaign_id,), size=size)

    def close() -> None:
        stream.close()  # cancels and drains the query when the writer stopped early
        cur.close()

    return lambda: list(itertools.islice(stream, size)), close


__all__ = ["rows"]
