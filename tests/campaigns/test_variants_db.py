"""A/B variants and the identical-content guard on both databases: the rows a start makes,
the pick and the release of the rest; a sender's run of identical bodies held."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import openpyxl
from sqlalchemy import Engine, select, update

from campaigns import lifecycle, service, variants
from campaigns.delivery_rows import materialise, materialise_committed
from campaigns.reports import write_report
from scheduler.content_guard import HOLD, hold_runs
from scheduler.policy import policy_of
from scheduler.retry_horizon import fail_stranded
from storage import tables
from storage.queries import deliveries as dq
from storage.queries import instances as iq
from tests.campaigns.campaign_fixtures import NOW, make_list, people, spec

deliveries = tables.deliveries

AB = {
    "message": {
        "type": "text",
        "variants": [
            {"name": "A", "weight": 1, "text": "Hi {{ name }}"},
            {"name": "B", "weight": 1, "text": "Hello {{ name }} in {{ city }}"},
        ],
    },
    "ab": {"test_share": 0.4, "pick_by": "read_rate", "after": "1h"},
}


def _rows(engine: Engine, cid: int) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [
            dict(r._mapping)
            for r in conn.execute(
                select(
                    deliveries.c.id,
                    deliveries.c.target,
                    deliveries.c.variant,
                    deliveries.c.due_at,
                    deliveries.c.content,
                    deliveries.c.state,
                ).where(deliveries.c.campaign_id == cid)
            )
        ]


def test_an_ab_start_holds_the_rest_and_the_pick_releases_it(
    engine: Engine, tmp_path: Path
) -> None:
    make_list(engine, "customers", people(60))
    cid = service.create_campaign(engine, spec(**AB), now=NOW).id
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        conn.execute(
            update(tables.campaigns).where(tables.campaigns.c.id == cid).values(started_at=NOW)
        )
    materialise_committed(engine, cid, now=NOW, instances=["S"])
    rows = _rows(engine, cid)
    test = [r for r in rows if r["variant"]]
    rest = [r for r in rows if not r["variant"]]
    assert 10 <= len(test) <= 40 and len(test) + len(rest) == 60
    assert all(r["due_at"] is None and r["content"] == {} for r in rest)
    assert {r["variant"] for r in test} == {"A", "B"}
    for r in test:
        assert (r["content"]["text"].startswith("Hello")) == (r["variant"] == "B"), r
    # the test: every B read, no A read
    with engine.begin() as conn:
        for r in test:
            values = {"state": "sent", "sent_at": NOW, "message_id": f"m{r['id']}"}
            if r["variant"] == "B":
                values.update(state="read", delivered_at=NOW, read_at=NOW)
            conn.execute(update(deliveries).where(deliveries.c.id == r["id"]).values(**values))
    assert variants.pick_due(engine, cid) == NOW + timedelta(hours=1)
    later = NOW + timedelta(hours=1)
    pick = variants.pick_and_release(engine, cid, now=later)
    assert pick is not None and pick["winner"] == "B", pick
    assert pick["rates"]["B"]["read_rate"] == 1.0 and pick["rates"]["A"]["read_rate"] == 0.0
    again = variants.pick_and_release(engine, cid, now=later + timedelta(minutes=5))
    assert again == pick  # made once
    assert variants.pick_due(engine, cid) is None
    released = {r["target"]: r for r in _rows(engine, cid)}
    for r in rest:
        row = released[r["target"]]
        assert row["variant"] == "B" and row["due_at"] == later, row
        assert row["content"]["text"].startswith("Hello P"), row
    detail = service.get_campaign(engine, cid)
    assert detail.variants["ab"]["pick"]["winner"] == "B"
    assert detail.variants["best"] == "B"
    # the reports: the variant column, the comparison in the JSON and XLSX summaries
    report = json.loads(write_report(engine, cid, tmp_path / "r.json").read_text())
    assert report["summary"]["variants"]["ab"]["pick"]["winner"] == "B"
    assert {row["variant"] for row in report["deliveries"]} == {"A", "B"}
    book = openpyxl.load_workbook(write_report(engine, cid, tmp_path / "r.xlsx"))
    cells = [
        [c for c in row if c is not None] for row in book["Summary"].iter_rows(values_only=True)
    ]
    header = next(r for r in cells if r[:1] == ["Variant"])
    assert header[:4] == ["Variant", "Weight", "Recipients", "Sent"], header
    assert any(r[:2] == ["A/B winner", "B"] for r in cells), cells


def test_the_guard_holds_the_fourth_identical_body_of_a_sender(engine: Engine) -> None:
    make_list(engine, "customers", people(6))
    same = spec(message={"type": "text", "text": "Same for all"})
    cid = service.create_campaign(engine, same, now=NOW).id
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        materialise(conn, cid, now=NOW, instances=["S"])
    with engine.begin() as conn:
        claimed = dq.claim(
            conn, campaign_id=cid, sender="S", now=NOW, lease_until=NOW + HOLD, limit=6
        )
        wakes: list[datetime] = []
        kept = hold_runs(conn, claimed, 3, NOW, wakes)
    assert len(kept) == 3 and wakes == [NOW + HOLD] * 3
    states = {r["state"] for r in _rows(engine, cid) if r["id"] not in {k.id for k in kept}}
    assert states == {"queued"}
    # within the hold: still held; after it: the run starts again
    with engine.begin() as conn:
        assert dq.claim(conn, campaign_id=cid, sender="S", now=NOW, lease_until=NOW, limit=6) == []
    after = NOW + HOLD
    with engine.begin() as conn:
        claimed = dq.claim(
            conn, campaign_id=cid, sender="S", now=after, lease_until=after + HOLD, limit=6
        )
        assert len(hold_runs(conn, claimed, 3, after, [])) == 3
    with engine.begin() as conn:
        off = dq.claim(conn, campaign_id=cid, sender="S", now=after, lease_until=after, limit=6)
        assert off == [] or hold_runs(conn, off, 0, after, []) == off


def test_rows_stranded_on_a_paused_sender_fail_at_their_horizon(engine: Engine) -> None:
    make_list(engine, "customers", people(3))
    horizon = spec(retry={"until": "1h", "every": "10m"})
    cid = service.create_campaign(engine, horizon, now=NOW).id
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        materialise(conn, cid, now=NOW, instances=["S"])
        iq.ensure(conn, ["S"], now=NOW)
        iq.pause(conn, "S", "restricted: error 463", now=NOW)
    policy = policy_of(horizon)
    with engine.begin() as conn:
        assert fail_stranded(conn, [(cid, policy.retry, ["S"])], NOW + timedelta(minutes=59)) == 0
        assert fail_stranded(conn, [(cid, policy.retry, ["S"])], NOW + timedelta(hours=2)) == 3
    rows = _rows(engine, cid)
    assert {r["state"] for r in rows} == {"failed"}
    with engine.connect() as conn:
        errors = set(
            conn.execute(
                select(deliveries.c.error).where(deliveries.c.campaign_id == cid)
            ).scalars()
        )
    assert errors == {"gave up after 1 h: its sender stayed paused (restricted: error 463)"}
