"""Estimates that come true (issue 29, item 2): the finish a public face predicts is the
finish the sandbox sees.

The journey reads the predicted start and finish of four campaigns from the public
faces (``campaign create --dry-run --json``, ``campaign create``, and the dashboard's
``POST /api/v1/campaigns/check`` of a running ``serve``), sends them with one ``gatecast
serve`` to the module's sandbox over HTTP, each through its own sender, and compares each
prediction with the last send the sandbox recorded: within 10 % of the predicted wait
(from the estimate to the finish) or the estimate's stated margin, whichever is larger.
A plain, a windowed, a capped and a warm-up campaign, on SQLite and on PostgreSQL.

The process clock is injected (``ws.clock_start``) a few seconds before 09:00 UTC, the
moment the windowed campaign's window opens and a new local day begins in the capped and
warm-up campaigns' zone (``Etc/GMT+9``, UTC-9: its midnight is 09:00 UTC), so one
``serve`` crosses all of them in seconds. The sandbox keeps real time; a send's time at the
sandbox is put on the campaign's clock by the offset between the two, read from the
sends themselves (the report's ``sent_at`` beside the sandbox's record of the same
message: one offset per ``serve``, as its clock runs at real speed).
"""

from __future__ import annotations

import re
import statistics
import time
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
#: ``serve``'s clock starts at least this long before the campaigns' creation time on it
#: (until then it sends none of them): its boot and the dashboard's checks come first
HEADROOM = timedelta(seconds=20)
#: ... and at least this many times the slowest ``campaign create`` of the journey: a
#: loaded machine boots ``serve`` slower (up to about five CLI commands), so the
#: headroom grows with the load instead of every run waiting for the worst one (30 s)
HEADROOM_PER_COMMAND = 6
#: UTC-9: its local midnight is 09:00 UTC
ZONE = "Etc/GMT+9"
NINE = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
#: the campaigns are created (each CLI process's clock starts here)
MADE_AT = NINE - timedelta(seconds=20)

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


def _people(ws: Workspace, name: str, count: int, first: int) -> None:
    """Import ``count`` new contacts into the list ``name``."""
    path = ws.path / f"{name}.csv"
    rows = [f"Person {n},+4915112{n:06d}" for n in range(first, first + count)]
    path.write_text("Name,Phone\n" + "\n".join(rows) + "\n", encoding="utf-8")
    ws.run("contacts", "import", str(path), "--list", name)


def _file(ws: Workspace, name: str, sender: str, schedule: str, pace: str = PACE) -> Path:
    """A campaign file to the list ``name``, sent by ``sender`` alone."""
    path = ws.path / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\nlist = "{name}"\ninstances = ["{sender}"]\n\n[message]\n'
        f'type = "text"\ntext = "Hello {{{{ name }}}}"\n\n[schedule]\n{schedule}\n\n'
        f"[pace]\n{pace}\n",
        encoding="utf-8",
    )
    return path


def _dry_run(ws: Workspace, path: Path) -> dict[str, Any]:
    check: dict[str, Any] = ws.run("campaign", "create", str(path), "--dry-run", "--json").json()
    return check


def _created(ws: Workspace, path: Path) -> tuple[int, str]:
    """``campaign create``: the id it names and what it printed."""
    out = ws.run("campaign", "create", str(path)).output
    found = re.search(r"campaign (\d+) ", out)
    assert found, out
    return int(found.group(1)), out


def _api_check(server: Server, path: Path) -> dict[str, Any]:
    """The dashboard's final check of an uploaded file: ``POST /campaigns/from-toml``,
    then ``POST /campaigns/check``."""
    with server.api() as api:
        spec = ok(api.post("/api/v1/campaigns/from-toml", json={"toml": path.read_text()}))
        found: dict[str, Any] = ok(api.post("/api/v1/campaigns/check", json=spec["spec"]))
    return found


