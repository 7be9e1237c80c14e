"""Engine and schema: upgrades are idempotent and datetimes stay UTC-aware."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError, StatementError

from storage import tables
from storage.engine import (
    current_revision,
    log_failure,
    make_engine,
    normalise_url,
    ping,
    upgrade,
)
from storage.models import HEAD_REVISION

log = logging.getLogger("gatecast.test")


def test_upgrade_is_idempotent(engine: Engine) -> None:
    upgrade(engine)
    assert current_revision(engine) == HEAD_REVISION == "0034"


def test_datetimes_round_trip_as_utc(engine: Engine) -> None:
    t = tables.contacts
    berlin = timezone(timedelta(hours=1))
    when = datetime(2026, 11, 28, 9, 0, tzinfo=berlin)
    with engine.begin() as conn:
        conn.execute(
            insert(t).values(
                phone="+4915112345678",
                raw_phone="x",
                name="A",
                attributes={"city": "Köln"},
                opted_out=False,
                created_at=when,
                updated_at=when,
            )
        )
        row = conn.execute(select(t.c.created_at, t.c.attributes)).one()
    assert row.created_at == when
    assert row.created_at.tzinfo is not None
    assert row.created_at.utcoffset() == timedelta(0)
    assert row.attributes == {"city": "Köln"}


def test_naive_datetime_is_refused(engine: Engine) -> None:
    t = tables.contacts
    with pytest.raises(StatementError, match="naive datetime refused"), engine.begin() as conn:
        conn.execute(
            insert(t).values(
                phone="+1",
                raw_phone="",
                name="",
                attributes={},
                opted_out=False,
                created_at=datetime(2026, 1, 1),
                updated_at=datetime.now(UTC),
            )
        )


def test_foreign_keys_enforced(engine: Engine) -> None:
    m = tables.list_members
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(insert(m).values(list_id=999, contact_id=999, added_at=datetime.now(UTC)))


def test_list_names_unique(engine: Engine) -> None:
    t = tables.lists
    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(insert(t).values(name="customers", description="", created_at=now))
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(insert(t).values(name="customers", description="", created_at=now))


def test_normalise_url() -> None:
    assert normalise_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_url("sqlite:///x.db") == "sqlite:///x.db"


def test_sqlite_runs_in_wal_mode(sqlite_url: str) -> None:
    eng = make_engine(sqlite_url)
    with eng.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_ping_answers_or_raises(engine: Engine, tmp_path: Path) -> None:
    ping(engine)
    missing = make_engine(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    with pytest.raises(SQLAlchemyError):
        ping(missing)


def test_unavailable_errors_are_the_database_s_absence_not_the_data_s_fault(
    tmp_path: Path,
) -> None:
    import sqlite3

    from sqlalchemy import text

    from storage.engine import is_unavailable_error

    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with engine.begin() as conn:  # WAL mode set by the engine's first connection
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    holder = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA busy_timeout=0")
            with pytest.raises(SQLAlchemyError) as locked:
                conn.execute(text("INSERT INTO t VALUES (1)"))
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert is_unavailable_error(locked.value)
    assert is_unavailable_error(OSError(28, "No space left on device"))
    with engine.connect() as conn, pytest.raises(SQLAlchemyError) as bad_sql:
        conn.execute(text("INSERT INTO missing VALUES (1)"))
    assert not is_unavailable_error(bad_sql.value)  # a bad statement is not an outage
    assert not is_unavailable_error(IntegrityError("INSERT", {}, Exception("UNIQUE")))
    assert not is_unavailable_error(ValueError("bad data"))


def _error_from(engine: sa.Engine, sql: str) -> Exception:
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(sql))
    except Exception as exc:  # the real error SQLAlchemy raises
        return exc
    raise AssertionError(f"{sql!r} did not fail")


def test_a_loop_failing_on_a_locked_database_logs_one_line_a_defect_its_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "locked.db"
    engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.1})
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write lock
    try:
        locked = _error_from(engine, "INSERT INTO t VALUES (1)")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    defect = _error_from(engine, "INSERT INTO no_such_table VALUES (1)")
    engine.dispose()

    with caplog.at_level(logging.WARNING, logger="gatecast.test"):
        try:
            raise locked
        except Exception as exc:
            log_failure(log, "the dispatcher stopped; restarting in 1 s", exc)
    (outage,) = caplog.records
    assert outage.levelno == logging.WARNING and outage.exc_info is None
    assert outage.getMessage() == (
        "the dispatcher stopped; restarting in 1 s: the database is unavailable "
        "(database is locked)"
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gatecast.test"):
        try:
            raise defect
        except Exception as exc:
            log_failure(log, "scheduler loop error", exc)
    (error,) = caplog.records
    assert error.levelno == logging.ERROR and error.exc_info is not None


def test_a_new_sqlite_file_is_created_owner_only(tmp_path: Path) -> None:
    before = os.umask(0o022)  # files would be 0644 unless gatecast says otherwise
    try:
        engine = make_engine(f"sqlite:///{tmp_path / 'new.db'}")
        with engine.connect() as conn:  # WAL: the -wal and -shm files exist while open
            conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
            modes = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in tmp_path.iterdir()}
        engine.dispose()
    finally:
        os.umask(before)
    assert modes == dict.fromkeys(["new.db", "new.db-wal", "new.db-shm"], "0o600")
