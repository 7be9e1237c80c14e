"""The SQLite CSV export by windows (``storage.reports.sqlite``): same bytes as the per-row
Python path in this process and in any number of worker processes, whatever the window
size; one snapshot across the workers; fallbacks; failed workers raise and are reaped;
and the SQL's cells against Python's for arbitrary text."""

from __future__ import annotations

import csv
import io
import signal
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, update

from campaigns.reports import columns, writers
from storage import tables
from storage.reports import sql as report_sql
from storage.reports import sqlite as sqlite_reports
from storage.reports import sqlite_workers
from tests.campaigns.campaign_fixtures import NOW
from tests.campaigns.reports import reference
from tests.campaigns.reports.test_csv import _assert_same, _campaign, _other_rows, _per_row

deliveries = tables.deliveries


def _db_file(engine: Engine) -> str:
    database = engine.url.database
    assert database
    return database


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The worker processes the test's exports start; none may outlive its export."""
    procs: list[subprocess.Popen[bytes]] = []
    init = sqlite_workers._Worker.__init__

    def recording(self: Any, name: str) -> None:
        init(self, name)
        procs.append(self.proc)

    monkeypatch.setattr(sqlite_workers._Worker, "__init__", recording)
    yield procs
    assert all(p.returncode is not None for p in procs), "a worker was not reaped"


