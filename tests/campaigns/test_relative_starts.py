"""A start without a date resolves to the next such local time in the campaign's zone."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from campaigns.relative_starts import resolve_start

BERLIN = ZoneInfo("Europe/Berlin")
#: a Monday, 11:30 in Berlin
NOW = datetime(2026, 12, 7, 10, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12:00", datetime(2026, 12, 7, 12, 0)),  # still ahead today
        ("10:00", datetime(2026, 12, 8, 10, 0)),  # past today: tomorrow
        ("tomorrow 9:00", datetime(2026, 12, 8, 9, 0)),
        ("today 18:00", datetime(2026, 12, 7, 18, 0)),
        ("monday 10:00", datetime(2026, 12, 14, 10, 0)),  # today's 10:00 is past
        ("Monday 12:00", datetime(2026, 12, 7, 12, 0)),
        ("next  fri 09:30", datetime(2026, 12, 11, 9, 30)),
        ("sunday 08:00", datetime(2026, 12, 13, 8, 0)),
    ],
)
def test_a_relative_start_is_the_next_such_local_time(text: str, expected: datetime) -> None:
    assert resolve_start(text, BERLIN, NOW) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [("next week", "is not a start"), ("blursday 10:00", "is not a day"), ("24:30", "00:00-23:59")],
)
def test_anything_else_is_refused_saying_what_is_accepted(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        resolve_start(text, BERLIN, NOW)
