"""Starts, the missed-start policy, recurrence, the leader lease and APScheduler sync."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from campaigns import lifecycle
from campaigns.campaign_file import parse_campaign
from campaigns.importer import ImportOptions, import_file
from campaigns.service import create_campaign
from scheduler import leader, starts
from scheduler.jobs import CampaignJobs
from scheduler.recurrence import catch_up, create_occurrence, fire_times, latest_fire_time
from scheduler.starts import start_campaign
from storage import tables
from storage.queries import instances as iq
from tests.scheduler.helpers import add_instances

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def _campaign(engine: Engine, now: datetime, **schedule: Any) -> int:
    import_file(engine, SAMPLES / "contacts.csv", ImportOptions(list_name="customers"), now=now)
    data = {
        "name": "promo",
        "list": "customers",
        "instances": ["I1", "I2"],
        "message": {"type": "text", "text": "Hi {{ name }}"},
        "schedule": {"timezone": "Europe/Berlin", **schedule},
    }
    with engine.begin() as conn:  # senders gatecast knows (create refuses others)
        iq.ensure(conn, list(data["instances"]), now=T0)
    created = create_campaign(engine, parse_campaign(data, "test.toml"), now=now)
    return int(created.id)


def _state(engine: Engine, cid: int) -> tuple[str, str | None]:
    c = tables.campaigns
    with engine.connect() as conn:
        state, reason = conn.execute(select(c.c.state, c.c.state_reason).where(c.c.id == cid)).one()
    return str(state), reason


def _rows(engine: Engine, cid: int) -> int:
    d = tables.deliveries
    with engine.connect() as conn:
        return len(conn.execute(select(d.c.id).where(d.c.campaign_id == cid)).all())


def test_a_start_within_the_grace_runs_late(engine: Engine) -> None:
    cid = _campaign(engine, T0, start="2026-11-23T10:00", missed_grace_minutes=30)
    late = T0 + timedelta(minutes=20)  # 10:00 Berlin == 09:00 UTC: 20 min late
    res = start_campaign(engine, cid, now=late)
    assert res.outcome == "started" and res.queued > 0
    assert _state(engine, cid)[0] == lifecycle.RUNNING
    assert _rows(engine, cid) == res.queued + res.skipped
    # a second fire (another scheduler, a restart) changes nothing
    again = start_campaign(engine, cid, now=late)
    assert again.outcome == "skipped"
    assert _rows(engine, cid) == res.queued + res.skipped


def test_a_start_missed_beyond_the_grace_fails_with_the_reason(engine: Engine) -> None:
    cid = _campaign(engine, T0, start="2026-11-23T10:00", missed_grace_minutes=30)
    res = start_campaign(engine, cid, now=T0 + timedelta(hours=3))
    assert res.outcome == "missed"
    state, reason = _state(engine, cid)
    assert state == lifecycle.FAILED
    assert reason == "missed start at 2026-11-23T09:00:00+00:00"
    assert _rows(engine, cid) == 0


def test_no_sender_instance_fails_the_start_clearly(sqlite_engine: Engine) -> None:
    import_file(
        sqlite_engine, SAMPLES / "contacts.csv", ImportOptions(list_name="customers"), now=T0
    )
    spec = parse_campaign(
        {"name": "x", "list": "customers", "message": {"type": "text", "text": "hi"}}, "t"
    )
    cid = create_campaign(sqlite_engine, spec, now=T0).id
    res = start_campaign(sqlite_engine, cid, now=T0)
    assert res.outcome == "failed"
    assert "no sender instance" in (_state(sqlite_engine, cid)[1] or "")


def test_all_connected_instances_are_used_when_none_are_named(sqlite_engine: Engine) -> None:
    import_file(
        sqlite_engine, SAMPLES / "contacts.csv", ImportOptions(list_name="customers"), now=T0
    )
    add_instances(sqlite_engine, ["C1", "C2"], T0)
    spec = parse_campaign(
        {"name": "x", "list": "customers", "message": {"type": "text", "text": "hi"}}, "t"
    )
    cid = create_campaign(sqlite_engine, spec, now=T0).id
    assert start_campaign(sqlite_engine, cid, now=T0).outcome == "started"
    d = tables.deliveries
    with sqlite_engine.connect() as conn:
        senders = set(conn.execute(select(d.c.sender).where(d.c.state == "queued")).scalars())
    assert senders == {"C1", "C2"}


def test_cron_fire_times_follow_the_local_timezone_across_dst() -> None:
    # 09:00 Berlin every Monday: 08:00 UTC in winter, 07:00 UTC in summer
    times = fire_times(
        "0 9 * * MON",
        "Europe/Berlin",
        datetime(2026, 3, 20, tzinfo=UTC),
        datetime(2026, 4, 7, tzinfo=UTC),
    )
    assert [t.hour for t in times] == [8, 7, 7]


def test_each_occurrence_is_created_once(engine: Engine) -> None:
    parent = _campaign(engine, T0, cron="0 9 * * *")
    occ = datetime(2026, 11, 24, 8, 0, tzinfo=UTC)
    child = create_occurrence(engine, parent, occ)
    assert child is not None
    assert create_occurrence(engine, parent, occ) is None  # a double fire
    c = tables.campaigns
    with engine.connect() as conn:
        row = conn.execute(select(c).where(c.c.id == child)).one()
    assert row.parent_id == parent and row.occurrence_at == occ and row.cron is None
    assert row.spec["schedule"]["cron"] is None


def test_catch_up_after_downtime_runs_only_the_latest_occurrence(engine: Engine) -> None:
    parent = _campaign(engine, T0, cron="0 9 * * *", missed_grace_minutes=120)
    # down for three days; back at 09:30 Berlin: the latest occurrence is 30 min late
    back = datetime(2026, 11, 26, 8, 30, tzinfo=UTC)
    res = catch_up(engine, parent, now=back)
    assert res is not None and res.outcome == "started"
    c = tables.campaigns
    with engine.connect() as conn:
        kids = conn.execute(
            select(c.c.occurrence_at, c.c.state).where(c.c.parent_id == parent)
        ).all()
    assert kids == [(datetime(2026, 11, 26, 8, 0, tzinfo=UTC), lifecycle.RUNNING)]
    assert catch_up(engine, parent, now=back) is None  # nothing new since


def test_a_missed_occurrence_is_recorded_as_failed(sqlite_engine: Engine) -> None:
    parent = _campaign(sqlite_engine, T0, cron="0 9 * * *", missed_grace_minutes=10)
    res = catch_up(sqlite_engine, parent, now=datetime(2026, 11, 24, 12, 0, tzinfo=UTC))
    assert res is not None and res.outcome == "missed"
    assert res.detail.startswith("missed start at 2026-11-24T08:00")


def test_only_one_holder_gets_the_lease(engine: Engine) -> None:
    ok_a = leader.try_acquire(engine, "scheduler", "A", now=T0, ttl=30)
    ok_b = leader.try_acquire(engine, "scheduler", "B", now=T0 + timedelta(seconds=5), ttl=30)
    assert (ok_a, ok_b) == (True, False)
    assert leader.try_acquire(engine, "scheduler", "A", now=T0 + timedelta(seconds=20), ttl=30)
    # A stops renewing: B takes over once the lease has expired
    assert not leader.try_acquire(engine, "scheduler", "B", now=T0 + timedelta(seconds=49), ttl=30)
    assert leader.try_acquire(engine, "scheduler", "B", now=T0 + timedelta(seconds=51), ttl=30)
    assert not leader.try_acquire(engine, "scheduler", "A", now=T0 + timedelta(seconds=52), ttl=30)
    leader.release(engine, "scheduler", "B")
    assert leader.try_acquire(engine, "scheduler", "A", now=T0 + timedelta(seconds=53), ttl=30)


@pytest.fixture
def jobs(sqlite_engine: Engine) -> Any:
    clock = {"now": T0}
    j = CampaignJobs(sqlite_engine, now=lambda: clock["now"])
    yield j, clock
    j.shutdown()


def test_sync_builds_jobs_from_the_database(sqlite_engine: Engine, jobs: Any) -> None:
    j, clock = jobs
    future = _campaign(sqlite_engine, T0, start="2026-11-30T09:00")
    recurring = _campaign(sqlite_engine, T0, cron="0 9 * * MON")
    due = _campaign(sqlite_engine, T0)  # no start: as soon as it is created
    j.scheduler.start(paused=True)
    j.sync()
    assert j.job_ids() == sorted([f"start:{future}", f"cron:{recurring}"])
    assert _state(sqlite_engine, due)[0] == lifecycle.RUNNING
    job = j.scheduler.get_job(f"start:{future}")
    assert job.misfire_grace_time is None and job.coalesce is True
    # the campaign is cancelled elsewhere: the next sync drops its job
    with sqlite_engine.begin() as conn:
        lifecycle.transition(conn, future, lifecycle.CANCELLED, now=T0)
    j.sync()
    assert j.job_ids() == [f"cron:{recurring}"]
    clock["now"] = T0 + timedelta(days=1)


@pytest.mark.parametrize(
    "cron",
    ["*/2 * * * *", "* * * * *", "0 9 * * MON", "30 2 * * *", "* 9 * * *", "0 0 1 */3 *"],
)
@pytest.mark.parametrize("tz", ["UTC", "Europe/Berlin", "America/New_York"])
def test_latest_fire_time_is_the_last_of_all_fire_times(cron: str, tz: str) -> None:
    until = datetime(2026, 3, 29, 1, 1, 52, tzinfo=UTC)  # the night Berlin's clocks go forward
    for span in (timedelta(minutes=1), timedelta(hours=5), timedelta(days=3)):
        every = fire_times(cron, tz, until - span, until)
        assert latest_fire_time(cron, tz, until - span, until) == (every[-1] if every else None)
    # a year back, whatever the frequency (the old search stopped after 100,000 fire times)
    year = latest_fire_time(cron, tz, until - timedelta(days=366), until)
    recent = fire_times(cron, tz, until - timedelta(days=3), until) or fire_times(
        cron, tz, until - timedelta(days=100), until
    )
    assert year == recent[-1]


def test_latest_fire_time_bounds_are_exclusive_then_inclusive() -> None:
    fire = datetime(2026, 11, 24, 9, 2, tzinfo=UTC)
    assert latest_fire_time("*/2 * * * *", "UTC", fire, fire + timedelta(seconds=119)) is None
    assert latest_fire_time("*/2 * * * *", "UTC", fire - timedelta(seconds=1), fire) == fire
    assert latest_fire_time("0 9 29 2 *", "UTC", fire - timedelta(days=5000), fire) == datetime(
        2024, 2, 29, 9, 0, tzinfo=UTC
    )


def test_a_frequent_cron_fires_the_current_occurrence(sqlite_engine: Engine, jobs: Any) -> None:
    """``*/2 * * * *``: the fire at 09:02 creates the 09:02 occurrence, not one months ago."""
    j, clock = jobs
    parent = _campaign(sqlite_engine, T0, cron="*/2 * * * *")
    clock["now"] = T0 + timedelta(minutes=2, seconds=1)
    j._cron_job(parent)
    c = tables.campaigns
    with sqlite_engine.connect() as conn:
        kids = conn.execute(
            select(c.c.occurrence_at, c.c.state).where(c.c.parent_id == parent)
        ).all()
    assert kids == [(T0 + timedelta(minutes=2), lifecycle.RUNNING)]


def test_a_cron_starting_at_a_fire_time_runs_that_occurrence(sqlite_engine: Engine) -> None:
    parent = _campaign(sqlite_engine, T0, cron="0 10 * * *", start="2026-11-23T10:00")
    res = catch_up(sqlite_engine, parent, now=T0 + timedelta(seconds=1))  # 10:00:01 Berlin
    assert res is not None and res.outcome == "started"
    assert catch_up(sqlite_engine, parent, now=T0 - timedelta(minutes=1)) is None


def test_a_start_that_raises_fails_once_with_the_reason(sqlite_engine: Engine, jobs: Any) -> None:
    """A start that cannot happen is marked failed, not retried at each sync."""
    j, _ = jobs
    cid = _campaign(sqlite_engine, T0)
    c = tables.campaigns
    with sqlite_engine.begin() as conn:  # a stored spec damaged after creation
        spec = conn.execute(select(c.c.spec).where(c.c.id == cid)).scalar_one()
        spec["schedule"]["window"] = ["nine", "20:00"]
        conn.execute(update(c).where(c.c.id == cid).values(spec=spec))
    j.scheduler.start(paused=True)
    j.sync()
    state, reason = _state(sqlite_engine, cid)
    assert state == lifecycle.FAILED
    assert reason is not None and reason.startswith(
        "cannot start: the stored campaign is not valid (schedule.window:"
    )
    j.sync()  # the next tick leaves it alone
    assert _state(sqlite_engine, cid) == (state, reason)
    res = start_campaign(sqlite_engine, cid, now=T0)
    assert res.outcome == "skipped"


def test_no_sender_fails_once(sqlite_engine: Engine, jobs: Any, caplog: Any) -> None:
    j, _ = jobs
    import_file(
        sqlite_engine, SAMPLES / "contacts.csv", ImportOptions(list_name="customers"), now=T0
    )
    data = {"name": "n", "list": "customers", "message": {"type": "text", "text": "Hi"}}
    cid = create_campaign(sqlite_engine, parse_campaign(data, "t.toml"), now=T0).id
    j.scheduler.start(paused=True)
    j.sync()
    j.sync()
    assert _state(sqlite_engine, cid) == (lifecycle.FAILED, starts.NO_SENDER)
    assert sum("no sender instance" in r.getMessage() for r in caplog.records) == 1
