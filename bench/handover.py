"""``python -m bench.handover [--full]``: a receiver restarted while the gateway posts.

Real ``gatecast receive`` processes on a SQLite file; client threads post webhook status
events continuously, one connection per event (as a gateway does). Two restarts are
measured in the same run:

* **hand-over**: a new ``gatecast receive`` started beside the running one takes its
  listening socket over, the old one exits;
* **stop and start** (the reference, what a restart was before): SIGTERM the receiver,
  then start a new one on the same port.

Figures: POSTs answered and failed (refused, reset) during each restart, the longest
time without an answered POST, the p99 and max answer time during the restart against
the steady state before it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.common import BenchError, Figures

GATECAST = Path(sys.executable).with_name("gatecast")
SECRET = "bench-webhook-secret-0123456789ab"  # noqa: S105  (a test value)


class Gateway:
    """Client threads posting status events, recording each answer's time and outcome."""

    def __init__(self, url: str, clients: int) -> None:
        self.hook = f"{url}/webhooks/gateway/{SECRET}"
        self.stop = threading.Event()
        self.lock = threading.Lock()
        # (finished at, seconds taken, ok)
        self.records: list[tuple[float, float, bool]] = []
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._post, args=(i,)) for i in range(clients)]

    def _post(self, client_id: int) -> None:
        limits = httpx.Limits(max_keepalive_connections=0)
        n = 0
        with httpx.Client(timeout=30, limits=limits) as client:
            while not self.stop.is_set():
                n += 1
                body = {
                    "event": "message_status",
                    "instance_id": "BENCH000000001",
                    "data": {"id": f"m-{client_id}-{n}", "status": "read"},
                }
                started = time.monotonic()
                try:
                    ok = client.post(self.hook, json=body).status_code == 200
                except httpx.HTTPError as exc:
                    ok = False
                    with self.lock:
                        self.errors.append(type(exc).__name__)
                ended = time.monotonic()
                with self.lock:
                    self.records.append((ended, ended - started, ok))
                if not ok:
                    time.sleep(0.01)  # a refused connect fails at once

    def __enter__(self) -> Gateway:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)

    def between(self, start: float, end: float) -> list[tuple[float, float, bool]]:
        with self.lock:
            return [r for r in self.records if start <= r[0] <= end]


def _spawn(folder: Path, port: int, log_name: str) -> tuple[subprocess.Popen[bytes], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECAST_")}
    env.update(
        GATECAST_DATABASE_URL=f"sqlite:///{folder / 'gatecast.db'}",
        GATECAST_API_KEY="bench-api-key-0123456789abcdefgh",
        GATECAST_WEBHOOK_SECRET=SECRET,
        GATECAST_LOG_LEVEL="WARNING",
    )
    ready = folder / f"{log_name}.ready"
    with (folder / f"{log_name}.log").open("wb") as log:
        proc = subprocess.Popen(
            [str(GATECAST), "receive", "--port", str(port), "--ready-file", str(ready)],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if ready.exists():
            return proc, ready.read_text().strip()
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.kill()
    raise BenchError(f"gatecast receive did not start: {(folder / f'{log_name}.log').read_text()}")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _longest_gap(records: list[tuple[float, float, bool]], start: float, end: float) -> float:
    times = [start, *sorted(r[0] for r in records if r[2]), end]
    return max(b - a for a, b in itertools.pairwise(times))


def _restart(figures: Figures, name: str, folder: Path, clients: int, steady: float) -> float:
    """Measure one restart; returns the POSTs that failed during it."""
    old, url = _spawn(folder, 0, f"{name}-old")
    port = int(url.rsplit(":", 1)[1])
    with Gateway(url, clients) as gw:
        time.sleep(steady)
        began = time.monotonic()
        if name == "handover":
            new, new_url = _spawn(folder, 0, f"{name}-new")
            if new_url != url:
                raise BenchError(f"the new receiver serves {new_url}, not {url}")
            old.wait(60)
        else:
            old.send_signal(signal.SIGTERM)
            old.wait(60)
            new, _ = _spawn(folder, port, f"{name}-new")
        ended = time.monotonic()
        time.sleep(1.0)
    during = gw.between(began, ended)
    before = gw.between(began - steady, began)
    failed = sum(1 for r in during if not r[2])
    figures.add(f"{name}_posts", len(during), "posts", seconds=round(ended - began, 2))
    figures.add(f"{name}_failed", failed, "posts", kinds=sorted(set(gw.errors)))
    figures.add(f"{name}_longest_gap", _longest_gap(during, began, ended) * 1000, "ms")
    p99_before = _p([r[1] for r in before], 0.99)
    p99_during = _p([r[1] for r in during if r[2]], 0.99)
    figures.add(f"{name}_p99_steady", p99_before * 1000, "ms")
    figures.add(f"{name}_p99_restart", p99_during * 1000, "ms")
    figures.add(f"{name}_max_restart", max((r[1] for r in during), default=0) * 1000, "ms")
    figures.ratio(f"{name}_p99_restart_vs_steady", p99_during, p99_before, goal="informative")
    new.send_signal(signal.SIGTERM)
    new.wait(60)
    return float(failed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="more clients, longer runs")
    args = parser.parse_args()
    clients, steady = (16, 5.0) if args.full else (4, 2.0)
    figures = Figures.begin("handover")
    with tempfile.TemporaryDirectory(prefix="gatecast-bench-handover-") as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        a.mkdir()
        b.mkdir()
        failed_handover = _restart(figures, "handover", a, clients, steady)
        failed_restart = _restart(figures, "stop_start", b, clients, steady)
    figures.add(
        "failed_posts_handover_vs_stop_start",
        failed_handover,
        "posts",
        reference=failed_restart,
        goal="0 with the hand-over",
    )
    figures.table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
