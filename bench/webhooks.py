"""Webhook receiver throughput: ``python -m bench.webhooks [--events N] [--full] [--pg]``.

Seeds delivery rows in state ``sent`` with message ids (bulk insert), then posts two
status events per row (``delivered`` then ``read``, the sandbox's spec-dialect bodies,
one event per POST as gateways send them) from concurrent clients: ``--procs``
processes x ``--threads`` threads, each thread with its own keep-alive
``http.client`` connection. The same clients post the same bodies to

- gatecast's app (``create_app``: ``POST /webhooks/gateway/{secret}``, group-commit
  batcher, events stored durably before the 200 and applied to their deliveries by the
  inbox pass shortly after), and
- two raw ASGI endpoints (no framework, like gatecast's fast path), the references:
  *durable*, what a careful hand-written receiver does: parse the body and, in one
  statement committed before the 200 (one transaction on SQLite), store the event in
  ``status_events`` (deduplicated, marked applied) and move its delivery forward
  (forward only, with its time), over a pool of connections (PostgreSQL: 16 async
  autocommit connections, one per client at the default 2 x 8; SQLite: one connection
  in one writer thread); and
  *discard*, the bare limit of the HTTP stack (read the body, answer 200, store nothing),

each served by uvicorn in its own process with one worker and the same options
(``--loop``/``--http``: uvicorn's event loop and HTTP parser, for every server alike).
Figures: events/s, for gatecast and the durable reference the wall time from the first
POST until every event is applied (the bench polls the count of applied events once the
last answer came; the rate until the last acknowledgement is reported too; the durable
reference applies before answering), for the discard endpoint until its last answer;
p50 / p99 acknowledgement latency; each server process's CPU per event. The goal ratio
is gatecast against the durable reference; gatecast against the discard endpoint is
shown for what the HTTP stack alone costs. The references work on their own campaign's
rows (their own message ids), so gatecast's events are not deduplicated away.
Afterwards the database must hold every event (``status_events``) applied, and every
row of each campaign must be ``read``: anything else exits 1.

Default 40,000 events; ``--full`` is the issue's 200,000.
"""

from __future__ import annotations

import argparse
import asyncio
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import BenchError, Figures, report
from bench.dispatch import database, open_db, phone, seed_campaign
from storage import tables
from storage.queries import instances as iq
from storage.types import utcnow

SECRET = "bench-webhook-secret-0123456789abcdef"  # noqa: S105 (a throwaway local secret)
INSTANCE = "BENCH1"


# --- servers (child processes) ---------------------------------------------------------------


async def _read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


_OK = b'{"status":"ok"}'
_OK_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"15")]


