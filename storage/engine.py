"""Engines and schema upgrades for SQLite (default) and PostgreSQL."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Connection as Connection  # re-exported, as Engine: for annotations
from sqlalchemy import Engine as Engine  # re-exported: callers name it without SQLAlchemy
from sqlalchemy import create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
#: how long a SQLite connection waits for another writer's lock
SQLITE_BUSY_TIMEOUT_MS = 30_000

#: what any failure of the database layer raises (callers catch it without SQLAlchemy)
DatabaseError = SQLAlchemyError


def normalise_url(url: str) -> str:
    """Map ``postgres://`` and ``postgresql://`` to the psycopg 3 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cur.close()


def create_private(path: Path) -> None:
    """Create ``path`` empty and readable by its owner only (0600), unless it exists or
    its folder does not: a new SQLite database is then born private, and SQLite gives its
    ``-wal`` and ``-shm`` files the database file's mode."""
    if path.exists() or not path.parent.is_dir():
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:  # another process created it first
        return


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for ``url``; SQLite gets WAL, foreign keys and a busy timeout, and a
    database file it creates is the owner's only (:func:`create_private`)."""
    url = normalise_url(url)
    backend = make_url(url).get_backend_name()
    if backend == "sqlite":
        connect_args = {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
        engine = create_engine(url, connect_args=connect_args, **kwargs)
        database = sqlite_file(url)
        if database is not None and not str(database).startswith("file:"):
            private = database

            def before_connect(*_: Any) -> None:
                create_private(private)

            event.listen(engine, "do_connect", before_connect)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def take_write_lock(conn: Connection) -> None:
    """SQLite: take the database's write lock now, as this transaction's first statement
    (``BEGIN IMMEDIATE``, waiting up to the busy timeout). A transaction that reads before
    it writes otherwise starts on a snapshot, and if another connection commits before
    its first write, that write fails at once with "database is locked" (no busy wait
    helps a stale snapshot). PostgreSQL: nothing to do."""
    if conn.dialect.name == "sqlite" and not conn.connection.dbapi_connection.in_transaction:  # type: ignore[union-attr]
        conn.exec_driver_sql("BEGIN IMMEDIATE")


#: SQLite: the longest a writer waiting for the lock sleeps between tries (its busy
#: handler's last step)
SQLITE_BUSY_STEP_SECONDS = 0.1


def let_writers_in(engine: Engine) -> None:
    """Between the transactions of a long change: SQLite, wait as long as a writer waiting
    for the lock sleeps between tries, so it takes the lock before the next transaction
    (else it may wake only ever while one is running); PostgreSQL: nothing (writers of
    other rows do not wait, and lock waiters queue)."""
    if engine.dialect.name == "sqlite":
        time.sleep(SQLITE_BUSY_STEP_SECONDS)


def is_sqlite_file(engine: Engine) -> bool:
    """True when ``engine`` is SQLite on a file (not an in-memory database)."""
    database = engine.url.database
    return engine.dialect.name == "sqlite" and database not in (None, "", ":memory:")


def is_sqlite_url(url: str) -> bool:
    """True when the database URL ``url`` names SQLite (a file or in memory)."""
    return make_url(normalise_url(url)).get_backend_name() == "sqlite"


def upgrades_itself(url: str) -> bool:
    """True when a database at ``url`` is upgraded to head on open: SQLite (one process
    owns the file). PostgreSQL is upgraded with ``gatecast db upgrade``, so that several
    workers never race on a migration."""
    return is_sqlite_url(url)


def sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite URL; None for other databases and in-memory SQLite."""
    parsed = make_url(normalise_url(url))
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(str(parsed.database))


def describe_url(url: str) -> str:
    """The database URL with any password hidden, for messages and logs."""
    return make_url(normalise_url(url)).render_as_string(hide_password=True)


def is_lock_error(exc: BaseException) -> bool:
    """True for SQLite's "database is locked" (another writer holds the lock)."""
    return isinstance(exc, OperationalError) and "database is locked" in str(exc.orig)


#: SQLite's messages for a database that cannot be written now (not a bad statement)
_SQLITE_UNAVAILABLE = (
    "database is locked",
    "database table is locked",
    "disk i/o error",
    "database or disk is full",
    "unable to open database file",
)


def is_unavailable_error(exc: BaseException) -> bool:
    """True when the database could not be reached or written at all (not the data's fault).

    SQLite locked, full or failing I/O; PostgreSQL refusing, closing or shutting down the
    connection (psycopg's OperationalError, wrapped or not); the disk full (OSError).
    """
    import psycopg  # lazily: storage.engine is imported by the CLI's quick commands

    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated or isinstance(exc.orig, psycopg.OperationalError):
            return True
        return isinstance(exc, OperationalError) and _sqlite_unavailable(exc.orig)
    if isinstance(exc, psycopg.OperationalError | OSError):
        return True
    return isinstance(exc, sqlite3.OperationalError) and _sqlite_unavailable(exc)


def log_failure(logger: logging.Logger, what: str, exc: BaseException) -> None:
    """Log a failure a loop outlives by trying again: one warning line naming the outage
    when the database is unavailable (:func:`is_unavailable_error`), else ``what`` with
    the traceback (a defect). Call it from the ``except`` block."""
    if is_unavailable_error(exc):
        lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        cause = lines[0] if lines else type(exc).__name__
        logger.warning("%s: the database is unavailable (%s)", what, cause)
    else:
        logger.error(what, exc_info=exc)


def _sqlite_unavailable(exc: BaseException | None) -> bool:
    return any(m in str(exc).lower() for m in _SQLITE_UNAVAILABLE)


def is_postgres(engine: Engine) -> bool:
    """True when ``engine`` talks to PostgreSQL."""
    return engine.dialect.name == "postgresql"


def ping(engine: Engine) -> None:
    """Ask the database a trivial question; raises SQLAlchemy's error when it cannot answer."""
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` with Alembic (idempotent)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def current_revision(engine: Engine) -> str | None:
    """The schema's Alembic revision, or None for an empty database.

    Read from Alembic's own table with one plain query: every command checks it when it
    opens the database, and loading Alembic for that cost more than the command.
    """
    from sqlalchemy import inspect

    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    if len(rows) > 1:  # several heads: never this project's linear history
        raise RuntimeError(f"the database has several schema heads: {sorted(r[0] for r in rows)}")
    return str(rows[0][0]) if rows else None
