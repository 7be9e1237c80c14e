"""Starts in steps: rows committed in chunks, then a short transaction enters running.

A crash between the steps leaves queued rows of a campaign that is still scheduled:
nothing of it is sent, and the next start completes it without duplicates.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, delete, func, select

from campaigns import lifecycle
from campaigns.campaign_file import parse_campaign
from campaigns.delivery_rows import materialise_committed
from campaigns.importer import ImportOptions, import_file
from campaigns.service import cancel_campaign, create_campaign
from gateway.client import GatewayClient
from gateway.sandbox import SandboxConfig, run_sandbox_in_thread
from scheduler import starts
from scheduler.clock import FakeClock
from scheduler.dispatcher import Dispatcher
from scheduler.starts import start_campaign
from storage import tables
from storage.queries import instances as iq
from tests.scheduler.helpers import add_instances

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
_d = tables.deliveries
_c = tables.campaigns


def _campaign(engine: Engine, instances: list[str], **schedule: Any) -> int:
    import_file(engine, SAMPLES / "contacts.csv", ImportOptions(list_name="customers"), now=T0)
    data = {
        "name": "promo",
        "list": "customers",
        "instances": instances,
        "message": {"type": "text", "text": "Hi {{ name }}"},
        "pace": {"per_minute": 0, "delay_seconds": [0, 0]},
        "schedule": {"timezone": "UTC", "start": "2026-11-23T09:00", **schedule},
    }
    with engine.begin() as conn:  # senders gatecast knows (create refuses others)
        iq.ensure(conn, list(data["instances"]), now=T0)
    return int(create_campaign(engine, parse_campaign(data, "t.toml"), now=T0).id)


def _states(engine: Engine, cid: int) -> Counter[str]:
    with engine.connect() as conn:
        rows = conn.execute(select(_d.c.state).where(_d.c.campaign_id == cid)).scalars()
        return Counter(str(s) for s in rows)


def _campaign_state(engine: Engine, cid: int) -> str:
    with engine.connect() as conn:
        return str(conn.execute(select(_c.c.state).where(_c.c.id == cid)).scalar_one())


def _interrupted_start(engine: Engine, cid: int, instances: list[str]) -> int:
    """What a start killed during its chunked step leaves: some queued rows, still scheduled."""
    materialise_committed(engine, cid, now=T0, instances=instances)
    with engine.begin() as conn:
        ids = conn.execute(select(_d.c.id).where(_d.c.campaign_id == cid)).scalars().all()
        conn.execute(delete(_d).where(_d.c.id.in_(ids[len(ids) // 2 :])))
        return int(
            conn.execute(
                select(func.count()).select_from(_d).where(_d.c.campaign_id == cid)
            ).scalar_one()
        )


def test_an_interrupted_start_sends_nothing_and_the_next_start_completes_it(
    engine: Engine,
) -> None:
    cfg = SandboxConfig(auto_link=True, status_delays=(0, 0, 0))
    with run_sandbox_in_thread(cfg) as sb:
        iid = sb.create_linked_instance()
        add_instances(engine, [iid], T0)
        cid = _campaign(engine, [iid])
        left = _interrupted_start(engine, cid, [iid])
        assert left > 0 and _states(engine, cid)["queued"] == left
        clock = FakeClock(T0 + timedelta(minutes=1))

        def dispatcher() -> Dispatcher:
            return Dispatcher(
                engine,
                lambda: GatewayClient(sb.url, sb.access_token, timeout=30.0),
                clock=clock,
                workers=2,
                rng=random.Random(1),
                apply_pending=lambda conn, ids, now: 0,
            )

        with dispatcher() as d:
            for _ in range(3):
                d.tick()
            d.flush()
        assert sb.messages() == []  # a scheduled campaign's rows are never claimed
        assert _campaign_state(engine, cid) == lifecycle.SCHEDULED

        res = start_campaign(engine, cid, now=clock.now())  # the restart's re-fired start
        assert res.outcome == "started"
        counts = _states(engine, cid)
        assert res.queued == counts["queued"] > left
        assert res.queued + res.skipped == sum(counts.values())
        with dispatcher() as d:
            d.run(until_done=True, max_ticks=200)
        per = Counter(m["to"] for m in sb.messages())
        assert len(per) == res.queued and set(per.values()) == {1}


def test_a_start_missed_after_an_interruption_skips_the_left_over_rows(engine: Engine) -> None:
    cid = _campaign(engine, ["I1"], missed_grace_minutes=30)
    left = _interrupted_start(engine, cid, ["I1"])
    res = start_campaign(engine, cid, now=T0 + timedelta(hours=2))
    assert res.outcome == "missed"
    assert _campaign_state(engine, cid) == lifecycle.FAILED
    assert _states(engine, cid) == Counter({"skipped": left})


def test_a_campaign_cancelled_while_its_rows_are_created_does_not_start(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    cid = _campaign(engine, ["I1"])

    def then_cancel(eng: Engine, campaign_id: int, **kw: Any) -> Any:
        out = materialise_committed(eng, campaign_id, **kw)
        cancel_campaign(eng, campaign_id, now=T0)  # a user, between the two steps
        materialise_committed(eng, campaign_id, **kw)  # idempotent: nothing new
        return out

    monkeypatch.setattr(starts, "materialise_committed", then_cancel)
    res = start_campaign(engine, cid, now=T0)
    assert res.outcome == "skipped" and "cancelled" in res.detail
    assert _campaign_state(engine, cid) == lifecycle.CANCELLED
    assert set(_states(engine, cid)) == {"skipped"}


def test_a_second_start_while_one_runs_is_skipped(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    cid = _campaign(engine, ["I1"])
    inner: list[starts.StartResult] = []

    def and_fire_again(eng: Engine, campaign_id: int, **kw: Any) -> Any:
        inner.append(start_campaign(eng, campaign_id, now=T0))  # the sync firing meanwhile
        return materialise_committed(eng, campaign_id, **kw)

    monkeypatch.setattr(starts, "materialise_committed", and_fire_again)
    res = start_campaign(engine, cid, now=T0)
    assert [(r.outcome, r.detail) for r in inner] == [("skipped", "campaign is already starting")]
    assert res.outcome == "started" and _campaign_state(engine, cid) == lifecycle.RUNNING
    assert start_campaign(engine, cid, now=T0).detail == "campaign is running"
