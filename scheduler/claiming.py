"""Claiming: which running campaigns to serve, and one sender's due rows at its pace.

Paced senders reserve their next slot (``instances.next_send_at``, a conditional UPDATE)
and claim in the same transaction; unpaced ones claim a batch. A daily cap is counted
and enforced inside the claim's transaction (see :meth:`Claimer._claim_sender`). With
sender leases (:mod:`scheduler.sender_leases`, ``gatecast worker``) a worker claims only
for the senders it holds.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from sqlalchemy import Connection, Engine, select

from campaigns import lifecycle
from gateway.messages import Message, message_from_dict
from gateway.outcomes import SendOutcome
from scheduler import claim_care
from scheduler.content_guard import hold_runs
from scheduler.pacing import next_send_at, slots_per_claim
from scheduler.policy import CampaignPolicy, policy_from_spec
from scheduler.sender_leases import SenderLeases
from scheduler.sender_usage import sends_today, sends_today_by_sender
from scheduler.warmup import allowance_left
from scheduler.windows import next_local_day_start
from storage import tables
from storage.queries import deliveries as dq
from storage.queries import instances as iq

if TYPE_CHECKING:
    from campaigns import followups


def _followups() -> ModuleType:
    """:mod:`campaigns.followups`, imported when a step's campaign is claimed: the
    webhook intake imports this module (through ``scheduler.recording``) and must not
    load the campaign file and its template engine (tests/journeys/test_intake.py)."""
    from campaigns import followups

    return followups


log = logging.getLogger("gatecast.dispatch")

_campaigns = tables.campaigns


@dataclass
class RunningCampaign:
    """A running campaign as the dispatcher serves it (re-read every few seconds)."""

    id: int
    policy: CampaignPolicy
    senders: list[str]
    senders_checked_at: datetime
    #: recipient time: the distinct recipient zones of its queued rows (else empty)
    zones: list[str] = field(default_factory=list)
    #: a follow-up step's sends: the step's rule, re-checked in each claim (decision 70)
    step: followups.StepRule | None = None


@dataclass
class Job:
    """One claimed row on its way: its message, then the send's outcome."""

    row: dq.ClaimedRow
    policy: CampaignPolicy
    message: Message | None
    error: str | None = None
    outcome: SendOutcome | None = None
    #: when the gateway's answer to this row's send came back (its ``sent_at`` if accepted)
    answered_at: datetime | None = None
    #: how long the gateway took to answer the send (seconds, this process's clock)
    send_seconds: float | None = None


