"""Deliveries listing: ``python -m bench.listing [--full] [--sizes N ...] [--db ...]``.

Issue 30: the deliveries listing's first, middle and last page, and a target search, at
1M rows cost <= 1.5x their cost at 10k, on SQLite and PostgreSQL. Per database one table
grows through the sizes: the listed campaign's rows (every 10th failed, the rest
delivered), and between every 20,000 of them 5,000 rows of another campaign (the table
holds more than the campaign listed). At each size each figure is the median of REPEAT
calls of ``campaigns.service.deliveries_page`` (what the API and the dashboard call: one
page of 50, its total, the contact names) after one warm-up:

- first page; middle page (a ``next_cursor`` at the middle row); last page (``last``);
- failed only (a state filter: its total exact from the kept counts);
- target search: digits of one number (one match: the count and the page read the
  campaign's rows whose target the trigram-less indexes cannot narrow);
- reference: the middle page by ``offset`` (the way before cursors: a full count and a
  skip).

Ratios (1M / 10k) are of one run. Default sizes 10,000 and 1,000,000 (``--full`` the same).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from bench.claim_cost import create_running, on_each_db
from bench.common import Figures, report
from bench.dispatch import SEED_CHUNK, database, open_db, phone
from storage import tables

PER_PAGE = 50
REPEAT = 15
GOAL = "<= 1.5"
#: rows of another campaign inserted after every SEED_CHUNK rows of the listed one
OTHERS = SEED_CHUNK // 4


def grow(engine: Engine, listed: int, other: int, lo: int, hi: int) -> None:
    """The listed campaign's rows ``lo+1 .. hi`` (every 10th failed), with
    :data:`OTHERS` rows of ``other`` after each chunk."""
    from storage.queries import deliveries as dq
    from storage.types import utcnow

    now = utcnow()
    with engine.begin() as conn:
        conv = {c: dq.bind_processor(conn, c) for c in ("due_at", "content", "queued_at")}
        content = conv["content"]({"type": "text", "text": "Hi"})
        at = conv["queued_at"](now)

        def row(cid: int, i: int) -> tuple[Any, ...]:
            state, error = ("failed", "not on WhatsApp") if i % 10 == 0 else ("delivered", None)
            return (cid, phone(i), "phone", None, "S1", state, 1, None, content, error, at, None)

        for start in range(lo, hi, SEED_CHUNK):
            end = min(hi, start + SEED_CHUNK)
            dq.insert_new_deliveries(conn, [row(listed, i) for i in range(start + 1, end + 1)])
            others = range(10**8 + start, 10**8 + start + OTHERS)
            dq.insert_new_deliveries(conn, [row(other, i) for i in others])
        dq.refresh_statistics(conn)
    if engine.dialect.name == "postgresql":  # what autovacuum does after a bulk insert
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM (ANALYZE) deliveries")


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``fn`` in ms over ``repeat`` calls, after one warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure_size(engine: Engine, cid: int, size: int) -> dict[str, float]:
    """Each figure's median at this size."""
    from campaigns.paging import encode_cursor
    from campaigns.service import deliveries_page

    d = tables.deliveries
    with engine.connect() as conn:
        middle = conn.execute(
            select(d.c.id).where(d.c.campaign_id == cid).order_by(d.c.id).offset(size // 2).limit(1)
        ).scalar_one()
    mid = encode_cursor("deliveries", "a", int(middle))
    wanted = phone(size // 2 + 3)[-9:]  # the digits of one number, as a user types them

    def listing(**kw: Any) -> Callable[[], object]:
        def call() -> object:
            found = deliveries_page(engine, campaign_id=cid, limit=PER_PAGE, **kw)
            assert found.items, kw
            return found

        return call

    return {
        "first page": median_ms(listing(), REPEAT),
        "middle page": median_ms(listing(cursor=mid), REPEAT),
        "last page": median_ms(listing(cursor="last"), REPEAT),
        "failed only, first page": median_ms(listing(in_states=["failed"]), REPEAT),
        "target search": median_ms(listing(target=wanted), REPEAT),
        "reference: middle page by offset": median_ms(listing(offset=size // 2), 5),
    }


def run_db(kind: str, sizes: list[int], figures: Figures) -> None:
    """Grow one database through ``sizes``; add each size's figures and the ratios."""
    with (
        tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir,
        database(Path(tmpdir), kind == "postgresql", name="listing") as url,
    ):
        engine = open_db(url)
        listed = create_running(engine, ["S1"])
        other = create_running(engine, ["S1"])
        by_size: dict[int, dict[str, float]] = {}
        done = 0
        for size in sizes:
            t0 = time.perf_counter()
            grow(engine, listed, other, done, size)
            done = size
            figures.add(f"seeding to {size:,} rows", time.perf_counter() - t0, "s", db=kind)
            by_size[size] = measure_size(engine, listed, size)
            for name, ms in by_size[size].items():
                figures.add(f"{name}, {size:,} rows", ms, "ms", db=kind, rows=size)
        engine.dispose()
    small, big = min(sizes), max(sizes)
    for name in by_size[small]:
        goal = "reference" if name.startswith("reference") else GOAL
        figures.ratio(
            f"{name}: {big:,} / {small:,} rows ({kind})",
            by_size[big][name],
            by_size[small][name],
            goal=goal,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--full", action="store_true", help="accepted (sizes are the goal's)")
    args = parser.parse_args()
    kinds = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    figures = Figures.begin("listing")

    def run(kind: str) -> None:
        run_db(kind, sorted(args.sizes), figures)

    return report(figures, lambda: on_each_db("listing", kinds, args.db != "sqlite", run))


if __name__ == "__main__":
    raise SystemExit(main())
