"""Webhook receiver throughput: ``python -m bench.webhooks [--events N] [--full] [--pg]``.

Seeds delivery rows in state ``sent`` with message ids (bulk insert), then posts two
status events per row (``delivered`` then ``read``, the sandbox's spec-dialect bodies,
one event per POST as gateways send them) from concurrent clients: ``--procs``
processes x ``--threads`` threads, each thread with its own keep-alive
``http.client`` connection. The three servers run side by side and take turns: in each
of ``--rounds`` rounds (default 4) each server gets its share of the events, one after
the other, so a load that drifts during the run weighs on all of them alike. The same
clients post the same bodies to

- gatecast's intake as ``gatecast serve`` starts it (``python -m
  gatecast.intake.supervisor``: the supervisor holding the port, its handler process with
  the webhook fast path and group-commit batcher, a prepared spare; configured through
  ``GATECAST_*`` variables as a user's is): events stored durably before the 200 and
  applied to their deliveries by the inbox pass shortly after; and
- two raw ASGI endpoints (no framework), the references:
  *batched*, the durable reference: the fastest durable receiver we could write by hand.
  Each POST is parsed and its event queued; a batcher takes every event waiting (up to
  2,000), stores them in ``status_events`` (deduplicated, marked applied) and moves their
  deliveries forward (forward only, one update per row: a batch's furthest status) in ONE
  transaction (PostgreSQL: two statements over ``unnest`` arrays; SQLite: two
  ``executemany``), commits, and only then answers each of those POSTs 200 (group commit:
  the events wait only for the commit in progress). PostgreSQL: 4 batchers, one
  connection each, so one batch gathers while another commits; SQLite: one batcher on one
  writer thread. (Until issue 30 this reference committed once per event, 300 events/s on
  PostgreSQL: no floor.) And
  *discard*, the bare endpoint: the limit of the HTTP stack (read the body, answer 200,
  store nothing),

the references served by uvicorn in its own process with one worker and the same options
(``--loop``/``--http``: uvicorn's event loop and HTTP parser; the intake runs its own
server, as users have it). Warm-up: not involved (nothing is sent).
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
import contextlib
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


#: ``(instance, message id, chat, status, time)`` of one event
Fields = tuple[str, str, str, str, datetime]
#: PostgreSQL: batchers (one connection each) of the durable reference
PG_BATCHERS = 4
#: events a batch holds at most
MAX_BATCH = 2000


def _sqlite_time(at: datetime) -> str:
    """``at`` as SQLAlchemy stores a UTC datetime in SQLite (naive, microseconds)."""
    return at.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


class RawReference:
    """A raw ASGI app: ``POST /webhooks/gateway/{secret}`` and ``GET /healthz``.

    ``batched`` (the durable reference, see the module docstring): each event waits in a
    queue, a batcher takes every event waiting, stores them and moves their deliveries in
    one transaction, commits, then answers every one of them 200 (group commit); else
    (``discard``) the body is read and thrown away.
    """

    def __init__(self, url: str, durable: bool, connections: int = PG_BATCHERS) -> None:
        self.url, self.durable, self.connections = url, durable, connections
        self.path = f"/webhooks/gateway/{SECRET}"
        self._queue: asyncio.Queue[tuple[Fields, asyncio.Future[None]]] | None = None
        self._sqlite: Any = None
        self._writer: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        self.batches = 0
        self.retries = 0

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
            assert self._queue is not None
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queue.put_nowait((fields, done))
            await done  # the 200 only once the batch holding this event committed
        await _answer(send, 200)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self.durable:
                    await self._open()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for task in self._tasks:
                    task.cancel()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _open(self) -> None:
        self._queue = asyncio.Queue()
        if self.url.startswith("sqlite"):
            import sqlite3
            from concurrent.futures import ThreadPoolExecutor

            path = self.url.split(":///", 1)[1]
            self._sqlite = sqlite3.connect(path, check_same_thread=False)
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=30000"):
                self._sqlite.execute(f"PRAGMA {pragma}")
            self._writer = ThreadPoolExecutor(1)  # SQLite has one writer: one batcher
            self._tasks.append(asyncio.create_task(self._batcher(None)))
            return
        import psycopg

        conninfo = self.url.replace("postgresql+psycopg://", "postgresql://", 1)
        for _ in range(self.connections):  # one batch gathers while another commits
            conn = await psycopg.AsyncConnection.connect(conninfo)
            self._tasks.append(asyncio.create_task(self._batcher(conn)))

    async def _batcher(self, conn: Any) -> None:
        """Take every event waiting (at least one), store them in one transaction, answer."""
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            while len(batch) < MAX_BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            fields = sorted((f for f, _ in batch), key=lambda f: f[1])  # rows locked in order
            try:
                if conn is not None:
                    await self._store_pg_retrying(conn, fields)
                else:
                    await loop.run_in_executor(self._writer, self._store_sqlite, fields)
            except Exception as exc:  # each waiting request answers the error
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            self.batches += 1
            for _, done in batch:
                if not done.done():
                    done.set_result(None)

    _PG_EVENTS = """
        INSERT INTO status_events
            (message_id, instance_id, chat, status, occurred_at, received_at, applied)
        SELECT e.mid, e.instance, e.chat, e.status, e.at, now(), true
        FROM unnest(%(mid)s::text[], %(instance)s::text[], %(chat)s::text[],
                    %(status)s::text[], %(at)s::timestamptz[])
            AS e(mid, instance, chat, status, at)
        ON CONFLICT (message_id, status) DO NOTHING
    """
    _PG_MOVE = """
        UPDATE deliveries AS d SET state = m.status,
            delivered_at = coalesce(d.delivered_at, m.delivered_at),
            read_at = CASE WHEN m.status = 'read' THEN coalesce(d.read_at, m.read_at) END
        FROM unnest(%(mid)s::text[], %(status)s::text[], %(delivered_at)s::timestamptz[],
                    %(read_at)s::timestamptz[]) AS m(mid, status, delivered_at, read_at)
        WHERE d.message_id = m.mid AND ((d.state || '') = ANY(%(before_read)s)
            OR (m.status = 'read' AND (d.state || '') = 'delivered'))
    """
    # ``d.state || ''``: the rows are found by message id alone. On a fresh campaign (no
    # statistics yet) the planner ANDed the message-id index with the state index,
    # reading every ``sent`` row's entry per event: about 200 events/s.

    async def _store_pg_retrying(self, conn: Any, fields: list[Fields]) -> None:
        """:meth:`_store_pg`, again when PostgreSQL chose this batch as a deadlock's victim
        (two batches' joins may lock shared index pages or rows in different orders)."""
        import psycopg

        for attempt in range(5):
            try:
                await self._store_pg(conn, fields)
                return
            except psycopg.errors.DeadlockDetected:
                if attempt == 4:
                    raise
                self.retries += 1

    async def _store_pg(self, conn: Any, fields: list[Fields]) -> None:
        moves = _furthest(fields)
        async with conn.transaction():  # one transaction, one commit, for the batch
            await conn.execute(
                self._PG_EVENTS,
                {
                    "mid": [f[1] for f in fields],
                    "instance": [f[0] for f in fields],
                    "chat": [f[2] for f in fields],
                    "status": [f[3] for f in fields],
                    "at": [f[4] for f in fields],
                },
            )
            await conn.execute(
                self._PG_MOVE,
                {
                    "mid": list(moves),
                    "status": [m[0] for m in moves.values()],
                    "delivered_at": [m[1] for m in moves.values()],
                    "read_at": [m[2] for m in moves.values()],
                    "before_read": list(_FROM["delivered"]),
                },
            )

    def _store_sqlite(self, fields: list[Fields]) -> None:
        con = self._sqlite
        now = _sqlite_time(datetime.now(UTC))
        before = _FROM["delivered"]
        marks = ",".join("?" * len(before))
        with con:  # one transaction, committed, for the batch
            con.executemany(
                "INSERT INTO status_events (message_id, instance_id, chat, status, occurred_at,"
                " received_at, applied) VALUES (?, ?, ?, ?, ?, ?, 1)"
                " ON CONFLICT (message_id, status) DO NOTHING",
                [
                    (mid, inst, chat, st, _sqlite_time(at), now)
                    for inst, mid, chat, st, at in fields
                ],
            )
            con.executemany(
                "UPDATE deliveries SET state = ?, delivered_at = coalesce(delivered_at, ?),"
                " read_at = CASE WHEN ? = 'read' THEN coalesce(read_at, ?) END"
                f" WHERE message_id = ? AND (+state IN ({marks}) OR (? = 'read' AND"
                " +state = 'delivered'))",  # unary +: found by message id alone
                [
                    (
                        status,
                        _sqlite_time(delivered) if delivered else None,
                        status,
                        _sqlite_time(read) if read else None,
                        mid,
                        *before,
                        status,
                    )
                    for mid, (status, delivered, read) in _furthest(fields).items()
                ],
            )


def _furthest(fields: list[Fields]) -> dict[str, tuple[str, datetime | None, datetime | None]]:
    """Per message id of a batch: its furthest status, when it was delivered (the earliest
    of its events) and read: one update per delivery row, as the forward-only rule wants."""
    out: dict[str, tuple[str, datetime | None, datetime | None]] = {}
    for _, mid, _, status, at in fields:
        old_status, delivered, read = out.get(mid, ("delivered", None, None))
        delivered = at if delivered is None else min(delivered, at)
        if status == "read":
            read = at if read is None else min(read, at)
        out[mid] = ("read" if read is not None else old_status, delivered, read)
    return out


def serve(kind: str, url: str, port_file: Path, loop: str, http: str) -> None:
    """Serve a reference or the gatecast app with uvicorn (one worker) until terminated."""
    import uvicorn

    app = RawReference(url, kind == "batched")
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


class IntakeServer(Server):
    """gatecast's intake as ``gatecast serve`` starts it: ``python -m
    gatecast.intake.supervisor`` (the supervisor holding the port, its handler process
    serving the webhook's fast path and batcher, a prepared spare), configured by the
    environment as a user's is; ``with IntakeServer(...) as port:``."""

    def __enter__(self) -> int:
        from gatecast.intake import supervisor as sup

        folder = self.tmp / "state"
        folder.mkdir(exist_ok=True)
        ready = self.tmp / "intake.ready"
        ready.unlink(missing_ok=True)
        env = {
            **os.environ,
            "GATECAST_DATABASE_URL": self.url,
            "GATECAST_WEBHOOK_SECRET": SECRET,
            "GATECAST_LOG_LEVEL": "warning",
        }
        cmd = [sys.executable, "-m", "gatecast.intake.supervisor", "--folder", str(folder)]
        cmd += ["--port", "0", "--ready-file", str(ready)]
        self.folder = folder
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise BenchError("the intake did not start")
            time.sleep(0.05)
        running = sup.running_intake(folder)
        if running is None:
            raise BenchError("the intake does not answer its control socket")
        return int(str(running["url"]).rsplit(":", 1)[1])

    def cpu_seconds(self) -> float:
        """CPU seconds of the supervisor and its handlers (the spare included)."""
        import psutil

        assert self.proc is not None
        top = psutil.Process(self.proc.pid)
        total = 0.0
        for p in [top, *top.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):  # a spare that stopped
                total += sum(p.cpu_times()[:2])  # user + system
        return total

    def __exit__(self, *exc: object) -> None:
        from gatecast.intake import supervisor as sup

        sup.request(self.folder, "stop", timeout=30)
        super().__exit__(*exc)


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
    first: int = 0,
) -> dict[str, Any]:
    """Post events ``first`` .. ``first + events - 1`` from ``procs`` processes; events/s
    and latency percentiles.

    ``rate`` runs from the first POST until ``applied()`` (polled once the last answer
    came) reaches ``target``, ``ack_rate`` until the last answer.
    """
    step = -(-events // procs)
    end = first + events
    with ProcessPoolExecutor(procs) as pool:
        futures = [
            pool.submit(post_range, port, campaign_id, lo, min(end, lo + step), threads)
            for lo in range(first, end, step)
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
        "events": events,
        "seconds": done - start,
        "ack_seconds": acked - start,
        "latencies": lat,
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
        "--rounds",
        type=int,
        default=4,
        help="rounds: each server gets a share of the events per round, in turn (default 4)",
    )
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
    parser.add_argument("--serve", choices=SERVERS[:2], help=argparse.SUPPRESS)
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
SERVERS = ("discard", "batched", "gatecast")


def _summed(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One server's rounds as one figure: events over the summed times, percentiles over
    every answer, CPU summed."""
    lat = sorted(x for r in rounds for x in r["latencies"])
    events = sum(r["events"] for r in rounds)
    seconds = sum(r["seconds"] for r in rounds)
    acked = sum(r["ack_seconds"] for r in rounds)

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")

    return {
        "rate": events / seconds,
        "ack_rate": events / acked,
        "apply_lag_ms": max(r["apply_lag_ms"] for r in rounds),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "cpu": sum(r["cpu"] for r in rounds),
    }


def _latency_and_cpu(figures: Figures, server: str, got: dict[str, Any], events: int) -> None:
    """A server's p50 and p99 acknowledgement latency and its CPU per event."""
    figures.add(f"{server}, p50 ack", got["p50_ms"], "ms")
    figures.add(f"{server}, p99 ack", got["p99_ms"], "ms")
    figures.add(f"{server}, CPU per event", got["cpu"] / events * 1e6, "us")


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
            rounds = max(1, min(args.rounds, events // 2))
            results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in SERVERS}
            try:
                with contextlib.ExitStack() as running:
                    servers = {
                        kind: (IntakeServer if kind == "gatecast" else Server)(
                            kind, url, tmp, args.loop, args.http
                        )
                        for kind in SERVERS
                    }
                    ports = {kind: running.enter_context(s) for kind, s in servers.items()}
                    for r in range(rounds):  # the servers in turn, so drifting load cancels
                        lo, hi = events * r // rounds, events * (r + 1) // rounds
                        for kind in SERVERS:
                            server = servers[kind]
                            waits = kind == "gatecast"
                            cpu0 = server.cpu_seconds()
                            base = count_applied() if waits else 0
                            got = blast(
                                ports[kind],
                                gc_cid if waits else ref_cid,
                                hi - lo,
                                args.procs,
                                args.threads,
                                applied=count_applied if waits else None,
                                target=base + hi - lo,
                                first=lo,
                            )
                            got["cpu"] = server.cpu_seconds() - cpu0
                            if got["failed"]:
                                raise BenchError(
                                    f"{kind}: {got['failed']} failed: {got['failures']}"
                                )
                            results[kind].append(got)
            finally:
                close_counter()
            counts = verify(url, [ref_cid, gc_cid])
        bare, ref, gc = (_summed(results[kind]) for kind in SERVERS)
        load = round(os.getloadavg()[0], 1)
        figures.add(
            "bare endpoint (raw ASGI, discard)",
            bare["rate"],
            "events/s",
            events=events,
            clients=clients,
            stack=stack,
            rounds=rounds,
            load=load,
        )
        _latency_and_cpu(figures, "bare endpoint", bare, events)
        durable = "durable reference (raw ASGI, group commit)"
        figures.add(durable, ref["rate"], "events/s", db=db_kind, batchers=args.pg and PG_BATCHERS)
        _latency_and_cpu(figures, "durable reference", ref, events)
        applied = "gatecast intake, applied"
        figures.add(applied, gc["rate"], "events/s", db=db_kind, warmup="n/a (no sends)")
        figures.add("gatecast intake, acknowledged", gc["ack_rate"], "events/s")
        figures.add("gatecast intake, last applied after last ack", gc["apply_lag_ms"], "ms")
        _latency_and_cpu(figures, "gatecast intake (supervisor + handlers)", gc, events)
        figures.add("events stored (both campaigns)", counts["status_events"], "events")
        figures.add("events applied (both campaigns)", counts["applied"], "events")
        figures.add("gatecast rows read", counts[f"rows_read_{gc_cid}"], "rows", of=rows)
        figures.ratio("gatecast / durable reference", gc["rate"], ref["rate"], goal=">= 0.8")
        figures.add("gatecast / bare endpoint", gc["rate"] / bare["rate"], "x")
        figures.add("durable reference / bare endpoint", ref["rate"] / bare["rate"], "x")
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
