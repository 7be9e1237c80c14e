"""Sender care through the user's faces (issue 16): a new sender's warm-up ramp over
simulated days, a health score that slows, pauses and resumes a sender, and 463-aware
routing that keeps known chats and groups going while cold contacts wait for the lock.

Each journey drives the ``gatecast`` CLI (subprocesses) and ``gatecast serve``'s HTTP API
against a ``gatecast sandbox`` process; the days of the warm-up are reached by moving the
process clock (``GATECAST_CLOCK_START``) from one ``serve`` to the next.
"""

from __future__ import annotations

import csv
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from tests.journeys.harness import Server, Workspace, table_value, wait_for, workspace
from tests.journeys.test_senders import _own_sandbox

DAY1 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
AREAS = ("212", "312", "415", "646", "718")


def _people(ws: Workspace, name: str, phones: list[str], new: int | None = None) -> None:
    """Import ``phones`` into the list ``name`` (a spreadsheet the user exported);
    ``new`` of them (default all) are new contacts."""
    path = ws.path / f"{name}.csv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["Name", "Phone"])
        for n, phone in enumerate(phones):
            writer.writerow([f"{name} {n}", phone])
    out = ws.run("contacts", "import", str(path), "--list", name).output
    assert table_value(out, "imported (new)") == str(len(phones) if new is None else new), out


def _phones(count: int, offset: int = 0) -> list[str]:
    return [f"+1{AREAS[(offset + n) // 100]}55501{(offset + n) % 100:02d}" for n in range(count)]


def _campaign(ws: Workspace, name: str, audience: str, pace: str, extra: str = "") -> int:
    path = ws.path / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\n{audience}\n\n[message]\ntype = "text"\ntext = "Hello {{{{ name }}}}"'
        f'\n\n[schedule]\ntimezone = "UTC"\n\n[pace]\n{pace}\n{extra}',
        encoding="utf-8",
    )
    return int(ws.run("campaign", "create", str(path), "--json").json()["id"])


def _instance(api: httpx.Client, instance_id: str) -> dict[str, Any]:
    res = api.get(f"/api/v1/instances/{instance_id}")
    assert res.status_code == 200, res.text
    body = res.json()
    assert isinstance(body, dict)
    return body


def _report(ws: Workspace, campaign_id: int) -> list[dict[str, str]]:
    path = ws.path / f"report-{campaign_id}.csv"
    ws.run("report", str(campaign_id), "--output", str(path))
    return list(csv.DictReader(path.open(encoding="utf-8-sig")))


