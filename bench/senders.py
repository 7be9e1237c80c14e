"""Paced senders in one process: ``python -m bench.senders [--senders N] [--db both] ...``.

What users run: N sender instances on one campaign, each at the campaign file's pace
(``per_minute`` with a random gap under it and a daily cap that does not bite), against
a gateway that answers each send after ``--latency-ms`` (the sandbox in its own process;
web-session gateways answer after they have sent, 0.5-3 s), while the sandbox posts every
message's sent / delivered / read events to gatecast's webhook receiver. One process (this
one) runs what ``gatecast serve`` runs for it: the dispatcher
(:class:`scheduler.service.Service`, jobs off: the campaign is started before) and the
HTTP app with the webhook receiver (``create_app`` served by uvicorn in a thread).

Warm-up as users have it: the sender warm-up at its default settings (the bench's other
runs turn it off, ``bench/common.py``), each sender set to the first day after its ramp
(what ``gatecast instance warmup ID --day N`` records for an established number): a new
number's day 1 would stop at 15 messages, which no pace could be measured through. The
claim still does the warm-up's work (care rows, known-chat probes, the use counted).

After a settling time (``--warmup``) the bench measures a window (``--seconds``) and reads
the database:

- **sent in the window / configured** (the headline): the plain count, rows whose
  ``sent_at`` (the gateway's answer) falls in the window, over
  ``senders x per_minute / 60 x window`` (goal >= 0.97 in one process). A stall at the
  window's edges counts against it, as users would see it;
- **per-sender rate / configured** (secondary): each sender's sends in the window, one
  less than their count over the time from its first to its last, summed; it forgives
  stalls at the window's edges, so it only explains the headline;
- **gap error**: per sender, the time between two consecutive sends minus the gap the
  pace asks for (``60 / per_minute``: the random gap is drawn below it), p50 and p99
  (goal p99 < 1 s);
- **CPU per message**: this process's CPU time in the window per row sent (the sandbox's
  own process is not counted);
- webhook events applied in the window per second (that they flowed), and the rows'
  states at the end: any ``unknown`` or ``failed`` row exits 1 (nothing may be lost or
  left ambiguous by a healthy gateway).

Default: 500 senders at 20 a minute (167 msg/s configured), 1 s latency, 15 s warm-up
and a 60 s window, on SQLite then PostgreSQL (``--db``), in about four minutes.
``--send-concurrency 0`` runs the dispatcher as it was before issue 17 (each tick waits
for its paced sends on 4 threads), for the before / after comparison.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import psutil
from pydantic import SecretStr
from sqlalchemy import Engine, select

from bench.common import BenchError, Figures, report, slow_gateway
from bench.dispatch import TEXT, TOKEN, database, open_db, seed_audience
from scheduler.care import DEFAULTS
from scheduler.defaults import DEFAULT_SEND_CONCURRENCY
from storage import tables

SECRET = "bench-senders-webhook-secret-0123456789"  # noqa: S105 (a throwaway local secret)
#: rows per sender beyond what the run needs: contacts go to senders by a hash, unevenly
ROW_MARGIN = 1.8


def create_instances(url: str, count: int) -> list[str]:
    """``count`` instances on the auto-linking sandbox, created concurrently (each request
    waits out the sandbox's latency)."""
    from gateway.client import GatewayClient

    def one(_: int) -> str:
        with GatewayClient(url, TOKEN, timeout=30.0) as gw:
            return gw.create_instance()

    with ThreadPoolExecutor(64) as pool:
        return list(pool.map(one, range(count)))


def register_webhook(url: str, instance_ids: list[str], webhook: str) -> None:
    """The webhook URL registered for every instance, concurrently."""
    from gateway.client import GatewayClient

    def one(iid: str) -> None:
        with GatewayClient(url, TOKEN, timeout=30.0) as gw:
            gw.set_webhook(iid, webhook)

    with ThreadPoolExecutor(64) as pool:
        list(pool.map(one, instance_ids))


def warm_up_as_users_have_it(engine: Engine, instance_ids: list[str]) -> str:
    """The sender warm-up at its default settings in this process (``bench/common.py``
    turns it off for the other benchmarks), each sender on the first day after its ramp
    (``gatecast instance warmup ID --day N``); what the output says about it."""
    import os

    from campaigns.instances import WarmupChange, set_warmup
    from scheduler.care import configure
    from storage.types import utcnow

    os.environ.pop("GATECAST_WARMUP_ENABLED", None)
    configure(DEFAULTS)
    day = DEFAULTS.warmup_days + 1
    now = utcnow()
    for iid in instance_ids:
        set_warmup(engine, iid, WarmupChange(day=day), now=now)
    return f"on (default settings), senders on day {day}: past the {DEFAULTS.warmup_days}-day ramp"


def start_paced_campaign(
    engine: Engine, instance_ids: list[str], per_minute: float, daily_cap: int
) -> tuple[int, int]:
    """Create and start (materialise) the campaign through every sender; its id and the
    rows queued."""
    from campaigns.campaign_file import parse_campaign
    from campaigns.instances import mark_connected
    from campaigns.service import create_campaign
    from scheduler.starts import start_campaign
    from storage.types import utcnow

    for iid in instance_ids:
        mark_connected(engine, iid, now=utcnow())
    gap = 60.0 / per_minute
    spec = parse_campaign(
        {
            "name": "bench senders",
            "list": "bench",
            # every connected instance (the bench's database knows only these): what a
            # file with more senders than a file may list (100) does
            "message": {"type": "text", "text": TEXT},
            "schedule": {"timezone": "UTC"},
            # a random gap under the rate's gap, as files have it; the cap does not bite
            "pace": {
                "per_minute": per_minute,
                "delay_seconds": [gap / 3, gap],
                "daily_cap": daily_cap,
            },
            "retry": {"max_attempts": 4},
        }
    )
    cid = create_campaign(engine, spec).id
    started = start_campaign(engine, cid, now=utcnow(), enforce_grace=False)
    if started.outcome != "started":
        raise BenchError(f"campaign {cid} did not start: {started.outcome} {started.detail}")
    return cid, started.queued


def sends(engine: Engine, campaign_id: int) -> dict[str, list[datetime]]:
    """Every sender's send times (``sent_at``), in order."""
    d = tables.deliveries
    out: dict[str, list[datetime]] = {}
    stmt = (
        select(d.c.sender, d.c.sent_at)
        .where(d.c.campaign_id == campaign_id, d.c.sent_at.is_not(None))
        .order_by(d.c.sender, d.c.sent_at)
    )
    with engine.connect() as conn:
        for sender, sent_at in conn.execute(stmt):
            out.setdefault(str(sender), []).append(sent_at)
    return out


def applied_events(engine: Engine) -> int:
    """Status events applied to their deliveries so far."""
    from sqlalchemy import func

    e = tables.status_events
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).where(e.c.applied)).scalar_one())


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def run_one(args: argparse.Namespace, pg: bool, figures: Figures) -> None:
    """One database: set up, warm up, measure the window, check the rows."""
    from gatecast.runtime.http_server import AsgiServer
    from gatecast.runtime.webhooks import webhook_url
    from gatecast.settings import Settings
    from gatecast.web.app import create_app
    from gatecast.web.context import AppContext
    from gateway.client import GatewayClient
    from scheduler.service import Service, ServiceOptions
    from storage.queries.tallies import delivery_counts
    from storage.types import utcnow

    db = "postgresql" if pg else "sqlite"
    senders, per_minute = args.senders, args.per_minute
    gap = 60.0 / per_minute
    configured = senders * per_minute / 60.0
    run_seconds = args.warmup + args.seconds + 10
    rows = int(senders * math.ceil(run_seconds / gap) * ROW_MARGIN)
    with (
        tempfile.TemporaryDirectory() as tmp_name,
        database(Path(tmp_name), pg) as url,
        slow_gateway(
            Path(tmp_name),
            senders=senders,
            latency_ms=args.latency_ms,
            extra=("--status-delays", "0.05,0.2,0.5"),
        ) as sb_url,
    ):
        engine = open_db(url)
        ids = create_instances(sb_url, senders)
        seed_audience(engine, rows)
        cid, queued = start_paced_campaign(engine, ids, per_minute, daily_cap=100_000)
        warmup = warm_up_as_users_have_it(engine, ids)
        settings = Settings(
            database_url=url,
            gateway_url=sb_url,
            access_token=SecretStr(TOKEN),
            webhook_secret=SecretStr(SECRET),
        )
        ctx = AppContext(settings=settings, engine=engine, api_key=SecretStr("k" * 40))
        with AsgiServer(create_app(ctx)) as server:
            register_webhook(sb_url, ids, webhook_url(settings, server.url))
            concurrency = args.send_concurrency
            service = Service(
                engine,
                lambda: GatewayClient(sb_url, TOKEN, timeout=30.0),
                options=ServiceOptions(run_jobs=False, send_concurrency=concurrency),
            )
            proc = psutil.Process()
            with service:
                time.sleep(args.warmup)
                t0, c0, e0 = utcnow(), sum(proc.cpu_times()[:2]), applied_events(engine)
                time.sleep(args.seconds)
                t1, c1, e1 = utcnow(), sum(proc.cpu_times()[:2]), applied_events(engine)
        with engine.connect() as conn:
            counts = {k: v for k, v in delivery_counts(conn, cid).items() if v}
        by_sender = sends(engine, cid)
        engine.dispose()

    window = (t1 - t0).total_seconds()
    sent = sum(1 for times in by_sender.values() for t in times if t0 <= t < t1)
    # secondary: each sender's rate over its own sends in the window (forgives the
    # window's edges); a sender with fewer than two sends in the window counts as 0
    rate = 0.0
    for times in by_sender.values():
        inside = [t for t in times if t0 <= t < t1]
        if len(inside) >= 2:
            rate += (len(inside) - 1) / (inside[-1] - inside[0]).total_seconds()
    errors = [
        (b - a).total_seconds() - gap
        for times in by_sender.values()
        for a, b in pairwise(times)
        if t0 <= b < t1
    ]
    if not sent:
        raise BenchError(f"{db}: nothing was sent in the window ({counts})")
    bad = {k: counts.get(k, 0) for k in ("unknown", "failed") if counts.get(k)}
    if bad:
        raise BenchError(f"{db}: rows a healthy gateway should not leave: {bad} ({counts})")
    if e1 <= e0:
        raise BenchError(f"{db}: no webhook event was applied in the window")
    extra: dict[str, Any] = {
        "db": db,
        "senders": senders,
        "per_minute": per_minute,
        "latency_ms": args.latency_ms,
        "send_concurrency": args.send_concurrency,
        "window_s": round(window, 1),
        "warmup": warmup,
        "load": [round(v, 1) for v in psutil.getloadavg()],
    }
    figures.add("configured rate (reference)", configured, "msg/s", **extra)
    figures.add("sent in the window", sent / window, "msg/s", **extra)
    plain = sent / (configured * window)
    figures.add("sent in the window / configured", plain, "x", goal=">= 0.97", **extra)
    figures.add("per-sender rate (secondary)", rate, "msg/s", **extra)
    figures.add("per-sender rate / configured (secondary)", rate / configured, "x", **extra)
    figures.add("gap error p50", percentile(errors, 50), "s", **extra)
    figures.add("gap error p99", percentile(errors, 99), "s", goal="< 1", **extra)
    figures.add("CPU per message", (c1 - c0) / sent * 1000, "ms", **extra)
    figures.add("webhook events applied", (e1 - e0) / window, "events/s", **extra)
    figures.add("rows queued at start", queued, "rows", counts=counts, **extra)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--senders", type=int, default=500)
    parser.add_argument("--per-minute", type=float, default=20.0)
    parser.add_argument("--latency-ms", type=int, default=1000)
    parser.add_argument(
        "--warmup", type=float, default=15.0, help="settling seconds before the window"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window")
    parser.add_argument(
        "--send-concurrency",
        type=int,
        default=DEFAULT_SEND_CONCURRENCY,
        help="paced sends waiting at once (0: the tick waits for them, as before issue 17)",
    )
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--full", action="store_true", help="(the default size is the full one)")
    args = parser.parse_args()
    figures = Figures.begin("senders")

    def measure() -> None:
        for db in ("sqlite", "postgresql") if args.db == "both" else (args.db,):
            run_one(args, db == "postgresql", figures)

    return report(figures, measure)


if __name__ == "__main__":
    raise SystemExit(main())
