"""Service memory: ``python -m bench.memory [--rows N] [--big M] [--full] [--pg]``.

What users run: ``gatecast serve`` (its worker with the leader's background jobs, the
intake receiving the webhook, the ``gatecast web`` child), against a sandbox gateway (its
own process) that sends each message's ``sent``, ``delivered`` and ``read`` events to
the webhook ``serve`` registered (``--status-delays``, default 0.5, 1 and 2 s), so the
receiver and the inbox work while the campaign sends. For each size the parent seeds a
fresh database (contacts, list, a text campaign through one sender, warm-up as users
have it: ``bench.common.warmup_as_users``), starts ``serve`` configured through
``GATECAST_*`` variables, starts the campaign (pacing off) as ``gatecast campaign
start`` would, in its own process (the parent), and waits until the campaign completed,
no event waits to be applied and every row is ``read`` (or no row was read for 20 s: the
rows left are counted as never read, their events lost). The sender is recorded linked
(:func:`seed_run`). The figures: each process's peak RSS (``VmHWM``: the worker, which
materialises nothing here, the web child, the intake's supervisor and handlers) and
their sum, the send rate, the time until every row is read, and the sandbox's count of
its webhook events posted, failed and never posted (:func:`_sandbox_events`).

Goals: the worker under 250 MB at both sizes, and the big run within 20% of the small
one (the sum is reported beside it). Until issue 30 this bench ran the dispatcher
alone, without the receiver, events or background jobs. Default sizes 10,000 and 50,000
recipients; ``--full`` is the issue's 100,000 and 1,000,000.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench.common import WARMUP_AS_USERS, BenchError, Figures, report, warmup_as_users
from bench.dispatch import (
    TOKEN,
    create_campaign_for,
    database,
    gatecast_exe,
    linked_instance,
    open_db,
    sandbox_process,
    seed_audience,
    unpace,
)

#: seconds without a row read, once the campaign completed, after which no event comes
SETTLE_SECONDS = 20.0
SECRET = "bench-memory-secret-0123456789abcdef"  # noqa: S105 (a throwaway local secret)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _peak_mb(pid: int) -> float:
    """``VmHWM`` of a live process, in MB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _role(proc: psutil.Process) -> str:
    cmd = " ".join(proc.cmdline())
    for needle, role in (
        ("intake.handler", "intake handler"),
        ("intake.supervisor", "intake supervisor"),
        (" web", "web"),
        (" worker", "worker child"),
        (" serve", "serve (worker, jobs)"),
    ):
        if needle in cmd:
            return role
    return "other"


def _counts(engine: Any, campaign_id: int) -> tuple[str, int, int, int]:
    """The campaign's state, its rows sent or further, its rows read, the events stored
    but not applied yet."""
    with engine.connect() as conn:
        state = conn.exec_driver_sql(
            f"SELECT state FROM campaigns WHERE id = {int(campaign_id)}"
        ).scalar_one()
        sent = conn.exec_driver_sql(
            "SELECT count(*) FROM deliveries WHERE campaign_id = "
            f"{int(campaign_id)} AND state IN ('sent', 'delivered', 'read')"
        ).scalar_one()
        read = conn.exec_driver_sql(
            f"SELECT count(*) FROM deliveries WHERE campaign_id = {int(campaign_id)}"
            " AND state = 'read'"
        ).scalar_one()
        waiting = conn.exec_driver_sql(
            "SELECT count(*) FROM status_events WHERE NOT applied"
            if engine.dialect.name == "postgresql"
            else "SELECT count(*) FROM status_events WHERE applied = 0"
        ).scalar_one()
    return str(state), int(sent), int(read), int(waiting)


def seed_run(engine: Any, instance_id: str, rows: int) -> int:
    """The audience, the sender as users have it and the campaign; the campaign's id.

    The sender is recorded linked, as ``gatecast instance qr`` leaves a sender the gateway
    says is logged in: ``serve``'s start pass then holds it until its webhook is
    registered (docs/architecture.md, decision 40). Recorded unlinked (``created``), it was
    neither held nor registered at start: it sent at once and its webhook was registered
    by the leader's check only after its first accepted send, so every event that fell due
    before (the first seconds of the campaign: 5-7 % of the rows under load) went nowhere.
    """
    from campaigns.instances import mark_connected
    from storage.types import utcnow

    seed_audience(engine, rows)
    cid = create_campaign_for(engine, instance_id)
    mark_connected(engine, instance_id, now=utcnow())
    warmup_as_users(engine, [instance_id])
    return cid


def _sandbox_events(sb_url: str) -> dict[str, int]:
    """The sandbox's record of its webhook events once all are posted: ``posted`` (the
    intake answered below 400), ``failed`` (refused, or the POST failed) and ``unposted`` (no
    webhook registered when the event fell due: the instance's connection event at its
    creation, before ``serve``, is one)."""
    import httpx

    with httpx.Client(base_url=sb_url, timeout=30) as sb:
        sb.get("/sandbox/idle", params={"timeout": 10}).raise_for_status()
        stats = sb.get("/sandbox/stats").raise_for_status().json()
    posted, failed = int(stats["webhook_delivered"]), int(stats["webhook_failed"])
    return {
        "posted": posted,
        "failed": failed,
        "unposted": int(stats["events_recorded"]) - posted - failed,
    }


