"""Dispatch as history grows: ``python -m bench.history [--events N] [--rows R] [--full]``.

Two databases per kind (SQLite and PostgreSQL, ``--db``), with the same contacts and
sender: one with no history, one with ``--events`` status events of an earlier campaign
through the same sender (``sent``, ``delivered``, ``read`` per message, one in a hundred
``failed`` with an error code, each applied to its delivery row and received ten days
ago, so within the default retention: kept), plus paused senders with old error-463
events (the ban-signal check's own history). On each, a text campaign of ``--rows``
recipients is started and dispatched to the end (pacing off, the dispatcher's default
workers and batch) against an in-process gateway stand-in that accepts at once, so the
figure is gatecast's own work, while the receiver runs and events arrive as users have
them: each database has gatecast's intake running (``bench.webhooks.IntakeServer``: the
supervisor and handler ``serve`` starts, its inbox applying events) and, during every
run, ``delivered``/``read`` events of a live campaign of 20,000 sent rows posted to it
at ``--event-rate`` a second (default 50), the same rate in every run of both databases:
each run's arrivals are counted and the bench fails when one fell short of the rate
(the comparison would then not be under the same events); warm-up as users have it for the numbers
they bring (``bench.common.warmup_as_users``). The runs alternate (empty then history,
history then empty, ...) and the best of each counts.

The reference is the run without history, in the same run: the goal is dispatch with
history >= 0.95x dispatch without (issue 17). Default 1,000,000 events; ``--full`` is the
issue's 10,000,000.

``--keep`` (PostgreSQL) keeps both databases after the run, named after the event count,
and a later ``--keep`` run with the same count reuses them instead of seeding again
(seeding 10M takes minutes); ``--drop-kept`` drops them at the end. ``--profile`` prints,
per database, the dispatch's statements by total time (``before``/``after_cursor_execute``)
and the WAL bytes written and buffers read/hit per message.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event, insert, text, update

from bench.claim_cost import Accepting, pg_available
from bench.common import (
    WARMUP_AS_USERS,
    BenchError,
    Figures,
    report,
    stopwatch,
    warmup_as_users,
)
from bench.dispatch import (
    PG_ADMIN,
    create_campaign_for,
    database,
    open_db,
    phone,
    seed_audience,
    seed_campaign,
    unpace,
)
from storage import tables

SENDER = "HIST0001"
CHUNK = 50_000


def seed_history(engine: Engine, events: int) -> None:
    """``events`` applied status events (three per message) of an earlier campaign through
    :data:`SENDER`, with its delivery rows, received ten days ago; and 20 paused senders
    whose error-463 events came before their pause."""
    from storage.queries import events as eq
    from storage.queries import instances as iq
    from storage.types import utcnow

    now = utcnow()
    messages = max(1, events // 3)
    cid = seed_campaign(engine, messages, with_contacts=False, name="history")
    with engine.begin() as conn:
        conn.execute(
            update(tables.deliveries)
            .where(tables.deliveries.c.campaign_id == cid)
            .values(sender=SENDER)
        )
    received = now - timedelta(days=10)
    statuses = ("sent", "delivered", "read")
    done = 0
    while done < events:
        rows: list[dict[str, Any]] = []
        for k in range(done, min(events, done + CHUNK)):
            i, s = divmod(k, 3)
            failed = s == 2 and i % 100 == 0
            rows.append(
                {
                    "message_id": f"BENCH{cid}-{i % messages + 1}",
                    "instance_id": SENDER,
                    "chat": phone(i % messages + 1),
                    "status": "failed" if failed else statuses[s],
                    "error_code": "131026" if failed else None,
                    "occurred_at": received,
                    "received_at": received + timedelta(microseconds=k),
                    "applied": True,
                }
            )
        with engine.begin() as conn:
            eq.insert_status_events(conn, rows)
        done += len(rows)
    banned = [f"BANNED{i:02d}" for i in range(20)]
    with engine.begin() as conn:
        iq.ensure(conn, banned, now=now)
        conn.execute(
            insert(tables.status_events),
            [
                {
                    "message_id": f"BAN-{b}",
                    "instance_id": b,
                    "chat": None,
                    "status": "failed",
                    "error_code": "463",
                    "occurred_at": received,
                    "received_at": received,
                    "applied": True,
                }
                for b in banned
            ],
        )
        for b in banned:
            iq.pause(conn, b, "error 463", now=received + timedelta(seconds=1))
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("ANALYZE status_events, deliveries, instances")


LIVE_ROWS = 20_000  # rows of the live campaign the arriving events are about


class Feeder:
    """Status events arriving while a run dispatches: ``delivered`` and ``read`` of the
    live campaign's rows (:data:`LIVE_ROWS`), posted one per request to the database's
    intake at ``rate`` a second in all from :data:`CONNECTIONS` keep-alive connections
    (a gateway posts concurrently; each POST waits for its batch's commit), wrapping
    around (later rounds are duplicates, which the intake deduplicates).

    The schedule is open-loop: event *n* is due ``n / rate`` seconds after the run began,
    and a connection behind its schedule posts at once, so a run's arrivals reach ``rate``
    unless the intake cannot take them that fast. Each run's arrivals are recorded
    (:attr:`runs`): the comparison is fair only when every run of both databases got the
    same rate (:func:`held_equal`)."""

    CONNECTIONS = 8

    def __init__(self, port: int, campaign_id: int, rate: float) -> None:
        import threading

        self.port, self.campaign_id, self.rate = port, campaign_id, rate
        self.k = 0
        self.posted = 0
        self.seconds = 0.0
        #: (events posted, seconds) of each run
        self.runs: list[tuple[int, float]] = []
        self._base = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def flowing(self) -> Iterator[None]:
        import threading

        stop = threading.Event()
        start = time.perf_counter()
        self._base = self.posted
        threads = [
            threading.Thread(target=self._run, args=(stop, start), daemon=True)
            for _ in range(self.CONNECTIONS)
        ]
        for thread in threads:
            thread.start()
        try:
            yield
        finally:
            stop.set()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - start
            self.seconds += elapsed
            self.runs.append((self.posted - self._base, elapsed))

    def _run(self, stop: Any, start: float) -> None:
        import http.client

        from bench.webhooks import SECRET as HOOK_SECRET
        from bench.webhooks import event_body

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        path = f"/webhooks/gateway/{HOOK_SECRET}"
        at = int(time.time())
        while not stop.is_set():
            with self._lock:  # the next event, due at its place in the schedule
                k, self.k = self.k, self.k + 1
                due = start + (self.posted - self._base) / self.rate
                self.posted += 1
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            body = event_body(self.campaign_id, k % (2 * LIVE_ROWS), at)
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                raise BenchError(f"the intake answered {resp.status}")
        conn.close()


def live_campaign(engine: Engine) -> int:
    """The campaign the arriving events are about: :data:`LIVE_ROWS` rows ``sent``, their
    sender connected (the webhook hears only instances gatecast holds)."""
    from bench.webhooks import INSTANCE
    from storage.queries import instances as iq
    from storage.types import utcnow

    cid = seed_campaign(engine, LIVE_ROWS, state="sent", with_contacts=False, name="live")
    with engine.begin() as conn:
        iq.mark_state(conn, INSTANCE, "connected", now=utcnow())
        iq.ensure(conn, [SENDER], now=utcnow())
    return cid


def dispatch_once(
    engine: Engine, rows: int, workers: int, batch: int, profile: Profile | None = None
) -> float:
    """Start a campaign of ``rows`` recipients through :data:`SENDER`, dispatch it to the
    end; messages per second of the dispatch (materialisation excluded)."""
    from scheduler.dispatcher import Dispatcher
    from scheduler.starts import start_campaign
    from storage.queries.tallies import delivery_counts
    from storage.types import utcnow

    cid = create_campaign_for(engine, SENDER)
    started = start_campaign(engine, cid, now=utcnow(), enforce_grace=False)
    if started.outcome != "started":
        raise BenchError(f"campaign {cid} did not start: {started.outcome} {started.detail}")
    unpace(engine, cid)
    with (
        profile.attached() if profile else contextlib.nullcontext(),
        stopwatch() as t,
        Dispatcher(
            engine, Accepting, workers=workers, batch_size=batch, campaign_ids=[cid]
        ) as dispatcher,
    ):
        dispatcher.run(until_done=True)
    with engine.connect() as conn:
        sent = delivery_counts(conn, cid)["sent"]
    if sent != rows:
        raise BenchError(f"{sent} of {rows} rows recorded sent")
    return rows / t[0]


KEPT = "gatecast_bench_history"  # --keep: gatecast_bench_history_<events> and _empty


@contextlib.contextmanager
def kept_database(name: str, drop: bool) -> Iterator[tuple[str, bool]]:
    """A named PostgreSQL database kept after the run (``--keep``): its URL and whether it
    existed already; dropped at the end only when ``drop``."""
    import sqlalchemy as sa

    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        existed = conn.execute(
            sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
        ).first()
        if not existed:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield sa.engine.make_url(PG_ADMIN).set(database=name).render_as_string(False), bool(existed)
    finally:
        if drop:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _seeded(engine: Engine) -> bool:
    """Whether :func:`seed_history` finished on this database (its last step pauses the
    banned senders, in one transaction)."""
    with engine.connect() as conn:
        n = conn.execute(
            text(
                "SELECT count(*) FROM instances"
                " WHERE instance_id LIKE 'BANNED%' AND paused_at IS NOT NULL"
            )
        ).scalar_one()
    return bool(n == 20)


def _has_contacts(engine: Engine, rows: int) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(text("SELECT count(*) FROM contacts")).scalar_one() >= rows)


class Profile:
    """Time per statement text of everything run on ``engine`` while attached, and on
    PostgreSQL the WAL written and the buffers read and hit (cluster and database wide)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.time: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._t0: dict[int, float] = {}
        self.io: dict[str, float] = {}

    @staticmethod
    def _shape(statement: str) -> str:
        import re

        s = re.sub(r"%\(\w+\)s|\$\d+|\?", "?", statement)
        s = re.sub(r"\?(, \?)+", "?...", s)
        return " ".join(s.split())

    def _before(self, conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        self._t0[id(cursor)] = time.perf_counter()

    def _after(self, conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        key = self._shape(statement)
        self.time[key] += time.perf_counter() - self._t0.pop(id(cursor), time.perf_counter())
        self.calls[key] += 1

    def _io(self) -> dict[str, float]:
        if self.engine.dialect.name != "postgresql":
            return {}
        self.engine.dispose()  # a closing backend flushes its statistics
        time.sleep(1.1)
        with self.engine.connect() as conn:
            conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
            row = conn.exec_driver_sql(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0'),"
                " (SELECT wal_fpi FROM pg_stat_wal),"
                " (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter),"
                " blks_read, blks_hit FROM pg_stat_database WHERE datname = current_database()"
            ).one()
            out = dict(
                zip(
                    ("wal_bytes", "wal_fpi", "checkpoints", "blks_read", "blks_hit"),
                    row,
                    strict=True,
                )
            )
            for name, read, hit in conn.exec_driver_sql(
                "SELECT indexrelname, idx_blks_read, idx_blks_hit FROM pg_statio_user_indexes"
                " WHERE relname IN ('deliveries', 'status_events')"
                " UNION ALL SELECT relname || ' (heap)', heap_blks_read, heap_blks_hit"
                " FROM pg_statio_user_tables WHERE relname IN ('deliveries', 'status_events')"
            ):
                out[f"read {name}"] = read or 0
                out[f"hit {name}"] = hit or 0
        return {k: float(v) for k, v in out.items()}

    @contextlib.contextmanager
    def attached(self) -> Iterator[None]:
        before = self._io()
        event.listen(self.engine, "before_cursor_execute", self._before)
        event.listen(self.engine, "after_cursor_execute", self._after)
        try:
            yield
        finally:
            event.remove(self.engine, "before_cursor_execute", self._before)
            event.remove(self.engine, "after_cursor_execute", self._after)
        after = self._io()
        for k, v in after.items():
            self.io[k] = self.io.get(k, 0.0) + v - before.get(k, 0.0)

    def print(self, name: str, messages: int, top: int = 12) -> None:
        """The ``top`` statements by total time, and the I/O per message, as JSON lines."""
        for key in sorted(self.time, key=self.time.__getitem__, reverse=True)[:top]:
            print(
                json.dumps(
                    {
                        "bench": "history",
                        "profile": name,
                        "ms_total": round(self.time[key] * 1000, 1),
                        "calls": self.calls[key],
                        "ms_per_call": round(self.time[key] * 1000 / self.calls[key], 3),
                        "statement": key[:300],
                    }
                ),
                flush=True,
            )
        per_msg = {k: round(v / messages, 3) for k, v in self.io.items() if v}
        print(json.dumps({"bench": "history", "profile": name, "per_message": per_msg}))


def run_db(kind: str, args: argparse.Namespace, events: int, figures: Figures) -> None:
    """Both databases of one kind, alternating runs; the figures and the ratio."""
    pg = kind == "postgresql"
    keep = pg and args.keep
    with contextlib.ExitStack() as stack:
        tmpdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gatecast-bench-")))
        if keep:
            empty_url, _ = stack.enter_context(kept_database(f"{KEPT}_empty", args.drop_kept))
            history_url, _ = stack.enter_context(kept_database(f"{KEPT}_{events}", args.drop_kept))
        else:
            empty_url = stack.enter_context(database(tmpdir, pg, "empty"))
            history_url = stack.enter_context(database(tmpdir, pg, "history"))
        engines = {"empty": open_db(empty_url), "history": open_db(history_url)}
        runs = args.rounds
        # a kept database's next run sends to the slices after its earlier runs' ones
        offset = 0
        for engine in engines.values():
            if keep and _has_contacts(engine, 1):
                with engine.connect() as conn:
                    offset = max(
                        offset,
                        conn.execute(
                            text("SELECT count(*) FROM campaigns WHERE name = 'bench'")
                        ).scalar_one(),
                    )
        for engine in engines.values():
            if not _has_contacts(engine, args.rows * (offset + runs)):
                if keep and _has_contacts(engine, 1):
                    raise BenchError("a kept database has too few contacts: --drop-kept it")
                seed_audience(engine, args.rows * (offset + runs + 20 * keep))
        if keep and _seeded(engines["history"]):
            figures.add(f"reused {events:,} events of history", 0, "s", db=kind)
        else:
            with stopwatch() as t_seed:
                seed_history(engines["history"], events)
            figures.add(f"seeding {events:,} events of history", t_seed[0], "s", db=kind)
        profiles = {name: Profile(engine) for name, engine in engines.items()}
        from bench.webhooks import IntakeServer

        feeders: dict[str, Feeder] = {}
        for name, engine in engines.items():  # the receiver running, events arriving
            live = live_campaign(engine)
            warmup_as_users(engine, [SENDER])
            folder = tmpdir / f"intake-{name}"
            folder.mkdir()
            url = empty_url if name == "empty" else history_url
            port = stack.enter_context(IntakeServer("gatecast", url, folder, "auto", "auto"))
            feeders[name] = Feeder(port, live, args.event_rate)
        # each run sends to its own slice of the list: a list per run
        best: dict[str, float] = {}
        for r in range(runs):
            order = list(engines.items())
            for name, engine in order if r % 2 == 0 else order[::-1]:
                _use_slice(engine, offset + r, args.rows)
                with feeders[name].flowing():
                    rate = dispatch_once(
                        engine,
                        args.rows,
                        args.workers,
                        args.batch,
                        profiles[name] if args.profile else None,
                    )
                best[name] = max(best.get(name, 0.0), rate)
        for engine in engines.values():
            engine.dispose()
    if args.profile:
        for name, profile in profiles.items():
            profile.print(f"{kind} {name}", args.rows * runs)
    for name, feeder in feeders.items():
        rates = [n / seconds for n, seconds in feeder.runs]
        figures.add(
            f"events arriving during dispatch ({name})",
            feeder.posted / feeder.seconds,
            "events/s",
            db=kind,
            target=args.event_rate,
            runs=[round(r, 1) for r in rates],
        )
    figures.add(
        "dispatch, no history",
        best["empty"],
        "msg/s",
        db=kind,
        rows=args.rows,
        warmup=WARMUP_AS_USERS,
        load=round(os.getloadavg()[0], 1),
    )
    figures.add(
        f"dispatch, {events:,} events of history",
        best["history"],
        "msg/s",
        db=kind,
        rows=args.rows,
    )
    figures.ratio(
        f"dispatch with {events:,} events / without ({kind}; "
        f"events arriving at {args.event_rate:g}/s in both)",
        best["history"],
        best["empty"],
        goal=">= 0.95",
    )
    held_equal(feeders, args.event_rate)


#: a run's arrivals may fall this far below ``--event-rate`` (the last connections'
#: in-flight POSTs at the end of a run) and still count as the same rate
RATE_TOLERANCE = 0.05


def held_equal(feeders: dict[str, Feeder], rate: float) -> None:
    """:class:`BenchError` unless every run of every database got events at ``rate``
    (within :data:`RATE_TOLERANCE`): a database that got fewer events would be compared
    with less work beside its dispatch (issue 30: the history database's runs once got
    twice the empty one's)."""
    short = [
        f"{name} run {i + 1}: {n / seconds:.1f}/s"
        for name, feeder in feeders.items()
        for i, (n, seconds) in enumerate(feeder.runs)
        if n / seconds < rate * (1 - RATE_TOLERANCE)
    ]
    if short:
        raise BenchError(
            f"events did not arrive at --event-rate {rate:g}/s in every run ("
            + ", ".join(short)
            + "): the databases were not compared under the same events; "
            "run again with a lower --event-rate"
        )


def _use_slice(engine: Engine, run: int, rows: int) -> None:
    """Keep in the campaign list only the contacts of ``run``'s slice (each run sends to
    people no earlier run sent to, so no row is a duplicate target)."""
    lm = tables.list_members
    with engine.begin() as conn:
        conn.execute(lm.delete())
        conn.execute(
            insert(lm),
            [
                {"list_id": 1, "contact_id": i, "added_at": time_now()}
                for i in range(run * rows + 1, (run + 1) * rows + 1)
            ],
        )


def time_now() -> Any:
    """The process clock (``storage.types.utcnow``)."""
    from storage.types import utcnow

    return utcnow()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000, help="events of history")
    parser.add_argument("--full", action="store_true", help="10,000,000 events")
    parser.add_argument("--rows", type=int, default=5_000, help="recipients per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per database")
    parser.add_argument("--workers", type=int, default=4, help="dispatcher send workers")
    parser.add_argument(
        "--event-rate",
        type=float,
        default=50.0,
        help="status events a second while dispatching, the same in every run of both "
        "databases (a run that gets fewer fails the bench)",
    )
    parser.add_argument("--batch", type=int, default=256, help="dispatcher batch size")
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL only")
    parser.add_argument(
        "--keep", action="store_true", help="PostgreSQL: keep the databases and reuse them"
    )
    parser.add_argument("--drop-kept", action="store_true", help="drop the kept databases")
    parser.add_argument(
        "--profile", action="store_true", help="per-statement time, WAL and buffers"
    )
    args = parser.parse_args()
    events = 10_000_000 if args.full else args.events
    kinds = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    if args.pg:
        kinds = ["postgresql"]
    figures = Figures.begin("history")

    def measure() -> None:
        for kind in kinds:
            if kind == "postgresql" and not pg_available():
                if args.db == "postgresql" or args.pg:
                    raise BenchError(f"no PostgreSQL at {PG_ADMIN}")
                print(json.dumps({"bench": "history", "skipped": "postgresql"}))
                continue
            run_db(kind, args, events, figures)

    return report(figures, measure)


if __name__ == "__main__":
    raise SystemExit(main())
