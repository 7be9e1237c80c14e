"""Dispatch speed against the sandbox: ``python -m bench.dispatch [--rows N] [--full] [--pg]``.

One run measures, each against a fresh sandbox in its own process (``gatecast sandbox``,
so it never shares the GIL with the measured code):

- gatecast: a text campaign (pacing off) from ``start_campaign`` (materialisation
  included) until every delivery row is recorded ``sent``, with the dispatcher's
  default workers and batch size;
- the limit: a bare httpx loop sending the same requests (one sequential sync client,
  and N threads each with its own client; the best of the two is the reference);
- a naive hand loop, what a first script looks like: pandas over the spreadsheet,
  ``httpx.get`` per row (a new connection for every request: no client kept), each
  result written to SQLite with a commit per row (on ``--hand-rows`` rows). It is no
  limit, only a floor: the bare loops above are the reference the goal is judged by.

The sandbox's status events are pushed an hour into the future (``--status-delays``) so
no webhook traffic or event bookkeeping runs while sends are measured.

Default 20,000 recipients; ``--full`` is the issue's 100,000. The helpers here
(sandbox process, audience seeding, unpaced campaign, temp databases) are shared by
``bench.memory`` and ``bench.webhooks``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Connection, Engine, insert, update

from bench.common import BenchError, Figures, peak_rss_mb, report, stopwatch
from storage import tables

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
TOKEN = "sandbox-token"  # noqa: S105 (the local sandbox's default token)
LIST_NAME = "bench"
TEXT = "Hi {{ name }}, our November offer is live in {{ city }}. Reply STOP to opt out."
CITIES = ("London", "Berlin", "Paris", "Madrid", "Rome", "Lagos", "Mumbai", "Lima")
#: chunk of rows per executemany when seeding
SEED_CHUNK = 20_000


# --- helpers shared by the benchmarks ----------------------------------------------------


def phone(i: int) -> str:
    """The i-th distinct benchmark phone number (E.164, UK mobile shape)."""
    return f"+447{i:09d}"


def contact_name(i: int) -> str:
    """The i-th contact's name."""
    return f"Person {i}"


def rendered_text(i: int) -> str:
    """What :data:`TEXT` renders to for contact ``i`` (the bare and hand loops send this)."""
    return (
        f"Hi {contact_name(i)}, our November offer is live in {CITIES[i % len(CITIES)]}. "
        "Reply STOP to opt out."
    )


