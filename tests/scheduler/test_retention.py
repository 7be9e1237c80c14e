"""History retention: applied status events are pruned; evidence is kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, insert, select

from campaigns import delivery_lifecycle as dl
from campaigns.gateway_events import settle_unknown
from gatecast.settings import Settings
from scheduler.defaults import MIN_EVENT_RETENTION_DAYS
from scheduler.retention import EventPruner
from storage import tables
from tests.rows import campaign_row

T0 = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)


def _campaign(engine: Engine) -> int:
    with engine.begin() as conn:
        return campaign_row(conn, T0)


def test_the_pruner_deletes_old_applied_events_in_batches_and_keeps_evidence(
    engine: Engine,
) -> None:
    cid = _campaign(engine)
    attempted = T0 - timedelta(days=10)
    with engine.begin() as conn:
        conn.execute(
            insert(tables.deliveries).values(
                campaign_id=cid,
                target="+447000000001",
                target_kind="phone",
                sender="A",
                state="unknown",
                attempts=1,
                content={},
                queued_at=attempted,
                attempted_at=attempted,
            )
        )
        old = T0 - timedelta(days=40)
        events = [
            {"message_id": f"m{i}", "status": "read", "applied": True, "received_at": old}
            for i in range(7)
        ]
        events.append(  # the unknown row's evidence: its sender, its recipient, in its window
            {
                "message_id": "evidence",
                "status": "delivered",
                "applied": False,
                "received_at": attempted + timedelta(seconds=20),
                "chat": "+447000000001",
            }
        )
        events.append({"message_id": "fresh", "status": "read", "applied": True, "received_at": T0})
        conn.execute(
            insert(tables.status_events),
            [
                {
                    "instance_id": "A",
                    "error_code": None,
                    "chat": None,
                    "occurred_at": e["received_at"],
                }
                | e
                for e in events
            ],
        )
    pruner = EventPruner(engine, timedelta(days=30), batch=3, max_batches=2)
    assert pruner.run_once(T0) == 6  # two batches of three: the rest waits for the next run
    assert pruner.run_once(T0) == 1
    assert pruner.run_once(T0) == 0
    with engine.connect() as conn:
        left = set(conn.execute(select(tables.status_events.c.message_id)).scalars())
    assert left == {"evidence", "fresh"}
    with engine.begin() as conn:  # the start-up pass still settles the row from it
        settled = settle_unknown(conn, now=T0, since=datetime(1970, 1, 1, tzinfo=UTC))
        assert settled.rows == 1
        row = conn.execute(select(tables.deliveries.c.state, tables.deliveries.c.message_id)).one()
    assert tuple(row) == ("delivered", "evidence")


def test_the_retention_is_never_shorter_than_evidence_settling_looks_back() -> None:
    lookback = dl.EVIDENCE_LOOKBACK + dl.EVIDENCE_WINDOW
    assert timedelta(days=MIN_EVENT_RETENTION_DAYS) >= lookback
    with pytest.raises(ValueError, match="at least"):
        EventPruner(None, timedelta(days=1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep every event"):
        Settings(event_retention_days=1)
    assert Settings(event_retention_days=0).event_retention_days == 0
    assert Settings().event_retention_days == 30