def _metric(server: Server, name: str, label: str) -> float:
    with server.api() as api:
        text = api.get("/metrics").text
    found = re.search(rf'^{name}\{{level="{label}"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


# -- warm-up ------------------------------------------------------------------------------


def test_a_new_sender_ramps_up_day_by_day(tmp_path: Path) -> None:
    """Day 1 about 15 new contacts, then about double each day (within the documented
    +/-20 %), each day's allowance used up and shown by ``instance status`` and the API."""
    with (
        _own_sandbox(tmp_path / "sandbox") as sandbox,
        workspace(tmp_path / "work", sandbox.url, GATECAST_WARMUP_ENABLED="true") as ws,
    ):
        ws.clock_start = DAY1
        instance_id = ws.link_sender()
        _people(ws, "customers", _phones(140))
        fast = "per_minute = 600\ndelay_seconds = [0, 0]\ndaily_cap = 500"
        campaign_id = _campaign(ws, "Ramp", 'list = "customers"', fast)
        total = 0
        for day, doubling in ((1, 15), (2, 30), (3, 60)):
            ws.clock_start = DAY1 + timedelta(days=day - 1)
            server = ws.serve()
            with server.api() as api:
                inst = wait_for(
                    lambda: (i := _instance(api, instance_id))["allowance_left"] == 0 and i,
                    timeout=90,
                    what=f"day {day}'s allowance to be used",
                )
            status = ws.run("instance", "status").output
            server.stop()
            assert inst["warmup_day"] == day, inst
            allowance = inst["warmup_allowance"]
            assert 0.8 * doubling <= allowance <= 1.2 * doubling, inst
            # every contact is new to this sender: each uses a whole unit
            assert inst["sends_today"] == allowance == inst["warmup_used"], inst
            assert f"warm-up day {day}: {allowance:g} of {allowance:g}" in status, status
            assert "may send 0 more today" in status, status
            total += int(allowance)
            sent = sum(1 for r in _report(ws, campaign_id) if r["sent_at"])
            assert sent == total, (day, sent, total)

        # a person gives this sender its own ramp: today (day 4) is its last limited day
        ws.run("instance", "warmup", instance_id, "--ramp", "5,5,5,7")
        ws.clock_start = DAY1 + timedelta(days=3)
        shown = ws.run("instance", "status").output
        assert "warm-up day 4: 0 of 7 new-contact messages" in shown, shown
        refused = ws.run("instance", "warmup", instance_id, "--ramp", "15,x", ok=False)
        assert refused.code != 0 and "--ramp" in refused.output, refused.output


# -- the health score ---------------------------------------------------------------------


def test_a_burst_of_signals_slows_then_pauses_then_resumes_the_sender(tmp_path: Path) -> None:
    """Every message fails (numbers not on the app, a failed status 404 each): the
    score passes medium (pace halved), then high (paused with the reason), and after the
    cool-down the sender resumes by itself; each change is counted in the metrics."""
    settings = {
        "GATECAST_HEALTH_MEDIUM": "3",
        "GATECAST_HEALTH_HIGH": "8",
        "GATECAST_HEALTH_CRITICAL": "500",
        "GATECAST_HEALTH_HALF_LIFE_SECONDS": "10",
        "GATECAST_HEALTH_COOLDOWN_SECONDS": "15",
    }
    with (
        _own_sandbox(tmp_path / "sandbox", "--not-on-app-rate", "1") as sandbox,
        workspace(tmp_path / "work", sandbox.url, **settings) as ws,
    ):
        instance_id = ws.link_sender()
        _people(ws, "nobody", _phones(30))
        campaign_id = _campaign(
            ws,
            "Burst",
            'list = "nobody"',
            "per_minute = 60\ndelay_seconds = [0, 0]",
            "\n[safety]\nmax_failure_rate = 1.0\n",
        )
        server = ws.serve()
        with server.api() as api:
            paused = wait_for(
                lambda: (
                    str((i := _instance(api, instance_id))["paused_reason"] or "").startswith(
                        "health high"
                    )
                    and i
                ),
                timeout=90,
                what="the sender to pause at high health",
            )
            assert paused["health_level"] == "high", paused
            assert paused["health_resume_at"], paused
            assert "not on app" in paused["paused_reason"], paused
            assert "resumes by itself" in paused["care_summary"], paused
            assert _metric(server, "gatecast_sender_health_changes_total", "medium") >= 1
            assert _metric(server, "gatecast_sender_health_changes_total", "high") >= 1
            status = ws.run("instance", "status").output
            assert "health high" in status, status

            resumed = wait_for(
                lambda: (
                    (i := _instance(api, instance_id))["paused_reason"] is None
                    and i["health_level"] != "high"
                    and i
                ),
                timeout=90,
                what="the sender to resume after its cool-down",
            )
            assert resumed["state"] == "connected", resumed
            before = sum(1 for r in _report(ws, campaign_id) if r["failed_at"])
            wait_for(
                lambda: sum(1 for r in _report(ws, campaign_id) if r["failed_at"]) > before,
                timeout=60,
                what="sends after the resume",
            )
        server.stop()


# -- 463-aware routing --------------------------------------------------------------------


def test_under_a_463_known_chats_and_groups_go_on_and_cold_contacts_wait(
    tmp_path: Path,
) -> None:
    """The sandbox locks the sender after three cold contacts (463 for cold contacts
    for a few seconds). gatecast keeps sending to known chats and to a group, parks the
    cold contacts until the lock's end and sends them then; the sender is never paused."""
    with (
        _own_sandbox(
            tmp_path / "sandbox", "--cold-lock-after", "3", "--cold-lock-seconds", "3"
        ) as sandbox,
        workspace(tmp_path / "work", sandbox.url, GATECAST_TIMELOCK_SECONDS="6") as ws,
    ):
        instance_id = ws.link_sender()
        known = _phones(3)
        cold = _phones(4, offset=3)
        _people(ws, "known", known)
        pace = "per_minute = 60\ndelay_seconds = [0, 0]"
        first = _campaign(ws, "First", 'list = "known"', pace)
        ws.run("campaign", "run", str(first), "--webhook", "--settle", "3", timeout=120)
        assert all(r["delivered_at"] for r in _report(ws, first))  # now known chats

        _people(ws, "mixed", cold + known, new=len(cold))  # cold contacts first: they come up first
        mixed = _campaign(ws, "Mixed", 'list = "mixed"', pace)
        group = _campaign(ws, "Group", 'groups = ["120363041234567890@g.us"]', pace)
        server = ws.serve()
        with server.api() as api:
            locked = wait_for(
                lambda: (i := _instance(api, instance_id))["timelock_until"] and i,
                timeout=60,
                what="the 463 timelock to show",
            )
            assert "463 timelock until" in locked["care_summary"], locked
            for cid in (mixed, group):
                wait_for(
                    lambda c=cid: (
                        ws.run("campaign", "show", str(c), "--json").json()["state"] == "completed"
                    ),
                    timeout=120,
                    what=f"campaign {cid} to complete",
                )
            after = _instance(api, instance_id)
        server.stop()
        assert after["paused_reason"] is None, after

        rows = {r["target"]: r for r in _report(ws, mixed)}
        assert all(rows[p]["sent_at"] and rows[p]["delivered_at"] for p in known + cold), rows
        sent = {p: datetime.fromisoformat(rows[p]["sent_at"]) for p in known + cold}
        group_sent = datetime.fromisoformat(_report(ws, group)[0]["sent_at"])
        first_cold_after_lock = min(sent[p] for p in cold)
        # known chats and the group went out while cold contacts waited for the lock's end
        assert max(sent[p] for p in known) < first_cold_after_lock, sent
        assert group_sent < first_cold_after_lock, (group_sent, sent)
