"""Retries over days, A/B variants and the identical-content guard as a user meets them
(issue 16, items 4-6).

Through the public faces only: ``gatecast contacts import``, ``gatecast campaign create``,
``gatecast serve`` (its HTTP API: the campaign, its report) against a sandbox gateway over
HTTP. The process clock is injected (``ws.clock_start``): each ``serve`` starts on the day
it plays, so days pass in seconds.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.journeys.harness import Process, Server, Workspace, start_sandbox, wait_for, workspace

SENT_STATES = ("sent", "delivered", "read")
FAST_PACE = "[pace]\nper_minute = 0\ndelay_seconds = [0, 0]\n"
DAY_ONE = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def quota_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """A sandbox whose senders may send one message a month (then the quota answer)."""
    proc = start_sandbox(
        tmp_path_factory.mktemp("quota"), "--status-delays", "0.05,0.1,0.2", "--monthly-quota", "1"
    )
    yield proc
    proc.stop()


@pytest.fixture
def quota_ws(tmp_path: Path, quota_gateway: Process) -> Iterator[Workspace]:
    with workspace(tmp_path / "work", quota_gateway.url) as w:
        yield w


def _write(ws: Workspace, name: str, text: str) -> Path:
    path = ws.path / name
    path.write_text(text, encoding="utf-8")
    return path


def _report(server: Server, campaign_id: int) -> dict[str, dict[str, str]]:
    """The campaign's CSV report as the API gives it, rows by target."""
    with server.api() as api:
        answer = api.get(f"/api/v1/campaigns/{campaign_id}/report.csv")
    assert answer.status_code == 200, answer.text
    text = answer.content.decode("utf-8-sig")
    return {row["target"]: row for row in csv.DictReader(io.StringIO(text))}


def _campaign(server: Server, campaign_id: int) -> dict[str, Any]:
    with server.api() as api:
        answer = api.get(f"/api/v1/campaigns/{campaign_id}")
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def _import(ws: Workspace, list_name: str, rows: list[tuple[str, str]]) -> None:
    lines = "".join(f"{name},{phone}\n" for name, phone in rows)
    path = _write(ws, f"{list_name}.csv", "Name,Phone\n" + lines)
    ws.run("contacts", "import", str(path), "--list", list_name)


def _stop(server: Server) -> None:
    server.stop()
    log = server.process.output()
    assert "Traceback" not in log and "ERROR" not in log, log


def test_a_retry_horizon_sends_a_quota_failure_the_next_day(
    quota_ws: Workspace, quota_gateway: Process
) -> None:
    """``[retry] until = "3d", every = "12h"``: the second recipient meets the sender's
    quota on day one; its row waits (the campaign stays running, the report says why and
    when it is tried next); on day two, with the quota renewed, it is sent, attempt 2."""
    ws = quota_ws
    ws.clock_start = DAY_ONE
    sender = ws.link_sender()
    _import(ws, "two", [("Ada", "+4915123456789"), ("Ben", "+4915123456790")])
    path = _write(
        ws,
        "horizon.toml",
        'name = "Horizon"\nlist = "two"\n\n[message]\ntype = "text"\ntext = "Hi {{ name }}"\n\n'
        f'{FAST_PACE}\n[retry]\nuntil = "3d"\nevery = "12h"\n',
    )
    campaign_id = int(ws.run("campaign", "create", str(path), "--json").json()["id"])

    server = ws.serve()
    rows = wait_for(
        lambda: (
            (r := _report(server, campaign_id))
            and any(row["attempts"] == "1" and "quota" in row["error"] for row in r.values())
            and any(row["state"] in SENT_STATES for row in r.values())
            and r
        ),
        what="one sent, one refused for the quota",
    )
    waiting = next(row for row in rows.values() if row["state"] not in SENT_STATES)
    assert waiting["state"] == "queued", waiting
    assert "next try 2026-11-20 22:00" in waiting["error"], waiting
    assert _campaign(server, campaign_id)["state"] == "running"
    _stop(server)

    # a new month for the sandbox's quota; gatecast's clock the next morning
    renewed = httpx.post(f"{quota_gateway.url}/sandbox/instances/{sender}/renew-quota", timeout=10)
    assert renewed.status_code == 200, renewed.text
    ws.clock_start = DAY_ONE + timedelta(days=1)
    server = ws.serve()
    wait_for(
        lambda: _campaign(server, campaign_id)["state"] == "completed",
        what="the campaign completed on day two",
    )
    again = _report(server, campaign_id)[waiting["target"]]
    assert again["state"] in SENT_STATES, again
    assert again["attempts"] == "2", again
    assert again["sent_at"].startswith("2026-11-21"), again
    _stop(server)


def test_a_bad_retry_horizon_is_refused_naming_the_field(ws: Workspace) -> None:
    _import(ws, "one", [("Ada", "+4915123456789")])
    path = _write(
        ws,
        "bad.toml",
        'name = "Bad"\nlist = "one"\n[message]\ntype = "text"\ntext = "Hi"\n'
        '[retry]\nuntil = "3 weeks"\nevery = "6h"\n',
    )
    refused = ws.run("campaign", "create", str(path), ok=False)
    assert refused.code != 0
    assert "retry.until" in refused.output and "not a duration" in refused.output, refused.output
    assert ws.run("campaign", "list", "--json").json() == []
