"""PostgreSQL: a status-only webhook batch stored over one held async connection.

The batcher's thread path costs a thread hand-off per batch (and a GIL convoy with the
event loop) plus BEGIN / INSERT / COMMIT. Here a batch holding only status events is
stored on the event loop with psycopg's :class:`~psycopg.AsyncConnection` in autocommit
mode: one ``INSERT ... SELECT * FROM unnest(...) ON CONFLICT DO NOTHING`` (the sync
path's SQL), which commits on its own, so one round trip per batch and the loop serves
requests while the server works. Batches with replies, opt-outs or connection states
return None and take the thread path. A broken connection (server restart) is
reconnected and the batch retried once (the insert is idempotent); if that fails the
batch fails (503) and the next batch connects afresh.
"""

from __future__ import annotations

import contextlib
import logging

import psycopg
from sqlalchemy import Engine

from campaigns.tracking import ApplyStats, status_event_rows
from gatecast.web.context import AppContext
from gateway.events import Event, MessageStatus
from storage.engine import is_postgres
from storage.queries import events as q

log = logging.getLogger("gatecast.webhook")


def _conninfo(engine: Engine) -> str:
    """libpq connection URI of ``engine`` (the password included: never log it)."""
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


class PgStatusStore:
    """Stores status-only batches on the event loop (see the module docstring)."""

    def __init__(self, ctx: AppContext) -> None:
        self._ctx = ctx
        self._sql = q.pg_insert_status_events_sql(ctx.engine.dialect)
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None

    async def __call__(self, events: list[Event]) -> ApplyStats | None:
        """Store ``events`` (committed on return); None unless all are status events."""
        statuses = [e for e in events if isinstance(e, MessageStatus)]
        if len(statuses) != len(events):
            return None
        stats = ApplyStats()
        rows = status_event_rows(statuses, self._ctx.clock(), stats)
        if rows:
            await self._insert(q.pg_status_event_columns(rows))
            stats.pending.extend({r["message_id"]: None for r in rows})
        return stats

    async def _insert(self, params: tuple[list[object], ...]) -> None:
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
                _conninfo(self._ctx.engine), autocommit=True
            )
        return self._conn

    async def close(self) -> None:
        """Close the held connection (a later batch opens a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            with contextlib.suppress(psycopg.Error):  # closing a dead connection
                await conn.close()


def make_pg_store(ctx: AppContext) -> PgStatusStore | None:
    """A :class:`PgStatusStore` for a PostgreSQL database, else None."""
    return PgStatusStore(ctx) if is_postgres(ctx.engine) else None


__all__ = ["PgStatusStore", "make_pg_store"]
