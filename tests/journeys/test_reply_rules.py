"""Auto-replies (issue 32, item 3): an operator adds reply rules from the command line and
over the API to a running ``gatecast serve`` and a ``gatecast sandbox`` gateway, on a
Sunday (the process clock set with ``GATECAST_CLOCK_START``). A keyword is answered once,
not in a loop (the same person writing it again within the limit gets nothing); a tap on
a button of a message sent with ``gatecast message send --message`` is answered; a
message outside business hours gets the away message; an operator answering from the
inbox pauses the rules for that person; an opt-out gets nothing. Every answer is checked
against the sandbox's record of what each person received."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.journeys.harness import Process, Workspace, assert_problem, wait_for
from tests.journeys.harness import ok as _ok

#: SQLite in every run; PostgreSQL with the slow tests
DIALECTS = pytest.mark.parametrize(
    "dialect",
    ["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, pytest.mark.slow])],
)
#: a Sunday, noon in Lisbon: outside Monday-to-Friday business hours
SUNDAY = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
KEYWORDER, TAPPER, AWAY, PAUSED, STOPPER, LAST = (f"+1212555079{n}" for n in range(6))
FAST = {"per_minute": 0, "delay_seconds": [0, 0.1], "daily_cap": 500}


def _write(sandbox: Process, iid: str, phone: str, text: str, **more: str) -> None:
    httpx.post(
        f"{sandbox.url}/sandbox/instances/{iid}/incoming",
        json={"from": phone.lstrip("+"), "text": text, **more},
        timeout=10,
    ).raise_for_status()


def _received(sandbox: Process, phone: str) -> list[str]:
    got = httpx.get(f"{sandbox.url}/sandbox/messages", params={"to": phone.lstrip("+")}, timeout=10)
    return [str(m["payload"]) for m in got.json()]


def _answers(api: httpx.Client) -> dict[str, int]:
    return {r["name"]: r["answers"] for r in _ok(api.get("/api/v1/reply-rules"))["items"]}


@DIALECTS
def test_rules_answer_once_taps_and_away_and_pause_for_a_person(
    ws: Workspace, sandbox_process: Process, dialect: str, request: pytest.FixtureRequest
) -> None:
    if dialect == "postgresql":
        ws.settings["GATECAST_DATABASE_URL"] = str(request.getfixturevalue("pg_url"))
        ws.run("db", "upgrade")
    ws.clock_start = SUNDAY
    api = ws.serve().api()
    iid = ws.link_sender()
    # answers go at the deployment's stored pace (decision 65 now covers messages too)
    _ok(api.put("/api/v1/settings", json={"pace": FAST}))

    # the command line: a keyword rule and a button rule
    added = ws.run(
        "rules", "add", "Opening hours", "--keyword", "horario", "--keyword", "hours",
        "--text", "We open Mon-Fri 9:00-18:00",
    ).output  # fmt: skip
    assert "reply rule 1 'Opening hours' added: word: horario, hours" in added, added
    ws.run("rules", "add", "Yes tapped", "--button", "yes", "--text", "Here are the details")
    bad = ws.run("rules", "add", "Broken", "--button", "x", ok=False)
    assert bad.code == 2 and "message: " in bad.output, bad.output
    bad = ws.run("rules", "add", "Away", "--away", "--text", "Hi", "--timezone", "Mars/X", ok=False)
    assert bad.code == 2 and "hours.timezone: unknown timezone" in bad.output, bad.output
    # the API: the away message (business hours Monday to Friday in Lisbon)
    away = {
        "name": "Away",
        "trigger": "away",
        "hours": {
            "timezone": "Europe/Lisbon",
            "days": {d: ["09:00-18:00"] for d in ("mon", "fri")},
        },
        "message": {"type": "text", "text": "We are closed, back on Monday"},
    }
    rule = _ok(api.post("/api/v1/reply-rules", json=away), 201)
    assert rule["limit_hours"] == 24 and rule["pause_hours"] == 24 and rule["enabled"], rule
    refused = api.post(
        "/api/v1/reply-rules",
        json={**away, "hours": {"timezone": "UTC", "days": {"mon": ["18:00-09:00"]}}},
    )
    assert assert_problem(refused, 422, "invalid_request")["errors"][0]["loc"] == [
        "body", "hours", "days", "mon"
    ]  # fmt: skip
    assert (
        api.post("/api/v1/reply-rules", json={**away, "message": {"type": "text"}}).status_code
        == 422
    )
    listed = ws.run("rules", "list").output
    assert "Opening hours" in listed and "tap on yes" in listed and "Europe/Lisbon" in listed

    # a message with buttons from the command line (any kind, as the API takes)
    offer = {
        "type": "interactive",
        "text": "Want the details?",
        "buttons": [{"display_text": "Yes", "id": "yes"}],
    }
    sent = ws.run("message", "send", "--to", TAPPER, "--message", json.dumps(offer)).output
    assert f"to {TAPPER}" in sent, sent
    wait_for(
        lambda: any("Want the details?" in m for m in _received(sandbox_process, TAPPER)),
        what="the offer with its button",
    )
    both = ws.run("message", "send", "--to", TAPPER, "--text", "x", "--message", "{}", ok=False)
    assert both.code == 2 and "--message: give it alone" in both.output, both.output

    # a keyword (any case, any accents), a tap, a plain message on a Sunday, STOP
    _write(sandbox_process, iid, KEYWORDER, "Qual o HORÁRIO?")
    _write(sandbox_process, iid, TAPPER, "Yes", button="yes")
    _write(sandbox_process, iid, AWAY, "hello?")
    _write(sandbox_process, iid, STOPPER, "STOP")
    wait_for(
        lambda: _answers(api) == {"Opening hours": 1, "Yes tapped": 1, "Away": 1},
        what="one answer from each rule",
    )
    for phone, text in (
        (KEYWORDER, "We open Mon-Fri"),
        (TAPPER, "Here are the details"),
        (AWAY, "We are closed"),
    ):
        wait_for(
            lambda p=phone, t=text: any(t in m for m in _received(sandbox_process, p)), what=text
        )

    # the other side is a bot: it says the keyword again; within the limit, no answer
    _write(sandbox_process, iid, KEYWORDER, "horario")
    # a person answers PAUSED from the inbox: the rules keep quiet for them
    _write(sandbox_process, iid, PAUSED, "I have a question")
    wait_for(lambda: _answers(api)["Away"] == 2, what="the away message to PAUSED")

    def unhandled() -> dict[str, Any] | None:
        page = _ok(api.get("/api/v1/replies", params={"handled": "false", "limit": 50}))
        return next((r for r in page["items"] if r["phone"] == PAUSED), None)

    reply = wait_for(unhandled, what="PAUSED's message in the inbox")
    _ok(api.post(f"/api/v1/replies/{reply['id']}/answer", json={"text": "A person here"}), 201)
    _write(sandbox_process, iid, PAUSED, "what are your hours?")
    # the last message: once it is answered, the ones before it were looked at
    _write(sandbox_process, iid, LAST, "hours")
    wait_for(lambda: _answers(api)["Opening hours"] == 2, what="LAST answered")
    assert _answers(api) == {"Opening hours": 2, "Yes tapped": 1, "Away": 2}
    wait_for(
        lambda: any("We open" in m for m in _received(sandbox_process, LAST)), what="LAST's answer"
    )
    wait_for(
        lambda: any("A person here" in m for m in _received(sandbox_process, PAUSED)),
        what="the person's answer",
    )
    # the sandbox's record: each answer once, none to the bot's repeat, the opt-out, or
    # PAUSED after the person's answer
    keyworder = _received(sandbox_process, KEYWORDER)
    assert sum("We open" in m for m in keyworder) == 1 and len(keyworder) == 1, keyworder
    assert _received(sandbox_process, STOPPER) == []
    paused = _received(sandbox_process, PAUSED)
    assert len(paused) == 2 and sum("closed" in m for m in paused) == 1, paused

    # switched off from the command line, a rule answers nothing; deleted, it is gone
    off = ws.run("rules", "edit", "2", "--disable").output
    assert "reply rule 2 'Yes tapped' changed" in off, off
    assert _ok(api.get("/api/v1/reply-rules/2"))["enabled"] is False
    assert "reply rule 1 deleted" in ws.run("rules", "delete", "1").output
    assert api.get("/api/v1/reply-rules/1").status_code == 404
    gone = ws.run("rules", "delete", "1", ok=False)
    assert gone.code == 1 and "no reply rule 1" in gone.output, gone.output
    assert [r["id"] for r in ws.run("rules", "list", "--json").json()] == [2, 3]
    # the messages the rules sent are no campaigns of the list
    assert _ok(api.get("/api/v1/campaigns"))["total"] == 0
