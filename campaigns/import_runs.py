"""Which process runs an import, and marking imports whose process died as failed.

An import writes contacts in one transaction, so a killed import wrote nothing; only
its ``imports`` row is left saying ``running``. Each row records its runner
(``host:pid:boot_id:start_ticks``). A ``running`` row is *interrupted* when

* its runner is on this host and that process no longer exists (a different boot id,
  no such pid, or a pid reused by a process that started at another time), or
* its runner is on another host (or unknown) and it started more than
  :data:`STALE_AFTER` ago (an import of the largest file allowed takes minutes).

Interrupted rows become ``failed`` with the error :data:`INTERRUPTED`:
:func:`mark_interrupted_imports` runs before every import and when a worker or receiver
starts; listing imports (:func:`listing`, what the faces read, GETs included) shows an
interrupted row so without writing anything.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from storage.queries import imports as q

#: a running import older than this is taken as dead whatever its runner says
STALE_AFTER = timedelta(hours=1)
INTERRUPTED = "interrupted: the importing process stopped before finishing (nothing was written)"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "-"


def _start_ticks(pid: int) -> str | None:
    """The process start time in clock ticks since boot (Linux), '-' when unknown,
    None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return "-"
    # the command name (field 2) may contain spaces: fields after its closing parenthesis
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else "-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. not ours to signal: it exists
        return True
    return True


def runner_id(pid: int | None = None) -> str:
    """This process (or ``pid``) as ``host:pid:boot_id:start_ticks``."""
    pid = os.getpid() if pid is None else pid
    ticks = _start_ticks(pid) or "-"
    return f"{socket.gethostname()[:100]}:{pid}:{_boot_id()}:{ticks}"


def runner_alive(runner: str | None) -> bool | None:
    """Whether the process named by ``runner`` still runs; None when it is not on this host."""
    if not runner:
        return None
    parts = runner.rsplit(":", 3)
    if len(parts) != 4 or not parts[1].isdigit():
        return None
    host, pid_text, boot, ticks = parts
    if host != socket.gethostname()[:100]:
        return None
    if boot != "-" and _boot_id() != "-" and boot != _boot_id():
        return False  # the machine restarted since
    pid = int(pid_text)
    now_ticks = _start_ticks(pid)
    if now_ticks is None:
        return False if Path("/proc/self/stat").exists() else _pid_alive(pid)
    # a different start time: the pid now belongs to another process
    return ticks == "-" or now_ticks == "-" or ticks == now_ticks


def interrupted_imports(
    engine: Engine, *, now: datetime, stale_after: timedelta = STALE_AFTER
) -> list[int]:
    """The ids of ``running`` imports whose process is gone (see module doc); reads only."""
    with engine.connect() as conn:
        rows = q.running_imports(conn)
    dead: list[int] = []
    for import_id, runner, started_at in rows:
        alive = runner_alive(runner)
        if alive is False or (alive is None and started_at < now - stale_after):
            dead.append(import_id)
    return dead


def mark_interrupted_imports(
    engine: Engine, *, now: datetime, stale_after: timedelta = STALE_AFTER
) -> list[int]:
    """Mark ``running`` imports whose process is gone (:func:`interrupted_imports`) as
    failed.

    Returns the ids marked. Safe to run concurrently: only rows still ``running`` change.
    """
    dead = interrupted_imports(engine, now=now, stale_after=stale_after)
    if dead:
        with engine.begin() as conn:
            q.fail_running(conn, dead, INTERRUPTED, now=now)
    return dead


# --- import runs as the faces read them --------------------------------------------------------


