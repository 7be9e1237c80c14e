"""Time to first send as the senders grow: ``python -m bench.startup [--senders 1 500]``.

The real ``gatecast serve`` (``--port 0``, its intake, web process and worker, as users
run it) starts against a ``gatecast sandbox`` process whose every request waits
``--latency-ms`` (default 1,000 ms: sends, instance operations and webhook
registrations alike). Before each start, on a fresh SQLite file: N senders created at
the sandbox and linked, a list, and a campaign through all of them started (its rows
queued, due now). Measured from the moment ``serve`` is spawned:

- time to first send: until the sandbox has accepted the first message;
- registrations done: until ``serve`` prints its line for the webhook registrations of
  its start (one summary line; each failure on its own).

The reference is the same start with 1 sender, in the same run: the goal (issue 30) is
time to first send with 500 senders <= 1.5x that with 1. Before issue 30 ``serve``
registered the webhooks one at a time before dispatching: 500 x 1 s first.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import BenchError, Figures, report, slow_gateway
from bench.dispatch import (
    TEXT,
    TOKEN,
    gatecast_exe,
    open_db,
    seed_audience,
    stop_process,
)
from bench.senders import create_instances

API_KEY = "bench-api-key-0123456789abcdefgh"
#: recipients per sender (more than one tick claims)
ROWS_PER_SENDER = 4


def _start_campaign(url: str, instance_ids: list[str]) -> None:
    """The senders linked, and a campaign through all of them (a campaign without
    ``instances``: every linked sender) started: its rows queued, due now."""
    from campaigns.campaign_file import parse_campaign
    from campaigns.instances import mark_connected
    from campaigns.service import create_campaign
    from scheduler.starts import start_campaign
    from storage.types import utcnow

    engine = open_db(url)
    seed_audience(engine, len(instance_ids) * ROWS_PER_SENDER)
    for iid in instance_ids:
        mark_connected(engine, iid, now=utcnow())
    spec = parse_campaign(
        {
            "name": "bench startup",
            "list": "bench",
            "message": {"type": "text", "text": TEXT},
            "schedule": {"timezone": "UTC"},
            "pace": {"per_minute": 20, "delay_seconds": [1, 3], "daily_cap": 1000},
        }
    )
    cid = create_campaign(engine, spec).id
    started = start_campaign(engine, cid, now=utcnow(), enforce_grace=False)
    engine.dispose()
    if started.outcome != "started":
        raise BenchError(f"campaign {cid} did not start: {started.outcome} {started.detail}")


def _first_send(
    sb_url: str, folder: Path, senders: int, latency_ms: int, timeout: float
) -> dict[str, float]:
    """One start of ``gatecast serve`` on a prepared folder: seconds to the first message
    accepted and to the registrations' line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECAST_")}
    env.update(
        GATECAST_DATABASE_URL=f"sqlite:///{folder / 'gatecast.db'}",
        GATECAST_GATEWAY_URL=sb_url,
        GATECAST_ACCESS_TOKEN=TOKEN,
        GATECAST_API_KEY=API_KEY,
        GATECAST_INTAKE_LINGER="0",
        # what the benchmarks' own process says (bench.common): the senders are new
        GATECAST_WARMUP_ENABLED=os.environ.get("GATECAST_WARMUP_ENABLED", "false"),
        GATECAST_HTTP_TIMEOUT_SECONDS=str(max(30, 5 * latency_ms // 1000)),
        PYTHONUNBUFFERED="1",
    )
    log_path = folder / "serve.log"
    with httpx.Client(base_url=sb_url, timeout=30) as sb:
        before = int(sb.get("/sandbox/stats").json()["accepted"])
        with log_path.open("w") as log:
            started = time.monotonic()
            proc = subprocess.Popen(
                [gatecast_exe(), "serve", "--port", "0"],
                cwd=folder,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        first: float | None = None
        registered: float | None = None
        try:
            deadline = started + timeout
            while (first is None or registered is None) and time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise BenchError(f"serve exited {proc.returncode}: {log_path.read_text()}")
                now = time.monotonic()
                if first is None and int(sb.get("/sandbox/stats").json()["accepted"]) > before:
                    first = now - started
                if registered is None and "registered for" in log_path.read_text():
                    registered = now - started
                time.sleep(0.05)
        finally:
            stop_process(proc, 60)
    if first is None or registered is None:
        raise BenchError(
            f"{senders} senders: no send or no registration line in {timeout} s:\n"
            f"{log_path.read_text()[-3000:]}"
        )
    return {"first_send": first, "registered": registered}


def run(args: argparse.Namespace, figures: Figures) -> None:
    """Each size in its own folder and sandbox; the figures and the ratio to the smallest."""
    firsts: dict[int, float] = {}
    for senders in args.senders:
        with (
            tempfile.TemporaryDirectory(prefix="gatecast-bench-startup-") as tmp_name,
            slow_gateway(Path(tmp_name), senders=senders, latency_ms=args.latency_ms) as sb_url,
        ):
            folder = Path(tmp_name) / "work"
            folder.mkdir()
            ids = create_instances(sb_url, senders)
            _start_campaign(f"sqlite:///{folder / 'gatecast.db'}", ids)
            got = [
                _first_send(sb_url, folder, senders, args.latency_ms, args.timeout)
                for _ in range(args.repeat)
            ]
        best = min(got, key=lambda g: g["first_send"])
        extra: dict[str, Any] = {"senders": senders, "latency_ms": args.latency_ms}
        firsts[senders] = best["first_send"]
        figures.add(f"time to first send, {senders} senders", best["first_send"], "s", **extra)
        figures.add(
            f"webhook registrations done, {senders} senders", best["registered"], "s", **extra
        )
    small, big = min(firsts), max(firsts)
    if big != small:
        figures.ratio(
            f"time to first send: {big} / {small} senders",
            firsts[big],
            firsts[small],
            goal="<= 1.5",
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--senders", type=int, nargs="+", default=[1, 500])
    parser.add_argument("--latency-ms", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1, help="starts per size (the fastest)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per start")
    parser.add_argument("--full", action="store_true", help="(the default sizes are the goal's)")
    args = parser.parse_args()
    figures = Figures.begin("startup")
    return report(figures, lambda: run(args, figures))


if __name__ == "__main__":
    raise SystemExit(main())
