"""Sweeping: the dispatcher's housekeeping around claims and sends.

Expired leases (rows left ``sending`` by a dead process become ``unknown``), sender
care signals (error-463 timelocks, coded status events and the webhook's counted
signals into the health score, its decay and cool-downs), stored status events whose
message id a delivery now carries, ``unknown`` rows settled from the evidence stored,
sticky senders that cannot send handing their queued rows over (see
:meth:`Sweeper.hand_over`), the failure-rate safety check, and campaigns with nothing
left to send completed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine

from campaigns import delivery_lifecycle as dl
from campaigns import lifecycle
from campaigns.delivery_rows import pick_sender
from campaigns.gateway_events import settle_unknown
from gateway.outcomes import InstanceProblem
from scheduler import health, holds, timelock
from scheduler.claiming import RunningCampaign
from scheduler.clock import Clock
from scheduler.recording import ApplyPending
from scheduler.retry_horizon import fail_stranded, resume_quota_pauses
from storage.queries import campaigns as cq
from storage.queries import deliveries as dq
from storage.queries import instances as iq
from storage.queries import tallies

log = logging.getLogger("gatecast.dispatch")

#: how far back the once-a-second sweep looks for stored events whose message id a
#: delivery now carries (the race it closes lasts a transaction; older events are applied
#: at the next start, ``campaigns.gateway_events.apply_all_pending``)
RACE_LOOKBACK = timedelta(hours=1)
#: how often rows stranded on a paused sender past their retry horizon are looked for
STRANDED_EVERY = timedelta(minutes=1)
#: how often the running campaigns' holds are announced (``campaign.held``)
HOLDS_EVERY = timedelta(seconds=5)


@dataclass(eq=False)
class Sweeper:
    """Housekeeping of one dispatcher; keeps which campaigns are stalled."""

    engine: Engine
    clock: Clock
    apply_pending: ApplyPending
    note_pause: Callable[[str, str], None]
    campaigns: dict[int, RunningCampaign]  # the claimer's running campaigns (read only)
    sender_grace: timedelta
    _last_sweep: datetime | None = field(default=None, init=False)
    _last_stranded: datetime | None = field(default=None, init=False)
    _last_holds: datetime | None = field(default=None, init=False)
    _last_hand_over: dict[int, datetime] = field(default_factory=dict, init=False)
    #: running campaigns no sender can send for: campaign id -> why (senders, reasons)
    stalled: dict[int, str] = field(default_factory=dict, init=False)

    def expire_and_pause(self, conn: Connection, now: datetime) -> int:
        """Expire leases and pause senders that received error-463 status events;
        returns how many rows became ``unknown``."""
        expired = dq.expire_leases(
            conn, move=dl.LEASE_EXPIRED, now=now, error=dl.LEASE_EXPIRED_ERROR
        )
        # sender care: coded status events (463 locks cold contacts, scheduler/timelock.py)
        # and the webhook's counted signals feed the health score (scheduler/health.py)
        for sender, counts in timelock.read_signals(conn, now).items():
            health.add_signals(conn, sender, counts, now, note_pause=self.note_pause)
        health.fold_counted(conn, now, self.note_pause)
        health.sweep(conn, now, self.note_pause)
        timelock.lift_expired(conn, now)
        return expired

    def forget(self, campaign_ids: Iterable[int]) -> None:
        """Drop what is kept of campaigns that stopped running."""
        for cid in campaign_ids:
            self.stalled.pop(cid, None)
            self._last_hand_over.pop(cid, None)

    def sweep_now_and_then(self, now: datetime) -> None:
        """:meth:`sweep_pending_events`, about once a second; the running campaigns'
        holds (``campaign.held``), every :data:`HOLDS_EVERY`."""
        if self._last_sweep is None or now - self._last_sweep >= timedelta(seconds=1):
            self._last_sweep = now
            self.sweep_pending_events()
        last = self._last_holds
        if self.campaigns and (last is None or now - last >= HOLDS_EVERY):
            self._last_holds = now
            with self.engine.begin() as conn:
                holds.announce(conn, sorted(self.campaigns), now)

    def sweep_pending_events(self) -> int:
        """Apply stored status events whose message id a delivery now carries.

        Closes the race where an event commits (unapplied) right after the dispatcher
        recorded its id and looked for pending events (events received within
        :data:`RACE_LOOKBACK`); then settles ``unknown`` rows from
        the evidence stored (:func:`campaigns.gateway_events.settle_unknown`). Runs
        about once a second.
        """
        applied = 0
        now = self.clock.now()
        with self.engine.begin() as conn:
            ids = dq.unapplied_known_message_ids(conn, received_since=now - RACE_LOOKBACK)
            if ids:
                applied = self.apply_pending(conn, ids, now)
            applied += settle_unknown(conn, now=now).events
            horizons = [(c.policy.retry, c.senders) for c in self.campaigns.values()]
            resume_quota_pauses(conn, horizons, now)  # the paused list reads it next
            if self._last_stranded is None or now - self._last_stranded >= STRANDED_EVERY:
                self._last_stranded = now
                running = [(c.id, c.policy.retry, c.senders) for c in self.campaigns.values()]
                fail_stranded(conn, running, now)
        return applied

    def hand_over(self, camp: RunningCampaign, now: datetime) -> None:
        """Move queued rows off senders that cannot send to the campaign's healthy
        senders (see ``scheduler.dispatcher``); record or clear the campaign's stall."""
        last = self._last_hand_over.get(camp.id)
        if last is not None and now - last < timedelta(seconds=1) and camp.id not in self.stalled:
            return
        self._last_hand_over[camp.id] = now
        with self.engine.begin() as conn:
            health = iq.health(conn, camp.senders)
            unable = {
                s: h for s, h in health.items() if h.paused_reason is not None or h.state == iq.GONE
            }
            orphans = iq.has_unassigned(conn, camp.id)
            if not unable and not orphans:
                self.stalled.pop(camp.id, None)
                return
            named = list(camp.policy.instances)
            if named:
                pool_health = iq.health(conn, named)
                pool = [
                    i
                    for i in named
                    if i in pool_health
                    and pool_health[i].paused_reason is None
                    and pool_health[i].state not in iq.UNABLE_STATES
                ]
            else:
                pool = iq.usable_ids(conn)
            pool = [i for i in pool if i not in unable]
            due = [
                s
                for s, h in unable.items()
                if h.state == iq.GONE
                or str(h.paused_reason).startswith(InstanceProblem.INVALID_INSTANCE.value)
                or h.paused_at is None
                or now - h.paused_at >= self.sender_grace
            ]
            if pool:
                moved = 0
                for sender in [*due, *([None] if orphans else [])]:
                    rows = iq.queued_targets(conn, camp.id, sender)
                    moves = [(rid, pick_sender(target, pool) or pool[0]) for rid, target in rows]
                    moved += iq.reassign_queued(conn, moves)
                    if sender is not None and moves:
                        log.warning(
                            "campaign %s: sender %s cannot send (%s): %d queued recipient(s) "
                            "handed to %s",
                            camp.id,
                            sender,
                            unable[sender].paused_reason or unable[sender].state,
                            len(moves),
                            ", ".join(pool),
                        )
                if moved:
                    camp.senders = dq.queued_senders(conn, camp.id)
                    camp.senders_checked_at = now
                self.stalled.pop(camp.id, None)
                return
            waiting = [s for s in camp.senders if s not in unable]
            if waiting:  # some sender with queued rows can still send
                self.stalled.pop(camp.id, None)
                return
            why = ", ".join(
                f"{s} ({h.paused_reason or h.state})" for s, h in sorted(unable.items())
            )
            if orphans:
                why = ", ".join(filter(None, [why, "recipients of a forgotten sender"]))
            queued = tallies.delivery_counts(conn, camp.id).get(dl.QUEUED, 0)
        if camp.id not in self.stalled:
            log.warning(
                "campaign %s: no sender can send (%s); %d recipient(s) wait",
                camp.id,
                why,
                queued,
            )
        self.stalled[camp.id] = f"{why}; {queued} recipient(s) wait"

    def check_safety(self, campaign_ids: Iterable[int], now: datetime) -> None:
        """Pause each campaign whose failure rate passed its threshold.

        The rule: at least ``min_sample`` attempted rows and failed / attempted above
        ``max_failure_rate``. Counted at a cost that follows the failures, not the
        campaign: the failed rows, then the attempted ones only up to the number that
        would keep the rate within the limit (:func:`safety_count_limit`); reaching it
        proves the rate is fine, short of it the count is exact.
        """
        for cid in campaign_ids:
            camp = self.campaigns.get(cid)
            if camp is None:
                continue
            safety = camp.policy.safety
            with self.engine.begin() as conn:
                failed = cq.count_in_states(conn, cid, (dl.FAILED,))
                limit = safety_count_limit(failed, safety.max_failure_rate)
                attempted = cq.count_in_states(conn, cid, dl.ATTEMPTED, at_most=limit)
                if attempted >= limit or attempted < max(1, safety.min_sample):
                    continue
                rate = failed / attempted
                if rate <= safety.max_failure_rate:
                    continue
                reason = (
                    f"failure rate {rate:.0%} of {attempted} attempts passed the limit "
                    f"{safety.max_failure_rate:.0%}"
                )
                try:
                    lifecycle.transition(conn, cid, lifecycle.PAUSED, reason=reason, now=now)
                except lifecycle.InvalidTransition:
                    continue
            log.warning("campaign %s paused: %s", cid, reason)

    def finish_campaigns(self, running: list[RunningCampaign]) -> list[int]:
        """Complete the campaigns with nothing left to send; returns their ids."""
        now = self.clock.now()
        completed: list[int] = []
        for camp in running:
            with self.engine.begin() as conn:
                if tallies.has_pending(conn, camp.id, open_states=dl.OPEN):
                    continue
                try:
                    lifecycle.transition(conn, camp.id, lifecycle.COMPLETED, now=now)
                except lifecycle.InvalidTransition:
                    continue
            completed.append(camp.id)
            log.info("campaign %s completed", camp.id)
        return completed


def safety_count_limit(failed: int, max_failure_rate: float) -> int:
    """How many attempted rows prove that ``failed`` failures keep the rate within
    ``max_failure_rate``: with at least this many, ``failed / attempted`` is at most the
    limit, so the safety check cannot pause (whatever the sample size)."""
    return max(1, math.floor(failed / max_failure_rate) + 1)


def refresh_pauses(
    conn: Connection, running: list[RunningCampaign], paused: dict[str, str]
) -> dict[str, str]:
    """The paused senders (id -> reason) as the database has them, among the running
    campaigns' senders and those ``paused`` before (a resume elsewhere clears them)."""
    senders = sorted({s for camp in running for s in camp.senders} | set(paused))
    state = iq.pause_state(conn, senders)
    return {k: v for k, v in state.items() if v}


__all__ = ["Sweeper", "refresh_pauses", "safety_count_limit"]
