"""The overview: what is sending now, each sender's day, replies waiting, and the senders
that need someone, with the action in plain words (the dashboard's first page and
``GET /api/v1/overview``).

Read-only, and cheap whatever the number of campaigns and senders: one listing of the
running campaigns with their counts (:func:`campaigns.service.list_campaigns`, one count
query for the page), their holds (:func:`scheduler.holds.campaign_holds`, whose cost
its module states), one read of every sender row, its usage today and care
(:mod:`scheduler.sender_usage`, :mod:`scheduler.care_view`: bulk reads), and one count of
recent replies. Nothing here is read per campaign or per sender by a loop of queries of
its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine

from campaigns import instances as domain
from campaigns import lifecycle
from campaigns.service import list_campaigns
from scheduler import health
from scheduler.care_view import SenderCare, sender_care
from scheduler.holds import campaign_holds, unpause_advice
from scheduler.sender_usage import sender_usage
from storage import states
from storage.queries import instances as iq
from storage.queries import replies as rq

#: running campaigns the overview lists (the rest are counted)
RUNNING_SHOWN = 50
#: the window of "replies waiting": replies received in the last day
REPLY_WINDOW = timedelta(hours=24)
#: states in which a sender cannot send until someone links it again
_LOGGED_OUT = ("logged_out", "created", "waiting_scan")


@dataclass(frozen=True)
class RunningCampaign:
    """A running campaign: its progress and, when it waits, why and what lifts it."""

    id: int
    name: str
    total: int
    #: recipients done (sent, delivered, read, failed, skipped: no longer waiting)
    done: int
    sent: int
    failed: int
    queued: int
    percent: int
    #: why it waits, in one sentence (None: it is sending)
    waiting: str | None
    #: what lifts the wait, in plain words (None: nothing to do, or it is sending)
    action: str | None


@dataclass(frozen=True)
class SenderDay:
    """A sender's day: sends today against the daily cap and the warm-up allowance."""

    instance_id: str
    label: str
    state: str
    sends_today: int
    daily_cap: int | None
    warmup_day: int | None
    warmup_allowance: float | None
    warmup_used: float | None
    allowance_left: int | None
    health_level: str


@dataclass(frozen=True)
class Attention:
    """A sender that needs someone: what is wrong and what to do, in plain words."""

    instance_id: str
    label: str
    problem: str
    action: str


@dataclass(frozen=True)
class Overview:
    """Everything the overview page shows."""

    at: datetime
    running: list[RunningCampaign]
    running_total: int
    scheduled_total: int
    senders: list[SenderDay]
    replies_last_day: int
    opt_outs_last_day: int
    attention: list[Attention]


_DONE = (states.SENT, states.DELIVERED, states.READ, states.FAILED, states.SKIPPED)


def _attention(record: domain.InstanceRecord, care: SenderCare | None) -> list[Attention]:
    """The reasons ``record`` needs someone (none: it is fine)."""
    out: list[Attention] = []

    def add(problem: str, action: str) -> None:
        out.append(Attention(record.instance_id, record.label, problem, action))

    cooling = care is not None and care.health_level in (health.HIGH, health.CRITICAL)
    reason = record.paused_reason
    if record.state in _LOGGED_OUT:
        add(
            "logged out: paused, nothing is sent through it until it is linked again"
            if record.state == "logged_out"
            else "not linked to a phone yet",
            "link it: show its QR code on the Instances page and scan it with the phone",
        )
    elif reason is not None and not (cooling and reason.startswith(health.PAUSE_PREFIX)):
        add(f"paused: {reason}", unpause_advice(record.instance_id, reason)[0])
    if care is not None and care.health_level == health.CRITICAL:
        add(
            f"health critical ({care.health_score:g}): paused until someone resumes it",
            "check the phone's account is safe, then resume it on the Instances page",
        )
    elif care is not None and care.health_level == health.HIGH:
        when = care.health_resume_at
        add(
            f"health high ({care.health_score:g}): paused to cool down"
            + (f", resumes by itself at {when:%Y-%m-%d %H:%M} UTC" if when else ""),
            "wait for the cool-down; send less to new contacts for a while",
        )
    if record.state not in _LOGGED_OUT and not record.webhook_url_registered:
        add(
            "its webhook is not registered: replies and delivery receipts do not arrive",
            "register the webhook on the Instances page",
        )
    return out


def overview(engine: Engine, now: datetime) -> Overview:
    """The overview at ``now`` (see the module doc for its cost)."""
    running = list_campaigns(engine, state=lifecycle.RUNNING, archived="any", limit=RUNNING_SHOWN)
    scheduled = list_campaigns(engine, state=lifecycle.SCHEDULED, archived="any", limit=0)
    with engine.connect() as conn:
        holds = campaign_holds(conn, [c.id for c in running.items], now)
        records = [r for r in domain.list_all(conn) if r.state != iq.GONE]
        ids = [r.instance_id for r in records]
        usage = sender_usage(conn, ids, now)
        care = sender_care(conn, ids, now, usage)
        replies, opt_outs = rq.received_since(conn, now - REPLY_WINDOW)
    shown: list[RunningCampaign] = []
    for c in running.items:
        done = sum(c.counts.get(s, 0) for s in _DONE)
        hold = holds.get(c.id)
        primary = hold.primary if hold is not None else None
        shown.append(
            RunningCampaign(
                id=c.id,
                name=c.name,
                total=c.total,
                done=done,
                sent=sum(c.counts.get(s, 0) for s in (states.SENT, states.DELIVERED, states.READ)),
                failed=c.counts.get(states.FAILED, 0),
                queued=c.counts.get(states.QUEUED, 0),
                percent=100 * done // c.total if c.total else 0,
                waiting=None if hold is None else hold.line(),
                action=None if primary is None else primary.action,
            )
        )
    days = [
        SenderDay(
            instance_id=r.instance_id,
            label=r.label,
            state=r.state,
            sends_today=usage[r.instance_id].sends_today,
            daily_cap=usage[r.instance_id].daily_cap,
            warmup_day=care[r.instance_id].warmup_day if r.instance_id in care else None,
            warmup_allowance=(
                care[r.instance_id].warmup_allowance if r.instance_id in care else None
            ),
            warmup_used=care[r.instance_id].warmup_used if r.instance_id in care else None,
            allowance_left=care[r.instance_id].allowance_left if r.instance_id in care else None,
            health_level=care[r.instance_id].health_level if r.instance_id in care else "low",
        )
        for r in records
    ]
    attention = [a for r in records for a in _attention(r, care.get(r.instance_id))]
    return Overview(
        at=now,
        running=shown,
        running_total=running.total,
        scheduled_total=scheduled.total,
        senders=days,
        replies_last_day=replies,
        opt_outs_last_day=opt_outs,
        attention=attention,
    )


__all__ = ["Attention", "Overview", "RunningCampaign", "SenderDay", "overview"]
