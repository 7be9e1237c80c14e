"""Which process runs an import, and marking imports whose process died as failed.

An import writes contacts in one transaction, so a killed import wrote nothing; only
its ``imports`` row is left saying ``running``. Each row records its runner
(``host:pid:boot_id:start_ticks``). A ``running`` row is *interrupted* when

* its runner is on this host and that process no longer exists (a different boot id,
  no such pid, or a pid reused by a process that started at another time), or
* its runner is on another host (or unknown) and it started more than
  :data:`STALE_AFTER` ago (an import of the largest file allowed takes minutes).

Interrupted rows become ``failed`` with the error :data:`INTERRUPTED`.
:func:`mark_interrupted_imports` runs before every import and when imports are listed.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, Table, select, update

from storage import tables

imports: Table = tables.imports

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


def mark_interrupted_imports(
    engine: Engine, *, now: datetime, stale_after: timedelta = STALE_AFTER
) -> list[int]:
    """Mark ``running`` imports whose process is gone (see module doc) as failed.

    Returns the ids marked. Safe to run concurrently: only rows still ``running`` change.
    """
    with engine.connect() as conn:
        rows = conn.execute(
            select(imports.c.id, imports.c.runner, imports.c.started_at).where(
                imports.c.status == "running"
            )
        ).all()
    dead: list[int] = []
    for r in rows:
        alive = runner_alive(r.runner)
        if alive is False or (alive is None and r.started_at < now - stale_after):
            dead.append(int(r.id))
    if dead:
        with engine.begin() as conn:
            conn.execute(
                update(imports)
                .where(imports.c.id.in_(dead), imports.c.status == "running")
                .values(status="failed", error=INTERRUPTED, finished_at=now)
            )
    return dead


__all__ = [
    "INTERRUPTED",
    "STALE_AFTER",
    "mark_interrupted_imports",
    "runner_alive",
    "runner_id",
]
