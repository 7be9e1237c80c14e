"""The recipient-time claim as the queue grows: ``python -m bench.zone_claim [--sizes ...]``.

One running campaign (``bench.claim_cost``'s, ``--senders`` senders) whose queued rows
carry recipient zones (``deliveries.recipient_tz``): six in seven in a zone whose window is
closed (Asia/Tokyo), one in seven in an open one (Europe/Berlin), interleaved in claim
order, so a claim that filtered the plain queue would read six closed rows per open one,
and more as the queue grows. At each size (default 10,000 and 100,000 queued rows; add
1,000,000 on a quiet machine), on SQLite and PostgreSQL (``--db``), the median of:

- the claim of the open zone's rows (``storage.queries.deliveries.claim`` with ``zones``),
  one row and a batch of 256, committed;
- the campaign's distinct zones (``queued_zones``, the loose scan the dispatcher runs with
  its senders every few seconds);
- a sender's next due row among the open zones (``next_due_at`` with ``zones``);
- as a reference, the plain claim of one row (campaign time: no zone filter, the
  ``ix_deliveries_queue`` range), committed the same way.

The references: the same figure at the smallest size in the same run (the ratio largest /
smallest is judged against the flat-cost goal, <= 1.2x, issue 17), and the zoned claim of
one row against the plain one at the largest size (what recipient time adds to a claim).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine, text

from bench.claim_cost import BATCH, create_running, grow, median_ms, on_each_db
from bench.common import BenchError, Figures, report
from bench.dispatch import database, open_db

OPEN = "Europe/Berlin"
CLOSED = "Asia/Tokyo"


def zone_rows(engine: Engine, cid: int) -> None:
    """Every queued row of the campaign in a zone: one in seven open (seven is prime to
    the ten senders, so each has open rows), the rest closed."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE deliveries SET recipient_tz = CASE WHEN id % 7 = 0 THEN :open "
                "ELSE :closed END WHERE campaign_id = :c AND state = 'queued' "
                "AND recipient_tz IS NULL"
            ),
            {"open": OPEN, "closed": CLOSED, "c": cid},
        )
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM (ANALYZE) deliveries"))


def measure_size(engine: Engine, cid: int, senders: list[str], repeat: int) -> dict[str, float]:
    """Every figure at the queue's current size, in ms."""
    from storage.queries import deliveries as dq
    from storage.types import utcnow

    turn = [0]

    def claim(limit: int, zoned: bool = True) -> Callable[[], object]:
        def run() -> object:
            turn[0] += 1
            now = utcnow()
            with engine.begin() as conn:
                rows = dq.claim(
                    conn,
                    campaign_id=cid,
                    sender=senders[turn[0] % len(senders)],
                    now=now,
                    lease_until=now + timedelta(minutes=2),
                    limit=limit,
                    zones=[OPEN] if zoned else None,
                )
            if not rows:
                raise BenchError("a zoned claim found no queued row")
            return rows

        return run

    def zones() -> object:
        with engine.connect() as conn:
            found = dq.queued_zones(conn, cid)
        if found != sorted([OPEN, CLOSED]):
            raise BenchError(f"unexpected zones {found}")
        return found

    def next_due() -> object:
        with engine.connect() as conn:
            return dq.next_due_at(conn, cid, senders[:1], [OPEN])

    return {
        "zoned claim 1 row": median_ms(claim(1), repeat),
        "plain claim 1 row (reference)": median_ms(claim(1, zoned=False), repeat),
        f"zoned claim {BATCH} rows": median_ms(claim(BATCH), max(5, repeat // 10)),
        "queued zones (loose scan)": median_ms(zones, repeat),
        "next due row of the open zones": median_ms(next_due, repeat),
    }


def run_db(kind: str, sizes: list[int], senders_n: int, repeat: int, figures: Figures) -> None:
    """Grow the zoned queue through ``sizes`` on one database and add its figures."""
    senders = [f"ZONE{i:03d}" for i in range(senders_n)]
    by_size: dict[int, dict[str, float]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir,
        database(Path(tmpdir), kind == "postgresql") as url,
    ):
        engine = open_db(url)
        cid = create_running(engine, senders)
        done = 0
        for size in sizes:
            t0 = time.perf_counter()
            grow(engine, cid, senders, done, size)
            zone_rows(engine, cid)
            done = size
            figures.add(f"seeding to {size:,} queued", time.perf_counter() - t0, "s", db=kind)
            by_size[size] = measure_size(engine, cid, senders, repeat)
            for name, ms in by_size[size].items():
                figures.add(f"{name}, {size:,} queued", ms, "ms", db=kind, rows=size)
        engine.dispose()
    small, big = min(sizes), max(sizes)
    for name in by_size[small]:
        figures.ratio(
            f"{name}: {big:,} / {small:,} queued ({kind})",
            by_size[big][name],
            by_size[small][name],
            goal="<= 1.2",
        )
    figures.ratio(
        f"zoned / plain claim of 1 row at {big:,} queued ({kind})",
        by_size[big]["zoned claim 1 row"],
        by_size[big]["plain claim 1 row (reference)"],
        goal="about 1",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--senders", type=int, default=10, help="sender instances")
    parser.add_argument("--repeat", type=int, default=100, help="calls per figure")
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL only")
    parser.add_argument("--full", action="store_true", help="sizes up to 1,000,000 queued")
    args = parser.parse_args()
    if args.full:
        args.sizes = [10_000, 100_000, 1_000_000]
    if args.pg:
        args.db = "postgresql"
    kinds = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    figures = Figures.begin("zone_claim")

    def run(kind: str) -> None:
        run_db(kind, sorted(args.sizes), args.senders, args.repeat, figures)

    return report(figures, lambda: on_each_db("zone_claim", kinds, args.db == "postgresql", run))


if __name__ == "__main__":
    raise SystemExit(main())
