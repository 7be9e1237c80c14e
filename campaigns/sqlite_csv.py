"""The SQLite CSV export: windows of ids rendered by SQLite, several at a time.

A window is :data:`WINDOW_IDS` ids of the campaign's id range, rendered by one statement
(``storage.queries.reports.CSV_WINDOW_SQLITE``) that returns all its lines as one blob:
a fetching thread takes the GIL once per window instead of once per row, and sqlite3
releases it while SQLite evaluates, so one thread evaluates while the caller's thread
writes. With more than one worker (:data:`MAX_WORKERS`), on a database file in WAL mode,
threads evaluate alternate windows on connections of their own, and the caller's thread
writes the windows in order. Those connections read one
snapshot: each begins its read transaction while another connection holds the write lock
(``BEGIN IMMEDIATE``, for a few milliseconds), so no commit can fall between them.
Elsewhere (a database in memory, an open transaction of the caller's, the write lock not
had within :data:`LOCK_WAIT_SECONDS`) one thread evaluates the windows on the caller's
connection, inside one read transaction. Each thread holds at most :data:`_AHEAD` windows
ahead of the writer, so memory stays flat.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import IO

from storage.engine import SQLITE_BUSY_TIMEOUT_MS
from storage.queries import reports as report_queries

#: ids per window: at most this many lines (about 0.8 MB), at least a quarter of it on the
#: dense id ranges this path is used for
WINDOW_IDS = 4096
#: threads (and connections) evaluating windows at most. 1: measured on 2 idle cores, two
#: threads took 5.1-5.2 s for 1M rows against 4.8-5.5 s for one, with twice the CPU (9-10 s,
#: a third of it in the kernel): SQLite's allocator takes one process-wide mutex (memory
#: statistics are on in this build) for each of the ~15 allocations a row, and the threads
#: queue on it. Two processes evaluating the same statement scale fully (1.8 s each, alone
#: or side by side), so worker processes are the way to use more cores
MAX_WORKERS = 1
#: how long to wait for the write lock that lines the snapshots up before reading alone
LOCK_WAIT_SECONDS = 2.0
#: windows each thread may hold ahead of the writer
_AHEAD = 2
_CRLF = b"\r\n"

_Window = bytes | None | BaseException


def worker_count() -> int:
    """Threads for the parallel export: the cores this process may use, at most
    :data:`MAX_WORKERS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


def _database_file(dbapi: sqlite3.Connection) -> str | None:
    """The file of the main database, None in memory (or a temporary database)."""
    for _seq, name, file in dbapi.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return str(file) or None
    return None  # pragma: no cover - SQLite always lists main


def _open(path: str, timeout: float) -> sqlite3.Connection:
    return sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)


def _snapshot(path: str, n: int) -> list[sqlite3.Connection] | None:
    """``n`` connections in read transactions on one snapshot, or None when the write
    lock that keeps commits out while they begin was not had in time."""
    lock = _open(path, LOCK_WAIT_SECONDS)
    readers: list[sqlite3.Connection] = []
    try:
        try:
            lock.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # a writer kept the lock (or the file is read-only)
            return None
        try:
            for _ in range(n):
                reader = _open(path, SQLITE_BUSY_TIMEOUT_MS / 1000)
                readers.append(reader)
                reader.execute("PRAGMA query_only = ON")
                reader.execute("BEGIN")
                # the first read of a WAL transaction fixes its snapshot
                reader.execute("SELECT 1 FROM deliveries LIMIT 1").fetchall()
        finally:
            lock.execute("ROLLBACK")
    except BaseException:
        for reader in readers:
            reader.close()
        raise
    finally:
        lock.close()
    return readers


@contextlib.contextmanager
def _connections(dbapi: sqlite3.Connection, workers: int) -> Iterator[list[sqlite3.Connection]]:
    """Connections reading one snapshot: ``workers`` of their own when the database is a
    WAL file and the caller has no transaction open, else the caller's own."""
    path = _database_file(dbapi)
    if workers > 1 and path and not dbapi.in_transaction:
        (mode,) = dbapi.execute("PRAGMA journal_mode").fetchone()
        readers = _snapshot(path, workers) if str(mode).lower() == "wal" else None
        if readers is not None:
            try:
                yield readers
            finally:
                for reader in readers:
                    reader.close()
            return
    began = not dbapi.in_transaction
    if began:
        dbapi.execute("BEGIN")
    try:
        yield [dbapi]
    finally:
        if began:
            dbapi.execute("ROLLBACK")


def _put(chunks: queue.Queue[_Window], item: _Window, stop: threading.Event) -> bool:
    while not stop.is_set():
        with contextlib.suppress(queue.Full):
            chunks.put(item, timeout=0.05)
            return True
    return False


def _evaluate(
    conn: sqlite3.Connection,
    campaign_id: int,
    bounds: list[tuple[int, int]],
    chunks: queue.Queue[_Window],
    stop: threading.Event,
) -> None:
    """Producer: the blob of each window of ``bounds`` into ``chunks``, in order, or the
    error that stopped it."""
    try:
        cur = conn.cursor()
        try:
            for first, last in bounds:
                (blob,) = cur.execute(
                    report_queries.CSV_WINDOW_SQLITE, (first, last, campaign_id)
                ).fetchone()
                if not _put(chunks, blob, stop):
                    return
        finally:
            cur.close()
    except BaseException as exc:  # handed to the writer, which raises it
        _put(chunks, exc, stop)


def _run(
    conns: list[sqlite3.Connection],
    campaign_id: int,
    windows: list[tuple[int, int]],
    write: Callable[[bytes], object],
) -> None:
    n = len(conns)
    stop = threading.Event()
    queues: list[queue.Queue[_Window]] = [queue.Queue(_AHEAD) for _ in conns]
    threads = [
        threading.Thread(
            target=_evaluate,
            args=(conn, campaign_id, windows[i::n], queues[i], stop),
            name=f"csv-window-{i}",
            daemon=True,
        )
        for i, conn in enumerate(conns)
    ]
    for thread in threads:
        thread.start()
    try:
        for k in range(len(windows)):
            blob = queues[k % n].get()
            if isinstance(blob, BaseException):
                raise blob
            if blob is not None:  # None: no row of the campaign in this window
                write(blob)
                write(_CRLF)
    finally:
        stop.set()
        for thread in threads:
            while thread.is_alive():  # unblock a put, let the thread see the stop
                for chunks in queues:
                    with contextlib.suppress(queue.Empty):
                        chunks.get_nowait()
                thread.join(timeout=0.05)


def write_windows(
    dbapi: sqlite3.Connection, campaign_id: int, fh: IO[bytes], *, workers: int | None = None
) -> bool:
    """Write the campaign's CSV lines (each with its CRLF) to ``fh`` window by window.
    Returns False, writing nothing, when the campaign's rows are too sparse in their id
    range for windows (:func:`storage.queries.reports.use_rowid_range`)."""
    with _connections(dbapi, workers or worker_count()) as conns:
        first, last, rows = (
            conns[0].execute(report_queries.CAMPAIGN_SPAN_SQLITE, (campaign_id,)).fetchone()
        )
        if not report_queries.use_rowid_range(first, last, rows):
            return bool(rows == 0)  # nothing to write for an empty campaign
        windows = [
            (lo, min(lo + WINDOW_IDS - 1, last)) for lo in range(first, last + 1, WINDOW_IDS)
        ]
        _run(conns[: len(windows)], campaign_id, windows, fh.write)
    return True


__all__ = ["LOCK_WAIT_SECONDS", "MAX_WORKERS", "WINDOW_IDS", "worker_count", "write_windows"]
