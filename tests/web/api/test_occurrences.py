"""``GET /campaigns/occurrences``: the schedule picker's shape written as crontab, a
crontab read back as a shape, the next runs from the start (never before now)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.web.conftest import LiveApp

NOW = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)  # a Monday


@pytest.fixture
def api_get(make_live: Callable[..., LiveApp], sqlite_engine: Engine) -> Any:
    live = make_live(sqlite_engine, clock=lambda: NOW)

    def get(**params: Any) -> Any:
        with live.client() as api:
            return api.get("/api/v1/campaigns/occurrences", params=params)

    return get


def test_a_shape_becomes_crontab_with_its_runs_from_the_start(api_get: Any) -> None:
    shape = {"every": "week", "days": "thu,mon", "times": "09:30"}
    got = api_get(**shape, timezone="Europe/London", start="2026-12-14T09:00").json()
    assert got["cron"] == "30 9 * * MON,THU"
    assert got["summary"] == "Every Monday and Thursday at 09:30"
    assert got["repeat"] == {
        "every": "week",
        "times": ["09:30"],
        "days": ["mon", "thu"],
        "day": None,
    }
    assert got["occurrences"][:3] == [
        "2026-12-14T09:30:00Z",
        "2026-12-17T09:30:00Z",
        "2026-12-21T09:30:00Z",
    ]


def test_a_crontab_is_read_back_and_counted_from_the_start(api_get: Any) -> None:
    # issue 31: from a start on Monday the 14th, not from today (Monday the 7th)
    got = api_get(cron="0 9 * * MON", timezone="UTC", start="2026-12-14T08:00").json()
    assert got["occurrences"][0] == "2026-12-14T09:00:00Z"
    assert got["repeat"]["every"] == "week" and got["repeat"]["days"] == ["mon"]
    # a start already past: from now
    got = api_get(cron="0 9 * * MON", timezone="UTC", start="2026-11-02T08:00").json()
    assert got["occurrences"][0] == "2026-12-07T09:00:00Z"
    # no shape fits: crontab only
    got = api_get(cron="*/15 9-17 * * MON-FRI", timezone="UTC").json()
    assert got["repeat"] is None and got["summary"] == "crontab */15 9-17 * * MON-FRI"


@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        ({"every": "day", "times": "09:30,17:45"}, "times", "share their minutes"),
        ({"every": "week", "times": "09:30"}, "days", "at least one weekday"),
        ({"every": "month", "times": "09:30"}, "day", "day of the month"),
        ({"every": "day", "times": "9.30"}, "times", "not a time of day"),
        ({}, "cron", "crontab line"),
    ],
)
def test_a_shape_crontab_cannot_hold_is_named(
    api_get: Any, params: dict[str, str], field: str, words: str
) -> None:
    res = api_get(**params)
    assert res.status_code == 422, res.text
    errors = res.json()["errors"]
    assert errors[0]["loc"][-1] == field and words in errors[0]["msg"], errors
