"""What the webhook batcher runs: storing or applying a batch, in a worker thread or on
the event loop over a held SQLite connection that never waits for a lock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from campaigns.gateway_events import (
    ApplyStats,
    Timing,
    apply_pending,
    event_time,
    record_events_in,
    store_events_in,
)
from gatecast.web.context import AppContext
from gatecast.web.metrics import observe_time_to, observe_webhook_lag
from gatecast.web.webhook_batcher import WouldBlock
from gateway.events import Event, IncomingMessage, MessageStatus
from storage.engine import Connection, is_sqlite_file
from storage.event_store import Locked, NoWaitConnection


def observe_times(timings: list[Timing]) -> None:
    """Time to delivered and to read of the status events a committed apply took."""
    for status, occurred_at, sent_at in timings:
        observe_time_to(status, (occurred_at - sent_at).total_seconds())


def observe_lag(events: list[Event], received: datetime, committed: datetime) -> None:
    """The webhook lag of each status event and incoming message of a committed batch:
    from the event's own time (:func:`campaigns.gateway_events.event_time`) to the commit
    (status events the receiver stores for its inbox pass are applied a moment later)."""
    for ev in events:
        if isinstance(ev, MessageStatus):
            kind = f"status_{ev.status.value}"
        elif isinstance(ev, IncomingMessage):
            kind = "message"
        else:
            continue
        lag = (committed - event_time(ev.at, received)).total_seconds()
        observe_webhook_lag(kind, lag)


def make_applier(
    ctx: AppContext, *, store_only: bool = False
) -> Callable[[list[Event]], ApplyStats]:
    """The function the batcher runs in its worker thread for ``ctx``.

    ``store_only``: status events are stored, not applied (their ids in ``pending``).
    """
    record = store_events_in if store_only else record_events_in

    def apply(events: list[Event]) -> ApplyStats:
        received = ctx.clock()
        with ctx.engine.begin() as conn:
            stats = record(
                conn, events, opt_out_keywords=ctx.settings.opt_out_keywords, now=received
            )
        observe_lag(events, received, ctx.clock())
        observe_times(stats.timings)
        return stats

    return apply


def make_later_applier(ctx: AppContext) -> Callable[[list[str]], int]:
    """The inbox pass in a worker thread: apply the stored events of some message ids."""

    def apply_later(message_ids: list[str]) -> int:
        timings: list[Timing] = []
        with ctx.engine.begin() as conn:
            applied = apply_pending(conn, message_ids, now=ctx.clock(), timings=timings)
        observe_times(timings)
        return applied

    return apply_later


_T = TypeVar("_T")


class InlineApplier:
    """Applies batches on the event loop over one held SQLite connection that never waits.

    SQLite work is CPU under the GIL, so a worker thread only adds hand-offs and GIL
    convoys (bench/webhooks.py: about 0.6x -> 0.8x of a bare endpoint's rate). The
    connection (:class:`storage.event_store.NoWaitConnection`) never waits for a lock:
    when another writer holds it the batch raises :class:`WouldBlock` at once (nothing
    applied) and the batcher hands it to a thread, so the loop never stalls. Not for
    PostgreSQL, whose work waits on the server: there a thread overlaps that wait with
    serving requests. ``store_only``: see :func:`campaigns.gateway_events.store_events_in`.
    """

    def __init__(self, ctx: AppContext, *, store_only: bool = False) -> None:
        self._ctx = ctx
        self._record = store_events_in if store_only else record_events_in
        self._conn = NoWaitConnection(ctx.engine)

    def __call__(self, events: list[Event]) -> ApplyStats:
        """Record ``events`` in one transaction; :class:`WouldBlock` if the DB is locked."""
        keywords = self._ctx.settings.opt_out_keywords
        now = self._ctx.clock()
        stats = self._transaction(
            lambda conn: self._record(conn, events, opt_out_keywords=keywords, now=now)
        )
        observe_lag(events, now, self._ctx.clock())
        observe_times(stats.timings)
        return stats

    def apply_later(self, message_ids: list[str]) -> int:
        """The inbox pass on the loop; :class:`WouldBlock` if the DB is locked."""
        now = self._ctx.clock()
        timings: list[Timing] = []
        applied = self._transaction(
            lambda conn: apply_pending(conn, message_ids, now=now, timings=timings)
        )
        observe_times(timings)
        return applied

    def _transaction(self, work: Callable[[Connection], _T]) -> _T:
        try:
            return self._conn.transaction(work)
        except Locked as exc:
            raise WouldBlock from exc

    def close(self) -> None:
        """Give the held connection back (with the usual busy timeout)."""
        self._conn.close()


def make_inline_applier(ctx: AppContext, *, store_only: bool = False) -> InlineApplier | None:
    """An :class:`InlineApplier` for a SQLite file database, else None (use a thread)."""
    return InlineApplier(ctx, store_only=store_only) if is_sqlite_file(ctx.engine) else None


__all__ = [
    "InlineApplier",
    "make_applier",
    "make_inline_applier",
    "make_later_applier",
    "observe_lag",
    "observe_times",
]
