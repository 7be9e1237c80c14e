"""Webhook receiver throughput: ``python -m bench.webhooks [--events N] [--full] [--pg]``.

Seeds delivery rows in state ``sent`` with message ids (bulk insert), then posts two
status events per row (``delivered`` then ``read``, the sandbox's spec-dialect bodies,
one event per POST as gateways send them) from concurrent clients: ``--procs``
processes x ``--threads`` threads, each thread with its own keep-alive
``http.client`` connection. The same clients post the same bodies to

- gatecast's app (``create_app``: ``POST /webhooks/gateway/{secret}``, group-commit
  batcher, events stored durably before the 200 and applied to their deliveries by the
  inbox pass shortly after), and
- a bare FastAPI endpoint that reads the body and answers 200 (accept and discard),

each served by uvicorn in its own process with one worker and the same options.
Figures: events/s, for gatecast the wall time from the first POST until every event is
applied (the bench polls the count of applied events once the last answer came; the
rate until the last acknowledgement is reported too), for the bare endpoint until its
last answer; p50 / p99 acknowledgement latency; each server process's CPU per event.
Afterwards the database must hold every event (``status_events``) applied, and every
row must be ``read``: anything else exits 1.

Default 40,000 events; ``--full`` is the issue's 200,000.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from bench.common import BenchError, Figures, report
from bench.dispatch import database, open_db, phone, seed_campaign
from storage import tables
from storage.queries import instances as iq
from storage.types import utcnow

SECRET = "bench-webhook-secret-0123456789abcdef"  # noqa: S105 (a throwaway local secret)
INSTANCE = "BENCH1"


# --- servers (child processes) ---------------------------------------------------------------


def _bare_app() -> Any:
    app = FastAPI()

    @app.post("/webhooks/gateway/{secret}")
    async def receive(secret: str, request: Request) -> JSONResponse:
        await request.body()
        return JSONResponse({"status": "ok"})

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _gatecast_app(url: str) -> Any:
    from pydantic import SecretStr

    from gatecast.settings import Settings
    from gatecast.web.app import create_app
    from gatecast.web.context import AppContext
    from storage.engine import make_engine

    settings = Settings(database_url=url, webhook_secret=SecretStr(SECRET))
    ctx = AppContext(
        settings=settings, engine=make_engine(url), api_key=SecretStr("bench-api-key-0123456789")
    )
    return create_app(ctx)


def serve(kind: str, url: str, port_file: Path) -> None:
    """Serve the bare or the gatecast app with uvicorn (one worker) until terminated."""
    import uvicorn

    app = _bare_app() if kind == "bare" else _gatecast_app(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # NODELAY
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    tmp = port_file.with_name(port_file.name + ".tmp")
    tmp.write_text(str(sock.getsockname()[1]))
    os.replace(tmp, port_file)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


class Server:
    """A ``serve`` child process; ``with Server(...) as port:``."""

    def __init__(self, kind: str, url: str, tmp: Path) -> None:
        self.kind, self.url, self.tmp = kind, url, tmp
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> int:
        port_file = self.tmp / f"{self.kind}.port"
        port_file.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "bench.webhooks", "--serve", self.kind, "--url", self.url]
        self.proc = subprocess.Popen([*cmd, "--port-file", str(port_file)])
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"{self.kind} server did not start")
            if port_file.exists():
                port = int(port_file.read_text())
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                    conn.request("GET", "/healthz")
                    if conn.getresponse().status == 200:
                        conn.close()
                        return port
                except OSError:
                    pass
            time.sleep(0.05)

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the server process has used so far."""
        import psutil

        assert self.proc is not None
        times = psutil.Process(self.proc.pid).cpu_times()
        return float(times.user + times.system)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --- clients ---------------------------------------------------------------------------------


def event_body(campaign_id: int, k: int, at: int) -> bytes:
    """Event ``k``: ``delivered`` (even k) or ``read`` (odd k) of row ``k // 2 + 1``."""
    from gateway.sandbox.events_out import status_body

    i = k // 2 + 1
    status = "delivered" if k % 2 == 0 else "read"
    chat = phone(i).lstrip("+") + "@s.whatsapp.net"
    body = status_body("spec", INSTANCE, f"BENCH{campaign_id}-{i}", chat, status, at)
    return json.dumps(body, separators=(",", ":")).encode()


