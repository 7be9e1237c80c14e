"""The webhook event store's two dialect-specific connections, behind named operations.

- :class:`AsyncStatusInserter` (PostgreSQL): stores status-event rows over one held
  psycopg :class:`~psycopg.AsyncConnection` in autocommit mode, one
  ``INSERT ... SELECT * FROM unnest(...) ON CONFLICT DO NOTHING`` per batch (one round
  trip, on the event loop). A broken connection (server restart) is reconnected and the
  batch retried once (the insert is idempotent).
- :class:`NoWaitConnection` (SQLite file): one held connection whose busy timeout is 0,
  so a transaction that would wait for another writer's lock raises :class:`Locked` at
  once, with nothing written.

:func:`open_writer` chooses for the engine's dialect (:class:`EventWriter`); the inbox
(``campaigns.inbox``) decides when to use them; the SQL and the driver live here.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import OperationalError

from storage.engine import SQLITE_BUSY_TIMEOUT_MS, is_lock_error, is_postgres, is_sqlite_file
from storage.queries import events as q

log = logging.getLogger("gatecast.webhook")

_T = TypeVar("_T")


class Locked(Exception):
    """The database is locked by another writer; nothing was written."""


def _conninfo(engine: Engine) -> str:
    """libpq connection URI of ``engine`` (the password included: never log it)."""
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


class AsyncStatusInserter:
    """Inserts status-event rows on PostgreSQL from the event loop (module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine  # read at each (re)connect
        self._sql = q.pg_insert_status_events_sql(engine.dialect)
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None

    async def insert(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Store ``rows`` (``status_events`` columns); committed on return."""
        params = q.pg_status_event_columns(list(rows))
        for attempt in (1, 2):
            fresh = self._conn is None or self._conn.closed
            conn = await self._connection()
            try:
                await conn.execute(self._sql, params)
                return
            except psycopg.Error:
                broken = conn.broken or conn.closed
                await self.close()
                if fresh or not broken or attempt == 2:
                    raise
                log.warning("webhook store connection lost; reconnecting")

    async def _connection(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        if self._conn is None or self._conn.closed:
            self._conn = await psycopg.AsyncConnection.connect(
                _conninfo(self.engine), autocommit=True
            )
        return self._conn

    async def close(self) -> None:
        """Close the held connection (a later batch opens a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            with contextlib.suppress(psycopg.Error):  # closing a dead connection
                await conn.close()


class NoWaitConnection:
    """One held SQLite connection whose transactions never wait for a lock."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None

    def transaction(self, work: Callable[[Connection], _T]) -> _T:
        """Run ``work`` in one transaction; :class:`Locked` when another writer holds it."""
        conn = self._connection()
        try:
            with conn.begin():
                return work(conn)
        except OperationalError as exc:
            if is_lock_error(exc):
                raise Locked from exc
            self.close()
            raise

    def _connection(self) -> Connection:
        if self._conn is None:
            conn = self._engine.connect()
            raw = conn.connection.dbapi_connection
            assert raw is not None
            raw.execute("PRAGMA busy_timeout=0")  # not through SQLAlchemy: no autobegin
            self._conn = conn
        return self._conn

    def close(self) -> None:
        """Give the held connection back (with the usual busy timeout)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            raw = conn.connection.dbapi_connection
            if raw is not None:
                raw.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            conn.close()


class EventWriter:
    """The connections the inbox writes events through, beside plain transactions.

    ``nowait``: a SQLite file's connection that never waits for a lock (transactions on
    the event loop); ``statuses``: PostgreSQL's async inserter of status-event rows. At
    most one is set; neither for an in-memory SQLite database (a worker thread only).
    Made by :func:`open_writer`; both connect on first use.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        nowait: NoWaitConnection | None = None,
        statuses: AsyncStatusInserter | None = None,
    ) -> None:
        self.engine = engine
        self.nowait = nowait
        self.statuses = statuses

    async def close(self) -> None:
        """Give back what is held (a later use connects again)."""
        if self.nowait is not None:
            self.nowait.close()
        if self.statuses is not None:
            await self.statuses.close()


def open_writer(engine: Engine) -> EventWriter:
    """The :class:`EventWriter` for ``engine``'s dialect."""
    if is_postgres(engine):
        return EventWriter(engine, statuses=AsyncStatusInserter(engine))
    if is_sqlite_file(engine):
        return EventWriter(engine, nowait=NoWaitConnection(engine))
    return EventWriter(engine)


__all__ = ["AsyncStatusInserter", "EventWriter", "Locked", "NoWaitConnection", "open_writer"]
