"""The report exports' database side, as named operations that switch on the dialect:
the statements that render CSV lines and XLSX cells (``sql``), and how each dialect
streams them (``sqlite``, ``postgresql``), fetched ahead by a thread (``read_ahead``).

The column list and the formatting rules are the caller's (``campaigns.reports``), given
as a ``sql.ReportFormat``: this package hands back lines and cells the database rendered
in that format, and XML made by the ``expand`` it is given.
The tunables below are read at call time.
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Callable, Iterator
from typing import IO, Any

from sqlalchemy import Connection
from sqlalchemy import text as sql_text

from storage.reports import postgresql, sql, sqlite
from storage.reports.read_ahead import prefetched

#: rows fetched per round trip while streaming
YIELD_PER = 2000
#: lines per chunk of the CSV (about 330 kB of text)
CSV_CHUNK = 2000
#: rows per chunk of the XLSX sheet (about 1.5 MB of XML)
XLSX_CHUNK = 2000

#: a piece of the XLSX sheet in row order: rows as XML (an expanded SQLite window), or
#: rows of ``sql.xlsx_cells_*`` for the caller to render; and how many rows it holds
XlsxItem = tuple[bytes | list[Any], int]


def _unsupported(conn: Connection) -> ValueError:  # pragma: no cover - SQLite, PostgreSQL
    return ValueError(f"no report export on {conn.dialect.name}")


def write_csv_lines(
    conn: Connection, campaign_id: int, fh: IO[bytes], fmt: sql.ReportFormat
) -> None:
    """Write every CSV line of the campaign (UTF-8, each with its CRLF; no header) as
    the database renders it in ``fmt`` (``sql.csv_*``). SQLite renders windows of ids
    as blobs, in parallel on a WAL file (:func:`sqlite.write_windows`); otherwise lines
    are fetched in chunks by a thread and joined. Memory stays flat."""
    dbapi: Any = conn.connection.driver_connection
    if conn.dialect.name == "postgresql":
        fetch, close = postgresql.rows(dbapi, sql.csv_lines_postgresql(fmt), campaign_id, CSV_CHUNK)
    elif conn.dialect.name == "sqlite":
        if sqlite.write_windows(dbapi, campaign_id, fh, fmt):
            return
        cur = dbapi.cursor()  # rows sparse in their id range: the campaign index, sorted
        cur.execute(sql.csv_lines_sqlite(fmt), (campaign_id,))
        fetch, close = (lambda: cur.fetchmany(CSV_CHUNK)), cur.close
    else:  # pragma: no cover
        raise _unsupported(conn)
    with prefetched(fetch, close, "csv-fetch") as chunks:
        for rows in chunks:
            fh.write(("\r\n".join([r[0] for r in rows]) + "\r\n").encode("utf-8"))


def _chunks(chunks: Iterator[list[Any]]) -> Iterator[XlsxItem]:
    return ((rows, len(rows)) for rows in chunks)


@contextlib.contextmanager
def xlsx_items(
    conn: Connection,
    campaign_id: int,
    fmt: sql.ReportFormat,
    *,
    expand: Callable[[bytes, int], bytes | None],
) -> Iterator[Iterator[XlsxItem]]:
    """The XLSX sheet's rows in ``fmt`` as :data:`XlsxItem` s, fetched ahead by a thread.
    SQLite, rows dense in their id range: windows rendered as one blob each by the
    database (``sql.xlsx_window_sqlite``), made XML by ``expand`` in the fetching thread
    (a window ``expand`` refuses comes as rows); elsewhere rows of ``sql.xlsx_cells_*``."""
    dbapi: Any = conn.connection.driver_connection
    if conn.dialect.name == "postgresql":
        fetch, close = postgresql.rows(
            dbapi, sql.xlsx_cells_postgresql(fmt), campaign_id, XLSX_CHUNK
        )
        with prefetched(fetch, close, "xlsx-fetch") as chunks:
            yield _chunks(chunks)
        return
    if conn.dialect.name != "sqlite":  # pragma: no cover
        raise _unsupported(conn)
    first, last, n = sqlite.campaign_span(dbapi, campaign_id)
    if sql.use_rowid_range(first, last, n):
        with sqlite.read_transaction(dbapi):  # one snapshot for all the windows
            fetch, close = sqlite.xlsx_windows(dbapi, campaign_id, fmt, first, last, expand)
            with prefetched(fetch, close, "xlsx-fetch") as windows:
                yield (item for (item,) in windows)
        return
    cur = dbapi.cursor()  # sparse rows: the campaign index, sorted
    cur.execute(sql.xlsx_cells_sqlite(fmt), (campaign_id,))
    with prefetched(lambda: cur.fetchmany(XLSX_CHUNK), cur.close, "xlsx-fetch") as chunks:
        yield _chunks(chunks)


def micros_since_sent(conn: Connection, campaign_id: int, *, to: str) -> array[int]:
    """Microseconds from sent to ``to`` ("delivered" or "read") of the campaign's rows
    that got there, computed by the database (``sql.*_MICROS_*``): no datetime per row."""
    pg = conn.dialect.name == "postgresql"
    statement = {
        ("delivered", True): sql.DELIVERY_MICROS_POSTGRESQL,
        ("delivered", False): sql.DELIVERY_MICROS_SQLITE,
        ("read", True): sql.READ_MICROS_POSTGRESQL,
        ("read", False): sql.READ_MICROS_SQLITE,
    }[(to, pg)]
    micros = array("q")
    stream = conn.execution_options(yield_per=YIELD_PER).execute(
        sql_text(statement), {"campaign_id": campaign_id}
    )
    for part in stream.scalars().partitions():
        micros.extend(part)
    return micros


__all__ = [
    "CSV_CHUNK",
    "XLSX_CHUNK",
    "YIELD_PER",
    "XlsxItem",
    "micros_since_sent",
    "write_csv_lines",
    "xlsx_items",
]
