"""Contact import speed as ``gatecast contacts import`` gives it:
``python -m bench.import [--rows N] [--base N] [--pg] [--before DIR] [--csv-only]``.

Generates a CSV (mostly distinct numbers: 60 % international in 12 countries, 40 %
national US formats, about 1 % duplicates and 0.5 % bad rows) and an XLSX (a third of
the phones stored as numbers, as exports do) in a temp dir, then measures, each in a
fresh process so peak RSS and CPU are its own:

- reading only (CSV; XLSX with calamine and with openpyxl: the engine choice);
- phone normalisation of the distinct values, one process vs a 2-process pool;
- the import as the CLI runs it (``campaigns.importer.import_file`` with its defaults,
  on an engine made as ``gatecast`` makes it): read, normalise, dedupe, upsert, list
  membership, AND the contact search catching up with the new contacts, which
  ``contacts import`` waits for before it answers. The figure is the whole call; the
  part after the import committed (the catch-up) is printed beside it. Into an empty
  database and into one that already holds ``--base`` contacts (1,000,000 by default;
  made by bulk SQL, their search rows filled, all in a list), on SQLite and, with
  ``--pg``, PostgreSQL (each run in its own copy: a file copy, ``CREATE DATABASE ...
  TEMPLATE``);
- its floor, in the same run and database: the rows the import stored (its cleaned,
  merged contacts, read back beforehand) loaded into a new table with no key, index,
  constraint or trigger by the plainest bulk path (``COPY`` on PostgreSQL, one
  ``executemany`` on SQLite) in one transaction. No import can store them faster; the
  ratio import / floor says how far above it the import is;
- with ``--before DIR`` (a copy of an earlier tree, e.g. ``git archive``), the same
  imports by that tree's code, for a before/after at one machine load.

Each rate is printed as rows per wall-clock second (with the 1-minute load average),
rows per CPU-second of the measuring process, and on PostgreSQL rows per CPU-second of
the measuring process and the server processes working for its database together (the
backends and autovacuum workers, found by the database's name in their process titles;
the shared WAL writer and checkpointer are left out, and the disk is settled by a
``CHECKPOINT`` before each measurement): what the code costs, apart from a busy
machine's.

Default sizes (200k CSV rows, 20k XLSX rows, a 1M-contact base) take a few minutes;
``--full`` is the issue's 1,000,000-row CSV and 100,000-row XLSX.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
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
    """CPU seconds so far of the PostgreSQL processes working for ``url``'s database (a
    local server names the database in each backend's and autovacuum worker's process
    title); 0 for SQLite."""
    import psutil
    import sqlalchemy as sa

    parsed = sa.engine.make_url(url)
    if not parsed.drivername.startswith("postgresql"):
        return 0.0
    total = 0.0
    for proc in psutil.process_iter(["cmdline"]):
        words = " ".join(proc.info["cmdline"] or ()).split()
        if words[:1] == ["postgres:"] and parsed.database in words:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
    return total


def _is_pg(url: str) -> bool:
    return url.startswith("postgresql")


def _settle(url: str) -> None:
    """Write out what earlier work left dirty (the OS's page cache; on PostgreSQL the
    server's buffers, by a checkpoint), so that a measurement pays for its own writes only."""
    import sqlalchemy as sa

    os.sync()
    if _is_pg(url):
        eng = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with eng.connect() as conn:
            conn.execute(sa.text("CHECKPOINT"))
        eng.dispose()


class _Clock:
    """Wall seconds, our CPU seconds and the server's since it was made (or marked)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.wall, self.cpu, self.server = self._now()

    def _now(self) -> tuple[float, float, float]:
        return time.perf_counter(), time.process_time(), _server_cpu(self.url)

    def since(self) -> dict[str, float]:
        wall, cpu, server = self._now()
        return {
            "seconds": wall - self.wall,
            "cpu_seconds": cpu - self.cpu,
            "server_cpu_seconds": server - self.server,
        }


def _scenario_import(path: Path, url: str, engine: str, stored: Path | None) -> dict[str, Any]:
    """The import as ``gatecast contacts import`` runs it (the search catching up
    inside); with ``stored``, the contacts it stored written there afterwards (the
    floor's rows)."""
    from campaigns.importer import ImportOptions, import_file
    from storage.engine import make_engine, upgrade

    db = make_engine(url)
    if not _is_pg(url):
        upgrade(db)  # what the CLI's engine does for SQLite (open_engine)
    with db.connect() as conn:  # the pool's connection (and its backend) made beforehand
        conn.exec_driver_sql("SELECT 1")
    _settle(url)
    marks: dict[str, dict[str, float]] = {}
    clock = _Clock(url)

    def progress(done: int, total: int) -> None:
        if done == total:  # the import's transaction committed; the catch-up comes next
            marks["committed"] = clock.since()

    report = import_file(db, path, ImportOptions("bench", excel_engine=engine), progress=progress)  # type: ignore[arg-type]
    result: dict[str, Any] = clock.since()
    committed = marks.get("committed", result)
    result["search"] = {k: result[k] - committed[k] for k in committed}
    counts = report.to_dict(include_rejects=False)
    result |= {"rows": report.rows_read} | {
        k: counts[k] for k in ("imported", "updated", "unchanged", "duplicates", "invalid")
    }
    with db.connect() as conn:
        pending = conn.exec_driver_sql("SELECT count(*) FROM contact_search_pending").scalar_one()
        ranges = conn.exec_driver_sql(
            "SELECT count(*) FROM contact_search_pending_ranges"
        ).scalar_one()
        if pending or ranges:
            raise SystemExit(f"the search did not catch up: {pending} queued, {ranges} ranges")
        if stored is not None:
            rows = conn.exec_driver_sql(
                "SELECT c.phone, c.raw_phone, c.name, c.attributes, c.folded, c.folded_name"
                " FROM contacts c JOIN list_members m ON m.contact_id = c.id"
                " JOIN lists l ON l.id = m.list_id WHERE l.name = 'bench' ORDER BY c.id"
            ).all()
            with stored.open("w", encoding="utf-8") as fh:
                for row in rows:
                    values = [v if isinstance(v, str) else json.dumps(v) for v in row]
                    fh.write(json.dumps(values) + "\n")
            result["stored"] = len(rows)
    db.dispose()
    return result


def _scenario_floor(stored: Path, url: str) -> dict[str, Any]:
    """The floor: the import's stored rows loaded into a table with no key, index,
    constraint or trigger, in one transaction, by ``COPY`` or one ``executemany``."""
    from storage.engine import make_engine

    with stored.open(encoding="utf-8") as fh:
        rows = [tuple(json.loads(line)) for line in fh]
    db = make_engine(url)
    cols = "phone, raw_phone, name, attributes, folded, folded_name, opted_out, created_at,"
    cols += " updated_at"
    json_type = "jsonb" if _is_pg(url) else "text"
    stamp = "timestamptz" if _is_pg(url) else "text"
    with db.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS floor_contacts")
        conn.exec_driver_sql(
            "CREATE TABLE floor_contacts (phone text, raw_phone text, name text,"
            f" attributes {json_type}, folded {json_type}, folded_name text, opted_out boolean,"
            f" created_at {stamp}, updated_at {stamp})"
        )
    _settle(url)
    now = "2026-01-01 00:00:00+00"
    clock = _Clock(url)
    with db.begin() as conn:
        raw: Any = conn.connection.driver_connection
        if _is_pg(url):
            with raw.cursor() as cur, cur.copy(f"COPY floor_contacts ({cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row((*row, False, now, now))
        else:
            raw.executemany(
                f"INSERT INTO floor_contacts ({cols}) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?)",
                ((*row, now, now) for row in rows),
            )
    result: dict[str, Any] = clock.since() | {"stored": len(rows)}
    db.dispose()
    return result


def _child(args: argparse.Namespace) -> None:
    path = Path(args.file)
    if args.scenario == "read":
        result = _scenario_read(path, args.engine)
    elif args.scenario == "phones":
        result = _scenario_phones(path, args.workers)
    elif args.scenario == "floor":
        result = _scenario_floor(path, args.url)
    else:
        stored = Path(args.stored) if args.stored else None
        result = _scenario_import(path, args.url, args.engine, stored)
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


# --- the databases: empty, or a base of existing contacts copied for each run -------------

#: the base's contacts: E.164 numbers of +1 scattered over 2000000000-8999999999 (distinct:
#: 7919 is prime to the span), so the unique phone index is no append-only tail
_BASE_PHONE = "'+1' || (2000000000 + ({i} * 7919) % 7000000000)"
_BASE_ROW = (
    "SELECT {phone}, {phone}, 'Existing ' || {i},"
    ' (\'{{"city": "Berlin", "plan": "\' || ({i} % 4) || \'"}}\'){json},'
    ' (\'{{"city": "berlin", "plan": "\' || ({i} % 4) || \'"}}\'){json},'
    " 'existing ' || {i}, {false}, {now}, {now}"
)
_CONTACT_COLUMNS = (
    "phone, raw_phone, name, attributes, folded, folded_name, opted_out, created_at, updated_at"
)


def _fill_base(url: str, contacts: int) -> None:
    """Upgrade the database at ``url`` and store ``contacts`` contacts in bulk SQL, in the
    list ``existing``, their search rows filled (nothing queued)."""
    from storage.engine import make_engine, upgrade

    pg = _is_pg(url)
    now = "now()" if pg else "'2026-01-01 00:00:00'"
    row = _BASE_ROW.format(
        phone=_BASE_PHONE.format(i="i"),
        i="i",
        false="false" if pg else "0",
        now=now,
        json="::jsonb" if pg else "",
    )
    if pg:
        numbers = f"{row.replace('%', '%%')} FROM generate_series(1::bigint, {contacts}) AS i"
        search = "contact_id, name, phone, attrs) SELECT id, folded_name, phone,"
        search += " coalesce((SELECT string_agg(value, chr(31)) FROM jsonb_each_text(folded)),"
    else:
        numbers = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n"
        numbers += f" WHERE i < {contacts}) {row} FROM n"
        search = "rowid, name, phone, attrs) SELECT id, folded_name, phone,"
        search += " coalesce((SELECT group_concat(value, char(31)) FROM json_each(folded)),"
    db = make_engine(url)
    upgrade(db)
    with db.begin() as conn:
        indexes: Sequence[Any] = ()
        if pg and contacts:  # the search's GIN indexes made again once it is filled
            conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
            conn.exec_driver_sql("SET LOCAL maintenance_work_mem = '256MB'")
            indexes = conn.exec_driver_sql(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'contact_search'"
                " AND position('USING gin' in indexdef) > 0"
            ).all()
            for name, _ in indexes:
                conn.exec_driver_sql(f"DROP INDEX {name}")
        if contacts:
            conn.exec_driver_sql(f"INSERT INTO contacts ({_CONTACT_COLUMNS}) {numbers}")
            conn.exec_driver_sql(
                f"INSERT INTO lists (name, description, created_at) VALUES ('existing', '', {now})"
            )
            conn.exec_driver_sql(
                "INSERT INTO list_members (list_id, contact_id, added_at)"
                f" SELECT l.id, c.id, {now} FROM lists l, contacts c WHERE l.name = 'existing'"
            )
            conn.exec_driver_sql(f"INSERT INTO contact_search ({search} '') FROM contacts")
            conn.exec_driver_sql("DELETE FROM contact_search_pending")  # SQLite's trigger's
        for _, definition in indexes:
            conn.exec_driver_sql(definition)
    if _is_pg(url):
        with db.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    else:
        with db.connect() as conn:  # no ANALYZE: gatecast runs none on SQLite
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    db.dispose()


class _Databases:
    """Fresh databases for the runs, each a copy of an empty or a filled base."""

    def __init__(self, tmp: Path, pg: bool) -> None:
        self.tmp, self.pg = tmp, pg
        self.bases: dict[int, str] = {}
        self.made: list[str] = []

    def base(self, contacts: int) -> str:
        """The base (its SQLite file, or its PostgreSQL database's name) of ``contacts``."""
        if contacts not in self.bases:
            if self.pg:
                name = self._pg_create(f"gatecast_bench_base_{uuid.uuid4().hex[:8]}")
                _fill_base(self._pg_url(name), contacts)
                self.bases[contacts] = name
            else:
                path = self.tmp / f"base-{contacts}.db"
                _fill_base(f"sqlite:///{path}", contacts)
                self.bases[contacts] = str(path)
        return self.bases[contacts]

    def fresh(self, contacts: int, tag: str) -> str:
        """The URL of a new copy of the base of ``contacts``."""
        base = self.base(contacts)
        if self.pg:
            name = f"gatecast_bench_{tag}_{uuid.uuid4().hex[:8]}"
            return self._pg_url(self._pg_create(name, template=base))
        path = self.tmp / f"{tag}-{contacts}-{uuid.uuid4().hex[:6]}.db"
        shutil.copyfile(base, path)
        return f"sqlite:///{path}"

    def _pg_url(self, name: str) -> str:
        import sqlalchemy as sa

        return sa.engine.make_url(PG_ADMIN).set(database=name).render_as_string(False)

    def _pg_create(self, name: str, template: str | None = None) -> str:
        import sqlalchemy as sa

        eng = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with eng.connect() as conn:
            extra = f' TEMPLATE "{template}"' if template else ""
            conn.execute(sa.text(f'CREATE DATABASE "{name}"{extra}'))
        eng.dispose()
        self.made.append(name)
        return name

    def drop(self, url: str) -> None:
        """Drop (or delete) one run's copy."""
        import sqlalchemy as sa

        name = sa.engine.make_url(url).database
        assert name is not None
        if not self.pg:
            for suffix in ("", "-wal", "-shm"):
                Path(name + suffix).unlink(missing_ok=True)
            return
        eng = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with eng.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        eng.dispose()

    def close(self) -> None:
        """Drop every PostgreSQL database made."""
        if self.pg:
            for name in self.made:
                self.drop(self._pg_url(name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000, help="CSV rows")
    parser.add_argument("--xlsx-rows", type=int, default=20_000, help="XLSX rows")
    parser.add_argument(
        "--base", type=int, default=1_000_000, help="contacts already stored (0: empty only)"
    )
    parser.add_argument("--full", action="store_true", help="1,000,000 CSV and 100,000 XLSX rows")
    parser.add_argument("--pg", action="store_true", help="also import into PostgreSQL")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only (with --pg)")
    parser.add_argument(
        "--before", metavar="DIR", help="an earlier tree (git archive): its imports too"
    )
    parser.add_argument("--csv-only", action="store_true", help="only the CSV imports")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenario", default="import", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--stored", help=argparse.SUPPRESS)
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
                f"{name} rows/s", r["rows"] / r["seconds"], "rows/s", load_average=load, **extra
            )
            # rows per CPU-second of the importing process and (PostgreSQL) the server
            # processes of its database: what the code costs, apart from the machine's load
            both = r["cpu_seconds"] + r.get("server_cpu_seconds", 0.0)
            figures.add(f"{name} rows/cpu-s", r["rows"] / max(both, 1e-9), "rows/s", **extra)
            if r.get("server_cpu_seconds"):
                figures.add(f"{name} rows/cpu-s ours only", r["rows"] / r["cpu_seconds"], "rows/s")
            if "peak_rss_mb" in r:
                figures.add(f"{name} peak RSS", r["peak_rss_mb"], "MB")

        def import_and_floor(dbs: _Databases, db: str, contacts: int, goal: str) -> None:
            """The import, its floor and (``--before``) the earlier tree's import, each
            into a fresh copy of the base; ratios of the same run."""
            where = f"{db}, {'empty' if not contacts else f'{contacts:,} contacts'}"
            stored = d / "stored.jsonl"
            url = dbs.fresh(contacts, "import")
            now = _run("--file", str(csv_path), "--url", url, "--stored", str(stored))
            rate(f"csv import {where} (search caught up)", now, goal)
            search = now["search"] | {"rows": now["rows"]}
            figures.add(
                f"csv import {where}: search catch-up share of the time",
                search["seconds"] / now["seconds"],
                "x",
            )
            floor = _run("--scenario", "floor", "--file", str(stored), "--url", url)
            dbs.drop(url)
            floor["rows"] = now["rows"]
            rate(f"csv floor {where} (the stored rows, unindexed table)", floor)
            figures.ratio(
                f"csv import {where}: time / floor's",
                now["seconds"],
                floor["seconds"],
                goal="(> 1: the floor is faster)",
            )
            figures.ratio(
                f"csv import {where}: CPU / floor's",
                now["cpu_seconds"] + now["server_cpu_seconds"],
                floor["cpu_seconds"] + floor["server_cpu_seconds"],
                goal="(> 1)",
            )
            if args.before:
                url = dbs.fresh(contacts, "before")
                then = _run("--file", str(csv_path), "--url", url, tree=Path(args.before))
                dbs.drop(url)
                rate(f"csv import {where} (search caught up), before", then)
                figures.ratio(
                    f"csv import {where}: before's time / now's",
                    then["seconds"],
                    now["seconds"],
                    goal="(speed-up)",
                )
                figures.ratio(
                    f"csv import {where}: before's CPU / now's",
                    then["cpu_seconds"] + then["server_cpu_seconds"],
                    now["cpu_seconds"] + now["server_cpu_seconds"],
                    goal="(speed-up)",
                )

        if not args.csv_only:
            rate("csv read", _run("--scenario", "read", "--file", str(csv_path)))
            one = _run("--scenario", "phones", "--file", str(csv_path), "--workers", "1")
            two = _run("--scenario", "phones", "--file", str(csv_path), "--workers", "2")
            figures.add("phones/s distinct, 1 process", one["rows"] / one["seconds"], "phones/s")
            figures.add(
                "phones/s distinct, 2-process pool", two["rows"] / two["seconds"], "phones/s"
            )
            figures.ratio(
                "pool speed-up", one["seconds"], two["seconds"], goal="> 1.3 to be worth it"
            )
        sizes = sorted({0, args.base})
        for pg, goal in ((False, ">= 100k"), (True, ">= 80k")):
            if (pg and not args.pg) or (not pg and args.no_sqlite):
                continue
            dbs = _Databases(d, pg)
            try:
                for contacts in sizes:
                    import_and_floor(dbs, "postgres" if pg else "sqlite", contacts, goal)
            finally:
                dbs.close()
        if not args.csv_only:
            for engine in ("calamine", "openpyxl"):
                r = _run("--scenario", "read", "--file", str(xlsx_path), "--engine", engine)
                rate(f"xlsx read {engine}", r)
            sqlite2 = f"sqlite:///{d / 'xlsx.db'}"
            rate(
                "xlsx import sqlite (search caught up)",
                _run("--file", str(xlsx_path), "--url", sqlite2),
                ">= 50k",
            )
    figures.table()


if __name__ == "__main__":
    main()