def post_range(port: int, campaign_id: int, lo: int, hi: int, threads: int) -> dict[str, Any]:
    """Post events ``lo..hi-1`` from ``threads`` threads; latencies and failures."""
    at = int(time.time())
    bodies = [event_body(campaign_id, k, at) for k in range(lo, hi)]
    path = f"/webhooks/gateway/{SECRET}"
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    position = 0
    start_gate = threading.Barrier(threads + 1)

    def connect() -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.connect()
        assert conn.sock is not None
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def worker() -> None:
        nonlocal position
        conn = connect()
        mine: list[float] = []
        headers = {"Content-Type": "application/json"}
        start_gate.wait()
        while True:
            with lock:
                j = position
                position += 1
            if j >= len(bodies):
                break
            t0 = time.perf_counter()
            try:
                conn.request("POST", path, body=bodies[j], headers=headers)
                resp = conn.getresponse()
                resp.read()
                ok = resp.status == 200
            except OSError as exc:
                ok = False
                resp = None
                conn.close()
                conn = connect()
                with lock:
                    failures.append(f"event {lo + j}: {type(exc).__name__}")
            mine.append(time.perf_counter() - t0)
            if not ok and resp is not None:
                with lock:
                    failures.append(f"event {lo + j}: HTTP {resp.status}")
        conn.close()
        with lock:
            latencies.extend(mine)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for th in pool:
        th.start()
    start_gate.wait()
    t_start = time.time()
    for th in pool:
        th.join()
    return {
        "latencies": latencies,
        "failures": failures[:20],
        "failed": len(failures),
        "start": t_start,
        "end": time.time(),
    }


