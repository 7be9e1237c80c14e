"""Materialisation speed: ``python -m bench.materialise [--rows N] [--big M] [--full] [--pg]``.

For each size the parent seeds a fresh database (contacts ids 1..N in one list, a text
campaign "Hi {{ name }} ... {{ city }}" through ``--senders`` sender instances) and a
fresh child process runs ``scheduler.starts.start_campaign``: the committed chunks of
:func:`campaigns.delivery_rows.materialise_committed`, then the final in-transaction
:func:`campaigns.delivery_rows.materialise` pass and the move to ``running``. The child
checks that every recipient has exactly one queued row. Figures: rows/s of the whole
start at each size, and the big size's rate over the small one's (flat is 1.0).

Default sizes 20,000 and 200,000 recipients; ``--full`` is 100,000 and 1,000,000.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import BenchError, Figures, child_report, peak_rss_mb, report
from bench.dispatch import (
    CITIES,
    LIST_NAME,
    SEED_CHUNK,
    TEXT,
    _bulk_insert,
    _db_time,
    contact_name,
    database,
    new_list,
    open_db,
)

#: odd and not a multiple of 5, so ``i * SCATTER % 10**9`` is a bijection on 9 digits
SCATTER = 123_456_791


def scattered_phone(i: int) -> str:
    """Contact ``i``'s phone: distinct, but not in contact-id order (as after an import of
    a real spreadsheet, where ids follow the file and phones are all over the range)."""
    return f"+447{i * SCATTER % 10**9:09d}"


def seed_list(engine: Any, rows: int) -> None:
    """``rows`` contacts (ids 1..rows, phones :func:`scattered_phone`) in one list."""
    from storage.types import utcnow

    with engine.begin() as conn:
        t = _db_time(conn, utcnow())
        list_id = new_list(conn, LIST_NAME, t)
        cols: tuple[str, ...] = ("id", "phone", "raw_phone", "name", "attributes", "opted_out")
        cols += ("created_at", "updated_at")
        for lo in range(0, rows, SEED_CHUNK):
            ids = range(lo + 1, min(rows, lo + SEED_CHUNK) + 1)
            contacts = []
            for i in ids:
                city = f'{{"city": "{CITIES[i % len(CITIES)]}"}}'
                p = scattered_phone(i)
                contacts.append((i, p, p, contact_name(i), city, False, t, t))
            _bulk_insert(conn, "contacts", cols, contacts)
            members = [(list_id, i, t) for i in ids]
            _bulk_insert(conn, "list_members", ("list_id", "contact_id", "added_at"), members)
        if conn.dialect.name == "postgresql":  # explicit ids: move the sequence past them
            conn.exec_driver_sql(
                "SELECT setval(pg_get_serial_sequence('contacts', 'id'), "
                "(SELECT MAX(id) FROM contacts))"
            )


def create_campaign(url_engine: Any, instances: list[str]) -> int:
    """A text campaign to the benchmark list through ``instances`` (scheduled now)."""
    from campaigns.campaign_file import parse_campaign
    from campaigns.service import create_campaign as create
    from storage.queries import instances as iq
    from storage.types import utcnow

    with url_engine.begin() as conn:  # gatecast's record of the senders (create checks it)
        iq.ensure(conn, instances, now=utcnow())
    spec = parse_campaign(
        {
            "name": "bench",
            "list": LIST_NAME,
            "instances": instances,
            "message": {"type": "text", "text": TEXT},
            "schedule": {"timezone": "UTC"},
        }
    )
    return create(url_engine, spec).id


def _child(url: str, campaign_id: int) -> dict[str, Any]:
    """Start the campaign (materialise it); figures of this process."""
    from scheduler.starts import start_campaign
    from storage.engine import make_engine
    from storage.types import utcnow

    engine = make_engine(url)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    started = start_campaign(engine, campaign_id, now=utcnow(), enforce_grace=False)
    took = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    if started.outcome != "started":
        raise BenchError(f"campaign did not start: {started.detail}")
    with engine.connect() as conn:
        rows, targets = conn.exec_driver_sql(
            "SELECT COUNT(*), COUNT(DISTINCT target) FROM deliveries "
            f"WHERE campaign_id = {int(campaign_id)}"
        ).one()
    engine.dispose()
    return {
        "queued": started.queued,
        "skipped": started.skipped,
        "rows": int(rows),
        "targets": int(targets),
        "seconds": took,
        "cpu_seconds": cpu,
        "load": os.getloadavg()[0],
        "peak_rss_mb": peak_rss_mb(),
    }


def run_size(tmp: Path, rows: int, pg: bool, senders: int) -> dict[str, Any]:
    """Seed ``rows`` recipients, then start the campaign in a fresh child process."""
    with database(tmp, pg, name=f"materialise-{rows}") as url:
        engine = open_db(url)
        seed_list(engine, rows)
        instances = [f"BENCH{i}" for i in range(1, senders + 1)]
        cid = create_campaign(engine, instances)
        engine.dispose()
        cmd = [sys.executable, "-m", "bench.materialise", "--child", "--url", url]
        cmd += ["--campaign", str(cid)]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
        if proc.returncode != 0:
            raise BenchError(f"start of {rows:,} recipients failed (exit {proc.returncode})")
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if not (result["queued"] == result["rows"] == result["targets"] == rows):
        raise BenchError(f"{rows:,} recipients: wrong rows: {result}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=20_000, help="small list (20,000)")
    parser.add_argument("--big", type=int, default=200_000, help="big list (200,000)")
    parser.add_argument("--full", action="store_true", help="100,000 and 1,000,000")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument("--senders", type=int, default=1, help="sender instances (1)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--campaign", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child_report("materialise child", lambda: _child(args.url, args.campaign))
    small, big = (100_000, 1_000_000) if args.full else (args.rows, args.big)
    figures = Figures.begin("materialise")
    return report(figures, lambda: measure(args, small, big, figures))


def measure(args: argparse.Namespace, small: int, big: int, figures: Figures) -> None:
    """Both sizes, each in a fresh database and child process; then the figures."""
    db_kind = "postgresql" if args.pg else "sqlite"
    with tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir:
        tmp = Path(tmpdir)
        results = {n: run_size(tmp, n, args.pg, args.senders) for n in (small, big)}
    for n, r in results.items():
        figures.add(
            f"materialise {n:,} recipients",
            n / r["seconds"],
            "rows/s",
            db=db_kind,
            senders=args.senders,
            seconds=round(r["seconds"], 2),
            load=round(r["load"], 1),
        )
        figures.add(f"materialise {n:,}, per CPU-second", n / r["cpu_seconds"], "rows/s")
        figures.add(f"peak RSS {n:,}", r["peak_rss_mb"], "MB")
    figures.ratio(
        f"rows/s {big:,} / {small:,}",
        big / results[big]["seconds"],
        small / results[small]["seconds"],
        goal=">= 0.9 (flat)",
    )


if __name__ == "__main__":
    raise SystemExit(main())
