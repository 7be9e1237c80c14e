"""Pace, delay bounds, daily cap, windows, rotation and restarts, with an injected clock."""

from __future__ import annotations

import itertools
import random
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import Engine, select, update

from scheduler.clock import FakeClock
from scheduler.dispatcher import Dispatcher
from storage import tables
from tests.scheduler.helpers import (
    RecordingSender,
    add_instances,
    add_running_campaign,
    no_events,
    spec,
    states_of,
)

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def make(engine: Engine, clock: FakeClock, sender: RecordingSender, **kw: object) -> Dispatcher:
    return Dispatcher(
        engine,
        lambda: sender,
        clock=clock,
        workers=1,
        rng=random.Random(7),
        apply_pending=no_events,
        **kw,  # type: ignore[arg-type]
    )


def gaps(times: list[datetime]) -> list[float]:
    return [(b - a).total_seconds() for a, b in itertools.pairwise(times)]


def test_rate_per_minute_is_honoured(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A"], T0)
    cid = add_running_campaign(
        engine,
        spec(pace={"per_minute": 6, "delay_seconds": [0, 0], "daily_cap": None}),
        recipients=6,
        senders=["A"],
        now=T0,
    )
    sender = RecordingSender(clock)
    with make(engine, clock, sender) as d:
        d.run(until_done=True, max_ticks=500)
    assert len(sender.sent) == 6
    assert all(g >= 10.0 for g in gaps([t for _, _, t in sender.sent]))
    assert set(states_of(engine, cid).values()) == {"sent"}


def test_random_delay_stays_within_bounds(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A"], T0)
    add_running_campaign(
        engine,
        spec(pace={"per_minute": 0, "delay_seconds": [2, 4], "daily_cap": None}),
        recipients=12,
        senders=["A"],
        now=T0,
    )
    sender = RecordingSender(clock)
    with make(engine, clock, sender, poll_seconds=10.0) as d:
        d.run(until_done=True, max_ticks=500)
    g = gaps([t for _, _, t in sender.sent])
    assert len(g) == 11
    assert all(2.0 <= x <= 4.0 + 0.01 for x in g), g
    assert max(g) - min(g) > 0.1  # really random, not a fixed delay


def test_daily_cap_holds_the_rest_until_the_next_local_day(engine: Engine) -> None:
    tz = "America/New_York"
    start = datetime(2026, 11, 23, 20, 0, tzinfo=ZoneInfo(tz)).astimezone(UTC)
    clock = FakeClock(start)
    add_instances(engine, ["A"], start)
    cid = add_running_campaign(
        engine,
        spec(
            pace={"per_minute": 60, "delay_seconds": [0, 0], "daily_cap": 3},
            schedule={"timezone": tz},
        ),
        recipients=5,
        senders=["A"],
        now=start,
    )
    sender = RecordingSender(clock)
    with make(engine, clock, sender, poll_seconds=600.0) as d:
        d.run(until_done=True, max_ticks=2000)
    local_days = [t.astimezone(ZoneInfo(tz)).date() for _, _, t in sender.sent]
    assert local_days.count(start.astimezone(ZoneInfo(tz)).date()) == 3
    assert len(sender.sent) == 5
    # the next local day begins at local midnight, not at UTC midnight
    fourth = sender.sent[3][2].astimezone(ZoneInfo(tz))
    assert (fourth.hour, fourth.date()) == (0, start.astimezone(ZoneInfo(tz)).date() + timedelta(1))
    assert set(states_of(engine, cid).values()) == {"sent"}


@pytest.mark.parametrize("per_minute", [0, 6000], ids=["unpaced", "paced"])
def test_daily_cap_holds_across_workers_claiming_at_once(engine: Engine, per_minute: int) -> None:
    """Two workers that count and claim at the same moment never exceed the cap together."""
    clock = FakeClock(T0)  # never advances: every claim is on the same local day
    add_instances(engine, ["A"], T0)
    cid = add_running_campaign(
        engine,
        spec(pace={"per_minute": per_minute, "delay_seconds": [0, 0], "daily_cap": 7}),
        recipients=40,
        senders=["A"],
        now=T0,
    )
    sender = RecordingSender(clock)
    workers = [make(engine, clock, sender, batch_size=64) for _ in range(2)]
    barrier = threading.Barrier(len(workers))
    failures: list[BaseException] = []

    def work(d: Dispatcher) -> None:
        try:
            for _ in range(6):
                barrier.wait(timeout=30)
                d.tick()
            d.flush()
        except BaseException as exc:  # reported below
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(d,)) for d in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for d in workers:
        d.close()
    assert not failures, failures
    assert len(sender.sent) == 7
    assert Counter(states_of(engine, cid).values()) == {"sent": 7, "queued": 33}


def test_rows_wait_outside_the_window(engine: Engine) -> None:
    tz = ZoneInfo("Europe/Berlin")
    start = datetime(2026, 11, 23, 21, 30, tzinfo=tz).astimezone(UTC)
    clock = FakeClock(start)
    add_instances(engine, ["A"], start)
    add_running_campaign(
        engine,
        spec(
            pace={"per_minute": 30, "delay_seconds": [0, 0], "daily_cap": None},
            schedule={"timezone": "Europe/Berlin", "window": ["09:00:00", "09:01:00"]},
        ),
        recipients=4,
        senders=["A"],
        now=start,
    )
    sender = RecordingSender(clock)
    with make(engine, clock, sender, poll_seconds=3600.0) as d:
        d.run(until_done=True, max_ticks=2000)
    local = [t.astimezone(tz) for _, _, t in sender.sent]
    assert len(local) == 4
    # 30/min means 2 s gaps: 09:00:00, :02, :04, :06 the next morning, none before
    assert all(t.hour == 9 and t.minute == 0 for t in local), local
    assert local[0].date() == datetime(2026, 11, 24).date()


def test_overnight_window(engine: Engine) -> None:
    tz = ZoneInfo("UTC")
    start = datetime(2026, 11, 23, 12, 0, tzinfo=tz)
    clock = FakeClock(start)
    add_instances(engine, ["A"], start)
    add_running_campaign(
        engine,
        spec(
            pace={"per_minute": 0, "delay_seconds": [0, 0], "daily_cap": None},
            schedule={"timezone": "UTC", "window": ["22:00:00", "06:00:00"]},
        ),
        recipients=3,
        senders=["A"],
        now=start,
    )
    sender = RecordingSender(clock)
    with make(engine, clock, sender, poll_seconds=3600.0) as d:
        d.run(until_done=True, max_ticks=200)
    assert [t for _, _, t in sender.sent] == [datetime(2026, 11, 23, 22, 0, tzinfo=UTC)] * 3


def test_rotation_each_contact_sticks_to_its_sender_and_paces_per_instance(
    engine: Engine,
) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A", "B"], T0)
    add_running_campaign(
        engine,
        spec(pace={"per_minute": 2, "delay_seconds": [0, 0], "daily_cap": None}),
        recipients=6,
        senders=["A", "B"],
        now=T0,
        phone_base=15551000000,
    )
    sender = RecordingSender(clock)
    with make(engine, clock, sender) as d:
        d.run(until_done=True, max_ticks=500)
    by = {"A": [], "B": []}  # type: dict[str, list[datetime]]
    for inst, to, t in sender.sent:
        expected = "A" if (int(to[1:]) - 15551000000) % 2 == 0 else "B"
        assert inst == expected
        by[inst].append(t)
    assert len(by["A"]) == len(by["B"]) == 3
    for times in by.values():
        assert all(g >= 30.0 for g in gaps(times))
    # the two instances send side by side: the whole run takes ~60 s, not ~150 s
    assert sender.sent[-1][2] - sender.sent[0][2] <= timedelta(seconds=61)


def test_pace_state_survives_a_restart(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A"], T0)
    add_running_campaign(
        engine,
        spec(pace={"per_minute": 1, "delay_seconds": [0, 0], "daily_cap": None}),
        recipients=3,
        senders=["A"],
        now=T0,
    )
    sender = RecordingSender(clock)
    with make(engine, clock, sender) as d:
        d.tick()
    assert len(sender.sent) == 1
    inst = tables.instances
    with engine.connect() as conn:
        nxt = conn.execute(select(inst.c.next_send_at)).scalar_one()
    assert nxt == T0 + timedelta(seconds=60)
    clock.advance(5)
    with make(engine, clock, sender) as fresh:  # a new process: no memory of the last send
        fresh.tick()
        assert len(sender.sent) == 1  # no burst after the restart
        clock.advance(55)
        fresh.tick()
    assert len(sender.sent) == 2


def test_opted_out_contacts_are_skipped_at_send_time(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A"], T0)
    cid = add_running_campaign(engine, spec(), recipients=4, senders=["A"], now=T0)
    ct = tables.contacts
    with engine.begin() as conn:
        conn.execute(update(ct).where(ct.c.phone == "+15550000002").values(opted_out=True))
    sender = RecordingSender(clock)
    with make(engine, clock, sender) as d:
        d.run(until_done=True, max_ticks=50)
    got = states_of(engine, cid)
    assert got.pop("+15550000002") == "skipped"
    assert set(got.values()) == {"sent"}
    assert "+15550000002" not in {to for _, to, _ in sender.sent}


def test_a_sender_without_an_instance_row_still_sends_paced(engine: Engine) -> None:
    clock = FakeClock(T0)
    cid = add_running_campaign(
        engine,
        spec(pace={"per_minute": 60, "delay_seconds": [0, 0], "daily_cap": None}),
        recipients=3,
        senders=["NEW"],
        now=T0,
    )
    sender = RecordingSender(clock)
    with make(engine, clock, sender) as d:
        d.run(until_done=True, max_ticks=50)
    assert [i for i, _, _ in sender.sent] == ["NEW"] * 3
    assert set(states_of(engine, cid).values()) == {"sent"}
