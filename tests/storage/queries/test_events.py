"""Status-event statements: the SQLite driver path stores and applies what the Core path does."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine, func, insert, select

from campaigns.delivery_lifecycle import STATUS_RULES as RULES
from storage import tables
from storage.queries import events as q
from tests.rows import campaign_row

deliveries = tables.deliveries
status_events = tables.status_events

T0 = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)


def _deliveries(engine: Engine, n: int) -> None:
    """``n`` rows in state ``sent`` with message ids m0 .. m<n-1>."""
    with engine.begin() as conn:
        cid = campaign_row(conn, T0)
        conn.execute(
            insert(deliveries),
            [
                {
                    "campaign_id": cid,
                    "target": f"+4470000{i:05d}",
                    "target_kind": "phone",
                    "state": "sent",
                    "attempts": 1,
                    "message_id": f"m{i}",
                    "content": {},
                    "queued_at": T0,
                    "sent_at": T0,
                }
                for i in range(n)
            ],
        )


def _event(mid: str, status: str, at: datetime, **extra: Any) -> dict[str, Any]:
    """A status event stamped ``at`` and received then (or at T0, if later)."""
    row = {
        "message_id": mid,
        "instance_id": "A",
        "status": status,
        "error_code": None,
        "occurred_at": at,
        "received_at": max(at, T0) if at.tzinfo else T0,
        "applied": False,
    }
    row.update(extra)
    return row


def test_driver_insert_stores_the_text_sqlalchemy_stores(sqlite_engine: Engine) -> None:
    """Same text in the file as the Core insert (so comparisons and reads agree)."""
    times = [
        T0,  # no microseconds: isoformat() would drop them, SQLAlchemy does not
        T0 + timedelta(microseconds=5),
        datetime(2026, 11, 21, 14, 30, 1, 123456, tzinfo=timezone(timedelta(hours=2))),
    ]
    with sqlite_engine.begin() as conn:
        conn.execute(
            q._insert_status_event("sqlite"),
            [_event(f"core{i}", "read", at) for i, at in enumerate(times)],
        )
        q.insert_status_events(conn, [_event(f"raw{i}", "read", at) for i, at in enumerate(times)])
    database = sqlite_engine.url.database
    assert database
    with sqlite3.connect(database) as raw:
        stored = dict(
            raw.execute("SELECT message_id, occurred_at || '|' || received_at FROM status_events")
        )
    for i in range(len(times)):
        assert stored[f"raw{i}"] == stored[f"core{i}"]
    with sqlite_engine.connect() as conn:
        rows = conn.execute(select(status_events.c.message_id, status_events.c.occurred_at))
        back = {str(mid): at for mid, at in rows}
    assert [back[f"raw{i}"] for i in range(len(times))] == times


def test_insert_refuses_naive_times_and_drops_duplicates(engine: Engine) -> None:
    """Both fast inserts (SQLite driver rows, PostgreSQL unnest arrays)."""
    with engine.begin() as conn, pytest.raises(ValueError, match="naive"):
        q.insert_status_events(conn, [_event("m0", "read", datetime(2026, 1, 1))])
    with engine.begin() as conn:
        q.insert_status_events(conn, [_event("m0", "read", T0), _event("m0", "read", T0)])
        q.insert_status_events(conn, [_event("m0", "read", T0 + timedelta(seconds=1))])
        q.insert_status_events(
            conn, [_event("m1", "failed", T0, error_code="463", instance_id=None, applied=True)]
        )
    with engine.connect() as conn:
        failed = conn.execute(
            select(
                status_events.c.error_code, status_events.c.instance_id, status_events.c.applied
            ).where(status_events.c.message_id == "m1")
        ).one()
        assert tuple(failed) == ("463", None, True)
        conn.execute(status_events.delete().where(status_events.c.message_id == "m1"))
        rows = conn.execute(select(status_events.c.occurred_at, status_events.c.applied)).all()
    assert rows == [(T0, False)]


@pytest.mark.parametrize("n", [1, 3, 5, 17, 600])
def test_apply_unapplied_any_batch_size(engine: Engine, n: int) -> None:
    """IN lists padded to a power of two (SQLite) and chunked: every event applied once."""
    _deliveries(engine, n)
    at = T0 + timedelta(minutes=1)
    with engine.begin() as conn:
        q.insert_status_events(
            conn,
            [_event(f"m{i}", "delivered", at) for i in range(n)]
            + [_event(f"m{i}", "read", at + timedelta(seconds=1)) for i in range(0, n, 2)]
            + [_event("nobody", "read", at)],  # never matches a delivery: stays unapplied
        )
        assert (
            q.apply_unapplied(conn, [f"m{i}" for i in range(n)] + ["nobody"], RULES)
            == n + (n + 1) // 2
        )
        assert q.apply_unapplied(conn, [f"m{i}" for i in range(n)], RULES) == 0  # idempotent
    with engine.connect() as conn:
        got: dict[str, int] = dict(
            conn.execute(
                select(deliveries.c.state, func.count()).group_by(deliveries.c.state)
            ).all()
        )
        unapplied = conn.execute(
            select(status_events.c.message_id).where(status_events.c.applied.is_(False))
        ).scalars()
        assert list(unapplied) == ["nobody"]
        first = conn.execute(
            select(deliveries.c.delivered_at, deliveries.c.read_at).where(
                deliveries.c.message_id == "m0"
            )
        ).one()
    assert got == {"read": (n + 1) // 2, **({"delivered": n // 2} if n > 1 else {})}
    assert tuple(first) == (at, at + timedelta(seconds=1))


def test_failed_event_through_the_driver(engine: Engine) -> None:
    _deliveries(engine, 2)
    at = T0 + timedelta(minutes=1)
    with engine.begin() as conn:
        q.insert_status_events(
            conn, [_event("m0", "failed", at, error_code="463"), _event("m1", "failed", at)]
        )
        assert q.apply_unapplied(conn, ["m0", "m1"], RULES) == 2
    with engine.connect() as conn:
        rows = conn.execute(
            select(deliveries.c.state, deliveries.c.error, deliveries.c.failed_at).order_by(
                deliveries.c.id
            )
        ).all()
    assert [tuple(r) for r in rows] == [
        ("failed", "failed by the gateway (code 463)", at),
        ("failed", "failed by the gateway", at),
    ]


def test_sqlite_apply_probes_by_event_rowid_then_message_id(sqlite_engine: Engine) -> None:
    """The plan the driver path relies on: no scan of deliveries, no IN list of its ids
    (one index probe per (event, delivery) pair made batches of hundreds quadratic)."""
    database = sqlite_engine.url.database
    assert database
    with sqlite3.connect(database) as raw:
        progress, failed = q._sqlite_statements(RULES)
        for sql in [*progress.values(), failed]:
            text, params = q._in_list(sql, [1, 2, 3])
            plan = " | ".join(str(r[3]) for r in raw.execute("EXPLAIN QUERY PLAN " + text, params))
            assert "SEARCH ev USING INTEGER PRIMARY KEY" in plan, plan
            assert "ix_deliveries_message_id (message_id=?)" in plan, plan
            assert "SCAN" not in plan, plan


def test_in_list_padding() -> None:
    text, params = q._in_list("x IN (__in_list__)", [7, 8, 9])
    assert (text, params) == ("x IN (?,?,?,?)", [7, 8, 9, 9])
    assert q._in_list("x IN (__in_list__)", [1])[0] == "x IN (?)"


def test_driver_errors_are_raised_as_sqlalchemy_errors(sqlite_engine: Engine) -> None:
    """ "database is locked" from the driver path reads as it did through SQLAlchemy."""
    from sqlalchemy.exc import OperationalError

    from storage.engine import is_lock_error

    database = sqlite_engine.url.database
    assert database
    blocker = sqlite3.connect(database, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with sqlite_engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None
            raw.execute("PRAGMA busy_timeout=0")
            with pytest.raises(OperationalError) as caught, conn.begin():
                q.insert_status_events(conn, [_event("m0", "read", T0)])
            raw.execute("PRAGMA busy_timeout=30000")
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert is_lock_error(caught.value)
    assert "m0" not in str(caught.value)  # parameters are not echoed


def test_prune_deletes_only_applied_events_received_before_the_limit(engine: Engine) -> None:
    old, recent = T0 - timedelta(days=40), T0 - timedelta(days=1)
    rows = [
        *(_event(f"old{i}", "read", old, received_at=old, applied=True) for i in range(5)),
        _event("old-unapplied", "read", old, received_at=old),  # may settle an unknown row
        _event("recent", "read", recent, received_at=recent, applied=True),
    ]
    with engine.begin() as conn:
        q.insert_status_events(conn, rows)
    before = T0 - timedelta(days=30)
    with engine.begin() as conn:
        assert q.prune_applied_events(conn, received_before=before, limit=3) == 3
    with engine.begin() as conn:
        assert q.prune_applied_events(conn, received_before=before, limit=3) == 2
        assert q.prune_applied_events(conn, received_before=before, limit=3) == 0
    with engine.connect() as conn:
        left = set(conn.execute(select(status_events.c.message_id)).scalars())
    assert left == {"old-unapplied", "recent"}


@pytest.mark.postgres
def test_pg_raced_event_lookup_reads_only_unapplied_events(pg_engine: Engine) -> None:
    """The lookup after every recorded batch (migration 0013): through the partial
    ``ix_status_events_unapplied``, never ``uq_status_event`` over the applied history (a
    parallel bitmap scan of it cost 24 ms a batch at 10M events), nor a scan; and it still
    finds the raced event."""
    _deliveries(pg_engine, 1)
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO status_events (message_id, instance_id, status, occurred_at,"
            " received_at, applied) SELECT 'old' || g, 'A', s, now(), now(), true"
            " FROM generate_series(1, 30000) g, unnest(ARRAY['sent', 'read']) s"
        )
        # events of messages other tools sent through the instance: unapplied for good
        conn.exec_driver_sql(
            "INSERT INTO status_events (message_id, instance_id, status, occurred_at,"
            " received_at, applied) SELECT 'other' || g, 'A', 'sent', now(), now(), false"
            " FROM generate_series(1, 3000) g"
        )
        q.insert_status_events(conn, [_event("m0", "delivered", T0 + timedelta(minutes=1))])
        conn.exec_driver_sql("ANALYZE status_events")
    mids = ["m0"] + [f"new{i}" for i in range(255)]
    with pg_engine.connect() as conn:
        sql = q._UNAPPLIED.params(mids=mids).compile(
            dialect=conn.dialect, compile_kwargs={"literal_binds": True}
        )
        plan = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {sql}").scalar_one()[0]["Plan"]
    nodes, todo = [], [plan]
    while todo:
        node = todo.pop()
        nodes.append(node)
        todo.extend(node.get("Plans", []))
    indexes = {n.get("Index Name") for n in nodes}
    assert "ix_status_events_unapplied" in indexes and "uq_status_event" not in indexes, indexes
    scans = [n for n in nodes if n["Node Type"] == "Seq Scan"]
    assert all(n["Relation Name"] != "status_events" for n in scans), plan
    assert not [n for n in nodes if n["Node Type"] == "Gather" or n["Parallel Aware"]], plan
    with pg_engine.begin() as conn:
        assert q.apply_unapplied(conn, mids, RULES) == 1
