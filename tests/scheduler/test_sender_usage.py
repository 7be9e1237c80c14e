"""Sends today and the cap in force per sender: the rule the daily cap enforces."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Engine, insert

from campaigns.campaign_file import parse_campaign
from scheduler.sender_usage import SenderUsage, sender_usage, sends_today
from storage import tables
from tests.rows import campaign_row

NOW = datetime(2026, 3, 10, 23, 0, tzinfo=UTC)
BRISBANE = ZoneInfo("Australia/Brisbane")  # UTC+10 all year


def _campaign(engine: Engine, state: str, spec: dict[str, Any]) -> int:
    with engine.begin() as conn:
        return campaign_row(conn, NOW, state=state, spec=spec)


def _spec(timezone: str, cap: int | None, instances: list[str]) -> dict[str, Any]:
    return parse_campaign(
        {
            "name": "c",
            "list": "customers",
            "message": {"type": "text", "text": "hi"},
            "schedule": {"timezone": timezone},
            "pace": {"daily_cap": cap},
            "instances": instances,
        }
    ).model_dump(mode="json")


def test_the_smallest_active_cap_and_its_local_day(engine: Engine) -> None:
    far_east = _campaign(engine, "running", _spec("Australia/Brisbane", 50, ["AAA"]))
    _campaign(engine, "scheduled", _spec("UTC", 80, []))  # every sender
    _campaign(engine, "paused", _spec("UTC", 10, ["AAA", "BBB"]))  # not in force
    _campaign(engine, "running", {"not": "a spec"})  # skipped, as the dispatcher does
    base = {"campaign_id": far_east, "queued_at": NOW, "content": {}}
    rows = [
        ("AAA", "sent", NOW - timedelta(hours=11)),  # 12:00 UTC: yesterday in Brisbane
        ("AAA", "sent", NOW - timedelta(hours=9)),  # 14:00 UTC: Brisbane's midnight
        ("AAA", "sending", None),  # in flight: counted
        ("BBB", "sent", NOW - timedelta(hours=11)),  # today in UTC
        ("BBB", "sent", NOW - timedelta(days=1)),  # yesterday
        ("CCC", "sent", NOW - timedelta(hours=1)),
    ]
    with engine.begin() as conn:
        conn.execute(
            insert(tables.deliveries),
            [
                {**base, "target": f"+{i}", "sender": s, "state": st, "sent_at": at}
                for i, (s, st, at) in enumerate(rows)
            ],
        )

    usage = sender_usage(engine, ["AAA", "BBB", "DDD"], NOW)

    brisbane_midnight = datetime(2026, 3, 10, 14, 0, tzinfo=UTC)
    utc_midnight = datetime(2026, 3, 10, 0, 0, tzinfo=UTC)
    assert usage == {
        "AAA": SenderUsage(
            sends_today=2, daily_cap=50, day_start=brisbane_midnight, timezone=BRISBANE
        ),
        "BBB": SenderUsage(sends_today=1, daily_cap=80, day_start=utc_midnight),
        "DDD": SenderUsage(sends_today=0, daily_cap=80, day_start=utc_midnight),
    }
    with engine.connect() as conn:
        assert sends_today(conn, "AAA", NOW, BRISBANE) == 2
        assert sends_today(conn, "AAA", NOW, ZoneInfo("UTC")) == 3


def test_no_cap_in_force_counts_from_midnight_utc(engine: Engine) -> None:
    _campaign(engine, "running", _spec("Australia/Brisbane", None, ["AAA"]))
    usage = sender_usage(engine, ["AAA"], NOW)
    assert usage["AAA"] == SenderUsage(0, None, datetime(2026, 3, 10, tzinfo=UTC))
    assert sender_usage(engine, [], NOW) == {}
