"""What the outbound webhooks' outbox costs the hot writes: ``python -m bench.outbound
[--rows N] [--full] [--no-pg]``.

The writes that cause events, in the bulk shape the dispatcher and the webhook intake
use (one UPDATE per batch of 500 rows): every row queued -> sent (``sent_at``,
``message_id``), sent -> delivered, delivered -> read, and one reply in ten inserted
into ``inbound_messages``. Timed on the same database in three set-ups, taken in turn
three times (the best of each is kept, so a busy moment of the machine hurts every
set-up alike; the ratios compare CPU seconds of this process on SQLite, which runs in
it, and wall seconds on PostgreSQL, whose server does the work):

- never subscribed: no outbox trigger exists, the statements of before migration 0010
  (the reference);
- PostgreSQL only, no subscription after one: the triggers disabled, as
  ``storage.outbox`` leaves them when the last subscription goes (SQLite drops them:
  the reference again); the goal is the reference's speed (>= 0.97x);
- the triggers in force with no subscription (the alternative not taken: a trigger that
  runs and finds no subscriber), context for that choice;
- one endpoint for every event: each change also writes its outbox row (context).

At the end the run checks that removing the endpoint leaves no outbox trigger in force.

Then the sender's own speed: the first 3,000 outbox rows of the last set-up delivered
to a local receiver (a threaded HTTP server answering 200) by ``scheduler.outbound``.
"""

from __future__ import annotations

import argparse
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, delete, func, insert, select, text, update

from bench.common import BenchError, Figures, each_database, report, stopwatch
from bench.dispatch import database, open_db
from campaigns.webhook_endpoints import create_endpoint, delete_endpoint, subscribed
from scheduler.outbound import OutboundPolicy, OutboundSender
from storage import outbox, tables

BATCH = 500
ROUNDS = 3
SEND_MESSAGES = 3000
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _seed(engine: Engine, rows: int) -> list[int]:
    d = tables.deliveries
    with engine.begin() as conn:
        cid = conn.execute(
            insert(tables.campaigns)
            .values(
                name="bench",
                state="running",
                spec={},
                message_type="text",
                timezone="UTC",
                created_at=NOW,
                updated_at=NOW,
            )
            .returning(tables.campaigns.c.id)
        ).scalar_one()
        conn.execute(
            insert(d),
            [
                {
                    "campaign_id": cid,
                    "target": f"+4477{i:08d}",
                    "target_kind": "phone",
                    "sender": "s1",
                    "state": "queued",
                    "due_at": NOW,
                    "content": {"type": "text", "text": "hi"},
                    "queued_at": NOW,
                }
                for i in range(rows)
            ],
        )
        return [
            int(i) for i in conn.execute(text("SELECT id FROM deliveries ORDER BY id")).scalars()
        ]


def _writes(engine: Engine, ids: list[int], round_no: int) -> tuple[float, float]:
    """The timed writes; answers their seconds and this process's CPU seconds."""
    d = tables.deliveries
    batches = [ids[i : i + BATCH] for i in range(0, len(ids), BATCH)]
    cpu = time.process_time()
    with stopwatch() as took:
        for state, column in (
            ("sent", "sent_at"),
            ("delivered", "delivered_at"),
            ("read", "read_at"),
        ):
            for batch in batches:
                with engine.begin() as conn:
                    values: dict[str, Any] = {"state": state, column: NOW}
                    if state == "sent":
                        values["message_id"] = None
                    conn.execute(update(d).where(d.c.id.in_(batch)).values(**values))
        replies = ids[::10]
        for start in range(0, len(replies), BATCH):
            with engine.begin() as conn:
                conn.execute(
                    insert(tables.inbound_messages),
                    [
                        {
                            "message_id": f"in-{round_no}-{i}",
                            "chat": f"+4477{i:08d}",
                            "sender_phone": f"+4477{i:08d}",
                            "text": "thanks",
                            "is_opt_out": False,
                            "received_at": NOW,
                        }
                        for i in replies[start : start + BATCH]
                    ],
                )
    return took[0], time.process_time() - cpu


def _reset(engine: Engine) -> None:
    """Back to queued, no replies, an empty outbox (not timed)."""
    with engine.begin() as conn:
        conn.execute(
            update(tables.deliveries).values(
                state="queued", sent_at=None, delivered_at=None, read_at=None
            )
        )
        conn.execute(delete(tables.inbound_messages))
        conn.execute(delete(tables.webhook_messages))


