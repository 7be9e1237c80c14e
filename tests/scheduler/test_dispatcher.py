"""Dispatcher outcomes against the sandbox over real HTTP, in both dialects."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, select

from gateway.client import GatewayClient
from gateway.sandbox import Sandbox, SandboxConfig, run_sandbox_in_thread
from scheduler.clock import FakeClock
from scheduler.dispatcher import Dispatcher
from scheduler.recording import SendObserved
from storage import tables
from tests.scheduler.helpers import add_instances, add_running_campaign, spec, states_of

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def no_events(conn: object, ids: object, now: object) -> int:
    return 0


@pytest.fixture(params=["spec", "reference"])
def dialect(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _sandbox(dialect: str, **kw: object) -> Iterator[Sandbox]:
    cfg = SandboxConfig(dialect=dialect, auto_link=True, status_delays=(0, 0, 0), **kw)  # type: ignore[arg-type]
    with run_sandbox_in_thread(cfg) as sb:
        yield sb


def dispatcher(engine: Engine, sb: Sandbox, clock: FakeClock, **kw: object) -> Dispatcher:
    args: dict[str, object] = {"workers": 4, "rng": random.Random(3), "apply_pending": no_events}
    args.update(kw)
    return Dispatcher(
        engine,
        lambda: GatewayClient(sb.url, sb.access_token, timeout=30.0),
        clock=clock,
        **args,  # type: ignore[arg-type]
    )


def test_every_recipient_gets_exactly_one_message(sqlite_engine: Engine, dialect: str) -> None:
    for sb in _sandbox(dialect):
        iids = [sb.create_linked_instance(), sb.create_linked_instance()]
        clock = FakeClock(T0)
        add_instances(sqlite_engine, iids, T0)
        cid = add_running_campaign(sqlite_engine, spec(), recipients=60, senders=iids, now=T0)
        with dispatcher(sqlite_engine, sb, clock, batch_size=16) as d:
            d.run(until_done=True, max_ticks=100)
        assert set(states_of(sqlite_engine, cid).values()) == {"sent"}
        msgs = sb.messages()
        per = Counter(m["to"] for m in msgs)
        assert len(per) == 60 and set(per.values()) == {1}
        d_t = tables.deliveries
        with sqlite_engine.connect() as conn:
            rows = conn.execute(select(d_t.c.target, d_t.c.message_id, d_t.c.sender)).all()
        truth = {m["message_id"]: (m["to"], m["instance_id"]) for m in msgs}
        for target, mid, sender in rows:
            assert truth[mid] == (target.lstrip("+"), sender)


def test_quota_trap_pauses_the_sender_and_keeps_its_rows(
    sqlite_engine: Engine, dialect: str
) -> None:
    for sb in _sandbox(dialect, monthly_quota=3):
        iid = sb.create_linked_instance()
        clock = FakeClock(T0)
        add_instances(sqlite_engine, [iid], T0)
        cid = add_running_campaign(sqlite_engine, spec(), recipients=10, senders=[iid], now=T0)
        with dispatcher(sqlite_engine, sb, clock, batch_size=1, workers=1) as d:
            for _ in range(8):
                d.tick()
            assert iid in d.paused_senders
        got = Counter(states_of(sqlite_engine, cid).values())
        assert got == {"sent": 3, "queued": 7}
        d_t = tables.deliveries
        i_t = tables.instances
        with sqlite_engine.connect() as conn:
            attempts = conn.execute(select(d_t.c.attempts).where(d_t.c.state == "queued")).scalars()
            assert set(attempts) == {0}  # an instance problem does not burn attempts
            reason = conn.execute(select(i_t.c.paused_reason)).scalar_one()
        assert reason == "quota_exhausted"
        assert len(sb.messages()) == 3


def test_ambiguous_answers_become_unknown_and_are_never_resent(sqlite_engine: Engine) -> None:
    for sb in _sandbox("reference", backend_down_rate=1.0):
        iid = sb.create_linked_instance()
        clock = FakeClock(T0)
        add_instances(sqlite_engine, [iid], T0)
        cid = add_running_campaign(sqlite_engine, spec(), recipients=5, senders=[iid], now=T0)
        with dispatcher(sqlite_engine, sb, clock) as d:
            d.run(until_done=True, max_ticks=20)
            before = sb.stats()["requests"]
            clock.advance(3600)
            d.tick()
            assert sb.stats()["requests"] == before
        assert set(states_of(sqlite_engine, cid).values()) == {"unknown"}


def test_refused_sends_retry_with_backoff_then_fail(sqlite_engine: Engine) -> None:
    for sb in _sandbox("spec", fault_rate_429=1.0):
        iid = sb.create_linked_instance()
        clock = FakeClock(T0)
        add_instances(sqlite_engine, [iid], T0)
        cid = add_running_campaign(
            sqlite_engine,
            spec(retry={"max_attempts": 3, "backoff_seconds": 10}),
            recipients=2,
            senders=[iid],
            now=T0,
        )
        d_t = tables.deliveries
        with dispatcher(sqlite_engine, sb, clock, failure_burst=0) as d:
            d.tick()
            d.flush()  # unpaced batches are pipelined: record the one in flight
            with sqlite_engine.connect() as conn:
                rows = conn.execute(select(d_t.c.state, d_t.c.attempts, d_t.c.due_at)).all()
            assert {(s, a) for s, a, _ in rows} == {("queued", 1)}
            # first backoff: jittered within [base/2, base]
            assert all(5 <= (due - T0).total_seconds() <= 10 for _, _, due in rows)
            d.tick()  # nothing is due yet: no request
            d.run(until_done=True, max_ticks=200)
        with sqlite_engine.connect() as conn:
            rows = conn.execute(select(d_t.c.state, d_t.c.attempts, d_t.c.error)).all()
        assert {(s, a) for s, a, _ in rows} == {("failed", 3)}
        assert all("gave up after 3 attempts" in (e or "") for _, _, e in rows)
        assert states_of(sqlite_engine, cid)


def test_on_outcome_hook_sees_every_classified_send(sqlite_engine: Engine) -> None:
    for sb in _sandbox("spec", monthly_quota=3):
        iid = sb.create_linked_instance()
        clock = FakeClock(T0)
        add_instances(sqlite_engine, [iid], T0)
        add_running_campaign(sqlite_engine, spec(), recipients=5, senders=[iid], now=T0)
        observed: list[SendObserved] = []
        with dispatcher(
            sqlite_engine, sb, clock, batch_size=1, workers=1, on_outcome=observed.append
        ) as d:
            for _ in range(6):
                d.tick()
        seen = [o.outcome for o in observed]
        assert seen[:3] == ["accepted"] * 3
        assert "instance" in seen[3:]
        # the hook also gets the gateway's answer time, the message type and the claim's lag
        first = observed[0]
        assert first.message_type == "text"
        assert first.send_seconds is not None and first.send_seconds > 0
        assert first.claim_late_seconds is not None and first.claim_late_seconds >= 0


def test_paused_senders_follow_the_database_after_a_resume(sqlite_engine: Engine) -> None:
    from storage.queries import instances as iq

    for sb in _sandbox("spec"):
        iid = sb.create_linked_instance()
        clock = FakeClock(T0)  # never advanced: after one send the pace holds the rest
        add_instances(sqlite_engine, [iid], T0)
        add_running_campaign(
            sqlite_engine, spec(pace={"per_minute": 1}), recipients=3, senders=[iid], now=T0
        )
        with dispatcher(sqlite_engine, sb, clock, batch_size=1, workers=1) as d:
            d.tick()
            assert d.paused_senders == {}
            with sqlite_engine.begin() as conn:
                iq.pause(conn, iid, "quota_exhausted", now=T0)
            d.tick()
            assert d.paused_senders == {iid: "quota_exhausted"}
            with sqlite_engine.begin() as conn:
                iq.resume(conn, iid, now=T0)
            d.tick()
            assert d.paused_senders == {}


def test_a_sender_held_until_its_webhook_is_registered_sends_once_released(
    sqlite_engine: Engine,
) -> None:
    """The start's pass holds a sender never registered at this URL (decision 40): the
    other sender sends meanwhile; released, it sends too."""
    with run_sandbox_in_thread(SandboxConfig(auto_link=True)) as sb:
        held, free = sb.create_linked_instance(), sb.create_linked_instance()
        clock = FakeClock(T0)
        add_instances(sqlite_engine, [held, free], T0)
        add_running_campaign(sqlite_engine, spec(), recipients=4, senders=[held, free], now=T0)
        with dispatcher(sqlite_engine, sb, clock, batch_size=16) as d:
            d.hold_unregistered([held])
            d.run(max_ticks=5)
            assert {m["instance_id"] for m in sb.messages()} == {free}
            d.registered(held)
            d.run(until_done=True, max_ticks=50)
        assert {m["instance_id"] for m in sb.messages()} == {held, free}