@contextlib.contextmanager
def database(tmp: Path, pg: bool, name: str = "bench") -> Iterator[str]:
    """A fresh database URL: an SQLite file in ``tmp``, or a temp PostgreSQL database."""
    if not pg:
        yield f"sqlite:///{tmp / (name + '.db')}"
        return
    import sqlalchemy as sa

    db = f"gatecast_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{db}"'))
    try:
        yield sa.engine.make_url(PG_ADMIN).set(database=db).render_as_string(False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()


def open_db(url: str) -> Engine:
    """An engine for ``url`` with the schema at head."""
    from storage.engine import make_engine, upgrade

    engine = make_engine(url)
    upgrade(engine)
    return engine


def gatecast_exe() -> str:
    """The ``gatecast`` console script of this interpreter's environment."""
    exe = Path(sys.executable).with_name("gatecast")
    if not exe.exists():
        raise BenchError(f"{exe} not found: install the project (make install)")
    return str(exe)


@contextlib.contextmanager
def sandbox_process(tmp: Path, *extra: str) -> Iterator[str]:
    """Run ``gatecast sandbox`` in its own process (auto-linking instances, status events
    an hour away); yields its URL and stops it afterwards."""
    ready = tmp / f"sandbox-{uuid.uuid4().hex[:6]}.url"
    log_path = tmp / (ready.stem + ".log")
    cmd = [
        gatecast_exe(),
        "sandbox",
        "--port",
        "0",
        "--auto-link",
        "--status-delays",
        "3600,3600,3600",
        "--ready-file",
        str(ready),
        *extra,
    ]
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while not ready.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise BenchError(f"sandbox did not start: {log_path.read_text()[-2000:]}")
                time.sleep(0.05)
            yield ready.read_text().strip()
        finally:
            stop_process(proc, 10)


def stop_process(proc: subprocess.Popen[Any], wait: float) -> None:
    """SIGTERM ``proc``; SIGKILL when it has not exited after ``wait`` seconds."""
    proc.terminate()
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def linked_instance(url: str) -> str:
    """Create an instance on an auto-linking sandbox; its id."""
    from gateway.client import GatewayClient

    with GatewayClient(url, TOKEN, timeout=10.0) as gw:
        return gw.create_instance()


def _bulk_insert(conn: Connection, table: str, columns: Sequence[str], rows: list[Any]) -> None:
    """Driver-level executemany of ready tuples (no per-row SQLAlchemy type processing);
    on PostgreSQL one INSERT over ``unnest``-ed column arrays (an executemany runs one
    statement per row, and the counting triggers would fire for each)."""
    if conn.dialect.name == "postgresql" and rows:
        table_ = tables.deliveries.metadata.tables[table]
        types = [table_.c[c].type.compile(conn.dialect) for c in columns]
        conn.exec_driver_sql(
            f"INSERT INTO {table} ({', '.join(columns)}) "
            f"SELECT * FROM unnest({', '.join(f'%s::{t}[]' for t in types)})",
            tuple(list(col) for col in zip(*rows, strict=True)),
        )
        return
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    marks = ", ".join([mark] * len(columns))
    conn.exec_driver_sql(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)


def _db_time(conn: Connection, at: datetime | None) -> Any:
    """``at`` as the driver takes it: naive UTC text on SQLite (what ``UTCDateTime``
    stores), the aware datetime on PostgreSQL."""
    if at is None or conn.dialect.name != "sqlite":
        return at
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def new_list(conn: Connection, name: str, t: Any) -> int:
    """A new contact list ``name`` created at ``t`` (as :func:`_db_time` gives it); its id."""
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    list_id: int = conn.exec_driver_sql(
        f"INSERT INTO lists (name, description, created_at) VALUES ({mark}, '', {mark}) "
        "RETURNING id",
        (name, t),
    ).scalar_one()
    return list_id


def seed_audience(engine: Engine, rows: int, list_name: str = LIST_NAME) -> None:
    """``rows`` contacts (ids 1..rows) in one list, bulk-inserted at the driver level."""
    from storage.types import utcnow

    now = utcnow()
    with engine.begin() as conn:
        t = _db_time(conn, now)
        list_id = new_list(conn, list_name, t)
        cols: tuple[str, ...] = ("id", "phone", "raw_phone", "name", "attributes")
        cols = (*cols, "opted_out", "created_at", "updated_at")
        for lo in range(0, rows, SEED_CHUNK):
            ids = range(lo + 1, min(rows, lo + SEED_CHUNK) + 1)
            _bulk_insert(
                conn,
                "contacts",
                cols,
                [
                    (
                        i,
                        phone(i),
                        phone(i),
                        contact_name(i),
                        f'{{"city": "{CITIES[i % len(CITIES)]}"}}',
                        False,
                        t,
                        t,
                    )
                    for i in ids
                ],
            )
            _bulk_insert(
                conn,
                "list_members",
                ("list_id", "contact_id", "added_at"),
                [(list_id, i, t) for i in ids],
            )
        if conn.dialect.name == "postgresql":  # explicit ids: move the sequence past them
            conn.exec_driver_sql(
                "SELECT setval(pg_get_serial_sequence('contacts', 'id'), "
                "(SELECT MAX(id) FROM contacts))"
            )


def create_campaign_for(engine: Engine, instance_id: str, list_name: str = LIST_NAME) -> int:
    """A scheduled text campaign to ``list_name`` through one sender (call :func:`unpace`
    after starting it)."""
    from campaigns.campaign_file import parse_campaign
    from campaigns.service import create_campaign
    from storage.queries import instances as iq
    from storage.types import utcnow

    with engine.begin() as conn:  # gatecast's record of the sender (create checks it)
        iq.ensure(conn, [instance_id], now=utcnow())
    spec = parse_campaign(
        {
            "name": "bench",
            "list": list_name,
            "instances": [instance_id],
            "message": {"type": "text", "text": TEXT},
            "schedule": {"timezone": "UTC"},
            "pace": {"per_minute": 60, "delay_seconds": [0, 0]},
            "retry": {"max_attempts": 4},
        }
    )
    return create_campaign(engine, spec).id


def unpace(engine: Engine, campaign_id: int) -> None:
    """Turn the pacing of a started campaign off (``per_minute = 0``, no delay, no cap).

    A campaign file cannot say "unpaced" (``per_minute`` must be > 0 and materialisation
    re-validates the file), but the dispatcher's policy has an unpaced mode: it is set
    on the stored spec after materialisation, as the scheduler's own tests do.
    """
    from sqlalchemy import select

    campaigns = tables.campaigns
    with engine.begin() as conn:
        stored = dict(
            conn.execute(select(campaigns.c.spec).where(campaigns.c.id == campaign_id)).scalar_one()
        )
        stored["pace"] = {"per_minute": 0, "delay_seconds": [0, 0], "daily_cap": None}
        conn.execute(update(campaigns).where(campaigns.c.id == campaign_id).values(spec=stored))


def seed_campaign(
    engine: Engine,
    rows: int,
    *,
    state: str | None = None,
    with_contacts: bool = True,
    name: str = "bench",
) -> int:
    """A finished-looking campaign with ``rows`` delivery rows, bulk-inserted.

    Row ``i`` targets :func:`phone` ``(i)`` (contact ``i`` when ``with_contacts``) with
    message id ``BENCH<campaign>-<i>``. ``state`` fixes every row's state (``sent`` for
    the webhook benchmark); by default a realistic mix of read, delivered, sent, failed.
    """
    from campaigns.campaign_file import parse_campaign
    from storage.types import utcnow

    campaigns = tables.campaigns
    spec = parse_campaign(
        {
            "name": name,
            "list": LIST_NAME,
            "instances": ["BENCH1"],
            "message": {"type": "text", "text": TEXT},
        }
    )
    now = utcnow()
    mix = ("read", "read", "read", "delivered", "delivered", "sent", "failed", "read")
    cols = (
        "campaign_id",
        "target",
        "target_kind",
        "contact_id",
        "sender",
        "state",
        "attempts",
        "due_at",
        "message_id",
        "content",
        "error",
        "error_code",
        "queued_at",
        "sent_at",
        "delivered_at",
        "read_at",
        "failed_at",
    )
    with engine.begin() as conn:
        cid = int(
            conn.execute(
                insert(campaigns)
                .values(
                    name=name,
                    state="completed" if state is None else "running",
                    spec=spec.model_dump(mode="json"),
                    message_type="text",
                    timezone="UTC",
                    start_at=now,
                    created_at=now,
                    updated_at=now,
                )
                .returning(campaigns.c.id)
            ).scalar_one()
        )
        t_now = _db_time(conn, now)
        # an hour of send times, each with its delivered / read times
        times = [
            (
                _db_time(conn, now + timedelta(seconds=s)),
                _db_time(conn, now + timedelta(seconds=s + 2)),
                _db_time(conn, now + timedelta(seconds=s + 30)),
            )
            for s in range(3600)
        ]
        for lo in range(0, rows, SEED_CHUNK):
            batch = []
            for i in range(lo + 1, min(rows, lo + SEED_CHUNK) + 1):
                st = state or mix[i % len(mix)]
                sent_at, delivered_at, read_at = times[i % 3600]
                failed = st == "failed"
                batch.append(
                    (
                        cid,
                        phone(i),
                        "phone",
                        i if with_contacts else None,
                        "BENCH1",
                        st,
                        1,
                        t_now,
                        f"BENCH{cid}-{i}",
                        json.dumps({"type": "text", "text": rendered_text(i)}),
                        "failed by the gateway (code 404)" if failed else None,
                        "404" if failed else None,
                        t_now,
                        sent_at,
                        delivered_at if st in ("delivered", "read") else None,
                        read_at if st == "read" else None,
                        sent_at if failed else None,
                    )
                )
            _bulk_insert(conn, "deliveries", cols, batch)
    return cid


def run_gatecast_campaign(
    engine: Engine, url: str, instance_id: str, *, workers: int, batch_size: int
) -> dict[str, Any]:
    """Create, start (materialise) and dispatch an unpaced campaign to the end.

    Returns seconds for creation, materialisation and sending, and the final counts.
    """
    from gateway.client import GatewayClient
    from scheduler.dispatcher import Dispatcher
    from scheduler.starts import start_campaign
    from storage.queries.tallies import delivery_counts
    from storage.types import utcnow

    with stopwatch() as t_create:
        cid = create_campaign_for(engine, instance_id)
    with stopwatch() as t_start:
        started = start_campaign(engine, cid, now=utcnow(), enforce_grace=False)
    if started.outcome != "started":
        raise BenchError(f"campaign {cid} did not start: {started.outcome} {started.detail}")
    unpace(engine, cid)

    def client() -> GatewayClient:
        return GatewayClient(url, TOKEN, timeout=30.0)

    with (
        stopwatch() as t_send,
        Dispatcher(
            engine, client, workers=workers, batch_size=batch_size, campaign_ids=[cid]
        ) as dispatcher,
    ):
        dispatcher.run(until_done=True)
    with engine.connect() as conn:
        counts = delivery_counts(conn, cid)
    return {
        "campaign_id": cid,
        "create_s": t_create[0],
        "materialise_s": t_start[0],
        "send_s": t_send[0],
        "queued": started.queued,
        "counts": {k: v for k, v in counts.items() if v},
    }


# --- the three contenders ------------------------------------------------------------------


def _requests(url: str, instance_id: str, rows: int) -> list[dict[str, str]]:
    """Query parameters of every send, exactly as the gateway client builds them."""
    from gateway.messages import Text
    from gateway.requests import build_send

    out = []
    for i in range(1, rows + 1):
        req = build_send(instance_id, phone(i), Text(text=rendered_text(i)))
        out.append({**req.params, "access_token": TOKEN})
    return out


def _accepted(response: httpx.Response) -> bool:
    if response.status_code != 200:
        return False
    doc = response.json()
    message = doc.get("message") if isinstance(doc, dict) else None
    return isinstance(message, dict) and bool(message.get("key", {}).get("id"))


def bare_sequential(url: str, params: list[dict[str, str]]) -> float:
    """One sync httpx client sending every request in turn; seconds."""
    bad = 0
    with stopwatch() as t, httpx.Client(base_url=f"{url}/api/", timeout=30.0) as client:
        for p in params:
            if not _accepted(client.get("send", params=p)):
                bad += 1
    if bad:
        raise BenchError(f"bare sequential loop: {bad} sends were not accepted")
    return t[0]


def bare_threads(url: str, params: list[dict[str, str]], threads: int) -> float:
    """``threads`` threads, each with its own sync client, sharing one queue; seconds."""
    lock = threading.Lock()
    position = 0
    bad = 0

    def worker() -> None:
        nonlocal position, bad
        with httpx.Client(base_url=f"{url}/api/", timeout=30.0) as client:
            while True:
                with lock:
                    i = position
                    position += 1
                if i >= len(params):
                    return
                if not _accepted(client.get("send", params=params[i])):
                    with lock:
                        bad += 1

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    with stopwatch() as t:
        for th in pool:
            th.start()
        for th in pool:
            th.join()
    if bad:
        raise BenchError(f"bare threaded loop: {bad} sends were not accepted")
    return t[0]


def write_spreadsheet(path: Path, rows: int) -> None:
    """The users' spreadsheet: name, phone, city."""
    with path.open("w", encoding="utf-8") as fh:
        fh.write("name,phone,city\n")
        for i in range(1, rows + 1):
            fh.write(f"{contact_name(i)},{phone(i)},{CITIES[i % len(CITIES)]}\n")


def hand_loop(url: str, instance_id: str, sheet: Path, db_path: Path) -> tuple[float, int]:
    """A naive hand loop: pandas rows, ``httpx.get`` each (a new connection per request),
    a SQLite commit per result.

    Returns (seconds, rows sent).
    """
    import pandas as pd

    with stopwatch() as t:
        df = pd.read_csv(sheet, dtype=str)
        con = sqlite3.connect(db_path)
        con.execute(
            "CREATE TABLE IF NOT EXISTS results (phone TEXT, status TEXT, message_id TEXT, "
            "error TEXT, sent_at TEXT)"
        )
        for _, row in df.iterrows():
            text = (
                f"Hi {row['name']}, our November offer is live in {row['city']}. "
                "Reply STOP to opt out."
            )
            try:
                r = httpx.get(
                    f"{url}/api/send",
                    params={
                        "number": row["phone"].lstrip("+"),
                        "type": "text",
                        "message": text,
                        "instance_id": instance_id,
                        "access_token": TOKEN,
                    },
                    timeout=30,
                )
                data = r.json()
                mid = data["message"]["key"]["id"]
                con.execute(
                    "INSERT INTO results VALUES (?, 'sent', ?, NULL, datetime('now'))",
                    (row["phone"], mid),
                )
            except Exception as exc:
                con.execute(
                    "INSERT INTO results VALUES (?, 'failed', NULL, ?, datetime('now'))",
                    (row["phone"], str(exc)),
                )
            con.commit()
        con.close()
    with sqlite3.connect(db_path) as con:
        sent = int(con.execute("SELECT COUNT(*) FROM results WHERE status='sent'").fetchone()[0])
    return t[0], sent


# --- main ----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=20_000, help="recipients (default 20,000)")
    parser.add_argument("--full", action="store_true", help="100,000 recipients")
    parser.add_argument("--hand-rows", type=int, default=500, help="rows of the hand loop")
    parser.add_argument("--threads", type=int, default=4, help="threads of the bare loop")
    parser.add_argument("--workers", type=int, default=4, help="dispatcher send workers")
    parser.add_argument("--batch", type=int, default=256, help="dispatcher batch size")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL instead of SQLite")
    args = parser.parse_args()
    rows = 100_000 if args.full else args.rows
    figures = Figures.begin("dispatch")
    return report(figures, lambda: measure(args, rows, figures))


def measure(args: argparse.Namespace, rows: int, figures: Figures) -> None:
    """The three contenders, one after the other, each against a fresh sandbox."""
    hand_rows = min(rows, args.hand_rows)
    db_kind = "postgresql" if args.pg else "sqlite"
    with tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir:
        tmp = Path(tmpdir)
        # gatecast
        with database(tmp, args.pg) as url, sandbox_process(tmp) as sb_url:
            engine = open_db(url)
            iid = linked_instance(sb_url)
            seed_audience(engine, rows)
            cpu0 = time.process_time()
            run = run_gatecast_campaign(
                engine, sb_url, iid, workers=args.workers, batch_size=args.batch
            )
            gc_cpu = time.process_time() - cpu0
            engine.dispose()
        if run["counts"].get("sent") != rows:
            raise BenchError(f"not every row was recorded sent: {run['counts']}")
        total_s = run["materialise_s"] + run["send_s"]
        gc_rate = rows / total_s
        figures.add("gatecast start to all recorded", gc_rate, "msg/s", rows=rows, db=db_kind)
        figures.add("gatecast materialise", run["materialise_s"], "s", rows=rows)
        figures.add("gatecast dispatch only", rows / run["send_s"], "msg/s", rows=rows)
        # the limit
        with sandbox_process(tmp) as sb_url:
            params = _requests(sb_url, linked_instance(sb_url), rows)
            seq_s = bare_sequential(sb_url, params)
        with sandbox_process(tmp) as sb_url:
            params = _requests(sb_url, linked_instance(sb_url), rows)
            cpu0 = time.process_time()
            thr_s = bare_threads(sb_url, params, args.threads)
            thr_cpu = time.process_time() - cpu0
        seq_rate, thr_rate = rows / seq_s, rows / thr_s
        figures.add("bare httpx, 1 sequential client", seq_rate, "msg/s", rows=rows)
        figures.add(f"bare httpx, {args.threads} threads", thr_rate, "msg/s", rows=rows)
        best = max(seq_rate, thr_rate)
        # CPU of the measuring process (all threads): what the code costs, whatever the load
        figures.add("gatecast CPU per message", gc_cpu / rows * 1e6, "us", rows=rows)
        figures.add(
            f"bare httpx, {args.threads} threads, CPU per message",
            thr_cpu / rows * 1e6,
            "us",
            rows=rows,
        )
        # by hand
        sheet = tmp / "contacts.csv"
        write_spreadsheet(sheet, hand_rows)
        with sandbox_process(tmp) as sb_url:
            hand_s, hand_sent = hand_loop(sb_url, linked_instance(sb_url), sheet, tmp / "h.db")
        if hand_sent != hand_rows:
            raise BenchError(f"hand loop sent {hand_sent} of {hand_rows}")
        hand_rate = hand_rows / hand_s
        figures.add(
            "naive hand loop (pandas, new connection + commit per row)",
            hand_rate,
            "msg/s",
            rows=hand_rows,
        )
        figures.ratio("gatecast / bare loop (best)", gc_rate, best, goal=">= 0.8")
        figures.ratio("gatecast / naive hand loop", gc_rate, hand_rate, goal="> 1")
        figures.add("peak RSS (bench process)", peak_rss_mb(), "MB")


if __name__ == "__main__":
    raise SystemExit(main())
