"""A deliveries listing searched by a substring of the target (migration 0025): the same
rows whatever answers it (PostgreSQL's trigram index, SQLite's FTS5 table, or the
campaign's rows when the table lags), through erasure's rewrite and a deleted row."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, delete, insert, select, update

from storage import tables
from storage.queries import deliveries as dq
from storage.queries import delivery_search, paging
from storage.queries.campaigns import insert_deliveries
from tests.rows import campaign_row

deliveries = tables.deliveries
T0 = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)
TARGETS = ["+447700900123", "+447700900456", "+15550100123", "+4915112345678", "+33%612_5"]


def _row(cid: int, target: str) -> dict[str, Any]:
    return {
        "campaign_id": cid,
        "target": target,
        "target_kind": "phone",
        "attempts": 0,
        "content": {},
        "queued_at": T0,
        "state": "queued",
        "sender": "A",
        "due_at": T0,
    }


def _targets(
    engine: Engine, cid: int, needle: str, *, limit: int = 2, states: list[str] | None = None
) -> list[str]:
    """Every target the listing finds for ``needle``, walked page by page (cursor)."""
    wanted = dq.DeliveryFilter(campaign_id=cid, in_states=states, target=needle)
    out: list[str] = []
    at = paging.Keyset()
    with engine.connect() as conn:
        while True:
            total, exact, page = dq.deliveries_keyset(
                conn, ["id", "target"], wanted, limit=limit, at=at, count_cap=100
            )
            out += [r["target"] for r in page.rows]
            if not page.more_after:
                break
            at = paging.Keyset(after=int(page.rows[-1]["id"]))
    assert exact and total == len(out)
    return out


def _expected(targets: list[str], needle: str) -> list[str]:
    return [t for t in targets if needle.lower() in t.lower()]


def test_a_target_search_finds_exactly_the_rows_holding_it(engine: Engine) -> None:
    with engine.begin() as conn:
        cid, other = campaign_row(conn, T0), campaign_row(conn, T0)
        insert_deliveries(conn, [_row(cid, t) for t in TARGETS])
        insert_deliveries(conn, [_row(other, t) for t in TARGETS])
        # SQLite answers from its FTS5 table once the insert indexed its rows
        answered = delivery_search.target_match(conn, "0123") is not None
    assert answered == (engine.dialect.name == "sqlite")
    for needle in ["0123", "7700900", "+4477", "12345678", "900", "%612_", "_", "12", "none"]:
        assert _targets(engine, cid, needle) == _expected(TARGETS, needle), needle
    assert _targets(engine, cid, "7700900", states=["queued"]) == TARGETS[:2]
    assert _targets(engine, cid, "7700900", states=["failed"]) == []


def test_rows_written_past_the_index_and_rewritten_targets_are_found(engine: Engine) -> None:
    with engine.begin() as conn:
        cid = campaign_row(conn, T0)
        insert_deliveries(conn, [_row(cid, t) for t in TARGETS[:2]])
        # a row written by a path that does not index (a raw insert): found all the same
        conn.execute(insert(deliveries), [_row(cid, "+447700900789")])
        assert delivery_search.target_match(conn, "900789") is None  # it reads the rows
    assert _targets(engine, cid, "900789") == ["+447700900789"]
    with engine.begin() as conn:
        insert_deliveries(conn, [_row(cid, TARGETS[2])])  # indexes the row above too
        # erasure rewrites a target: the old number is no longer found, the new text is
        conn.execute(
            update(deliveries).where(deliveries.c.target == TARGETS[0]).values(target="erased:1")
        )
    assert _targets(engine, cid, "900123") == []
    assert _targets(engine, cid, "erased") == ["erased:1"]
    assert _targets(engine, cid, "900789") == ["+447700900789"]
    with engine.begin() as conn:  # the highest row goes, and its id may come back
        top = conn.execute(select(deliveries.c.id).order_by(deliveries.c.id.desc())).scalar()
        conn.execute(delete(deliveries).where(deliveries.c.id == top))
        insert_deliveries(conn, [_row(cid, "+12025550199")])
    assert _targets(engine, cid, "0100123") == []
    assert _targets(engine, cid, "5550199") == ["+12025550199"]
    assert _targets(engine, cid, "7700900") == ["+447700900456", "+447700900789"]
