"""Claim and tick cost as the queue grows: ``python -m bench.claim_cost [--sizes ...] [--db ...]``.

Per dialect two databases, one per size (default 10,000 and 1,000,000 queued rows), each
holding one campaign (running, unpaced, a daily cap that does not bite, ``--senders``
sender instances) with that many queued rows and half as many rows already sent today by
the same senders (what a daily cap counts), each with a known chat; seeded by bulk SQL
(``INSERT ... SELECT`` over a series of numbers). Every figure is the median of repeated
calls of what a dispatcher runs per tick or per claim, **the two sizes called in turns**
(a shared machine's load then weighs on both alike):

- a claim of one row (``storage.queries.deliveries.claim``, committed: the rows leave the
  queue as a dispatcher's do) and of a batch of 256;
- the same claims with the sender-care hooks (``scheduler/claim_care.py``: the care
  rows, a known-chat probe of ``sender_chats`` per claimed row, the warm-up use);
- the reads around it: the senders with queued rows (every 5 s per worker), a sender's
  next due row, "anything pending", sends today under the cap (``at_most``), of every
  sender at once (the paced claim's count) and uncounted (the faces), the campaign's
  state counts (progress bar, ``campaign show``; kept by triggers) and, as their
  reference, the same counts by ``COUNT(*)`` of the rows, the sender-care sweep (ban
  signals: 463 locks, the health score's decay and cool-downs);
- a whole dispatcher tick (``scheduler.dispatcher.Dispatcher.tick``) claiming one row per
  sender, sending it to an in-process gateway stand-in that accepts at once (so the
  figure is gatecast's own cost, not the network's), recording it.

On PostgreSQL the tables are vacuumed after seeding (what autovacuum does soon after a
bulk insert). The reference is the same figure at the smallest size, in the same run:
the ratio largest / smallest is judged against the goal (<= 1.2x, issue 30). ``--full``
changes nothing but is accepted (the default sizes are the issue's).
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
from bench.dispatch import PG_ADMIN, TEXT, database, open_db
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
    """Rows ``lo+1 .. hi``: each queued (due in the past, in row order, the senders in
    turn) and, for every second one, a row sent today (another target) through one of
    :data:`SENT_SENDERS` senders, the claiming ones among them (so a claiming sender's
    sends today grow with the size but stay under the cap, as a deployment's many senders
    share its volume), with a known chat; by bulk SQL (``INSERT ... SELECT`` over a
    series of numbers), not row by row."""
    from storage.queries import deliveries as dq
    from storage.types import utcnow

    now = utcnow()
    pg = engine.dialect.name == "postgresql"
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    span = max(1.0, (now - midnight).total_seconds() - 60)
    n = len(senders)
    # dialect by dialect: the numbers first+1 .. last, a moment `seconds` after epoch `base`
    if pg:
        numbers = "FROM generate_series({first}::bigint + 1, {last}) AS g(i)"
        moment = "to_timestamp({base} + {seconds})"
    else:
        numbers = (
            "FROM (WITH RECURSIVE g(i) AS (SELECT {first} + 1 UNION ALL SELECT i + 1 FROM g"
            " WHERE i < {last}) SELECT i FROM g) AS g"
        )
        moment = "strftime('%Y-%m-%d %H:%M:%f', {base} + {seconds}, 'unixepoch')"
    queued_series = numbers.format(first=lo, last=hi)
    sent_series = numbers.format(first=lo // 2, last=hi // 2)
    queued = moment.format(base=(now - timedelta(hours=2)).timestamp(), seconds="i / 1000.0")
    sent_at = moment.format(base=midnight.timestamp(), seconds=f"{span} * (i % 997) / 997")

    def sender_of(k: str) -> str:  # the k-th claiming sender's name
        return (
            f"CASE {k} " + " ".join(f"WHEN {j} THEN '{s}'" for j, s in enumerate(senders)) + " END"
        )

    k = f"i % {SENT_SENDERS}"
    sent_by = f"CASE WHEN {k} < {n} THEN {sender_of(k)} ELSE 'SENT' || ({k}) END"
    with engine.begin() as conn:
        content = dq.bind_processor(conn, "content")({"type": "text", "text": "Hi"})
        stamp = dq.bind_processor(conn, "queued_at")(now)
        params = {"cid": cid, "content": content, "at": stamp}
        mark = "%({})s" if pg else ":{}"
        cid_p, content_p, at_p = (mark.format(k) for k in ("cid", "content", "at"))
        if pg:
            content_p += "::jsonb"
        statements = [
            f"INSERT INTO deliveries (campaign_id, target, target_kind, sender, state, attempts,"
            f" due_at, content, queued_at) SELECT {cid_p}, '+447' || (100000000 + i), 'phone',"
            f" {sender_of(f'i % {n}')}, 'queued', 0, {queued}, {content_p}, {at_p} "
            + queued_series,
            f"INSERT INTO deliveries (campaign_id, target, target_kind, sender, state, attempts,"
            f" content, queued_at, sent_at, message_id) SELECT {cid_p},"
            f" '+448' || (100000000 + i), 'phone', {sent_by}, 'sent', 1, {content_p}, {at_p},"
            f" {sent_at}, 'S' || {cid_p} || '-' || i " + sent_series,
            # their chats, as recording and the statuses keep them (the probe's table)
            f"INSERT INTO sender_chats (instance_id, target, first_sent_at, known_at)"
            f" SELECT {sent_by}, '+448' || (100000000 + i), {at_p}, {at_p} " + sent_series,
        ]
        for sql in statements[: 1 if hi // 2 <= lo // 2 else 3]:
            conn.exec_driver_sql(sql.replace(" % ", " %% ") if pg else sql, params)
        dq.refresh_statistics(conn)  # what a start does after materialising
    if pg:
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


def in_turns(
    small: Callable[[], object], big: Callable[[], object], repeat: int
) -> tuple[float, float]:
    """Median ms of ``small`` and of ``big`` called in turns (``repeat`` each, after one
    warm-up each): the machine's load changes both alike, so their ratio holds."""
    small(), big()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for fn, out in ((small, times[0]), (big, times[1])):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times[0]), statistics.median(times[1])


