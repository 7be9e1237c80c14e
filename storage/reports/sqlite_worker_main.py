"""A worker process of the SQLite CSV export (``storage.reports.sqlite``); standard library
only, so it starts in tens of milliseconds.

``python -I -S storage/reports/sqlite_worker_main.py``, talking over its pipes:

1. reads one JSON line from stdin (:class:`Job`), opens the database file with
   ``query_only`` on and writes :data:`STARTED`;
2. reads one line (sent while the parent holds the write lock), begins a read transaction,
   reads once (which fixes its WAL snapshot) and writes :data:`READY`;
3. extends the job's id span by the campaign's rows committed since the parent read it,
   renders its windows (number ``index``, ``index + count``, ... of the span) with the
   job's statement and writes each blob as a frame: its length as :data:`FRAME` (-1 for
   NULL: no row of the campaign in the window) then its bytes; then :data:`END`.

On an error it writes one line (the exception's type and message) to stderr and exits 1;
a closed stdin or stdout (the parent gone) ends it quietly. It ignores SIGINT: a Ctrl-C
is the parent's, which kills its workers.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import struct
import sys
from typing import IO, TypedDict

#: length of the frame that follows, or :data:`NULL` or :data:`END`
FRAME = struct.Struct(">q")
NULL = -1
END = -2
STARTED = b"S"
READY = b"R"


class Job(TypedDict):
    """What a worker evaluates: ``sql`` takes (first id, last id, campaign id) and renders
    a window; ``last_sql`` takes (id, campaign id) and gives the campaign's last id past
    it; ``first`` and ``last`` are the campaign's span read before the snapshot."""

    path: str
    sql: str
    last_sql: str
    campaign_id: int
    first: int
    last: int
    window: int
    index: int
    count: int
    busy_timeout: float


def windows(first: int, last: int, size: int, index: int, count: int) -> list[tuple[int, int]]:
    """Windows ``index``, ``index + count``, ... of the span, as (first id, last id)."""
    starts = range(first + index * size, last + 1, count * size)
    return [(lo, min(lo + size - 1, last)) for lo in starts]


def _line(stream: IO[bytes]) -> bytes:
    line = stream.readline()
    if not line:
        raise SystemExit(0)  # the parent went away before this step: nothing to do
    return line


def run(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """The protocol of the module docstring, on these streams."""
    job: Job = json.loads(_line(stdin))
    conn = sqlite3.connect(job["path"], timeout=job["busy_timeout"], isolation_level=None)
    try:
        conn.execute("PRAGMA query_only = ON")
        stdout.write(STARTED)
        stdout.flush()
        _line(stdin)
        conn.execute("BEGIN")
        conn.execute("SELECT 1 FROM deliveries LIMIT 1").fetchall()  # fixes the snapshot
        stdout.write(READY)
        stdout.flush()
        cur = conn.cursor()
        (later,) = cur.execute(job["last_sql"], (job["last"], job["campaign_id"])).fetchone()
        last = max(job["last"], later or job["last"])
        for first, last_id in windows(
            job["first"], last, job["window"], job["index"], job["count"]
        ):
            (blob,) = cur.execute(job["sql"], (first, last_id, job["campaign_id"])).fetchone()
            if blob is None:
                stdout.write(FRAME.pack(NULL))
            else:
                stdout.write(FRAME.pack(len(blob)))
                stdout.write(blob)
            stdout.flush()  # the writer may be waiting for this very window
        stdout.write(FRAME.pack(END))
        stdout.flush()
    finally:
        conn.close()


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to handle
    try:
        run(sys.stdin.buffer, sys.stdout.buffer)
    except BrokenPipeError:  # the parent stopped reading: it knows why
        return 1
    except Exception as exc:  # one line for the parent's error message
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(f"{type(exc).__name__}: {first}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
