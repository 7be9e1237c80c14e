"""The moves table (``delivery_lifecycle.MOVES``) is the one home of state changes.

* complete: no statement in storage/, campaigns/ or scheduler/ sets ``deliveries.state``
  but through a move it receives (a grep for a state name written as a row's new state;
  the few exceptions are listed below with the move they are);
* exercised: each move's statement, on a row in every state, moves exactly the rows in
  its from-states to its state and leaves the others as they were (both databases).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, insert, select

from campaigns import delivery_lifecycle as dl
from campaigns.erasure import ANONYMISE
from campaigns.gateway_events import store_events_in
from gateway.events import DeliveryStatus, MessageStatus
from storage import models, states, tables
from storage.queries import campaigns as cq
from storage.queries import deliveries as dq
from storage.queries import erasure as erq
from storage.queries import events as eq
from storage.queries import horizon as hq
from storage.queries import sender_care as sc
from storage.queries import variants as vq
from storage.states import Move
from tests.rows import campaign_row

ROOT = Path(__file__).resolve().parents[2]
T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
_d = tables.deliveries

#: a state name written as a row's new state (not compared: ``==`` and ``!=`` are reads)
_WRITE = re.compile(
    r"""(\bstate\s*=\s*|["']state["']\s*:\s*)(states|dl|delivery_lifecycle)\.[A-Z]+\b"""
    r"""|\bSET\b[^"]*\bstate\s*=\s*'\w+'"""
    r"""|\bstate\s*=\s*'\{states\.\w+\}'"""
)
#: the writes that are not a move received as a parameter, and what each is
EXCEPTIONS = {
    # the claim: its from-state is the partial index's predicate (models.QUEUED_ROWS),
    # checked against the table below
    ("storage/queries/deliveries.py", "UPDATE deliveries SET state='sending'"): "claim",
    ("storage/queries/deliveries.py", "state=states.SENDING,"): "claim",
    # a failed status event: the rows of STATUS_RULES.failed_from (from the table) fail
    ("storage/queries/events.py", "state=states.FAILED,"): "status_failed",
    # new rows, not a change: queued, or skipped at the start (opted out, not renderable)
    ("campaigns/delivery_rows.py", '"state": states.QUEUED,'): "insert",
    ("campaigns/delivery_rows.py", "row.update(state=states.SKIPPED"): "insert",
    # test sends: their own table, not deliveries
    ("campaigns/test_sends.py", '"state": dl.'): "test_sends",
}


def _writes() -> list[tuple[str, str]]:
    found = []
    for folder in ("storage", "campaigns", "scheduler"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("storage/migrations/") or rel.endswith("delivery_lifecycle.py"):
                continue
            for line in path.read_text(encoding="utf-8").splitlines():
                if _WRITE.search(line) and "==" not in line and "!=" not in line:
                    found.append((rel, line.strip()))
    return found


def _excepted(rel: str, line: str) -> str | None:
    for (path, snippet), what in EXCEPTIONS.items():
        if rel == path and snippet in line:
            return what
    return None


def test_every_state_write_goes_through_a_move() -> None:
    writes = _writes()
    stray = [f"{rel}: {line}" for rel, line in writes if _excepted(rel, line) is None]
    assert stray == [], "a state set without a move of delivery_lifecycle.MOVES:\n" + "\n".join(
        stray
    )
    used = {_excepted(rel, line) for rel, line in writes}
    for (path, snippet), what in EXCEPTIONS.items():  # no stale exception
        assert what in used, f"{path}: {snippet!r} is gone: drop the exception"
        assert what in {"insert", "test_sends"} or what in dl.MOVES


def test_the_table() -> None:
    for name, move in dl.MOVES.items():
        assert name == move.name
        assert move.from_states and set(move.from_states) <= set(states.ALL)
        assert move.to in states.ALL and move.to not in move.from_states
    # the status rules storage applies are the table's status moves
    assert dict(dl.STATUS_RULES.forward_from) == {
        m.to: m.from_states for m in (dl.STATUS_SENT, dl.STATUS_DELIVERED, dl.STATUS_READ)
    }
    assert dl.STATUS_RULES.failed_from == dl.STATUS_FAILED.from_states
    # the claim's statement reads the queue's partial index: the table must agree with it
    assert f"state = '{dl.CLAIM.from_states[0]}'" == models.QUEUED_ROWS
    assert Move("claim", (states.QUEUED,), states.SENDING) == dl.CLAIM
    assert ANONYMISE.stop_states == dl.ERASED.from_states
    assert ANONYMISE.stopped_state == dl.ERASED.to


def _phone(state: str) -> str:
    return f"+4470000{states.ALL.index(state):05d}"


def _rows(conn: Connection) -> tuple[int, dict[str, int]]:
    """A campaign with one row in every state; its id and the rows' ids by state."""
    cid = campaign_row(conn, T - timedelta(days=1))
    ids = {}
    for state in states.ALL:
        ids[state] = int(
            conn.execute(
                insert(_d)
                .values(
                    campaign_id=cid,
                    target=_phone(state),
                    sender="A",
                    state=state,
                    attempts=1,
                    due_at=T - timedelta(hours=1),
                    lease_until=T - timedelta(minutes=1),
                    message_id=f"m-{state}",
                    content={},
                    queued_at=T - timedelta(days=1),
                    attempted_at=T - timedelta(hours=1),
                )
                .returning(_d.c.id)
            ).scalar_one()
        )
    return cid, ids


def _status(conn: Connection, status: DeliveryStatus) -> None:
    events = [MessageStatus("A", f"m-{s}", status, chat=_phone(s), at=T) for s in states.ALL]
    store_events_in(conn, events, opt_out_keywords=(), now=T)
    eq.apply_unapplied(conn, [f"m-{s}" for s in states.ALL], dl.STATUS_RULES)


Run = Callable[[Connection, Move, int, dict[str, int]], object]
EVERY = list(states.ALL)

#: each move, and a statement that makes it
EXERCISES: dict[str, list[Run]] = {
    "claim": [
        lambda c, m, cid, ids: dq.claim(
            c, campaign_id=cid, sender="A", now=T, lease_until=T + timedelta(minutes=5), limit=9
        )
    ],
    "send_accepted": [
        lambda c, m, cid, ids: dq.record_sent(c, [(i, f"new-{i}", T) for i in ids.values()], move=m)
    ],
    "send_requeued": [
        lambda c, m, cid, ids: dq.record_requeued(c, [(i, T, "x") for i in ids.values()], move=m),
        lambda c, m, cid, ids: dq.record_requeued(
            c, [(i, T, "x") for i in ids.values()], move=m, refund_attempt=True
        ),
    ],
    **{
        name: [
            lambda c, m, cid, ids: dq.record_terminal(
                c, [(i, "x", None) for i in ids.values()], move=m, now=T
            )
        ]
        for name in ("send_failed", "send_unknown", "send_skipped")
    },
    "lease_expired": [
        lambda c, m, cid, ids: dq.expire_leases(c, move=m, now=T, error="x", campaign_id=cid)
    ],
    "status_sent": [lambda c, m, cid, ids: _status(c, DeliveryStatus.SENT)],
    "status_delivered": [lambda c, m, cid, ids: _status(c, DeliveryStatus.DELIVERED)],
    "status_read": [lambda c, m, cid, ids: _status(c, DeliveryStatus.READ)],
    "status_failed": [lambda c, m, cid, ids: _status(c, DeliveryStatus.FAILED)],
    "skip_queued": [
        lambda c, m, cid, ids: cq.skip_queued(c, cid, "x", move=m, now=T),
        lambda c, m, cid, ids: vq.skip_rest(c, [(i, "x") for i in ids.values()], move=m, now=T),
        lambda c, m, cid, ids: dq.rewrite_queued(c, [], [(i, "x") for i in ids.values()], skip=m),
    ],
    "erased": [
        lambda c, m, cid, ids: [
            erq.anonymise_deliveries(c, -1, _phone(s), ANONYMISE) for s in states.ALL
        ]
    ],
    "give_up": [
        lambda c, m, cid, ids: hq.fail_waiting_since(
            c, cid, "A", move=m, made_before=T, error="x", now=T
        )
    ],
    "parked": [
        lambda c, m, cid, ids: sc.requeue_parked(
            c, [(i, T) for i in ids.values()], move=m, error="x"
        )
    ],
    "refused_under_lock": [
        lambda c, m, cid, ids: sc.requeue_refused(
            c, "A", [f"m-{s}" for s in states.ALL], move=m, until=T, error="x"
        )
    ],
    "retry": [lambda c, m, cid, ids: cq.requeue(c, cid, m, now=T)],
    "retry_unknown": [lambda c, m, cid, ids: cq.requeue(c, cid, m, now=T)],
}


def test_every_move_is_exercised() -> None:
    assert set(EXERCISES) == set(dl.MOVES)


@pytest.mark.parametrize(
    ("name", "run"),
    [(name, run) for name, runs in EXERCISES.items() for run in runs],
    ids=[f"{name}-{i}" for name, runs in EXERCISES.items() for i in range(len(runs))],
)
def test_a_move_takes_its_from_states_to_its_state(engine: Engine, name: str, run: Run) -> None:
    move = dl.MOVES[name]
    with engine.begin() as conn:
        cid, ids = _rows(conn)
        run(conn, move, cid, ids)
        now = dict(conn.execute(select(_d.c.id, _d.c.state).where(_d.c.campaign_id == cid)).all())
    after = {state: str(now[i]) for state, i in ids.items()}
    expected = {s: (move.to if s in move.from_states else s) for s in EVERY}
    assert after == expected
