"""Contact search: ``python -m bench.contact_search [--full] [--no-pg]``.

Issue 19: a contact search answers in under 200 ms p95 over 1,000,000 contacts on SQLite
and PostgreSQL. Per database and size the parent seeds N contacts (names from a pool of 40
first and 40 last names, some accented; a city among 8, some accented; phones scattered;
all in the list "customers", every 10th tagged "vip"; ``folded``/``folded_name`` as the
import stores them) and times ``campaigns.contacts.search`` (one page of 50 and the total,
what every face asks) for each query kind, REPEATS times after one warm-up: a rare name
("nunez", typed without its accent), a common name part ("person"), phone digits, an
attribute value ("zurich"), a miss, and a name within the list and tag filters. Figures:
p50 and p95 per kind, and p95 of every query together against the 200 ms goal.

Default: 10,000 contacts (a minute); ``--full`` adds 1,000,000 (seeding takes minutes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import Figures, each_database, report
from bench.dispatch import SEED_CHUNK, _bulk_insert, _db_time, database, new_list
from bench.dispatch import open_db as _open_db
from bench.materialise import scattered_phone

FIRST = ("Ana", "Ben", "Chloé", "Dan", "Émile", "Fay", "Gus", "Hana", "Ivo", "Jürgen") * 4
LAST = ("Smith", "Núñez", "Müller", "Lee", "Okafor", "Dubois", "Rossi", "Kim", "Silva", "Ng")
CITIES = ("London", "Berlin", "Zürich", "Madrid", "Rome", "Lagos", "Mumbai", "Lima")
REPEATS = 30
GOAL_MS = 200.0

QUERIES: dict[str, dict[str, Any]] = {
    "rare name": {"query": "nunez 7"},
    "common name part": {"query": "person"},
    "phone digits": {"query": "447 1234"},
    "attribute value": {"query": "zurich"},
    "no match": {"query": "zzqx"},
    "name in list and tag": {"query": "muller", "list_name": "customers", "tag": "vip"},
}


def _name(i: int) -> str:
    return f"{FIRST[i % len(FIRST)]} {LAST[(i // 7) % len(LAST)]} {i} person"


def seed(engine: Any, rows: int) -> None:
    """Contacts 1..rows in "customers", every 10th tagged "vip"."""
    from campaigns.segments import fold_attributes, fold_value
    from storage.types import utcnow

    with engine.begin() as conn:
        t = _db_time(conn, utcnow())
        mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        list_id = new_list(conn, "customers", t)
        tag_id = conn.exec_driver_sql(
            f"INSERT INTO tags (name, created_at) VALUES ({mark}, {mark}) RETURNING id", ("vip", t)
        ).scalar_one()
        cols: tuple[str, ...] = ("id", "phone", "raw_phone", "name", "folded_name", "attributes")
        cols += ("folded",)
        cols += ("opted_out", "created_at", "updated_at")
        for lo in range(0, rows, SEED_CHUNK):
            contacts, members, tagged = [], [], []
            for i in range(lo + 1, min(rows, lo + SEED_CHUNK) + 1):
                attrs = {"city": CITIES[i % len(CITIES)], "plan": ("gold", "silver")[i % 2]}
                p, name = scattered_phone(i), _name(i)
                contacts.append(
                    (i, p, p, name, fold_value(name), json.dumps(attrs),
                     json.dumps(fold_attributes(attrs)), False, t, t)
                )  # fmt: skip
                members.append((list_id, i, t))
                if i % 10 == 0:
                    tagged.append((tag_id, i))
            _bulk_insert(conn, "contacts", cols, contacts)
            _bulk_insert(conn, "list_members", ("list_id", "contact_id", "added_at"), members)
            _bulk_insert(conn, "contact_tags", ("tag_id", "contact_id"), tagged)
        conn.exec_driver_sql("ANALYZE")


def run_db(tmp: Path, rows: int, pg: bool, figures: Figures) -> None:
    """Seed one database and time every query kind; add its figures."""
    from campaigns.contacts import Search, search
    from campaigns.search_index import catch_up_search

    db = "postgresql" if pg else "sqlite"
    with database(tmp, pg, name=f"contact-search-{rows}") as url:
        engine = _open_db(url)
        seed(engine, rows)
        start = time.perf_counter()  # the seed queued every contact for the search table
        caught = catch_up_search(engine)
        took = time.perf_counter() - start
        figures.add(f"{db} {rows:,}: search catch-up", caught / took, "contacts/s")
        every: list[float] = []
        for kind, params in QUERIES.items():
            wanted = Search(**params)
            found = search(engine, wanted, limit=50)  # warm-up
            times = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                search(engine, wanted, limit=50)
                times.append((time.perf_counter() - start) * 1000)
            every += times
            figures.add(
                f"{db} {rows:,}: {kind}, p50",
                statistics.median(times),
                "ms",
                p95=round(_p95(times), 2),
                matches=found.total,
            )
        engine.dispose()
    figures.add(f"{db} {rows:,}: every query, p95", _p95(every), "ms", goal=f"< {GOAL_MS:.0f}")


def _p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20)[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="also 1,000,000 contacts")
    parser.add_argument("--rows", type=int, nargs="*", help="sizes instead of the default")
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    args = parser.parse_args()
    sizes = args.rows or ([10_000, 1_000_000] if args.full else [10_000])
    figures = Figures.begin("contact_search")

    def measure() -> None:
        each_database(sizes, args.no_pg, lambda tmp, rows, pg: run_db(tmp, rows, pg, figures))

    return report(figures, measure)


if __name__ == "__main__":
    raise SystemExit(main())
