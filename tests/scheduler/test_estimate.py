"""The send-time estimate: the mean gap of a pace, windows (overnight too), daily caps in
the campaign's local days, what a sender already sent today, several senders."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from scheduler.estimate import (
    SenderShare,
    estimate_sends,
    margin_seconds,
    mean_gap_seconds,
    next_occurrences,
)
from scheduler.policy import Pace
from storage.queries.sender_care import CareRow

BERLIN = ZoneInfo("Europe/Berlin")
UTC_ZONE = ZoneInfo("UTC")
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


def _care(ramp: str | None = None, used: float = 0.0, day_key: str | None = None) -> CareRow:
    return CareRow(
        instance_id="a",
        created_at=START,
        paused_reason=None,
        warmup_off=False,
        warmup_start_at=None,
        warmup_ramp=ramp,
        warmup_day_key=day_key,
        warmup_used=used,
        health_score=0.0,
        health_at=None,
        health_level="low",
        health_resume_at=None,
        lock_until=None,
        lock_parked=False,
    )


def _one(share: SenderShare, pace: Pace, window: tuple[time, time] | None = None) -> Any:
    return estimate_sends(
        share.messages,
        [share.sender],
        start=START,
        pace=pace,
        tz=UTC_ZONE,
        window=window,
        shares=[share],
    )


def test_the_warm_up_moves_what_day_1_does_not_allow_to_day_2() -> None:
    # a ramp of 4 then 8 new-contact messages; 3 already used today: 1 more today
    care = _care(ramp="4,8", used=3, day_key=START.date().isoformat())
    e = _one(SenderShare("a", {None: 6}, care=care), Pace(60, 0, 0, None))
    assert e.start == START
    # 1 today, the other 5 from the next midnight, a second apart
    assert e.finish == datetime(2030, 1, 2, 0, 0, 4, tzinfo=UTC)


def test_known_contacts_use_less_of_the_warm_up() -> None:
    care = _care(ramp="4,8")
    pace = Pace(60, 0, 0, None)
    new = _one(SenderShare("a", {None: 6}, care=care), pace)
    known = _one(SenderShare("a", {None: 6}, known=6, care=care), pace)
    # new contacts: 4 today, 2 tomorrow; known ones weigh 0.5: 7 fit today's 4 units
    assert new.finish == datetime(2030, 1, 2, 0, 0, 1, tzinfo=UTC)
    assert known.finish == datetime(2030, 1, 1, 8, 0, 5, tzinfo=UTC)


def test_an_unpaced_campaign_has_no_warm_up() -> None:
    e = _one(SenderShare("a", {None: 6}, care=_care(ramp="1")), Pace(0, 0, 0, None))
    assert e.finish == START


def test_the_warm_up_and_the_cap_the_smaller_limits() -> None:
    care = _care(ramp="10,10")
    e = _one(SenderShare("a", {None: 6}, sent_today=1, care=care), Pace(60, 0, 0, 3))
    # the cap leaves 2 today (1 sent), 3 tomorrow, 1 the day after
    assert e.finish == datetime(2030, 1, 3, 0, 0, tzinfo=UTC)


def test_recipient_zones_each_in_its_own_window() -> None:
    share = SenderShare("a", {"Europe/Berlin": 2, "America/New_York": 2})
    e = _one(share, Pace(60, 0, 0, None), (time(9), time(17)))
    # Berlin's window is open at 08:00 UTC (09:00 there): 2 sends; New York's opens at
    # 14:00 UTC: 2 more
    assert e.start == START
    assert e.finish == datetime(2030, 1, 1, 14, 0, 1, tzinfo=UTC)
    # estimated in the campaign's zone only, the finish would be 08:00:03 UTC
    flat = _one(SenderShare("a", {None: 4}), Pace(60, 0, 0, None), (time(9), time(17)))
    assert flat.finish == datetime(2030, 1, 1, 9, 0, 3, tzinfo=UTC)


def test_the_margin_grows_with_the_random_delay_and_the_share() -> None:
    assert margin_seconds(Pace(60, 0, 0), 100) == 0.0  # no randomness: no margin
    # U(5, 15): variance 100/12 per gap; 2 sigma over 99 gaps
    assert margin_seconds(Pace(1000, 5, 15), 100) == pytest.approx(2 * (99 * 100 / 12) ** 0.5)
    e = estimate_sends(
        200, ["a", "b"], start=START, pace=Pace(20, 5, 15, None), tz=UTC_ZONE, window=None
    )
    assert e.margin_seconds == pytest.approx(margin_seconds(Pace(20, 5, 15, None), 100))


def test_recipient_time_waits_for_the_starts_wall_time_in_each_zone() -> None:
    # no window: a start at 08:00 UTC is 08:00 in New York too (13:00 UTC)
    ny = datetime(2030, 1, 1, 13, 0, tzinfo=UTC)
    share = SenderShare("a", {"UTC": 1, "America/New_York": 2})
    e = estimate_sends(
        3,
        ["a"],
        start=START,
        pace=Pace(60, 0, 0, None),
        tz=UTC_ZONE,
        window=None,
        shares=[share],
        first_due={"UTC": START, "America/New_York": ny},
    )
    assert (e.start, e.finish) == (START, datetime(2030, 1, 1, 13, 0, 1, tzinfo=UTC))
