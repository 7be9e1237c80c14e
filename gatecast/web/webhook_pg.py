"""PostgreSQL: a status-only webhook batch stored on the event loop.

The batcher's thread path costs a thread hand-off per batch (and a GIL convoy with the
event loop) plus BEGIN / INSERT / COMMIT. Here a batch holding only status events is
stored by :class:`storage.event_store.AsyncStatusInserter` (one autocommit round trip,
the loop serving requests while the server works). Batches with replies, opt-outs or
connection states return None and take the thread path. A batch that cannot be stored
even after one reconnect fails (503) and the next batch connects afresh.
"""

from __future__ import annotations

from campaigns.gateway_events import ApplyStats, status_event_rows
from gatecast.web.context import AppContext
from gatecast.web.webhook_appliers import observe_lag
from gateway.events import Event, MessageStatus
from storage.engine import is_postgres
from storage.event_store import AsyncStatusInserter


class PgStatusStore:
    """Stores status-only batches on the event loop (see the module docstring)."""

    def __init__(self, ctx: AppContext) -> None:
        self._ctx = ctx
        self.inserter = AsyncStatusInserter(ctx.engine)

    async def __call__(self, events: list[Event]) -> ApplyStats | None:
        """Store ``events`` (committed on return); None unless all are status events."""
        statuses = [e for e in events if isinstance(e, MessageStatus)]
        if len(statuses) != len(events):
            return None
        stats = ApplyStats()
        received = self._ctx.clock()
        rows = status_event_rows(statuses, received, stats)
        if rows:
            await self.inserter.insert(rows)
            stats.pending.extend({r["message_id"]: None for r in rows})
        observe_lag(list(events), received, self._ctx.clock())
        return stats

    async def close(self) -> None:
        """Close the held connection (a later batch opens a new one)."""
        await self.inserter.close()


def make_pg_store(ctx: AppContext) -> PgStatusStore | None:
    """A :class:`PgStatusStore` for a PostgreSQL database, else None."""
    return PgStatusStore(ctx) if is_postgres(ctx.engine) else None


__all__ = ["PgStatusStore", "make_pg_store"]
