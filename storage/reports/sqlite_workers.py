"""The parent's side of the SQLite CSV export's worker processes
(``storage.reports.sqlite_worker_main`` has the protocol).

:func:`export` starts the workers, holds the write lock (``BEGIN IMMEDIATE``) while every
worker fixes its snapshot (so no commit falls between them; the lock is held for a few
milliseconds), then writes the windows in order, reading each from its worker's pipe:
a worker runs ahead of the writer by what its pipe holds (:data:`PIPE_BYTES`) plus the
window it renders, so memory stays flat. Every worker is killed (if still running) and
reaped on every way out.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import IO

from storage.engine import SQLITE_BUSY_TIMEOUT_MS
from storage.reports import sqlite_worker_main as worker

#: bytes a worker's pipe holds; None keeps the system's (64 kB on Linux): 1 MB (a whole
#: window, so a worker could render its next one before the writer takes the last) was
#: no faster on 2 cores. Tests shrink it to keep workers busy while they look.
PIPE_BYTES: int | None = None
_CRLF = b"\r\n"
#: the campaign's last id past a known one, NULL when none (parameters: that id, campaign
#: id): walks only the rowid range after it, i.e. the rows committed since
LAST_AFTER_SQL = "SELECT max(id) FROM deliveries WHERE id > ? AND +campaign_id = ?"
#: how long a worker that stopped writing windows has to exit before it is killed
_EXIT_WAIT_SECONDS = 5.0


class _End:
    """A worker's last frame: it has no more windows."""


_END = _End()


class WorkerError(sqlite3.OperationalError):
    """A worker process failed (its SQL, or it was killed): the export is not complete."""


class _Worker:
    """One worker process and its pipes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", worker.__file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.stdin: IO[bytes] = self.proc.stdin  # type: ignore[assignment]
        self.stdout: IO[bytes] = self.proc.stdout  # type: ignore[assignment]

    def start(self, job: worker.Job) -> None:
        """Step 1 of the protocol: the job."""
        if PIPE_BYTES is not None:  # Linux only
            fcntl.fcntl(self.stdout.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self._send(json.dumps(job).encode())

    def _send(self, line: bytes) -> None:
        try:
            self.stdin.write(line + b"\n")
            self.stdin.flush()
        except BrokenPipeError:
            self.fail()

    def begin(self) -> None:
        """Step 2 of the protocol: begin the read transaction now."""
        self._send(b"begin")

    def expect(self, token: bytes) -> None:
        if self.stdout.read(len(token)) != token:
            self.fail()

    def window(self) -> bytes | _End | None:
        """The next window's blob (None: no row of the campaign in it), or :data:`_END`."""
        head = self.stdout.read(worker.FRAME.size)
        if len(head) != worker.FRAME.size:
            self.fail()
        (size,) = worker.FRAME.unpack(head)
        if size == worker.NULL:
            return None
        if size == worker.END:
            return _END
        blob = self.stdout.read(size)
        if len(blob) != size:
            self.fail()
        return blob

    def finish(self) -> None:
        """Wait for the worker's exit after its last window; raise if it failed."""
        if self.proc.wait() != 0:
            self.fail()

    def fail(self) -> None:
        """Raise the worker's error: its stderr's last line, or the signal that killed it."""
        try:  # out of windows: it is exiting, or wrote nonsense
            code = self.proc.wait(timeout=_EXIT_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        lines = self.proc.stderr.read().decode(errors="replace").splitlines()  # type: ignore[union-attr]
        if lines:
            why = lines[-1]
        elif code < 0:
            why = f"killed by {signal.Signals(-code).name}"
        else:
            why = f"exit status {code}, no message"
        raise WorkerError(f"{self.name} failed: {why}")

    def close(self) -> None:
        """Kill the worker if it still runs, reap it, close its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a write left in the buffer: EPIPE
                    pipe.close()


@contextlib.contextmanager
def _workers(jobs: list[worker.Job]) -> Iterator[list[_Worker]]:
    started: list[_Worker] = []
    try:
        for job in jobs:
            started.append(
                _Worker(f"CSV worker {job['index'] + 1} of {len(jobs)} on {job['path']}")
            )
            started[-1].start(job)
        yield started
    finally:
        for w in started:
            w.close()


def _line_up(path: str, workers: list[_Worker], lock_wait: float) -> bool:
    """Every worker begins its read transaction while the write lock is held, so all
    read one snapshot; False when the lock was not had in time."""
    lock = sqlite3.connect(path, timeout=lock_wait, isolation_level=None)
    try:
        try:
            lock.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # a writer kept the lock (or the file is read-only)
            return False
        try:
            for w in workers:
                w.begin()
            for w in workers:
                w.expect(worker.READY)
        finally:
            lock.execute("ROLLBACK")
    finally:
        lock.close()
    return True


def export(
    path: str,
    sql: str,
    campaign_id: int,
    span: tuple[int, int],
    count: int,
    write: Callable[[bytes], object],
    *,
    window: int,
    lock_wait: float,
) -> bool:
    """Write the campaign's windows of ``sql`` (``storage.reports.sql.csv_window_sqlite``;
    each blob with its CRLF) with ``count`` workers;
    ``span``: its first and last id as read before (rows committed later are found by
    the workers). False, nothing written, when the write lock was not had within
    ``lock_wait`` seconds."""
    jobs: list[worker.Job] = [
        {
            "path": path,
            "sql": sql,
            "last_sql": LAST_AFTER_SQL,
            "campaign_id": campaign_id,
            "first": span[0],
            "last": span[1],
            "window": window,
            "index": i,
            "count": count,
            "busy_timeout": SQLITE_BUSY_TIMEOUT_MS / 1000,
        }
        for i in range(count)
    ]
    with _workers(jobs) as workers:
        for w in workers:
            w.expect(worker.STARTED)
        if not _line_up(path, workers, lock_wait):
            return False
        k = 0
        while not isinstance(blob := workers[k % count].window(), _End):
            if blob is not None:  # None: no row of the campaign in this window
                write(blob)
                write(_CRLF)
            k += 1
        for w in workers[k % count + 1 :] + workers[: k % count]:
            if not isinstance(w.window(), _End):  # one snapshot: they agree on the span
                raise WorkerError(f"{w.name}: more windows than the others")
        for w in workers:
            w.finish()
    return True


__all__ = ["PIPE_BYTES", "WorkerError", "export"]
