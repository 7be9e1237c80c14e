"""Report export speed and memory: ``python -m bench.reports [--rows N] [--full] [--pg]``.

Bulk-inserts two campaigns (``--rows`` deliveries and a quarter of that, a realistic
mix of read / delivered / sent / failed, with their contacts), then writes each
campaign's CSV and XLSX with :func:`campaigns.reports.write_report`, every export in a
fresh process so its peak RSS is its own. Figures: seconds, rows/s, the exporting
process's CPU seconds (its threads and worker processes, not PostgreSQL's server
processes: steadier than wall time on a shared machine), peak RSS and the RSS growth
during the export (the exporting process's: a CSV worker's is about the same, 60 MB).
"Streamed with flat memory" is judged by comparing the growth of the two sizes (a 4x
bigger report must not need 4x the memory).

Default 200,000 rows; ``--full`` is the issue's 1,000,000.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    BenchError,
    Figures,
    child_report,
    current_rss_mb,
    peak_rss_mb,
    report,
    stopwatch,
)
from bench.dispatch import database, open_db, seed_audience, seed_campaign


def _cpu_seconds() -> float:
    """This process's CPU (all threads) and its reaped children's (the CSV workers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _child(url: str, campaign_id: int, out: Path) -> dict[str, Any]:
    from campaigns.reports import write_report
    from storage.engine import make_engine

    engine = make_engine(url)
    with engine.connect() as conn:  # connect and warm imports before the baseline
        conn.exec_driver_sql("SELECT 1")
    import openpyxl  # noqa: F401  (imported by the XLSX writer: not part of the growth)

    before = current_rss_mb()
    cpu = _cpu_seconds()
    with stopwatch() as t:
        write_report(engine, campaign_id, out)
    cpu = _cpu_seconds() - cpu
    engine.dispose()
    return {
        "seconds": t[0],
        "cpu_seconds": cpu,
        "peak_rss_mb": peak_rss_mb(),
        "growth_mb": peak_rss_mb() - before,
        "bytes": out.stat().st_size,
    }


def _export(url: str, campaign_id: int, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.reports", "--child", "--url", url]
    cmd += ["--campaign", str(campaign_id), "--out", str(out)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise BenchError(f"export of {out.name} failed (exit {proc.returncode})")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _csv_rows(path: Path) -> int:
    with path.open(encoding="utf-8-sig") as fh:
        return sum(1 for _ in fh) - 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000, help="deliveries (default 200,000)")
    parser.add_argument("--full", action="store_true", help="1,000,000 deliveries")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--campaign", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child_report("reports child", lambda: _child(args.url, args.campaign, args.out))
    rows = 1_000_000 if args.full else args.rows
    small = rows // 4
    figures = Figures.begin("reports")
    return report(figures, lambda: measure(args, rows, small, figures))


def measure(args: argparse.Namespace, rows: int, small: int, figures: Figures) -> None:
    """Both campaigns exported as CSV and XLSX, each export in a fresh process."""
    db_kind = "postgresql" if args.pg else "sqlite"
    with tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir:
        tmp = Path(tmpdir)
        with database(tmp, args.pg) as url:
            engine = open_db(url)
            with stopwatch() as t_seed:
                seed_audience(engine, rows)
                big_id = seed_campaign(engine, rows)
                small_id = seed_campaign(engine, small, name="bench small")
            engine.dispose()
            figures.add("seed (bulk insert)", (rows + small) / t_seed[0], "rows/s")
            results: dict[tuple[str, int], dict[str, Any]] = {}
            for fmt in ("csv", "xlsx"):
                for cid, n in ((small_id, small), (big_id, rows)):
                    out = tmp / f"report-{n}.{fmt}"
                    r = _export(url, cid, out)
                    if fmt == "csv" and _csv_rows(out) != n:
                        raise BenchError(f"{out.name}: {_csv_rows(out)} rows, expected {n}")
                    results[(fmt, n)] = r
                    out.unlink()
        for fmt in ("csv", "xlsx"):
            for n in (small, rows):
                r = results[(fmt, n)]
                goal = {"goal": "<= 5 s at 1M"} if fmt == "csv" and n == rows else {}
                figures.add(f"{fmt} {n:,} rows", r["seconds"], "s", db=db_kind, **goal)
                figures.add(f"{fmt} {n:,} rows/s", n / r["seconds"], "rows/s")
                # the exporter's CPU (threads and workers), not the database server's
                figures.add(f"{fmt} {n:,} exporter CPU", r["cpu_seconds"], "s")
                figures.add(f"{fmt} {n:,} peak RSS", r["peak_rss_mb"], "MB")
                figures.add(f"{fmt} {n:,} RSS growth", r["growth_mb"], "MB")
            big, little = results[(fmt, rows)], results[(fmt, small)]
            figures.ratio(
                f"{fmt} peak RSS {rows:,} / {small:,} rows",
                big["peak_rss_mb"],
                little["peak_rss_mb"],
                goal="flat: < 1.2 for 4x the rows",
            )
        if rows < 1_000_000:
            per_s = rows / results[("csv", rows)]["seconds"]
            figures.add("csv seconds projected to 1M", 1_000_000 / per_s, "s", goal="<= 5")


if __name__ == "__main__":
    raise SystemExit(main())
