"""The inbox's batcher: many requests, one transaction per batch, and the inbox pass.

Requests queue their events; the batcher group-commits what is queued (at most
:data:`MAX_BATCH_EVENTS` events) and answers each request once its batch committed; up to
the store's ``parallel`` batches are stored at once (PostgreSQL: one commit waits for the
server while the next batch is sent). With the inbox, a batch only stores status events;
their application to deliveries runs in passes of a few hundred
(:data:`APPLY_LATER_EVENTS` ids or :data:`APPLY_LATER_SECONDS`), in a task of its own: a
pass never holds up a batch, so it never delays an acknowledgement.
After activity, recent events still unmatched are re-applied a few times once idle.
With a journal, a batch the database cannot take (locked, full or away, or no answer
within :data:`JOURNAL_AFTER_SECONDS`) is appended to it and acknowledged; until the journal
is drained, later batches follow it there (order kept), and a drain is tried every
:data:`DRAIN_RETRY_SECONDS` and at start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from campaigns.gateway_events import ApplyStats
from campaigns.inbox.guard import NotStored
from campaigns.inbox.journal import EventJournal
from gateway.events import Event
from storage.engine import is_unavailable_error, log_failure

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
#: with a journal: how long a batch may wait for the database before it is journalled
#: (a SQLite writer's lock is normally held for milliseconds; gateways time out in seconds)
JOURNAL_AFTER_SECONDS = 1.0
#: how often a drain of the journal into the database is tried while it holds events
DRAIN_RETRY_SECONDS = 1.0

_Item = tuple[list[Event], "asyncio.Future[None]"]


class Store(Protocol):
    """Where a batch goes: :class:`campaigns.inbox.store.InboxStore` (one way to store)."""

    @property
    def parallel(self) -> int:
        """How many batches may be stored at once (each its own transaction)."""
        ...

    async def store(
        self,
        events: list[Event],
        deadline: float | None = None,
        on_late: Callable[[ApplyStats], None] | None = None,
    ) -> ApplyStats | None:
        """Store ``events`` (status events unapplied: their ids in ``pending``); past
        ``deadline`` :class:`TimeoutError`, and ``on_late`` gets the stats if it commits."""
        ...

    async def store_nowait(self, events: list[Event]) -> ApplyStats | None:
        """Store ``events``; None while the database is locked or away (a drain's chunk)."""
        ...

    async def apply(self, message_ids: list[str]) -> bool:
        """The inbox pass over ``message_ids``; False when the database is locked."""
        ...

    def sweep(self) -> int:
        """Re-apply recent unmatched events (in a worker thread); how many applied."""
        ...

    def recover(self) -> int:
        """Apply what a previous process stored and left (in a worker thread at start)."""
        ...


@dataclass(frozen=True)
class BatcherConfig:
    """The batcher's sizes and times (the module's constants by default).

    ``journal_after`` None: :data:`JOURNAL_AFTER_SECONDS` when the batcher is made.
    """

    max_events: int = MAX_BATCH_EVENTS
    max_wait: float = MAX_WAIT_SECONDS
    sweep_after: float = SWEEP_AFTER_IDLE_SECONDS
    later_events: int = APPLY_LATER_EVENTS
    later_seconds: float = APPLY_LATER_SECONDS
    journal_after: float | None = None
    drain_every: float = DRAIN_RETRY_SECONDS


class EventBatcher:
    """Group-commits webhook events: many requests, one transaction per batch.

    ``store`` (:class:`Store`) stores status events unapplied and returns their message
    ids in :attr:`ApplyStats.pending`; requests are answered once that commits, and the
    batcher hands the ids to ``store.apply`` (the inbox pass, its own task beside the
    batches) every :data:`APPLY_LATER_EVENTS` ids or :data:`APPLY_LATER_SECONDS`, and on
    stop. A failed pass keeps its ids for the next one. ``store.recover`` runs once in a
    worker thread at start (events stored but left unapplied by a previous process), and
    ``store.sweep`` after activity once idle. ``journal``: see the module docstring; the
    healthy path never touches its file.
    """

    def __init__(
        self,
        store: Store,
        config: BatcherConfig | None = None,
        journal: EventJournal | None = None,
    ) -> None:
        config = config or BatcherConfig()
        self._store = store
        self._later_events = config.later_events
        self._later_seconds = config.later_seconds
        self._later: dict[str, None] = {}  # message ids stored, not yet applied (ordered)
        self._later_timer: asyncio.TimerHandle | None = None
        self._recovering: asyncio.Task[None] | None = None
        self._max_events = config.max_events
        self._max_wait = config.max_wait
        self._sweep_after = config.sweep_after
        self._sweeps_left = 0
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._sweeping: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[_Item | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._slots: asyncio.Semaphore | None = None  # batches being stored at once
        self._storing: set[asyncio.Task[None]] = set()
        self._applying: asyncio.Task[None] | None = None  # the inbox pass, beside storing
        self._journal = journal
        journal_after = config.journal_after
        self._journal_after = JOURNAL_AFTER_SECONDS if journal_after is None else journal_after
        self._drain_every = config.drain_every
        self._journalled = False  # the journal holds events: batches go there too
        self._drain_timer: asyncio.TimerHandle | None = None
        self._draining: asyncio.Task[None] | None = None
        self.batches = 0
        self.events = 0
        self.journalled_events = 0

    @property
    def max_events(self) -> int:
        """The most events one batch (one transaction) holds."""
        return self._max_events

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Start the worker task (on the running loop)."""
        self._queue = asyncio.Queue()
        self._slots = asyncio.Semaphore(max(1, self._store.parallel))
        self._task = asyncio.create_task(self._run(), name="gatecast-webhook-batcher")
        self._recovering = asyncio.create_task(self._run_recover())
        if self._journal is not None and self._journal:
            self._journalled = True
            self._draining = asyncio.create_task(self._drain())

    @property
    def journalled(self) -> bool:
        """True while the journal holds events not yet stored in the database."""
        return self._journalled

    @property
    def unapplied(self) -> int:
        """Message ids stored by this batcher whose events are not applied yet."""
        return len(self._later)

    async def _run_recover(self) -> None:
        try:
            applied = await asyncio.to_thread(self._store.recover)
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
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None
        draining = self._draining
        if draining is None and self._journalled:
            draining = asyncio.create_task(self._drain())  # a last try
        if draining is not None:
            try:  # what is left stays in the journal for the next start
                await asyncio.wait_for(draining, self._drain_every * 5)
            except TimeoutError:
                log.warning("draining the webhook journal did not finish; left for next start")
            self._draining = None
            await self._apply_stored()
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
            batch.append(item)
            count += len(item[0])
        return batch, False

    async def _apply_batch(
        self, events: list[Event], deadline: float | None = None
    ) -> ApplyStats | None:
        """Store ``events``; past ``deadline`` :class:`TimeoutError` (it may commit later:
        harmless, storing is idempotent; its pending ids then join the inbox)."""
        return await self._store.store(events, deadline, self._pending_later)

    async def _store_or_journal(self, events: list[Event]) -> ApplyStats:
        """Store ``events``, or journal them when the database cannot take them now.

        Returns the stats of a stored batch, or empty stats once journalled; raises what
        storing raised when the failure is not the database's absence (or no journal).
        """
        assert self._journal is not None
        if self._journalled:  # keep the order: behind what the journal holds
            self._to_journal(events)
            return ApplyStats()
        try:
            stats = await self._apply_batch(events, self._journal_after)
            return stats if stats is not None else ApplyStats()
        except TimeoutError:
            log.warning("the database did not answer in %.1f s", self._journal_after)
        except Exception as exc:
            if not is_unavailable_error(exc):
                raise
            log.warning("the database cannot store webhook events now: %s", exc)
        self._to_journal(events)
        return ApplyStats()

    def _to_journal(self, events: list[Event]) -> None:
        """Append to the journal (fsynced on the loop: no drain truncates meanwhile).

        Raises :class:`NotStored` when the file cannot take them (full disk, no rights).
        """
        assert self._journal is not None
        try:
            self._journal.append(events)
        except OSError as exc:
            log.error(
                "the webhook journal %s cannot take %d event(s) either (%s): refused",
                self._journal.file.path,
                len(events),
                exc.strerror or exc,
            )
            if self._journal:  # whole lines may have landed before the error
                self._journalled = True
                self._arm_drain()
            raise NotStored("neither the database nor the journal can store events") from exc
        self.journalled_events += len(events)
        if not self._journalled:
            log.warning(
                "webhook events go to the journal %s until the database answers",
                self._journal.file.path,
            )
        self._journalled = True
        self._arm_drain()

    def _pending_later(self, stats: ApplyStats) -> None:
        """:meth:`_note_pending` outside the batcher's task: start the pass when due."""
        if self._note_pending(stats) and self.running:
            self._start_pass()

    def _arm_drain(self) -> None:
        if self._drain_timer is None and self._draining is None and self.running:
            loop = asyncio.get_running_loop()
            self._drain_timer = loop.call_later(self._drain_every, self._drain_due)

    def _drain_due(self) -> None:
        self._drain_timer = None
        if self._draining is None and self.running:
            self._draining = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        """Store the journal's events, oldest first, then drop them from the file."""
        assert self._journal is not None
        step = self._max_events
        try:
            while True:
                entries = self._journal.entries()
                lines = [line for line, _ in entries]
                events = [event for _, event in entries]
                if not events:
                    self._journal.clear()  # a torn last line, if any
                    self._journalled = False
                    log.info("the webhook journal is drained")
                    return
                done = 0
                while done < len(events):
                    chunk = events[done : done + step]
                    try:
                        stats = await self._drain_chunk(chunk)
                    except Exception:
                        if len(chunk) > 1:
                            step = 1  # find the event the database refuses
                            continue
                        log.exception("dropping a journalled event the database refuses")
                        done += 1
                        continue
                    if stats is None:  # still locked or away: retry later
                        self._journal.drop(lines[:done])
                        return
                    done += len(chunk)
                    self._pending_later(stats)
                    await asyncio.sleep(0)  # an inline chunk never yields: let requests in
                self._journal.drop(lines)
                log.info("stored %d journalled webhook event(s)", done)
        except Exception as exc:
            log_failure(log, "draining the webhook journal failed; will retry", exc)
        finally:
            self._draining = None
            if self._journalled:
                self._arm_drain()

    async def _drain_chunk(self, events: list[Event]) -> ApplyStats | None:
        """Store ``events``; None when the database is still locked or away."""
        return await self._store.store_nowait(events)

    async def _commit(self, batch: list[_Item]) -> None:
        events = [e for evs, _ in batch for e in evs]
        try:
            if self._journal is not None:
                stats: ApplyStats | None = await self._store_or_journal(events)
            else:
                stats = await self._apply_batch(events)
        except NotStored as exc:  # logged; each request of the batch is refused (503)
            for _, future in batch:
                if not future.done():
                    future.set_exception(NotStored(str(exc)))
            return
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
        if isinstance(stats, ApplyStats) and self._note_pending(stats):
            self._start_pass()

    def _note_pending(self, stats: ApplyStats) -> bool:
        """Queue ``stats.pending`` for the inbox pass; True when the pass is due now."""
        if not stats.pending:
            return False
        self._later.update(dict.fromkeys(stats.pending))
        if len(self._later) >= self._later_events:
            return True
        if self._later_timer is None:
            loop = asyncio.get_running_loop()
            self._later_timer = loop.call_later(self._later_seconds, self._later_due)
        return False

    def _later_due(self) -> None:
        self._later_timer = None
        if self.running:
            self._start_pass()

    def _start_pass(self) -> None:
        """Run the inbox pass in a task of its own, beside the storing of batches (a pass
        never delays a batch's commit, hence its 200); one pass at a time, and another
        right after it when enough ids waited meanwhile."""
        if self._applying is None:
            self._applying = asyncio.create_task(self._pass())

    async def _pass(self) -> None:
        try:
            done = await self._apply_stored()
        finally:
            self._applying = None
        if not (done and self.running and self._later):
            return  # nothing left, or a retry is timed
        if len(self._later) >= self._later_events:
            self._start_pass()
        elif self._later_timer is None:  # stored during the pass; its timer found it busy
            self._retry_stored(self._later_seconds)

    async def _apply_stored(self) -> bool:
        """Apply the stored events of :attr:`_later` (the inbox pass); keep them on failure
        (False: a retry is timed)."""
        if self._later_timer is not None:
            self._later_timer.cancel()
            self._later_timer = None
        if not self._later:
            return True
        ids = list(self._later)
        step = max(self._later_events, 1)
        try:
            # in slices, yielding between them: after a journal's drain thousands may wait,
            # and an inline slice holds the loop (requests time out at the gateway)
            for start in range(0, len(ids), step):
                await asyncio.sleep(0)
                chunk = ids[start : start + step]
                if not await self._apply_stored_slice(chunk):
                    self._retry_stored(DRAIN_RETRY_SECONDS)  # the rest stays stored
                    return False
                for message_id in chunk:
                    self._later.pop(message_id, None)
        except Exception as exc:
            log_failure(log, f"applying {len(ids)} stored webhook event(s) failed; will retry", exc)
            self._retry_stored(SWEEP_AFTER_IDLE_SECONDS)
            return False
        return True

    def _retry_stored(self, after: float) -> None:
        if self.running and self._later_timer is None:
            loop = asyncio.get_running_loop()
            self._later_timer = loop.call_later(after, self._later_due)

    async def _apply_stored_slice(self, ids: list[str]) -> bool:
        """Apply ``ids``; False when another writer holds SQLite's lock.

        Never waits for that lock: this runs in the batcher's task, and while it waited no
        batch could be stored or journalled (the gateway's requests timed out). The events
        are stored; they are applied on a later pass.
        """
        return await self._store.apply(ids)

    def _arm_sweep(self) -> None:
        """After activity: sweep once the batcher has been idle for ``sweep_after``."""
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
        self._sweeps_left -= 1
        try:
            applied = await asyncio.to_thread(self._store.sweep)
            if applied:
                log.info("applied %d webhook event(s) whose send was recorded late", applied)
        except Exception as exc:
            log_failure(log, "re-applying unmatched webhook events failed", exc)
        finally:
            self._sweeping = None
            if self._sweeps_left > 0 and self._sweep_timer is None and self.running:
                self._schedule_sweep()

    async def _run(self) -> None:
        """Collect and store batches: up to :attr:`Store.parallel` at once, a batch
        collected once a slot is free (what queued meanwhile joins it)."""
        assert self._queue is not None and self._slots is not None
        stopping = False
        while not stopping:
            first = await self._queue.get()
            if first is None:
                break
            await self._slots.acquire()
            batch, stopping = await self._collect(first)
            task = asyncio.create_task(self._commit_in_slot(batch))
            self._storing.add(task)
            task.add_done_callback(self._storing.discard)
        if self._storing:
            await asyncio.gather(*self._storing)
        # drain whatever raced in behind the stop signal
        leftover = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None:
                leftover.append(item)
        if leftover:
            await self._commit(leftover)
        if self._applying is not None:
            await self._applying
        await self._apply_stored()

    async def _commit_in_slot(self, batch: list[_Item]) -> None:
        assert self._slots is not None
        try:
            await self._commit(batch)
        except Exception:  # never a request left waiting: refused (503), not hung
            log.exception("storing a batch of webhook events failed")
            for _, future in batch:
                if not future.done():
                    future.set_exception(NotStored("the events could not be stored"))
        finally:
            self._slots.release()


__all__ = [
    "APPLY_LATER_EVENTS",
    "APPLY_LATER_SECONDS",
    "DRAIN_RETRY_SECONDS",
    "JOURNAL_AFTER_SECONDS",
    "MAX_BATCH_EVENTS",
    "MAX_WAIT_SECONDS",
    "SWEEPS_AFTER_ACTIVITY",
    "SWEEP_AFTER_IDLE_SECONDS",
    "BatcherConfig",
    "EventBatcher",
    "Store",
]
