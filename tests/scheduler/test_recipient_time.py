"""Recipient time and the contact cooldown in the dispatcher, on SQLite and PostgreSQL:
rows of a zone whose window is closed are not claimed (paced and unpaced claims), the
dispatcher wakes when the next zone opens, and a contact another campaign messaged
meanwhile is skipped at send time with the cooldown's reason."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import Engine, select, update

from campaigns.cooldown import is_cooldown_error
from scheduler.clock import FakeClock
from scheduler.dispatcher import Dispatcher
from scheduler.windows import open_zones
from storage import tables
from storage.queries import deliveries as dq
from tests.scheduler.helpers import (
    RecordingSender,
    add_instances,
    add_running_campaign,
    quiet_dispatcher,
    spec,
    states_of,
)

_d = tables.deliveries
ZONES = ("Europe/Berlin", "America/New_York", "Asia/Tokyo")
#: 08:30 UTC: 09:30 in Berlin (open), 03:30 in New York, 17:30 in Tokyo (closed)
T0 = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
WINDOW = ["09:00", "17:00"]


def _zoned_campaign(engine: Engine, pace: dict[str, object], senders: list[str]) -> int:
    """A running campaign in recipient time, 9 rows: three per zone."""
    schedule = {"timezone": "UTC", "window": WINDOW, "recipient_timezone": True}
    cid = add_running_campaign(
        engine, spec(schedule=schedule, pace=pace), recipients=9, senders=senders, now=T0
    )
    with engine.begin() as conn:
        ids = conn.execute(select(_d.c.id).where(_d.c.campaign_id == cid).order_by(_d.c.id))
        for n, (row_id,) in enumerate(ids.all()):
            conn.execute(update(_d).where(_d.c.id == row_id).values(recipient_tz=ZONES[n % 3]))
    return cid


def _tick_for(dispatcher: Dispatcher, clock: FakeClock, seconds: int) -> None:
    for _ in range(seconds):
        dispatcher.tick()
        clock.advance(1)


def _zones_sent(engine: Engine, cid: int) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(_d.c.recipient_tz, _d.c.state).where(_d.c.campaign_id == cid)
        ).all()
    out = dict.fromkeys(ZONES, 0)
    for zone, state in rows:
        if state == "sent":
            out[str(zone)] += 1
    return out


@pytest.mark.parametrize(
    "pace",
    [
        {"per_minute": 0, "delay_seconds": [0, 0], "daily_cap": None},
        {"per_minute": 600, "delay_seconds": [0, 0], "daily_cap": None},
    ],
    ids=["unpaced", "paced"],
)
def test_each_zone_is_sent_only_inside_its_own_window(
    engine: Engine, pace: dict[str, object]
) -> None:
    add_instances(engine, ["A", "B"], T0)
    cid = _zoned_campaign(engine, pace, ["A", "B"])
    clock = FakeClock(T0)
    sender = RecordingSender(clock)
    with quiet_dispatcher(engine, sender, clock) as dispatcher:
        _tick_for(dispatcher, clock, 30)
        assert _zones_sent(engine, cid) == {ZONES[0]: 3, ZONES[1]: 0, ZONES[2]: 0}
        # a second before New York opens (14:00 UTC) nothing is claimed
        clock.advance((datetime(2026, 11, 20, 13, 59, 59, tzinfo=UTC) - clock.now()).seconds)
        assert dispatcher.tick().claimed == 0
        clock.advance(1)
        _tick_for(dispatcher, clock, 30)
        assert _zones_sent(engine, cid) == {ZONES[0]: 3, ZONES[1]: 3, ZONES[2]: 0}
        clock.advance((datetime(2026, 11, 21, 0, 0, tzinfo=UTC) - clock.now()).total_seconds())
        _tick_for(dispatcher, clock, 30)
    assert _zones_sent(engine, cid) == {ZONES[0]: 3, ZONES[1]: 3, ZONES[2]: 3}
    for _instance, to, at in sender.sent:
        with engine.connect() as conn:
            zone = conn.execute(
                select(_d.c.recipient_tz).where(_d.c.campaign_id == cid, _d.c.target == to)
            ).scalar_one()
        local = at.astimezone(ZoneInfo(zone)).time()
        assert time(9, 0) <= local < time(17, 0), (to, zone, local)


def test_the_campaigns_zones_are_read_by_a_loose_scan(engine: Engine) -> None:
    add_instances(engine, ["A"], T0)
    cid = _zoned_campaign(engine, {"per_minute": 0, "delay_seconds": [0, 0]}, ["A"])
    with engine.connect() as conn:
        assert dq.queued_zones(conn, cid) == sorted(ZONES)


def test_open_zones_names_the_open_ones_and_the_next_opening() -> None:
    window = (time(9, 0), time(17, 0))
    opened, reopen = open_zones(T0, ZONES, window)
    assert opened == ["Europe/Berlin"]
    assert reopen == datetime(2026, 11, 20, 14, 0, tzinfo=UTC)  # 09:00 in New York
    assert open_zones(T0, ["Europe/Berlin"], window) == (["Europe/Berlin"], None)


def test_a_contact_messaged_by_another_campaign_meanwhile_is_skipped_at_send(
    engine: Engine,
) -> None:
    add_instances(engine, ["A"], T0)
    pace = {"per_minute": 0, "delay_seconds": [0, 0], "daily_cap": None}
    cid = add_running_campaign(
        engine,
        spec(pace=pace, safety={"contact_cooldown_hours": 24}),
        recipients=3,
        senders=["A"],
        now=T0,
    )
    other = add_running_campaign(
        engine, spec(pace=pace), recipients=1, senders=["A"], now=T0, state="completed"
    )
    with engine.begin() as conn:  # the other campaign messaged the first contact 1 h ago
        conn.execute(
            update(_d)
            .where(_d.c.campaign_id == other)
            .values(state="sent", sent_at=T0 - timedelta(hours=1), message_id="OTHER")
        )
    clock = FakeClock(T0)
    sender = RecordingSender(clock)
    with quiet_dispatcher(engine, sender, clock) as dispatcher:
        dispatcher.tick()
        dispatcher.flush()
    got = states_of(engine, cid)
    first = min(got)
    assert got[first] == "skipped", got
    assert sorted(s for t, s in got.items() if t != first) == ["sent", "sent"]
    with engine.connect() as conn:
        error, attempts = conn.execute(
            select(_d.c.error, _d.c.attempts).where(_d.c.campaign_id == cid, _d.c.target == first)
        ).one()
    assert is_cooldown_error(error) and "24 h" in error, error
    assert attempts == 0  # a skip is not an attempt
    assert first not in {to for _, to, _ in sender.sent}