@dataclass(eq=False)
class Claimer:
    """Keeps the running campaigns and claims their due rows, sender by sender."""

    engine: Engine
    batch_size: int
    lease: timedelta
    campaign_ids: list[int] | None
    rng: random.Random
    #: this worker's sender leases (None: claim for every sender, as ``campaign run``)
    leases: SenderLeases | None = None
    #: senders whose webhook is being registered at this URL (never at it before: the
    #: start's pass, or a send just proved them linked): not claimed for until then
    #: (``Dispatcher.hold_unregistered``)
    unregistered: set[str] = field(default_factory=set)
    #: campaign id -> the running campaign (the dict is never replaced: others read it)
    campaigns: dict[int, RunningCampaign] = field(default_factory=dict, init=False)

    def running(self, conn: Connection, now: datetime) -> tuple[list[RunningCampaign], set[int]]:
        """The watched running campaigns, and the ids of those that stopped running."""
        stmt = select(
            _campaigns.c.id,
            _campaigns.c.spec,
            _campaigns.c.timezone,
            _campaigns.c.step_of,
            _campaigns.c.step,
        ).where(_campaigns.c.state == lifecycle.RUNNING)
        if self.campaign_ids is not None:
            stmt = stmt.where(_campaigns.c.id.in_(self.campaign_ids))
        out: list[RunningCampaign] = []
        seen: set[int] = set()
        for cid, spec, tz, step_of, step in conn.execute(stmt.order_by(_campaigns.c.id)):
            cid = int(cid)
            seen.add(cid)
            cached = self.campaigns.get(cid)
            if cached is None or now - cached.senders_checked_at > timedelta(seconds=5):
                try:
                    policy = policy_from_spec(spec or {}, timezone=tz)
                except (ValueError, KeyError) as exc:
                    log.error("campaign %s has an unreadable spec: %s", cid, exc)
                    continue
                cached = RunningCampaign(cid, policy, dq.queued_senders(conn, cid), now)
                if policy.recipient_timezone:
                    cached.zones = dq.queued_zones(conn, cid)
                if step_of is not None and step is not None:
                    cached.step = _followups().rule_of(conn, int(step_of), int(step))
                self.campaigns[cid] = cached
            out.append(cached)
        gone = set(self.campaigns) - seen
        for cid in gone:
            del self.campaigns[cid]
        return out, gone

    def refresh_senders(self) -> None:
        """Read every campaign's senders with queued rows again at the next tick."""
        for camp in list(self.campaigns.values()):
            camp.senders_checked_at = datetime.min.replace(tzinfo=camp.senders_checked_at.tzinfo)

    def any_running(self) -> bool:
        """True while a watched campaign is running."""
        stmt = select(_campaigns.c.id).where(_campaigns.c.state == lifecycle.RUNNING)
        if self.campaign_ids is not None:
            stmt = stmt.where(_campaigns.c.id.in_(self.campaign_ids))
        with self.engine.connect() as conn:
            return conn.execute(stmt.limit(1)).first() is not None

    def claim_for(
        self,
        camp: RunningCampaign,
        now: datetime,
        wakes: list[datetime],
        *,
        busy: Collection[str] = (),
        room: int | None = None,
        zones: list[str] | None = None,
    ) -> list[Job]:
        """Claim the campaign's due rows of every sender that may send now; the moments
        worth waking up for (next slots, due rows, the next day under a cap) go to
        ``wakes``. ``zones`` (recipient time): only rows of these recipient zones.

        Paced senders in ``busy`` (a send of theirs still waits on the gateway) are not
        claimed for; paced claiming stops once ``room`` rows are claimed (the sends the
        process may still start), the rest wait for the next tick."""
        policy = camp.policy
        pace = policy.pace
        jobs: list[Job] = []
        senders = camp.senders
        if self.unregistered:  # held until the registration of their webhook ends
            senders = [s for s in senders if s not in self.unregistered]
            if not senders:
                return jobs
        if self.leases is not None:
            held = self.leases.held
            senders = [s for s in senders if s in held]
            if not senders:
                return jobs
        with self.engine.begin() as conn:
            state = iq.pace_state(conn, senders)
            unknown = [s for s in senders if s not in state]
            if unknown:  # a sender with no instances row yet: create it (pace state lives there)
                iq.ensure(conn, unknown, now=now)
            ready = [s for s in senders if state.get(s, (None, None))[0] is None]
            if not ready:
                return []
            times = {s: state[s][1] for s in ready if s in state}
        per_sender = max(1, self.batch_size // len(ready))
        if pace.unpaced:
            # one transaction for every sender, as below: one commit a tick, not one each
            with self.engine.begin() as conn:
                for sender in sorted(ready):
                    self._claim_into(conn, camp, sender, now, per_sender, wakes, jobs, zones)
            return jobs
        due: list[str] = []
        for sender in ready:
            slot = times.get(sender)
            if slot is not None and slot > now:
                wakes.append(slot)
            elif sender not in busy:  # a busy one's answer ends a tick soon
                due.append(sender)
        if not due:
            return jobs
        # one transaction for every due sender (one write lock on SQLite, not one each);
        # in a stable order, so that workers take the instance rows' locks alike
        due.sort()
        with self.engine.begin() as conn:
            if slots_per_claim(pace, per_sender) == 1:  # every real-world pace
                take = due if room is None else due[: max(0, room)]
                self._claim_one_each(conn, camp, take, now, wakes, jobs, zones)
                return jobs
            for sender in due:
                limit = per_sender if room is None else min(per_sender, room - len(jobs))
                if limit <= 0:
                    break  # no room left: the rest wait for sends to answer
                self._claim_into(conn, camp, sender, now, limit, wakes, jobs, zones)
        return jobs

    def _claim_one_each(
        self,
        conn: Connection,
        camp: RunningCampaign,
        senders: list[str],
        now: datetime,
        wakes: list[datetime],
        jobs: list[Job],
        zones: list[str] | None = None,
    ) -> None:
        """The paced claim of one row per sender for many senders, in a few statements
        whatever their number: take the free slots, count today's sends under a cap,
        claim the first due row of each sender left, set their next slots. The same
        guarantees as :meth:`_claim_sender` (the slot taken first makes the count and the
        claim atomic across workers); a sender that claims nothing keeps a due slot."""
        if not senders:
            return
        policy = camp.policy
        pace = policy.pace
        taken = iq.reserve_slots(conn, senders, now=now)
        care = claim_care.before_claim(conn, taken, now)
        if taken:
            tz = policy.timezone
            cap = pace.daily_cap
            counts = (
                sends_today_by_sender(conn, taken, now, tz, at_most=cap) if cap is not None else {}
            )
            open_ = [
                s for s in taken if allowance_left(pace, counts.get(s), care.get(s), now, tz) != 0
            ]
            if len(open_) < len(taken):
                wakes.append(next_local_day_start(now, policy.timezone))
            taken = open_
        rows = dq.claim_first_of_each(
            conn,
            campaign_id=camp.id,
            senders=taken,
            now=now,
            lease_until=now + self.lease,
            zones=zones,
        )
        rows = claim_care.after_claim(conn, rows, care, now, policy.timezone)
        slots = [
            (
                str(row.sender),
                claim_care.slowed(
                    now, next_send_at(now, pace, self.rng), care.get(row.sender or "")
                ),
            )
            for row in rows
        ]
        iq.set_next_sends(conn, slots)
        wakes.extend(at for _, at in slots)
        claimed = {row.sender for row in rows}
        # a held row costs its sender this slot; the next slot takes the next row
        rows = hold_runs(conn, rows, policy.max_identical, now, wakes)
        if camp.step is not None:  # decided now, in the claim's transaction (decision 70)
            rows = _followups().recheck(conn, camp.step, rows, now)
        due = dq.next_due_at(conn, camp.id, [s for s in taken if s not in claimed], zones)
        if due is not None:
            wakes.append(max(due, now))
        jobs.extend(_jobs(rows, policy))

    def _claim_into(
        self,
        conn: Connection,
        camp: RunningCampaign,
        sender: str,
        now: datetime,
        limit: int,
        wakes: list[datetime],
        jobs: list[Job],
        zones: list[str] | None = None,
    ) -> None:
        """Claim one sender's due rows in ``conn`` and add them to ``jobs`` as jobs; the
        moment worth waking up for goes to ``wakes`` (the next local day when capped, the
        next due row when none is due)."""
        policy = camp.policy
        claimed = self._claim_sender(conn, camp, sender, now, now + self.lease, limit, wakes, zones)
        if claimed == "capped":
            wakes.append(next_local_day_start(now, policy.timezone))
            return
        if claimed == "taken":  # paused meanwhile, or another worker holds the slot
            return
        if not claimed:
            due = dq.next_due_at(conn, camp.id, [sender], zones)
            if due is not None:
                wakes.append(max(due, now))
        jobs.extend(_jobs(claimed, policy))

    def _claim_sender(
        self,
        conn: Connection,
        camp: RunningCampaign,
        sender: str,
        now: datetime,
        lease_until: datetime,
        per_sender: int,
        wakes: list[datetime],
        zones: list[str] | None = None,
    ) -> list[dq.ClaimedRow] | Literal["capped", "taken"]:
        """Claim one sender's next rows in ``conn``'s transaction: the rows, ``"capped"``
        (daily cap reached) or ``"taken"`` (the sender is paused, or another worker holds
        its pace slot).

        The transaction first takes the sender's row (the pace slot's conditional UPDATE,
        or a plain row lock when unpaced with a cap), so the daily-cap count and the claim
        are atomic across workers: a second worker waits for the first one's claim to
        commit and then counts its rows, and the cap is never exceeded. A paced sender
        that claims nothing (capped, or nothing due) keeps a due slot (``now``).
        """
        pace = camp.policy.pace
        tz = camp.policy.timezone
        care = claim_care.before_claim(conn, [sender], now)
        capped = pace.daily_cap is not None
        # the warm-up limits like a cap (the same lock makes its count atomic)
        warm = None if pace.unpaced else care.get(sender)  # unpaced: a gateway you own
        limited = capped or allowance_left(pace, None, warm, now, tz) is not None
        if pace.unpaced:
            if limited and not iq.lock_unpaused(conn, sender):
                return "taken"
            limit = per_sender
        else:
            # the conditional UPDATE makes this worker the only one using the slot
            if not iq.reserve_slot(conn, sender, now=now, next_at=now):
                return "taken"
            limit = slots_per_claim(pace, per_sender)
        if limited:
            sent = sends_today(conn, sender, now, tz, at_most=pace.daily_cap) if capped else None
            remaining = allowance_left(pace, sent, warm, now, tz)
            if remaining is not None:
                if remaining == 0:
                    return "capped"
                limit = min(limit, remaining)
        rows = dq.claim(
            conn,
            campaign_id=camp.id,
            sender=sender,
            now=now,
            lease_until=lease_until,
            limit=limit,
            zones=zones,
        )
        rows = claim_care.after_claim(conn, rows, care, now, tz, unpaced=pace.unpaced)
        if pace.unpaced or not rows:
            if camp.step is not None:  # decided now, in the claim's transaction (decision 70)
                rows = _followups().recheck(conn, camp.step, rows, now)
            return rows
        nxt = now
        for _ in rows:
            nxt = claim_care.slowed(nxt, next_send_at(nxt, pace, self.rng), care.get(sender))
        iq.set_next_send(conn, sender, nxt)
        wakes.append(nxt)
        rows = hold_runs(conn, rows, camp.policy.max_identical, now, wakes)
        if camp.step is not None:  # decided now, in the claim's transaction (decision 70)
            rows = _followups().recheck(conn, camp.step, rows, now)
        return rows


def _jobs(rows: list[dq.ClaimedRow], policy: CampaignPolicy) -> list[Job]:
    """Claimed rows as jobs: each row's message, or why its stored content cannot be sent."""
    jobs = []
    for row in rows:
        try:
            jobs.append(Job(row, policy, message_from_dict(row.content)))
        except ValueError as exc:
            jobs.append(Job(row, policy, None, error=f"unsendable content: {exc}"))
    return jobs


__all__ = ["Claimer", "Job", "RunningCampaign"]
