"""The paced claim's statements for many senders at once (``reserve_slots``,
``claim_first_of_each``, ``set_next_sends``), in both dialects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select, update

from storage import tables
from storage.queries import deliveries as dq
from storage.queries import instances as iq
from tests.scheduler.helpers import add_instances, add_running_campaign, spec

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_reserve_slots_takes_only_free_unpaused_senders(engine: Engine) -> None:
    add_instances(engine, ["A", "B", "C", "D"], T0)
    i = tables.instances
    with engine.begin() as conn:
        conn.execute(update(i).where(i.c.instance_id == "B").values(paused_reason="quota"))
        conn.execute(
            update(i).where(i.c.instance_id == "C").values(next_send_at=T0 + timedelta(seconds=5))
        )
        conn.execute(
            update(i).where(i.c.instance_id == "D").values(next_send_at=T0 - timedelta(seconds=5))
        )
        taken = iq.reserve_slots(conn, ["A", "B", "C", "D", "unknown"], now=T0)
        assert taken == ["A", "D"]
        assert iq.reserve_slots(conn, ["A", "D"], now=T0 - timedelta(seconds=1)) == []
        iq.set_next_sends(conn, [("A", T0 + timedelta(seconds=3)), ("D", T0)])
        times = iq.next_send_times(conn, ["A", "C", "D"])
    assert times == {
        "A": T0 + timedelta(seconds=3),
        "C": T0 + timedelta(seconds=5),
        "D": T0,
    }


def test_claim_first_of_each_takes_each_senders_earliest_due_row_once(engine: Engine) -> None:
    add_instances(engine, ["A", "B", "C"], T0)
    cid = add_running_campaign(engine, spec(), recipients=9, senders=["A", "B", "C"], now=T0)
    d = tables.deliveries
    with engine.begin() as conn:
        ids = {
            s: [r for (r,) in conn.execute(select(d.c.id).where(d.c.sender == s).order_by(d.c.id))]
            for s in "ABC"
        }
        # A's first row is due later (a retry's backoff); C has nothing due at all
        conn.execute(
            update(d).where(d.c.id == ids["A"][0]).values(due_at=T0 + timedelta(minutes=5))
        )
        conn.execute(update(d).where(d.c.sender == "C").values(due_at=T0 + timedelta(hours=1)))
        lease = T0 + timedelta(minutes=2)
        first = dq.claim_first_of_each(
            conn, campaign_id=cid, senders=["A", "B", "C"], now=T0, lease_until=lease
        )
        second = dq.claim_first_of_each(
            conn, campaign_id=cid, senders=["A", "B", "C"], now=T0, lease_until=lease
        )
        states = dict(conn.execute(select(d.c.id, d.c.state).where(d.c.campaign_id == cid)).all())
    assert [(r.sender, r.id) for r in first] == [("A", ids["A"][1]), ("B", ids["B"][0])]
    assert [(r.sender, r.id) for r in second] == [("A", ids["A"][2]), ("B", ids["B"][1])]
    assert all(r.attempts == 1 and r.content for r in first + second)
    claimed = {r.id for r in first + second}
    assert {i for i, s in states.items() if s == "sending"} == claimed
