"""Estimates that come true (issue 29, item 2): the finish a public face predicts is the
finish the sandbox sees.

Each journey reads the predicted start and finish from a public face (``campaign create
--dry-run --json``, or ``POST /api/v1/campaigns/check`` of a running ``serve``), sends
the campaign with ``gatecast serve`` to the module's sandbox over HTTP, and compares the
prediction with the last send the sandbox recorded: within 10 % of the predicted wait
(from the estimate to the finish) or the estimate's stated margin, whichever is larger.
A plain, a windowed, a capped and a warm-up campaign, on SQLite and on PostgreSQL.

The process clock is injected (``ws.clock_start``): a window's opening or a local
midnight is reached in seconds. The sandbox keeps real time; a send's time at the
sandbox is put on the campaign's clock by the offset between the two, read from the
sends themselves (the report's ``sent_at`` beside the sandbox's record of the same
message: one offset per ``serve``, as its clock runs at real speed).
"""

from __future__ import annotations

import csv
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.journeys.harness import (
    Process,
    Server,
    Workspace,
    campaign_over_api,
    ok,
    wait_for,
)

DAY = datetime(2026, 12, 1, tzinfo=UTC)
#: two sends a second apart: no random delay, so the estimate states no margin
PACE = "per_minute = 120\ndelay_seconds = [0, 0]"
SENT_STATES = ("sent", "delivered", "read")
#: ``serve`` starts this long before a campaign's start on its clock (its boot's time)
HEADROOM = timedelta(seconds=20)

DATABASES = pytest.mark.parametrize(
    "database", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)


@pytest.fixture
def db_ws(ws: Workspace, database: str, request: pytest.FixtureRequest) -> Workspace:
    """The workspace on the parametrized database (a fresh PostgreSQL one upgraded by
    ``gatecast db upgrade``, as the CLI asks)."""
    if database == "postgresql":
        ws.settings["GATECAST_DATABASE_URL"] = str(request.getfixturevalue("pg_url"))
        ws.run("db", "upgrade")
    return ws


def _people(ws: Workspace, count: int) -> None:
    path = ws.path / "people.csv"
    rows = [f"Person {n},+4915112{n:06d}" for n in range(count)]
    path.write_text("Name,Phone\n" + "\n".join(rows) + "\n", encoding="utf-8")
    ws.run("contacts", "import", str(path), "--list", "people")


def _file(ws: Workspace, name: str, schedule: str = "", pace: str = PACE) -> Path:
    path = ws.path / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\nlist = "people"\n\n[message]\ntype = "text"\n'
        f'text = "Hello {{{{ name }}}}"\n\n[schedule]\ntimezone = "UTC"\n{schedule}\n\n'
        f"[pace]\n{pace}\n",
        encoding="utf-8",
    )
    return path


def _dry_run(ws: Workspace, path: Path) -> dict[str, Any]:
    check: dict[str, Any] = ws.run("campaign", "create", str(path), "--dry-run", "--json").json()
    return check


def _created(ws: Workspace, path: Path) -> tuple[int, str]:
    """``campaign create``: the id (from the listing) and what it printed."""
    out = ws.run("campaign", "create", str(path)).output
    return int(ws.run("campaign", "list", "--json").json()[0]["id"]), out


def _api_check(server: Server, path: Path) -> dict[str, Any]:
    """The dashboard's final check of an uploaded file: ``POST /campaigns/from-toml``,
    then ``POST /campaigns/check``."""
    with server.api() as api:
        spec = ok(api.post("/api/v1/campaigns/from-toml", json={"toml": path.read_text()}))
        found: dict[str, Any] = ok(api.post("/api/v1/campaigns/check", json=spec["spec"]))
    return found


def _send(ws: Workspace, made_at: datetime, campaign_id: int, path: Path | None = None) -> Any:
    """``gatecast serve`` until the campaign completed, then stopped. Its clock starts
    :data:`HEADROOM` before ``made_at`` (the campaign's start): a loaded machine's boot
    does not delay the start. With ``path``: the API's final check of that file, read
    once ``serve`` is up (before ``made_at``)."""
    ws.clock_start = made_at - HEADROOM
    server = ws.serve()
    check = None if path is None else _api_check(server, path)
    wait_for(
        lambda: campaign_over_api(server, campaign_id)["state"] == "completed",
        timeout=90,
        what=f"campaign {campaign_id} to complete",
    )
    server.stop()
    return check


def _sandbox_finish(ws: Workspace, sandbox: Process, campaign_id: int) -> datetime:
    """The campaign's last send as the sandbox recorded it, on the campaign's clock."""
    path = ws.path / f"report-{campaign_id}.csv"
    ws.run("report", str(campaign_id), "--output", str(path))
    with path.open(encoding="utf-8-sig") as fh:
        rows = {r["message_id"]: r for r in csv.DictReader(fh) if r["message_id"]}
    with httpx.Client(base_url=sandbox.url, timeout=30) as client:
        seen = [m for m in ok(client.get("/sandbox/messages")) if m["message_id"] in rows]
    assert len(seen) == len(rows) and rows, (len(seen), len(rows))  # each sent once
    assert all(r["state"] in SENT_STATES for r in rows.values()), rows
    offset = statistics.median(
        datetime.fromisoformat(rows[m["message_id"]]["sent_at"]).timestamp() - m["at"] for m in seen
    )
    return datetime.fromtimestamp(max(m["at"] for m in seen) + offset, UTC)


def _assert_came_true(check: dict[str, Any], made_at: datetime, finish: datetime) -> None:
    """The sandbox's finish within 10 % of the predicted wait or the stated margin."""
    predicted = datetime.fromisoformat(check["finish"])
    wait = (predicted - made_at).total_seconds()
    allowed = max(0.1 * wait, float(check["margin_seconds"]))
    error = abs((finish - predicted).total_seconds())
    assert error <= allowed, (check["sentence"], finish, error, allowed)


