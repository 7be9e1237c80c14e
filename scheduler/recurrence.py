"""Recurring campaigns: each cron occurrence becomes a child campaign row, started as usual.

The child is unique on (parent_id, occurrence_at), so two fires of the same occurrence
(two schedulers, a restart mid-fire) create it once. Occurrences missed while the
service was down: only the latest one is considered, and the missed-start policy
decides whether it runs late or is recorded as failed.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger
from sqlalchemy import Engine, func, insert, select
from sqlalchemy.exc import IntegrityError

from campaigns import lifecycle
from scheduler.starts import StartResult, start_campaign
from storage import tables

log = logging.getLogger("gatecast.scheduler")

_campaigns = tables.campaigns


def make_trigger(cron: str, tz: str | ZoneInfo) -> CronTrigger:
    """An APScheduler cron trigger for a five-field crontab line in timezone ``tz``."""
    return CronTrigger.from_crontab(cron, timezone=tz)


def fire_times(cron: str, tz: str | ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
    """Every fire time of ``cron`` in (after, until], as UTC-aware datetimes."""
    trigger = make_trigger(cron, tz)
    out: list[datetime] = []
    previous: datetime | None = None
    current = after + timedelta(microseconds=1)
    while True:
        nxt = trigger.get_next_fire_time(previous, current)
        if nxt is None or nxt > until:
            return out
        out.append(nxt.astimezone(until.tzinfo))
        previous = nxt
        current = nxt + timedelta(microseconds=1)
        if len(out) > 10_000:
            return out


#: the narrowest window :func:`latest_fire_time` looks back first
_FIRST_LOOK_BACK = timedelta(minutes=1)
#: the resolution of its search: crontab fire times are whole seconds
_RESOLUTION = timedelta(seconds=1)


def _fire_at_or_after(trigger: CronTrigger, moment: datetime) -> datetime | None:
    fire: datetime | None = trigger.get_next_fire_time(None, moment)
    return fire


def next_fire_time(cron: str, tz: str | ZoneInfo, after: datetime) -> datetime | None:
    """The first fire time of ``cron`` after ``after`` (UTC-aware), or None."""
    nxt = make_trigger(cron, tz).get_next_fire_time(None, after + timedelta(microseconds=1))
    return None if nxt is None else nxt.astimezone(after.tzinfo)


def upcoming_starts(
    cron: str, tz: str | ZoneInfo, start_at: datetime | None, now: datetime, count: int = 5
) -> list[datetime]:
    """The next ``count`` occurrences of a recurrence starting at ``start_at`` (None: at
    once), as UTC-aware datetimes: at or after the start (an occurrence at the start
    counts, as in :func:`catch_up`) and not before ``now``. The one answer to "when does
    it run next", for the composer's preview, the final check and ``campaign show``."""
    moment = max(start_at or now, now) - timedelta(microseconds=1)
    out: list[datetime] = []
    for _ in range(count):
        nxt = next_fire_time(cron, tz, moment)
        if nxt is None:
            break
        out.append(nxt.astimezone(UTC))
        moment = nxt
    return out


def latest_fire_time(
    cron: str, tz: str | ZoneInfo, after: datetime, until: datetime
) -> datetime | None:
    """The latest fire time of ``cron`` in (after, until], or None.

    Looks back from ``until`` in windows that double in width (a minute, two, four...)
    until one holds a fire time, then narrows that window by bisection to the second:
    a few dozen trigger evaluations whatever the frequency and however far ``after`` is.
    """
    trigger = make_trigger(cron, tz)
    floor = after + timedelta(microseconds=1)
    if floor > until:
        return None
    # a moment from which a fire time <= until follows, and one from which none does
    hit: datetime | None = None
    miss = until + _RESOLUTION
    width = _FIRST_LOOK_BACK
    while hit is None:
        start = max(floor, until - width)
        nxt = _fire_at_or_after(trigger, start)
        if nxt is not None and nxt <= until:
            hit = start
        elif start == floor:
            return None
        else:
            miss = start
            width *= 2
    # invariant: a fire time in [hit, until], none in [miss, until]
    while miss - hit > _RESOLUTION:
        middle = hit + (miss - hit) / 2
        nxt = _fire_at_or_after(trigger, middle)
        if nxt is not None and nxt <= until:
            hit = middle
        else:
            miss = middle
    latest = _fire_at_or_after(trigger, hit)
    assert latest is not None and latest <= until
    return latest.astimezone(until.tzinfo)


def create_occurrence(engine: Engine, parent_id: int, occurrence_at: datetime) -> int | None:
    """Insert the child campaign of ``parent_id`` for ``occurrence_at``; None if it exists."""
    with engine.begin() as conn:
        parent = conn.execute(select(_campaigns).where(_campaigns.c.id == parent_id)).first()
        if parent is None:
            return None
        tz = ZoneInfo(parent.timezone or "UTC")
        local = occurrence_at.astimezone(tz)
        spec = dict(parent.spec or {})
        schedule = dict(spec.get("schedule") or {})
        schedule["cron"] = None
        schedule["start"] = local.replace(tzinfo=None).isoformat(timespec="minutes")
        spec["schedule"] = schedule
        try:
            with conn.begin_nested():
                result = conn.execute(
                    insert(_campaigns).values(
                        name=f"{parent.name} ({local:%Y-%m-%d %H:%M})"[:300],
                        state=lifecycle.SCHEDULED,
                        spec=spec,
                        message_type=parent.message_type,
                        list_id=parent.list_id,
                        audience=parent.audience,
                        timezone=parent.timezone,
                        start_at=occurrence_at,
                        cron=None,
                        parent_id=parent_id,
                        occurrence_at=occurrence_at,
                        created_at=occurrence_at,
                        updated_at=occurrence_at,
                    )
                )
        except IntegrityError:
            return None
        pk = result.inserted_primary_key
        return None if pk is None else int(pk[0])


def fire_occurrence(
    engine: Engine, parent_id: int, occurrence_at: datetime, *, now: datetime
) -> StartResult | None:
    """Create and start the occurrence (missed-start policy applies); None if it existed."""
    child = create_occurrence(engine, parent_id, occurrence_at)
    if child is None:
        return None
    log.info(
        "recurring campaign %s: occurrence %s is campaign %s",
        parent_id,
        occurrence_at.isoformat(),
        child,
    )
    return start_campaign(engine, child, now=now)


def last_occurrence(engine: Engine, parent_id: int) -> datetime | None:
    """The newest occurrence time already created for ``parent_id``."""
    with engine.connect() as conn:
        value = conn.execute(
            select(func.max(_campaigns.c.occurrence_at)).where(_campaigns.c.parent_id == parent_id)
        ).scalar()
    return value if isinstance(value, datetime) else None


def catch_up(engine: Engine, parent_id: int, *, now: datetime) -> StartResult | None:
    """Fire the latest occurrence due since the last one (or since the start), if any.

    Both a cron job's fire and the catch-up after downtime come here: an occurrence at
    the campaign's start counts, one before it does not.
    """
    with engine.connect() as conn:
        row = conn.execute(
            select(
                _campaigns.c.cron,
                _campaigns.c.timezone,
                _campaigns.c.start_at,
                _campaigns.c.created_at,
            ).where(_campaigns.c.id == parent_id)
        ).first()
    if row is None or not row.cron:
        return None
    last = last_occurrence(engine, parent_id)
    since = last or (row.start_at or row.created_at) - timedelta(microseconds=1)
    due = latest_fire_time(row.cron, row.timezone or "UTC", since, now)
    if due is None:
        return None
    return fire_occurrence(engine, parent_id, due, now=now)