def blast(
    port: int,
    campaign_id: int,
    events: int,
    procs: int,
    threads: int,
    *,
    applied: Callable[[], int] | None = None,
) -> dict[str, Any]:
    """Post ``events`` events from ``procs`` processes; events/s and latency percentiles.

    ``rate`` runs from the first POST until every event is applied (``applied()``, polled
    once the last answer came, returns how many are), ``ack_rate`` until the last answer.
    """
    step = -(-events // procs)
    with ProcessPoolExecutor(procs) as pool:
        futures = [
            pool.submit(post_range, port, campaign_id, lo, min(events, lo + step), threads)
            for lo in range(0, events, step)
        ]
        results = [f.result() for f in futures]
    start, acked = min(r["start"] for r in results), max(r["end"] for r in results)
    done = acked
    if applied is not None:
        while applied() < events:
            if time.time() - acked > 120:
                raise BenchError("events still unapplied 120 s after the last answer")
            time.sleep(0.002)
        done = time.time()
    lat = sorted(x for r in results for x in r["latencies"])

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")

    return {
        "rate": events / (done - start),
        "ack_rate": events / (acked - start),
        "apply_lag_ms": (done - acked) * 1000,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "failed": sum(r["failed"] for r in results),
        "failures": [f for r in results for f in r["failures"]][:5],
    }


def applied_counter(url: str) -> tuple[Callable[[], int], Callable[[], None]]:
    """A function counting applied status events in ``url`` (one pooled connection), and
    one that closes it."""
    from sqlalchemy import func, select

    from storage.engine import make_engine

    se = tables.status_events
    stmt = select(func.count()).select_from(se).where(se.c.applied.is_(True))
    engine = make_engine(url)

    def count() -> int:
        with engine.connect() as conn:
            return int(conn.execute(stmt).scalar_one())

    return count, engine.dispose


def verify(url: str, campaign_id: int, events: int) -> dict[str, int]:
    """Counts in the database after the run."""
    from sqlalchemy import func, select

    d = tables.deliveries
    se = tables.status_events
    engine = open_db(url)
    with engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(se)).scalar_one()
        applied = conn.execute(
            select(func.count()).select_from(se).where(se.c.applied.is_(True))
        ).scalar_one()
        read = conn.execute(
            select(func.count())
            .select_from(d)
            .where(d.c.campaign_id == campaign_id, d.c.state == "read", d.c.read_at.is_not(None))
        ).scalar_one()
    engine.dispose()
    return {"status_events": int(stored), "applied": int(applied), "rows_read": int(read)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=40_000, help="events (default 40,000)")
    parser.add_argument("--full", action="store_true", help="200,000 events")
    parser.add_argument("--procs", type=int, default=2, help="client processes")
    parser.add_argument("--threads", type=int, default=8, help="threads per client process")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument("--serve", choices=("bare", "gatecast"), help=argparse.SUPPRESS)
    parser.add_argument("--url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--port-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.url, args.port_file)
        return 0
    events = 200_000 if args.full else args.events
    events -= events % 2
    rows = events // 2
    figures = Figures.begin("webhooks")
    return report(figures, lambda: measure(args, events, rows, figures))


def measure(args: argparse.Namespace, events: int, rows: int, figures: Figures) -> None:
    """The bare endpoint, then gatecast, blasted by the same clients with the same bodies."""
    db_kind = "postgresql" if args.pg else "sqlite"
    clients = f"{args.procs} procs x {args.threads} threads"
    with tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir:
        tmp = Path(tmpdir)
        with database(tmp, args.pg) as url:
            engine = open_db(url)
            cid = seed_campaign(engine, rows, state="sent", with_contacts=False)
            with engine.begin() as conn:  # the webhook hears only instances gatecast holds
                iq.mark_state(conn, INSTANCE, "connected", now=utcnow())
            engine.dispose()
            bare_server = Server("bare", url, tmp)
            with bare_server as port:
                cpu0 = bare_server.cpu_seconds()
                bare = blast(port, cid, events, args.procs, args.threads)
                bare["cpu"] = bare_server.cpu_seconds() - cpu0
            if bare["failed"]:
                raise BenchError(f"bare endpoint: {bare['failed']} failed: {bare['failures']}")
            gc_server = Server("gatecast", url, tmp)
            count_applied, close_counter = applied_counter(url)
            try:
                with gc_server as port:
                    cpu0 = gc_server.cpu_seconds()
                    gc = blast(port, cid, events, args.procs, args.threads, applied=count_applied)
                    gc["cpu"] = gc_server.cpu_seconds() - cpu0
            finally:
                close_counter()
            counts = verify(url, cid, events)
        figures.add("bare endpoint", bare["rate"], "events/s", events=events, clients=clients)
        figures.add("bare endpoint p99 ack", bare["p99_ms"], "ms")
        figures.add("bare server CPU per event", bare["cpu"] / events * 1e6, "us")
        figures.add(
            "gatecast applied",
            gc["rate"],
            "events/s",
            events=events,
            db=db_kind,
            clients=clients,
        )
        figures.add("gatecast acknowledged", gc["ack_rate"], "events/s")
        figures.add("gatecast last applied after last ack", gc["apply_lag_ms"], "ms")
        figures.add("gatecast p50 ack", gc["p50_ms"], "ms")
        figures.add("gatecast p99 ack", gc["p99_ms"], "ms")
        figures.add("gatecast server CPU per event", gc["cpu"] / events * 1e6, "us")
        figures.add("gatecast events stored", counts["status_events"], "events")
        figures.add("gatecast events applied", counts["applied"], "events")
        figures.add("gatecast rows read", counts["rows_read"], "rows", of=rows)
        figures.ratio("gatecast / bare endpoint", gc["rate"], bare["rate"], goal=">= 0.8")
        if gc["failed"]:
            raise BenchError(f"gatecast: {gc['failed']} requests failed: {gc['failures']}")
        if counts != {"status_events": events, "applied": events, "rows_read": rows}:
            raise BenchError(
                f"not every event was applied: {counts} (expected {events} events, "
                f"{rows} rows read)"
            )


if __name__ == "__main__":
    raise SystemExit(main())
