"""The dispatcher: claim due rows, pace per sender, send, record outcomes in bulk, retry.

One :meth:`Dispatcher.tick` does, for every running campaign inside its sending window
(in recipient time: for the rows of the recipient zones whose window is open,
:func:`scheduler.windows.open_zones`):

1. expire leases (rows left ``sending`` by a dead process become ``unknown``) and pause
   senders that received error-463 status events;
2. per usable sender: paced -> reserve the sender's next slot (``instances.next_send_at``,
   a conditional UPDATE) and claim one row in the same transaction (every due sender of
   a campaign in one transaction); unpaced -> claim a batch of a few hundred;
3. skip opted-out contacts, send the rest on a small thread pool (one sync client per
   thread: DESIGN.md measured one shared AsyncClient as slow); unpaced batches are
   pipelined: the next batch is claimed and the previous one recorded while one sends
   (so at most two batches are in flight). With ``send_concurrency`` > 0 (``serve``,
   ``campaign run``) paced sends are not waited for: each waits on the gateway in a
   thread of its own (at most ``send_concurrency`` at once) while later ticks claim the
   other senders' due rows; a tick records the sends that have answered, and a sender
   whose send is still waiting is not claimed for until it answers;
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

With sender leases (``leases``: :mod:`scheduler.sender_leases`, every ``gatecast worker``)
a tick first renews this worker's share of the senders with queued work when due, and
claims only for the senders it holds; :meth:`Dispatcher.wake` (a PostgreSQL ``NOTIFY``
of new work) ends the current sleep and renews at the next tick.

Nothing here sleeps on its own: :meth:`run` asks the injected clock to sleep until the
next due moment, so tests drive time by hand.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine

from scheduler.ab_pick import ABPicks
from scheduler.claiming import Claimer, Job, RunningCampaign
from scheduler.clock import Clock, SystemClock
from scheduler.defaults import DEFAULT_SENDER_GRACE_SECONDS
from scheduler.recording import (
    ApplyPending,
    Recorded,
    Recorder,
    SendObserved,
    default_apply_pending,
)
from scheduler.sender_leases import SenderLeases
from scheduler.sending import SendPool, Submitted, SupportsSend
from scheduler.sweeping import Sweeper, refresh_pauses
from scheduler.windows import in_window, next_window_open, open_zones

log = logging.getLogger("gatecast.dispatch")

#: With sends in the background: how soon a tick looks for answers when nothing else is
#: due, the least time between two ticks (slots due within it share one tick), and how
#: often a tick does the housekeeping (every tick without).
ANSWER_POLL_SECONDS = 0.05
COALESCE_SECONDS = 0.01
HOUSEKEEPING_INTERVAL = timedelta(seconds=1)


@dataclass
class TickResult(Recorded):
    """What one tick did (rows claimed, then recorded: :class:`Recorded`), and when the
    next one is worth running."""

    claimed: int = 0
    expired: int = 0
    in_flight: int = 0
    #: paced sends still waiting on the gateway (``send_concurrency`` > 0)
    waiting: int = 0
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
        on_outcome: Callable[[SendObserved], None] | None = None,
        sender_grace_seconds: float = DEFAULT_SENDER_GRACE_SECONDS,
        send_concurrency: int = 0,
        leases: SenderLeases | None = None,
        on_linked: Callable[[list[str]], None] | None = None,
    ) -> None:
        """``send_concurrency``: most paced sends waiting on the gateway at once, in the
        background (0: each tick makes its paced sends and waits for them, as tests that
        drive ticks by hand expect). ``leases``: claim only for the senders this worker
        leases (None: for every sender). ``on_linked`` hears, on the dispatch thread, of
        the senders a send just proved linked (it may hold them:
        :meth:`hold_unregistered`)."""
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
            leases=leases,
        )
        self._leases = leases
        self._sender = SendPool(
            engine,
            client_factory,
            clock=self.clock,
            workers=max(1, workers),
            concurrency=max(0, send_concurrency),
        )
        self._ab = ABPicks(engine)
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
            on_linked=on_linked,
        )
        self._inflight: Submitted = []
        #: paced sends started in the background, not yet recorded (oldest first)
        self._waiting: Submitted = []
        self._housekept: datetime | None = None
        #: running campaigns no sender can send for: campaign id -> why (senders, reasons)
        self.stalled: dict[int, str] = self._sweeper.stalled

    def close(self) -> None:
        """Record the batch in flight, stop the thread pool, close the clients it made."""
        try:
            self.flush()
        except Exception:
            log.exception("recording the last batch failed; its rows become unknown")
        self._sender.close()
        if self._leases is not None:
            try:
                self._leases.retire()
            except Exception as exc:
                log.warning("giving up the sender leases failed (%s): they expire", exc)

    def __enter__(self) -> Dispatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one tick ------------------------------------------------------------------------

    def tick(self) -> TickResult:
        """Claim, send and record one round; returns counts and the next useful wake time."""
        result = TickResult()
        if self._waiting:  # paced sends that answered since the last tick
            result.add(self._recorder.record(self._take_answered()))
        now = self.clock.now()
        # with sends in the background ticks come many times a second: the housekeeping
        # (lease expiry, 463 pauses, the paused list, completion) runs about once a second
        last = self._housekept
        housekeeping = not self._overlaps or last is None or now - last >= HOUSEKEEPING_INTERVAL
        with self.engine.begin() as conn:
            if housekeeping:
                self._housekept = now
                result.expired = self._sweeper.expire_and_pause(conn, now)
            running, gone = self._claimer.running(conn, now)
            self._sweeper.forget(gone)
            self._ab.forget(gone)
            if housekeeping:
                self.paused_senders = refresh_pauses(conn, running, self.paused_senders)
        if self._leases is not None:
            self._leases.refresh(now, {s for camp in running for s in camp.senders})
        self._sweeper.sweep_now_and_then(now)
        if result.expired:
            log.warning("%d in-flight rows outlived their lease: marked unknown", result.expired)

        for camp in running:
            self._sweeper.hand_over(camp, now)
        jobs: list[Job] = []
        wakes: list[datetime] = []
        for camp in running:
            self._ab.before_claim(camp, now, wakes)  # an A/B test's rest, once its time comes
            policy = camp.policy
            if policy.recipient_timezone and policy.window is not None:
                # each recipient's own window: claim only rows of the zones open now
                zones, reopen = open_zones(now, camp.zones, policy.window)
                if reopen is not None:
                    wakes.append(reopen)
                if zones:
                    jobs.extend(self._claim(camp, now, wakes, zones))
                continue
            if not in_window(now, policy.timezone, policy.window):
                wakes.append(next_window_open(now, policy.timezone, policy.window))
                continue
            jobs.extend(self._claim(camp, now, wakes))

        background = [j for j in jobs if not j.policy.pace.unpaced] if self._overlaps else []
        if background:
            jobs = [j for j in jobs if j.policy.pace.unpaced]
            started = self._sender.submit(background, background=True)
            self._waiting.extend((job, f) for job, f in started if f is not None)
            unsent = [job for job, future in started if future is None]
            if unsent:  # opted out or unsendable: recorded now
                result.add(self._recorder.record(unsent))
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
        if housekeeping:
            result.completed.extend(self._sweeper.finish_campaigns(running))
            # the number check ahead of the claims, on its own thread (decision 68);
            # nothing where the gateway has no check
            held = None if self._leases is None else self._leases.held
            self._sender.checks.poke([camp.id for camp in running], held)

        result.claimed = len(jobs) + len(background)
        result.in_flight = len(self._inflight)
        result.waiting = len(self._waiting)
        if jobs or self._inflight:
            result.next_wake = now
        else:
            poll = now + timedelta(seconds=self.poll_seconds)
            if self._waiting:  # record answers (and claim for their senders) soon
                poll = now + timedelta(seconds=ANSWER_POLL_SECONDS)
            result.next_wake = min([*wakes, poll])
        return result

    @property
    def _overlaps(self) -> bool:
        return self._sender.concurrency > 0

    def _claim(
        self,
        camp: RunningCampaign,
        now: datetime,
        wakes: list[datetime],
        zones: list[str] | None = None,
    ) -> list[Job]:
        """The campaign's due rows (``zones``: of these recipient zones only); paced ones
        only for senders with no send waiting and only as many as the background pool
        has room for."""
        if not self._overlaps:
            return self._claimer.claim_for(camp, now, wakes, zones=zones)
        busy = {job.row.sender for job, _ in self._waiting if job.row.sender is not None}
        room = max(0, self._sender.concurrency - len(self._waiting))
        return self._claimer.claim_for(camp, now, wakes, busy=busy, room=room, zones=zones)

    def _take_answered(self, *, wait: bool = False) -> list[Job]:
        """The background sends that have answered (with ``wait``: all of them, waited
        for), taken out of the waiting list with their outcomes."""
        done: list[Job] = []
        still: Submitted = []
        for job, future in self._waiting:
            if future is None:
                continue
            if wait or future.done():
                job.outcome = future.result()
                done.append(job)
            else:
                still.append((job, future))
        self._waiting = still
        return done

    def flush(self) -> TickResult:
        """Wait for and record the sends still in flight (the unpaced batch, the paced
        sends waiting on the gateway)."""
        result = TickResult()
        if self._waiting:
            result.add(self._recorder.record(self._take_answered(wait=True)))
        if self._inflight:
            previous, self._inflight = self._inflight, []
            self._sender.collect(previous)
            result.add(self._recorder.record([job for job, _ in previous]))
        return result

    def sweep_pending_events(self) -> int:
        """Apply stored status events whose message id a delivery now carries (see
        :meth:`scheduler.sweeping.Sweeper.sweep_pending_events`)."""
        return self._sweeper.sweep_pending_events()

    def hold_unregistered(self, instance_ids: Iterable[str]) -> None:
        """Claim nothing for these senders until :meth:`registered` names them: their
        webhook was never registered at this URL, and the start's pass (or the
        registration after a send proved them linked) registers it now
        (docs/architecture.md, decision 40)."""
        self._claimer.unregistered.update(instance_ids)

    def registered(self, instance_id: str) -> None:
        """The registration of the sender's webhook ended (done or refused): it sends
        from the next tick."""
        self._claimer.unregistered.discard(instance_id)
        self.wake()

    def release_unregistered(self) -> None:
        """Let every sender held by :meth:`hold_unregistered` send (the pass failed)."""
        self._claimer.unregistered.clear()
        self.wake()

    def wake(self) -> None:
        """New work (a campaign started, senders released): end the current sleep, read
        the senders with queued rows and renew the leases at the next tick."""
        self._claimer.refresh_senders()
        if self._leases is not None:
            self._leases.poke()
        wake = getattr(self.clock, "wake", None)
        if callable(wake):
            wake()

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
            if stop_when_stalled and self._all_stalled() and not (self._inflight or self._waiting):
                break
            if result.in_flight or (result.claimed and not self._overlaps):
                continue
            wait = 0.0
            if result.next_wake is not None:
                wait = (result.next_wake - self.clock.now()).total_seconds()
            if self._overlaps:  # gather the slots due within a few ms into one tick
                wait = max(wait, COALESCE_SECONDS)
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
