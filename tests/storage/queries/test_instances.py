"""The ban-signal read of sender care: each sender's new status events with an error
code are read once (after the last one read), old ones never again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, insert

from storage import tables
from storage.queries import sender_care as sc

T0 = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)
FLOOR = T0 - timedelta(hours=1)


def _event(
    engine: Engine, mid: str, instance_id: str | None, at: datetime, code: str | None
) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(tables.status_events).values(
                message_id=mid,
                instance_id=instance_id,
                status="failed",
                error_code=code,
                occurred_at=at,
                received_at=at,
                applied=True,
            )
        )


def _instances(engine: Engine, *ids: str) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(tables.instances),
            [
                {"instance_id": i, "state": "connected", "created_at": T0, "updated_at": T0}
                for i in ids
            ],
        )


def _read(engine: Engine) -> dict[str, list[tuple[str, str, datetime]]]:
    with engine.begin() as conn:
        return sc.coded_events_since(conn, floor=FLOOR)


def test_new_coded_events_are_read_once(engine: Engine) -> None:
    _instances(engine, "A", "B", "C")
    _event(engine, "M1", "A", T0, "463")
    _event(engine, "M2", "B", T0 + timedelta(seconds=1), "404")
    _event(engine, "M3", "C", T0, None)  # no code: not a signal
    _event(engine, "M4", "Z", T0, "463")  # no such sender
    assert _read(engine) == {
        "A": [("463", "M1", T0)],
        "B": [("404", "M2", T0 + timedelta(seconds=1))],
    }
    assert _read(engine) == {}  # read once
    _event(engine, "M5", "A", T0 + timedelta(seconds=5), "403")
    assert _read(engine) == {"A": [("403", "M5", T0 + timedelta(seconds=5))]}


def test_a_sender_never_read_looks_back_only_to_the_floor(engine: Engine) -> None:
    _instances(engine, "A")
    _event(engine, "OLD", "A", FLOOR - timedelta(minutes=1), "463")
    _event(engine, "NEW", "A", T0, "463")
    assert _read(engine) == {"A": [("463", "NEW", T0)]}


def test_the_pace_state_of_many_senders_is_one_read(engine: Engine) -> None:
    """``pace_state`` of 600 senders (an array parameter on PostgreSQL, an IN list on
    SQLite): each present sender's pause and next slot, unknown ids absent."""
    from storage.queries import instances as iq

    now = datetime(2026, 12, 7, 12, tzinfo=UTC)
    ids = [f"P{i:04d}" for i in range(600)]
    with engine.begin() as conn:
        iq.ensure(conn, ids, now=now)
        iq.pause(conn, "P0007", "error 463", now=now)
        assert iq.reserve_slot(conn, "P0599", now=now, next_at=now + timedelta(seconds=30))
    with engine.connect() as conn:
        state = iq.pace_state(conn, [*ids, "unknown"])
    assert len(state) == 600 and "unknown" not in state
    assert state["P0007"][0] == "error 463" and state["P0001"] == (None, None)
    assert state["P0599"][1] is not None and state["P0599"][1] == now + timedelta(seconds=30)
