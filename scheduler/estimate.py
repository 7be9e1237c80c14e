"""The final check before sending: how many messages, to whom, through which senders,
from when until around when (the one home of the send-time estimate).

:func:`estimate_sends` is the arithmetic, day by day and window by window, per sender:

- **Shares.** Each recipient goes to the sender a first create gives it
  (``campaigns.delivery_rows.pick_sender``: a contact kept by the sender that last
  messaged it is not followed; without recipients, the messages are spread evenly). A
  sender sends its share one mean gap apart (``scheduler.pacing``: the larger of
  ``60 / per_minute`` and the random delay, whose mean is taken); the senders work in
  parallel and the finish is the last sender's last send.
- **Windows.** Sends happen only while the window is open (``scheduler.windows``): in
  the campaign's zone, or in recipient time in each recipient's own zone (not before the
  start's wall time there, ``campaigns.recipient_time.FirstDue``; a sender sends the rows
  of the zones open at the moment, those whose window closes first first).
- **A day's limit** (a local day of the campaign's zone) is the smaller of the daily
  cap's remainder (what the sender already sent today counts, as the cap counts it:
  ``scheduler.sender_usage``) and the warm-up's (``scheduler.warmup``: the sender's
  allowance that day from its stored care row, less what it used today; a message to a
  new contact uses 1 unit, to a contact the sender knows ``GATECAST_WARMUP_KNOWN_WEIGHT``,
  and a send needs one whole unit left). An unpaced campaign has no warm-up (a gateway
  you own). When the day's limit is spent, the rest waits for the next local day.
- **Margin.** With random delays the finish varies: :attr:`SendEstimate.margin_seconds`
  is two standard deviations of the sum of the biggest share's gaps (about 19 times in
  20 the finish falls within it); the sentence states it ("± N min") when it rounds
  to a minute or more.

:func:`final_check` reads the rest: the recipients as a create counts them
(``campaigns.service.count_recipients``: opted out, cooldown and unrenderable excluded),
the senders (the file's ``instances``, else the linked unpaused ones), their care rows,
the contacts each already knows, their sends today, and a recurrence's next start. The
dry run, ``campaign create`` and the dashboard's final check (``POST /campaigns/check``)
all say this one estimate. An estimate, not a promise: retries, failures, pauses, a
slowed pace at medium health and other campaigns sharing a sender make the real finish
later.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from pydantic import Field
from sqlalchemy import Connection, Engine

from campaigns.campaign_file import CampaignSpec
from campaigns.delivery_rows import pick_sender
from campaigns.recipient_time import FirstDue
from campaigns.segments import describe
from campaigns.service import count_recipients
from scheduler import warmup
from scheduler.policy import Pace, policy_of
from scheduler.recurrence import upcoming_starts
from scheduler.sender_usage import sends_today_by_sender
from scheduler.windows import next_local_day_start, next_window_open
from storage.queries import instances as iq
from storage.queries import sender_care as sc
from storage.queries.sender_care import CareRow
from storage.types import utcnow

#: local days an estimate looks ahead before it calls the finish "more than a year"
MAX_DAYS = 366
#: recurrence starts a check lists
OCCURRENCES = 5
#: the margin is this many standard deviations of the finish
MARGIN_SIGMAS = 2.0


def _gap_moments(pace: Pace) -> tuple[float, float]:
    """E[g] and E[g^2] of ``scheduler.pacing.gap_seconds``: g = max(60/per_minute, U(lo, hi))."""
    rate = 60.0 / pace.per_minute if pace.per_minute > 0 else 0.0
    lo, hi = pace.delay_min, pace.delay_max
    if hi <= 0 or hi <= rate or hi <= lo:
        g = max(rate, hi if hi > 0 else 0.0)
        return g, g * g
    if lo >= rate:
        return (lo + hi) / 2, (lo * lo + lo * hi + hi * hi) / 3
    # part of the delays fall below the rate's gap: those sends wait the rate's gap
    below = (rate - lo) / (hi - lo)
    mean = rate * below + (hi * hi - rate * rate) / 2 / (hi - lo)
    square = rate * rate * below + (hi**3 - rate**3) / 3 / (hi - lo)
    return mean, square


def mean_gap_seconds(pace: Pace) -> float:
    """The mean of ``scheduler.pacing.gap_seconds``: E[max(60/per_minute, U(min, max))]."""
    return _gap_moments(pace)[0]


def margin_seconds(pace: Pace, sends: int) -> float:
    """:data:`MARGIN_SIGMAS` standard deviations of the time ``sends`` sends of one
    sender take (the sum of their ``sends - 1`` random gaps)."""
    mean, square = _gap_moments(pace)
    variance = max(0.0, square - mean * mean)
    return MARGIN_SIGMAS * math.sqrt(variance * max(0, sends - 1))


def _window_close(moment: datetime, tz: ZoneInfo, window: tuple[time, time] | None) -> datetime:
    """When the window open at ``moment`` closes (the next local midnight without one)."""
    if window is None or window[0] == window[1]:
        return next_local_day_start(moment, tz)
    local = moment.astimezone(tz)
    close = datetime.combine(local.date(), window[1], tzinfo=tz).astimezone(UTC)
    if close <= moment:
        close = datetime.combine(local.date() + timedelta(days=1), window[1], tzinfo=tz)
        close = close.astimezone(UTC)
    return close


@dataclass(frozen=True)
class SenderShare:
    """What one sender will send: its messages by recipient zone (``None``: the
    campaign's zone), how many go to contacts it knows, what it did today."""

    sender: str
    zones: dict[str | None, int]
    known: int = 0
    sent_today: int = 0
    #: its stored care row (warm-up day, ramp, use today); None: no warm-up known
    care: CareRow | None = None

    @property
    def messages(self) -> int:
        """The share's size."""
        return sum(self.zones.values())


@dataclass(frozen=True)
class SenderFinish:
    """One sender's share and when it is done."""

    messages: int
    first: datetime
    last: datetime | None  # None: beyond MAX_DAYS


@dataclass
class _Day:
    """How many more sends one sender may start in the local day ending at ``end``
    (None: no limit)."""

    end: datetime
    left: int | None


def _day_limit(
    share: SenderShare, moment: datetime, start: datetime, pace: Pace, tz: ZoneInfo
) -> int | None:
    """The sends the day of ``moment`` allows ``share``'s sender: the smaller of the daily
    cap's and the warm-up's remainders (:mod:`scheduler.warmup`), None: neither limits."""
    first_day = moment < next_local_day_start(start, tz)
    cap = pace.daily_cap
    left = None if cap is None else max(0, cap - (share.sent_today if first_day else 0))
    row = None if pace.unpaced else share.care
    allowance = None if row is None else warmup.allowance(row, moment, tz)
    if row is None or allowance is None:
        return left
    units = allowance - warmup.used(row, moment, tz)
    n = share.messages
    weight = (warmup.weight(True) * share.known + warmup.weight(False) * (n - share.known)) / n
    if units < 1:
        warm = 0
    elif weight <= 0:
        return left
    else:  # a send needs a whole unit left: the last one starts with at least 1
        warm = math.floor((units - 1) / weight + 1e-9) + 1
    return warm if left is None else min(left, warm)


def _zone(name: str | None, tz: ZoneInfo) -> ZoneInfo:
    return tz if name is None else ZoneInfo(name)


def _one_sender(
    share: SenderShare,
    start: datetime,
    tz: ZoneInfo,
    window: tuple[time, time] | None,
    gap: float,
    pace: Pace,
    due: dict[str, datetime],
) -> SenderFinish:
    remaining = {z: n for z, n in share.zones.items() if n > 0}
    zones = {z: _zone(z, tz) for z in remaining}

    def opens(moment: datetime, z: str | None) -> datetime:
        """When zone ``z``'s rows may next be sent: its first due moment (recipient
        time), then its window."""
        at = max(moment, due.get(z, moment)) if z is not None else moment
        return next_window_open(at, zones[z], window)

    t = start
    day = _Day(next_local_day_start(t, tz), _day_limit(share, t, start, pace, tz))
    first: datetime | None = None
    last: datetime | None = None
    limit = start + timedelta(days=MAX_DAYS)
    while remaining:
        if t > limit:
            return SenderFinish(share.messages, first or t, None)
        if t >= day.end:
            day = _Day(next_local_day_start(t, tz), _day_limit(share, t, start, pace, tz))
        if day.left == 0:  # the day's limit is spent: the next local day
            t = day.end
            continue
        moments = {z: opens(t, z) for z in remaining}
        opened = [z for z, at in moments.items() if at == t]
        closed = [at for at in moments.values() if at != t]
        if not opened:
            t = min(closed)
            continue
        closes = {z: _window_close(t, zones[z], window) for z in opened}
        segment_end = min([day.end, *closes.values(), *closed])
        seconds = (segment_end - t).total_seconds()
        room = math.inf if gap <= 0 else math.ceil(seconds / gap)
        if day.left is not None:
            room = min(room, day.left)
        k = int(min(room, sum(remaining[z] for z in opened)))
        if k <= 0:
            t = segment_end
            continue
        todo = k
        for z in sorted(opened, key=lambda z: closes[z]):  # the zone closing first first
            took = min(todo, remaining[z])
            remaining[z] -= took
            todo -= took
            if not remaining[z]:
                del remaining[z]
        if first is None:
            first = t
        last = t + timedelta(seconds=gap * (k - 1))
        if day.left is not None:
            day.left -= k
        t = last + timedelta(seconds=gap)
    return SenderFinish(share.messages, first or t, last)


@dataclass(frozen=True)
class SendEstimate:
    """When ``messages`` are sent by ``senders`` at a pace: the first and the last send."""

    messages: int
    senders: int
    start: datetime
    finish: datetime | None  # None: no sender, or beyond a year
    mean_gap_seconds: float
    per_sender: int  # the biggest share
    margin_seconds: float = 0.0


def even_shares(
    messages: int, senders: list[str], sent_today: dict[str, int] | None = None
) -> list[SenderShare]:
    """``messages`` spread evenly over ``senders`` in the campaign's zone (no recipients
    known, no warm-up)."""
    if not senders or messages <= 0:
        return []
    share = math.ceil(messages / len(senders))
    out = []
    for i, sender in enumerate(senders):
        n = min(share, messages - share * i)
        if n > 0:
            out.append(SenderShare(sender, {None: n}, sent_today=(sent_today or {}).get(sender, 0)))
    return out


def estimate_sends(
    messages: int,
    senders: list[str],
    *,
    start: datetime,
    pace: Pace,
    tz: ZoneInfo,
    window: tuple[time, time] | None,
    sent_today: dict[str, int] | None = None,
    shares: list[SenderShare] | None = None,
    first_due: dict[str, datetime] | None = None,
) -> SendEstimate:
    """The estimate (see the module's docstring); ``start`` is UTC-aware. ``shares``:
    each sender's (default: :func:`even_shares`); ``first_due``: in recipient time, when
    each zone's rows are first due (``campaigns.recipient_time.FirstDue``)."""
    gap = mean_gap_seconds(pace)
    if shares is None:
        shares = even_shares(messages, senders, sent_today)
    shares = [s for s in shares if s.messages > 0]
    if not senders or messages <= 0 or not shares:
        first = next_window_open(start, tz, window)
        return SendEstimate(messages, len(senders), first, first if messages <= 0 else None, gap, 0)
    finishes = [_one_sender(s, start, tz, window, gap, pace, first_due or {}) for s in shares]
    first = min(f.first for f in finishes)
    lasts = [f.last for f in finishes]
    finish = None if any(x is None for x in lasts) else max(x for x in lasts if x is not None)
    biggest = max(s.messages for s in shares)
    return SendEstimate(
        messages, len(senders), first, finish, gap, biggest, margin_seconds(pace, biggest)
    )


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
    margin_seconds: Annotated[
        float,
        Field(
            description="The finish's margin from the random delays: about 19 times in 20 "
            "the last send falls within this many seconds of the finish"
        ),
    ] = 0.0
    unrenderable_words: Annotated[
        str,
        Field(
            description="Who cannot get the message and why, by the variable they lack "
            '("coupon is missing for 2 of 9 contacts: Ana, Bob"; "" when all render)'
        ),
    ] = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form: the sentence (``sentence``), then the numbers."""
        return {"sentence": self.in_words(), **asdict(self)}

    def when(self) -> str:
        """ "starting <time> <zone>, finishing around <time> (± N min) at this pace"."""
        zone = ZoneInfo(self.timezone)
        text = f"starting {_local(self.start, zone)} {self.timezone}"
        if self.finish is not None:
            text += f", finishing around {_local(self.finish, zone)}{_margin(self.margin_seconds)}"
            text += " at this pace"
        elif self.senders and self.messages:
            text += ", finishing more than a year from now at this pace"
        return text

    def in_words(self) -> str:
        """ "N messages to <audience> through <senders>, starting <time>, finishing
        around <time> at this pace", with the exclusions."""
        senders = ", ".join(self.senders) if self.senders else "no sender (link one first)"
        text = f"{self.messages:,} message(s) to {self.audience} through {senders}, {self.when()}"
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


def _margin(seconds: float) -> str:
    """ " (± N min)" (" (± N h)" from two hours), nothing under a minute."""
    minutes = round(seconds / 60)
    if minutes < 1:
        return ""
    if minutes < 120:
        return f" (± {minutes} min)"
    return f" (± {round(minutes / 60)} h)"


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
        # the recipients a create would send to (those excluded by the cooldown are not
        # told apart: the last ones are left out)
        sendable = counts.sendable[: counts.messages]
        shares = _shares(conn, sendable, senders, today, groups=bool(spec.groups))
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
        shares=shares if len(sendable) == counts.messages else None,
        sent_today=today,
        first_due=_first_due(sendable, start, policy.timezone),
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
        margin_seconds=estimate.margin_seconds,
        unrenderable_words=counts.unrenderable_words,
    )


