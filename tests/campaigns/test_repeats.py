"""The schedule picker's shapes <-> the campaign file's crontab (campaigns.repeats), and
the next runs counted from the start (scheduler.recurrence.upcoming_starts)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from campaigns.campaign_file import parse_schedule
from campaigns.repeats import (
    RepeatError,
    describe_repeat,
    make_repeat,
    read_repeat,
    repeat_cron,
)
from scheduler.recurrence import upcoming_starts


@pytest.mark.parametrize(
    ("every", "times", "days", "day", "cron", "words"),
    [
        ("day", ["09:30"], None, None, "30 9 * * *", "Every day at 09:30"),
        ("day", ["17:30", "9:30"], None, None, "30 9,17 * * *", "Every day at 09:30 and 17:30"),
        (
            "week",
            ["09:30"],
            ["thu", "Monday"],
            None,
            "30 9 * * MON,THU",
            "Every Monday and Thursday at 09:30",
        ),
        (
            "week",
            ["08:00"],
            ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
            None,
            "0 8 * * *",
            "Every day at 08:00",  # all seven weekdays is every day
        ),
        ("month", ["08:00"], None, 15, "0 8 15 * *", "Monthly on the 15th at 08:00"),
        (
            "month",
            ["07:05"],
            None,
            31,
            "5 7 31 * *",
            "Monthly on the 31st at 07:05 (months without that day are skipped)",
        ),
    ],
)
def test_shape_to_crontab_and_back(
    every: str,
    times: list[str],
    days: list[str] | None,
    day: int | None,
    cron: str,
    words: str,
) -> None:
    shape = make_repeat(every, times, days, day)
    assert repeat_cron(shape) == cron
    assert describe_repeat(shape) == words
    assert read_repeat(cron) == shape
    parse_schedule({"cron": cron, "timezone": "Europe/London"})  # the file takes it


@pytest.mark.parametrize(
    "cron",
    [
        "*/15 * * * *",  # steps
        "0 9 * * 1",  # numbered weekday: crontab and APScheduler differ
        "0 9 1 * MON",  # day of month and weekday
        "0 9 * 6 *",  # a month
        "0-30 9 * * *",  # a range of minutes
        "0 9-17 * * *",  # a range of hours
        "0 9 * *",  # four fields
    ],
)
def test_crontab_that_fits_no_shape_stays_advanced(cron: str) -> None:
    assert read_repeat(cron) is None


@pytest.mark.parametrize(
    ("every", "times", "days", "day", "field"),
    [
        ("day", ["09:30", "17:45"], None, None, "times"),
        ("day", ["25:00"], None, None, "times"),
        ("day", [""], None, None, "times"),
        ("week", ["09:00"], [], None, "days"),
        ("week", ["09:00"], ["funday"], None, "days"),
        ("month", ["09:00"], None, 32, "day"),
        ("month", ["09:00"], None, None, "day"),
        ("hour", ["09:00"], None, None, "every"),
    ],
)
def test_a_shape_crontab_cannot_hold_names_its_field(
    every: str, times: list[str], days: list[str] | None, day: int | None, field: str
) -> None:
    with pytest.raises(RepeatError) as caught:
        make_repeat(every, times, days, day)
    assert caught.value.field == field


def test_next_runs_count_from_the_start_not_from_now() -> None:
    # the bug of issue 31: on Mon 7 Dec a start on Mon 14 Dec previewed "Mon 7 Dec"
    now = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    start = datetime(2026, 12, 14, 9, 30, tzinfo=UTC)  # Europe/London is UTC in winter
    runs = upcoming_starts("30 9 * * MON,THU", "Europe/London", start, now, 3)
    assert [f"{t:%a %d %H:%M}" for t in runs] == ["Mon 14 09:30", "Thu 17 09:30", "Mon 21 09:30"]
    # a start already past: the runs ahead of now
    runs = upcoming_starts("30 9 * * MON,THU", "Europe/London", now.replace(day=1), now, 1)
    assert runs == [datetime(2026, 12, 7, 9, 30, tzinfo=UTC)]
