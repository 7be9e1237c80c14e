"""The final check before sending: how many messages, to whom, through which senders,
from when until around when (the one home of the send-time estimate).

:func:`estimate_sends` is the arithmetic: each sender sends its share (the messages
spread evenly over the senders, as sticky senders spread recipients) one mean gap apart
(``scheduler.pacing``: the larger of ``60 / per_minute`` and the random delay, whose
mean is taken), only while the window is open (``scheduler.windows``, in the campaign's
zone; a campaign in recipient time is estimated in the campaign's zone too) and at most
``daily_cap`` a local day (what a sender already sent today counts against today's).
:func:`final_check` reads the rest: the recipients as a create counts them
(``campaigns.service.count_recipients``: opted out, cooldown and unrenderable excluded),
the senders (the file's ``instances``, else the connected unpaused ones) and their sends
today, and a recurrence's next start. An estimate, not a promise: retries, failures,
pauses and other campaigns sharing a sender make the real finish later.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from pydantic import Field
from sqlalchemy import Engine

from campaigns.campaign_file import CampaignSpec
from campaigns.segments import describe
from campaigns.service import count_recipients
from scheduler.policy import Pace, policy_of
from scheduler.recurrence import next_fire_time
from scheduler.sender_usage import sends_today_by_sender
from scheduler.windows import in_window, next_local_day_start, next_window_open
from storage.queries import instances as iq
from storage.types import utcnow

#: local days an estimate looks ahead before it calls the finish "more than a year"
MAX_DAYS = 366
#: recurrence starts a check lists
OCCURRENCES = 5


def mean_gap_seconds(pace: Pace) -> float:
    """The mean of ``scheduler.pacing.gap_seconds``: E[max(60/per_minute, U(min, max))]."""
    rate = 60.0 / pace.per_minute if pace.per_minute > 0 else 0.0
    lo, hi = pace.delay_min, pace.delay_max
    if hi <= 0 or hi <= rate:
        return max(rate, hi if hi > 0 else 0.0)
    if lo >= rate:
        return (lo + hi) / 2
    # part of the delays fall below the rate's gap: those sends wait the rate's gap
    return (rate * (rate - lo) + (hi * hi - rate * rate) / 2) / (hi - lo)


def _window_close(moment: datetime, tz: ZoneInfo, window: tuple[time, time] | None) -> datetime:
    """When the window open at ``moment`` closes (the next local midnight without one)."""
    if window is None:
        return next_local_day_start(moment, tz)
    local = moment.astimezone(tz)
    close = datetime.combine(local.date(), window[1], tzinfo=tz).astimezone(UTC)
    if close <= moment:
        close = datetime.combine(local.date() + timedelta(days=1), window[1], tzinfo=tz)
        close = close.astimezone(UTC)
    return close


@dataclass(frozen=True)
class SenderFinish:
    """One sender's share and when it is done."""

    messages: int
    first: datetime
    last: datetime | None  # None: beyond MAX_DAYS


def _one_sender(
    n: int,
    start: datetime,
    tz: ZoneInfo,
    window: tuple[time, time] | None,
    gap: float,
    cap: int | None,
    sent_today: int,
) -> SenderFinish:
    t = next_window_open(start, tz, window)
    first: datetime | None = None
    day_end = next_local_day_start(t, tz)
    used = sent_today if t < next_local_day_start(start, tz) else 0
    remaining, last = n, t
    limit = start + timedelta(days=MAX_DAYS)
    while remaining > 0:
        if t > limit:
            return SenderFinish(n, first or t, None)
        if t >= day_end:
            day_end, used = next_local_day_start(t, tz), 0
        left = remaining if cap is None else min(remaining, cap - used)
        segment_end = min(day_end, _window_close(t, tz, window))
        if left <= 0:  # the cap is reached: the next day's window
            t = next_window_open(day_end, tz, window)
            continue
        # sends at t, t + gap, ... before the window closes (or the day ends)
        seconds = (segment_end - t).total_seconds()
        room = (left if seconds > 0 else 0) if gap <= 0 else math.ceil(seconds / gap)
        k = min(left, room)
        if k <= 0:
            t = next_window_open(segment_end, tz, window)
            continue
        if first is None:
            first = t
        last = t + timedelta(seconds=gap * (k - 1))
        remaining -= k
        used += k
        t = last + timedelta(seconds=gap)
        if remaining and not in_window(t, tz, window):
            t = next_window_open(t, tz, window)
    return SenderFinish(n, first or t, last)


@dataclass(frozen=True)
class SendEstimate:
    """When ``messages`` are sent by ``senders`` at a pace: the first and the last send."""

    messages: int
    senders: int
    start: datetime
    finish: datetime | None  # None: no sender, or beyond a year
    mean_gap_seconds: float
    per_sender: int


