"""A recurrence in plain shapes: every day, chosen weekdays or one day of the month, at
times; written as (and read back from) the crontab line the campaign file's
``schedule.cron`` holds.

The dashboard's schedule picker speaks these shapes; the campaign file keeps crontab
(one rule, :mod:`scheduler.recurrence`, fires it). A crontab line fits a shape when it
is ``M H[,H...] * * *`` (every day), ``M H[,H...] * * DAY[,DAY...]`` with weekday names
(chosen weekdays; all seven is every day) or ``M H[,H...] N * *`` (monthly on day N);
anything else (steps, ranges of minutes, numbered weekdays, whose meaning differs
between crontab and APScheduler) stays crontab, the picker's "Advanced".

One crontab line holds one minute past the hour, so the times of one shape must share
their minutes (09:30 and 17:30, not 09:30 and 17:45).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Every = Literal["day", "week", "month"]

#: weekday names as the campaign file's crontab writes them, Monday first
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_NAMES = dict(
    zip(
        WEEKDAYS,
        ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
        strict=True,
    )
)
_TIME = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
_NUMBER = re.compile(r"^\d{1,2}$")


class RepeatError(ValueError):
    """A shape that cannot be written as one crontab line: ``field`` names the part."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name
        self.message = message


@dataclass(frozen=True)
class Repeat:
    """Every day (``days`` empty), chosen weekdays (``days``) or monthly on ``day``, at
    ``times`` ("HH:MM", in the campaign's timezone)."""

    every: Every
    times: tuple[str, ...]
    days: tuple[str, ...] = field(default_factory=tuple)
    day: int | None = None

    def as_dict(self) -> dict[str, object]:
        """The shape as JSON: ``every``, ``times``, ``days``, ``day``."""
        return {
            "every": self.every,
            "times": list(self.times),
            "days": list(self.days),
            "day": self.day,
        }


def _time(text: str) -> tuple[int, int]:
    found = _TIME.match(text.strip())
    if not found:
        raise RepeatError("times", f"{text.strip()!r} is not a time of day (HH:MM, 24-hour)")
    return int(found.group(1)), int(found.group(2))


def make_repeat(
    every: str, times: list[str], days: list[str] | None = None, day: int | None = None
) -> Repeat:
    """A checked :class:`Repeat` (weekdays by their first three letters, times sorted);
    :class:`RepeatError` naming ``every``, ``times``, ``days`` or ``day``."""
    if every not in ("day", "week", "month"):
        raise RepeatError("every", "must be day, week or month")
    clock = sorted({_time(t) for t in times if t.strip()})
    if not clock:
        raise RepeatError("times", "give at least one time of day (HH:MM)")
    if len({m for _, m in clock}) > 1:
        raise RepeatError(
            "times",
            "the times must share their minutes (09:30 and 17:30, not 09:30 and 17:45): "
            "one schedule repeats at one minute past the hour; use Advanced or two campaigns",
        )
    text = tuple(f"{h:02d}:{m:02d}" for h, m in clock)
    if every == "day":
        return Repeat("day", text)
    if every == "month":
        if day is None or not 1 <= day <= 31:
            raise RepeatError("day", "choose a day of the month from 1 to 31")
        return Repeat("month", text, day=day)
    names = {d.strip().lower()[:3] for d in days or [] if d.strip()}
    unknown = sorted(names - set(WEEKDAYS))
    if unknown:
        raise RepeatError("days", f"unknown weekday {unknown[0]!r} (mon, tue ... sun)")
    if not names:
        raise RepeatError("days", "choose at least one weekday")
    if len(names) == len(WEEKDAYS):
        return Repeat("day", text)
    return Repeat("week", text, days=tuple(d for d in WEEKDAYS if d in names))


def repeat_cron(repeat: Repeat) -> str:
    """The crontab line of ``repeat`` (``30 9 * * MON,THU``)."""
    clock = [_time(t) for t in repeat.times]
    minute = str(clock[0][1])
    hours = ",".join(str(h) for h, _ in clock)
    if repeat.every == "month":
        return f"{minute} {hours} {repeat.day} * *"
    if repeat.every == "week":
        return f"{minute} {hours} * * {','.join(d.upper() for d in repeat.days)}"
    return f"{minute} {hours} * * *"


def read_repeat(cron: str) -> Repeat | None:
    """The shape ``cron`` fits, or None (it stays crontab: the picker's Advanced)."""
    parts = cron.split()
    if len(parts) != 5:
        return None
    minute, hour, dom, month, dow = parts
    if month != "*" or not _NUMBER.match(minute) or int(minute) > 59:
        return None
    hours = hour.split(",")
    if not all(_NUMBER.match(h) and int(h) <= 23 for h in hours):
        return None
    times = [f"{int(h):02d}:{int(minute):02d}" for h in hours]
    if dom != "*":
        if dow != "*" or not _NUMBER.match(dom):
            return None
        try:
            return make_repeat("month", times, day=int(dom))
        except RepeatError:
            return None
    if dow == "*":
        return make_repeat("day", times)
    days = dow.lower().split(",")
    if not all(d in WEEKDAYS for d in days):
        return None
    return make_repeat("week", times, days=days)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def describe_repeat(repeat: Repeat) -> str:
    """``repeat`` in words: "Every Monday and Thursday at 09:30"."""
    at = "at " + _and(list(repeat.times))
    if repeat.every == "month":
        note = " (months without that day are skipped)" if (repeat.day or 0) > 28 else ""
        return f"Monthly on the {_ordinal(repeat.day or 1)} {at}{note}"
    if repeat.every == "week":
        return f"Every {_and([_DAY_NAMES[d] for d in repeat.days])} {at}"
    return f"Every day {at}"


__all__ = [
    "WEEKDAYS",
    "Repeat",
    "RepeatError",
    "describe_repeat",
    "make_repeat",
    "read_repeat",
    "repeat_cron",
]
