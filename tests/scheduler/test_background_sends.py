"""Paced sends in the background (``send_concurrency`` > 0): the bound on sends waiting,
a busy sender not claimed again, outcomes recorded once answered, a read timeout made
``unknown``, and each sender's pace held, in both dialects."""

from __future__ import annotations

import itertools
import random
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select

from gateway.client import GatewayClient
from gateway.messages import Message
from gateway.outcomes import OutcomeKind, SendOutcome
from gateway.sandbox import SandboxConfig, run_sandbox_in_thread
from scheduler.clock import Clock, FakeClock, SystemClock
from scheduler.dispatcher import Dispatcher, SupportsSend
from storage import tables
from tests.scheduler.helpers import add_instances, add_running_campaign, no_events, spec, states_of

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
PACED = {"per_minute": 60, "delay_seconds": [0, 0], "daily_cap": None}


@dataclass
class GateSender:
    """A gateway double whose sends wait until the test opens the gate; counts how many
    wait at once and who sent."""

    gate: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    waiting: int = 0
    most_waiting: int = 0
    senders: list[str] = field(default_factory=list)
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def send(self, instance_id: str, to: str, message: Message) -> SendOutcome:
        with self.lock:
            self.waiting += 1
            self.most_waiting = max(self.most_waiting, self.waiting)
            self.senders.append(instance_id)
        self.gate.wait(10)
        with self.lock:
            self.waiting -= 1
            return SendOutcome(OutcomeKind.ACCEPTED, message_id=f"M{next(self.counter)}")


def background(engine: Engine, client: SupportsSend, clock: Clock, **kw: object) -> Dispatcher:
    args: dict[str, object] = {"rng": random.Random(5), "apply_pending": no_events}
    args.update(kw)
    return Dispatcher(engine, lambda: client, clock=clock, **args)  # type: ignore[arg-type]


def by_state(engine: Engine, cid: int) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for state in states_of(engine, cid).values():
        out[state] += 1
    return dict(out)


def test_no_more_sends_wait_than_the_concurrency_and_none_waits_for_another(
    engine: Engine,
) -> None:
    clock = FakeClock(T0)
    senders = [f"S{i}" for i in range(6)]
    add_instances(engine, senders, T0)
    cid = add_running_campaign(engine, spec(pace=PACED), recipients=12, senders=senders, now=T0)
    gw = GateSender()
    with background(engine, gw, clock, send_concurrency=4) as d:
        first = d.tick()  # returns at once: its sends wait on the gateway
        assert (first.claimed, first.waiting) == (4, 4)
        assert by_state(engine, cid) == {"sending": 4, "queued": 8}
        clock.advance(5)  # every slot is due again, but the 4 senders are busy: 2 others
        second = d.tick()
        assert (second.claimed, second.waiting) == (0, 4)  # no room left
        gw.gate.set()
        d.flush()
        assert by_state(engine, cid) == {"sent": 4, "queued": 8}
        while by_state(engine, cid).get("sent", 0) < 12:
            clock.advance(1)
            d.tick()
            d.flush()
    assert gw.most_waiting <= 4
    assert sorted(set(gw.senders)) == senders
    assert set(states_of(engine, cid).values()) == {"sent"}


def test_a_sender_whose_send_waits_is_not_claimed_until_it_answers(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A"], T0)
    cid = add_running_campaign(engine, spec(pace=PACED), recipients=3, senders=["A"], now=T0)
    gw = GateSender()
    with background(engine, gw, clock, send_concurrency=8) as d:
        assert d.tick().claimed == 1
        clock.advance(10)  # its slot is long due, its send still waits
        assert d.tick().claimed == 0
        assert by_state(engine, cid) == {"sending": 1, "queued": 2}
        gw.gate.set()
        d.flush()  # waits for the answer and records it
        assert by_state(engine, cid) == {"sent": 1, "queued": 2}
        assert d.tick().claimed == 1  # free again, and its slot is due
    assert gw.senders == ["A", "A"]


def test_outcomes_are_recorded_with_the_moment_each_send_answered(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A", "B"], T0)
    cid = add_running_campaign(engine, spec(pace=PACED), recipients=2, senders=["A", "B"], now=T0)
    gw = GateSender()
    with background(engine, gw, clock, send_concurrency=8) as d:
        d.tick()
        clock.advance(3)
        gw.gate.set()
        d.flush()
    d_t = tables.deliveries
    with engine.connect() as conn:
        rows = conn.execute(
            select(d_t.c.state, d_t.c.message_id, d_t.c.sent_at).where(d_t.c.campaign_id == cid)
        ).all()
    assert {r.state for r in rows} == {"sent"}
    assert all(r.message_id and r.message_id.startswith("M") for r in rows)
    assert {r.sent_at for r in rows} == {T0 + timedelta(seconds=3)}


def test_a_read_timeout_in_the_background_makes_the_row_unknown(engine: Engine) -> None:
    cfg = SandboxConfig(auto_link=True, slow_rate=1.0, slow_seconds=3.0, status_delays=(0, 0, 0))
    with run_sandbox_in_thread(cfg) as sb:
        iid = sb.create_linked_instance()
        add_instances(engine, [iid], T0)
        cid = add_running_campaign(engine, spec(pace=PACED), recipients=1, senders=[iid], now=T0)
        client = GatewayClient(sb.url, sb.access_token, timeout=0.5)
        with background(engine, client, FakeClock(T0), send_concurrency=4) as d:
            assert d.tick().waiting == 1
            d.flush()
        assert len(sb.messages()) == 1  # it went out: resending could send it twice
    assert set(states_of(engine, cid).values()) == {"unknown"}


def test_each_sender_keeps_its_pace_on_a_gateway_slower_than_its_gap(engine: Engine) -> None:
    # a 0.5 s gap, a gateway answering in 0.7 s: a sender's next send waits for its answer
    pace = {"per_minute": 120, "delay_seconds": [0, 0], "daily_cap": None}
    cfg = SandboxConfig(auto_link=True, latency_ms=(700, 700), status_delays=(0, 0, 0))
    with run_sandbox_in_thread(cfg) as sb:
        iids = [sb.create_linked_instance() for _ in range(3)]
        add_instances(engine, iids, datetime.now(UTC))
        cid = add_running_campaign(
            engine, spec(pace=pace), recipients=9, senders=iids, now=datetime.now(UTC)
        )
        client = GatewayClient(sb.url, sb.access_token, timeout=10.0)
        with background(engine, client, SystemClock(), send_concurrency=16) as d:
            d.run(until_done=True)
    d_t = tables.deliveries
    with engine.connect() as conn:
        rows = conn.execute(
            select(d_t.c.sender, d_t.c.attempted_at, d_t.c.sent_at).where(d_t.c.campaign_id == cid)
        ).all()
    assert set(states_of(engine, cid).values()) == {"sent"}
    per_sender: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for sender, attempted, sent in rows:
        per_sender[sender].append((attempted, sent))
    for sends in per_sender.values():
        sends.sort()
        for (a1, s1), (a2, _) in itertools.pairwise(sends):
            assert (a2 - a1).total_seconds() >= 0.5  # the pace
            assert a2 >= s1  # claimed again only once the previous send answered
