"""An append-only journal file of text records, one per line, fsynced on append.

The webhook intake writes events here when the database cannot store them (locked,
full, away) and drains them into the database when it answers again. Records are
opaque text without newlines (the caller encodes them). A torn last line (a crash in
the middle of an append) is ignored by :meth:`Journal.read` and cut off before the next
append, so it never glues onto a later record. Several processes may share one file:
appends and truncations hold an exclusive ``flock``, and a truncation drops only the
records the caller names (the ones it stored), so two drains never drop each other's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from sqlalchemy import Engine

from storage.engine import is_sqlite_file


class Journal:
    """One journal file at ``path`` (created, with its directory, on first append)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def append(self, records: Sequence[str]) -> None:
        """Append ``records`` and fsync the file before returning (durable on return)."""
        if not records:
            return
        data = "".join(_line(r) for r in records).encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked() as fd:
            _cut_torn_tail(fd)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        """The file, opened and exclusively locked (reopened if replaced meanwhile)."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    current = os.stat(self.path).st_ino
                except FileNotFoundError:
                    current = -1
                if current == os.fstat(fd).st_ino:
                    yield fd
                    return
            finally:
                os.close(fd)  # closing releases the lock

    def read(self) -> list[str]:
        """Every complete record, oldest first (a torn last line is left out)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        return [line.decode("utf-8", "replace") for line in data[:end].splitlines() if line]

    def __bool__(self) -> bool:
        """True when the file holds anything (a torn line included)."""
        try:
            return self.path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def truncate(self, records: Sequence[str] | None = None) -> None:
        """Drop ``records`` from the head of the file (all when None), fsynced.

        Only as many leading lines as equal ``records`` in order are dropped: records
        another process dropped already, or appended since, stay untouched.
        """
        if records is not None and not records:
            return
        if records is None and not self.path.exists():
            return
        with self._locked() as fd:
            keep = b""
            if records is not None:
                size = os.fstat(fd).st_size
                data = os.pread(fd, size, 0) if size else b""
                end = data.rfind(b"\n") + 1
                lines = [line for line in data[:end].splitlines(keepends=True) if line.strip()]
                head = 0
                while head < min(len(lines), len(records)):
                    if lines[head].decode("utf-8", "replace").rstrip("\r\n") != records[head]:
                        break
                    head += 1
                if head == 0:
                    return
                keep = b"".join(lines[head:]) + data[end:]
            tmp = self.path.with_name(self.path.name + ".tmp")
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(out, keep)
                os.fsync(out)
            finally:
                os.close(out)
            os.replace(tmp, self.path)
            _fsync_dir(self.path.parent)


def journal_folder(engine: Engine, configured: str | None) -> Path | None:
    """Where a journal of ``engine``'s events goes: ``configured``, else next to a SQLite
    file, else the working directory; None for an in-memory SQLite database (nothing
    outlives the process anyway)."""
    if engine.dialect.name == "sqlite" and not is_sqlite_file(engine):
        return None
    if configured:
        return Path(configured)
    if is_sqlite_file(engine) and engine.url.database:
        return Path(engine.url.database).resolve().parent
    return Path.cwd()


def _line(record: str) -> str:
    if "\n" in record or "\r" in record:
        raise ValueError("a journal record must not hold a line break")
    return record + "\n"


def _cut_torn_tail(fd: int) -> None:
    """Truncate a last line without its newline (left by a crash mid-append)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    step = 64 * 1024
    pos = size
    while pos > 0:
        start = max(0, pos - step)
        chunk = os.pread(fd, pos - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            os.ftruncate(fd, start + newline + 1)
            return
        pos = start
    os.ftruncate(fd, 0)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["Journal", "journal_folder"]
