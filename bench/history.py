"""Dispatch as history grows: ``python -m bench.history [--events N] [--rows R] [--full]``.

Two databases per kind (SQLite and PostgreSQL, ``--db``), with the same contacts and
sender: one with no history, one with ``--events`` status events of an earlier campaign
through the same sender (``sent``, ``delivered``, ``read`` per message, one in a hundred
``failed`` with an error code, each applied to its delivery row and received ten days
ago, so within the default retention: kept), plus paused senders with old error-463
events (the ban-signal check's own history). On each, a text campaign of ``--rows``
recipients is started and dispatched to the end (pacing off, the dispatcher's default
workers and batch) against an in-process gateway stand-in that accepts at once, so the
figure is gatecast's own work; the runs alternate (empty then history, history then
empty, ...) and the best of each counts.

The reference is the run without history, in the same run: the goal is dispatch with
history >= 0.95x dispatch without (issue 17). Default 1,000,000 events; ``--full`` is the
issue's 10,000,000.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, update

from bench.claim_cost import Accepting, pg_available
from bench.common import BenchError, Figures, report, stopwatch
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


def dispatch_once(engine: Engine, rows: int, workers: int, batch: int) -> float:
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


def run_db(kind: str, args: argparse.Namespace, events: int, figures: Figures) -> None:
    """Both databases of one kind, alternating runs; the figures and the ratio."""
    pg = kind == "postgresql"
    with (
        tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir,
        database(Path(tmpdir), pg, "empty") as empty_url,
        database(Path(tmpdir), pg, "history") as history_url,
    ):
        engines = {"empty": open_db(empty_url), "history": open_db(history_url)}
        runs = args.rounds
        for engine in engines.values():
            seed_audience(engine, args.rows * runs)
        with stopwatch() as t_seed:
            seed_history(engines["history"], events)
        figures.add(f"seeding {events:,} events of history", t_seed[0], "s", db=kind)
        # each run sends to its own slice of the list: a list per run
        best: dict[str, float] = {}
        for r in range(runs):
            order = list(engines.items())
            for name, engine in order if r % 2 == 0 else order[::-1]:
                _use_slice(engine, r, args.rows)
                rate = dispatch_once(engine, args.rows, args.workers, args.batch)
                best[name] = max(best.get(name, 0.0), rate)
        for engine in engines.values():
            engine.dispose()
    figures.add("dispatch, no history", best["empty"], "msg/s", db=kind, rows=args.rows)
    figures.add(
        f"dispatch, {events:,} events of history",
        best["history"],
        "msg/s",
        db=kind,
        rows=args.rows,
    )
    figures.ratio(
        f"dispatch with {events:,} events / without ({kind})",
        best["history"],
        best["empty"],
        goal=">= 0.95",
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
    parser.add_argument("--batch", type=int, default=256, help="dispatcher batch size")
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL only")
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
