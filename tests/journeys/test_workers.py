"""Several workers: two ``gatecast worker`` share one campaign's senders on PostgreSQL;
``gatecast serve`` runs ``GATECAST_WORKERS`` of them.

An operator runs ``gatecast receive`` and two ``gatecast worker`` on one PostgreSQL
database, with four linked senders and a campaign to sixty recipients: each worker
leases its share of the senders (its output names the senders it took) and both send;
one worker is SIGKILLed mid-campaign and the other takes its senders over once their
leases expire (a short ``GATECAST_SENDER_LEASE_SECONDS``) and finishes the campaign.
Judged by the sandbox's record of what it received: no recipient gets two messages, and
every recipient gets one except at most one per sender the killed worker held (a row in
flight at the kill becomes ``unknown``: never resent).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.journeys.harness import (
    Process,
    Server,
    Workspace,
    start_sandbox,
    wait_for,
    workspace,
)
from tests.journeys.test_senders import _campaign

RECIPIENTS = 60
SENDERS = 4
#: about one message a second per sender: the campaign lasts about fifteen seconds
PACE = {"per_minute = 20": "per_minute = 60", "delay_seconds = [5, 15]": "delay_seconds = [0.5, 1]"}
SECRET = "journey-webhook-secret-0123456789"
CHANGE = re.compile(r"sender leases: [^;\n]*((?:; (?:took|gave up) [0-9A-F, ]+)+)")


def _messages(sandbox_url: str) -> list[dict[str, Any]]:
    messages = httpx.get(f"{sandbox_url}/sandbox/messages", timeout=10).json()
    assert isinstance(messages, list)
    return messages


def _changes(output: str) -> list[tuple[str, set[str]]]:
    """The lease changes a worker's output names, in order: ("took" | "gave", senders)."""
    out = []
    for line in CHANGE.finditer(output):
        for part in line.group(1).split("; ")[1:]:
            verb, _, ids = part.partition(" up " if part.startswith("gave") else " ")
            out.append((verb, {i.strip() for i in ids.split(",")}))
    return out


def _held(worker: Process) -> set[str]:
    """The senders the worker holds, by its output (taken, less those given up since)."""
    held: set[str] = set()
    for verb, names in _changes(worker.output()):
        held = held | names if verb == "took" else held - names
    return held


def _contacts(path: Path) -> Path:
    # the sample campaign's text uses {{ name }} and {{ city }}
    people = [f"Person {i},+4915112{340000 + i},Berlin" for i in range(RECIPIENTS)]
    lines = ["name,phone,city", *people]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _show(ws: Workspace, campaign_id: int) -> dict[str, Any]:
    shown = ws.run("campaign", "show", str(campaign_id), "--json").json()
    assert isinstance(shown, dict)
    return shown


@pytest.mark.postgres
@pytest.mark.slow
def test_two_workers_share_the_senders_and_one_finishes_after_the_other_dies(
    tmp_path: Path, pg_url: str
) -> None:
    sandbox = start_sandbox(tmp_path / "sandbox", "--status-delays", "0.2,0.5,1")
    settings = {
        "GATECAST_DATABASE_URL": pg_url,
        "GATECAST_WEBHOOK_SECRET": SECRET,
        "GATECAST_SENDER_LEASE_SECONDS": "3",
        # a row in flight at the kill counts as lost (unknown) after this, not two minutes
        "GATECAST_HTTP_TIMEOUT_SECONDS": "5",
        "GATECAST_DISPATCH_LEASE_SECONDS": "6",
    }
    try:
        with workspace(tmp_path / "work", sandbox.url, **settings) as ws:
            ws.run("db", "upgrade")
            senders = {ws.link_sender() for _ in range(SENDERS)}
            ws.run(
                "contacts", "import", str(_contacts(ws.path / "people.csv")), "--list", "customers"
            )
            campaign_id = _campaign(ws, **PACE)
            ws.spawn("receive", "--port", "0")
            first, second = ws.spawn("worker"), ws.spawn("worker")

            def both_sent() -> bool:
                sent_by = {m["instance_id"] for m in _messages(sandbox.url)}
                return bool(sent_by & _held(first)) and bool(sent_by & _held(second))

            wait_for(both_sent, timeout=90, what="both workers sending for their senders")
            held = _held(first)
            first.kill()  # SIGKILL mid-campaign
            seen = len(second.output())
            assert held and not held & _held(second)  # each sender leased to one worker
            assert held | _held(second) == senders
            sent_at_kill = len(_messages(sandbox.url))
            assert sent_at_kill < RECIPIENTS, "the campaign ended before the kill"

            wait_for(
                lambda: _show(ws, campaign_id)["state"] == "completed",
                timeout=120,
                what="the surviving worker finishing the campaign",
            )
            # the survivor took the dead one's senders (and gave them up once done)
            took = {
                s
                for verb, names in _changes(second.output()[seen:])
                if verb == "took"
                for s in names
            }
            assert held <= took, second.output()
            messages = _messages(sandbox.url)
            later = {m["instance_id"] for m in messages[sent_at_kill:]}
            assert later & held, "no message from the dead worker's senders after the kill"
            targets = [m["to"] for m in messages]
            assert len(targets) == len(set(targets)), "a recipient got two messages"
            counts = _show(ws, campaign_id)["counts"]
            unknown = int(counts.get("unknown", 0))
            assert unknown <= len(held), counts  # at most the row in flight per sender
            assert len(targets) >= RECIPIENTS - unknown, (len(targets), counts)
            assert not {
                k: v for k, v in counts.items() if k in ("queued", "sending", "failed") and v
            }
            assert second.stop() == 0
    finally:
        sandbox.stop()


def _worker_children(server: Server) -> list[psutil.Process]:
    """``serve``'s live ``gatecast worker`` children (not a dead one serve has not reaped)."""
    found = []
    for child in psutil.Process(server.process.popen.pid).children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "worker" in child.cmdline():
                found.append(child)
        except psutil.Error:  # it ended meanwhile
            continue
    return found


def _gone(procs: list[psutil.Process]) -> bool:
    """True when none of ``procs`` runs any more."""
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.Error:
            continue
    return True


@pytest.mark.slow
def test_serve_runs_the_workers_it_is_set_to_and_stops_them(ws: Workspace) -> None:
    """``GATECAST_WORKERS=3 gatecast serve``: itself and two ``gatecast worker`` children;
    a child that dies is replaced; SIGTERM stops them all; a SIGKILLed serve's children
    stop by themselves."""
    server = ws.serve(GATECAST_WORKERS="3")
    children = wait_for(
        lambda: len(found := _worker_children(server)) == 2 and found,
        timeout=60,
        what="two worker children",
    )
    wait_for(
        lambda: server.process.output().count("gatecast worker running") == 2,
        timeout=60,
        what="both worker children running",
    )
    children[0].kill()  # a worker child crashes: serve starts another
    again = wait_for(
        lambda: (
            len(found := _worker_children(server)) == 2
            and children[0].pid not in {c.pid for c in found}
            and found
        ),
        timeout=60,
        what="the dead worker child replaced",
    )
    assert "worker process" in server.process.output()
    assert server.stop() == 0
    assert _gone(again), "a worker child outlived serve's clean stop"

    crashed = ws.serve(GATECAST_WORKERS="2")
    orphans = wait_for(
        lambda: len(found := _worker_children(crashed)) == 1 and found,
        timeout=60,
        what="one worker child",
    )
    crashed.process.kill()  # serve SIGKILLed: its worker child notices and stops
    wait_for(lambda: _gone(orphans), timeout=60, what="the orphaned worker stopping")