async def _answer(send: Any, status: int, body: bytes = _OK) -> None:
    headers = _OK_HEADERS if body is _OK else [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


#: the states a status moves a delivery forward from (the forward-only rule, by hand)
_FROM = {
    "delivered": ("queued", "sending", "unknown", "sent"),
    "read": ("queued", "sending", "unknown", "sent", "delivered"),
}


def _status_fields(body: bytes) -> tuple[str, str, str, str, datetime]:
    """``(instance, message id, chat, status, time)`` of a spec-dialect status body."""
    doc = json.loads(body)
    data = doc["data"]
    at = datetime.fromtimestamp(int(data["timestamp"]), UTC)
    return str(doc["instance_id"]), str(data["id"]), str(data["chat"]), str(data["status"]), at


def _sqlite_time(at: datetime) -> str:
    """``at`` as SQLAlchemy stores a UTC datetime in SQLite (naive, microseconds)."""
    return at.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


class RawReference:
    """A raw ASGI app: ``POST /webhooks/gateway/{secret}`` and ``GET /healthz``.

    ``durable``: each event stored and its delivery moved before the 200 (see the module
    docstring); else the body is read and discarded.
    """

    def __init__(self, url: str, durable: bool, connections: int = 16) -> None:
        self.url, self.durable, self.connections = url, durable, connections
        self.path = f"/webhooks/gateway/{SECRET}"
        self._pool: asyncio.Queue[Any] | None = None
        self._sqlite: Any = None
        self._writer: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["path"] == "/healthz":
            await _answer(send, 200)
            return
        if scope["method"] != "POST" or scope["path"] != self.path:
            await _answer(send, 404, b"not found")
            return
        body = await _read_body(receive)
        if self.durable:
            try:
                fields = _status_fields(body)
            except (ValueError, KeyError, TypeError):
                await _answer(send, 400, b"malformed event")
                return
            if self._pool is not None:
                await self._store_pg(*fields)
            else:
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(self._writer, self._store_sqlite, *fields)
        await _answer(send, 200)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self.durable:
                    await self._open()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _open(self) -> None:
        if self.url.startswith("sqlite"):
            import sqlite3
            from concurrent.futures import ThreadPoolExecutor

            path = self.url.split(":///", 1)[1]
            self._sqlite = sqlite3.connect(path, check_same_thread=False)
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=30000"):
                self._sqlite.execute(f"PRAGMA {pragma}")
            self._writer = ThreadPoolExecutor(1)  # SQLite has one writer
            return
        import psycopg

        conninfo = self.url.replace("postgresql+psycopg://", "postgresql://", 1)
        self._pool = asyncio.Queue()
        for _ in range(self.connections):
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
            self._pool.put_nowait(conn)

    _PG_STORE = """
        WITH stored AS (
            INSERT INTO status_events
                (message_id, instance_id, chat, status, occurred_at, received_at, applied)
            VALUES (%(mid)s, %(instance)s, %(chat)s, %(status)s, %(at)s, now(), true)
            ON CONFLICT (message_id, status) DO NOTHING
        )
        UPDATE deliveries SET state = %(status)s,
            delivered_at = coalesce(delivered_at, %(at)s),
            read_at = CASE WHEN %(status)s = 'read' THEN coalesce(read_at, %(at)s) END
        WHERE message_id = %(mid)s AND state = ANY(%(from)s)
    """

    async def _store_pg(self, instance: str, mid: str, chat: str, status: str, at: Any) -> None:
        assert self._pool is not None
        conn = await self._pool.get()
        try:
            params = {"mid": mid, "instance": instance, "chat": chat, "status": status}
            await conn.execute(self._PG_STORE, {**params, "at": at, "from": list(_FROM[status])})
        finally:
            self._pool.put_nowait(conn)

    def _store_sqlite(self, instance: str, mid: str, chat: str, status: str, at: Any) -> None:
        con = self._sqlite
        now = _sqlite_time(datetime.now(UTC))
        stamp = _sqlite_time(at)
        states = _FROM[status]
        marks = ",".join("?" * len(states))
        with con:  # one transaction, committed
            con.execute(
                "INSERT INTO status_events (message_id, instance_id, chat, status, occurred_at,"
                " received_at, applied) VALUES (?, ?, ?, ?, ?, ?, 1)"
                " ON CONFLICT (message_id, status) DO NOTHING",
                (mid, instance, chat, status, stamp, now),
            )
            con.execute(
                "UPDATE deliveries SET state = ?, delivered_at = coalesce(delivered_at, ?),"
                " read_at = CASE WHEN ? = 'read' THEN coalesce(read_at, ?) END"
                f" WHERE message_id = ? AND state IN ({marks})",
                (status, stamp, status, stamp, mid, *states),
            )


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


def serve(kind: str, url: str, port_file: Path, loop: str, http: str) -> None:
    """Serve a reference or the gatecast app with uvicorn (one worker) until terminated."""
    import uvicorn

    app = _gatecast_app(url) if kind == "gatecast" else RawReference(url, kind == "durable")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # NODELAY
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    tmp = port_file.with_name(port_file.name + ".tmp")
    tmp.write_text(str(sock.getsockname()[1]))
    os.replace(tmp, port_file)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", loop=loop, http=http
    )
    uvicorn.Server(config).run(sockets=[sock])


