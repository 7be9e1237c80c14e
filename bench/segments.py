"""Segment materialisation against a plain list: ``python -m bench.segments [--rows N]
[--full] [--no-pg]``.

Issue 19: a segment over N contacts with two attribute conditions and an exclusion list
materialises at >= 0.5x the rate of a plain list of the same size, on SQLite and
PostgreSQL, both in one run. Per database the parent seeds N contacts (ids 1..N, a city
among 8 and a plan among 3, folded as an import stores them) in the list "customers", 1 %
of them also in "blocked", and a list "plain" holding exactly the contacts the segment
selects (``lists = ["customers"]``, ``where = {city = [7 of 8 cities], plan = ["gold",
"silver"]}``, ``exclude_lists = ["blocked"]``: about 57 % of N). Three campaigns with the
same text are started, each in a fresh child process (``scheduler.starts.start_campaign``:
for the segment that includes its one ``INSERT ... SELECT`` over all N contacts): the
plain list, the segment, the plain list again; the reference is the faster plain start.
Each child checks one queued row per expected recipient. Figures: recipients/s of each,
segment / plain (the goal), and the same per CPU-second of the starting process (on a
shared machine the wall clock also counts waits for the CPU).

Default N = 200,000 (a few minutes for both databases); ``--full`` is 1,000,000.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import BenchError, Figures, each_database, report
from bench.dispatch import (
    SEED_CHUNK,
    TEXT,
    _bulk_insert,
    _db_time,
    contact_name,
    database,
    new_list,
)
from bench.dispatch import open_db as _open_db
from bench.materialise import scattered_phone

CITIES = ("London", "Berlin", "Paris", "Madrid", "Rome", "Lagos", "Mumbai", "Lima")
PLANS = ("gold", "silver", "bronze")
WANTED_CITIES = CITIES[:-1]
WANTED_PLANS = PLANS[:2]
#: every BLOCKED-th contact is in the exclusion list
BLOCKED = 100


def _selected(i: int) -> bool:
    return (
        CITIES[i % len(CITIES)] in WANTED_CITIES
        and PLANS[i % len(PLANS)] in WANTED_PLANS
        and i % BLOCKED != 0
    )


def seed(engine: Any, rows: int) -> int:
    """Contacts 1..rows with the lists "customers", "blocked" and "plain"; how many the
    segment selects (the size of "plain")."""
    from campaigns.segments import fold_attributes
    from storage.types import utcnow

    selected = 0
    with engine.begin() as conn:
        t = _db_time(conn, utcnow())
        ids = {name: new_list(conn, name, t) for name in ("customers", "blocked", "plain")}
        cols: tuple[str, ...] = ("id", "phone", "raw_phone", "name", "attributes", "folded")
        cols += ("opted_out", "created_at", "updated_at")
        for lo in range(0, rows, SEED_CHUNK):
            batch = range(lo + 1, min(rows, lo + SEED_CHUNK) + 1)
            contacts, members = [], []
            for i in batch:
                attrs = {"city": CITIES[i % len(CITIES)], "plan": PLANS[i % len(PLANS)]}
                p = scattered_phone(i)
                contacts.append(
                    (i, p, p, contact_name(i), json.dumps(attrs),
                     json.dumps(fold_attributes(attrs)), False, t, t)
                )  # fmt: skip
                members.append((ids["customers"], i, t))
                if i % BLOCKED == 0:
                    members.append((ids["blocked"], i, t))
                if _selected(i):
                    members.append((ids["plain"], i, t))
                    selected += 1
            _bulk_insert(conn, "contacts", cols, contacts)
            _bulk_insert(conn, "list_members", ("list_id", "contact_id", "added_at"), members)
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(
                "SELECT setval(pg_get_serial_sequence('contacts', 'id'), "
                "(SELECT MAX(id) FROM contacts))"
            )
            conn.exec_driver_sql("ANALYZE")
        else:
            conn.exec_driver_sql("ANALYZE")
    return selected


def _campaign(engine: Any, audience: dict[str, Any]) -> int:
    from campaigns.campaign_file import parse_campaign
    from campaigns.service import create_campaign
    from storage.queries import instances as iq
    from storage.types import utcnow

    with engine.begin() as conn:
        iq.ensure(conn, ["BENCH1"], now=utcnow())
    spec = parse_campaign(
        {
            "name": "bench",
            **audience,
            "instances": ["BENCH1"],
            "message": {"type": "text", "text": TEXT},
            "schedule": {"timezone": "UTC"},
        }
    )
    return create_campaign(engine, spec).id


SEGMENT = {
    "audience": {
        "lists": ["customers"],
        "where": {"city": list(WANTED_CITIES), "plan": list(WANTED_PLANS)},
        "exclude_lists": ["blocked"],
    }
}


def _start(url: str, campaign_id: int, expected: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.materialise", "--child", "--url", url]
    cmd += ["--campaign", str(campaign_id)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise BenchError(f"start of campaign {campaign_id} failed (exit {proc.returncode})")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if not (result["queued"] == result["rows"] == result["targets"] == expected):
        raise BenchError(f"campaign {campaign_id}: expected {expected:,} rows: {result}")
    return result


def run_db(tmp: Path, rows: int, pg: bool, figures: Figures) -> None:
    """Seed one database and time the three starts; add its figures."""
    db = "postgresql" if pg else "sqlite"
    with database(tmp, pg, name=f"segments-{rows}") as url:
        engine = _open_db(url)
        expected = seed(engine, rows)
        plain_a = _campaign(engine, {"list": "plain"})
        segment = _campaign(engine, SEGMENT)
        plain_b = _campaign(engine, {"list": "plain"})
        engine.dispose()
        first = _start(url, plain_a, expected)
        seg = _start(url, segment, expected)
        second = _start(url, plain_b, expected)
    plain = min((first, second), key=lambda r: float(r["seconds"]))
    for label, r in (("plain list", plain), ("segment", seg)):
        figures.add(
            f"{db}: {label}, {expected:,} of {rows:,} contacts",
            expected / r["seconds"],
            "recipients/s",
            seconds=round(r["seconds"], 2),
            cpu_seconds=round(r["cpu_seconds"], 2),
            load=round(r["load"], 1),
        )
    figures.ratio(
        f"{db}: segment / plain list",
        expected / seg["seconds"],
        expected / plain["seconds"],
        goal=">= 0.5",
    )
    # the same per CPU-second of the starting process (the database server's CPU is not in
    # it on PostgreSQL): what the wall-clock ratio is on a loaded machine less the waits
    plain_cpu = min(float(first["cpu_seconds"]), float(second["cpu_seconds"]))
    figures.ratio(
        f"{db}: segment / plain list, per CPU-second",
        expected / seg["cpu_seconds"],
        expected / plain_cpu,
        goal="(context)",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000, help="contacts (200,000)")
    parser.add_argument("--full", action="store_true", help="1,000,000 contacts")
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    args = parser.parse_args()
    rows = 1_000_000 if args.full else args.rows
    figures = Figures.begin("segments")

    def measure() -> None:
        each_database([rows], args.no_pg, lambda tmp, n, pg: run_db(tmp, n, pg, figures))

    return report(figures, measure)


if __name__ == "__main__":
    raise SystemExit(main())
