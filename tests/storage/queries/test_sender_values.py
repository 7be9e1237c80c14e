"""Several senders' probes in one statement (``storage/queries/sender_values.py``) answer
what a probe per sender answered, on SQLite and PostgreSQL, also across chunks: each
sender's first queued row, sends today, known chats; and the claim's health signal for
several senders at once keeps each sender's score and its level changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, insert

from scheduler import health
from storage import tables
from storage.queries import deliveries as dq
from storage.queries import sender_care as sc
from storage.queries import sender_values, waiting
from tests.rows import campaign_row
from tests.scheduler.helpers import add_instances

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two senders per statement, so a handful of senders spans several."""
    monkeypatch.setattr(sender_values, "CHUNK", 2)
    monkeypatch.setattr(sc, "CHUNK", 2)


def _queue(engine: Engine) -> int:
    base: dict[str, Any] = {
        "target_kind": "phone",
        "attempts": 0,
        "content": {},
        "queued_at": T0,
        "error": None,
        "sent_at": None,
    }
    with engine.begin() as conn:
        cid = campaign_row(conn, T0)
        rows: list[dict[str, Any]] = [
            # A: two dated rows (the earlier one, then by id), one undated
            {"sender": "A", "state": "queued", "due_at": T0 + timedelta(seconds=5)},
            {"sender": "A", "state": "queued", "due_at": T0, "attempts": 2, "error": "e"},
            {"sender": "A", "state": "queued", "due_at": None},
            {"sender": "B", "state": "queued", "due_at": None},  # B: undated only
            {"sender": "C", "state": "sent", "due_at": T0, "sent_at": T0},  # C: none queued
            {"sender": "D", "state": "queued", "due_at": T0 + timedelta(minutes=1)},
            {"sender": None, "state": "queued", "due_at": T0},  # unassigned
            {"sender": "E", "state": "sending", "due_at": T0},  # E: in flight
            {"sender": "E", "state": "read", "due_at": T0, "sent_at": T0 - timedelta(hours=1)},
            {"sender": "E", "state": "read", "due_at": T0, "sent_at": T0 - timedelta(days=2)},
        ]
        conn.execute(
            insert(tables.deliveries),
            [
                {**base, "campaign_id": cid, "target": f"+4470000{i:05d}", **r}
                for i, r in enumerate(rows)
            ],
        )
    return cid


def test_first_queued_of_many_senders_matches_each_senders_probe(
    engine: Engine, small_chunks: None
) -> None:
    cid = _queue(engine)
    with engine.connect() as conn:
        got = waiting.first_queued(conn, cid, ["D", None, "A", "B", "C", "A", "Z"])
    assert list(got) == ["D", None, "A", "B"]  # in the order asked, those with rows
    assert got["A"] == waiting.FirstQueued(due_at=T0, attempts=2, error="e", undated=True)
    assert got["B"] == waiting.FirstQueued(due_at=None, attempts=0, error=None, undated=True)
    assert got["D"].due_at == T0 + timedelta(minutes=1) and not got["D"].undated
    assert got[None].due_at == T0


def test_sends_since_of_many_senders_counts_sent_and_in_flight(
    engine: Engine, small_chunks: None
) -> None:
    _queue(engine)
    since = T0 - timedelta(days=1)
    with engine.connect() as conn:
        got = dq.sends_since_by_sender(conn, ["A", "C", "E", "Z", "C"], since)
        assert got == {"C": 1, "E": 2}
        assert got == {s: n for s in ("A", "C", "E", "Z") if (n := dq.sends_since(conn, s, since))}


def test_sends_since_of_many_senders_stops_at_the_cap_as_one_senders_probe_does(
    engine: Engine, small_chunks: None
) -> None:
    _queue(engine)
    since = T0 - timedelta(days=3)  # E: two read rows and one in flight
    with engine.connect() as conn:
        for cap in (0, 1, 2, 5):
            got = dq.sends_since_by_sender(conn, ["A", "C", "E"], since, at_most=cap)
            one = {s: dq.sends_since(conn, s, since, at_most=cap) for s in ("A", "C", "E")}
            assert got == {s: n for s, n in one.items() if n}
        assert dq.sends_since_by_sender(conn, ["E"], since, at_most=1) == {"E": 2}
        assert dq.sends_since_by_sender(conn, ["A"], since) == {}  # E's rows not A's


def test_known_chats_of_many_pairs(engine: Engine, small_chunks: None) -> None:
    with engine.begin() as conn:
        sc.remember_sent(conn, [("A", "+1"), ("A", "+2"), ("B", "+1")], now=T0)
        sc.mark_known(conn, [("A", "+2")], now=T0)
    pairs = [("A", "+1"), ("A", "+2"), ("A", "+3"), ("B", "+1"), ("B", "+2"), ("A", "+1")]
    with engine.connect() as conn:
        assert sc.chats_of(conn, pairs) == {
            ("A", "+1"): False,
            ("A", "+2"): True,
            ("B", "+1"): False,
        }
        assert sc.chats_of(conn, []) == {}


def test_a_signal_for_several_senders_stores_each_score_and_level_change(engine: Engine) -> None:
    add_instances(engine, ["A", "B", "C"], T0)
    with engine.begin() as conn:
        health.add_signals(conn, "B", {"failed": 3}, T0)  # 12: just under medium
    with engine.connect() as conn:
        rows = sc.care_rows(conn, ["A", "B", "C"])
    with engine.begin() as conn:
        health.add_signal_each(conn, "failed", {"A": 1, "B": 1, "X": 1}, T0, rows)
    with engine.connect() as conn:
        after = sc.care_rows(conn, ["A", "B", "C"])
        changes = sc.recent_changes(conn, "B")
    assert (after["A"].health_score, after["A"].health_level) == (4.0, "low")
    assert (after["B"].health_score, after["B"].health_level) == (16.0, "medium")
    assert (after["C"].health_score, after["C"].health_at) == (0.0, None)  # no signal
    assert [c["level_to"] for c in changes][:1] == ["medium"]  # B's change is logged
