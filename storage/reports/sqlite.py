"""The SQLite side of the report exports: the CSV by windows of ids rendered by SQLite,
in worker processes when that pays; the XLSX sheet by windows rendered as one blob each;
the read transaction and campaign span both use.

A window is :data:`WINDOW_IDS` ids of the campaign's id range, rendered by one statement
(``storage.reports.sql.csv_window_sqlite``) that returns all its lines as one blob:
Python handles one value per window instead of one per row.

Several cores evaluate windows only in several *processes*: two threads on connections
of their own took as long as one (5.1-5.2 s for 1M rows against 4.8-5.5 s, on 2 idle
cores) for twice the CPU, a third of it in the kernel, because SQLite's allocator takes
one process-wide mutex (memory statistics are on in this build) for each of the ~15
allocations a row, and the threads queue on it. Two processes evaluating the statement
scale fully. So on a database file in WAL mode, with no transaction of the caller's open,
more than one usable core and at least :data:`PROCESS_MIN_ROWS` rows, worker processes
(``storage.reports.sqlite_workers``) evaluate alternate windows on one snapshot while the
caller's thread writes them in order. Elsewhere (or when the write lock that lines their
snapshots up is not had within :data:`LOCK_WAIT_SECONDS`) a thread evaluates the windows
on the caller's connection, inside one read transaction, holding at most :data:`_AHEAD`
windows ahead of the writer (sqlite3 releases the GIL while SQLite evaluates, so the
writing overlaps). Memory stays flat either way.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from typing import IO, Any

from storage.reports import sql as report_sql
from storage.reports import sqlite_workers
from storage.reports.read_ahead import prefetched
from storage.reports.sqlite_worker_main import windows as worker_windows

#: ids per window: at most this many lines (about 0.8 MB), at least a quarter of it on the
#: dense id ranges this path is used for
WINDOW_IDS = 4096
#: worker processes at most (the usable cores bound it too)
MAX_PROCESSES = 4
#: campaigns with fewer rows are exported in this process: starting two workers and
#: lining up their snapshots took ~170 ms on a busy 2-core machine, the time this process
#: renders ~25k rows in, so two workers break even near 50k rows; from 100k they gain
PROCESS_MIN_ROWS = 100_000
#: how long to wait for the write lock that lines the snapshots up before reading alone
LOCK_WAIT_SECONDS = 2.0
#: windows the evaluating thread may hold ahead of the writer
_AHEAD = 2
_CRLF = b"\r\n"


@contextlib.contextmanager
def read_transaction(dbapi: sqlite3.Connection) -> Iterator[None]:
    """A read transaction on the caller's connection (one snapshot for every statement
    inside), or the caller's own if one is open."""
    began = not dbapi.in_transaction
    if began:
        dbapi.execute("BEGIN")
    try:
        yield
    finally:
        if began:
            dbapi.execute("ROLLBACK")


def campaign_span(dbapi: sqlite3.Connection, campaign_id: int) -> tuple[Any, Any, int]:
    """First id, last id (None for no row) and number of rows of the campaign (SQLite)."""
    span: tuple[Any, Any, int] = dbapi.execute(
        report_sql.CAMPAIGN_SPAN_SQLITE, (campaign_id,)
    ).fetchone()
    return span


def process_count() -> int:
    """Worker processes for the export: the cores this process may use, at most
    :data:`MAX_PROCESSES`; 1 means none (the export stays in this process)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_PROCESSES, cores))


def _wal_file(dbapi: sqlite3.Connection) -> str | None:
    """The main database's file when it is in WAL mode and the caller has no transaction
    open (worker processes could not see its uncommitted writes), else None."""
    if dbapi.in_transaction:
        return None
    for _seq, name, file in dbapi.execute("PRAGMA database_list").fetchall():
        if name == "main" and file:
            (mode,) = dbapi.execute("PRAGMA journal_mode").fetchall()[0]
            return str(file) if str(mode).lower() == "wal" else None
    return None


def _run(
    dbapi: sqlite3.Connection,
    campaign_id: int,
    statement: str,
    windows: list[tuple[int, int]],
    write: Callable[[bytes], object],
) -> None:
    """A thread evaluates the windows of ``statement`` (at most :data:`_AHEAD` ahead)
    while the caller's thread writes them."""
    todo = iter(windows)
    cur = dbapi.cursor()

    def fetch() -> list[Any]:
        window = next(todo, None)
        if window is None:
            return []
        (blob,) = cur.execute(statement, (*window, campaign_id)).fetchone()
        return [blob]  # a chunk of one window

    with prefetched(fetch, cur.close, "csv-windows", _AHEAD) as chunks:
        for (blob,) in chunks:  # a window's lines
            if blob is not None:  # None: no row of the campaign in this window
                write(blob)
                write(_CRLF)