def run_size(tmp: Path, rows: int, pg: bool, delays: str, timeout: float) -> dict[str, Any]:
    """Seed, serve, send one campaign of ``rows`` with its events; the figures."""
    from scheduler.starts import start_campaign
    from storage.types import utcnow

    folder = tmp / f"state-{rows}"
    folder.mkdir()
    with (
        database(tmp, pg, name=f"memory-{rows}") as url,
        sandbox_process(tmp, "--status-delays", delays) as sb_url,
    ):
        engine = open_db(url)
        iid = linked_instance(sb_url)
        cid = seed_run(engine, iid, rows)
        port = _free_port()
        env = {
            **os.environ,
            "GATECAST_DATABASE_URL": url,
            "GATECAST_GATEWAY_URL": sb_url,
            "GATECAST_ACCESS_TOKEN": TOKEN,
            "GATECAST_PUBLIC_URL": f"http://127.0.0.1:{port}",
            "GATECAST_WEBHOOK_SECRET": SECRET,
            "GATECAST_JOURNAL_DIR": str(folder),
            "GATECAST_INTAKE_LINGER": "0",
            "GATECAST_LOG_LEVEL": "WARNING",
        }
        log = (tmp / f"serve-{rows}.log").open("w")
        serve = psutil.Popen(
            [gatecast_exe(), "serve", "--port", str(port)],
            env=env,
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        seen: dict[int, psutil.Process] = {}
        try:
            _wait_serving(serve, port, tmp / f"serve-{rows}.log")
            t0 = time.perf_counter()
            started = start_campaign(engine, cid, now=utcnow(), enforce_grace=False)
            if started.outcome != "started":
                raise BenchError(f"campaign did not start: {started.detail}")
            unpace(engine, cid)
            deadline = time.monotonic() + timeout
            sent_s = 0.0
            last_read, still_since = -1, time.monotonic()
            while True:
                time.sleep(0.5)
                for p in [serve, *serve.children(recursive=True)]:
                    seen.setdefault(p.pid, p)
                state, sent, read, waiting = _counts(engine, cid)
                if not sent_s and state != "running":
                    sent_s = time.perf_counter() - t0
                if read != last_read:
                    last_read, still_since = read, time.monotonic()
                settled = time.monotonic() - still_since > SETTLE_SECONDS
                if state != "running" and not waiting and (read >= rows or settled):
                    break  # every row read, or no event came for a while: the rest is lost
                if time.monotonic() > deadline:
                    raise BenchError(
                        f"{rows:,}: {state}, {sent} sent, {read} read, {waiting} events"
                        " waiting"
                        f" after {timeout:.0f} s"
                    )
            done_s = time.perf_counter() - t0
            events = _sandbox_events(sb_url)
            roles: dict[str, float] = {}
            for pid, p in seen.items():
                mb = _peak_mb(pid)
                if mb:
                    role = _role(p)
                    roles[role] = max(roles.get(role, 0.0), mb)
                    roles["sum"] = roles.get("sum", 0.0) + mb
        finally:
            serve.send_signal(signal.SIGINT)  # Ctrl-C: serve stops the intake too
            try:
                serve.wait(60)
            except psutil.TimeoutExpired:
                serve.kill()
            for p in seen.values():
                if p.is_running() and p.pid != serve.pid:
                    p.terminate()
            log.close()
            engine.dispose()
    return {
        "peaks": roles,
        "sent": sent,
        "read": read,
        "send_s": sent_s,
        "done_s": done_s,
        "events": events,
    }


def _wait_serving(serve: psutil.Popen, port: int, log: Path) -> None:
    import http.client

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if serve.poll() is not None:
            raise BenchError(f"serve exited: {log.read_text()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise BenchError("serve did not answer /healthz in 120 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000, help="small campaign (10,000)")
    parser.add_argument("--big", type=int, default=50_000, help="big campaign (50,000)")
    parser.add_argument("--full", action="store_true", help="100,000 and 1,000,000")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument(
        "--status-delays", default="0.5,1,2", help="the sandbox's sent, delivered, read delays"
    )
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds per run")
    args = parser.parse_args()
    small, big = (100_000, 1_000_000) if args.full else (args.rows, args.big)
    figures = Figures.begin("memory")
    return report(figures, lambda: measure(args, small, big, figures))


def measure(args: argparse.Namespace, small: int, big: int, figures: Figures) -> None:
    """Both sizes, each in a fresh database with its own ``serve``; then the figures."""
    db_kind = "postgresql" if args.pg else "sqlite"
    with tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir:
        tmp = Path(tmpdir)
        results: dict[int, dict[str, Any]] = {}
        for n in (small, big):
            results[n] = r = run_size(tmp, n, args.pg, args.status_delays, args.timeout)
            if r["sent"] != n:
                raise BenchError(f"{n:,}: {r['sent']} sent")
            worker = r["peaks"].get("serve (worker, jobs)", 0.0)
            figures.add(
                f"serve's worker peak RSS, {n:,} recipients",
                worker,
                "MB",
                goal="< 250",
                db=db_kind,
                warmup=WARMUP_AS_USERS,
                load=round(os.getloadavg()[0], 1),
            )
            for role, mb in sorted(r["peaks"].items()):
                if role != "serve (worker, jobs)":
                    figures.add(f"{role} peak RSS, {n:,}", mb, "MB")
            figures.add(f"send {n:,}", n / r["send_s"], "msg/s")
            figures.add(f"start to the last row read {n:,}", r["done_s"], "s")
            figures.add(f"rows never read {n:,} (their events never came)", n - r["read"], "rows")
            for what, count in r["events"].items():
                figures.add(f"sandbox's webhook events {what}, {n:,}", count, "events")
    figures.ratio(
        f"worker peak RSS {big:,} / {small:,}",
        results[big]["peaks"].get("serve (worker, jobs)", 0.0),
        results[small]["peaks"].get("serve (worker, jobs)", 0.0),
        goal="<= 1.2",
    )
    figures.add(
        f"all processes' peak RSS {big:,} / {small:,}",
        results[big]["peaks"]["sum"] / results[small]["peaks"]["sum"],
        "x",
    )


if __name__ == "__main__":
    raise SystemExit(main())