def _sandbox_finish(server: Server, sandbox: Process, campaign_id: int) -> datetime:
    """The campaign's last send as the sandbox recorded it, on the campaign's clock."""
    with server.api() as api:
        page = ok(api.get(f"/api/v1/campaigns/{campaign_id}/deliveries", params={"limit": 100}))
    rows = {r["message_id"]: r for r in page["items"] if r["message_id"]}
    with httpx.Client(base_url=sandbox.url, timeout=30) as client:
        seen = [m for m in ok(client.get("/sandbox/messages")) if m["message_id"] in rows]
    assert len(seen) == len(rows) == page["total"], (len(seen), len(rows))  # each sent once
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
def test_estimates_come_true(db_ws: Workspace, sandbox_process: Process) -> None:
    """Four campaigns, each through its own new sender (the warm-up one with a ramp of 4
    new contacts on day 1, 8 on day 2):

    - plain: 12 messages a second apart from 09:00:00: the last at 09:00:11;
    - windowed: created at 08:59:40 with a 09:00-17:00 window: every face says it starts
      at 09:00 (``campaign create`` no longer says "starts now"), 6 sends to 09:00:02.5;
    - capped: a daily cap of 3 for 6 messages: 3 at once, 3 from the zone's midnight;
    - warm-up: 8 new contacts, day 1 allows 4: the other 4 from the zone's midnight.
    """
    ws = db_ws
    ws.clock_start = MADE_AT
    senders = {name: ws.link_sender() for name in ("plain", "windowed", "capped", "warm")}
    ws.run("instance", "warmup", senders["warm"], "--ramp", "4,8")
    sizes = {"plain": 12, "windowed": 6, "capped": 6, "warm": 8}
    first = 0
    for name, size in sizes.items():
        _people(ws, name, size, first)
        first += size
    utc, zone = 'timezone = "UTC"', f'timezone = "{ZONE}"'
    paths = {
        "plain": _file(
            ws,
            "plain",
            senders["plain"],
            f'{utc}\nstart = "2026-12-01T09:00:00"',
            "per_minute = 60\ndelay_seconds = [0, 0]",
        ),
        "windowed": _file(
            ws, "windowed", senders["windowed"], f'{utc}\nwindow = ["09:00", "17:00"]'
        ),
        "capped": _file(ws, "capped", senders["capped"], zone, f"{PACE}\ndaily_cap = 3"),
        "warm": _file(ws, "warm", senders["warm"], zone),
    }
    checks = {name: _dry_run(ws, path) for name, path in paths.items()}
    finishes = {name: datetime.fromisoformat(c["finish"]) for name, c in checks.items()}
    assert finishes["plain"] == NINE + timedelta(seconds=11), checks["plain"]
    assert datetime.fromisoformat(checks["windowed"]["start"]) == NINE, checks["windowed"]
    assert finishes["windowed"] == NINE + timedelta(seconds=2.5), checks["windowed"]
    assert finishes["capped"] == NINE + timedelta(seconds=1), checks["capped"]
    assert finishes["warm"] == NINE + timedelta(seconds=1.5), checks["warm"]
    assert all(c["margin_seconds"] == 0 and "±" not in c["sentence"] for c in checks.values())
    status = ws.run("instance", "status").output
    assert "warm-up day 1: 0 of 4 new-contact messages" in status, status

    ids, slowest = {}, 0.0
    for name, path in paths.items():
        began = time.monotonic()
        ids[name], out = _created(ws, path)
        slowest = max(slowest, time.monotonic() - began)
        said = checks[name]["sentence"].split(", starting ")[1].split(" at this pace")[0]
        assert f"starting {said}" in out and "starts now" not in out, (said, out)

    # ``serve`` boots before the campaigns' time on its clock; the dashboard's check of
    # each file, read then, gives the same finish
    ws.clock_start = MADE_AT - max(HEADROOM, HEADROOM_PER_COMMAND * timedelta(seconds=slowest))
    server = ws.serve()
    for name in ("windowed", "capped", "warm"):
        _same_finish(checks[name], _api_check(server, paths[name]))
    wait_for(
        lambda: all(campaign_over_api(server, cid)["state"] == "completed" for cid in ids.values()),
        timeout=120,
        what="the four campaigns to complete",
    )
    for name, cid in ids.items():
        _assert_came_true(checks[name], MADE_AT, _sandbox_finish(server, sandbox_process, cid))
    server.stop()