def _same_finish(dry_run: dict[str, Any], api: dict[str, Any]) -> None:
    """The dry run and the dashboard's check (read earlier on ``serve``'s clock) say the
    same finish and margin."""
    assert api["finish"] and api["margin_seconds"] == dry_run["margin_seconds"], (dry_run, api)
    finish = datetime.fromisoformat(api["finish"])
    assert finish == datetime.fromisoformat(dry_run["finish"]), (dry_run, api)


@DATABASES
def test_a_plain_campaign_finishes_when_the_dry_run_says(
    db_ws: Workspace, sandbox_process: Process
) -> None:
    """No window, cap or warm-up: 12 messages a second apart end 11 s after the start
    (a start 10 s ahead: every process's clock starts at ``made_at`` when it starts)."""
    ws = db_ws
    made_at = DAY.replace(hour=10)
    start = made_at + timedelta(seconds=10)
    ws.clock_start = made_at
    ws.link_sender()
    _people(ws, 12)
    pace = "per_minute = 60\ndelay_seconds = [0, 0]"
    path = _file(ws, "Plain", 'start = "2026-12-01T10:00:10"', pace)
    check = _dry_run(ws, path)
    assert datetime.fromisoformat(check["start"]) == start, check
    assert datetime.fromisoformat(check["finish"]) == start + timedelta(seconds=11), check
    assert check["margin_seconds"] == 0 and "±" not in check["sentence"], check
    campaign_id, out = _created(ws, path)
    assert "starting 2026-12-01 10:00 UTC, finishing around 2026-12-01 10:00" in out, out
    _send(ws, start, campaign_id)
    _assert_came_true(check, made_at, _sandbox_finish(ws, sandbox_process, campaign_id))


@DATABASES
def test_a_windowed_campaign_starts_when_its_window_opens(
    db_ws: Workspace, sandbox_process: Process
) -> None:
    """Created at 08:59:50 with a 09:00-17:00 window: the dry run, the create and the
    dashboard's check all say it starts at 09:00 (not "now"), and the sandbox sees it
    end when they said."""
    ws = db_ws
    made_at = DAY.replace(hour=8, minute=59, second=50)
    ws.clock_start = made_at
    ws.link_sender()
    _people(ws, 6)
    path = _file(ws, "Windowed", 'window = ["09:00", "17:00"]')
    check = _dry_run(ws, path)
    assert datetime.fromisoformat(check["start"]) == DAY.replace(hour=9), check
    assert "starting 2026-12-01 09:00 UTC, finishing around 2026-12-01 09:00" in check["sentence"]
    campaign_id, out = _created(ws, path)
    assert "starting 2026-12-01 09:00 UTC" in out and "starts now" not in out, out
    api_check = _send(ws, made_at, campaign_id, path)
    _same_finish(check, api_check)
    assert datetime.fromisoformat(api_check["start"]) == DAY.replace(hour=9), api_check
    assert api_check["sentence"] == check["sentence"], (api_check, check)
    _assert_came_true(check, made_at, _sandbox_finish(ws, sandbox_process, campaign_id))


@DATABASES
def test_a_capped_campaign_finishes_the_next_day(
    db_ws: Workspace, sandbox_process: Process
) -> None:
    """A daily cap of 3 and 6 recipients, created 8 s before midnight: 3 today, 3 from
    midnight, as the estimate says (without the cap it would end today)."""
    ws = db_ws
    made_at = DAY.replace(hour=23, minute=59, second=52)
    ws.clock_start = made_at
    ws.link_sender()
    _people(ws, 6)
    path = _file(ws, "Capped", pace=f"{PACE}\ndaily_cap = 3")
    check = _dry_run(ws, path)
    midnight = DAY + timedelta(days=1)
    assert datetime.fromisoformat(check["finish"]) == midnight + timedelta(seconds=1), check
    campaign_id, out = _created(ws, path)
    assert "finishing around 2026-12-02 00:00" in out, out
    _same_finish(check, _send(ws, made_at, campaign_id, path))
    _assert_came_true(check, made_at, _sandbox_finish(ws, sandbox_process, campaign_id))


@DATABASES
def test_a_new_senders_warm_up_is_in_the_estimate(
    db_ws: Workspace, sandbox_process: Process
) -> None:
    """The default warm-up ramp (its first day set to 4 new contacts, about double the
    next): a new sender sends its day-1 allowance, the rest from midnight, and the dry
    run said so (without the warm-up it would say before midnight)."""
    ws = db_ws
    ws.settings["GATECAST_WARMUP_ENABLED"] = "true"
    ws.settings["GATECAST_WARMUP_FIRST_DAY"] = "4"
    made_at = DAY.replace(hour=23, minute=59, second=52)
    ws.clock_start = made_at
    instance_id = ws.link_sender()
    _people(ws, 8)
    path = _file(ws, "Warm-up", pace=f"{PACE}\ndaily_cap = 500")
    check = _dry_run(ws, path)
    assert instance_id in check["senders"], check
    midnight = DAY + timedelta(days=1)
    assert datetime.fromisoformat(check["finish"]) >= midnight, check  # day 1 allows 3-5
    status = ws.run("instance", "status").output
    assert "warm-up day 1: 0 of " in status, status
    campaign_id, _ = _created(ws, path)
    _same_finish(check, _send(ws, made_at, campaign_id, path))
    finish = _sandbox_finish(ws, sandbox_process, campaign_id)
    assert finish >= midnight, finish
    _assert_came_true(check, made_at, finish)
