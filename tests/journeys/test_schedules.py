"""Schedules as a user meets them: windows, crons, starts that fail, refused creations.

Every story goes through a public face only: the ``gatecast`` CLI as a subprocess,
``gatecast serve``'s HTTP API. The process clock is injected (``ws.clock_start``) so a
window, a start or a cron fire time is reached in seconds; it is set before the samples'
absolute dates so these journeys stay valid after them.
"""

from __future__ import annotations

import csv
import re
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.journeys.harness import (
    SAMPLES,
    Workspace,
    campaign_over_api,
    table_value,
    wait_for,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
SAMPLE_FILES = sorted(p.name for p in SAMPLES.glob("campaign*.toml"))

FAST_PACE = """
[pace]
per_minute = 0
delay_seconds = [0, 0]
"""


def _link_sender(ws: Workspace) -> str:
    """A sender instance created and linked by the sandbox (state connected)."""
    instance_id = ws.link_sender()
    assert "connected" in ws.run("instance", "status").output
    return instance_id


def _import_customers(ws: Workspace) -> None:
    out = ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
    assert table_value(out.output, "imported (new)") == "44"


def _write(ws: Workspace, name: str, text: str) -> Path:
    path = ws.path / name
    path.write_text(text, encoding="utf-8")
    return path


def _text_campaign(name: str, schedule: str, extra: str = "") -> str:
    """A text campaign to ``customers`` with the given ``[schedule]`` body, sent unpaced."""
    return (
        f'name = "{name}"\nlist = "customers"\n{extra}\n'
        '[message]\ntype = "text"\ntext = "Hi {{ name }}"\n\n'
        f"[schedule]\n{schedule}\n{FAST_PACE}"
    )


def _create(ws: Workspace, path: Path) -> int:
    return int(ws.run("campaign", "create", str(path), "--json").json()["id"])


def _show(ws: Workspace, campaign_id: int) -> dict[str, Any]:
    data: dict[str, Any] = ws.run("campaign", "show", str(campaign_id), "--json").json()
    return data


@pytest.mark.parametrize("sample", SAMPLE_FILES)
def test_every_sample_is_created_shown_paused_resumed_cancelled(ws: Workspace, sample: str) -> None:
    """Each sample as shipped, today (no clock set: a sample's start never goes stale): its
    stored schedule reads back as written, on every face."""
    _link_sender(ws)
    _import_customers(ws)
    campaign_id = _create(ws, SAMPLES / sample)
    shown = _show(ws, campaign_id)
    assert shown["state"] == "scheduled", shown
    window = shown["spec"]["schedule"]["window"]
    if window is not None:  # stored as written: HH:MM
        assert all(re.fullmatch(r"\d\d:\d\d", w) for w in window), window
        text = ws.run("campaign", "show", str(campaign_id)).output
        assert f"{window[0]}-{window[1]}" in text, text
    ws.run("campaign", "pause", str(campaign_id))
    assert _show(ws, campaign_id)["state"] == "paused"
    server = ws.serve()
    assert campaign_over_api(server, campaign_id)["state"] == "paused"
    ws.run("campaign", "resume", str(campaign_id))
    assert campaign_over_api(server, campaign_id)["state"] == "scheduled"
    ws.run("campaign", "cancel", str(campaign_id))
    assert campaign_over_api(server, campaign_id)["state"] == "cancelled"
    server.stop()
    assert "Traceback" not in server.process.output(), server.process.output()
    assert "ERROR" not in server.process.output(), server.process.output()
    listed = ws.run("campaign", "list", "--json").json()
    assert [c["state"] for c in listed if c["id"] == campaign_id] == ["cancelled"]


def test_resume_of_a_completed_campaign_says_what_can_be_resumed(ws: Workspace) -> None:
    _link_sender(ws)
    _import_customers(ws)
    campaign_id = _create(ws, _write(ws, "now.toml", _text_campaign("now", 'timezone = "UTC"')))
    ws.run("campaign", "run", str(campaign_id), "--settle", "0", timeout=300)
    assert _show(ws, campaign_id)["state"] == "completed"
    refused = ws.run("campaign", "resume", str(campaign_id), ok=False)
    assert refused.code == 1, refused.output
    assert "completed" in refused.output and "paused" in refused.output, refused.output
    # the states named as resumable do not include the one it is in
    assert "from: completed" not in refused.output and ", completed" not in refused.output


def test_window_campaign_inside_its_berlin_window_runs_to_completion(ws: Workspace) -> None:
    """Clock just inside a Berlin window: ``campaign run --webhook`` sends everything."""
    ws.clock_start = datetime(2026, 11, 20, 9, 0, 30, tzinfo=BERLIN)
    _link_sender(ws)
    _import_customers(ws)
    path = _write(
        ws,
        "window.toml",
        _text_campaign("Berlin window", 'timezone = "Europe/Berlin"\nwindow = ["09:00", "18:00"]'),
    )
    campaign_id = _create(ws, path)
    assert _show(ws, campaign_id)["spec"]["schedule"]["window"] == ["09:00", "18:00"]
    run = ws.run("campaign", "run", str(campaign_id), "--webhook", "--settle", "3", timeout=300)
    assert "44" in run.output, run.output
    shown = _show(ws, campaign_id)
    assert shown["state"] == "completed", shown
    sent = sum(shown["counts"].get(s, 0) for s in ("sent", "delivered", "read"))
    assert sent == 44, shown["counts"]


def test_window_campaign_created_before_its_window_waits_then_sends(ws: Workspace) -> None:
    """Clock a few seconds before a New York window: serve starts it, sends once it opens."""
    opens = datetime(2026, 11, 20, 9, 0, tzinfo=NEW_YORK)
    ws.clock_start = opens - timedelta(seconds=6)
    _link_sender(ws)
    _import_customers(ws)
    path = _write(
        ws,
        "early.toml",
        _text_campaign(
            "Before the window", 'timezone = "America/New_York"\nwindow = ["9:00", "20:00"]'
        ),
    )
    campaign_id = _create(ws, path)
    server = ws.serve()
    # serve's clock starts with its process, so a slow start can carry it past the opening
    # before the first look: no send before the window is proven by the report's times
    wait_for(
        lambda: campaign_over_api(server, campaign_id)["state"] in ("running", "completed"),
        timeout=20,
        what="the campaign to start",
    )
    done = wait_for(
        lambda: (c := campaign_over_api(server, campaign_id))["state"] == "completed" and c,
        timeout=90,
        what="the campaign to complete",
    )
    assert done["counts"].get("queued", 0) == 0 and done["counts"].get("failed", 0) == 0, done
    report = ws.path / "early.csv"
    ws.run("report", str(campaign_id), "--output", str(report))
    with report.open(encoding="utf-8-sig") as fh:
        sent_at = [r["sent_at"] for r in csv.DictReader(fh) if r["sent_at"]]
    assert len(sent_at) == 44
    assert min(datetime.fromisoformat(s) for s in sent_at) >= opens, min(sent_at)
    server.stop()
    assert "Traceback" not in server.process.output(), server.process.output()


def test_cron_every_two_minutes_fires_its_next_occurrence(ws: Workspace) -> None:
    """``*/2 * * * *`` under serve: the fire a few seconds ahead runs and completes."""
    fire = datetime(2026, 11, 20, 10, 2, tzinfo=BERLIN)
    ws.clock_start = fire - timedelta(seconds=8)
    _link_sender(ws)
    _import_customers(ws)
    path = _write(
        ws,
        "cron.toml",
        _text_campaign("Every two minutes", 'cron = "*/2 * * * *"\ntimezone = "Europe/Berlin"'),
    )
    parent = _create(ws, path)
    server = ws.serve()
    child_name = "Every two minutes (2026-11-20 10:02)"

    def child() -> dict[str, Any] | None:
        with server.api() as api:
            rows = api.get("/api/v1/campaigns").json()["items"]
        names = [r["name"] for r in rows if r["id"] != parent]
        # occurrences of today's fire times only, none dated months ago
        assert all(n.startswith("Every two minutes (2026-11-20 10:") for n in names), names
        found = [r for r in rows if r["name"] == child_name and r["state"] != "scheduled"]
        return found[0] if found and found[0]["state"] != "running" else None

    done = wait_for(child, timeout=90, what="the 10:02 occurrence to finish")
    detail = campaign_over_api(server, int(done["id"]))
    assert detail["state"] == "completed", detail
    assert detail["parent_id"] == parent
    assert detail["counts"].get("failed", 0) == 0, detail
    listed = ws.run("campaign", "list", "--json").json()
    assert {c["id"]: c["state"] for c in listed}[parent] == "scheduled"
    server.stop()


def test_a_start_that_cannot_happen_fails_once_with_its_reason(ws: Workspace) -> None:
    """No connected sender: the campaign is failed with a reason, logged once, not per tick."""
    _import_customers(ws)  # no sender linked
    campaign_id = _create(ws, _write(ws, "alone.toml", _text_campaign("alone", "")))
    server = ws.serve()
    failed = wait_for(
        lambda: (c := campaign_over_api(server, campaign_id))["state"] == "failed" and c,
        timeout=30,
        what="the start to fail",
    )
    assert "no sender instance" in failed["state_reason"], failed
    shown = ws.run("campaign", "show", str(campaign_id)).output
    assert "no sender instance" in shown, shown
    time.sleep(12)  # the leader's next sync (every 10 s) and a dozen dispatcher polls
    log = server.process.output()
    server.stop()
    assert log.count("no sender instance") == 1, log
    assert "Traceback" not in log, log


def test_window_sample_under_serve_starts_once_without_errors(ws: Workspace) -> None:
    """The interactive sample (a New York window) reaches its start under serve and runs."""
    ws.clock_start = datetime(2026, 11, 27, 9, 0, tzinfo=NEW_YORK) - timedelta(seconds=5)
    _link_sender(ws)
    _import_customers(ws)
    text = (SAMPLES / "campaign-interactive.toml").read_text(encoding="utf-8")
    text = text.replace("per_minute = 10", "per_minute = 0").replace(
        "delay_seconds = [6, 20]", "delay_seconds = [0, 0]"
    )
    campaign_id = _create(ws, _write(ws, "interactive.toml", text))
    server = ws.serve()
    done = wait_for(
        lambda: (
            (c := campaign_over_api(server, campaign_id))["state"] in ("completed", "failed") and c
        ),
        timeout=90,
        what="the sample campaign to finish",
    )
    assert done["state"] == "completed", done
    log = server.process.output()
    server.stop()
    assert "ERROR" not in log and "Traceback" not in log, log


def _field_errors(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The field errors of a 422 answer (``errors`` of a problem, or FastAPI's ``detail``)."""
    found = body.get("errors") or body.get("detail")
    assert isinstance(found, list), body
    return found


def _refusal(ws: Workspace, name: str, text: str) -> str:
    refused = ws.run("campaign", "create", str(_write(ws, name, text)), ok=False)
    assert refused.code == 1, refused.output
    assert "Traceback" not in refused.output
    return refused.output


def test_unknown_sender_and_past_start_are_refused_at_create(ws: Workspace) -> None:
    ws.clock_start = datetime(2026, 11, 20, 12, 0, tzinfo=BERLIN)
    sender = _link_sender(ws)
    _import_customers(ws)
    unknown = _text_campaign("stranger", "", 'instances = ["6501A9176BD17"]')
    out = _refusal(ws, "unknown.toml", unknown)
    assert "6501A9176BD17" in out and "instances" in out and sender in out, out
    past = _text_campaign("late", 'start = "2026-11-19T09:00"\ntimezone = "Europe/Berlin"')
    out = _refusal(ws, "past.toml", past)
    assert "schedule.start" in out and "2026-11-19 09:00" in out and "Europe/Berlin" in out, out
    assert "omit" in out, out
    assert ws.run("campaign", "list", "--json").json() == []

    server = ws.serve()
    body = {
        "name": "stranger",
        "list": "customers",
        "instances": ["6501A9176BD17"],
        "message": {"type": "text", "text": "Hi"},
    }
    with server.api() as api:
        answer = api.post("/api/v1/campaigns", json=body)
        assert answer.status_code == 422, answer.text
        detail = _field_errors(answer.json())
        assert any(d["loc"][:2] == ["body", "instances"] for d in detail), detail
        assert sender in answer.text and "6501A9176BD17" in answer.text
        late = {
            "name": "late",
            "list": "customers",
            "message": {"type": "text", "text": "Hi"},
            "schedule": {"start": "2026-11-19T09:00", "timezone": "Europe/Berlin"},
        }
        answer = api.post("/api/v1/campaigns", json=late)
        assert answer.status_code == 422, answer.text
        detail = _field_errors(answer.json())
        assert any(d["loc"][:3] == ["body", "schedule", "start"] for d in detail), detail
        assert "2026-11-19 09:00" in answer.text and "--" not in answer.text
        assert api.get("/api/v1/campaigns").json()["items"] == []
    server.stop()
