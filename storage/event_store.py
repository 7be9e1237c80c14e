"""The webhook event store's two dialect-specific connections, behind named operations.

- :class:`AsyncStatusInserter` (PostgreSQL): stores status-event rows over held psycopg
  :class:`~psycopg.AsyncConnection` s in autocommit mode (up to
  :data:`STATUS_CONNECTIONS` batches at once, one connection each), one
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


#: how many status batches one process stores at once on PostgreSQL (a connection each):
#: while one batch's commit waits for the server's WAL flush, the next one is sent, and
#: the server flushes their commits together (bench/webhooks.py; its hand-written
#: reference uses 4 too)
STATUS_CONNECTIONS = 4


class AsyncStatusInserter:
    """Inserts status-event rows on PostgreSQL from the event loop (module docstring).

    Up to ``connections`` inserts run at once, each over a held connection of its own
    (opened on first need, kept idle between batches).
    """

    def __init__(self, engine: Engine, connections: int = STATUS_CONNECTIONS) -> None:
        self.engine = engine  # read at each (re)connect
        self.connections = connections
        self._sql = q.pg_insert_status_events_sql(engine.dialect)
        self._idle: list[psycopg.AsyncConnection[tuple[object, ...]]] = []
        self._busy = 0

    @property
    def held(self) -> list[psycopg.AsyncConnection[tuple[object, ...]]]:
        """The open connections not in use now (the next insert takes the last)."""
        return list(self._idle)

    async def insert(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Store ``rows`` (``status_events`` columns); committed on return. At most
        :attr:`connections` calls may wait at once (the caller's limit)."""
        if self._busy >= self.connections:
            raise RuntimeError(f"more than {self.connections} status inserts at once")
        params = q.pg_status_event_columns(list(rows))
        self._busy += 1
        try:
            for attempt in (1, 2):
                fresh = not self._idle
                conn = await self._connection()
                try:
                    await conn.execute(self._sql, params)
                except psycopg.Error:
                    broken = conn.broken or conn.closed
                    await _close(conn)
                    if fresh or not broken or attempt == 2:
                        raise
                    log.warning("webhook store connection lost; reconnecting")
                    continue
                self._idle.append(conn)
                return
        finally:
            self._busy -= 1

    async def _connection(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return await psycopg.AsyncConnection.connect(_conninfo(self.engine), autocommit=True)

    async def close(self) -> None:
        """Close the held connections (a later batch opens new ones)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await _close(conn)


async def _close(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
    if not conn.closed:
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

    @property
    def parallel(self) -> int:
        """How many batches may be stored at once through this writer."""
        return self.statuses.connections if self.statuses is not None else 1

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


__all__ = [
    "STATUS_CONNECTIONS",
    "AsyncStatusInserter",
    "EventWriter",
    "Locked",
    "NoWaitConnection",
    "open_writer",
]
