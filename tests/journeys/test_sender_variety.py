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


def _serve_until_completed(ws: Workspace, at: datetime, campaign_id: int) -> Server:
    """``gatecast serve`` with its clock at ``at`` until the campaign completed."""
    ws.clock_start = at
    server = ws.serve()
    wait_for(
        lambda: _campaign(server, campaign_id)["state"] == "completed",
        what=f"campaign {campaign_id} completed (clock from {at:%Y-%m-%d %H:%M})",
    )
    return server


def _stop(server: Server) -> None:
    server.stop()
    log = server.process.output()
    assert "Traceback" not in log and "ERROR" not in log, log


@pytest.mark.slow  # two serve runs on two simulated days: about 20 s
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
    shown = " ".join(ws.run("campaign", "show", str(campaign_id)).output.split())
    assert "4 attempt(s), then every 12h until 3d" in shown, shown

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
    server = _serve_until_completed(ws, DAY_ONE + timedelta(days=1), campaign_id)
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


def _phones(n: int) -> list[tuple[str, str]]:
    return [(f"Person {i}", f"+49151234{i:05d}") for i in range(n)]


@pytest.mark.slow  # two serve runs on two simulated days: about 20 s
def test_an_ab_campaign_splits_by_weight_and_the_winner_gets_the_rest(
    ws: Workspace, sandbox_process: Process
) -> None:
    """Two variants weighted 1:3, half of the list in the test, winner by the opt-out
    rate after 4 h: the test splits about 1:3; three recipients of B answer STOP; four
    hours later A is picked (logged with its rates, shown by the API with a significance
    note), and the rest is sent with A."""
    ws.clock_start = DAY_ONE
    sender = ws.link_sender()
    people = _phones(80)
    _import(ws, "ab", people)
    path = _write(
        ws,
        "ab.toml",
        'name = "AB"\nlist = "ab"\n\n[message]\ntype = "text"\n\n'
        '[[message.variants]]\nname = "A"\nweight = 1\ntext = "Hello {{ name }}, our offer"\n\n'
        '[[message.variants]]\nname = "B"\nweight = 3\ntext = "{{ name }}! BUY NOW"\n\n'
        '[ab]\ntest_share = 0.5\npick_by = "opt_out_rate"\nafter = "4h"\n\n' + FAST_PACE,
    )
    created = ws.run("campaign", "create", str(path), "--json").json()
    campaign_id = int(created["id"])
    assert {item["variant"] for item in created["preview"]} <= {"A", "B"}, created["preview"]

    server = ws.serve()
    rows = wait_for(
        lambda: (
            (r := _report(server, campaign_id))
            and all(row["state"] in SENT_STATES for row in r.values() if row["variant"])
            and r
        ),
        what="the test's rows sent",
    )
    test = [row for row in rows.values() if row["variant"]]
    rest = [row for row in rows.values() if not row["variant"]]
    a = [row for row in test if row["variant"] == "A"]
    b = [row for row in test if row["variant"] == "B"]
    assert 25 <= len(test) <= 55 and len(rest) == 80 - len(test), (len(test), len(rest))
    assert 0 < len(a) < len(b), (len(a), len(b))  # weight 1 against 3
    assert all(row["state"] == "queued" for row in rest), rest
    assert all("BUY NOW" not in row["error"] for row in rest)
    # three of B's recipients opt out
    for row in b[:3]:
        answer = httpx.post(
            f"{sandbox_process.url}/sandbox/instances/{sender}/incoming",
            json={"from": row["target"].lstrip("+"), "text": "STOP"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
    wait_for(
        lambda: _campaign(server, campaign_id)["variants"]["variants"][1]["opted_out"] == 3,
        what="B's three opt-outs counted",
    )
    shown = _campaign(server, campaign_id)
    assert shown["state"] == "running" and shown["variants"]["ab"]["pick"] is None, shown
    _stop(server)

    # four hours later: the pick, and the rest sent with A
    server = _serve_until_completed(ws, DAY_ONE + timedelta(hours=4, minutes=1), campaign_id)
    rows = _report(server, campaign_id)
    for row in rest:
        assert rows[row["target"]]["variant"] == "A", rows[row["target"]]
        assert rows[row["target"]]["state"] in SENT_STATES, rows[row["target"]]
    compared = _campaign(server, campaign_id)["variants"]
    pick = compared["ab"]["pick"]
    assert pick["winner"] == "A" and pick["pick_by"] == "opt_out_rate", pick
    assert pick["rates"]["B"]["opted_out"] == 3 and pick["rates"]["A"]["opted_out"] == 0, pick
    assert pick["at"].startswith("2026-11-20T14:01"), pick
    assert "not significant" in compared["note"], compared
    with server.api() as api:
        summary = api.get(f"/api/v1/campaigns/{campaign_id}/report.json")
    assert summary.status_code == 200, summary.text
    assert summary.json()["summary"]["variants"]["ab"]["pick"]["winner"] == "A"
    log = server.process.output()
    _stop(server)
    assert "A/B winner A by opt_out_rate" in log, log
    shown_text = ws.run("campaign", "show", str(campaign_id)).output
    assert "picked A" in shown_text and "not significant" in shown_text, shown_text


@pytest.mark.slow  # two serve runs on two simulated days: about 20 s
def test_the_identical_content_guard_holds_a_run_and_the_create_warns(ws: Workspace) -> None:
    """``GATECAST_MAX_IDENTICAL_IN_ROW=3`` and one static text for six recipients: the
    create warns of low variety; a sender sends three, holds the other three (their report
    rows say why) for ten minutes, then sends them."""
    ws.clock_start = DAY_ONE
    ws.settings["GATECAST_MAX_IDENTICAL_IN_ROW"] = "3"
    ws.link_sender()
    _import(ws, "same", _phones(6))
    path = _write(
        ws,
        "same.toml",
        'name = "Same"\nlist = "same"\n\n[message]\ntype = "text"\n'
        'text = "The same words for everyone"\n\n'
        "[pace]\nper_minute = 0\ndelay_seconds = [0.05, 0.1]\n",
    )
    printed = " ".join(ws.run("campaign", "create", str(path)).output.split())  # unwrapped
    assert "low variety: 1 distinct message(s) over the first 6 recipients" in printed, printed
    assert "after 3 identical messages in a row" in printed, printed
    campaign_id = int(ws.run("campaign", "list", "--json").json()[0]["id"])
    shown = ws.run("campaign", "show", str(campaign_id), "--json").json()
    assert shown["spec"]["safety"]["max_identical_in_row"] == 3, shown["spec"]

    server = ws.serve()
    rows = wait_for(
        lambda: (
            (r := _report(server, campaign_id))
            and sum(row["state"] in SENT_STATES for row in r.values()) == 3
            and sum("held: 3 identical" in row["error"] for row in r.values()) == 3
            and r
        ),
        what="three sent, three held",
    )
    held = [row for row in rows.values() if row["state"] not in SENT_STATES]
    assert all(row["state"] == "queued" and row["attempts"] == "0" for row in held), held
    assert all("waits until 2026-11-20 10:10" in row["error"] for row in held), held
    assert _campaign(server, campaign_id)["state"] == "running"
    _stop(server)

    server = _serve_until_completed(ws, DAY_ONE + timedelta(minutes=11), campaign_id)
    rows = _report(server, campaign_id)
    for row in held:
        after = rows[row["target"]]
        assert after["state"] in SENT_STATES and after["error"] == "", after
        assert after["sent_at"] >= "2026-11-20T10:10", after
    _stop(server)


def test_the_api_preview_reports_low_variety(ws: Workspace) -> None:
    _import(ws, "few", _phones(6))
    body = {
        "name": "Few",
        "list": "few",
        "message": {"type": "text", "text": "{Hi|Hello} there"},
    }
    with ws.serve().api() as api:
        answer = api.post("/api/v1/campaigns/preview", json=body)
    assert answer.status_code == 200, answer.text
    variety = answer.json()["variety"]
    assert variety["sampled"] == 6 and variety["distinct"] <= 2, variety
    assert variety["warning"].startswith("low variety"), variety
