"""Follow-up steps (issue 32, item 2; decision 70) through the HTTP API, under injected
time, against the sandbox's simulated people: a campaign with quick-reply buttons whose
"yes" tappers get the details, whose silent recipients get one reminder after 2 days, and
whose other answerers (a "no", a keyword, STOP) get nothing more; checked against the
sandbox's record of every message each person received. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import csv
from datetime import timedelta
from typing import Any

import httpx
import pytest

from storage.types import utcnow
from tests.journeys.harness import (
    API_KEY,
    QUICK_STATUSES,
    Process,
    Server,
    Workspace,
    ok,
    wait_for,
)

SANDBOX_ARGS = (
    *QUICK_STATUSES,
    "--seed", "32",
    "--tap-rate", "0.4",
    "--keyword-rate", "0.15",
    "--keywords", "INFO",
    "--stop-rate", "0.15",
    "--reply-delay", "0.1-0.3",
)  # fmt: skip

BUTTONS = [
    {"kind": "quick_reply", "display_text": "Yes", "id": "yes"},
    {"kind": "quick_reply", "display_text": "No", "id": "no"},
]
DETAILS = "Friday 7 pm, 12 Harbour Street. See you, {{ name }}!"
REMINDER = "Did you see our invitation, {{ name }}?"
CAMPAIGN = {
    "name": "Tasting invite",
    "list": "guests",
    "message": {
        "type": "interactive",
        "text": "A tasting on Friday, {{ name }}: coming?",
        "buttons": BUTTONS,
    },
    "pace": {"per_minute": 600, "delay_seconds": [0, 0]},
    "steps": [
        {"when": "tapped", "button": "yes", "message": {"type": "text", "text": DETAILS}},
        {"when": "no_reply", "after": "2d", "message": {"type": "text", "text": REMINDER}},
    ],
}


def _sandbox(gateway: Process, path: str, **params: Any) -> Any:
    return httpx.get(f"{gateway.url}{path}", params=params, timeout=30).json()


def _idle(gateway: Process) -> None:
    assert _sandbox(gateway, "/sandbox/idle", timeout=20)["idle"]


def _steps(server: Server, cid: int) -> list[dict[str, Any]]:
    with server.api() as api:
        found: list[dict[str, Any]] = ok(api.get(f"/api/v1/campaigns/{cid}"))["steps"]
    return found


def _settled(server: Server, cid: int, step: int) -> bool:
    counts = _steps(server, cid)[step - 1]["counts"]
    return bool(counts) and not (counts.get("queued") or counts.get("sending"))


@pytest.mark.parametrize(
    "database", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_yes_gets_details_silence_one_reminder_answers_nothing_more(
    ws: Workspace, sandbox_process: Process, database: str, request: pytest.FixtureRequest
) -> None:
    base = 1 if database == "sqlite" else 2  # each run its own people in the one sandbox
    people = [(f"Guest {i}", f"+1303{base + 5}55{i:04d}") for i in range(1, 31)]
    if database == "postgresql":
        ws.settings["GATECAST_DATABASE_URL"] = str(request.getfixturevalue("pg_url"))
        ws.run("db", "upgrade")
    ws.link_sender()
    guests = ws.path / "guests.csv"
    with guests.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([("Name", "Phone"), *people])
    ws.run("contacts", "import", str(guests), "--list", "guests")

    # day 0: the invitation goes out, people answer, the "yes" tappers get the details
    server = ws.serve()
    with server.api() as api:
        cid = int(ok(api.post("/api/v1/campaigns", json=CAMPAIGN), 201)["id"])
        wait_for(
            lambda: ok(api.get(f"/api/v1/campaigns/{cid}"))["state"] == "completed",
            what="the invitation to be sent",
            timeout=120,
        )
    _idle(sandbox_process)
    wait_for(lambda: _settled(server, cid, 1), what="the details to be sent", timeout=60)
    # every message read in gatecast (a person answers after reading), then every answer
    # the sandbox decided is in gatecast before time moves on (a reply that reaches
    # gatecast after a step was sent cannot stop it: no system can)
    with server.api() as api:
        wait_for(
            lambda: ok(api.get(f"/api/v1/campaigns/{cid}"))["counts"].get("read") == len(people),
            what="every invitation to be read",
        )
    wait_for(
        lambda: (s := _steps(server, cid)[0]["counts"]).get("read") == sum(s.values()),
        what="every details message to be read",
    )
    _idle(sandbox_process)
    phones = {p[1:] for _, p in people}

    def decided() -> int:
        return sum(
            a["to"] in phones for a in _sandbox(sandbox_process, "/sandbox/answers")["items"]
        )

    with server.api() as api:
        wait_for(
            lambda: ok(api.get("/api/v1/replies", params={"limit": 1}))["total"] == decided(),
            what="every answer to reach gatecast",
        )
    assert not _steps(server, cid)[1]["counts"]  # no reminder before two days
    server.stop()

    # two days and an hour later: the reminders
    ws.clock_start = utcnow() + timedelta(days=2, hours=1)
    server = ws.serve()
    wait_for(lambda: _settled(server, cid, 2), what="the reminders to be sent", timeout=60)
    _idle(sandbox_process)
    steps = wait_for(
        lambda: (s := _steps(server, cid))[1]["counts"].get("read") == s[1]["total"] and s,
        what="every reminder to be read",
    )
    with httpx.Client(base_url=server.url, timeout=30) as browser:  # the dashboard's page
        signed = browser.post("/login", data={"api_key": API_KEY, "next": "/campaigns"})
        assert signed.status_code == 303, signed.text
        page = browser.get(f"/campaigns/{cid}").text
    server.stop()
    assert "Follow-up steps" in page and "tapped button yes" in page, page
    assert "no reply within 2d" in page
    report = ws.path / "invite.json"  # the report's summary: each step and its counts
    summary = ws.run("report", str(cid), "--output", str(report), "--json").json()["summary"]
    assert [(s["step"], s["condition"]) for s in summary["steps"]] == [
        (1, "tapped button yes"),
        (2, "no reply within 2d"),
    ]
    assert [s["counts"] for s in summary["steps"]] == [s["counts"] for s in steps]
    shown = ws.run("campaign", "show", str(cid)).output  # the CLI
    assert "tapped button yes: text" in shown and "no reply within 2d: text" in shown, shown

    # the truth: what each person answered to the invitation, and every message they got
    answers = {a["message_id"]: a for a in _sandbox(sandbox_process, "/sandbox/answers")["items"]}
    yes, silent = set(), set()
    for _name, phone in people:
        got = _sandbox(sandbox_process, "/sandbox/messages", to=phone[1:])
        got.sort(key=lambda m: m["at"])
        texts = [str(m["payload"]) for m in got]  # every message the person received
        a = answers.get(got[0]["message_id"])  # the answer to the invitation
        assert got and "coming?" in texts[0], texts
        rest = texts[1:]
        if a is not None and a["answer"] == "tap" and a["id"] == "yes":
            yes.add(phone)
            assert len(rest) == 1 and "Harbour Street" in rest[0], (phone, a, texts)
        elif a is None:
            silent.add(phone)
            assert len(rest) == 1 and "Did you see our invitation" in rest[0], (phone, texts)
        else:  # tapped "no", sent a keyword or STOP: nothing more
            assert rest == [], (phone, a, texts)
    assert yes and silent and len(yes) + len(silent) < len(people)  # every case happened
    done = ("sent", "delivered", "read")
    assert sum(steps[0]["counts"].get(s, 0) for s in done) == len(yes), steps
    assert sum(steps[1]["counts"].get(s, 0) for s in done) == len(silent), steps
