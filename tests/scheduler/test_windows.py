"""Window, day and backoff arithmetic (pure functions)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, time
from zoneinfo import ZoneInfo

from scheduler.pacing import gap_seconds, slots_per_claim
from scheduler.policy import Pace
from scheduler.retry import RetryPolicy
from scheduler.windows import in_window, local_day_start, next_window_open

BERLIN = ZoneInfo("Europe/Berlin")


def test_window_opens_at_local_time_across_a_dst_change() -> None:
    window = (time(9, 0), time(20, 0))
    # Saturday 28 March 2026, 21:00 Berlin (CET); the clocks go forward that night
    now = datetime(2026, 3, 28, 20, 0, tzinfo=UTC)
    assert not in_window(now, BERLIN, window)
    opens = next_window_open(now, BERLIN, window)
    assert opens == datetime(2026, 3, 29, 7, 0, tzinfo=UTC)  # 09:00 CEST
    assert in_window(opens, BERLIN, window)


def test_overnight_window_spans_midnight() -> None:
    window = (time(22, 0), time(6, 0))
    tz = ZoneInfo("UTC")
    assert in_window(datetime(2026, 1, 1, 23, 0, tzinfo=UTC), tz, window)
    assert in_window(datetime(2026, 1, 2, 5, 59, tzinfo=UTC), tz, window)
    assert not in_window(datetime(2026, 1, 2, 6, 0, tzinfo=UTC), tz, window)
    assert next_window_open(datetime(2026, 1, 2, 12, 0, tzinfo=UTC), tz, window) == datetime(
        2026, 1, 2, 22, 0, tzinfo=UTC
    )


def test_local_day_starts_at_local_midnight() -> None:
    now = datetime(2026, 7, 1, 3, 0, tzinfo=UTC)  # 05:00 in Berlin (CEST)
    assert local_day_start(now, BERLIN) == datetime(2026, 6, 30, 22, 0, tzinfo=UTC)


def test_gap_is_the_larger_of_rate_and_random_delay() -> None:
    rng = random.Random(1)
    pace = Pace(per_minute=30, delay_min=1, delay_max=3, daily_cap=None)
    gaps = [gap_seconds(pace, rng) for _ in range(200)]
    assert min(gaps) == 2.0  # a random delay below 2 s gives way to the rate
    assert max(gaps) > 2.5 and all(2.0 <= g <= 3.0 for g in gaps)
    slow = Pace(per_minute=1, delay_min=0, delay_max=0, daily_cap=None)
    assert gap_seconds(slow, rng) == 60.0


def test_slots_per_claim_is_one_for_real_paces() -> None:
    assert slots_per_claim(Pace(20, 5, 15, 500), 256) == 1
    assert slots_per_claim(Pace(600, 0.05, 0.2, None), 256) == 1
    assert slots_per_claim(Pace(60_000, 0, 0, None), 256) == 256  # capped by the batch
    assert slots_per_claim(Pace(6_000, 0, 0.01, None), 256) == 100


def test_backoff_is_exponential_with_jitter_and_honours_retry_after() -> None:
    policy = RetryPolicy(max_attempts=4, backoff_seconds=10)
    rng = random.Random(2)
    for attempt, ceiling in ((1, 10), (2, 20), (3, 40)):
        delays = [policy.delay(attempt, rng) for _ in range(100)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert max(delays) - min(delays) > 1  # jittered
    assert policy.delay(1, rng, retry_after=120) == 120
    assert policy.should_retry(3) and not policy.should_retry(4)
