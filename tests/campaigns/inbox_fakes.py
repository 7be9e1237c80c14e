"""A batcher over plain functions: the batcher's tests fake the database with them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from campaigns.gateway_events import ApplyStats
from campaigns.inbox.batcher import BatcherConfig, EventBatcher
from campaigns.inbox.journal import EventJournal
from campaigns.inbox.store import WouldBlock
from gateway.events import Event
from storage.engine import is_unavailable_error

_CONFIG = set(BatcherConfig.__dataclass_fields__)


class CallableStore:
    """The batcher's :class:`campaigns.inbox.batcher.Store` over functions, tried in the
    order :class:`campaigns.inbox.store.InboxStore` tries its places: ``on_loop`` (None:
    not taken), ``inline`` (:class:`WouldBlock`: locked), then ``apply`` in a thread;
    the pass: ``inline_later``, else ``apply_later`` in a thread (none: nothing to do)."""

    def __init__(
        self,
        apply: Callable[[list[Event]], ApplyStats],
        *,
        inline: Callable[[list[Event]], ApplyStats] | None = None,
        on_loop: Callable[[list[Event]], Awaitable[ApplyStats | None]] | None = None,
        apply_later: Callable[[list[str]], int] | None = None,
        inline_later: Callable[[list[str]], int] | None = None,
        sweep: Callable[[], int] | None = None,
        recover: Callable[[], int] | None = None,
        parallel: int = 1,
    ) -> None:
        self.parallel = parallel
        self._apply = apply
        self._inline = inline
        self._on_loop = on_loop
        self._apply_later = apply_later
        self._inline_later = inline_later
        self._sweep = sweep
        self._recover = recover

    async def store(
        self,
        events: list[Event],
        deadline: float | None = None,
        on_late: Callable[[ApplyStats], None] | None = None,
    ) -> ApplyStats | None:
        if self._on_loop is not None:
            stats = await self._on_loop(events)
            if stats is not None:
                return stats
        if self._inline is not None:
            try:
                return self._inline(events)
            except WouldBlock:
                pass
        if deadline is None:
            return await asyncio.to_thread(self._apply, events)
        task = asyncio.ensure_future(asyncio.to_thread(self._apply, events))
        try:
            return await asyncio.wait_for(asyncio.shield(task), deadline)
        except TimeoutError:
            if on_late is not None:
                task.add_done_callback(
                    lambda t: (
                        on_late(t.result()) if not t.cancelled() and not t.exception() else None
                    )
                )
            raise

    async def store_nowait(self, events: list[Event]) -> ApplyStats | None:
        try:
            if self._on_loop is not None:
                stats = await self._on_loop(events)
                if stats is not None:
                    return stats
            if self._inline is not None:
                return self._inline(events)
            return await asyncio.to_thread(self._apply, events) or ApplyStats()
        except WouldBlock:
            return None
        except Exception as exc:
            if is_unavailable_error(exc):
                return None
            raise

    async def apply(self, message_ids: list[str]) -> bool:
        if self._inline_later is not None:
            try:
                self._inline_later(message_ids)
            except WouldBlock:
                return False
            return True
        if self._apply_later is not None:
            await asyncio.to_thread(self._apply_later, message_ids)
        return True

    def sweep(self) -> int:
        return self._sweep() if self._sweep is not None else 0

    def recover(self) -> int:
        return self._recover() if self._recover is not None else 0


def _late(task: asyncio.Future[Any], on_late: Callable[[ApplyStats], None]) -> None:
    if not task.cancelled() and task.exception() is None:
        on_late(task.result())


def make_batcher(
    apply: Callable[[list[Event]], Any], *, journal: EventJournal | None = None, **kw: Any
) -> EventBatcher:
    """An :class:`EventBatcher` over :class:`CallableStore`; ``kw``: the store's functions
    and :class:`BatcherConfig`'s fields."""
    config = BatcherConfig(**{k: v for k, v in kw.items() if k in _CONFIG})
    store = CallableStore(apply, **{k: v for k, v in kw.items() if k not in _CONFIG})
    return EventBatcher(store, config, journal)