@dataclass(frozen=True)
class ImportRun:
    """One import: its status (running, completed, failed), file, mapping and counts."""

    id: int
    status: str
    filename: str
    list_id: int | None
    list_name: str | None
    phone_column: str | None
    name_column: str | None
    region: str
    rows_read: int
    imported: int
    updated: int
    duplicates: int
    invalid: int
    skipped_opted_out: int
    error: str | None
    started_at: datetime
    finished_at: datetime | None

    @property
    def unchanged(self) -> int:
        """Contacts of a completed import already stored exactly so (not stored: every
        distinct valid number is imported, updated, unchanged or opted out)."""
        if self.status != "completed":
            return 0
        accounted = (
            self.invalid + self.duplicates + self.imported + self.updated + self.skipped_opted_out
        )
        return max(self.rows_read - accounted, 0)


_RUN_COLUMNS = tuple(f.name for f in fields(ImportRun) if f.name != "list_name")
_COUNTS = ("rows_read", "imported", "updated", "duplicates", "invalid", "skipped_opted_out")


def _run(row: Mapping[Any, Any]) -> ImportRun:
    data = dict(row)
    for name in _COUNTS:
        data[name] = data[name] or 0
    return ImportRun(**data)


def _interrupted(run: ImportRun) -> ImportRun:
    """``run`` as it reads once marked interrupted."""
    return replace(run, status="failed", error=INTERRUPTED)


@dataclass(frozen=True)
class RejectedRow:
    """A rejected row: its spreadsheet row number, column, reason and cells as they were."""

    row_number: int
    column: str | None
    reason: str
    raw: dict[str, Any]


@dataclass(frozen=True)
class RejectPage:
    """One page of an import's rejected rows and how many it has in all."""

    items: list[RejectedRow]
    total: int


@dataclass(frozen=True)
class ListedRun:
    """An import as the faces list it: the run, its first rejected rows and their total."""

    run: ImportRun
    rejects: RejectPage


def listing(
    engine: Engine,
    *,
    now: datetime,
    limit: int = 50,
    import_id: int | None = None,
    rejects: int = 0,
) -> list[ListedRun]:
    """The latest ``limit`` imports newest first (or only ``import_id``), each with its
    first ``rejects`` rejected rows and how many it has; an import whose process died
    reads ``failed`` with the error :data:`INTERRUPTED` (:func:`interrupted_imports`).
    Reads only (the faces' GETs list with it): the row itself is marked by
    :func:`mark_interrupted_imports`, before the next import or at a process's start."""
    dead = set(interrupted_imports(engine, now=now))
    with engine.connect() as conn:
        runs = [
            _interrupted(_run(r)) if r["id"] in dead else _run(r)
            for r in q.import_runs(conn, _RUN_COLUMNS, import_id=import_id, limit=limit)
        ]
        totals = q.rejects_totals(conn, [r.id for r in runs])
        pages = {
            r.id: q.rejects_page(conn, r.id, limit=rejects, offset=0)[1]
            for r in runs
            if rejects and totals.get(r.id)
        }
    return [
        ListedRun(
            run,
            RejectPage(
                [RejectedRow(**row) for row in pages.get(run.id, [])], totals.get(run.id, 0)
            ),
        )
        for run in runs
    ]


def get_run(engine: Engine, import_id: int) -> ImportRun | None:
    """The import ``import_id``, or None."""
    with engine.connect() as conn:
        rows = q.import_runs(conn, _RUN_COLUMNS, import_id=import_id)
    return _run(rows[0]) if rows else None


def rejects_page(engine: Engine, import_id: int, *, limit: int, offset: int = 0) -> RejectPage:
    """An import's rejected rows by row number (one page)."""
    with engine.connect() as conn:
        total, rows = q.rejects_page(conn, import_id, limit=limit, offset=offset)
    return RejectPage([RejectedRow(**r) for r in rows], total)


__all__ = [
    "INTERRUPTED",
    "STALE_AFTER",
    "ImportRun",
    "ListedRun",
    "RejectPage",
    "RejectedRow",
    "get_run",
    "interrupted_imports",
    "listing",
    "mark_interrupted_imports",
    "rejects_page",
    "runner_alive",
    "runner_id",
]
