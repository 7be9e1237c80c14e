"""No acknowledged webhook event is lost while the database is locked.

``gatecast serve`` on SQLite; another process holds SQLite's write lock (``BEGIN
IMMEDIATE``) for about 10 s while the gateway posts status events and a STOP reply to the
served webhook. Every POST answers 200 (the events go to the local journal); once the
lock is released every status is applied and the STOP opted its contact out. When
``serve`` and its receiver are both killed before the lock goes (the machine crashed),
the next ``serve`` drains the journal at start.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx

from tests.journeys.harness import (
    SAMPLES,
    Process,
    Server,
    Workspace,
    pid_alive,
    wait_for,
    workspace,
)
from tests.journeys.test_senders import _campaign

SECRET = "journey-webhook-secret-0123456789"
LOCK_SECONDS = 10.0


def _status(instance_id: str, message_id: str, status: str) -> dict[str, Any]:
    return {
        "event": "message_status",
        "instance_id": instance_id,
        "data": {"id": message_id, "status": status, "timestamp": int(time.time())},
    }


def _stop(instance_id: str, phone: str, message_id: str) -> dict[str, Any]:
    return {
        "event": "message",
        "instance_id": instance_id,
        "data": {"id": message_id, "chat": f"{phone[1:]}@s.whatsapp.net", "text": "STOP"},
    }


def _sent_and_served(ws: Workspace) -> tuple[str, int, Server]:
    """A linked sender, a campaign sent to the sample contacts, then ``serve``."""
    sender = ws.link_sender()
    ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
    campaign_id = _campaign(ws)
    ws.run("campaign", "run", str(campaign_id), timeout=180)
    return sender, campaign_id, ws.serve()


def _all_read(api: httpx.Client, campaign_id: int, message_ids: list[str]) -> bool:
    got = api.get(f"/api/v1/campaigns/{campaign_id}/deliveries", params={"limit": 500}).json()
    states = {r["message_id"]: r["state"] for r in got["items"] if r["message_id"]}
    return all(states[m] in ("read", "replied") for m in message_ids)


def test_events_journalled_by_a_killed_serve_are_applied_by_the_next(
    tmp_path: Path, sandbox_process: Process
) -> None:
    with workspace(tmp_path / "work", sandbox_process.url, GATECAST_WEBHOOK_SECRET=SECRET) as ws:
        sender, campaign_id, server = _sent_and_served(ws)
        with server.api() as api:
            rows = api.get(
                f"/api/v1/campaigns/{campaign_id}/deliveries", params={"limit": 500}
            ).json()["items"]
        ids = [r["message_id"] for r in rows if r["message_id"]]
        stopper = rows[0]["target"]
        hook = f"{server.url}/webhooks/gateway/{SECRET}"
        blocker = sqlite3.connect(ws.path / "gatecast.db", isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with httpx.Client(timeout=30) as gateway:
                answers = [
                    gateway.post(hook, json=_status(sender, m, "read")).status_code for m in ids
                ]
                answers.append(
                    gateway.post(hook, json=_stop(sender, stopper, "stop-2")).status_code
                )
            assert answers == [200] * (len(ids) + 1), answers
            intake = ws.intake()
            assert intake is not None
            # SIGKILL them all: what they acknowledged is only in the journal
            os.kill(intake.pid, signal.SIGKILL)
            os.kill(intake.handler, signal.SIGKILL)
            server.process.kill()
            for pid in (intake.pid, intake.handler):
                wait_for(lambda p=pid: not pid_alive(p), timeout=60, what="the intake killed")
        finally:
            blocker.execute("COMMIT")
            blocker.close()
        assert (ws.path / "gatecast-webhook-journal.jsonl").stat().st_size > 0
        again = ws.serve()
        with again.api() as api:
            wait_for(
                lambda: _all_read(api, campaign_id, ids),
                timeout=60,
                what="the journal drained at start",
            )
        assert ws.run("contacts", "show", stopper, "--json").json()["opted_out"] is True
        assert not (ws.path / "gatecast-webhook-journal.jsonl").read_bytes()


def test_events_posted_while_the_database_is_locked_are_all_applied(
    tmp_path: Path, sandbox_process: Process
) -> None:
    with workspace(tmp_path / "work", sandbox_process.url, GATECAST_WEBHOOK_SECRET=SECRET) as ws:
        sender, campaign_id, server = _sent_and_served(ws)
        hook = f"{server.url}/webhooks/gateway/{SECRET}"
        with server.api() as api:
            rows = api.get(
                f"/api/v1/campaigns/{campaign_id}/deliveries", params={"limit": 500}
            ).json()["items"]
            sent = [r for r in rows if r["message_id"]]
            assert len(sent) >= 10, rows
            stopper = sent[0]["target"]
            assert ws.run("contacts", "show", stopper, "--json").json()["opted_out"] is False

            database = ws.path / "gatecast.db"
            blocker = sqlite3.connect(database, isolation_level=None)
            try:
                blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
                locked_at = time.monotonic()
                answers: list[int] = []
                slowest = 0.0
                with httpx.Client(timeout=30) as gateway:
                    bodies = [_status(sender, r["message_id"], "read") for r in sent]
                    bodies.insert(len(bodies) // 2, _stop(sender, stopper, "stop-reply-1"))
                    for body in bodies:
                        started = time.monotonic()
                        answers.append(gateway.post(hook, json=body).status_code)
                        slowest = max(slowest, time.monotonic() - started)
                still_locked = time.monotonic() - locked_at
                assert still_locked < LOCK_SECONDS, "the POSTs waited for the lock"
                time.sleep(LOCK_SECONDS - still_locked)
                # nothing applied while locked: the events wait in the journal
                assert (ws.path / "gatecast-webhook-journal.jsonl").stat().st_size > 0
            finally:
                blocker.execute("COMMIT")
                blocker.close()
            assert answers == [200] * len(bodies), answers
            assert slowest < 5, slowest  # a gateway's timeout is not reached

            ids = [r["message_id"] for r in sent]
            wait_for(
                lambda: _all_read(api, campaign_id, ids),
                timeout=60,
                what="every status applied after the lock",
            )
            shown = wait_for(
                lambda: ws.run("contacts", "show", stopper, "--json").json()["opted_out"],
                timeout=30,
                what="the STOP applied",
            )
            assert shown is True
            contact = api.get("/api/v1/contacts", params={"q": stopper}).json()["items"]
            assert [c["opted_out"] for c in contact if c["phone"] == stopper] == [True]
        assert server.stop() == 0
        assert "Traceback" not in server.process.output()
        assert not (ws.path / "gatecast-webhook-journal.jsonl").read_bytes()


def test_with_the_database_locked_and_the_journal_disk_full_the_webhook_answers_503(
    tmp_path: Path, sandbox_process: Process
) -> None:
    """Nowhere to keep an event: ``serve`` says so (503, ``Retry-After``), never a 200 for
    an event that is nowhere; once there is room again it acknowledges as before."""
    journal_dir = tmp_path / "journal"
    journal_dir.mkdir()
    journal = journal_dir / "gatecast-webhook-journal.jsonl"
    journal.symlink_to("/dev/full")  # a full disk: every write fails with ENOSPC
    with workspace(
        tmp_path / "work",
        sandbox_process.url,
        GATECAST_WEBHOOK_SECRET=SECRET,
        GATECAST_JOURNAL_DIR=str(journal_dir),
    ) as ws:
        sender = ws.link_sender()
        server = ws.serve()
        hook = f"{server.url}/webhooks/gateway/{SECRET}"
        blocker = sqlite3.connect(ws.path / "gatecast.db", isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with httpx.Client(timeout=30) as gateway:
                refused = gateway.post(hook, json=_status(sender, "full-1", "read"))
            blocker.execute("COMMIT")
        finally:
            blocker.close()
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "5", refused.headers
        assert "retry later" in refused.json()["detail"], refused.text
        journal.unlink()  # room again
        with httpx.Client(timeout=30) as gateway:
            accepted = gateway.post(hook, json=_status(sender, "full-2", "read"))
        assert accepted.status_code == 200, accepted.text
        assert "No space left on device" in server.process.output(), server.process.output()