class Server:
    """A ``serve`` child process; ``with Server(...) as port:``."""

    def __init__(self, kind: str, url: str, tmp: Path, loop: str, http: str) -> None:
        self.kind, self.url, self.tmp = kind, url, tmp
        self.options = ["--loop", loop, "--http", http]
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> int:
        port_file = self.tmp / f"{self.kind}.port"
        port_file.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "bench.webhooks", "--serve", self.kind, "--url", self.url]
        self.proc = subprocess.Popen([*cmd, "--port-file", str(port_file), *self.options])
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
    target: int = 0,
) -> dict[str, Any]:
    """Post ``events`` events from ``procs`` processes; events/s and latency percentiles.

    ``rate`` runs from the first POST until ``applied()`` (polled once the last answer
    came) reaches ``target``, ``ack_rate`` until the last answer.
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
        while applied() < target:
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


def verify(url: str, campaign_ids: list[int]) -> dict[str, int]:
    """Counts in the database after the run: events stored, applied, rows read per campaign."""
    from sqlalchemy import func, select

    d = tables.deliveries
    se = tables.status_events
    engine = open_db(url)
    counts: dict[str, int] = {}
    with engine.connect() as conn:
        counts["status_events"] = conn.execute(select(func.count()).select_from(se)).scalar_one()
        counts["applied"] = conn.execute(
            select(func.count()).select_from(se).where(se.c.applied.is_(True))
        ).scalar_one()
        for cid in campaign_ids:
            counts[f"rows_read_{cid}"] = conn.execute(
                select(func.count())
                .select_from(d)
                .where(d.c.campaign_id == cid, d.c.state == "read", d.c.read_at.is_not(None))
            ).scalar_one()
    engine.dispose()
    return {k: int(v) for k, v in counts.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=40_000, help="events (default 40,000)")
    parser.add_argument("--full", action="store_true", help="200,000 events")
    parser.add_argument("--procs", type=int, default=2, help="client processes")
    parser.add_argument("--threads", type=int, default=8, help="threads per client process")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument(
        "--loop",
        default="auto",
        help="uvicorn's event loop for every server (auto, asyncio, uvloop)",
    )
    parser.add_argument(
        "--http",
        default="auto",
        help="uvicorn's HTTP parser for every server (auto, h11, httptools)",
    )
    parser.add_argument("--serve", choices=SERVERS, help=argparse.SUPPRESS)
    parser.add_argument("--url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--port-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.url, args.port_file, args.loop, args.http)
        return 0
    events = 200_000 if args.full else args.events
    events -= events % 2
    rows = events // 2
    figures = Figures.begin("webhooks")
    return report(figures, lambda: measure(args, events, rows, figures))


#: the servers a run starts: the two references, then gatecast
SERVERS = ("discard", "durable", "gatecast")


def measure(args: argparse.Namespace, events: int, rows: int, figures: Figures) -> None:
    """The references, then gatecast, blasted by the same clients with the same bodies."""
    db_kind = "postgresql" if args.pg else "sqlite"
    clients = f"{args.procs} procs x {args.threads} threads"
    stack = f"loop={args.loop} http={args.http}"
    with tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir:
        tmp = Path(tmpdir)
        with database(tmp, args.pg) as url:
            engine = open_db(url)
            ref_cid = seed_campaign(engine, rows, state="sent", with_contacts=False)
            gc_cid = seed_campaign(
                engine, rows, state="sent", with_contacts=False, name="bench gatecast"
            )
            with engine.begin() as conn:  # the webhook hears only instances gatecast holds
                iq.mark_state(conn, INSTANCE, "connected", now=utcnow())
            engine.dispose()
            count_applied, close_counter = applied_counter(url)
            results: dict[str, dict[str, Any]] = {}
            try:
                for kind in SERVERS:
                    server = Server(kind, url, tmp, args.loop, args.http)
                    cid = gc_cid if kind == "gatecast" else ref_cid
                    waits = kind == "gatecast"
                    with server as port:
                        cpu0 = server.cpu_seconds()
                        base = count_applied() if waits else 0
                        got = blast(
                            port,
                            cid,
                            events,
                            args.procs,
                            args.threads,
                            applied=count_applied if waits else None,
                            target=base + events,
                        )
                        got["cpu"] = server.cpu_seconds() - cpu0
                    if got["failed"]:
                        raise BenchError(f"{kind}: {got['failed']} failed: {got['failures']}")
                    results[kind] = got
            finally:
                close_counter()
            counts = verify(url, [ref_cid, gc_cid])
        bare, ref, gc = results["discard"], results["durable"], results["gatecast"]
        figures.add(
            "raw ASGI, discard",
            bare["rate"],
            "events/s",
            events=events,
            clients=clients,
            stack=stack,
        )
        figures.add("raw ASGI, discard, p99 ack", bare["p99_ms"], "ms")
        figures.add("raw ASGI, discard, server CPU per event", bare["cpu"] / events * 1e6, "us")
        figures.add("raw ASGI, durable", ref["rate"], "events/s", events=events, db=db_kind)
        figures.add("raw ASGI, durable, p99 ack", ref["p99_ms"], "ms")
        figures.add("raw ASGI, durable, server CPU per event", ref["cpu"] / events * 1e6, "us")
        figures.add(
            "gatecast applied",
            gc["rate"],
            "events/s",
            events=events,
            db=db_kind,
            clients=clients,
            stack=stack,
        )
        figures.add("gatecast acknowledged", gc["ack_rate"], "events/s")
        figures.add("gatecast last applied after last ack", gc["apply_lag_ms"], "ms")
        figures.add("gatecast p50 ack", gc["p50_ms"], "ms")
        figures.add("gatecast p99 ack", gc["p99_ms"], "ms")
        figures.add("gatecast server CPU per event", gc["cpu"] / events * 1e6, "us")
        figures.add("events stored (both campaigns)", counts["status_events"], "events")
        figures.add("events applied (both campaigns)", counts["applied"], "events")
        figures.add("gatecast rows read", counts[f"rows_read_{gc_cid}"], "rows", of=rows)
        figures.ratio("gatecast / raw ASGI durable", gc["rate"], ref["rate"], goal=">= 0.8")
        figures.add("gatecast / raw ASGI discard", gc["rate"] / bare["rate"], "x")
        expected = {
            "status_events": 2 * events,
            "applied": 2 * events,
            f"rows_read_{ref_cid}": rows,
            f"rows_read_{gc_cid}": rows,
        }
        if counts != expected:
            raise BenchError(f"not every event was applied: {counts} (expected {expected})")


if __name__ == "__main__":
    raise SystemExit(main())
