"""Contact import speed and memory: ``python -m bench.import [--rows N] [--full] [--pg]``.

Generates a CSV (mostly distinct numbers: 60 % international in 12 countries, 40 %
national US formats, about 1 % duplicates and 0.5 % bad rows) and an XLSX (a third of
the phones stored as numbers, as exports do) in a temp dir, then measures, each in a
fresh process so peak RSS is its own:

- reading only (CSV; XLSX with calamine and with openpyxl: the engine choice);
- phone normalisation of the distinct values, one process vs a 2-process pool;
- the whole import (read, normalise, dedupe, upsert, list membership) into SQLite,
  and PostgreSQL with ``--pg``;
- its reference in the same run, on the same database: the file's rows with distinct
  phone cells loaded as they are, nothing read into a table, validated or merged, into
  ``contacts`` and ``list_members`` by the plainest bulk path (``COPY`` on PostgreSQL,
  one ``executemany`` per table on SQLite), foreign keys as the schema has them;
- with ``--before DIR`` (a copy of an earlier tree, e.g. ``git archive``), the same
  imports by that tree's code, for a before/after at one machine load.

Each rate is printed as rows per wall-clock second (with the 1-minute load average when
it was taken), rows per CPU-second of the measuring process, and on PostgreSQL rows per
CPU-second of the measuring process and its server backends together (the server is on
this machine): what the code costs, apart from a busy machine's.

Default sizes (200k CSV rows, 20k XLSX rows) finish in well under two minutes;
``--full`` is the issue's 1,000,000-row CSV and 100,000-row XLSX.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import Figures, peak_rss_mb

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
# (calling code, national prefix digits of a valid mobile/landline, digits to add)
COUNTRIES = [
    ("44", "7400", 6),
    ("49", "15123", 6),
    ("33", "612", 6),
    ("34", "612", 6),
    ("39", "312", 7),
    ("55", "1191", 7),
    ("91", "98765", 5),
    ("234", "803", 7),
    ("61", "412", 6),
    ("52", "55", 8),
    ("81", "901", 7),
    ("27", "82", 7),
]
US_AREAS = ["202", "212", "305", "312", "415", "512", "617", "646", "713", "206"]
CITIES = ["London", "Berlin", "Paris", "Madrid", "Rome", "São Paulo", "Mumbai", "Lagos"]
PLANS = ["basic", "pro", "trial", "premium"]


def _phone(rng: random.Random, i: int) -> tuple[str, bool]:
    """A phone value (mostly distinct, by ``i``) and whether it is stored international."""
    roll = rng.random()
    if roll < 0.005:
        return rng.choice(["", "n/a", "123", "4.47E+11", "call me"]), False
    if roll < 0.6:
        cc, prefix, extra = COUNTRIES[i % len(COUNTRIES)]
        tail = f"{(i * 7919) % 10**extra:0{extra}d}"
        return f"+{cc} {prefix} {tail}", True
    area = US_AREAS[i % len(US_AREAS)]
    n = (i * 104729) % 10**7
    exchange = 200 + n // 10**4 % 800
    line = n % 10**4
    fmt = rng.choice(
        ["({a}) {e}-{l:04d}", "{a}-{e}-{l:04d}", "{a}{e}{l:04d}", "+1 {a} {e} {l:04d}"]
    )
    return fmt.format(a=area, e=exchange, l=line), False


def make_csv(path: Path, rows: int, seed: int = 1) -> None:
    """Write the benchmark CSV."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write("name,phone,city,plan\n")
        last = ""
        for i in range(rows):
            phone, _ = _phone(rng, i)
            if last and rng.random() < 0.01:
                phone = last  # a duplicate
            last = phone
            city = CITIES[i % len(CITIES)]
            fh.write(f"Person {i},{phone},{city},{PLANS[i % 4]}\n")


def make_xlsx(path: Path, rows: int, seed: int = 2) -> None:
    """Write the benchmark XLSX (openpyxl write-only mode)."""
    import openpyxl

    rng = random.Random(seed)
    wb = openpyxl.Workbook(write_only=True)
    ws = wb.create_sheet("Contacts")
    ws.append(["name", "phone", "city", "plan"])
    for i in range(rows):
        phone, international = _phone(rng, i)
        value: Any = phone
        if international and i % 3 == 0:
            value = float(phone.replace("+", "").replace(" ", ""))  # a number cell
        ws.append([f"Person {i}", value, CITIES[i % len(CITIES)], PLANS[i % 4]])
    wb.save(path)