def _set_triggers(engine: Engine, how: str) -> None:
    """``none``: no outbox trigger at all (never subscribed); ``off``: as
    ``storage.outbox`` leaves them after the last subscription (PostgreSQL: disabled);
    ``on``: in force."""
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        if how == "none":
            for source in outbox.SOURCES:
                on_table = f" ON {source.table}" if pg else ""
                conn.execute(text(f"DROP TRIGGER IF EXISTS {source.trigger}{on_table}"))
        elif how == "off":
            outbox.install(conn, outbox.SOURCES)
            outbox.drop(conn, outbox.SOURCES)
        else:
            outbox.install(conn, outbox.SOURCES)


def _subscribe(engine: Engine, endpoint_id: int, on: bool) -> None:
    s = tables.webhook_subscriptions
    with engine.begin() as conn:
        conn.execute(delete(s))
        if on:
            conn.execute(
                insert(s), [{"event": e, "endpoint_id": endpoint_id} for e in subscribed(["*"])]
            )


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def run_db(tmp: Path, rows: int, pg: bool, figures: Figures) -> None:
    db = "PostgreSQL" if pg else "SQLite"
    with database(tmp, pg, "outbound") as url:
        engine = open_db(url)
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            ids = _seed(engine, rows)
            endpoint = create_endpoint(
                engine, f"http://127.0.0.1:{server.server_address[1]}/hooks", ["*"]
            ).endpoint
            setups: dict[str, tuple[str, bool]] = {  # (triggers, subscribed)
                "no trigger (never subscribed)": ("none", False),
                "triggers in force, no subscription (not used)": ("on", False),
            }
            if pg:  # SQLite drops them: the same as never subscribed
                setups["no subscription after one (triggers disabled)"] = ("off", False)
            setups["one endpoint, every event"] = ("on", True)  # last: the sender's outbox
            best: dict[str, float] = {}
            best_cpu: dict[str, float] = {}
            for round_no in range(ROUNDS):
                for name, (triggers, subscribed_) in setups.items():
                    _set_triggers(engine, triggers)
                    _subscribe(engine, endpoint.id, subscribed_)
                    _reset(engine)
                    took, cpu = _writes(engine, ids, round_no)
                    best[name] = min(best.get(name, took), took)
                    best_cpu[name] = min(best_cpu.get(name, cpu), cpu)
            changes = rows * 3 + len(ids[::10])
            for name, took in best.items():
                figures.add(
                    f"{db}: {name}",
                    changes / took,
                    "changes/s",
                    seconds=round(took, 2),
                    cpu_seconds=round(best_cpu[name], 2),
                )
            # SQLite runs in this process: its CPU time is the cost, what a loaded machine
            # blurs least; PostgreSQL works in its server: the wall clock
            if not pg:
                best = best_cpu
            ref = best["no trigger (never subscribed)"]
            if pg:
                figures.ratio(
                    f"{db}: triggers disabled / none",
                    ref,
                    best["no subscription after one (triggers disabled)"],
                    goal=">= 0.97",
                )
            figures.ratio(
                f"{db}: triggers in force without subscription / none",
                ref,
                best["triggers in force, no subscription (not used)"],
                goal="(context)",
            )
            figures.ratio(
                f"{db}: one endpoint, every event / none",
                ref,
                best["one endpoint, every event"],
                goal="(context)",
            )
            _set_triggers(engine, "on")
            # the first SEND_MESSAGES of the last round's outbox, delivered by the sender
            with engine.begin() as conn:
                m = tables.webhook_messages
                keep = select(m.c.id).order_by(m.c.id).limit(SEND_MESSAGES).scalar_subquery()
                last = conn.execute(select(func.max(m.c.id)).where(m.c.id.in_(keep))).scalar()
                conn.execute(delete(m).where(m.c.id > (last or 0)))
            sender = OutboundSender(
                engine, policy=OutboundPolicy(batch=1000), now=lambda: datetime.now(UTC)
            )
            try:
                with stopwatch() as took_send:
                    sent = 0
                    while made := sender.run_once():
                        sent += made
            finally:
                sender.close()
            figures.add(
                f"{db}: sender, one endpoint, local receiver",
                sent / took_send[0],
                "messages/s",
                messages=sent,
            )
            with engine.begin() as conn:
                conn.execute(delete(tables.webhook_messages))
            delete_endpoint(engine, endpoint.id)  # the last subscription goes
            with engine.connect() as conn:
                if outbox.present(conn):
                    raise BenchError(f"{db}: outbox triggers left without a subscription")
        finally:
            server.shutdown()
            server.server_close()
            engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=20_000, help="deliveries (20,000)")
    parser.add_argument("--full", action="store_true", help="100,000 deliveries")
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    args = parser.parse_args()
    rows = 100_000 if args.full else args.rows
    figures = Figures.begin("outbound")

    def measure() -> None:
        each_database([rows], args.no_pg, lambda tmp, n, pg: run_db(tmp, n, pg, figures))

    return report(figures, measure)


if __name__ == "__main__":
    raise SystemExit(main())
