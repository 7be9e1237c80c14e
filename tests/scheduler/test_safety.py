"""The failure-rate safety check counts only as far as it must, and decides as before."""

from __future__ import annotations

from scheduler.sweeping import safety_count_limit


def test_the_count_limit_never_hides_a_rate_above_the_limit() -> None:
    for max_rate in (0.05, 0.1, 0.3, 0.5, 0.7, 1.0):
        for failed in range(0, 60):
            limit = safety_count_limit(failed, max_rate)
            assert limit >= 1
            for attempted in range(max(1, failed), limit + 40):
                if attempted >= limit:  # the check stops counting here: no pause
                    assert not failed / attempted > max_rate, (max_rate, failed, attempted)
            # and it is no bigger than needed: just below it the rate reaches the limit
            if failed and limit - 1 >= failed:
                assert failed / (limit - 1) >= max_rate - 1e-12, (max_rate, failed)
