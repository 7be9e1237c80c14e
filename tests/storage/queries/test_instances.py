"""The ban-signal (463) check: a fresh event pauses its sender; old ones never again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, insert, select, update

from storage import tables
from storage.queries import instances as iq

T0 = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)
CODE = "463"


def _event(engine: Engine, mid: str, instance_id: str | None, at: datetime, code: str) -> None:
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


def _check(engine: Engine, now: datetime) -> list[str]:
    with engine.begin() as conn:
        return iq.pause_on_restriction_events(conn, now=now, code=CODE, reason="banned")


def _paused(engine: Engine) -> dict[str, str | None]:
    i = tables.instances
    with engine.connect() as conn:
        return {str(a): b for a, b in conn.execute(select(i.c.instance_id, i.c.paused_reason))}


def test_a_fresh_463_pauses_and_an_old_one_never_again(engine: Engine) -> None:
    with engine.begin() as conn:
        iq.ensure(conn, ["A", "B", "C", "D"], now=T0)
        iq.pause(conn, "D", "by hand", now=T0)
    _event(engine, "m1", "A", T0 + timedelta(seconds=1), CODE)
    _event(engine, "m2", "C", T0 + timedelta(seconds=1), "131026")  # another code
    _event(engine, "m3", None, T0 + timedelta(seconds=1), CODE)  # no instance
    _event(engine, "m4", "D", T0 + timedelta(seconds=1), CODE)  # already paused
    assert _check(engine, T0 + timedelta(seconds=2)) == ["A"]
    assert _paused(engine) == {"A": "banned", "B": None, "C": None, "D": "by hand"}

    # resumed: the 463 it was paused for does not pause it again, tick after tick
    with engine.begin() as conn:
        assert iq.resume(conn, "A", now=T0 + timedelta(minutes=5))
    assert _check(engine, T0 + timedelta(minutes=6)) == []
    assert _check(engine, T0 + timedelta(minutes=7)) == []
    assert _paused(engine)["A"] is None

    # a new one after the pause does
    _event(engine, "m5", "A", T0 + timedelta(minutes=8), CODE)
    assert _check(engine, T0 + timedelta(minutes=9)) == ["A"]


def test_a_sender_never_paused_counts_every_463(engine: Engine) -> None:
    with engine.begin() as conn:
        iq.ensure(conn, ["A"], now=T0)
        conn.execute(update(tables.instances).values(paused_at=None))
    _event(engine, "m1", "A", datetime(2001, 1, 1, tzinfo=UTC), CODE)
    assert _check(engine, T0) == ["A"]
