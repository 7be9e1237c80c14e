"""Deliveries listing: ``python -m bench.listing [--full] [--sizes N ...] [--db ...]``.

Issue 30: the deliveries listing's first, middle and last page, and a target search, at
1M rows cost <= 1.5x their cost at 10k, on SQLite and PostgreSQL. Per dialect two
databases, one per size, each with the listed campaign's rows (every 10th failed, the rest
delivered), and between every 20,000 of them 5,000 rows of another campaign (the table
holds more than the campaign listed). Each figure is the median of REPEAT calls of
``campaigns.service.deliveries_page`` (what the API and the dashboard call: one page of
50, its total, the contact names) after one warm-up, the two sizes called in turns (a
shared machine's load then weighs on both alike):

- first page; middle page (a ``next_cursor`` at the middle row); last page (``last``);
- failed only (a state filter: its total exact from the kept counts);
- target search: digits of one number (one match: the page reads the campaign's rows,
  which no index narrows by a substring of the target; it holds every match, so no count);
- reference: the middle page by ``offset`` (the way before cursors: a full count and a
  skip).

Ratios (1M / 10k) are of one run. Default sizes 10,000 and 1,000,000 (``--full`` the same).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from bench.claim_cost import create_running, in_turns, on_each_db
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


def calls(engine: Engine, cid: int, size: int) -> dict[str, Callable[[], object]]:
    """Each figure's call at this size (one page of :data:`PER_PAGE`)."""
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
        "first page": listing(),
        "middle page": listing(cursor=mid),
        "last page": listing(cursor="last"),
        "failed only, first page": listing(in_states=["failed"]),
        "target search": listing(target=wanted),
        "reference: middle page by offset": listing(offset=size // 2),
    }


def seeded(url: str, size: int, figures: Figures, kind: str) -> tuple[Engine, int]:
    """A database at ``url`` with the listed campaign at ``size`` rows; its id."""
    engine = open_db(url)
    listed = create_running(engine, ["S1"])
    other = create_running(engine, ["S1"])
    t0 = time.perf_counter()
    grow(engine, listed, other, 0, size)
    figures.add(f"seeding {size:,} rows", time.perf_counter() - t0, "s", db=kind)
    return engine, listed


def run_db(kind: str, sizes: list[int], figures: Figures) -> None:
    """Two databases, the smallest and the largest size, measured in turns; each
    figure at both sizes and its ratio."""
    small, big = min(sizes), max(sizes)
    pg = kind == "postgresql"
    with (
        tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir,
        database(Path(tmpdir), pg, name=f"listing-{small}") as small_url,
        database(Path(tmpdir), pg, name=f"listing-{big}") as big_url,
    ):
        small_db, small_cid = seeded(small_url, small, figures, kind)
        big_db, big_cid = seeded(big_url, big, figures, kind)
        small_calls = calls(small_db, small_cid, small)
        big_calls = calls(big_db, big_cid, big)
        for name in small_calls:
            at_small, at_big = in_turns(small_calls[name], big_calls[name], REPEAT)
            figures.add(f"{name}, {small:,} rows", at_small, "ms", db=kind, rows=small)
            figures.add(f"{name}, {big:,} rows", at_big, "ms", db=kind, rows=big)
            goal = "reference" if name.startswith("reference") else GOAL
            figures.ratio(f"{name}: {big:,} / {small:,} rows ({kind})", at_big, at_small, goal)
        small_db.dispose()
        big_db.dispose()


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
