"""The number check before a first message (scheduler/number_checks.py; decision 68):
asked ahead of the dispatcher and at the claim, in batches per sender, kept per
number for MAX_AGE, and a number not on the app skipped with the reason; nothing at all
where the gateway has no check. SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select

from campaigns.delivery_lifecycle import NOT_ON_APP_ERROR
from gateway.dialects import capabilities
from gateway.messages import Message
from gateway.outcomes import SendOutcome
from scheduler.clock import FakeClock
from scheduler.number_checks import MAX_AGE, NumberChecks
from scheduler.pacing import typing_seconds
from scheduler.policy import Pace
from storage import tables
from tests.scheduler.helpers import (
    RecordingSender,
    add_instances,
    add_running_campaign,
    quiet_dispatcher,
    spec,
    states_of,
)

T0 = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)
ABSENT = "+15550000002"


@dataclass
class CheckingSender(RecordingSender):
    """A gateway double with Evolution's number check and typing."""

    absent: frozenset[str] = frozenset({ABSENT})
    checks: list[tuple[str, list[str]]] = field(default_factory=list)
    typed: list[tuple[str, str, float]] = field(default_factory=list)
    capabilities = capabilities("evolution")

    def check_numbers(self, instance_id: str, numbers: list[str]) -> dict[str, bool]:
        with self.lock:
            self.checks.append((instance_id, list(numbers)))
        return {n: n not in self.absent for n in numbers}

    def show_typing(self, instance_id: str, to: str, seconds: float) -> bool:
        with self.lock:
            self.typed.append((instance_id, to, seconds))
        return True

    def send(self, instance_id: str, to: str, message: Message) -> SendOutcome:
        assert to not in self.absent, "sent to a number not on the app"
        return super().send(instance_id, to, message)


def _errors(engine: Engine, campaign_id: int) -> dict[str, str | None]:
    d = tables.deliveries
    with engine.connect() as conn:
        rows = conn.execute(select(d.c.target, d.c.error).where(d.c.campaign_id == campaign_id))
        return {str(t): e for t, e in rows}


def test_the_pass_ahead_skips_queued_rows_and_answers_are_kept(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["S1", "S2"], T0)
    cid = add_running_campaign(engine, spec(), recipients=5, senders=["S1", "S2"], now=T0)
    client = CheckingSender(clock)
    checks = NumberChecks(engine, clock, lambda: client)
    assert checks.ahead(client, [cid], frozenset({"S9"})) == 0  # a worker leasing others
    assert client.checks == []
    assert checks.ahead(client, [cid]) == 1
    assert sorted(s for s, _ in client.checks) == ["S1", "S2"]  # one batch per sender
    assert sum(len(n) for _, n in client.checks) == 5
    assert states_of(engine, cid)[ABSENT] == "skipped"
    assert _errors(engine, cid)[ABSENT] == NOT_ON_APP_ERROR
    assert [s for t, s in states_of(engine, cid).items() if t != ABSENT] == ["queued"] * 4
    # fresh answers are not asked again; after MAX_AGE they are
    assert checks.ahead(client, [cid]) == 0 and len(client.checks) == 2
    clock.advance((MAX_AGE + timedelta(hours=1)).total_seconds())
    checks.ahead(client, [cid])
    assert sum(len(n) for _, n in client.checks[2:]) == 4  # the queued ones


def test_the_dispatcher_checks_at_the_claim_and_types_when_asked(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["S1"], T0)
    paced = spec(pace={"per_minute": 30, "delay_seconds": [0, 0], "typing": True})
    cid = add_running_campaign(engine, paced, recipients=3, senders=["S1"], now=T0)
    client = CheckingSender(clock)
    with quiet_dispatcher(engine, client, clock) as dispatcher:
        for _ in range(6):
            dispatcher.tick()
            clock.advance(2.5)
    assert states_of(engine, cid)[ABSENT] == "skipped"
    assert _errors(engine, cid)[ABSENT] == NOT_ON_APP_ERROR
    assert sorted(to for _, to, _ in client.sent) == ["+15550000000", "+15550000001"]
    # typing before each send, within half the 2 s gap
    assert [to for _, to, _ in client.typed] == [to for _, to, _ in client.sent]
    assert all(0 < s <= 1.0 for _, _, s in client.typed)
    with engine.connect() as conn:
        kept = dict(
            conn.execute(select(tables.number_checks.c.number, tables.number_checks.c.on_app)).all()
        )
    assert kept == {"+15550000000": True, "+15550000001": True, ABSENT: False}


def test_the_spec_gateway_checks_nothing_and_sends_as_before(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["S1"], T0)
    cid = add_running_campaign(engine, spec(), recipients=3, senders=["S1"], now=T0)
    client = RecordingSender(clock)  # no capabilities: the spec's gateway
    with quiet_dispatcher(engine, client, clock) as dispatcher:
        dispatcher.tick()
    assert set(states_of(engine, cid).values()) == {"sent"}
    with engine.connect() as conn:
        assert conn.execute(select(tables.number_checks)).all() == []


def test_typing_is_part_of_the_gap() -> None:
    off = Pace(per_minute=20, delay_min=5, delay_max=15)
    assert typing_seconds(off, 100) == 0.0
    on = Pace(per_minute=20, delay_min=5, delay_max=15, typing=True)
    assert typing_seconds(on, 0) == 1.0
    assert typing_seconds(on, 1000) == 2.5  # half the shortest gap (the 5 s delay)
    fast = Pace(per_minute=0, delay_min=0, delay_max=0, typing=True)
    assert typing_seconds(fast, 50) == 0.0  # unpaced: no gap to type in
    slow = Pace(per_minute=1, delay_min=30, delay_max=60, typing=True)
    assert typing_seconds(slow, 10_000) == 8.0
