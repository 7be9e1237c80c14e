"""Claims, leases, bursts, the failure-rate brake and per-send times on SQLite and
PostgreSQL."""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select

from campaigns import lifecycle
from gateway.messages import Message
from gateway.outcomes import InstanceProblem, OutcomeKind, SendOutcome
from scheduler.clock import FakeClock, SystemClock
from storage import tables
from storage.queries import deliveries as dq
from storage.queries import instances as iq
from storage.types import utcnow
from tests.scheduler.helpers import (
    RecordingSender,
    add_instances,
    add_running_campaign,
    quiet_dispatcher,
    spec,
    states_of,
)

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_claims_never_overlap_between_connections(engine: Engine) -> None:
    add_instances(engine, ["A"], T0)
    cid = add_running_campaign(engine, spec(), recipients=200, senders=["A"], now=T0)
    got: list[list[int]] = []
    lock = threading.Lock()

    def worker() -> None:
        mine: list[int] = []
        while True:
            with engine.begin() as conn:
                rows = dq.claim(
                    conn,
                    campaign_id=cid,
                    sender="A",
                    now=T0,
                    lease_until=T0 + timedelta(minutes=1),
                    limit=7,
                )
            if not rows:
                break
            mine.extend(r.id for r in rows)
        with lock:
            got.append(mine)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for ids in got for i in ids]
    assert len(every) == 200 and len(set(every)) == 200
    assert set(states_of(engine, cid).values()) == {"sending"}