def estimate_sends(
    messages: int,
    senders: list[str],
    *,
    start: datetime,
    pace: Pace,
    tz: ZoneInfo,
    window: tuple[time, time] | None,
    sent_today: dict[str, int] | None = None,
) -> SendEstimate:
    """The estimate (see the module's docstring); ``start`` is UTC-aware."""
    gap = mean_gap_seconds(pace)
    if not senders or messages <= 0:
        first = next_window_open(start, tz, window)
        return SendEstimate(messages, len(senders), first, first if messages <= 0 else None, gap, 0)
    share = math.ceil(messages / len(senders))
    finishes = []
    for i, sender in enumerate(senders):
        n = min(share, messages - share * i)
        if n <= 0:
            continue
        done = (sent_today or {}).get(sender, 0)
        finishes.append(_one_sender(n, start, tz, window, gap, pace.daily_cap, done))
    first = min(f.first for f in finishes)
    lasts = [f.last for f in finishes]
    finish = None if any(x is None for x in lasts) else max(x for x in lasts if x is not None)
    return SendEstimate(messages, len(senders), first, finish, gap, share)


@dataclass(frozen=True)
class FinalCheck:
    """What creating (or keeping) a campaign file will do, in numbers and one sentence
    (:meth:`in_words`); the descriptions are the API's (``POST /campaigns/check``)."""

    messages: Annotated[int, Field(description="Messages that would be sent")]
    recipients: int
    opted_out: int
    cooldown_excluded: int
    unrenderable: int
    audience: str
    senders: list[str]
    timezone: str
    start: datetime
    finish: Annotated[
        datetime | None, Field(description="Around when the last send happens (null: never)")
    ]
    mean_gap_seconds: float
    per_sender: int
    occurrences: Annotated[list[datetime], Field(description="A recurrence's next starts")]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form: the sentence (``sentence``), then the numbers."""
        return {"sentence": self.in_words(), **asdict(self)}

    def in_words(self) -> str:
        """ "N messages to <audience> through <senders>, starting <time>, finishing
        around <time> at this pace", with the exclusions."""
        zone = ZoneInfo(self.timezone)
        senders = ", ".join(self.senders) if self.senders else "no sender (link one first)"
        text = (
            f"{self.messages:,} message(s) to {self.audience} through {senders}, "
            f"starting {_local(self.start, zone)} {self.timezone}"
        )
        if self.finish is not None:
            text += f", finishing around {_local(self.finish, zone)} at this pace"
        elif self.senders and self.messages:
            text += ", finishing more than a year from now at this pace"
        excluded = [
            (self.opted_out, "opted out"),
            (self.cooldown_excluded, "in the contact cooldown"),
            (self.unrenderable, "cannot be rendered"),
        ]
        parts = [f"{n:,} {what}" for n, what in excluded if n]
        if parts:
            text += f" ({'; '.join(parts)}: not sent)"
        return text + "."


def _local(moment: datetime, zone: ZoneInfo) -> str:
    return f"{moment.astimezone(zone):%Y-%m-%d %H:%M}"


def _audience_words(spec: CampaignSpec) -> str:
    if spec.groups:
        return f"{len(spec.groups)} group(s)"
    if spec.audience is not None:
        if spec.audience.segment:
            return f"segment {spec.audience.segment}"
        return describe(spec.audience.definition())
    return f"list {spec.list}"


def final_check(
    engine: Engine,
    spec: CampaignSpec,
    *,
    now: datetime | None = None,
    default_cooldown_hours: float = 0.0,
) -> FinalCheck:
    """The final check of ``spec`` now (nothing stored); the create's refusals apply
    (``CampaignSetupError`` naming the field)."""
    now = now or utcnow()
    counts = count_recipients(engine, spec, default_cooldown_hours=default_cooldown_hours, now=now)
    policy = policy_of(spec)
    with engine.connect() as conn:
        senders = list(spec.instances) or iq.usable_ids(conn)
        today = sends_today_by_sender(conn, senders, now, policy.timezone) if senders else {}
    start = max(spec.start_at_utc() or now, now)
    occurrences: list[datetime] = []
    if spec.schedule.cron:
        occurrences = next_occurrences(spec.schedule.cron, spec.schedule.timezone, start)
        start = occurrences[0] if occurrences else start
    estimate = estimate_sends(
        counts.messages,
        senders,
        start=start,
        pace=policy.pace,
        tz=policy.timezone,
        window=policy.window,
        sent_today=today,
    )
    return FinalCheck(
        messages=counts.messages,
        recipients=counts.recipients,
        opted_out=counts.opted_out,
        cooldown_excluded=counts.cooldown_excluded,
        unrenderable=counts.unrenderable,
        audience=_audience_words(spec),
        senders=senders,
        timezone=spec.schedule.timezone,
        start=estimate.start,
        finish=estimate.finish,
        mean_gap_seconds=estimate.mean_gap_seconds,
        per_sender=estimate.per_sender,
        occurrences=occurrences,
    )


def next_occurrences(
    cron: str, timezone: str, after: datetime, count: int = OCCURRENCES
) -> list[datetime]:
    """The next ``count`` starts of a recurrence after ``after`` (UTC-aware)."""
    out: list[datetime] = []
    moment = after - timedelta(microseconds=1)
    for _ in range(count):
        nxt = next_fire_time(cron, timezone, moment)
        if nxt is None:
            break
        out.append(nxt.astimezone(UTC))
        moment = nxt
    return out


__all__ = [
    "FinalCheck",
    "SendEstimate",
    "estimate_sends",
    "final_check",
    "mean_gap_seconds",
    "next_occurrences",
]
