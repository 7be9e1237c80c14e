"""Crash safety: SIGKILL the campaign runner at random moments, restart it, and check the
sandbox's record: every recipient got exactly one message, apart from rows marked
``unknown`` (at most the in-flight batch per kill), and no row is lost.

The runner is a real subprocess (``gatecast campaign run ID``) configured through
GATECAST_* variables; the sandbox serves real HTTP from a thread of the test process.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from campaigns import lifecycle
from gateway.sandbox import Sandbox, SandboxConfig, run_sandbox_in_thread
from storage import tables
from storage.engine import make_engine, upgrade
from storage.types import utcnow
from tests.scheduler.helpers import add_instances, add_running_campaign, spec

ROOT = Path(__file__).resolve().parents[2]
RECIPIENTS = 2000
KILLS = 5
SENDERS = 4  # paced (gaps >= 50 ms): the in-flight batch is one row per sender


def _runner(
    db_url: str, sb: Sandbox, cid: int, log: Path, extra: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "GATECAST_DATABASE_URL": db_url,
        "GATECAST_GATEWAY_URL": sb.url,
        "GATECAST_ACCESS_TOKEN": sb.access_token,
        "GATECAST_HTTP_TIMEOUT_SECONDS": "2",
        "GATECAST_DISPATCH_LEASE_SECONDS": "4",
    }
    gatecast = Path(sys.executable).with_name("gatecast")
    cmd = [str(gatecast), "campaign", "run", str(cid), "--no-progress", *extra]
    out = log.open("ab")
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=out)


def _campaign_state(engine: Engine, cid: int) -> str:
    c = tables.campaigns
    with engine.connect() as conn:
        return str(conn.execute(select(c.c.state).where(c.c.id == cid)).scalar_one())


def _sent_so_far(engine: Engine, cid: int) -> int:
    d = tables.deliveries
    with engine.connect() as conn:
        return len(
            conn.execute(select(d.c.id).where(d.c.campaign_id == cid, d.c.state != "queued")).all()
        )


PACED = {"per_minute": 0, "delay_seconds": [0.05, 0.08], "daily_cap": None}


def _crash_run(
    db_url: str,
    tmp_path: Path,
    *,
    parallel: int,
    pace: dict[str, object] = PACED,
    extra: tuple[str, ...] = (),
    in_flight_per_kill: int = SENDERS,
    latency_ms: tuple[int, int] = (0, 0),
) -> None:
    engine = make_engine(db_url)
    upgrade(engine)
    rng = random.Random(int(time.time()))
    cfg = SandboxConfig(dialect="reference", seed=5, auto_link=True, latency_ms=latency_ms)
    with run_sandbox_in_thread(cfg) as sb:
        iids = [sb.create_linked_instance() for _ in range(SENDERS)]
        now = utcnow()
        add_instances(engine, iids, now)
        cid = add_running_campaign(
            engine,
            spec(pace=pace),
            recipients=RECIPIENTS,
            senders=iids,
            now=now,
        )
        log = tmp_path / "runner.log"
        procs = [_runner(db_url, sb, cid, log, extra) for _ in range(parallel)]
        kills = 0
        deadline = time.monotonic() + 600
        while kills < KILLS and time.monotonic() < deadline:
            # wait until the runners are really sending, then kill at a random moment
            before = _sent_so_far(engine, cid)
            while _sent_so_far(engine, cid) < before + 20 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 1.0))
            if _campaign_state(engine, cid) != lifecycle.RUNNING:
                break
            victim = rng.randrange(len(procs))
            procs[victim].send_signal(signal.SIGKILL)
            procs[victim].wait()
            kills += 1
            procs[victim] = _runner(db_url, sb, cid, log, extra)
        assert kills == KILLS, f"the campaign ended before {KILLS} kills: make it longer"
        for p in procs:
            assert p.wait(timeout=600) in (0, 1), log.read_text()[-3000:]
        assert _campaign_state(engine, cid) == lifecycle.COMPLETED, log.read_text()[-3000:]
        truth = Counter(m["to"] for m in sb.messages())
        ids = {m["message_id"]: m["to"] for m in sb.messages()}

    d = tables.deliveries
    with engine.connect() as conn:
        rows = conn.execute(
            select(d.c.target, d.c.state, d.c.message_id).where(d.c.campaign_id == cid)
        ).all()
    engine.dispose()
    assert len(rows) == RECIPIENTS  # no row lost
    states = Counter(s for _, s, _ in rows)
    assert set(states) <= {"sent", "unknown"}, states
    assert max(truth.values()) == 1, "a recipient got a message twice"
    for target, state, mid in rows:
        digits = target.lstrip("+")
        if state == "sent":
            assert truth[digits] == 1 and ids[mid] == digits
        else:
            assert truth[digits] <= 1
    # each kill can strand at most the in-flight batch (paced: one row per sender)
    assert states["unknown"] <= KILLS * in_flight_per_kill, states
    print(f"crash run ({parallel} worker(s)): {dict(states)} after {KILLS} kills")


@pytest.mark.slow
def test_sigkill_loses_nothing_and_sends_nothing_twice_sqlite(
    sqlite_url: str, tmp_path: Path
) -> None:
    _crash_run(sqlite_url, tmp_path, parallel=1)


@pytest.mark.slow
@pytest.mark.postgres
def test_sigkill_with_two_workers_on_postgres(pg_url: str, tmp_path: Path) -> None:
    _crash_run(pg_url, tmp_path, parallel=2)


@pytest.mark.slow
def test_sigkill_unpaced_strands_at_most_two_batches_per_kill(
    sqlite_url: str, tmp_path: Path
) -> None:
    batch = 32
    _crash_run(
        sqlite_url,
        tmp_path,
        parallel=1,
        pace={"per_minute": 0, "delay_seconds": [0, 0], "daily_cap": None},
        extra=("--batch-size", str(batch), "--workers", "4"),
        in_flight_per_kill=2 * batch,
        latency_ms=(30, 50),
    )
