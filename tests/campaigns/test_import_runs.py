"""Imports left ``running`` by a dead process are told apart from live ones and failed."""

from __future__ import annotations

import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import Engine

from campaigns.import_runs import (
    INTERRUPTED,
    RejectPage,
    listing,
    mark_interrupted_imports,
    runner_alive,
    runner_id,
)
from campaigns.importer import ImportOptions, import_file
from storage import tables

_jobs = tables.imports
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _job(engine: Engine, runner: str | None, started_at: datetime) -> int:
    with engine.begin() as conn:
        key = conn.execute(
            sa.insert(_jobs).values(
                filename="x.csv", status="running", runner=runner, started_at=started_at
            )
        ).inserted_primary_key
    assert key is not None
    return int(key[0])


def _status(engine: Engine) -> dict[int, tuple[str, str | None]]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(_jobs.c.id, _jobs.c.status, _jobs.c.error)).all()
    return {int(r.id): (r.status, r.error) for r in rows}


def test_runner_alive_tells_live_dead_and_foreign_processes() -> None:
    assert runner_alive(runner_id()) is True
    assert runner_alive(runner_id(_dead_pid())) is False
    host, pid, boot, ticks = runner_id().rsplit(":", 3)
    assert runner_alive(f"{host}:{pid}:{boot}:{int(ticks) + 1}") is False  # pid reused
    assert runner_alive(f"{host}:{pid}:another-boot:{ticks}") is False  # machine restarted
    assert runner_alive(f"not-{socket.gethostname()}:{pid}:{boot}:{ticks}") is None
    assert runner_alive(None) is None
    assert runner_alive("garbage") is None


def test_only_dead_or_stale_foreign_runs_are_marked(engine: Engine) -> None:
    live = _job(engine, runner_id(), NOW - timedelta(days=3))  # alive: never marked
    dead = _job(engine, runner_id(_dead_pid()), NOW)
    foreign_new = _job(engine, "elsewhere:1:b:2", NOW - timedelta(minutes=5))
    foreign_old = _job(engine, "elsewhere:1:b:2", NOW - timedelta(hours=2))
    unknown_old = _job(engine, None, NOW - timedelta(hours=2))
    with engine.begin() as conn:
        conn.execute(sa.update(_jobs).values(status="completed").where(_jobs.c.id == live))
    still = _job(engine, runner_id(), NOW - timedelta(days=3))

    marked = mark_interrupted_imports(engine, now=NOW)

    assert sorted(marked) == sorted([dead, foreign_old, unknown_old])
    status = _status(engine)
    assert status[live] == ("completed", None)
    assert status[still] == ("running", None)
    assert status[foreign_new] == ("running", None)
    for job in marked:
        assert status[job] == ("failed", INTERRUPTED)
    assert mark_interrupted_imports(engine, now=NOW) == []  # nothing left to mark


def test_on_start_gets_the_job_id_while_the_row_is_running(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("phone\n+1 202 555 0100\n", encoding="utf-8")
    seen: list[tuple[int, str]] = []

    def on_start(job_id: int) -> None:
        seen.append((job_id, _status(engine)[job_id][0]))

    report = import_file(engine, path, ImportOptions("l"), on_start=on_start, now=NOW)
    assert seen == [(report.import_id, "running")]
    assert _status(engine)[report.import_id] == ("completed", None)


def test_listing_shows_dead_runs_failed_and_counts_rejects(engine: Engine) -> None:
    samples = Path(__file__).resolve().parents[2] / "samples"
    done = import_file(engine, samples / "contacts.csv", ImportOptions("a"), now=NOW).import_id
    dead = _job(engine, runner_id(_dead_pid()), NOW)

    newest_first = listing(engine, now=NOW, limit=1)
    assert [(x.run.id, x.run.status, x.run.error) for x in newest_first] == [
        (dead, "failed", INTERRUPTED)
    ]
    assert newest_first[0].rejects == RejectPage([], 0)
    # a read (the faces' GETs list with it): the row is marked by the next import
    assert _status(engine)[dead] == ("running", None)

    every = listing(engine, now=NOW)
    assert [x.run.id for x in every] == [dead, done]
    assert every[1].rejects.total == 4 and every[1].rejects.items == []

    (one,) = listing(engine, now=NOW, import_id=done, rejects=2)
    assert one.run.rows_read == 50 and one.rejects.total == 4
    assert [r.row_number for r in one.rejects.items] == sorted(
        r.row_number for r in one.rejects.items
    )
    assert len(one.rejects.items) == 2
    assert listing(engine, now=NOW, import_id=dead + 1) == []
