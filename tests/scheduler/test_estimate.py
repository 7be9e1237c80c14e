"""The send-time estimate: the mean gap of a pace, windows (overnight too), daily caps in
the campaign's local days, what a sender already sent today, several senders."""

from __future__ import annotations

from datetime import UTC, datetime, time
from zoneinfo import ZoneInfo

import pytest

from scheduler.estimate import estimate_sends, mean_gap_seconds, next_occurrences
from scheduler.policy import Pace

BERLIN = ZoneInfo("Europe/Berlin")
START = datetime(2030, 1, 1, 8, 0, tzinfo=UTC)  # 09:00 in Berlin


@pytest.mark.parametrize(
    ("pace", "gap"),
    [
        (Pace(20, 5, 15), 10.0),  # the delay's mean (the rate's 3 s never binds)
        (Pace(6, 0, 0), 10.0),  # the rate alone
        (Pace(6, 5, 15), 11.25),  # delays below 10 s wait 10 s
        (Pace(0, 0, 0, None), 0.0),  # unpaced
        (Pace(0, 4, 4), 4.0),
    ],
)
def test_mean_gap(pace: Pace, gap: float) -> None:
    assert mean_gap_seconds(pace) == pytest.approx(gap)


def test_the_daily_cap_moves_the_rest_to_the_next_window() -> None:
    e = estimate_sends(
        1000,
        ["a", "b"],
        start=START,
        pace=Pace(6, 0, 0, 300),
        tz=BERLIN,
        window=(time(9), time(17)),
    )
    # 500 each: 300 on the first day (50 min), 200 from 09:00 the next day (33 min 10 s)
    assert (e.per_sender, e.start) == (500, START)
    assert e.finish == datetime(2030, 1, 2, 8, 33, 10, tzinfo=UTC)


def test_an_overnight_window_and_what_was_sent_today() -> None:
    e = estimate_sends(
        10,
        ["a"],
        start=START,
        pace=Pace(60, 0, 0, 5),
        tz=BERLIN,
        window=(time(22), time(6)),
        sent_today={"a": 5},
    )
    # today's cap is spent: the window opening at 22:00 waits for local midnight, sends 5
    # (a second apart), and the last 5 go the next local day (from its midnight)
    assert e.start == datetime(2030, 1, 1, 23, 0, tzinfo=UTC)
    assert e.finish == datetime(2030, 1, 2, 23, 0, 4, tzinfo=UTC)


def test_the_window_closing_splits_the_sends() -> None:
    e = estimate_sends(
        100, ["a"], start=START, pace=Pace(1, 0, 0, None), tz=BERLIN, window=(time(9), time(10))
    )
    # 60 a window (09:00 .. 09:59), the other 40 the next morning
    assert e.finish == datetime(2030, 1, 2, 8, 39, tzinfo=UTC)


def test_no_sender_no_finish_and_nothing_to_send() -> None:
    none = estimate_sends(5, [], start=START, pace=Pace(), tz=BERLIN, window=None)
    assert none.finish is None
    empty = estimate_sends(0, ["a"], start=START, pace=Pace(), tz=BERLIN, window=None)
    assert empty.finish == START


def test_next_occurrences_in_the_zone() -> None:
    got = next_occurrences("0 9 * * MON", "Europe/Berlin", START)
    assert len(got) == 5
    assert all(t.astimezone(BERLIN).hour == 9 and t.weekday() == 0 for t in got)
    assert got[0] == datetime(2030, 1, 7, 8, 0, tzinfo=UTC)
