"""Sender leases: each worker holds its fair share of the senders with work, gives up the
excess when another joins, and takes over a dead worker's senders once they expire."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select

from scheduler.sender_leases import SenderLeases, fair_share
from storage import tables
from storage.queries import sender_leases as q

T0 = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
TTL = timedelta(seconds=9)
SENDERS = frozenset(f"s{i:02d}" for i in range(10))


def holders(engine: Engine, now: datetime) -> dict[str, str]:
    with engine.connect() as conn:
        return q.holders(conn, now=now)


def test_fair_share_rounds_up() -> None:
    assert fair_share(10, 1) == 10
    assert fair_share(10, 3) == 4
    assert fair_share(2, 4) == 1
    assert fair_share(0, 2) == 0
    assert fair_share(5, 0) == 5


def test_a_lone_worker_holds_every_sender_with_work(engine: Engine) -> None:
    a = SenderLeases(engine, "a", TTL)
    assert a.refresh(T0, SENDERS) == SENDERS
    # a sender whose queue emptied is given up at once
    assert a.refresh(T0 + timedelta(seconds=1), SENDERS - {"s03"}) == SENDERS - {"s03"}
    assert set(holders(engine, T0)) == SENDERS - {"s03"}


def test_a_joining_worker_gets_its_share_after_the_others_renew(engine: Engine) -> None:
    a, b = SenderLeases(engine, "a", TTL), SenderLeases(engine, "b", TTL)
    a.refresh(T0, SENDERS)
    assert b.refresh(T0, SENDERS) == frozenset()  # a holds everything: nothing free yet
    # a's next renewal sees two live workers and gives up its excess ...
    later = T0 + TTL / 3
    assert len(a.refresh(later, SENDERS)) == 5
    # ... which b takes when it renews (woken by the release on PostgreSQL)
    b.poke()
    assert len(b.refresh(later, SENDERS)) == 5
    assert a.held | b.held == SENDERS and not a.held & b.held
    assert set(holders(engine, later).values()) == {"a", "b"}


def test_three_workers_never_hold_more_than_their_share(engine: Engine) -> None:
    workers = [SenderLeases(engine, name, TTL) for name in "abc"]
    now = T0
    for _ in range(3):
        for w in workers:
            w.poke()
            w.refresh(now, SENDERS)
        now += timedelta(seconds=1)
    sizes = sorted(len(w.held) for w in workers)
    assert sum(sizes) == len(SENDERS) and max(sizes) <= fair_share(len(SENDERS), 3)
    assert len(frozenset().union(*(w.held for w in workers))) == len(SENDERS)


def test_a_dead_workers_senders_are_taken_over_after_its_leases_expire(engine: Engine) -> None:
    a, b = SenderLeases(engine, "a", TTL), SenderLeases(engine, "b", TTL)
    a.refresh(T0, SENDERS)
    b.refresh(T0, SENDERS)
    a.poke()
    a.refresh(T0, SENDERS)
    b.poke()
    b.refresh(T0, SENDERS)
    assert len(b.held) == 5
    # a dies (no more renewals); before its leases expire b keeps its share ...
    b.poke()
    assert len(b.refresh(T0 + TTL / 2, SENDERS)) == 5
    # ... after, b is the only live worker and takes every sender
    after = T0 + TTL + timedelta(seconds=1)
    assert b.refresh(after, SENDERS) == SENDERS
    assert set(holders(engine, after).values()) == {"b"}


def test_a_dead_worker_leaves_no_lease_rows_once_it_is_forgotten(engine: Engine) -> None:
    a, b = SenderLeases(engine, "a", TTL), SenderLeases(engine, "b", TTL)
    a.refresh(T0, SENDERS)  # a holds every sender, then dies
    # the work of half of them is gone meanwhile: nobody will take those over
    rest = frozenset(sorted(SENDERS)[:5])
    after = T0 + TTL + timedelta(seconds=1)
    assert b.refresh(after, rest) == rest
    with engine.connect() as conn:
        rows = conn.execute(select(tables.sender_leases.c.holder)).scalars().all()
    assert sorted(rows) == ["b"] * len(rest)


def test_a_clean_stop_gives_the_senders_up_at_once(engine: Engine) -> None:
    a, b = SenderLeases(engine, "a", TTL), SenderLeases(engine, "b", TTL)
    a.refresh(T0, SENDERS)
    b.refresh(T0, SENDERS)
    a.retire()
    b.poke()
    assert b.refresh(T0 + timedelta(seconds=1), SENDERS) == SENDERS


def test_workers_racing_for_free_senders_never_share_one(engine: Engine) -> None:
    workers = [SenderLeases(engine, f"w{i}", TTL) for i in range(4)]
    for w in workers:  # every worker alive before the race: a share of 3 each
        w.refresh(T0, frozenset())
    barrier = threading.Barrier(len(workers))

    def take(w: SenderLeases) -> None:
        barrier.wait()
        w.poke()
        w.refresh(T0 + timedelta(seconds=1), SENDERS)

    threads = [threading.Thread(target=take, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    held = [w.held for w in workers]
    assert sum(len(h) for h in held) == len(frozenset().union(*held))  # no sender twice
    owners = holders(engine, T0 + timedelta(seconds=1))
    for w in workers:
        assert all(owners[s] == w.holder for s in w.held)