def _first_due(
    sendable: list[tuple[str, str | None]], start: datetime, tz: ZoneInfo
) -> dict[str, datetime]:
    """Recipient time: each zone's first due moment, as the start materialises it (the
    start's wall time in that zone, not before the start)."""
    due = FirstDue(start, tz, start)
    return {zone: due(zone) for zone in {z for _, z in sendable if z is not None}}


def _shares(
    conn: Connection,
    sendable: list[tuple[str, str | None]],
    senders: list[str],
    today: dict[str, int],
    *,
    groups: bool = False,
) -> list[SenderShare]:
    """Each sender's share of ``sendable`` (``(target, zone)``): the sender a create picks
    (``pick_sender``), the recipient zones, the contacts it already knows, its care row."""
    if not senders:
        return []
    mine: dict[str, list[tuple[str, str | None]]] = {}
    for target, zone in sendable:
        sender = pick_sender(target, senders)
        if sender is not None:
            mine.setdefault(sender, []).append((target, zone))
    care = sc.care_rows(conn, list(mine))
    chats = sc.chats_of(conn, [(s, t) for s, rows in mine.items() for t, _ in rows])
    return [
        SenderShare(
            sender,
            dict(Counter(zone for _, zone in rows)),
            # a group counts as known (the claim's rule)
            known=len(rows) if groups else sum(1 for t, _ in rows if (sender, t) in chats),
            sent_today=today.get(sender, 0),
            care=care.get(sender),
        )
        for sender, rows in sorted(mine.items())
    ]


def next_occurrences(
    cron: str, timezone: str, after: datetime, count: int = OCCURRENCES
) -> list[datetime]:
    """The next ``count`` starts of a recurrence at or after ``after`` (UTC-aware)."""
    return upcoming_starts(cron, timezone, after, after, count)


__all__ = [
    "FinalCheck",
    "SendEstimate",
    "SenderShare",
    "estimate_sends",
    "even_shares",
    "final_check",
    "margin_seconds",
    "mean_gap_seconds",
    "next_occurrences",
]
