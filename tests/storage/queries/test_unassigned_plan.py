"""The hand-over's check for queued rows without a sender reads the partial
``ix_deliveries_unassigned`` (migration 0023) on SQLite and PostgreSQL: one probe, never
the campaign's queued rows (issue 30: SQLite planned it on ``ix_deliveries_campaign_state``
and read every queued row on each dispatcher tick). The cost is measured in
``bench/claim_cost.py``; here the plan and the answers."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, bindparam, text, update

from storage import tables
from storage.queries import instances as iq
from tests.rows import campaign_row

T0 = datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)
ROWS = 20_000


def _queue(engine: Engine, rows: int) -> int:
    """A campaign with ``rows`` queued rows, each with a sender (bulk SQL); its id."""
    with engine.begin() as conn:
        cid = campaign_row(conn, T0)
        conn.execute(
            text(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :rows)"
                " INSERT INTO deliveries (campaign_id, target, target_kind, sender, state,"
                " attempts, content, queued_at) SELECT :cid, '+44' || CAST(i AS TEXT), 'phone',"
                " 'S' || CAST(i % 10 AS TEXT), 'queued', 0, :content, :at FROM n"
            ).bindparams(
                bindparam("content", type_=tables.deliveries.c.content.type),
                bindparam("at", type_=tables.deliveries.c.queued_at.type),
            ),
            {"rows": rows, "cid": cid, "content": {}, "at": T0},
        )
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("ANALYZE deliveries")
    return cid


def _plan(engine: Engine, cid: int) -> str:
    with engine.connect() as conn:
        sql = iq.unassigned_probe(cid).compile(
            dialect=conn.dialect, compile_kwargs={"literal_binds": True}
        )
        if conn.dialect.name == "sqlite":
            return " | ".join(str(r[3]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
        plan: Any = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {sql}").scalar_one()
        return str(plan)


def test_the_unassigned_check_is_one_probe_of_its_partial_index(engine: Engine) -> None:
    cid = _queue(engine, ROWS)
    plan = _plan(engine, cid)
    assert "ix_deliveries_unassigned" in plan, plan
    assert "ix_deliveries_campaign_state" not in plan and "Seq Scan" not in plan, plan
    with engine.connect() as conn:
        assert not iq.has_unassigned(conn, cid)
    with engine.begin() as conn:  # a forgotten sender's rows
        conn.execute(
            update(tables.deliveries).where(tables.deliveries.c.sender == "S3").values(sender=None)
        )
    with engine.connect() as conn:
        assert iq.has_unassigned(conn, cid)
        assert len(iq.queued_targets(conn, cid, None)) == ROWS // 10
        assert not iq.has_unassigned(conn, cid + 1)
