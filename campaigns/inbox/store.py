"""The inbox's one way to store a batch, and its pass that applies what was stored.

:class:`InboxStore` stores a batch of events in one transaction: status events unapplied
(:func:`campaigns.gateway_events.store_events_in`, their message ids returned as
``pending``), replies, opt-outs and connection states applied with the batch. Where the
transaction runs follows what :func:`storage.event_store.open_writer` gave for the
database, never its dialect:

* ``writer.statuses`` (PostgreSQL): a status-only batch is stored on the event loop over
  an async connection (one autocommit round trip, the loop serving requests while the
  server works; :attr:`InboxStore.parallel` batches at once, a connection each); other
  batches take the thread. A batch that cannot be stored even after
  one reconnect fails (503) and the next batch connects afresh.
* ``writer.nowait`` (a SQLite file): on the event loop over one held connection that never
  waits for a lock. SQLite work is CPU under the GIL, so a worker thread only adds
  hand-offs and GIL convoys (bench/webhooks.py: about 0.6x -> 0.8x of a bare endpoint's
  rate). When another writer holds the lock the batch goes to a worker thread at once
  (nothing applied on the loop), so the loop never stalls.
* otherwise, and in those two cases' fallbacks: a transaction in a worker thread.

The inbox pass (:meth:`InboxStore.apply`) applies stored events by message id the same
way: on the loop over the no-wait connection (False when locked: a later pass), else in a
thread. The times it observes (webhook lag, time to delivered and read) go to
:class:`InboxHooks` (the face's metrics).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from campaigns.gateway_events import (
    ApplyStats,
    Timing,
    apply_all_pending,
    apply_pending,
    apply_recent_pending,
    event_time,
    record_events_in,
    status_event_rows,
    store_events_in,
)
from gateway.events import Event, IncomingMessage, MessageStatus
from storage.engine import Connection, is_unavailable_error
from storage.event_store import EventWriter, Locked

_T = TypeVar("_T")


def _ignore(_name: str, _value: float) -> None:
    return None


@dataclass(frozen=True)
class InboxHooks:
    """What the inbox tells the face (its metrics); by default nothing.

    ``lag(kind, seconds)``: an event (``status_<status>`` or ``message``) committed this
    long after its own time; ``time_to(status, seconds)``: a delivery reached ``status``
    this long after it was sent; ``refused(reason, count)``: events refused.
    """

    lag: Callable[[str, float], None] = _ignore
    time_to: Callable[[str, float], None] = _ignore
    refused: Callable[[str, int], None] = _ignore


class WouldBlock(Exception):
    """A transaction on the loop found the database locked by another writer (nothing
    applied)."""


class InboxStore:
    """Stores batches and applies stored events (see the module docstring)."""

    def __init__(
        self,
        writer: EventWriter,
        *,
        opt_out_keywords: tuple[str, ...] | list[str],
        clock: Callable[[], datetime],
        hooks: InboxHooks | None = None,
    ) -> None:
        self.writer = writer
        self.engine = writer.engine
        self._keywords = tuple(opt_out_keywords)
        self._clock = clock
        self.hooks = hooks or InboxHooks()

    # ------------------------------------------------------------ the batcher's Store
    @property
    def parallel(self) -> int:
        """How many batches may be stored at once (PostgreSQL's async connections)."""
        return self.writer.parallel

    async def store(
        self,
        events: list[Event],
        deadline: float | None = None,
        on_late: Callable[[ApplyStats], None] | None = None,
    ) -> ApplyStats:
        """Store ``events``; past ``deadline`` in the thread, :class:`TimeoutError`."""
        stats = await self.on_loop(events)
        if stats is not None:
            return stats
        if self.writer.nowait is not None:
            try:
                return self._inline(events)
            except WouldBlock:
                pass  # another writer holds the database: wait for it in a thread
        if deadline is None:
            return await asyncio.to_thread(self.record, events, True)
        task = asyncio.ensure_future(asyncio.to_thread(self.record, events, True))
        try:
            return await asyncio.wait_for(asyncio.shield(task), deadline)
        except TimeoutError:
            # still waiting for a lock or a server: it may commit later (harmless, storing
            # is idempotent); its pending ids then join the inbox
            if on_late is not None:
                task.add_done_callback(lambda t: _late(t, on_late))
            raise

    async def store_nowait(self, events: list[Event]) -> ApplyStats | None:
        """Store ``events``; None when the database is still locked or away."""
        try:
            stats = await self.on_loop(events)
            if stats is not None:
                return stats
            if self.writer.nowait is not None:
                return self._inline(events)  # never waits: a lock is WouldBlock
            return await asyncio.to_thread(self.record, events, True)
        except WouldBlock:
            return None
        except Exception as exc:
            if is_unavailable_error(exc):
                return None
            raise

    async def apply(self, message_ids: list[str]) -> bool:
        """The inbox pass over ``message_ids``; False when another writer holds SQLite's
        lock (never waited for on the loop)."""
        if self.writer.nowait is not None:
            try:
                self._apply_inline(message_ids)
            except WouldBlock:
                return False
            return True
        await asyncio.to_thread(self.apply_in_thread, message_ids)
        return True

    def sweep(self) -> int:
        """Re-apply recent events still unmatched (their send was recorded late)."""
        return apply_recent_pending(self.engine, now=self._clock())

    def recover(self) -> int:
        """Apply every stored, unapplied event (a previous process's)."""
        return apply_all_pending(self.engine, now=self._clock())

    async def close(self) -> None:
        """Give the held connections back (a later use opens new ones)."""
        await self.writer.close()

    # ------------------------------------------------------------ the three places
    def record(self, events: list[Event], store_only: bool = False) -> ApplyStats:
        """``events`` in one transaction in this thread; ``store_only``: status events
        stored, not applied (their ids in ``pending``), else applied at once."""
        record = store_events_in if store_only else record_events_in
        received = self._clock()
        with self.engine.begin() as conn:
            stats = record(conn, events, opt_out_keywords=self._keywords, now=received)
        self._observe_lag(events, received, self._clock())
        self._observe_times(stats.timings)
        return stats

    def apply_in_thread(self, message_ids: list[str]) -> int:
        """The inbox pass in this thread: apply the stored events of ``message_ids``."""
        timings: list[Timing] = []
        with self.engine.begin() as conn:
            applied = apply_pending(conn, message_ids, now=self._clock(), timings=timings)
        self._observe_times(timings)
        return applied

    async def on_loop(self, events: list[Event]) -> ApplyStats | None:
        """A status-only batch over the async connection (committed on return); None
        without one, or unless all are status events."""
        inserter = self.writer.statuses
        if inserter is None:
            return None
        statuses = [e for e in events if isinstance(e, MessageStatus)]
        if len(statuses) != len(events):
            return None
        stats = ApplyStats()
        received = self._clock()
        rows = status_event_rows(statuses, received, stats)
        if rows:
            await inserter.insert(rows)
            stats.pending.extend({r["message_id"]: None for r in rows})
        self._observe_lag(list(events), received, self._clock())
        return stats

    def _inline(self, events: list[Event]) -> ApplyStats:
        """Store ``events`` on the loop in one transaction; :class:`WouldBlock` if locked."""
        now = self._clock()
        keywords = self._keywords
        stats = self._nowait(
            lambda conn: store_events_in(conn, events, opt_out_keywords=keywords, now=now)
        )
        self._observe_lag(events, now, self._clock())
        self._observe_times(stats.timings)
        return stats

    def _apply_inline(self, message_ids: list[str]) -> int:
        """The inbox pass on the loop; :class:`WouldBlock` if the DB is locked."""
        now = self._clock()
        timings: list[Timing] = []
        applied = self._nowait(
            lambda conn: apply_pending(conn, message_ids, now=now, timings=timings)
        )
        self._observe_times(timings)
        return applied

    def _nowait(self, work: Callable[[Connection], _T]) -> _T:
        assert self.writer.nowait is not None
        try:
            return self.writer.nowait.transaction(work)
        except Locked as exc:
            raise WouldBlock from exc

    # ------------------------------------------------------------ what is observed
    def _observe_times(self, timings: list[Timing]) -> None:
        """Time to delivered and to read of the status events a committed apply took."""
        for status, occurred_at, sent_at in timings:
            self.hooks.time_to(status, (occurred_at - sent_at).total_seconds())

    def _observe_lag(self, events: list[Event], received: datetime, committed: datetime) -> None:
        """The webhook lag of each status event and incoming message of a committed
        batch: from the event's own time (:func:`campaigns.gateway_events.event_time`) to
        the commit (status events stored for the inbox pass are applied a moment later)."""
        for ev in events:
            if isinstance(ev, MessageStatus):
                kind = f"status_{ev.status.value}"
            elif isinstance(ev, IncomingMessage):
                kind = "message"
            else:
                continue
            self.hooks.lag(kind, (committed - event_time(ev.at, received)).total_seconds())


def _late(task: asyncio.Future[ApplyStats], on_late: Callable[[ApplyStats], None]) -> None:
    if not task.cancelled() and task.exception() is None:
        on_late(task.result())


__all__ = ["InboxHooks", "InboxStore", "WouldBlock"]
