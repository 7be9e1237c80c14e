"""Service memory: ``python -m bench.memory [--rows N] [--big M] [--full] [--pg]``.

For each size, the parent seeds a fresh database (contacts, list, a scheduled text
campaign through one sender) and starts a sandbox (``gatecast sandbox``, its own
process, status events an hour away). A fresh child process then does what the service
does: ``start_campaign`` (materialisation: one delivery row per recipient) and
:class:`scheduler.service.Service` (dispatcher thread, pacing off, no APScheduler jobs)
until the campaign completes. Its peak RSS (``VmHWM``) is the figure.

Goals: under 250 MB at both sizes, and the big run within 20% of the small one.
Default sizes 10,000 and 50,000 recipients (sending is most of the time: at ~650 msg/s
on a slow 2-core machine, 20,000 and 100,000 took 3.75 of ``make bench``'s 10 minutes);
``--full`` is the issue's 100,000 and 1,000,000 (a 1M-recipient run sends a million
messages: plan for the time it takes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import BenchError, Figures, child_report, peak_rss_mb, report
from bench.dispatch import (
    TOKEN,
    create_campaign_for,
    database,
    linked_instance,
    open_db,
    sandbox_process,
    seed_audience,
    unpace,
)


def _child(url: str, sandbox_url: str, campaign_id: int, timeout: float) -> dict[str, Any]:
    """Start the campaign and run the service until it completes; figures of this process."""
    from gateway.client import GatewayClient
    from scheduler.service import Service, ServiceOptions
    from scheduler.starts import start_campaign
    from storage.engine import make_engine
    from storage.queries.tallies import delivery_counts
    from storage.types import utcnow

    engine = make_engine(url)
    t0 = time.perf_counter()
    started = start_campaign(engine, campaign_id, now=utcnow(), enforce_grace=False)
    if started.outcome != "started":
        raise BenchError(f"campaign did not start: {started.detail}")
    after_materialise = peak_rss_mb()
    t1 = time.perf_counter()
    unpace(engine, campaign_id)

    def client() -> GatewayClient:
        return GatewayClient(sandbox_url, TOKEN, timeout=30.0)

    service = Service(
        engine,
        client,
        options=ServiceOptions(run_jobs=False, poll_seconds=0.2),
        campaign_ids=[campaign_id],
    )
    service.start()
    samples: list[float] = []
    try:
        deadline = time.monotonic() + timeout
        while True:
            time.sleep(0.5)
            samples.append(peak_rss_mb())
            with engine.connect() as conn:
                state = conn.exec_driver_sql(
                    f"SELECT state FROM campaigns WHERE id = {int(campaign_id)}"
                ).scalar_one()
            if state != "running":
                break
            if time.monotonic() > deadline:
                raise BenchError(f"campaign still running after {timeout:.0f} s")
    finally:
        service.stop()
    t2 = time.perf_counter()
    with engine.connect() as conn:
        counts = {k: v for k, v in delivery_counts(conn, campaign_id).items() if v}
    engine.dispose()
    return {
        "state": state,
        "counts": counts,
        "materialise_s": t1 - t0,
        "send_s": t2 - t1,
        "rss_after_materialise_mb": after_materialise,
        "peak_rss_mb": peak_rss_mb(),
    }


def run_size(tmp: Path, rows: int, pg: bool, timeout: float) -> dict[str, Any]:
    """Seed, then run one campaign of ``rows`` recipients in a fresh child process."""
    with database(tmp, pg, name=f"memory-{rows}") as url, sandbox_process(tmp) as sb_url:
        engine = open_db(url)
        iid = linked_instance(sb_url)
        seed_audience(engine, rows)
        cid = create_campaign_for(engine, iid)
        engine.dispose()
        cmd = [sys.executable, "-m", "bench.memory", "--child", "--url", url]
        cmd += ["--sandbox", sb_url, "--campaign", str(cid), "--timeout", str(timeout)]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
        if proc.returncode != 0:
            raise BenchError(f"service run of {rows:,} recipients failed (exit {proc.returncode})")
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["counts"].get("sent") != rows:
        raise BenchError(f"{rows:,} recipients: not every row sent: {result['counts']}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000, help="small campaign (10,000)")
    parser.add_argument("--big", type=int, default=50_000, help="big campaign (50,000)")
    parser.add_argument("--full", action="store_true", help="100,000 and 1,000,000")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds per run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--sandbox", help=argparse.SUPPRESS)
    parser.add_argument("--campaign", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child_report(
            "memory child", lambda: _child(args.url, args.sandbox, args.campaign, args.timeout)
        )
    small, big = (100_000, 1_000_000) if args.full else (args.rows, args.big)
    figures = Figures.begin("memory")
    return report(figures, lambda: measure(args, small, big, figures))


def measure(args: argparse.Namespace, small: int, big: int, figures: Figures) -> None:
    """Both sizes, each in a fresh database and child process; then the figures."""
    db_kind = "postgresql" if args.pg else "sqlite"
    with tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir:
        tmp = Path(tmpdir)
        results = {n: run_size(tmp, n, args.pg, args.timeout) for n in (small, big)}
    for n, r in results.items():
        figures.add(
            f"service peak RSS, {n:,} recipients",
            r["peak_rss_mb"],
            "MB",
            goal="< 250",
            db=db_kind,
        )
        figures.add(f"after materialise, {n:,}", r["rss_after_materialise_mb"], "MB")
        figures.add(f"materialise {n:,}", n / r["materialise_s"], "rows/s")
        figures.add(f"send {n:,}", n / r["send_s"], "msg/s")
    figures.ratio(
        f"peak RSS {big:,} / {small:,}",
        results[big]["peak_rss_mb"],
        results[small]["peak_rss_mb"],
        goal="<= 1.2",
    )


if __name__ == "__main__":
    raise SystemExit(main())