def _windows(first: int, last: int) -> list[tuple[int, int]]:
    return worker_windows(first, last, WINDOW_IDS, 0, 1)


def write_windows(
    dbapi: sqlite3.Connection, campaign_id: int, fh: IO[bytes], fmt: report_sql.ReportFormat
) -> bool:
    """Write the campaign's CSV lines in ``fmt`` (each with its CRLF) to ``fh`` window by
    window, in worker processes where they pay (see the module docstring). Returns False, writing
    nothing, when the campaign's rows are too sparse in their id range for windows
    (:func:`storage.reports.sql.use_rowid_range`)."""
    statement = report_sql.csv_window_sqlite(fmt)
    count = process_count()
    path = _wal_file(dbapi) if count > 1 else None
    with read_transaction(dbapi):
        first, last, rows = campaign_span(dbapi, campaign_id)
        if not report_sql.use_rowid_range(first, last, rows):
            return bool(rows == 0)  # nothing to write for an empty campaign
        if path is None or rows < PROCESS_MIN_ROWS:
            _run(dbapi, campaign_id, statement, _windows(first, last), fh.write)
            return True
    # the workers' snapshot is later than this one: they take in rows committed since
    done = sqlite_workers.export(
        path,
        statement,
        campaign_id,
        (first, last),
        count,
        fh.write,
        window=WINDOW_IDS,
        lock_wait=LOCK_WAIT_SECONDS,
    )
    if not done:  # the write lock was not had in time: read alone
        with read_transaction(dbapi):
            first, last, rows = campaign_span(dbapi, campaign_id)
            if not report_sql.use_rowid_range(first, last, rows):
                return bool(rows == 0)
            _run(dbapi, campaign_id, statement, _windows(first, last), fh.write)
    return True


#: ids per window of the XLSX sheet (at most this many rows, about 2.5 MB of XML)
XLSX_WINDOW_IDS = 4096


def xlsx_windows(
    dbapi: sqlite3.Connection,
    campaign_id: int,
    fmt: report_sql.ReportFormat,
    first: int,
    last: int,
    expand: Callable[[bytes, int], bytes | None],
) -> tuple[Callable[[], list[Any]], Callable[[], None]]:
    """Fetch and close for the XLSX windows of the campaign's id range: one
    ``(payload, rows)`` a call, [] at the end. Each window is one text rendered by SQLite
    (``xlsx_window_sqlite``; the GIL is free meanwhile) that ``expand`` makes XML in the
    fetching thread; one whose values need escaping or dropping (``expand`` gives None)
    is fetched again as rows of ``xlsx_cells_sqlite_range``."""
    window_sql = report_sql.xlsx_window_sqlite(fmt)
    rows_sql = report_sql.xlsx_cells_sqlite_range(fmt)
    windows = iter(range(first, last + 1, XLSX_WINDOW_IDS))
    cur = dbapi.cursor()

    def fetch() -> list[Any]:
        for lo in windows:
            hi = min(lo + XLSX_WINDOW_IDS - 1, last)
            blob, n = cur.execute(window_sql, (lo, hi, campaign_id)).fetchone()
            if not n:
                continue
            xml = expand(blob, n)
            if xml is not None:
                return [(xml, n)]
            rows = cur.execute(rows_sql, (lo, hi, campaign_id))
            return [(rows.fetchall(), n)]
        return []

    return fetch, cur.close


__all__ = [
    "LOCK_WAIT_SECONDS",
    "MAX_PROCESSES",
    "PROCESS_MIN_ROWS",
    "WINDOW_IDS",
    "XLSX_WINDOW_IDS",
    "campaign_span",
    "process_count",
    "read_transaction",
    "write_windows",
    "xlsx_windows",
]
