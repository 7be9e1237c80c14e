"""A campaign's start written without a date, as a person says it: ``"10:00"`` (the next
10:00), ``"tomorrow 10:00"``, ``"monday 10:00"`` or ``"next monday 10:00"`` (the coming
Monday), ``"today 18:00"``; in the campaign's timezone. A file that says so never goes
stale: the start is fixed to a date when the campaign is created (or its dry run checked).
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
#: what a relative start may say, for the message that refuses anything else
FORMS = '"10:00", "today 18:00", "tomorrow 09:00", "monday 10:00", "next friday 09:30"'

_PHRASE = re.compile(
    r"^(?:(?P<next>next)\s+)?(?:(?P<day>[a-z]+)\s+)?(?P<hour>[0-9]{1,2}):(?P<minute>[0-9]{2})$"
)


def _weekday(word: str) -> int | None:
    """Monday 0 ... Sunday 6 for a day's name or its first three letters ("mon")."""
    for number, name in enumerate(WEEKDAYS):
        if len(word) >= 3 and name.startswith(word):
            return number
    return None


def looks_relative(text: str) -> bool:
    """True when ``text`` is not a date but a time of day, maybe after a day word."""
    return bool(_PHRASE.match(" ".join(text.lower().split())))


def resolve_start(text: str, zone: ZoneInfo, now: datetime) -> datetime:
    """The local date and time (naive, in ``zone``) that ``text`` names as seen at the
    aware ``now``: the first such moment after ``now`` ("10:00" at 11:00 is tomorrow's).
    ``"today HH:MM"`` is today's even when past (a start past is refused at create).
    Raises ValueError saying what is accepted."""
    found = _PHRASE.match(" ".join(text.lower().split()))
    if found is None:
        raise ValueError(f"{text!r} is not a start: give a date and time or one of {FORMS}")
    hour, minute = int(found["hour"]), int(found["minute"])
    if hour > 23 or minute > 59:
        raise ValueError(f"{text!r}: {hour:02d}:{minute:02d} is not a time of day (00:00-23:59)")
    at = time(hour, minute)
    local = now.astimezone(zone)
    today = local.date()
    day, wants_next = found["day"], found["next"] is not None
    if day is None:
        if wants_next:
            raise ValueError(f"{text!r}: next what? (e.g. next monday {at:%H:%M})")
        return _first_after(local, [today, today + timedelta(days=1)], at)
    if day in ("today", "tomorrow") and not wants_next:
        chosen = today if day == "today" else today + timedelta(days=1)
        return datetime.combine(chosen, at)
    weekday = _weekday(day)
    if weekday is None:
        raise ValueError(
            f"{text!r}: {day!r} is not a day (a weekday, today or tomorrow; e.g. {FORMS})"
        )
    ahead = (weekday - today.weekday()) % 7
    first = today + timedelta(days=ahead)
    return _first_after(local, [first, first + timedelta(days=7)], at)


def _first_after(local_now: datetime, days: list[date], at: time) -> datetime:
    """The first of ``days`` at ``at`` that is after ``local_now`` (naive local time)."""
    zone = local_now.tzinfo
    for day in days:
        candidate = datetime.combine(day, at)
        if candidate.replace(tzinfo=zone) > local_now:
            return candidate
    return datetime.combine(days[-1], at)


__all__ = ["FORMS", "WEEKDAYS", "looks_relative", "resolve_start"]