def test_expired_lease_marks_unknown_and_is_never_resent(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A"], T0)
    cid = add_running_campaign(engine, spec(), recipients=3, senders=["A"], now=T0)
    with engine.begin() as conn:  # a process claims and dies mid-send
        dq.claim(
            conn,
            campaign_id=cid,
            sender="A",
            now=T0,
            lease_until=T0 + timedelta(seconds=30),
            limit=2,
        )
    sender = RecordingSender(clock)
    with quiet_dispatcher(engine, sender, clock, workers=1) as d:
        d.tick()
        assert len(sender.sent) == 1  # only the unclaimed row; the leased ones wait
        clock.advance(31)
        res = d.tick()
        assert res.expired == 2
        d.run(until_done=True, max_ticks=10)
    assert Counter(states_of(engine, cid).values()) == {"unknown": 2, "sent": 1}
    with engine.connect() as conn:
        state = conn.execute(select(tables.campaigns.c.state)).scalar_one()
    assert state == lifecycle.COMPLETED
    assert len(sender.sent) == 1


def test_a_burst_of_failures_pauses_the_sender(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A"], T0)
    cid = add_running_campaign(
        engine,
        spec(safety={"max_failure_rate": 1.0, "min_sample": 1}),
        recipients=8,
        senders=["A"],
        now=T0,
    )
    refused = SendOutcome(OutcomeKind.PERMANENT, reason="blocked", error_code="403")
    sender = RecordingSender(clock, script={f"+1555000000{i}": [refused] for i in range(8)})
    with quiet_dispatcher(
        engine,
        sender,
        clock,
        workers=1,
        batch_size=1,
        failure_burst=5,
    ) as d:
        for _ in range(8):
            d.tick()
    got = Counter(states_of(engine, cid).values())
    assert got == {"failed": 5, "queued": 3}
    with engine.connect() as conn:
        reason = conn.execute(select(tables.instances.c.paused_reason)).scalar_one()
    assert reason == "burst of 5 consecutive failures"


def test_failure_rate_pauses_the_campaign_with_the_reason(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A"], T0)
    cid = add_running_campaign(
        engine,
        spec(safety={"max_failure_rate": 0.3, "min_sample": 10}),
        recipients=40,
        senders=["A"],
        now=T0,
    )
    refused = SendOutcome(OutcomeKind.PERMANENT, reason="not on the app", error_code="404")
    script = {f"+{15550000000 + i}": [refused] for i in range(40) if i % 2 == 0}
    sender = RecordingSender(clock, script=script)
    with quiet_dispatcher(
        engine,
        sender,
        clock,
        workers=1,
        batch_size=4,
        failure_burst=0,
    ) as d:
        d.run(until_done=True, max_ticks=50)
    c = tables.campaigns
    with engine.connect() as conn:
        state, reason = conn.execute(select(c.c.state, c.c.state_reason)).one()
    assert state == lifecycle.PAUSED
    assert "failure rate" in reason and "30%" in reason
    assert Counter(states_of(engine, cid).values())["queued"] > 0


def test_two_dispatchers_on_one_campaign_never_double_send(engine: Engine) -> None:
    clock = SystemClock()
    now = utcnow()
    add_instances(engine, ["A", "B"], now)
    cid = add_running_campaign(engine, spec(), recipients=300, senders=["A", "B"], now=now)
    sender = RecordingSender(clock)
    ds = [
        quiet_dispatcher(
            engine,
            sender,
            clock,
            workers=2,
            batch_size=20,
            rng=random.Random(i),
        )
        for i in range(2)
    ]
    threads = [threading.Thread(target=d.run, kwargs={"until_done": True}) for d in ds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for d in ds:
        d.close()
    per = Counter(to for _, to, _ in sender.sent)
    assert len(per) == 300 and set(per.values()) == {1}
    assert set(states_of(engine, cid).values()) == {"sent"}
    d_t = tables.deliveries
    with engine.connect() as conn:
        assert set(conn.execute(select(d_t.c.attempts)).scalars()) == {1}


def test_an_error_463_holds_cold_contacts_until_the_lock_ends(engine: Engine) -> None:
    """A 463 no longer pauses the sender: its known chats go on, its cold contacts wait
    for the lock's end (60 s when the gateway does not say) and then go out."""
    from sqlalchemy import insert

    from storage.queries import sender_care as sc

    clock = FakeClock(T0)
    add_instances(engine, ["A", "B"], T0)
    cid = add_running_campaign(engine, spec(), recipients=6, senders=["A", "B"], now=T0)
    d_t = tables.deliveries
    with engine.begin() as conn:
        a_targets = sorted(
            conn.execute(
                select(d_t.c.target).where(d_t.c.campaign_id == cid, d_t.c.sender == "A")
            ).scalars()
        )
        sc.mark_known(conn, [("A", a_targets[0])], now=T0)  # one known chat
        conn.execute(
            insert(tables.status_events).values(
                message_id="X1",
                instance_id="A",
                status="failed",
                error_code="463",
                occurred_at=T0,
                received_at=T0,
                applied=False,
            )
        )
    sender = RecordingSender(clock)
    with quiet_dispatcher(engine, sender, clock, workers=1) as d:
        d.run(until_done=True, max_ticks=400)
        assert "A" not in d.paused_senders
    sent_by_a = {to: at for i, to, at in sender.sent if i == "A"}
    assert set(sent_by_a) == set(a_targets)
    assert sent_by_a[a_targets[0]] < T0 + timedelta(seconds=60)  # the known chat went on
    for cold in a_targets[1:]:
        assert sent_by_a[cold] >= T0 + timedelta(seconds=60), (cold, sent_by_a)
    assert Counter(states_of(engine, cid).values()) == {"sent": 6}


class _SlowSender(RecordingSender):
    """Each send takes 10 ms of the fake clock before the gateway answers."""

    def send(self, instance_id: str, to: str, message: Message) -> SendOutcome:
        assert isinstance(self.clock, FakeClock)
        self.clock.advance(0.01)
        return super().send(instance_id, to, message)


def test_sent_at_is_each_sends_acceptance_not_the_batch_record(engine: Engine) -> None:
    """An unpaced batch: every row's sent_at is the moment its own answer came back."""
    clock = FakeClock(T0)
    add_instances(engine, ["A"], T0)
    cid = add_running_campaign(engine, spec(), recipients=40, senders=["A"], now=T0)
    sender = _SlowSender(clock)
    with quiet_dispatcher(engine, sender, clock, workers=1) as d:
        d.run(until_done=True, max_ticks=20)
    d_ = tables.deliveries
    with engine.connect() as conn:
        rows = conn.execute(select(d_.c.target, d_.c.sent_at).where(d_.c.campaign_id == cid))
        got: dict[str, datetime] = {str(to): at for to, at in rows}
    accepted = {to: at for _, to, at in sender.sent}
    assert len(accepted) == 40
    assert got == accepted  # not one shared time per recorded batch
    assert len(set(got.values())) == 40


def _senders_of(engine: Engine, campaign_id: int) -> Counter[str | None]:
    d = tables.deliveries
    with engine.connect() as conn:
        rows = conn.execute(select(d.c.sender).where(d.c.campaign_id == campaign_id)).all()
    return Counter(r[0] for r in rows)


def test_a_paused_sender_hands_over_after_the_grace_and_not_before(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A", "B"], T0)
    cid = add_running_campaign(engine, spec(), recipients=6, senders=["A"], now=T0)
    relogin = SendOutcome(
        OutcomeKind.INSTANCE, reason="relogin", problem=InstanceProblem.RELOGIN_REQUIRED
    )
    sender = RecordingSender(clock, script={"+15550000000": [relogin]})
    with quiet_dispatcher(
        engine,
        sender,
        clock,
        workers=1,
        batch_size=1,
        sender_grace_seconds=60,
    ) as d:
        d.tick()  # A is paused by its first send
        clock.advance(30)
        for _ in range(3):
            d.tick()
        assert sender.sent == [] and _senders_of(engine, cid) == {"A": 6}
        assert d.stalled == {}  # B could take them: not stalled
        clock.advance(31)
        d.run(until_done=True, max_ticks=50)
    assert Counter(states_of(engine, cid).values()) == {"sent": 6}
    assert {i for i, _, _ in sender.sent} == {"B"}


@dataclass
class ReconnectedMidSend(RecordingSender):
    """Refuses the first send as "relogin required" while, meanwhile, the sender's
    reconnect is recorded (a drop healed while the refused send was on its way)."""

    engine: Engine | None = None

    def send(self, instance_id: str, to: str, message: Message) -> SendOutcome:
        if self.counter == 0 and not self.sent:
            self.counter = 1
            assert self.engine is not None
            self.clock.advance(1)  # type: ignore[attr-defined]
            with self.engine.begin() as conn:
                iq.mark_state(conn, instance_id, "connected", now=self.clock.now())
            return SendOutcome(
                OutcomeKind.INSTANCE, reason="relogin", problem=InstanceProblem.RELOGIN_REQUIRED
            )
        return super().send(instance_id, to, message)


def test_a_refusal_older_than_a_reconnect_neither_pauses_nor_unlinks(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A"], T0)
    cid = add_running_campaign(engine, spec(), recipients=3, senders=["A"], now=T0)
    sender = ReconnectedMidSend(clock, engine=engine)
    with quiet_dispatcher(engine, sender, clock, workers=1, batch_size=1) as d:
        d.run(until_done=True, max_ticks=50)
    assert Counter(states_of(engine, cid).values()) == {"sent": 3}
    with engine.connect() as conn:
        row = conn.execute(
            select(tables.instances.c.state, tables.instances.c.paused_reason).where(
                tables.instances.c.instance_id == "A"
            )
        ).one()
    assert tuple(row) == ("connected", None)


def test_a_gone_sender_hands_over_at_once_and_marks_itself(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A", "B", "C"], T0)
    cid = add_running_campaign(engine, spec(), recipients=20, senders=["A"], now=T0)
    invalid = SendOutcome(
        OutcomeKind.INSTANCE,
        reason="Instance ID Invalidated",
        problem=InstanceProblem.INVALID_INSTANCE,
    )
    sender = RecordingSender(clock, script={"+15550000000": [invalid]})
    with quiet_dispatcher(engine, sender, clock, workers=1, batch_size=1) as d:
        d.run(until_done=True, max_ticks=50)
    assert Counter(states_of(engine, cid).values()) == {"sent": 20}
    used = Counter(i for i, _, _ in sender.sent)
    assert set(used) == {"B", "C"}  # spread over both healthy senders
    with engine.connect() as conn:
        state = conn.execute(
            select(tables.instances.c.state).where(tables.instances.c.instance_id == "A")
        ).scalar_one()
    assert state == "gone"


def test_no_healthy_sender_stalls_the_campaign(engine: Engine) -> None:
    clock = FakeClock(T0)
    add_instances(engine, ["A"], T0)
    cid = add_running_campaign(engine, spec(), recipients=3, senders=["A"], now=T0)
    quota = SendOutcome(OutcomeKind.INSTANCE, reason="q", problem=InstanceProblem.QUOTA_EXHAUSTED)
    sender = RecordingSender(clock, script={"+15550000000": [quota]})
    with quiet_dispatcher(engine, sender, clock, workers=1, batch_size=1) as d:
        ticks = d.run(until_done=True, stop_when_stalled=True, max_ticks=100)
        assert ticks < 100
        assert d.stalled[cid] == "A (quota_exhausted); 3 recipient(s) wait"
    assert Counter(states_of(engine, cid).values()) == {"queued": 3}


def test_rows_of_a_forgotten_sender_go_to_the_named_healthy_one(engine: Engine) -> None:
    from campaigns import instances as domain

    clock = FakeClock(T0)
    add_instances(engine, ["A", "B", "X"], T0)
    named = {**spec(), "instances": ["A", "B"]}
    cid = add_running_campaign(engine, named, recipients=4, senders=["A"], now=T0)
    with engine.begin() as conn:  # B is named but logged out: not healthy
        conn.execute(
            tables.instances.update()
            .where(tables.instances.c.instance_id == "B")
            .values(state="logged_out")
        )
    assert domain.forget(engine, "A").released == 4
    sender = RecordingSender(clock)
    with quiet_dispatcher(engine, sender, clock) as d:
        d.run(until_done=True, stop_when_stalled=True, max_ticks=20)
        assert "recipients of a forgotten sender" in d.stalled[cid]  # X is not named
    with engine.begin() as conn:
        conn.execute(
            tables.instances.update()
            .where(tables.instances.c.instance_id == "B")
            .values(state="connected")
        )
    with quiet_dispatcher(engine, sender, clock) as d:
        d.run(until_done=True, max_ticks=50)
    assert Counter(states_of(engine, cid).values()) == {"sent": 4}
    assert {i for i, _, _ in sender.sent} == {"B"}
