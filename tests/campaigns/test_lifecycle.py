"""Campaign lifecycle: allowed transitions pass, every other one is refused."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, insert, select

from campaigns import lifecycle as lc
from storage import tables

T = tables.campaigns


def _campaign(engine: Engine, state: str = lc.DRAFT) -> int:
    now = datetime.now(UTC)
    with engine.begin() as conn:
        key = conn.execute(
            insert(T).values(
                name="c",
                state=state,
                spec={},
                message_type="text",
                timezone="UTC",
                created_at=now,
                updated_at=now,
            )
        ).inserted_primary_key
    assert key is not None
    return int(key[0])


def _state(engine: Engine, cid: int) -> tuple[str, datetime | None, datetime | None]:
    with engine.connect() as conn:
        r = conn.execute(
            select(T.c.state, T.c.started_at, T.c.finished_at).where(T.c.id == cid)
        ).one()
    return r.state, r.started_at, r.finished_at


def test_happy_path(engine: Engine) -> None:
    cid = _campaign(engine)
    with engine.begin() as conn:
        assert lc.transition(conn, cid, lc.SCHEDULED) == lc.DRAFT
        lc.transition(conn, cid, lc.RUNNING)
        lc.transition(conn, cid, lc.PAUSED, reason="by user")
        lc.transition(conn, cid, lc.RUNNING)
        lc.transition(conn, cid, lc.COMPLETED)
    state, started, finished = _state(engine, cid)
    assert state == lc.COMPLETED and started is not None and finished is not None


@pytest.mark.parametrize(
    ("start", "target"),
    [
        (lc.CANCELLED, lc.RUNNING),
        (lc.COMPLETED, lc.PAUSED),
        (lc.DRAFT, lc.COMPLETED),
        (lc.CANCELLED, lc.CANCELLED),
        (lc.DRAFT, lc.PAUSED),
    ],
)
def test_refused(engine: Engine, start: str, target: str) -> None:
    cid = _campaign(engine, start)
    with pytest.raises(lc.InvalidTransition, match=f"is {start}"), engine.begin() as conn:
        lc.transition(conn, cid, target)
    assert _state(engine, cid)[0] == start


def test_missing_campaign(engine: Engine) -> None:
    with pytest.raises(lc.InvalidTransition, match="does not exist"), engine.begin() as conn:
        lc.transition(conn, 12345, lc.RUNNING)


def test_unknown_state(engine: Engine) -> None:
    cid = _campaign(engine)
    with pytest.raises(ValueError, match="unknown campaign state"), engine.begin() as conn:
        lc.transition(conn, cid, "exploded")
