"""The sandbox's simulated people (issue 32, item 6): ``gatecast sandbox`` with tap,
keyword and STOP rates; a button campaign run from the CLI over SQLite; gatecast's report
(taps per button, what each recipient tapped or replied, opt-outs) matches the sandbox's
own record of every simulated answer, and whoever said STOP is opted out.
"""

from __future__ import annotations

import csv
from collections import Counter
from typing import Any

import httpx

from tests.journeys.harness import QUICK_STATUSES, Process, Workspace

SANDBOX_ARGS = (
    *QUICK_STATUSES,
    "--seed", "21",
    "--tap-rate", "0.4",
    "--keyword-rate", "0.25",
    "--keywords", "INFO,YES",
    "--stop-rate", "0.25",
    "--reply-delay", "0.1-0.4",
)  # fmt: skip

PEOPLE = [(f"Person {i}", f"+1303555{i:04d}") for i in range(1, 25)]
BUTTONS = {"yes": "Yes", "no": "No", "later": "Later"}
#: the campaign file: an interactive message with the buttons above
CAMPAIGN = "\n".join(
    [
        'name = "Tasting invite"',
        'list = "guests"',
        "[message]",
        'type = "interactive"',
        'text = "A tasting on Friday, {{ name }}: are you coming?"',
        *(
            f'[[message.buttons]]\nkind = "quick_reply"\ndisplay_text = "{title}"\nid = "{bid}"'
            for bid, title in BUTTONS.items()
        ),
        "[pace]\nper_minute = 600\ndelay_seconds = [0, 0]\n",
    ]
)


def _answers(gateway: Process) -> dict[str, Any]:
    return dict(httpx.get(f"{gateway.url}/sandbox/answers", timeout=10).json())


def test_the_report_matches_the_simulated_people(ws: Workspace, sandbox_process: Process) -> None:
    ws.link_sender()
    people = ws.path / "guests.csv"
    with people.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["Name", "Phone"])
        writer.writerows(PEOPLE)
    ws.run("contacts", "import", str(people), "--list", "guests")
    path = ws.path / "invite.toml"
    path.write_text(CAMPAIGN, encoding="utf-8")
    cid = str(ws.run("campaign", "create", str(path), "--json").json()["id"])
    ws.run("campaign", "run", cid, "--webhook", "--settle", "20", timeout=180)
    idle = httpx.get(f"{sandbox_process.url}/sandbox/idle", params={"timeout": 20}, timeout=30)
    assert idle.json()["idle"], idle.text

    # the truth: what each simulated person answered, and to which message
    truth = _answers(sandbox_process)
    answers = {"+" + a["to"]: a for a in truth["items"]}
    assert len(answers) == len(truth["items"])  # one message each, one answer at most
    how = Counter(a["answer"] for a in answers.values())
    assert how["tap"] and how["keyword"] and how["stop"], how  # each kind happened

    report = ws.path / "invite.csv"
    summary = ws.run("report", cid, "--output", str(report), "--json").json()["summary"]
    with report.open(encoding="utf-8-sig") as fh:
        rows = {r["target"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {phone for _, phone in PEOPLE}
    for phone, row in rows.items():
        a = answers.get(phone)
        # the message gatecast recorded is the one the person answered
        if a is None:
            assert (row["reply"], row["tapped_button_id"]) == ("", ""), row
            continue
        assert row["message_id"] == a["message_id"], (row, a)
        assert row["reply"] == a["text"], (row, a)
        tapped = a["id"] if a["answer"] == "tap" else ""
        assert row["tapped_button_id"] == tapped, (row, a)
        if tapped:
            assert row["tapped_title"] == BUTTONS[tapped]

    # taps per button: exactly the sandbox's taps
    taps = Counter(a["id"] for a in answers.values() if a["answer"] == "tap")
    assert {t["id"]: t["taps"] for t in summary["taps"]} == {b: taps[b] for b in BUTTONS}
    assert summary["opted_out"] == how["stop"]

    # whoever said STOP is opted out; someone who tapped is not
    stopped = {"+" + n for n in truth["stopped"]}
    assert stopped == {p for p, a in answers.items() if a["answer"] == "stop"}
    for phone in stopped:
        assert ws.run("contacts", "show", phone, "--json").json()["opted_out"] is True
    tapper = next(p for p, a in answers.items() if a["answer"] == "tap")
    assert ws.run("contacts", "show", tapper, "--json").json()["opted_out"] is False
