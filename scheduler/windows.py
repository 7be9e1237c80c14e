"""Sending windows in the campaign's timezone (overnight windows such as 22:00-06:00 too)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo


def in_window(now: datetime, tz: ZoneInfo, window: tuple[time, time] | None) -> bool:
    """True when ``now`` falls inside the local ``window`` [start, end) (None: always)."""
    if window is None:
        return True
    start, end = window
    local = now.astimezone(tz).time().replace(tzinfo=None)
    if start == end:
        return True
    if start < end:
        return start <= local < end
    return local >= start or local < end  # overnight


def next_window_open(now: datetime, tz: ZoneInfo, window: tuple[time, time] | None) -> datetime:
    """The first instant at or after ``now`` (UTC) when the window is open."""
    if in_window(now, tz, window):
        return now
    assert window is not None
    start = window[0]
    local = now.astimezone(tz)
    for days in range(0, 3):
        day = (local + timedelta(days=days)).date()
        candidate = datetime.combine(day, start, tzinfo=tz)
        # a start time inside a DST gap resolves forward through UTC
        candidate_utc = candidate.astimezone(UTC)
        if candidate_utc >= now and in_window(candidate_utc, tz, window):
            return candidate_utc
    return now + timedelta(minutes=1)  # unreachable for sane windows; poll again soon


def local_day_start(now: datetime, tz: ZoneInfo) -> datetime:
    """The UTC instant of local midnight that began the day containing ``now``."""
    local = now.astimezone(tz)
    midnight = datetime.combine(local.date(), time(0, 0), tzinfo=tz)
    return midnight.astimezone(UTC)


def next_local_day_start(now: datetime, tz: ZoneInfo) -> datetime:
    """The UTC instant of the next local midnight after ``now``."""
    local = now.astimezone(tz)
    midnight = datetime.combine(local.date() + timedelta(days=1), time(0, 0), tzinfo=tz)
    return midnight.astimezone(UTC)
