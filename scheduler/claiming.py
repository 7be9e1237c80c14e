"""Claiming: which running campaigns to serve, and one sender's due rows at its pace.

Paced senders reserve their next slot (``instances.next_send_at``, a conditional UPDATE)
and claim in the same transaction; unpaced ones claim a batch. A daily cap is counted
and enforced inside the claim's transaction (see :meth:`Claimer._claim_sender`).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import Connection, Engine, select

from campaigns import lifecycle
from gateway.messages import Message, message_from_dict
from gateway.outcomes import SendOutcome
from scheduler.pacing import cap_remaining, next_send_at, slots_per_claim
from scheduler.policy import CampaignPolicy, policy_from_spec
from scheduler.sender_usage import sends_today
from scheduler.windows import next_local_day_start
from storage import tables
from storage.queries import deliveries as dq
from storage.queries import instances as iq

log = logging.getLogger("gatecast.dispatch")

_campaigns = tables.campaigns


@dataclass
class RunningCampaign:
    """A running campaign as the dispatcher serves it (re-read every few seconds)."""

    id: int
    policy: CampaignPolicy
    senders: list[str]
    senders_checked_at: datetime


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


@dataclass(eq=False)
class Claimer:
    """Keeps the running campaigns and claims their due rows, sender by sender."""

    engine: Engine
    batch_size: int
    lease: timedelta
    campaign_ids: list[int] | None
    rng: random.Random
    #: campaign id -> the running campaign (the dict is never replaced: others read it)
    campaigns: dict[int, RunningCampaign] = field(default_factory=dict, init=False)

    def running(self, conn: Connection, now: datetime) -> tuple[list[RunningCampaign], set[int]]:
        """The watched running campaigns, and the ids of those that stopped running."""
        stmt = select(_campaigns.c.id, _campaigns.c.spec, _campaigns.c.timezone).where(
            _campaigns.c.state == lifecycle.RUNNING
        )
        if self.campaign_ids is not None:
            stmt = stmt.where(_campaigns.c.id.in_(self.campaign_ids))
        out: list[RunningCampaign] = []
        seen: set[int] = set()
        for cid, spec, tz in conn.execute(stmt.order_by(_campaigns.c.id)):
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
                self.campaigns[cid] = cached
            out.append(cached)
        gone = set(self.campaigns) - seen
        for cid in gone:
            del self.campaigns[cid]
        return out, gone

    def any_running(self) -> bool:
        """True while a watched campaign is running."""
        stmt = select(_campaigns.c.id).where(_campaigns.c.state == lifecycle.RUNNING)
        if self.campaign_ids is not None:
            stmt = stmt.where(_campaigns.c.id.in_(self.campaign_ids))
        with self.engine.connect() as conn:
            return conn.execute(stmt.limit(1)).first() is not None

    def claim_for(self, camp: RunningCampaign, now: datetime, wakes: list[datetime]) -> list[Job]:
        """Claim the campaign's due rows of every sender that may send now; the moments
        worth waking up for (next slots, due rows, the next day under a cap) go to
        ``wakes``."""
        policy = camp.policy
        pace = policy.pace
        jobs: list[Job] = []
        lease_until = now + self.lease
        with self.engine.begin() as conn:
            paused = iq.pause_state(conn, camp.senders)
            unknown = [s for s in camp.senders if s not in paused]
            if unknown:  # a sender with no instances row yet: create it (pace state lives there)
                iq.ensure(conn, unknown, now=now)
            ready = [s for s in camp.senders if paused.get(s) is None]
            if not ready:
                return []
            times = iq.next_send_times(conn, ready)
        per_sender = max(1, self.batch_size // len(ready))
        for sender in ready:
            slot = times.get(sender)
            if not pace.unpaced and slot is not None and slot > now:
                wakes.append(slot)
                continue
            claimed = self._claim_sender(camp, sender, now, lease_until, per_sender, wakes)
            if claimed == "capped":
                wakes.append(next_local_day_start(now, policy.timezone))
                continue
            if claimed == "taken":  # paused meanwhile, or another worker holds the slot
                continue
            rows = claimed
            if not rows:
                with self.engine.connect() as conn:
                    due = dq.next_due_at(conn, camp.id, [sender])
                if due is not None:
                    wakes.append(max(due, now))
            for row in rows:
                try:
                    jobs.append(Job(row, policy, message_from_dict(row.content)))
                except ValueError as exc:
                    jobs.append(Job(row, policy, None, error=f"unsendable content: {exc}"))
        return jobs

    def _claim_sender(
        self,
        camp: RunningCampaign,
        sender: str,
        now: datetime,
        lease_until: datetime,
        per_sender: int,
        wakes: list[datetime],
    ) -> list[dq.ClaimedRow] | Literal["capped", "taken"]:
        """Claim one sender's next rows: the rows, ``"capped"`` (daily cap reached) or
        ``"taken"`` (the sender is paused, or another worker holds its pace slot).

        One transaction that first takes the sender's row (the pace slot's conditional
        UPDATE, or a plain row lock when unpaced with a cap), so the daily-cap count and the
        claim are atomic across workers: a second worker waits for the first one's claim to
        commit and then counts its rows, and the cap is never exceeded.
        """
        pace = camp.policy.pace
        capped = pace.daily_cap is not None
        with self.engine.begin() as conn:
            if pace.unpaced:
                if capped and not iq.lock_unpaused(conn, sender):
                    return "taken"
                limit = per_sender
            else:
                # the conditional UPDATE makes this worker the only one using the slot
                if not iq.reserve_slot(conn, sender, now=now, next_at=now):
                    return "taken"
                limit = slots_per_claim(pace, per_sender)
            if capped:
                sent = sends_today(conn, sender, now, camp.policy.timezone)
                remaining = cap_remaining(pace, sent)
                if remaining is not None:
                    if remaining == 0:
                        conn.rollback()  # the slot stays as it was
                        return "capped"
                    limit = min(limit, remaining)
            rows = dq.claim(
                conn,
                campaign_id=camp.id,
                sender=sender,
                now=now,
                lease_until=lease_until,
                limit=limit,
            )
            if pace.unpaced:
                return rows
            if not rows:
                conn.rollback()  # keep the slot as it was: nothing was due
                return rows
            nxt = now
            for _ in rows:
                nxt = next_send_at(nxt, pace, self.rng)
            iq.set_next_send(conn, sender, nxt)
            wakes.append(nxt)
            return rows


__all__ = ["Claimer", "Job", "RunningCampaign"]
