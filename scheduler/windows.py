"""Sending windows in the campaign's timezone (overnight windows such as 22:00-06:00 too),
or in each recipient's (``[schedule] recipient_timezone``: :func:`open_zones`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, time, timedelta
from functools import lru_cache
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


@lru_cache(maxsize=1024)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def open_zones(
    now: datetime, zones: Iterable[str], window: tuple[time, time] | None
) -> tuple[list[str], datetime | None]:
    """Recipient time: the ``zones`` (IANA names) whose local ``window`` is open at
    ``now``, and the first moment another of them opens (None: none closed). A claim
    takes only rows of the open zones (``deliveries.recipient_tz``): a campaign has few
    distinct zones, so this is a handful of calls per tick whatever its size."""
    opened: list[str] = []
    reopen: datetime | None = None
    for name in zones:
        zone = _zone(name)
        if in_window(now, zone, window):
            opened.append(name)
            continue
        at = next_window_open(now, zone, window)
        reopen = at if reopen is None else min(reopen, at)
    return opened, reopen


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
