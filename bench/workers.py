"""Workers that add up: ``python -m bench.workers [--counts 1 2 4] ...`` (PostgreSQL).

What users run when one process is not enough: 1, 2 and 4 dispatching worker processes
(each :class:`scheduler.service.Service` as ``gatecast worker`` runs it, without the
leader's jobs: the campaign is started by the bench) on one PostgreSQL database, one
campaign through ``--senders`` paced senders, a sandbox gateway in its own process.
Every worker count gets a fresh campaign over the same list; the workers are started
together, warm up (``--warmup``: the sender leases settle), then a window is measured.

- **latency-bound**: the sandbox answers each send after ``--latency-ms``; each worker
  lets ``--concurrency`` sends wait at once, by default gatecast's own
  (``GATECAST_SEND_CONCURRENCY``, 256) as users run it. (Until issue 30 the bench set 8,
  which bounded one worker at 8 / latency, 16 msg/s, and made 4 workers scale about 4x
  by construction.) Reported: msg/s per worker count (rows with ``sent_at`` in the
  window), its share of the configured pace (``--senders`` x ``--per-minute``), the
  ratio to 1 worker and CPU per message, the CPU-seconds of the worker processes (user +
  system) over the messages of the window (goal: 4 workers' <= 1.2x one's). At the
  default limit one worker can keep 256 / latency sends a second in flight, so whether
  more workers add anything depends on the CPU, not on a cap.
- **CPU-bound**: no latency, the campaign unpaced (as the scheduler's tests do): msg/s
  per worker count and the ratio to 1, beside the **reference**, a textbook ``SKIP
  LOCKED`` loop in as many processes (lock 50 queued rows ``FOR UPDATE SKIP LOCKED``,
  send them one after the other, mark them sent, commit: one connection and one gateway
  client per process) over a campaign of the same rows. (A row per transaction was
  tried first: bound by the shared server's commits at 2-11 msg/s, it measured the disk.)
- **start latency**: one idle worker, a small campaign started ``--starts`` times; the
  time from the start's commit to the first row's send, with the ``LISTEN``/``NOTIFY``
  wake-up and without it (polling every second, as SQLite does).

The machine has 2 cores shared with the database, the sandbox and other sessions: the
CPU-bound figures are bounded by them; read the ratios against the reference's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
from sqlalchemy import Engine, func, select, text

from bench.common import WARMUP_AS_USERS, BenchError, Figures, report, warmup_as_users
from bench.dispatch import TEXT, TOKEN, database, open_db, sandbox_process, seed_audience, unpace
from bench.senders import create_instances
from scheduler.defaults import DEFAULT_SEND_CONCURRENCY
from storage import tables

LIST = "bench"
SMALL_LIST = "bench-small"
#: rows the textbook loop locks and sends per transaction
TEXTBOOK_BATCH = 50


# --- the processes ----------------------------------------------------------------------


def child_worker(url: str, gateway: str, concurrency: int, lease: float, listen: bool) -> int:
    """One dispatching worker (a ``gatecast worker`` without the leader's jobs) until
    SIGTERM."""
    import threading

    from gateway.client import GatewayClient
    from scheduler.service import Service, ServiceOptions
    from storage.engine import make_engine

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    engine = make_engine(url)
    options = ServiceOptions(
        run_jobs=False,
        send_concurrency=concurrency,
        sender_lease_seconds=lease,
        listen=listen,
    )
    with Service(engine, lambda: GatewayClient(gateway, TOKEN, timeout=30.0), options=options):
        print("ready", flush=True)
        stop.wait()
    engine.dispose()
    return 0


def child_textbook(url: str, gateway: str, campaign_id: int) -> int:
    """The reference: a textbook ``SKIP LOCKED`` queue loop until SIGTERM or the queue is
    empty: lock a batch of queued rows (``FOR UPDATE SKIP LOCKED``), send them one after
    the other, mark them sent, commit (one transaction, one commit a batch)."""
    from gateway.client import GatewayClient
    from gateway.messages import message_from_dict
    from storage.engine import make_engine

    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    engine = make_engine(url)
    claim = text(
        "SELECT id, sender, target, content FROM deliveries"
        " WHERE campaign_id = :c AND state = 'queued'"
        " ORDER BY id LIMIT :n FOR UPDATE SKIP LOCKED"
    )
    done = text(
        "UPDATE deliveries SET state = 'sent', message_id = :m, sent_at = now(),"
        " attempts = attempts + 1 WHERE id = :i"
    )
    print("ready", flush=True)
    with engine.connect() as conn, GatewayClient(gateway, TOKEN, timeout=30.0) as gw:
        while not stopping:
            rows = conn.execute(claim, {"c": campaign_id, "n": TEXTBOOK_BATCH}).all()
            if not rows:
                break
            sent = []
            for row in rows:
                message = message_from_dict(row.content)
                outcome = gw.send(str(row.sender), str(row.target), message)
                sent.append({"m": outcome.message_id or f"x{row.id}", "i": row.id})
            conn.execute(done, sent)
            conn.commit()
    engine.dispose()
    return 0


@contextmanager
def processes(argvs: list[list[str]]) -> Iterator[list[psutil.Popen]]:
    """Start ``python -m bench.workers`` children, wait until each says ready; SIGTERM
    them (and wait) on exit."""
    procs = [
        psutil.Popen(
            [sys.executable, "-m", "bench.workers", *argv],
            stdout=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise BenchError(f"bench child {p.args} did not start (exit {p.wait()})")
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()


def cpu_seconds(procs: list[psutil.Popen]) -> float:
    """User + system CPU-seconds of ``procs`` so far (their threads included)."""
    total = 0.0
    for p in procs:
        times = p.cpu_times()
        total += times.user + times.system
    return total


# --- the campaigns ----------------------------------------------------------------------


#: the most instances a campaign file lists
MAX_LISTED = 100


def start_campaign(
    engine: Engine, senders: list[str], list_name: str, per_minute: float, *, paced: bool
) -> int:
    """Create and start a campaign to ``list_name`` through ``senders``; its id."""
    from campaigns.campaign_file import parse_campaign
    from campaigns.service import create_campaign
    from scheduler.starts import start_campaign as start
    from storage.types import utcnow

    gap = 60.0 / per_minute
    spec = parse_campaign(
        {
            "name": f"bench workers {time.monotonic_ns()}",
            "list": list_name,
            # a file lists at most 100 instances; more senders: every connected one sends
            # (the bench's database knows only these), as bench.senders' campaign does
            **({"instances": senders} if len(senders) <= MAX_LISTED else {}),
            "message": {"type": "text", "text": TEXT},
            "schedule": {"timezone": "UTC"},
            # a daily cap that does not bite (the default, 500, would after the CPU runs)
            "pace": {
                "per_minute": per_minute,
                "delay_seconds": [gap / 3, gap],
                "daily_cap": 10_000_000,
            },
            "retry": {"max_attempts": 4},
        }
    )
    cid = create_campaign(engine, spec).id
    started = start(engine, cid, now=utcnow(), enforce_grace=False)
    if started.outcome != "started":
        raise BenchError(f"campaign {cid} did not start: {started.outcome} {started.detail}")
    if not paced:  # a file cannot say "unpaced": set after the start (bench.dispatch.unpace)
        unpace(engine, cid)
    return cid


def stop_campaign(engine: Engine, campaign_id: int) -> None:
    """Cancel the campaign (its queued rows are never claimed again)."""
    from campaigns import lifecycle

    stopped = contextlib.suppress(lifecycle.InvalidTransition)  # completed: nothing to stop
    with engine.begin() as conn, stopped:
        lifecycle.transition(conn, campaign_id, lifecycle.CANCELLED)


def sent_between(engine: Engine, campaign_id: int, t0: datetime, t1: datetime) -> int:
    """Rows of the campaign sent (``sent_at``) in ``[t0, t1)``."""
    d = tables.deliveries
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).where(
                    d.c.campaign_id == campaign_id, d.c.sent_at >= t0, d.c.sent_at < t1
                )
            ).scalar_one()
        )


def first_sent(engine: Engine, campaign_id: int) -> datetime | None:
    """The campaign's first ``sent_at``."""
    d = tables.deliveries
    with engine.connect() as conn:
        first = conn.execute(
            select(func.min(d.c.sent_at)).where(d.c.campaign_id == campaign_id)
        ).scalar_one()
    return first if isinstance(first, datetime) else None


def measure_window(
    engine: Engine, campaign_id: int, procs: list[psutil.Popen], warmup: float, seconds: float
) -> tuple[float, float]:
    """After ``warmup``, the campaign's msg/s in a window of ``seconds`` and the CPU-seconds
    of ``procs`` per message in it (ms)."""
    from storage.types import utcnow

    time.sleep(warmup)
    t0, c0 = utcnow(), cpu_seconds(procs)
    time.sleep(seconds)
    t1, c1 = utcnow(), cpu_seconds(procs)
    sent = sent_between(engine, campaign_id, t0, t1)
    d = tables.deliveries
    with engine.connect() as conn:
        left = conn.execute(
            select(func.count()).where(d.c.campaign_id == campaign_id, d.c.state == "queued")
        ).scalar_one()
    if not left:
        raise BenchError(f"campaign {campaign_id} ran out of rows in the window: raise --rows")
    if not sent:
        raise BenchError(f"campaign {campaign_id}: nothing sent in the window")
    return sent / (t1 - t0).total_seconds(), (c1 - c0) / sent * 1000


# --- the runs ---------------------------------------------------------------------------


def worker_argv(url: str, gateway: str, concurrency: int, lease: float, listen: bool) -> list[str]:
    return ["--child", "worker", url, gateway, str(concurrency), str(lease), str(int(listen))]


def scaling(
    args: argparse.Namespace,
    engine: Engine,
    url: str,
    gateway: str,
    senders: list[str],
    figures: Figures,
    *,
    bound: str,
) -> None:
    """Workers 1/2/4 (``args.counts``) on fresh campaigns; ``bound``: "latency" (paced,
    the sandbox waits) or "CPU" (unpaced, no latency) with the textbook reference."""
    latency = bound == "latency"
    rates: dict[int, float] = {}
    cpus: dict[int, float] = {}
    extra: dict[str, Any] = {
        "bound": bound,
        "senders": len(senders),
        "latency_ms": args.latency_ms if latency else 0,
        "concurrency": args.concurrency,
        "warmup": WARMUP_AS_USERS,
        "load": round(os.getloadavg()[0], 1),
    }
    pace = len(senders) * args.per_minute / 60
    if latency:
        figures.add("latency-bound, configured pace", pace, "msg/s", **extra)
    for count in args.counts:
        cid = start_campaign(engine, senders, LIST, args.per_minute, paced=latency)
        argv = worker_argv(url, gateway, args.concurrency, args.lease, True)
        with processes([argv] * count) as procs:
            warmup = args.warmup if latency else args.warmup / 2
            rate, cpu = measure_window(engine, cid, procs, warmup, args.seconds)
        stop_campaign(engine, cid)
        rates[count], cpus[count] = rate, cpu
        extra["load"] = round(os.getloadavg()[0], 1)
        figures.add(f"{bound}-bound, {count} workers", rate, "msg/s", **extra)
        if latency:
            figures.add(f"{bound}-bound, {count} workers, of pace", rate / pace, "x")
        figures.add(f"{bound}-bound, {count} workers, CPU per message", cpu, "ms", **extra)
    one = rates[args.counts[0]]
    for count in args.counts[1:]:
        figures.add(f"{bound}-bound, {count} workers / 1", rates[count] / one, "x")
        if latency:
            figures.add(
                f"{bound}-bound, CPU per message, {count} workers / 1",
                cpus[count] / cpus[args.counts[0]],
                "x",
                goal="<= 1.2" if count == 4 else "(report)",
            )
    if latency:
        return
    ref: dict[int, float] = {}
    for count in args.counts:
        cid = start_campaign(engine, senders, LIST, args.per_minute, paced=False)
        argv = ["--child", "textbook", url, gateway, str(cid)]
        with processes([argv] * count) as procs:
            rate, cpu = measure_window(engine, cid, procs, 2.0, args.seconds)
        stop_campaign(engine, cid)
        ref[count] = rate
        figures.add(f"textbook SKIP LOCKED loop, {count} processes (reference)", rate, "msg/s")
        figures.add(f"textbook loop, {count} processes, CPU per message", cpu, "ms")
    for count in args.counts[1:]:
        figures.add(
            f"textbook loop, {count} processes / 1 (reference)",
            ref[count] / ref[args.counts[0]],
            "x",
        )


def start_latency(
    args: argparse.Namespace,
    engine: Engine,
    url: str,
    gateway: str,
    sender: str,
    figures: Figures,
) -> None:
    """Seconds from a start's commit to its first send, one idle worker, with and without
    the wake-up."""
    import random

    from storage.types import utcnow

    rng = random.Random(7)
    results: dict[bool, list[float]] = {}
    for listen in (True, False):
        waits: list[float] = []
        with processes([worker_argv(url, gateway, args.concurrency, args.lease, listen)]):
            time.sleep(2.0)
            for _ in range(args.starts):
                time.sleep(rng.uniform(0.5, 1.5))  # a random moment of the poll
                cid = start_campaign(engine, [sender], SMALL_LIST, 60.0, paced=True)
                started = utcnow()
                deadline = time.monotonic() + 30
                first = None
                while first is None and time.monotonic() < deadline:
                    time.sleep(0.01)
                    first = first_sent(engine, cid)
                if first is None:
                    raise BenchError(f"campaign {cid} sent nothing in 30 s")
                waits.append((first - started).total_seconds())
                stop_campaign(engine, cid)
        results[listen] = waits
        name = "LISTEN/NOTIFY" if listen else "polling every 1 s (SQLite's way)"
        figures.add(f"start -> first send, {name}, median", statistics.median(waits), "s")
        figures.add(f"start -> first send, {name}, max", max(waits), "s")
    figures.ratio(
        "start latency, polling / NOTIFY (median)",
        statistics.median(results[False]),
        statistics.median(results[True]),
        goal="> 1",
    )


def measure(args: argparse.Namespace, figures: Figures) -> None:
    with tempfile.TemporaryDirectory() as tmp_name, database(Path(tmp_name), True) as url:
        engine = open_db(url)
        from campaigns.instances import mark_connected
        from storage.types import utcnow

        seed_audience(engine, args.rows, LIST)
        now = utcnow()
        with engine.begin() as conn:  # a small list of contacts of the big one
            list_id = conn.execute(
                tables.lists.insert()
                .values(name=SMALL_LIST, description="", created_at=now)
                .returning(tables.lists.c.id)
            ).scalar_one()
            conn.execute(
                tables.list_members.insert(),
                [{"list_id": list_id, "contact_id": i, "added_at": now} for i in range(1, 6)],
            )

        latency = f"{args.latency_ms}-{args.latency_ms}"
        for bound, extra in (("latency", ("--latency-ms", latency)), ("CPU", ())):
            with sandbox_process(
                Path(tmp_name), "--max-instances", str(args.senders + 10), *extra
            ) as sb:
                senders = create_instances(sb, args.senders)
                for iid in senders:
                    mark_connected(engine, iid, now=utcnow())
                warmup_as_users(engine, senders)
                if bound in args.parts:
                    scaling(args, engine, url, sb, senders, figures, bound=bound)
                if bound == "CPU" and "starts" in args.parts and args.starts:
                    start_latency(args, engine, url, sb, senders[0], figures)
        engine.dispose()


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, rest = sys.argv[2], sys.argv[3:]
        if kind == "worker":
            url, gateway, conc, lease, listen = rest
            return child_worker(url, gateway, int(conc), float(lease), listen == "1")
        url, gateway, cid = rest
        return child_textbook(url, gateway, int(cid))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--senders", type=int, default=96)
    parser.add_argument("--per-minute", type=float, default=120.0)
    parser.add_argument("--latency-ms", type=int, default=500)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_SEND_CONCURRENCY,
        help=f"sends waiting per worker (default {DEFAULT_SEND_CONCURRENCY}, as users run it)",
    )
    parser.add_argument("--lease", type=float, default=6.0, help="sender lease seconds")
    parser.add_argument("--rows", type=int, default=40_000, help="recipients per campaign")
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument("--seconds", type=float, default=20.0, help="the measured window")
    parser.add_argument("--starts", type=int, default=8, help="starts timed per wake-up mode")
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=("latency", "CPU", "starts"),
        default=["latency", "CPU", "starts"],
    )
    parser.add_argument("--full", action="store_true", help="(the default size is the full one)")
    args = parser.parse_args()
    figures = Figures.begin("workers")
    return report(figures, lambda: measure(args, figures))


if __name__ == "__main__":
    raise SystemExit(main())
