"""The dispatcher: claim due rows, pace per sender, send, record outcomes in bulk, retry.

One :meth:`Dispatcher.tick` does, for every running campaign inside its sending window:

1. expire leases (rows left ``sending`` by a dead process become ``unknown``) and pause
   senders that received error-463 status events;
2. per usable sender: paced -> reserve the sender's next slot (``instances.next_send_at``,
   a conditional UPDATE) and claim one row in the same transaction; unpaced -> claim a
   batch of a few hundred;
3. skip opted-out contacts, send the rest on a small thread pool (one sync client per
   thread: DESIGN.md measured one shared AsyncClient as slow); unpaced batches are
   pipelined: the next batch is claimed and the previous one recorded while one sends
   (so at most two batches are in flight);
4. record every outcome in bulk in one transaction (a sent row's ``sent_at`` is the moment
   the gateway's answer to its own send came back), then apply webhook events that
   arrived before their send was recorded (``campaigns.gateway_events.apply_pending``);
5. pause a sender on instance problems or a burst of failures, pause a campaign whose
   failure rate passes its threshold, complete a campaign with nothing left to send.

Sticky senders that cannot send hand over (:meth:`scheduler.sweeping.Sweeper.hand_over`,
about once a second per campaign): the queued rows of a sender that is paused for longer
than the sender grace (``sender_grace_seconds``, default
:data:`DEFAULT_SENDER_GRACE_SECONDS`), or at once when it is gone (the gateway no longer
knows its id), and rows whose sender was forgotten, go to the campaign's healthy
senders (its ``instances`` that are unpaused and not disconnected, logged out or gone;
without ``instances``: the connected, unpaused ones), each row to a stable choice among
them. A campaign whose queued rows all wait for senders that cannot send, with no healthy
sender to take them, is *stalled* (:attr:`Dispatcher.stalled`): ``campaign run`` ends
on it, ``serve`` logs it and waits.

The jobs live in their own modules: :mod:`scheduler.claiming` (step 2),
:mod:`scheduler.sending` (3), :mod:`scheduler.recording` (4 and the sender pauses of 5),
:mod:`scheduler.sweeping` (1, the sweep of pending events, the hand-over, the safety check
and completion); this module runs them in order.

Nothing here sleeps on its own: :meth:`run` asks the injected clock to sleep until the
next due moment, so tests drive time by hand.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine

from scheduler.claiming import Claimer, Job
from scheduler.clock import Clock, SystemClock
from scheduler.defaults import DEFAULT_SENDER_GRACE_SECONDS
from scheduler.recording import ApplyPending, Recorded, Recorder, default_apply_pending
from scheduler.sending import SendPool, Submitted, SupportsSend
from scheduler.sweeping import Sweeper, refresh_pauses
from scheduler.windows import in_window, next_window_open

log = logging.getLogger("gatecast.dispatch")


@dataclass
class TickResult(Recorded):
    """What one tick did (rows claimed, then recorded: :class:`Recorded`), and when the
    next one is worth running."""

    claimed: int = 0
    expired: int = 0
    in_flight: int = 0
    completed: list[int] = field(default_factory=list)
    next_wake: datetime | None = None


class Dispatcher:
    """Sends the due deliveries of running campaigns, at each sender's pace."""

    def __init__(
        self,
        engine: Engine,
        client_factory: Callable[[], SupportsSend],
        *,
        clock: Clock | None = None,
        workers: int = 4,
        batch_size: int = 256,
        lease_seconds: float = 120.0,
        campaign_ids: Sequence[int] | None = None,
        failure_burst: int = 5,
        poll_seconds: float = 1.0,
        rng: random.Random | None = None,
        apply_pending: ApplyPending | None = None,
        pipeline: bool = True,
        on_outcome: Callable[[str], None] | None = None,
        sender_grace_seconds: float = DEFAULT_SENDER_GRACE_SECONDS,
    ) -> None:
        self.engine = engine
        self.clock: Clock = clock or SystemClock()
        self.poll_seconds = poll_seconds
        self.pipeline = pipeline
        self.paused_senders: dict[str, str] = {}
        rng = rng or random.Random()
        apply = apply_pending or default_apply_pending
        self._claimer = Claimer(
            engine,
            batch_size=max(1, batch_size),
            lease=timedelta(seconds=lease_seconds),
            campaign_ids=None if campaign_ids is None else [int(c) for c in campaign_ids],
            rng=rng,
        )
        self._sender = SendPool(engine, client_factory, clock=self.clock, workers=max(1, workers))
        self._sweeper = Sweeper(
            engine,
            clock=self.clock,
            apply_pending=apply,
            note_pause=self._note_pause,
            campaigns=self._claimer.campaigns,
            sender_grace=timedelta(seconds=max(0.0, sender_grace_seconds)),
        )
        self._recorder = Recorder(
            engine,
            clock=self.clock,
            rng=rng,
            failure_burst=failure_burst,
            apply_pending=apply,
            on_outcome=on_outcome,  # e.g. a metrics counter of the layer above
            note_pause=self._note_pause,
            check_safety=self._sweeper.check_safety,
        )
        self._inflight: Submitted = []
        #: running campaigns no sender can send for: campaign id -> why (senders, reasons)
        self.stalled: dict[int, str] = self._sweeper.stalled

    def close(self) -> None:
        """Record the batch in flight, stop the thread pool, close the clients it made."""
        try:
            self.flush()
        except Exception:
            log.exception("recording the last batch failed; its rows become unknown")
        self._sender.close()

    def __enter__(self) -> Dispatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one tick ------------------------------------------------------------------------

    def tick(self) -> TickResult:
        """Claim, send and record one round; returns counts and the next useful wake time."""
        now = self.clock.now()
        result = TickResult()
        with self.engine.begin() as conn:
            result.expired = self._sweeper.expire_and_pause(conn, now)
            running, gone = self._claimer.running(conn, now)
            self._sweeper.forget(gone)
            self.paused_senders = refresh_pauses(conn, running, self.paused_senders)
        self._sweeper.sweep_now_and_then(now)
        if result.expired:
            log.warning("%d in-flight rows outlived their lease: marked unknown", result.expired)

        for camp in running:
            self._sweeper.hand_over(camp, now)
        jobs: list[Job] = []
        wakes: list[datetime] = []
        for camp in running:
            policy = camp.policy
            if not in_window(now, policy.timezone, policy.window):
                wakes.append(next_window_open(now, policy.timezone, policy.window))
                continue
            jobs.extend(self._claimer.claim_for(camp, now, wakes))

        submitted = self._sender.submit(jobs) if jobs else []
        if self._inflight:  # the previous unpaced batch: record it while this one sends
            previous, self._inflight = self._inflight, []
            self._sender.collect(previous)
            result.add(self._recorder.record([job for job, _ in previous]))
        if jobs:
            pooled = any(future is not None for _, future in submitted)
            if self.pipeline and pooled and all(j.policy.pace.unpaced for j in jobs):
                self._inflight = submitted
            else:
                self._sender.collect(submitted)
                result.add(self._recorder.record(jobs))
        result.completed.extend(self._sweeper.finish_campaigns(running))

        result.claimed = len(jobs)
        result.in_flight = len(self._inflight)
        if jobs or self._inflight:
            result.next_wake = now
        else:
            poll = now + timedelta(seconds=self.poll_seconds)
            result.next_wake = min([*wakes, poll])
        return result

    def flush(self) -> TickResult:
        """Wait for and record the batch still in flight (unpaced pipelining)."""
        result = TickResult()
        if self._inflight:
            previous, self._inflight = self._inflight, []
            self._sender.collect(previous)
            result.add(self._recorder.record([job for job, _ in previous]))
        return result

    def sweep_pending_events(self) -> int:
        """Apply stored status events whose message id a delivery now carries (see
        :meth:`scheduler.sweeping.Sweeper.sweep_pending_events`)."""
        return self._sweeper.sweep_pending_events()

    def _note_pause(self, instance_id: str, reason: str) -> None:
        self.paused_senders[instance_id] = reason
        log.warning("sender instance %s paused: %s", instance_id, reason)

    # -- loops ---------------------------------------------------------------------------

    def run(
        self,
        stop: threading.Event | None = None,
        *,
        until_done: bool = False,
        on_tick: Callable[[TickResult], None] | None = None,
        max_ticks: int | None = None,
        stop_when_stalled: bool = False,
    ) -> int:
        """Tick until ``stop`` is set (or, with ``until_done``, no watched campaign runs;
        with ``stop_when_stalled``, also when every running one is stalled).

        Between idle ticks the clock sleeps until the next due moment (at most
        ``poll_seconds``). Returns the number of ticks.
        """
        ticks = 0
        while stop is None or not stop.is_set():
            result = self.tick()
            ticks += 1
            if on_tick is not None:
                on_tick(result)
            if max_ticks is not None and ticks >= max_ticks:
                break
            if until_done and not self._any_running():
                break
            if stop_when_stalled and self._all_stalled() and not self._inflight:
                break
            if result.claimed or result.in_flight:
                continue
            wait = 0.0
            if result.next_wake is not None:
                wait = (result.next_wake - self.clock.now()).total_seconds()
            self.clock.sleep(min(max(wait, 0.0), self.poll_seconds) if wait > 0 else 0.001)
        self.flush()
        return ticks

    def _all_stalled(self) -> bool:
        """True when every watched running campaign is stalled (and there is one)."""
        running = set(self._claimer.campaigns)
        return bool(running) and running <= set(self.stalled)

    def _any_running(self) -> bool:
        return self._claimer.any_running()


__all__ = ["Dispatcher", "SupportsSend", "TickResult"]
