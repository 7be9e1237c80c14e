"""The counts the triggers keep (migration 0007) stay exact through every statement that
writes deliveries and events: after a random sequence of operations, a campaign's state
counts equal ``COUNT(*)`` of its rows, and the counters equal what happened (never less
after retention pruning). On SQLite and PostgreSQL."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, func, select

from campaigns import delivery_lifecycle as dl
from campaigns.delivery_lifecycle import STATUS_RULES
from storage import states, tables
from storage.queries import campaigns as cq
from storage.queries import deliveries as dq
from storage.queries import events as eq
from storage.queries import tallies
from storage.states import Move
from tests.rows import campaign_row

T0 = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
_d = tables.deliveries
SENDERS = ("AAA", "BBB")


def _campaign(conn: Connection, name: str) -> int:
    return campaign_row(conn, T0, name=name)


def _materialise(
    conn: Connection,
    cid: int,
    start: int,
    n: int,
    columns: tuple[str, ...] = dq.NEW_DELIVERY_COLUMNS,
) -> None:
    """``n`` queued rows the way a start writes them (the driver-level bulk insert), a
    few skipped, one repeated target left alone (``columns``: an older schema's)."""
    convert = {c: dq.bind_processor(conn, c) for c in columns}
    rows = []
    for i in [*range(start, start + n), start]:
        values: dict[str, Any] = {
            "campaign_id": cid,
            "target": f"+44700{cid:02d}{i:05d}",
            "target_kind": "phone",
            "contact_id": None,
            "sender": SENDERS[i % 2],
            "state": states.SKIPPED if i % 11 == 0 else states.QUEUED,
            "attempts": 0,
            "due_at": T0,
            "content": {},
            "error": None,
            "queued_at": T0,
            "recipient_tz": None,
        }
        rows.append(tuple(convert[c](values[c]) for c in columns))
    # an older schema (fewer columns) predates the target search's index (migration 0025)
    dq.insert_new_deliveries(
        conn, rows, columns, index_targets=tuple(columns) == tuple(dq.NEW_DELIVERY_COLUMNS)
    )


def _truth(conn: Connection, cid: int) -> dict[str, int]:
    counts = dict.fromkeys(states.ALL, 0)
    rows = conn.execute(
        select(_d.c.state, func.count()).where(_d.c.campaign_id == cid).group_by(_d.c.state)
    )
    for state, n in rows:
        counts[str(state)] = int(n)
    return counts


#: how often each operation comes in the random sequence
WEIGHTS = {
    "materialise": 3,
    "claim": 5,
    "outcome": 5,
    "events": 5,
    "retry_failed": 1,
    "resend_unknown": 1,
    "cancel": 0.3,
    "expire": 1,
    "prune": 2,
}


class Run:
    """Random operations on two campaigns, with the counters' expected values."""

    def __init__(self, engine: Engine, seed: int) -> None:
        self.engine = engine
        self.rng = random.Random(seed)
        self.now = T0 + timedelta(minutes=1)
        self.mid = 0
        self.expected: dict[str, int] = {}
        with engine.begin() as conn:
            self.cids = [_campaign(conn, "a"), _campaign(conn, "b")]

    def count(self, name: str, n: int) -> None:
        self.expected[name] = self.expected.get(name, 0) + n

    def rows(self, conn: Connection, cid: int, state: str) -> list[Any]:
        return list(conn.execute(select(_d).where(_d.c.campaign_id == cid, _d.c.state == state)))

    def step(self, conn: Connection) -> None:
        cid = self.rng.choice(self.cids)
        op = self.rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
        self.now += timedelta(seconds=5)
        if op == "materialise":
            _materialise(conn, cid, self.rng.randrange(0, 400), self.rng.randrange(1, 40))
        elif op == "claim":
            sender = self.rng.choice(SENDERS)
            lease = self.now + timedelta(seconds=self.rng.choice([1, 60]))
            if self.rng.random() < 0.5:
                dq.claim(
                    conn,
                    campaign_id=cid,
                    sender=sender,
                    now=self.now,
                    lease_until=lease,
                    limit=self.rng.randrange(1, 20),
                )
            else:
                dq.claim_first_of_each(
                    conn, campaign_id=cid, senders=SENDERS, now=self.now, lease_until=lease
                )
        elif op == "outcome":
            sending = self.rows(conn, cid, states.SENDING)
            self.rng.shuffle(sending)
            third = len(sending) // 3
            sent, back, ended = sending[:third], sending[third : 2 * third], sending[2 * third :]
            pairs = []
            for r in sent:
                self.mid += 1
                pairs.append((r.id, f"m{self.mid}", self.now))
            self.count("sends_accepted", dq.record_sent(conn, pairs, move=dl.SEND_ACCEPTED))
            dq.record_requeued(
                conn, [(r.id, self.now, "busy") for r in back], move=dl.SEND_REQUEUED
            )
            terminal = self.rng.choice([states.FAILED, states.UNKNOWN, states.SKIPPED])
            n = dq.record_terminal(
                conn, [(r.id, "x", None) for r in ended], move=dl.SEND_MOVES[terminal], now=self.now
            )
            if terminal != states.SKIPPED:
                self.count(f"sends_{'ambiguous' if terminal == states.UNKNOWN else 'failed'}", n)
        elif op == "events":
            carried = [
                r
                for s in (states.SENT, states.DELIVERED)
                for r in self.rows(conn, cid, s)
                if r.message_id
            ]
            picked = self.rng.sample(carried, min(len(carried), self.rng.randrange(0, 15)))
            before = self.rows(conn, cid, states.FAILED)
            events = []
            for r in picked:
                status = self.rng.choice(["delivered", "read", "failed"])
                events.append(
                    {
                        "message_id": r.message_id,
                        "status": status,
                        "occurred_at": self.now,
                        "received_at": self.now - timedelta(days=self.rng.choice([0, 40])),
                    }
                )
            events.append(  # an event no delivery carries (another tool's message)
                {
                    "message_id": f"other{self.mid}",
                    "status": "sent",
                    "occurred_at": self.now,
                    "received_at": self.now,
                }
            )
            stored_before = _stored(conn)
            eq.insert_status_events(conn, events)
            stored = _stored(conn)
            for status, n in stored.items():
                self.count(f"webhook_status_{status}", n - stored_before.get(status, 0))
            eq.apply_unapplied(conn, [r.message_id for r in picked], STATUS_RULES)
            self.count("sends_failed", len(self.rows(conn, cid, states.FAILED)) - len(before))
        elif op == "retry_failed":
            cq.requeue(conn, cid, dl.RETRY, now=self.now)
        elif op == "resend_unknown":
            cq.requeue(
                conn,
                cid,
                Move("retry_unknown_only", (states.UNKNOWN,), states.QUEUED),
                now=self.now,
            )
        elif op == "cancel":
            cq.skip_queued(conn, cid, "cancelled", move=dl.SKIP_QUEUED, now=self.now)
        elif op == "expire":
            self.count(
                "sends_ambiguous",
                dq.expire_leases(
                    conn,
                    move=dl.LEASE_EXPIRED,
                    now=self.now,
                    error="lease expired",
                    campaign_id=cid,
                ),
            )
        elif op == "prune":
            eq.prune_applied_events(conn, received_before=self.now - timedelta(days=30), limit=50)


def _stored(conn: Connection) -> dict[str, int]:
    se = tables.status_events
    return {
        str(s): int(n)
        for s, n in conn.execute(select(se.c.status, func.count()).group_by(se.c.status))
    }


@pytest.mark.parametrize("seed", [1, 2])
def test_counts_stay_exact_through_random_operations(engine: Engine, seed: int) -> None:
    run = Run(engine, seed)
    pruned_any = False
    for _ in range(12):
        with engine.begin() as conn:
            for _ in range(8):
                run.step(conn)
            tallies.fold(conn)
        with engine.connect() as conn:
            for cid in run.cids:
                assert tallies.delivery_counts(conn, cid) == _truth(conn, cid)
            by_campaign = tallies.delivery_counts_by_campaign(conn)
            none = dict.fromkeys(states.ALL, 0)
            assert {c: by_campaign.get(c, none) for c in run.cids} == {
                c: _truth(conn, c) for c in run.cids
            }
            counters = tallies.counters(conn)
            assert {k: v for k, v in counters.items() if v} == {
                k: v for k, v in run.expected.items() if v
            }
            stored = sum(_stored(conn).values())
            counted = sum(v for k, v in counters.items() if k.startswith("webhook_status_"))
            pruned_any = pruned_any or stored < counted
    assert pruned_any, "the sequence never pruned an event: the test proves nothing of it"
    with engine.connect() as conn:
        assert all(sum(_truth(conn, c).values()) > 0 for c in run.cids)


def test_a_rolled_back_change_leaves_the_counts(engine: Engine) -> None:
    run = Run(engine, 3)
    with engine.begin() as conn:
        _materialise(conn, run.cids[0], 0, 20)
    with engine.connect() as conn:
        before = tallies.delivery_counts(conn, run.cids[0])
        conn.rollback()
        trans = conn.begin()
        cq.skip_queued(conn, run.cids[0], "cancelled", move=dl.SKIP_QUEUED, now=T0)
        assert tallies.delivery_counts(conn, run.cids[0])[states.QUEUED] == 0
        trans.rollback()
        assert tallies.delivery_counts(conn, run.cids[0]) == before == _truth(conn, run.cids[0])


def test_the_migration_counts_the_rows_already_there(db_url: str) -> None:
    from storage.engine import make_engine, upgrade

    engine = make_engine(db_url)
    try:
        upgrade(engine, "0008")  # the revision before the counts
        with engine.begin() as conn:
            cid = _campaign(conn, "old")
            before_0012 = tuple(c for c in dq.NEW_DELIVERY_COLUMNS if c != "recipient_tz")
            _materialise(conn, cid, 0, 30, before_0012)
            conn.execute(
                _d.update()
                .where(_d.c.campaign_id == cid, _d.c.id % 3 == 0)
                .values(state=states.SENT, sent_at=T0, message_id=_d.c.target)
            )
            conn.execute(_d.update().where(_d.c.id % 7 == 0).values(state=states.UNKNOWN))
            eq.insert_status_events(
                conn,
                [
                    {"message_id": f"e{i}", "status": s, "occurred_at": T0, "received_at": T0}
                    for i in range(4)
                    for s in ("delivered", "read")
                ],
            )
        upgrade(engine)
        with engine.connect() as conn:
            truth = _truth(conn, cid)
            assert tallies.delivery_counts(conn, cid) == truth
            sent = conn.execute(select(func.count()).where(_d.c.sent_at.is_not(None))).scalar()
            assert tallies.counters(conn) == {
                "sends_accepted": sent,
                "sends_ambiguous": truth[states.UNKNOWN],
                "sends_failed": 0,
                "webhook_message": 0,
                "webhook_status_delivered": 4,
                "webhook_status_read": 4,
            }
    finally:
        engine.dispose()


def test_each_backend_counts_in_its_own_slot_until_folded(engine: Engine) -> None:
    run = Run(engine, 4)
    cid = run.cids[0]
    with engine.connect() as a, engine.connect() as b:  # two sessions at once
        with a.begin():
            _materialise(a, cid, 0, 10)
        with b.begin():
            cq.skip_queued(b, cid, "cancelled", move=dl.SKIP_QUEUED, now=T0)
    sc = tables.campaign_state_counts
    with engine.connect() as conn:
        slots = set(conn.execute(select(sc.c.slot).distinct()).scalars())
        before = tallies.delivery_counts(conn, cid)
    assert len(slots) == (2 if engine.dialect.name == "postgresql" else 1), slots
    with engine.begin() as conn:
        tallies.fold(conn)
    with engine.connect() as conn:
        assert set(conn.execute(select(sc.c.slot).distinct()).scalars()) == (
            {0} if engine.dialect.name == "postgresql" else slots
        )
        assert tallies.delivery_counts(conn, cid) == before == _truth(conn, cid)
        assert before[states.SKIPPED] == 10  # nine queued cancelled, one skipped at start
