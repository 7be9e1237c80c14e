"""Sender care rules on SQLite and PostgreSQL: the warm-up ramp and its use in a claim,
the health score's decay, levels, pauses and cool-down, and a person's resume."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import Engine, select

from campaigns import instances as domain
from scheduler import health, warmup
from scheduler.care import DEFAULTS, configure, current
from scheduler.clock import FakeClock
from storage import tables
from storage.queries import sender_care as sc
from tests.scheduler.helpers import (
    RecordingSender,
    add_instances,
    add_running_campaign,
    quiet_dispatcher,
    spec,
)

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
UTC_ZONE = ZoneInfo("UTC")
PACED = {"per_minute": 6000, "delay_seconds": [0, 0], "daily_cap": None}


@pytest.fixture
def warm() -> Iterator[None]:
    """The default ramp on (the suite turns it off for tests not about it)."""
    before = current()
    configure(replace(DEFAULTS))
    yield
    configure(before)


def _row(engine: Engine, instance_id: str) -> sc.CareRow:
    with engine.connect() as conn:
        return sc.care_rows(conn, [instance_id])[instance_id]


def test_the_default_ramp_doubles_within_its_spread_then_ends(engine: Engine, warm: None) -> None:
    add_instances(engine, ["A", "B"], T0)
    row = _row(engine, "A")
    for day in range(1, 8):
        got = warmup.allowance(row, T0 + timedelta(days=day - 1), UTC_ZONE)
        assert got is not None
        assert 0.8 * 15 * 2 ** (day - 1) <= got <= 1.2 * 15 * 2 ** (day - 1), (day, got)
        # stable for a sender and day (every worker agrees), not the same for all senders
        assert got == warmup.allowance(row, T0 + timedelta(days=day - 1, hours=3), UTC_ZONE)
    assert warmup.allowance(row, T0 + timedelta(days=7), UTC_ZONE) is None  # day 8
    other = _row(engine, "B")
    days = [timedelta(days=d) for d in range(7)]
    assert [warmup.allowance(row, T0 + d, UTC_ZONE) for d in days] != [
        warmup.allowance(other, T0 + d, UTC_ZONE) for d in days
    ]


def test_an_override_sets_the_day_a_ramp_or_turns_it_off(engine: Engine, warm: None) -> None:
    add_instances(engine, ["A"], T0)
    domain.set_warmup(engine, "A", domain.WarmupChange(day=3), now=T0)
    assert warmup.day_of(_row(engine, "A"), T0, UTC_ZONE) == 3
    domain.set_warmup(engine, "A", domain.WarmupChange(ramp="5, 8"), now=T0)
    row = _row(engine, "A")
    assert row.warmup_ramp == "5,8"
    assert warmup.allowance(row, T0, UTC_ZONE) == 5
    assert warmup.allowance(row, T0 + timedelta(days=1), UTC_ZONE) == 8
    assert warmup.allowance(row, T0 + timedelta(days=2), UTC_ZONE) is None
    domain.set_warmup(engine, "A", domain.WarmupChange(off=True), now=T0)
    assert warmup.allowance(_row(engine, "A"), T0, UTC_ZONE) is None
    with pytest.raises(domain.WarmupRefused, match="ramp") as refused:
        domain.set_warmup(engine, "A", domain.WarmupChange(ramp="5,0"), now=T0)
    assert refused.value.field == "ramp"
    with pytest.raises(domain.WarmupRefused, match="day") as refused:
        domain.set_warmup(engine, "A", domain.WarmupChange(day=0), now=T0)
    assert refused.value.field == "day"
    with pytest.raises(domain.UnknownInstance):
        domain.set_warmup(engine, "Z", domain.WarmupChange(off=True), now=T0)


def test_a_claim_stops_at_the_allowance_and_known_contacts_weigh_half(engine: Engine) -> None:
    """Ramp 4: four new contacts, or seven known ones (0.5 each: a claim needs a whole
    unit left, as its row may be a new contact), then the sender waits for the next day."""
    add_instances(engine, ["A", "B"], T0)
    for name in ("A", "B"):
        domain.set_warmup(engine, name, domain.WarmupChange(ramp="4"), now=T0)
    cid = add_running_campaign(engine, spec(pace=PACED), recipients=20, senders=["A", "B"], now=T0)
    d_t = tables.deliveries
    with engine.begin() as conn:
        targets = conn.execute(
            select(d_t.c.target).where(d_t.c.campaign_id == cid, d_t.c.sender == "B")
        ).scalars()
        sc.mark_known(conn, [("B", t) for t in targets], now=T0)
    clock = FakeClock(T0)
    gateway = RecordingSender(clock)
    with quiet_dispatcher(engine, gateway, clock, workers=1) as d:
        for _ in range(40):
            d.tick()
            clock.advance(0.5)
    by_sender = {
        name: sum(1 for i, _, at in gateway.sent if i == name and at < T0 + timedelta(hours=1))
        for name in ("A", "B")
    }
    assert by_sender == {"A": 4, "B": 7}, by_sender
    assert _row(engine, "A").warmup_used == 4.0
    assert _row(engine, "B").warmup_used == 3.5


def test_signals_raise_levels_pause_at_high_and_resume_after_the_cool_down(
    engine: Engine,
) -> None:
    add_instances(engine, ["A"], T0)
    care = current()
    paused: list[tuple[str, str]] = []
    with engine.begin() as conn:
        health.add_signals(conn, "A", {"failed": 4}, T0, note_pause=lambda *a: paused.append(a))
    row = _row(engine, "A")
    assert (row.health_level, row.health_score) == ("medium", 16.0)
    assert health.pace_factor(row, T0) == 2.0
    # it decays with the half-life
    half = T0 + timedelta(seconds=care.health_half_life_seconds)
    assert health.score_now(row, half) == pytest.approx(8.0)
    with engine.begin() as conn:
        health.add_signals(conn, "A", {"timelock": 1}, T0, note_pause=lambda *a: paused.append(a))
    row = _row(engine, "A")
    assert row.health_level == "high" and row.paused_reason is not None
    assert row.paused_reason.startswith("health high (score 41): 1 timelock; resumes by itself")
    assert paused == [("A", row.paused_reason)]
    assert row.health_resume_at == T0 + timedelta(seconds=care.health_cooldown_seconds)
    with engine.begin() as conn:  # not yet: still paused
        health.sweep(conn, T0 + timedelta(seconds=care.health_cooldown_seconds - 1))
    assert _row(engine, "A").paused_reason is not None
    with engine.begin() as conn:  # the cool-down is over and the score fell below high
        health.sweep(conn, T0 + timedelta(seconds=care.health_cooldown_seconds))
    row = _row(engine, "A")
    assert row.paused_reason is None and row.health_level in ("low", "medium")
    with engine.connect() as conn:
        levels = [c["level_to"] for c in reversed(sc.recent_changes(conn, "A"))]
    assert levels[:2] == ["medium", "high"] and levels[2] in ("low", "medium")


def test_critical_waits_for_a_person_whose_resume_clears_the_score(engine: Engine) -> None:
    add_instances(engine, ["A"], T0)
    with engine.begin() as conn:
        health.add_signals(conn, "A", {"logout": 1, "forbidden": 1}, T0)
    row = _row(engine, "A")
    assert row.health_level == "critical"
    assert str(row.paused_reason).startswith("health critical")
    with engine.begin() as conn:
        health.sweep(conn, T0 + timedelta(days=2))
    assert _row(engine, "A").paused_reason is not None  # no cool-down ends it
    out = domain.resume(engine, "A", now=T0 + timedelta(days=2))
    assert str(out.cleared_reason).startswith("health critical")
    row = _row(engine, "A")
    assert (row.paused_reason, row.health_level, row.health_score) == (None, "low", 0.0)
    with engine.connect() as conn:
        assert sc.changes_by_level(conn) == {"critical": 1, "low": 1}


def test_a_health_pause_never_replaces_another_reason(engine: Engine) -> None:
    add_instances(engine, ["A"], T0)
    with engine.begin() as conn:
        from storage.queries import instances as iq

        iq.pause(conn, "A", "quota_exhausted", now=T0)
        health.add_signals(conn, "A", {"logout": 1}, T0)
    assert _row(engine, "A").paused_reason == "quota_exhausted"


def test_the_settings_make_the_care_settings_and_refuse_levels_out_of_order() -> None:
    from pydantic import ValidationError

    from gatecast.settings import Settings

    care = Settings(health_high=50, timelock_seconds=90).care()
    assert (care.health_high, care.timelock_seconds, care.warmup_first_day) == (50, 90, 15)
    with pytest.raises(ValidationError, match="GATECAST_HEALTH_MEDIUM < GATECAST_HEALTH_HIGH"):
        Settings(health_medium=50, health_high=40)


@pytest.mark.postgres
def test_sends_and_webhooks_remember_the_same_chats_without_a_deadlock(pg_engine: Engine) -> None:
    """A send's record and a webhook's apply write the same sender's chats at once, the
    pairs in opposite orders: each used to wait for the other's insert (PostgreSQL's
    deadlock, seen in the replies journey). Both now write in key order."""
    add_instances(pg_engine, "s1", now=T0)
    pairs = [("s1", f"+1415555{i:04d}") for i in range(300)]
    errors: list[BaseException] = []

    def write(mark: bool, rows: list[tuple[str, str]]) -> None:
        try:
            for _ in range(5):
                with pg_engine.begin() as conn:
                    if mark:
                        sc.mark_known(conn, rows, now=T0)
                    else:
                        sc.remember_sent(conn, rows, now=T0)
        except BaseException as exc:
            errors.append(exc)

    for round_ in range(4):
        with pg_engine.begin() as conn:
            conn.execute(tables.sender_chats.delete())
        threads = [
            threading.Thread(target=write, args=(False, pairs)),
            threading.Thread(target=write, args=(True, pairs[::-1])),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, (round_, errors)
    with pg_engine.connect() as conn:
        known = conn.execute(select(tables.sender_chats.c.known_at)).scalars().all()
    assert len(known) == 300 and all(k is not None for k in known)