# --- scenarios: each runs in its own process and prints one JSON object ----------------


def _scenario_read(path: Path, engine: str) -> dict[str, Any]:
    from campaigns.spreadsheets import read_table

    start, cpu = time.perf_counter(), time.process_time()
    table = read_table(path, engine=engine)  # type: ignore[arg-type]
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"rows": len(table.frame), "seconds": took, "cpu_seconds": cpu}


def _normalise_chunk(args: tuple[list[str], str]) -> int:
    from campaigns.phones import normalise_batch

    values, region = args
    e164, _ = normalise_batch(values, region)  # what the importer calls
    return sum(1 for e in e164 if e)


def _scenario_phones(path: Path, workers: int) -> dict[str, Any]:
    import pandas as pd

    from campaigns.spreadsheets import read_table

    values = list(pd.unique(read_table(path).frame["phone"]))
    start = time.perf_counter()
    if workers <= 1:
        valid = _normalise_chunk((values, "US"))
    else:
        size = max(1, len(values) // (workers * 8))
        chunks = [(values[i : i + size], "US") for i in range(0, len(values), size)]
        with ProcessPoolExecutor(workers) as pool:
            valid = sum(pool.map(_normalise_chunk, chunks))
    took = time.perf_counter() - start
    return {"rows": len(values), "valid": valid, "seconds": took}


def _server_cpu(url: str) -> float:
    """CPU seconds so far of the PostgreSQL backends serving ``url``'s database (a local
    server names the database in each backend's process title); 0 for SQLite."""
    import psutil
    import sqlalchemy as sa

    parsed = sa.engine.make_url(url)
    if not parsed.drivername.startswith("postgresql"):
        return 0.0
    total = 0.0
    for proc in psutil.process_iter(["cmdline"]):
        title = " ".join(proc.info["cmdline"] or ())
        if title.startswith("postgres: ") and f" {parsed.database} " in title:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
    return total


def _settle(url: str) -> None:
    """Write out what earlier scenarios left dirty (the OS's page cache; on PostgreSQL the
    server's buffers, by a checkpoint), so that a measurement pays for its own writes only."""
    import sqlalchemy as sa

    os.sync()
    if sa.engine.make_url(url).drivername.startswith("postgresql"):
        eng = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with eng.connect() as conn:
            conn.execute(sa.text("CHECKPOINT"))
        eng.dispose()


def _measured(url: str, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``work()`` (it returns its counts) once the disk has settled (:func:`_settle`);
    seconds, our CPU and the server's."""
    _settle(url)
    server, start, cpu = _server_cpu(url), time.perf_counter(), time.process_time()
    counts = work()
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    server = _server_cpu(url) - server
    out: dict[str, Any] = {"seconds": took, "cpu_seconds": cpu, "server_cpu_seconds": server}
    return out | counts


def _scenario_import(path: Path, url: str, engine: str) -> dict[str, Any]:
    import inspect

    from campaigns.importer import ImportOptions, import_file
    from storage.engine import make_engine, upgrade

    # an earlier tree (--before) may fill the search in the import's transaction itself
    queued = "catch_up" in inspect.signature(import_file).parameters

    db = make_engine(url)
    upgrade(db)
    with db.connect() as conn:  # the pool's connection (and its backend) made beforehand
        conn.exec_driver_sql("SELECT 1")

    def work() -> dict[str, Any]:
        opts = ImportOptions("bench", excel_engine=engine)  # type: ignore[arg-type]
        options: dict[str, Any] = {"catch_up": False} if queued else {}
        report = import_file(db, path, opts, **options)
        counts = report.to_dict(include_rejects=False)
        keep = ("rows_read", "imported", "duplicates", "invalid")
        return {"rows": report.rows_read} | {k: counts[k] for k in keep}

    result = _measured(url, work)
    # what import_file does next: the contact search catches up (its own figure)
    result["search"] = {"rows": 0, "seconds": 0.0, "cpu_seconds": 0.0, "server_cpu_seconds": 0.0}
    if queued:
        from campaigns.search_index import catch_up_search

        result["search"] = _measured(url, lambda: {"rows": catch_up_search(db)})
    db.dispose()
    return result


def _scenario_reference(path: Path, url: str) -> dict[str, Any]:
    """The reference: the CSV's rows with distinct phone cells stored as they are."""
    import csv

    from storage.engine import make_engine, upgrade

    db = make_engine(url)
    upgrade(db)
    with db.connect() as conn:
        conn.exec_driver_sql("SELECT 1")

    def work() -> dict[str, Any]:
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh)
            next(reader)
            cells = list(reader)
        rows = {phone[:20]: (name, city, plan) for name, phone, city, plan in cells}
        now = "2026-01-01 00:00:00+00"
        contacts = [
            (phone, phone, name, json.dumps({"city": city, "plan": plan}), False, now, now)
            for phone, (name, city, plan) in rows.items()
        ]
        with db.begin() as conn:
            raw: Any = conn.connection.driver_connection
            cols = "phone, raw_phone, name, attributes, opted_out, created_at, updated_at"
            if db.dialect.name == "postgresql":
                list_id = conn.exec_driver_sql(
                    "INSERT INTO lists (name, description, created_at)"
                    " VALUES ('reference', '', now()) RETURNING id"
                ).scalar_one()
                with raw.cursor() as cur:
                    ids = [
                        r[0]
                        for r in cur.execute(
                            "SELECT nextval('contacts_id_seq') FROM generate_series(1, %s)",
                            (len(contacts),),
                        )
                    ]
                    with cur.copy(f"COPY contacts (id, {cols}) FROM STDIN") as copy:
                        for cid, row in zip(ids, contacts, strict=True):
                            copy.write_row((cid, *row))
                    with cur.copy(
                        "COPY list_members (list_id, contact_id, added_at) FROM STDIN"
                    ) as copy:
                        for cid in ids:
                            copy.write_row((list_id, cid, now))
            else:
                conn.exec_driver_sql(
                    "INSERT INTO lists (name, description, created_at)"
                    " VALUES ('reference', '', '2026-01-01 00:00:00')"
                )
                list_id = conn.exec_driver_sql("SELECT max(id) FROM lists").scalar_one()
                first = conn.exec_driver_sql(
                    "SELECT coalesce(max(id), 0) FROM contacts"
                ).scalar_one()
                ids = list(range(first + 1, first + 1 + len(contacts)))
                raw.executemany(
                    f"INSERT INTO contacts (id, {cols}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    ((cid, *row) for cid, row in zip(ids, contacts, strict=True)),
                )
                raw.executemany(
                    "INSERT INTO list_members (list_id, contact_id, added_at) VALUES (?, ?, ?)",
                    ((list_id, cid, now) for cid in ids),
                )
        return {"rows": len(cells), "stored": len(contacts)}

    result = _measured(url, work)
    db.dispose()
    return result


def _child(args: argparse.Namespace) -> None:
    path = Path(args.file)
    if args.scenario == "read":
        result = _scenario_read(path, args.engine)
    elif args.scenario == "phones":
        result = _scenario_phones(path, args.workers)
    elif args.scenario == "reference":
        result = _scenario_reference(path, args.url)
    else:
        result = _scenario_import(path, args.url, args.engine)
    result["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(result))


def _run(*extra: str, tree: Path | None = None) -> dict[str, Any]:
    """One scenario in a fresh process; with ``tree``, importing that tree's code."""
    cmd = [sys.executable, "-m", "bench.import", "--child", *extra]
    env = None
    if tree is not None:  # this file's scenarios, the earlier tree's packages
        here = str(Path(__file__).resolve().parents[1])
        env = os.environ | {"PYTHONPATH": os.pathsep.join([str(tree.resolve()), here])}
        cmd = [sys.executable, "-c", _BEFORE_CHILD, *extra]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=env).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


# runs this module's _child with the earlier tree first on the path
_BEFORE_CHILD = (
    "import runpy, sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "sys.argv = ['bench.import', '--child', *sys.argv[1:]]; "
    f"runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')"
)


def _pg_database() -> tuple[str, str]:
    import sqlalchemy as sa

    name = f"gatecast_bench_{uuid.uuid4().hex[:8]}"
    eng = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    eng.dispose()
    return name, sa.engine.make_url(PG_ADMIN).set(database=name).render_as_string(False)


def _pg_drop(name: str) -> None:
    import sqlalchemy as sa

    eng = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    eng.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000, help="CSV rows")
    parser.add_argument("--xlsx-rows", type=int, default=20_000, help="XLSX rows")
    parser.add_argument("--full", action="store_true", help="1,000,000 CSV and 100,000 XLSX rows")
    parser.add_argument("--pg", action="store_true", help="also import into PostgreSQL")
    parser.add_argument(
        "--before", metavar="DIR", help="an earlier tree (git archive): its imports too"
    )
    parser.add_argument("--csv-only", action="store_true", help="leave out the XLSX figures")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenario", default="import", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--engine", default="calamine", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    csv_rows, xlsx_rows = (1_000_000, 100_000) if args.full else (args.rows, args.xlsx_rows)
    figures = Figures.begin("import")
    with tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmp:
        d = Path(tmp)
        csv_path, xlsx_path = d / "contacts.csv", d / "contacts.xlsx"
        make_csv(csv_path, csv_rows)
        if not args.csv_only:
            make_xlsx(xlsx_path, xlsx_rows)

        def rate(name: str, r: dict[str, Any], goal: str | None = None) -> None:
            extra = {"goal": goal} if goal else {}
            load = round(os.getloadavg()[0], 2)
            figures.add(
                f"{name} rows/s",
                r["rows"] / r["seconds"],
                "rows/s",
                rows=r["rows"],
                load_average=load,
                **extra,
            )
            # rows per CPU-second of the importing process: what the code costs, apart
            # from the machine's load; with the server's backends when it has any
            figures.add(f"{name} rows/cpu-s", r["rows"] / max(r["cpu_seconds"], 1e-9), "rows/s")
            if r.get("server_cpu_seconds"):
                both = r["cpu_seconds"] + r["server_cpu_seconds"]
                figures.add(f"{name} rows/cpu-s with server", r["rows"] / both, "rows/s")
            figures.add(
                f"{name} peak RSS", r["peak_rss_mb"], "MB", **({"goal": "< 500"} if goal else {})
            )

        def import_and_reference(db: str, url_for: Any, goal: str) -> None:
            """The import, its reference and (``--before``) the earlier tree's import,
            each into a fresh database; ratios of the same run."""
            now = _run("--file", str(csv_path), "--url", url_for("import"))
            rate(f"csv import {db}", now, goal)
            search = now["search"] | {"peak_rss_mb": now["peak_rss_mb"]}
            rate(f"search catch-up after import {db}", search)
            whole = {
                key: now[key] + search[key]
                for key in ("seconds", "cpu_seconds", "server_cpu_seconds")
            }
            rate(f"csv import {db} with search caught up", now | whole)
            ref = _run("--scenario", "reference", "--file", str(csv_path), "--url", url_for("ref"))
            rate(f"csv reference load {db}", ref)
            figures.ratio(
                f"csv import {db} / reference load", ref["seconds"], now["seconds"], goal="(speed)"
            )
            if args.before:
                tree = Path(args.before)
                then = _run("--file", str(csv_path), "--url", url_for("before"), tree=tree)
                then_whole = {
                    key: then[key] + then["search"][key]
                    for key in ("seconds", "cpu_seconds", "server_cpu_seconds")
                }
                rate(f"csv import {db}, before", then)
                rate(f"csv import {db} with search caught up, before", then | then_whole)
                figures.ratio(
                    f"csv import {db} / before", then["seconds"], now["seconds"], goal="(speed-up)"
                )
                figures.ratio(
                    f"csv import {db} with search caught up / before",
                    then_whole["seconds"],
                    whole["seconds"],
                    goal="(speed-up)",
                )

        rate("csv read", _run("--scenario", "read", "--file", str(csv_path)))
        one = _run("--scenario", "phones", "--file", str(csv_path), "--workers", "1")
        two = _run("--scenario", "phones", "--file", str(csv_path), "--workers", "2")
        figures.add("phones/s distinct, 1 process", one["rows"] / one["seconds"], "phones/s")
        figures.add("phones/s distinct, 2-process pool", two["rows"] / two["seconds"], "phones/s")
        figures.ratio("pool speed-up", one["seconds"], two["seconds"], goal="> 1.3 to be worth it")
        import_and_reference("sqlite", lambda tag: f"sqlite:///{d / f'{tag}.db'}", ">= 100k")
        if args.pg:
            made: list[str] = []

            def pg_url(tag: str) -> str:
                name, url = _pg_database()
                made.append(name)
                return url

            try:
                import_and_reference("postgres", pg_url, ">= 80k")
            finally:
                for name in made:
                    _pg_drop(name)
        for engine in () if args.csv_only else ("calamine", "openpyxl"):
            r = _run("--scenario", "read", "--file", str(xlsx_path), "--engine", engine)
            rate(f"xlsx read {engine}", r)
        if not args.csv_only:
            sqlite2 = f"sqlite:///{d / 'bench2.db'}"
            rate("xlsx import sqlite", _run("--file", str(xlsx_path), "--url", sqlite2), ">= 50k")
    figures.table()


if __name__ == "__main__":
    main()
