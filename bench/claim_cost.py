"""Claim and tick cost as the queue grows: ``python -m bench.claim_cost [--sizes ...] [--db ...]``.

One campaign (running, unpaced, a daily cap that does not bite, ``--senders`` sender
instances) whose queue grows through the sizes (default 10,000, 100,000 and 1,000,000
queued rows), each size with half as many rows already sent today by the same senders
(what a daily cap counts). At each size, on SQLite and PostgreSQL (``--db``), the median
of repeated calls of what a dispatcher runs per tick or per claim:

- a claim of one row (``storage.queries.deliveries.claim``, committed: the rows leave the
  queue as a dispatcher's do) and of a batch of 256;
- the reads around it: the senders with queued rows (every 5 s per worker), a sender's
  next due row, "anything pending", sends today under the cap (``at_most``) and uncounted
  (the faces), the campaign's state counts (progress bar, ``campaign show``; kept by the
  triggers of migration 0007) and, as their reference, the same counts by ``COUNT(*)``
  of the rows (the read before 0007), the sender-care sweep (ban signals: 463 locks, the
  health score's decay and cool-downs; migration 0014);
- the same claims with the sender-care hooks (``scheduler/claim_care.py``: the care
  rows, a known-chat probe of ``sender_chats`` per claimed row, seeded with a chat for
  every row sent, the warm-up use);
- a whole dispatcher tick (``scheduler.dispatcher.Dispatcher.tick``) claiming one row per
  sender, sending it to an in-process gateway stand-in that accepts at once (so the
  figure is gatecast's own cost, not the network's), recording it.

On PostgreSQL the table is vacuumed after each growth step (what autovacuum does soon
after a bulk insert). The reference is the same figure at the smallest size, in the same
run: the ratio largest / smallest is judged against the goal (<= 1.2x, issue 17). ``--full`` changes
nothing but is accepted (the default sizes are the issue's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Connection, Engine, func, insert, select, update

from bench.common import BenchError, Figures, report
from bench.dispatch import PG_ADMIN, SEED_CHUNK, TEXT, database, open_db, phone
from storage import tables

UTC_ZONE = ZoneInfo("UTC")
#: a cap that does not bite (counted: the cap's query runs on every claim)
DAILY_CAP = 10_000
BATCH = 256
#: the senders that share the rows sent today
SENT_SENDERS = 1000


class Accepting:
    """A gateway stand-in that accepts every send at once with a fresh message id."""

    def send(self, instance_id: str, to: str, message: Any) -> Any:
        from gateway.outcomes import OutcomeKind, SendOutcome

        return SendOutcome(OutcomeKind.ACCEPTED, message_id=f"B{uuid.uuid4().hex[:20]}")

    def close(self) -> None:
        """Nothing to close."""


def create_running(engine: Engine, senders: list[str]) -> int:
    """A running campaign through ``senders``: unpaced, under a daily cap."""
    from campaigns.campaign_file import parse_campaign
    from storage.queries import instances as iq
    from storage.types import utcnow

    now = utcnow()
    spec = parse_campaign(
        {
            "name": "claim cost",
            "list": "bench",
            "instances": senders,
            "message": {"type": "text", "text": TEXT},
            "schedule": {"timezone": "UTC"},
            "pace": {"per_minute": 60, "delay_seconds": [0, 0], "daily_cap": DAILY_CAP},
        }
    ).model_dump(mode="json")
    spec["pace"] = {"per_minute": 0, "delay_seconds": [0, 0], "daily_cap": DAILY_CAP}
    campaigns = tables.campaigns
    with engine.begin() as conn:
        iq.ensure(conn, senders, now=now)
        conn.execute(update(tables.instances).values(state="connected"))
        return int(
            conn.execute(
                insert(campaigns)
                .values(
                    name="claim cost",
                    state="running",
                    spec=spec,
                    message_type="text",
                    timezone="UTC",
                    start_at=now,
                    started_at=now,
                    created_at=now,
                    updated_at=now,
                )
                .returning(campaigns.c.id)
            ).scalar_one()
        )


def grow(engine: Engine, cid: int, senders: list[str], lo: int, hi: int) -> None:
    """Rows ``lo+1 .. hi``: each queued (due in the past, in row order) and, for every
    second one, a row sent today (another target) through one of :data:`SENT_SENDERS`
    senders, the claiming ones among them (so a claiming sender's sends today grow with
    the size but stay under the cap, as a deployment's many senders share its volume)."""
    from storage.queries import deliveries as dq
    from storage.queries import sender_care as sc
    from storage.types import utcnow

    now = utcnow()
    with engine.begin() as conn:
        cols = dq.NEW_DELIVERY_COLUMNS
        conv = {c: dq.bind_processor(conn, c) for c in ("due_at", "content", "queued_at")}
        content = conv["content"]({"type": "text", "text": "Hi"})
        queued_at = conv["queued_at"](now)
        base = now - timedelta(hours=2)
        for start in range(lo, hi, SEED_CHUNK):
            rows = []
            for i in range(start + 1, min(hi, start + SEED_CHUNK) + 1):
                due = conv["due_at"](base + timedelta(microseconds=i))
                sender = senders[i % len(senders)]
                rows.append(
                    (
                        cid,
                        phone(i),
                        "phone",
                        None,
                        sender,
                        "queued",
                        0,
                        due,
                        content,
                        None,
                        queued_at,
                        None,
                    )
                )
            assert len(rows[0]) == len(cols)
            dq.insert_new_deliveries(conn, rows)
        sent_cols = (
            "campaign_id",
            "target",
            "target_kind",
            "sender",
            "state",
            "attempts",
            "content",
            "queued_at",
            "sent_at",
            "message_id",
        )
        mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        sql = (
            f"INSERT INTO deliveries ({', '.join(sent_cols)}) "
            f"VALUES ({', '.join([mark] * len(sent_cols))})"
        )
        sent_by = senders + [f"SENT{i:04d}" for i in range(SENT_SENDERS - len(senders))]
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        span = max(1.0, (now - midnight).total_seconds() - 60)
        for start in range(lo // 2, hi // 2, SEED_CHUNK):
            sent_rows: list[tuple[Any, ...]] = []
            for i in range(start + 1, min(hi // 2, start + SEED_CHUNK) + 1):
                at = midnight + timedelta(seconds=span * (i % 997) / 997)
                sent_rows.append(
                    (
                        cid,
                        phone(10**8 + i),
                        "phone",
                        sent_by[i % len(sent_by)],
                        "sent",
                        1,
                        content,
                        queued_at,
                        conv["queued_at"](at),
                        f"S{cid}-{i}",
                    )
                )
            if conn.dialect.name == "postgresql":  # one statement (a row each is slow)
                types = [tables.deliveries.c[c].type.compile(conn.dialect) for c in sent_cols]
                conn.exec_driver_sql(
                    f"INSERT INTO deliveries ({', '.join(sent_cols)}) "
                    f"SELECT * FROM unnest({', '.join(f'%s::{t}[]' for t in types)})",
                    tuple(list(col) for col in zip(*sent_rows, strict=True)),
                )
            else:
                conn.exec_driver_sql(sql, sent_rows)
            # their chats, as recording and the statuses keep them (the probe's table)
            sc.mark_known(conn, [(str(r[3]), str(r[1])) for r in sent_rows], now=now)
        dq.refresh_statistics(conn)  # what a start does after materialising
    if engine.dialect.name == "postgresql":
        # what autovacuum does within a minute of a bulk insert: without it, every index
        # entry read sends the first readers to the heap (visibility map and hint bits)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM (ANALYZE) deliveries")
            conn.exec_driver_sql("VACUUM (ANALYZE) sender_chats")


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``fn`` in milliseconds over ``repeat`` calls (after one warm-up)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def counted_states(conn: Connection, cid: int) -> dict[str, int]:
    """The campaign's rows per state counted from its rows (the covering (campaign_id,
    state) index): how the state counts were read before the triggers kept them."""
    d = tables.deliveries
    rows = conn.execute(
        select(d.c.state, func.count()).where(d.c.campaign_id == cid).group_by(d.c.state)
    )
    return {str(state): int(n) for state, n in rows}


def measure_size(engine: Engine, cid: int, senders: list[str], repeat: int) -> dict[str, float]:
    """Every figure at the queue's current size, in ms."""
    from campaigns import delivery_lifecycle as dl
    from scheduler import claim_care, health, timelock
    from scheduler.dispatcher import Dispatcher
    from storage.queries import deliveries as dq
    from storage.queries import tallies
    from storage.types import utcnow

    out: dict[str, float] = {}
    turn = [0]

    def claim(limit: int, care: bool = False) -> Callable[[], object]:
        def run() -> object:
            turn[0] += 1
            sender = senders[turn[0] % len(senders)]
            now = utcnow()
            with engine.begin() as conn:
                rows_care = claim_care.before_claim(conn, [sender], now) if care else {}
                rows = dq.claim(
                    conn,
                    campaign_id=cid,
                    sender=sender,
                    now=now,
                    lease_until=now + timedelta(minutes=2),
                    limit=limit,
                )
                if care:  # the known-chat probes, the warm-up use, the new-contact signal
                    rows = claim_care.after_claim(conn, rows, rows_care, now, UTC_ZONE)
            if not rows:
                raise BenchError("a claim found no queued row")
            return rows

        return run

    def read(fn: Callable[[Any], object]) -> Callable[[], object]:
        def run() -> object:
            with engine.connect() as conn:
                return fn(conn)

        return run

    now = utcnow()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    out["claim 1 row"] = median_ms(claim(1), repeat)
    out[f"claim {BATCH} rows"] = median_ms(claim(BATCH), max(5, repeat // 10))
    out["claim 1 row with the sender-care hooks"] = median_ms(claim(1, care=True), repeat)
    out[f"claim {BATCH} rows with the sender-care hooks"] = median_ms(
        claim(BATCH, care=True), max(5, repeat // 10)
    )
    with engine.begin() as conn:  # recorded sent, as a dispatcher's claims are
        conn.execute(
            update(tables.deliveries)
            .where(tables.deliveries.c.state == "sending")
            .values(state="sent", sent_at=utcnow(), lease_until=None)
        )
    out["queued senders"] = median_ms(read(lambda c: dq.queued_senders(c, cid)), repeat)
    out["next due row"] = median_ms(read(lambda c: dq.next_due_at(c, cid, senders[:1])), repeat)
    out["anything pending"] = median_ms(
        read(lambda c: tallies.has_pending(c, cid, open_states=dl.OPEN)), repeat
    )
    out["sends today under the cap"] = median_ms(
        read(lambda c: dq.sends_since(c, senders[0], midnight, at_most=DAILY_CAP)), repeat
    )
    out["sends today, whole count (faces)"] = median_ms(
        read(lambda c: dq.sends_since(c, senders[0], midnight)), max(5, repeat // 10)
    )
    out["state counts"] = median_ms(read(lambda c: tallies.delivery_counts(c, cid)), repeat)
    out["state counts by COUNT(*) (reference: the read before 0007)"] = median_ms(
        read(lambda c: counted_states(c, cid)), max(5, repeat // 10)
    )

    def care_sweep() -> object:
        with engine.begin() as conn:  # the ban signals (463 locks) and the health sweep
            now = utcnow()
            signals = timelock.read_signals(conn, now)
            health.fold_counted(conn, now)
            health.sweep(conn, now)
            timelock.lift_expired(conn, now)
            return signals

    out["sender-care sweep (ban signals, health)"] = median_ms(care_sweep, repeat)
    with Dispatcher(
        engine,
        Accepting,
        workers=1,
        batch_size=len(senders),
        campaign_ids=[cid],
        pipeline=False,
    ) as dispatcher:
        claimed = [0]

        def tick() -> object:
            result = dispatcher.tick()
            claimed[0] += result.claimed
            return result

        out["dispatcher tick (1 row per sender)"] = median_ms(tick, max(10, repeat // 4))
        if claimed[0] == 0:
            raise BenchError("the dispatcher's ticks claimed nothing")
    return out


def run_db(kind: str, sizes: list[int], senders_n: int, repeat: int, figures: Figures) -> None:
    """Grow the queue through ``sizes`` on one database and add its figures."""
    senders = [f"CLAIM{i:03d}" for i in range(senders_n)]
    with (
        tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir,
        database(Path(tmpdir), kind == "postgresql") as url,
    ):
        if True:
            engine = open_db(url)
            cid = create_running(engine, senders)
            by_size: dict[int, dict[str, float]] = {}
            done = 0
            for size in sizes:
                t0 = time.perf_counter()
                grow(engine, cid, senders, done, size)
                done = size
                seeded = time.perf_counter() - t0
                by_size[size] = measure_size(engine, cid, senders, repeat)
                for name, ms in by_size[size].items():
                    figures.add(f"{name}, {size:,} queued", ms, "ms", db=kind, rows=size)
                figures.add(f"seeding to {size:,} queued", seeded, "s", db=kind)
            engine.dispose()
    small, big = min(sizes), max(sizes)
    for name in by_size[small]:
        figures.ratio(
            f"{name}: {big:,} / {small:,} queued ({kind})",
            by_size[big][name],
            by_size[small][name],
            goal="<= 1.2",
        )


def pg_available() -> bool:
    """True when the benchmark PostgreSQL server answers."""
    import sqlalchemy as sa

    try:
        eng = sa.create_engine(PG_ADMIN)
        with eng.connect():
            pass
        eng.dispose()
        return True
    except Exception:
        return False


def on_each_db(bench: str, kinds: list[str], required: bool, run: Callable[[str], None]) -> None:
    """``run`` for each database kind; PostgreSQL skipped (said in a JSON line) when no
    server answers, unless ``required``."""
    for kind in kinds:
        if kind == "postgresql" and not pg_available():
            if required:
                raise BenchError(f"no PostgreSQL at {PG_ADMIN}")
            print(json.dumps({"bench": bench, "skipped": "postgresql"}))
            continue
        run(kind)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000], help="queued rows"
    )
    parser.add_argument("--senders", type=int, default=10, help="sender instances")
    parser.add_argument("--repeat", type=int, default=100, help="calls per figure")
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL only")
    parser.add_argument("--full", action="store_true", help="accepted (sizes are the issue's)")
    args = parser.parse_args()
    kinds = (
        ["postgresql"]
        if args.pg
        else (["sqlite", "postgresql"] if args.db == "both" else [args.db])
    )
    figures = Figures.begin("claim_cost")
    required = args.db == "postgresql" or args.pg

    def run(kind: str) -> None:
        run_db(kind, sorted(args.sizes), args.senders, args.repeat, figures)

    return report(figures, lambda: on_each_db("claim_cost", kinds, required, run))


if __name__ == "__main__":
    raise SystemExit(main())