def _processes(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Exports of test-sized campaigns in ``n`` worker processes (1: in this process)."""
    monkeypatch.setattr(sqlite_reports, "process_count", lambda: n)
    monkeypatch.setattr(sqlite_reports, "PROCESS_MIN_ROWS", 1)


@pytest.mark.parametrize("processes", [1, 2, 3])
@pytest.mark.parametrize("window", [1, 3, 4096])
def test_windows_byte_identical(
    sqlite_engine: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spawned: list[subprocess.Popen[bytes]],
    processes: int,
    window: int,
) -> None:
    """In this process or any number of workers, windows of any size (down to one id):
    the bytes of the per-row path."""
    cid = _campaign(sqlite_engine)
    monkeypatch.setattr(sqlite_reports, "WINDOW_IDS", window)
    _processes(monkeypatch, processes)
    before = threading.active_count()
    out = writers.write_report(sqlite_engine, cid, tmp_path / "r.csv")
    assert threading.active_count() == before
    assert len(spawned) == (processes if processes > 1 else 0)
    _assert_same(out.read_bytes(), _per_row(sqlite_engine, cid))


def test_windows_below_the_process_threshold(
    sqlite_engine: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spawned: list[subprocess.Popen[bytes]],
) -> None:
    """A campaign smaller than PROCESS_MIN_ROWS is exported in this process."""
    cid = _campaign(sqlite_engine)
    monkeypatch.setattr(sqlite_reports, "process_count", lambda: 2)
    out = writers.write_report(sqlite_engine, cid, tmp_path / "r.csv")
    assert spawned == []
    _assert_same(out.read_bytes(), _per_row(sqlite_engine, cid))


@pytest.mark.parametrize("processes", [1, 2])
def test_windows_skip_other_campaigns_rows(
    sqlite_engine: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spawned: list[subprocess.Popen[bytes]],
    processes: int,
) -> None:
    """Rows of two campaigns alternate: each window holds both, only one is written;
    windows with none of the campaign's rows are skipped."""
    from campaigns import service
    from tests.campaigns.campaign_fixtures import make_list, people, spec

    make_list(sqlite_engine, "customers", people(2))
    cid = service.create_campaign(sqlite_engine, spec(), now=NOW).id
    other = service.create_campaign(sqlite_engine, spec(name="other"), now=NOW).id
    with sqlite_engine.begin() as conn:
        for i in range(40):
            _other_rows(conn, cid, 1, f"+1415000{i:04d}")
            _other_rows(conn, other, 2, f"o{i}-")
    monkeypatch.setattr(sqlite_reports, "WINDOW_IDS", 1)
    _processes(monkeypatch, processes)
    got = writers.write_report(sqlite_engine, cid, tmp_path / "r.csv").read_bytes()
    assert got.count(b"\r\n") == 41 and b"o1-" not in got
    _assert_same(got, _per_row(sqlite_engine, cid))


class _CommitAfterFirstWindow(io.BytesIO):
    """A file that, on its first write after the header, commits changes to the campaign
    from another connection: rows of later windows, and a new row. ``running``: the
    workers at that moment, each of which must still be running."""

    def __init__(self, engine: Engine, cid: int, running: list[subprocess.Popen[bytes]]):
        super().__init__()
        self.engine, self.cid, self.writes, self.running = engine, cid, 0, running

    def write(self, data: Any) -> int:
        self.writes += 1
        if self.writes == 2:
            assert all(p.poll() is None for p in self.running)
            with self.engine.begin() as conn:
                conn.execute(
                    update(deliveries)
                    .where(deliveries.c.campaign_id == self.cid)
                    .values(reply_text="changed, after the export began", attempts=99)
                )
                _other_rows(conn, self.cid, 1, "+14155559999")
        return super().write(data)


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_windows_read_one_snapshot(
    sqlite_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    spawned: list[subprocess.Popen[bytes]],
    processes: int,
) -> None:
    """A commit while the export runs changes nothing in it, whichever worker reads the
    later windows: every worker reads the snapshot of the export's start. (Each worker's
    output is far more than its pipe holds, so all are still at work at the commit.)"""
    cid = _campaign(sqlite_engine)
    with sqlite_engine.begin() as conn:
        _other_rows(conn, cid, 600, "+1415666")
    expected = _per_row(sqlite_engine, cid)
    monkeypatch.setattr(sqlite_reports, "WINDOW_IDS", 1)
    monkeypatch.setattr(sqlite_workers, "PIPE_BYTES", 4096)
    _processes(monkeypatch, processes)
    fh = _CommitAfterFirstWindow(sqlite_engine, cid, spawned)
    with sqlite_engine.connect() as conn:
        writers.write_csv(conn, cid, fh)
    assert fh.writes > 4
    assert len(spawned) == (processes if processes > 1 else 0)
    _assert_same(fh.getvalue(), expected)
    assert b"changed" in _per_row(sqlite_engine, cid)  # the commit did happen


def test_rows_committed_before_the_snapshot_are_written(
    sqlite_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    spawned: list[subprocess.Popen[bytes]],
) -> None:
    """A row committed after the campaign's span was read but before the workers' snapshot
    lies past that span: the workers find it and write it."""
    cid = _campaign(sqlite_engine)
    monkeypatch.setattr(sqlite_reports, "WINDOW_IDS", 2)
    _processes(monkeypatch, 2)
    export = sqlite_workers.export

    def commit_first(*args: Any, **kwargs: Any) -> bool:
        with sqlite_engine.begin() as conn:
            _other_rows(conn, cid, 3, "+1415777")
        return export(*args, **kwargs)

    monkeypatch.setattr(sqlite_workers, "export", commit_first)
    fh = io.BytesIO()
    with sqlite_engine.connect() as conn:
        writers.write_csv(conn, cid, fh)
    assert len(spawned) == 2 and fh.getvalue().count(b"+1415777") == 3
    _assert_same(fh.getvalue(), _per_row(sqlite_engine, cid))


def test_windows_wait_for_the_write_lock_then_read_alone(
    sqlite_engine: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spawned: list[subprocess.Popen[bytes]],
) -> None:
    """A writer holding the lock longer than LOCK_WAIT_SECONDS: the workers are stopped
    and the export reads on its own connection instead (same bytes, the writer
    unharmed)."""
    cid = _campaign(sqlite_engine)
    expected = _per_row(sqlite_engine, cid)
    monkeypatch.setattr(sqlite_reports, "LOCK_WAIT_SECONDS", 0.05)
    monkeypatch.setattr(sqlite_reports, "WINDOW_IDS", 3)
    _processes(monkeypatch, 2)
    writer = sqlite3.connect(_db_file(sqlite_engine), isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE deliveries SET attempts = 7 WHERE campaign_id = ?", (cid,))
        out = writers.write_report(sqlite_engine, cid, tmp_path / "r.csv")
        _assert_same(out.read_bytes(), expected)
        writer.execute("COMMIT")
    finally:
        writer.close()
    assert len(spawned) == 2
    assert b",7," in _per_row(sqlite_engine, cid)


def test_windows_in_the_callers_transaction(
    sqlite_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    spawned: list[subprocess.Popen[bytes]],
) -> None:
    """Inside a transaction with uncommitted writes, the export reads the caller's own
    connection, so it sees them (as the per-row path on that connection does)."""
    cid = _campaign(sqlite_engine)
    _processes(monkeypatch, 3)
    with sqlite_engine.connect() as conn:
        conn.execute(
            update(deliveries)
            .where(deliveries.c.campaign_id == cid)
            .values(reply_text="not yet committed")
        )
        fh = io.BytesIO()
        writers.write_csv(conn, cid, fh)
        text = io.TextIOWrapper(
            expected := io.BytesIO(), encoding="utf-8-sig", newline="", write_through=True
        )
        reference.write_csv_per_row(conn, cid, text)
        text.detach()
        conn.rollback()
    assert spawned == []
    assert b"not yet committed" in fh.getvalue()
    _assert_same(fh.getvalue(), expected.getvalue())


def test_processes_only_on_a_wal_file(tmp_path: Path) -> None:
    """A database in memory, or a file not in WAL mode: no worker processes."""
    memory = sqlite3.connect(":memory:")
    plain = sqlite3.connect(tmp_path / "plain.db")
    wal = sqlite3.connect(tmp_path / "wal.db", isolation_level=None)
    try:
        wal.execute("PRAGMA journal_mode=WAL")
        assert sqlite_reports._wal_file(memory) is None
        assert sqlite_reports._wal_file(plain) is None
        assert sqlite_reports._wal_file(wal) == str(tmp_path / "wal.db")
        wal.execute("BEGIN")
        assert sqlite_reports._wal_file(wal) is None
    finally:
        for conn in (memory, plain, wal):
            conn.close()


def test_windows_connections_closed(
    sqlite_engine: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spawned: list[subprocess.Popen[bytes]],
) -> None:
    """After the export no reader is left behind: a TRUNCATE checkpoint completes."""
    cid = _campaign(sqlite_engine)
    monkeypatch.setattr(sqlite_reports, "WINDOW_IDS", 5)
    _processes(monkeypatch, 3)
    writers.write_report(sqlite_engine, cid, tmp_path / "r.csv")
    assert len(spawned) == 3
    conn = sqlite3.connect(_db_file(sqlite_engine), isolation_level=None)
    try:
        busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
    finally:
        conn.close()


@pytest.mark.parametrize("processes", [1, 3])
def test_windows_write_error(
    sqlite_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    spawned: list[subprocess.Popen[bytes]],
    processes: int,
) -> None:
    """A failed write raises at once; the thread or every worker ends."""
    cid = _campaign(sqlite_engine)
    monkeypatch.setattr(sqlite_reports, "WINDOW_IDS", 2)
    monkeypatch.setattr(sqlite_reports, "_AHEAD", 1)
    _processes(monkeypatch, processes)

    class Full(io.BytesIO):
        def write(self, data: Any) -> int:
            if self.tell():
                raise OSError("no space left on device")
            return super().write(data)

    before = threading.active_count()
    with sqlite_engine.connect() as conn:
        with pytest.raises(OSError, match="no space"):
            writers.write_csv(conn, cid, Full())
        assert threading.active_count() == before
        assert conn.exec_driver_sql("SELECT 1").scalar_one() == 1


@pytest.mark.parametrize("processes", [1, 2])
def test_windows_query_error_reaches_the_writer(
    sqlite_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    spawned: list[subprocess.Popen[bytes]],
    processes: int,
) -> None:
    """An error in a window's statement is raised in the writer's thread; from a worker,
    as a WorkerError naming the worker and the database with SQLite's message."""
    cid = _campaign(sqlite_engine)
    monkeypatch.setattr(sqlite_reports, "WINDOW_IDS", 2)
    _processes(monkeypatch, processes)
    monkeypatch.setattr(
        report_sql, "csv_window_sqlite", lambda fmt: "SELECT no_such_function(?, ?, ?)"
    )
    before = threading.active_count()
    with (
        sqlite_engine.connect() as conn,
        pytest.raises(sqlite3.OperationalError, match="no such function: no_such_function") as e,
    ):
        writers.write_csv(conn, cid, io.BytesIO())
    assert threading.active_count() == before
    if processes > 1:
        assert isinstance(e.value, sqlite_workers.WorkerError)
        assert f"CSV worker 1 of 2 on {_db_file(sqlite_engine)} failed" in str(e.value)


def test_killed_worker_raises_and_none_is_left(
    sqlite_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    spawned: list[subprocess.Popen[bytes]],
) -> None:
    """A worker killed mid-export: the export raises (never a short file), and the other
    worker, busy on a window that never ends, is killed and reaped too."""
    cid = _campaign(sqlite_engine)
    with sqlite_engine.connect() as conn:
        first = conn.exec_driver_sql(
            "SELECT min(id) FROM deliveries WHERE campaign_id = ?", (cid,)
        ).scalar_one()
    # window 1 is b"A"; every other window counts for ever (stopped only by a kill)
    monkeypatch.setattr(
        report_sql,
        "csv_window_sqlite",
        lambda fmt: (
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c"
            f" WHERE ?1 <> {first}) SELECT x'41' FROM (SELECT max(x) FROM c) WHERE ?2 AND ?3"
        ),
    )
    monkeypatch.setattr(sqlite_reports, "WINDOW_IDS", 1)
    _processes(monkeypatch, 2)

    class KillSecond(io.BytesIO):
        def write(self, data: Any) -> int:
            if data == b"A":  # window 1, from worker 1: worker 2 is stuck in window 2
                spawned[1].send_signal(signal.SIGKILL)
            return super().write(data)

    with (
        sqlite_engine.connect() as conn,
        pytest.raises(sqlite_workers.WorkerError, match=r"worker 2 of 2 .* killed by SIGKILL"),
    ):
        writers.write_csv(conn, cid, KillSecond())
    assert len(spawned) == 2


def test_process_count() -> None:
    assert 1 <= sqlite_reports.process_count() <= sqlite_reports.MAX_PROCESSES


# ---------------------------------------------------------------- cells against Python's

_SCHEMA = (
    "CREATE TABLE contacts (id INTEGER PRIMARY KEY, name TEXT, opted_out BOOLEAN)",
    "CREATE TABLE deliveries (id INTEGER PRIMARY KEY, campaign_id INTEGER, target TEXT,"
    " contact_id INTEGER, sender TEXT, state TEXT, attempts INTEGER, message_id TEXT,"
    " error TEXT, queued_at TEXT, sent_at TEXT, delivered_at TEXT, read_at TEXT,"
    " failed_at TEXT, replied_at TEXT, reply_text TEXT, variant TEXT, tapped_button_id TEXT,"
    " tapped_row_id TEXT, tapped_title TEXT)",
)
_TOKENS = st.sampled_from([*"=+-@\t\r\n\",'\\\x00 a9Z0é🎉", "@g.us", "+1415", "555"])
_TEXT = st.lists(_TOKENS, max_size=6).map("".join) | st.text(max_size=6)
_PHONES = st.from_regex(r"\A\+[0-9]{4,17}\n{0,2}\Z")
_TIMES = st.none() | st.datetimes(
    min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)
).map(lambda t: t.replace(microsecond=t.microsecond % 3 * 123456 if t.second % 2 else 0))
_TAPPED = ("tapped_button_id", "tapped_row_id", "tapped_title")
_ROW = st.fixed_dictionaries(
    {
        "target": _PHONES | _TEXT,
        "name": st.none() | _TEXT,
        "opted_out": st.none() | st.booleans(),
        "sender": st.none() | _TEXT,
        "state": st.sampled_from(["queued", "read", "failed"]) | _TEXT,
        "attempts": st.integers(0, 99),
        "message_id": st.none() | _TEXT,
        "error": st.none() | _TEXT,
        "reply_text": st.none() | _TEXT,
        "variant": st.none() | _TEXT,
        **{t: st.none() | _TEXT for t in _TAPPED},
        **{t: _TIMES for t in columns.TIMES},
    }
)


def _python_line(row: dict[str, Any]) -> bytes:
    """The line as the per-row path writes it (``iter_report_rows`` + ``_cells``)."""
    cells = {
        "target": row["target"],
        "name": row["name"] or "",
        "sender": row["sender"] or "",
        "state": row["state"],
        "attempts": row["attempts"],
        "message_id": row["message_id"] or "",
        "error": row["error"] or "",
        **{t: columns.iso(row[t] and row[t].replace(tzinfo=UTC)) for t in columns.TIMES},
        "reply": row["reply_text"] or "",
        **{t: row[t] or "" for t in _TAPPED},
        "opted_out": bool(row["opted_out"]),
        "variant": row["variant"] or "",
    }
    buf = io.StringIO(newline="")
    csv.writer(buf).writerow(columns.cells(cells))
    return buf.getvalue().encode("utf-8")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(_ROW, min_size=1, max_size=6))
