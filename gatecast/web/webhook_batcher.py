"""The webhook batcher: many requests, one transaction per batch, and the inbox pass.

Requests queue their events; the batcher group-commits what is queued (at most
:data:`MAX_BATCH_EVENTS` events) and answers each request once its batch committed. With
the inbox, a batch only stores status events; their application to deliveries runs in
passes of a few hundred (:data:`APPLY_LATER_EVENTS` ids or :data:`APPLY_LATER_SECONDS`).
After activity, recent events still unmatched are re-applied a few times once idle.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from campaigns.gateway_events import ApplyStats
from gateway.events import Event

log = logging.getLogger("gatecast.webhook")

#: events applied in one transaction at most
MAX_BATCH_EVENTS = 500
#: how long the batcher waits for more events before committing what it has. 0: commit
#: what is queued at once; the next batch forms while this one commits (group commit).
#: Waiting idles every batch: gateways post one event per request and wait for the 200,
#: so once every open connection is queued no more can come (bench/webhooks.py: 20 ms
#: halved the throughput and doubled the median acknowledgement).
MAX_WAIT_SECONDS = 0.0
#: the inbox: status events are acknowledged once stored; their application to deliveries
#: runs when this many message ids wait, or this long after the first of them was stored
#: (applying a few hundred at once costs about half as much per event as applying each
#: small batch before its acknowledgement: bench/webhooks.py)
APPLY_LATER_EVENTS = 256
APPLY_LATER_SECONDS = 0.05
#: idle time after which the batcher re-applies recent unmatched events (a few times)
SWEEP_AFTER_IDLE_SECONDS = 2.0
SWEEPS_AFTER_ACTIVITY = 3

_Item = tuple[list[Event], "asyncio.Future[None]"]


class _ApplyNow:
    """Queued by the apply-later timer: apply the stored, unapplied events now."""


_APPLY_NOW = _ApplyNow()


class WouldBlock(Exception):
    """An inline applier found the database locked by another writer (nothing applied)."""


class EventBatcher:
    """Group-commits webhook events: many requests, one transaction per batch.

    ``apply`` runs in a worker thread. ``store``, when given, is awaited first on the event
    loop (PostgreSQL's async connection) and returns None for a batch it does not take.
    ``inline``, when given, is tried next on the event loop itself and must raise
    :class:`WouldBlock` rather than wait for a lock; then the batch goes to ``apply``.

    With ``apply_later`` (the inbox), ``apply`` only stores status events and returns their
    message ids in :attr:`ApplyStats.pending`; requests are answered once that commits, and
    the batcher hands the ids to ``apply_later`` (``inline_later`` first, like ``inline``)
    every :data:`APPLY_LATER_EVENTS` ids or :data:`APPLY_LATER_SECONDS`, between batches,
    and on stop. A failed pass keeps its ids for the next one. ``recover`` runs once in a
    worker thread at start (events stored but left unapplied by a previous process).
    """

    def __init__(
        self,
        apply: Callable[[list[Event]], ApplyStats],
        *,
        inline: Callable[[list[Event]], ApplyStats] | None = None,
        store: Callable[[list[Event]], Awaitable[ApplyStats | None]] | None = None,
        max_events: int = MAX_BATCH_EVENTS,
        max_wait: float = MAX_WAIT_SECONDS,
        sweep: Callable[[], int] | None = None,
        sweep_after: float = SWEEP_AFTER_IDLE_SECONDS,
        apply_later: Callable[[list[str]], int] | None = None,
        inline_later: Callable[[list[str]], int] | None = None,
        later_events: int = APPLY_LATER_EVENTS,
        later_seconds: float = APPLY_LATER_SECONDS,
        recover: Callable[[], int] | None = None,
    ) -> None:
        self._apply = apply
        self._inline = inline
        self._store = store
        self._apply_later = apply_later
        self._inline_later = inline_later
        self._later_events = later_events
        self._later_seconds = later_seconds
        self._later: dict[str, None] = {}  # message ids stored, not yet applied (ordered)
        self._later_timer: asyncio.TimerHandle | None = None
        self._recover = recover
        self._recovering: asyncio.Task[None] | None = None
        self._max_events = max_events
        self._max_wait = max_wait
        self._sweep = sweep
        self._sweep_after = sweep_after
        self._sweeps_left = 0
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._sweeping: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[_Item | _ApplyNow | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.batches = 0
        self.events = 0

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Start the worker task (on the running loop)."""
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run(), name="gatecast-webhook-batcher")
        if self._recover is not None:
            self._recovering = asyncio.create_task(self._run_recover())

    @property
    def unapplied(self) -> int:
        """Message ids stored by this batcher whose events are not applied yet."""
        return len(self._later)

    async def _run_recover(self) -> None:
        assert self._recover is not None
        try:
            applied = await asyncio.to_thread(self._recover)
            if applied:
                log.info("applied %d stored webhook event(s) left unapplied", applied)
        except Exception:
            log.exception("applying stored webhook events at start failed")

    async def stop(self) -> None:
        """Apply what is queued, then stop the worker."""
        if self._queue is None or self._task is None:
            return
        await self._queue.put(None)
        await self._task
        self._task = None
        if self._later_timer is not None:
            self._later_timer.cancel()
            self._later_timer = None
        if self._recovering is not None:
            await self._recovering
            self._recovering = None
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()
            self._sweep_timer = None
        if self._sweeping is not None:
            await self._sweeping

    async def submit(self, events: list[Event]) -> None:
        """Queue ``events`` and wait until the batch holding them has committed."""
        if not self.running or self._queue is None:
            raise RuntimeError("webhook batcher is not running")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self._queue.put((events, future))
        await future

    async def _collect(self, first: _Item) -> tuple[list[_Item], bool]:
        assert self._queue is not None
        batch = [first]
        count = len(first[0])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._max_wait
        while count < self._max_events:
            try:
                item = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    item = await asyncio.wait_for(self._queue.get(), remaining)
                except TimeoutError:
                    break
            if item is None:
                return batch, True
            if isinstance(item, _ApplyNow):
                continue  # due anyway: the pass runs right after this batch
            batch.append(item)
            count += len(item[0])
        return batch, False

    async def _apply_batch(self, events: list[Event]) -> ApplyStats | None:
        if self._store is not None:
            stats = await self._store(events)
            if stats is not None:
                return stats
        if self._inline is not None:
            try:
                return self._inline(events)
            except WouldBlock:
                pass  # another writer holds the database: wait for it in a thread
        return await asyncio.to_thread(self._apply, events)

    async def _commit(self, batch: list[_Item]) -> None:
        events = [e for evs, _ in batch for e in evs]
        try:
            stats = await self._apply_batch(events)
        except Exception:
            if len(batch) == 1:
                log.exception("applying %d webhook event(s) failed", len(events))
                batch[0][1].set_exception(RuntimeError("could not apply the events"))
                return
            # one bad request must not fail the others: apply each on its own
            for item in batch:
                await self._commit([item])
            return
        self.batches += 1
        self.events += len(events)
        self._arm_sweep()
        for _, future in batch:
            if not future.done():
                future.set_result(None)
        if self._apply_later is not None and isinstance(stats, ApplyStats) and stats.pending:
            self._later.update(dict.fromkeys(stats.pending))
            if len(self._later) >= self._later_events:
                await self._apply_stored()
            elif self._later_timer is None:
                loop = asyncio.get_running_loop()
                self._later_timer = loop.call_later(self._later_seconds, self._later_due)

    def _later_due(self) -> None:
        self._later_timer = None
        if self._queue is not None and self.running:
            self._queue.put_nowait(_APPLY_NOW)

    async def _apply_stored(self) -> None:
        """Apply the stored events of :attr:`_later` (the inbox pass); keep them on failure."""
        if self._later_timer is not None:
            self._later_timer.cancel()
            self._later_timer = None
        if not self._later or self._apply_later is None:
            return
        ids = list(self._later)
        try:
            if self._inline_later is not None:
                try:
                    self._inline_later(ids)
                    self._later.clear()
                    return
                except WouldBlock:
                    pass  # another writer holds the database: wait for it in a thread
            await asyncio.to_thread(self._apply_later, ids)
            self._later.clear()
        except Exception:
            log.exception("applying %d stored webhook event(s) failed; will retry", len(ids))
            if self.running:
                loop = asyncio.get_running_loop()
                self._later_timer = loop.call_later(SWEEP_AFTER_IDLE_SECONDS, self._later_due)

    def _arm_sweep(self) -> None:
        """After activity: sweep once the batcher has been idle for ``sweep_after``."""
        if self._sweep is None:
            return
        self._sweeps_left = SWEEPS_AFTER_ACTIVITY
        self._schedule_sweep()

    def _schedule_sweep(self) -> None:
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()  # a timer handle, not a task: cheap per batch
        loop = asyncio.get_running_loop()
        self._sweep_timer = loop.call_later(self._sweep_after, self._sweep_due)

    def _sweep_due(self) -> None:
        self._sweep_timer = None
        if self._sweeps_left > 0 and self._sweeping is None and self.running:
            self._sweeping = asyncio.create_task(self._run_sweep())

    async def _run_sweep(self) -> None:
        assert self._sweep is not None
        self._sweeps_left -= 1
        try:
            applied = await asyncio.to_thread(self._sweep)
            if applied:
                log.info("applied %d webhook event(s) whose send was recorded late", applied)
        except Exception:
            log.exception("re-applying unmatched webhook events failed")
        finally:
            self._sweeping = None
            if self._sweeps_left > 0 and self._sweep_timer is None and self.running:
                self._schedule_sweep()

    async def _run(self) -> None:
        assert self._queue is not None
        stopping = False
        while not stopping:
            first = await self._queue.get()
            if first is None:
                break
            if isinstance(first, _ApplyNow):
                await self._apply_stored()
                continue
            batch, stopping = await self._collect(first)
            await self._commit(batch)
        # drain whatever raced in behind the stop signal
        leftover = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None and not isinstance(item, _ApplyNow):
                leftover.append(item)
        if leftover:
            await self._commit(leftover)
        await self._apply_stored()


__all__ = [
    "APPLY_LATER_EVENTS",
    "APPLY_LATER_SECONDS",
    "MAX_BATCH_EVENTS",
    "MAX_WAIT_SECONDS",
    "SWEEPS_AFTER_ACTIVITY",
    "SWEEP_AFTER_IDLE_SECONDS",
    "EventBatcher",
    "WouldBlock",
]
