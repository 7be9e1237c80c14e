"""The queue's statements answer what the old whole-queue reads answered (issue 17 item 2).

The plans (index ranges, a loose scan) are what the benchmark ``bench/claim_cost.py``
measures; here, on SQLite and PostgreSQL, that the answers are right: claim order, the
senders with queued rows, a sender's next due row, pending rows, sends today.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, event, insert, select, update

from storage import tables
from storage.queries import deliveries as dq
from storage.queries import tallies
from tests.rows import campaign_row

deliveries = tables.deliveries

T0 = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)


def _campaign(engine: Engine) -> int:
    with engine.begin() as conn:
        return campaign_row(conn, T0)


def _rows(engine: Engine, cid: int, rows: list[dict[str, Any]]) -> None:
    base = {
        "campaign_id": cid,
        "target_kind": "phone",
        "attempts": 0,
        "content": {},
        "queued_at": T0,
        "state": "queued",
        "sender": "A",
        "due_at": T0,
        "sent_at": None,
    }
    with engine.begin() as conn:
        conn.execute(
            insert(deliveries),
            [{**base, "target": f"+44700{cid}{i:05d}", **r} for i, r in enumerate(rows)],
        )


def test_claim_takes_due_rows_of_its_sender_in_due_then_id_order(engine: Engine) -> None:
    cid = _campaign(engine)
    other = _campaign(engine)
    _rows(
        engine,
        cid,
        [
            {"due_at": T0 - timedelta(seconds=1)},  # 1st
            {"due_at": T0 - timedelta(seconds=5)},  # 0th
            {"due_at": T0 - timedelta(seconds=1)},  # 2nd (same due, higher id)
            {"due_at": T0 + timedelta(seconds=1)},  # not due
            {"due_at": T0 - timedelta(seconds=9), "sender": "B"},  # another sender
            {"due_at": T0 - timedelta(seconds=9), "state": "failed"},  # not queued
        ],
    )
    _rows(engine, other, [{"due_at": T0 - timedelta(seconds=9)}])
    with engine.connect() as conn:
        ids = [
            int(i)
            for i in conn.execute(select(deliveries.c.id).order_by(deliveries.c.id)).scalars()
        ]
    with engine.begin() as conn:
        first = dq.claim(
            conn,
            campaign_id=cid,
            sender="A",
            now=T0,
            lease_until=T0 + timedelta(minutes=2),
            limit=2,
        )
        rest = dq.claim(
            conn,
            campaign_id=cid,
            sender="A",
            now=T0,
            lease_until=T0 + timedelta(minutes=2),
            limit=5,
        )
    assert [r.id for r in first] == sorted([ids[1], ids[0]])
    assert [r.id for r in rest] == [ids[2]]
    with engine.connect() as conn:
        claimed = conn.execute(
            select(deliveries.c.id, deliveries.c.attempts, deliveries.c.attempted_at).where(
                deliveries.c.state == "sending"
            )
        ).all()
    assert sorted(r.id for r in claimed) == sorted([ids[0], ids[1], ids[2]])
    assert all(r.attempts == 1 and r.attempted_at == T0 for r in claimed)


def test_queued_senders_next_due_and_pending(engine: Engine) -> None:
    cid = _campaign(engine)
    other = _campaign(engine)
    _rows(
        engine,
        cid,
        [
            {"sender": "C", "due_at": T0 + timedelta(minutes=3)},
            {"sender": "A", "due_at": T0 + timedelta(minutes=2)},
            {"sender": "A", "due_at": T0 + timedelta(minutes=1)},
            {"sender": "B", "state": "sent", "due_at": T0 - timedelta(minutes=9)},
            {"sender": None},  # a forgotten sender's row
            {"sender": "D", "state": "sending"},
        ],
    )
    _rows(engine, other, [{"sender": "E", "due_at": T0 - timedelta(minutes=9)}])
    with engine.connect() as conn:
        assert dq.queued_senders(conn, cid) == ["A", "C"]
        assert dq.queued_senders(conn, other) == ["E"]
        assert dq.queued_senders(conn, 999) == []
        assert dq.next_due_at(conn, cid, ["A"]) == T0 + timedelta(minutes=1)
        assert dq.next_due_at(conn, cid, ["C", "A"]) == T0 + timedelta(minutes=1)
        assert dq.next_due_at(conn, cid, ["B", "D"]) is None
        assert dq.next_due_at(conn, cid, []) is None
        assert tallies.has_pending(conn, cid, open_states=("queued", "sending"))
        assert tallies.has_pending(conn, cid, open_states=("sending",))
        assert not tallies.has_pending(conn, cid, open_states=("unknown",))
        assert not tallies.has_pending(conn, 999, open_states=("queued", "sending"))


def test_sends_since_counts_sent_and_in_flight_rows_up_to_the_cap(engine: Engine) -> None:
    cid = _campaign(engine)
    midnight = T0.replace(hour=0)
    sent_today = [{"state": "read", "sent_at": midnight + timedelta(hours=h)} for h in range(5)]
    _rows(
        engine,
        cid,
        [
            *sent_today,
            {"state": "sent", "sent_at": midnight - timedelta(minutes=1)},  # yesterday
            {"state": "sending"},  # in flight: counts
            {"state": "sending"},
            {"state": "queued"},  # waiting: does not count
            {"state": "failed", "sent_at": None},
            {"state": "sent", "sent_at": midnight, "sender": "B"},  # another sender
        ],
    )
    with engine.connect() as conn:
        assert dq.sends_since(conn, "A", midnight) == 7
        assert dq.sends_since(conn, "A", midnight, at_most=3) == 5  # 3 sent + 2 in flight
        assert dq.sends_since(conn, "A", midnight, at_most=100) == 7
        assert dq.sends_since(conn, "B", midnight) == 1
        assert dq.sends_since_by_sender(conn, ["A", "B", "Z"], midnight) == {"A": 7, "B": 1}


def test_sends_by_sender_read_one_snapshot_while_a_send_is_recorded(engine: Engine) -> None:
    """A send recorded while the counts are read is counted once (in flight or sent):
    each of the reads sees one snapshot, so the rows it counts in flight are not sent."""
    cid = _campaign(engine)
    midnight = T0.replace(hour=0)
    _rows(engine, cid, [{"state": "sent", "sent_at": midnight}, {"state": "sending"}])
    statements: list[str] = []

    def record_the_send(*_: Any) -> None:  # after each statement of the read
        statements.append("read")
        if len(statements) == 1:
            with engine.begin() as other:
                other.execute(
                    update(tables.deliveries)
                    .where(tables.deliveries.c.state == "sending")
                    .values(state="sent", sent_at=midnight + timedelta(hours=1))
                )

    with engine.connect() as conn:
        event.listen(conn, "after_cursor_execute", record_the_send)
        assert dq.sends_since_by_sender(conn, ["A"], midnight) == {"A": 2}
    assert statements  # the send was recorded during (or right after) the read
    with engine.connect() as conn:
        assert dq.sends_since_by_sender(conn, ["A"], midnight) == {"A": 2}


def test_the_statements_say_the_partial_indexes_predicates_literally() -> None:
    """A partial index serves a statement only if it states the index's predicate (with
    the constant inline, not a bound parameter)."""
    from storage.models import QUEUED_ROWS, SENDING_ROWS
    from storage.queries import instances as iq

    for predicate, expected in (
        (dq._QUEUED, QUEUED_ROWS),
        (dq._SENDING, SENDING_ROWS),
        (iq._QUEUED, QUEUED_ROWS),
    ):
        assert str(predicate.compile()) == f"deliveries.{expected}"
    for sql in dq._CLAIM_FIRST_OF_EACH.values():  # the many-sender paced claim too
        assert QUEUED_ROWS in sql