def test_sql_cells_match_python(rows: list[dict[str, Any]]) -> None:
    """For arbitrary text (formula starts, quotes, commas, CR/LF, NUL, backslashes,
    emoji, numbers around E.164), both SQLite statements give the per-row path's line."""
    db = sqlite3.connect(":memory:")
    for statement in _SCHEMA:
        db.execute(statement)
    for i, row in enumerate(rows, start=1):
        contact = i if row["opted_out"] is not None else None
        if contact:
            db.execute("INSERT INTO contacts VALUES (?, ?, ?)", (i, row["name"], row["opted_out"]))
        times = [row[t] and row[t].strftime("%Y-%m-%d %H:%M:%S.%f") for t in columns.TIMES]
        db.execute(
            "INSERT INTO deliveries VALUES"
            " (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                i,
                row["target"],
                contact,
                row["sender"],
                row["state"],
                row["attempts"],
                row["message_id"],
                row["error"],
                *times,
                row["reply_text"],
                row["variant"],
                *(row[t] for t in _TAPPED),
            ),
        )
        if not contact:
            row["name"] = None
            row["opted_out"] = None
    expected = b"\r\n".join(_python_line(r).removesuffix(b"\r\n") for r in rows)
    (blob,) = db.execute(report_sql.csv_window_sqlite(columns.FORMAT), (1, len(rows), 1)).fetchone()
    assert blob == expected
    lines = [
        str(line).encode("utf-8")
        for (line,) in db.execute(report_sql.csv_lines_sqlite(columns.FORMAT), (1,)).fetchall()
    ]
    assert b"\r\n".join(lines) == expected
    db.close()