def counted_states(conn: Connection, cid: int) -> dict[str, int]:
    """The campaign's rows per state counted from its rows (the covering (campaign_id,
    state) index): how the state counts were read before the triggers kept them."""
    d = tables.deliveries
    rows = conn.execute(
        select(d.c.state, func.count()).where(d.c.campaign_id == cid).group_by(d.c.state)
    )
    return {str(state): int(n) for state, n in rows}


#: a figure: its name, the call, how many calls per size
Call = tuple[str, Callable[[], object], int]


def claims(engine: Engine, cid: int, senders: list[str], repeat: int) -> list[Call]:
    """The committed claims of 1 and :data:`BATCH` rows, plain and with the sender-care
    hooks (the rows leave the queue as a dispatcher's do)."""
    from scheduler import claim_care
    from storage.queries import deliveries as dq
    from storage.types import utcnow

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

    few = max(5, repeat // 10)
    return [
        ("claim 1 row", claim(1), repeat),
        (f"claim {BATCH} rows", claim(BATCH), few),
        ("claim 1 row with the sender-care hooks", claim(1, care=True), repeat),
        (f"claim {BATCH} rows with the sender-care hooks", claim(BATCH, care=True), few),
    ]


def reads(engine: Engine, cid: int, senders: list[str], repeat: int) -> list[Call]:
    """The reads around a claim and the sender-care sweep."""
    from campaigns import delivery_lifecycle as dl
    from scheduler import health, timelock
    from storage.queries import deliveries as dq
    from storage.queries import tallies
    from storage.types import utcnow

    def read(fn: Callable[[Any], object]) -> Callable[[], object]:
        def run() -> object:
            with engine.connect() as conn:
                return fn(conn)

        return run

    def care_sweep() -> object:
        with engine.begin() as conn:  # the ban signals (463 locks) and the health sweep
            now = utcnow()
            signals = timelock.read_signals(conn, now)
            health.fold_counted(conn, now)
            health.sweep(conn, now)
            timelock.lift_expired(conn, now)
            return signals

    midnight = utcnow().replace(hour=0, minute=0, second=0, microsecond=0)
    few = max(5, repeat // 10)
    return [
        ("queued senders", read(lambda c: dq.queued_senders(c, cid)), repeat),
        ("next due row", read(lambda c: dq.next_due_at(c, cid, senders[:1])), repeat),
        (
            "anything pending",
            read(lambda c: tallies.has_pending(c, cid, open_states=dl.OPEN)),
            repeat,
        ),
        (
            "sends today under the cap",
            read(lambda c: dq.sends_since(c, senders[0], midnight, at_most=DAILY_CAP)),
            repeat,
        ),
        (
            "sends today of every sender under the cap (the paced claim's)",
            read(lambda c: dq.sends_since_by_sender(c, senders, midnight, at_most=DAILY_CAP)),
            repeat,
        ),
        (
            "sends today, whole count (faces)",
            read(lambda c: dq.sends_since(c, senders[0], midnight)),
            few,
        ),
        ("state counts", read(lambda c: tallies.delivery_counts(c, cid)), repeat),
        (
            "state counts by COUNT(*) (reference: the read before 0007)",
            read(lambda c: counted_states(c, cid)),
            few,
        ),
        ("sender-care sweep (ban signals, health)", care_sweep, repeat),
    ]


def record_sent(engine: Engine) -> None:
    """The claimed rows recorded sent, as a dispatcher's claims are."""
    from storage.types import utcnow

    with engine.begin() as conn:
        conn.execute(
            update(tables.deliveries)
            .where(tables.deliveries.c.state == "sending")
            .values(state="sent", sent_at=utcnow(), lease_until=None)
        )


def run_db(kind: str, sizes: list[int], senders_n: int, repeat: int, figures: Figures) -> None:
    """Two databases, the smallest and the largest size, each seeded once; every figure
    measured at both sizes in turns, and its ratio."""
    from scheduler.dispatcher import Dispatcher

    senders = [f"CLAIM{i:03d}" for i in range(senders_n)]
    small, big = min(sizes), max(sizes)
    pg = kind == "postgresql"
    with (
        tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir,
        database(Path(tmpdir), pg, name=f"claim-{small}") as small_url,
        database(Path(tmpdir), pg, name=f"claim-{big}") as big_url,
    ):
        dbs: list[tuple[Engine, int]] = []
        for size, url in ((small, small_url), (big, big_url)):
            engine = open_db(url)
            cid = create_running(engine, senders)
            t0 = time.perf_counter()
            grow(engine, cid, senders, 0, size)
            figures.add(f"seeding to {size:,} queued", time.perf_counter() - t0, "s", db=kind)
            dbs.append((engine, cid))

        def measure(pair: tuple[list[Call], list[Call]]) -> None:
            for (name, at_small, n), (_, at_big, _) in zip(*pair, strict=True):
                ms_small, ms_big = in_turns(at_small, at_big, n)
                figures.add(f"{name}, {small:,} queued", ms_small, "ms", db=kind, rows=small)
                figures.add(f"{name}, {big:,} queued", ms_big, "ms", db=kind, rows=big)
                figures.ratio(
                    f"{name}: {big:,} / {small:,} queued ({kind})", ms_big, ms_small, "<= 1.2"
                )

        (e_small, c_small), (e_big, c_big) = dbs
        measure((claims(e_small, c_small, senders, repeat), claims(e_big, c_big, senders, repeat)))
        for engine, _ in dbs:
            record_sent(engine)
        measure((reads(e_small, c_small, senders, repeat), reads(e_big, c_big, senders, repeat)))
        ticking = [
            Dispatcher(
                engine,
                Accepting,
                workers=1,
                batch_size=len(senders),
                campaign_ids=[cid],
                pipeline=False,
            )
            for engine, cid in dbs
        ]
        claimed = [0]

        def tick(dispatcher: Dispatcher) -> Callable[[], object]:
            def run() -> object:
                result = dispatcher.tick()
                claimed[0] += result.claimed
                return result

            return run

        name = "dispatcher tick (1 row per sender)"
        ticks = max(10, repeat // 4)
        measure(([(name, tick(ticking[0]), ticks)], [(name, tick(ticking[1]), ticks)]))
        for dispatcher in ticking:
            dispatcher.close()
        if claimed[0] == 0:
            raise BenchError("the dispatcher's ticks claimed nothing")
        for engine, _ in dbs:
            engine.dispose()


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
        "--sizes",
        type=int,
        nargs="+",
        default=[10_000, 1_000_000],
        help="queued rows (the smallest and the largest)",
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
