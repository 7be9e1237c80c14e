"""An append-only journal file of text records, one per line, fsynced on append.

The webhook intake writes events here when the database cannot store them (locked,
full, away) and drains them into the database when it answers again. Records are
opaque text without newlines (the caller encodes them). A torn last line (a crash in
the middle of an append) is ignored by :meth:`Journal.read` and cut off before the next
append, so it never glues onto a later record.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


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
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            _cut_torn_tail(fd)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)

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

    def truncate(self, count: int | None = None) -> None:
        """Drop the first ``count`` records (all when None), fsynced; the rest stay."""
        if count is None:
            keep = b""
        else:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return
            end = data.rfind(b"\n") + 1
            lines = data[:end].splitlines(keepends=True)
            lines = [line for line in lines if line.strip()]
            keep = b"".join(lines[count:])
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, keep)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)


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


__all__ = ["Journal"]
