"""The README's walk-through, step by step, as a new user types it (CLI subprocesses).

Against a ``gatecast sandbox --auto-link`` process. Every sample file's own journey is in
``test_schedules.py``; every message kind's in ``test_message_kinds.py``.
"""

from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import openpyxl

from tests.journeys.harness import SAMPLES, Workspace, table_value


def _link_sender(ws: Workspace) -> str:
    """Step 1: create an instance, fetch its QR (the sandbox links it), see it listed."""
    instance_id = ws.link_sender()
    assert instance_id in ws.run("instance", "status").output
    return instance_id


def _import_customers(ws: Workspace) -> None:
    """Step 2: import the sample contacts with their rejects file."""
    out = ws.run(
        "contacts",
        "import",
        str(SAMPLES / "contacts.csv"),
        "--list",
        "customers",
        "--rejects",
        "rejects.csv",
    ).output
    assert table_value(out, "rows read") == "50"
    assert table_value(out, "imported (new)") == "44"
    assert table_value(out, "duplicates merged") == "2"
    with (ws.path / "rejects.csv").open(encoding="utf-8") as fh:
        rejects = list(csv.DictReader(fh))
    assert len(rejects) == 4


def _create(ws: Workspace, sample: Path, **replace: str) -> int:
    """Step 3: create a campaign from a sample (optionally with fields replaced)."""
    text = sample.read_text(encoding="utf-8")
    for old, new in replace.items():
        assert old in text, f"{old!r} not in {sample.name}"
        text = text.replace(old, new)
    path = ws.path / sample.name
    path.write_text(text, encoding="utf-8")
    created = ws.run("campaign", "create", str(path), "--json").json()
    campaign_id = int(created["id"])
    shown = ws.run("campaign", "show", str(campaign_id), "--json").json()
    assert shown["id"] == campaign_id
    return campaign_id


def _report(ws: Workspace, campaign_id: int, suffix: str) -> Path:
    out = ws.path / f"report-{campaign_id}.{suffix}"
    ws.run("report", str(campaign_id), "--output", str(out))
    assert out.exists()
    return out


def test_walkthrough_text_campaign_runs_and_reports(ws: Workspace) -> None:
    _link_sender(ws)
    _import_customers(ws)
    campaign_id = _create(
        ws,
        SAMPLES / "campaign.toml",
        **{
            "per_minute = 20": "per_minute = 600",
            "delay_seconds = [5, 15]": "delay_seconds = [0, 0]",
        },
    )
    run = ws.run("campaign", "run", str(campaign_id), "--webhook", "--settle", "3", timeout=300)
    assert "44/44" in run.output or "44 " in run.output, run.output
    shown = ws.run("campaign", "show", str(campaign_id), "--json").json()
    assert shown["state"] == "completed", shown
    rows = list(csv.DictReader(_report(ws, campaign_id, "csv").open(encoding="utf-8")))
    assert len(rows) == 44
    assert {r["state"] for r in rows} <= {"sent", "delivered", "read", "failed"}
    book = openpyxl.load_workbook(_report(ws, campaign_id, "xlsx"), read_only=True)
    assert "Summary" in book.sheetnames or len(book.sheetnames) >= 2
    data = json.loads(_report(ws, campaign_id, "json").read_text(encoding="utf-8"))
    assert data


def test_run_without_a_linked_sender_says_why(ws: Workspace) -> None:
    """A user who skipped step 1: the run ends at once with the start's own reason."""
    _import_customers(ws)
    campaign_id = _create(ws, SAMPLES / "campaign.toml")
    run = ws.run("campaign", "run", str(campaign_id), ok=False, timeout=60)
    assert run.code == 1, run.output
    assert f"campaign {campaign_id} did not start: no sender instance" in run.output, run.output
    assert "can become" not in run.output, run.output  # no list of states that contradicts it
    shown = ws.run("campaign", "show", str(campaign_id), "--json").json()
    assert shown["state"] == "failed", shown


def test_create_says_when_it_sends_in_the_campaigns_own_zone(ws: Workspace) -> None:
    """A recurring sample names its next run, a dated one its start, both in their zone."""
    ws.clock_start = datetime(2026, 11, 24, 12, 0, tzinfo=ZoneInfo("UTC"))
    _import_customers(ws)
    weekly = ws.run("campaign", "create", str(SAMPLES / "campaign-list.toml")).output
    assert "recurs 0 9 * * MON (Europe/Berlin), next run 2026-11-30 09:00" in weekly, weekly
    assert "starts 2026-11-24" not in weekly, weekly
    dated = ws.run("campaign", "create", str(SAMPLES / "campaign-interactive.toml")).output
    assert "starting 2026-11-27 09:00 America/New_York" in dated, dated
