"""Every message kind, written in a campaign file, sent through the CLI and checked twice:
at the gateway (what the sandbox received, as the recipient's phone would get it) and in
the report (each recipient's state), as a user reads them.
"""

from __future__ import annotations

import csv
from typing import Any

import httpx
import pytest

from tests.journeys.harness import SAMPLES, Process, Workspace

PEOPLE = [("Ada Lovelace", "+12025550101"), ("Alan Turing", "+12025550102")]
FAST = "[pace]\nper_minute = 600\ndelay_seconds = [0, 0]\n"

KINDS: dict[str, str] = {
    "text": """
[message]
type = "text"
text = "Hello {{ name }}, your order is ready."
""",
    "media": """
[message]
type = "media"
media_url = "https://example.com/menu.pdf"
filename = "menu.pdf"
caption = "Here is the menu, {{ name }}."
""",
    "interactive": """
[message]
type = "interactive"
title = "Black Friday"
text = "30% off, {{ name }}."
footer = "Reply STOP to opt out"
[[message.buttons]]
kind = "quick_reply"
display_text = "Tell me more"
id = "more"
[[message.buttons]]
kind = "cta_url"
display_text = "Open the shop"
url = "https://shop.example.com"
""",
    "template": """
[message]
type = "template"
text = "Shall we deliver tomorrow, {{ name }}?"
footer = "Acme deliveries"
[[message.buttons]]
display_text = "Yes"
id = "yes"
[[message.buttons]]
display_text = "No"
id = "no"
""",
    "list": """
[message]
type = "list"
text = "What would you like, {{ name }}?"
button_text = "See the menu"
[[message.sections]]
title = "Mains"
[[message.sections.rows]]
title = "Lasagne"
row_id = "main-lasagne"
""",
}


def _setup(ws: Workspace) -> None:
    ws.link_sender()
    people = ws.path / "people.csv"
    with people.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["Name", "Phone"])
        writer.writerows(PEOPLE)
    ws.run("contacts", "import", str(people), "--list", "people")


def _run(ws: Workspace, name: str, body: str) -> list[dict[str, str]]:
    path = ws.path / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{body}\n{FAST}', encoding="utf-8")
    campaign_id = str(ws.run("campaign", "create", str(path), "--json").json()["id"])
    ws.run("campaign", "run", campaign_id, "--webhook", "--settle", "1", timeout=180)
    report = ws.path / f"{name}.csv"
    ws.run("report", campaign_id, "--output", str(report))
    with report.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _received(sandbox: Process, to: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{sandbox.url}/sandbox/messages", params={"to": to}, timeout=10)
    answer.raise_for_status()
    body = answer.json()
    items = body["items"] if isinstance(body, dict) else body
    return list(items)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_message_kind_reaches_every_recipient(
    ws: Workspace, sandbox_process: Process, kind: str
) -> None:
    _setup(ws)
    rows = _run(ws, f"kind-{kind}", f'list = "people"\n{KINDS[kind]}')
    assert len(rows) == len(PEOPLE)
    assert {r["state"] for r in rows} <= {"sent", "delivered", "read"}, rows
    for name, phone in PEOPLE:
        got = _received(sandbox_process, phone.lstrip("+"))
        assert got, f"the gateway received nothing for {phone}"
        last = got[-1]
        assert name.split()[0] in str(last["payload"]), last  # personalised per contact


def test_group_sample_sends_media_to_each_group(ws: Workspace, sandbox_process: Process) -> None:
    """samples/campaign-group.toml as shipped, only its pace made fast."""
    _setup(ws)
    text = (SAMPLES / "campaign-group.toml").read_text(encoding="utf-8")
    text = text.split("[pace]", 1)[0].replace('name = "Menu to the groups"', "")
    rows = _run(ws, "groups", text)
    assert len(rows) == 2
    assert {r["state"] for r in rows} <= {"sent", "delivered", "read"}, rows
    for group in ("120363041234567890@g.us", "120363041234567891@g.us"):
        answer = httpx.get(f"{sandbox_process.url}/sandbox/messages", timeout=10).json()
        items = answer["items"] if isinstance(answer, dict) else answer
        mine = [m for m in items if group in (m.get("chat") or "") or group == m.get("to")]
        assert mine and "menu.pdf" in str(mine[-1]["payload"]), (group, items[-3:])
