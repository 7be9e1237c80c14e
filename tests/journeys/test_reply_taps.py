"""Replies know what they answer (issue 32, item 1): people tap a campaign's quick-reply
buttons and reply quoting its message, through the sandbox gateway over real HTTP; the
report (CLI) and the API show per recipient what they tapped, the summary the tap rate
per button, and a quoted reply goes to the campaign whose message it quotes, even when
the same person got a later message from another campaign.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import openpyxl

from tests.journeys.harness import (
    QUICK_STATUSES,
    Process,
    Workspace,
    import_over_api,
    link_sender_over_api,
    start_sandbox,
    table_value,
    wait_for,
    workspace,
)
from tests.journeys.harness import ok as _ok

#: every recipient answers after reading: a button of the message (the sandbox's choice)
SANDBOX_ARGS = (*QUICK_STATUSES, "--reply-rate", "1")

PEOPLE = [(f"Person {i}", f"+1202555{i:04d}") for i in range(1, 9)]
BUTTONS = {"Yes": "yes", "No": "no", "Later": "later"}
CAMPAIGN = """
name = "Party invite"
list = "guests"
[message]
type = "interactive"
text = "Coming to the party, {{ name }}?"
[[message.buttons]]
kind = "quick_reply"
display_text = "Yes"
id = "yes"
[[message.buttons]]
kind = "quick_reply"
display_text = "No"
id = "no"
[[message.buttons]]
kind = "quick_reply"
display_text = "Later"
id = "later"
[pace]
per_minute = 600
delay_seconds = [0, 0]
"""


def _people_csv(path: Path, people: list[tuple[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["Name", "Phone"])
        writer.writerows(people)
    return path


def _received(gateway: Process, phone: str) -> list[dict[str, Any]]:
    """What the sandbox recorded for ``phone``: every message it got, and its answer."""
    body = httpx.get(
        f"{gateway.url}/sandbox/messages", params={"to": phone.lstrip("+")}, timeout=10
    ).json()
    return list(body["items"] if isinstance(body, dict) else body)


def test_report_shows_each_tap_and_the_tap_rate_per_button(
    ws: Workspace, sandbox_process: Process
) -> None:
    ws.link_sender()
    ws.run(
        "contacts", "import", str(_people_csv(ws.path / "guests.csv", PEOPLE)), "--list", "guests"
    )
    path = ws.path / "invite.toml"
    path.write_text(CAMPAIGN, encoding="utf-8")
    cid = str(ws.run("campaign", "create", str(path), "--json").json()["id"])
    ws.run("campaign", "run", cid, "--webhook", "--settle", "20", timeout=180)

    # what each person tapped, as the gateway simulated it
    tapped = {}
    for _name, phone in PEOPLE:
        [message] = _received(sandbox_process, phone)
        assert message["replied"] in BUTTONS, message
        tapped[phone] = message["replied"]

    report = ws.path / "invite.csv"
    printed = ws.run("report", cid, "--output", str(report)).output
    with report.open(encoding="utf-8-sig") as fh:
        rows = {r["target"]: r for r in csv.DictReader(fh)}
    assert set(rows) == set(tapped)
    for phone, title in tapped.items():
        row = rows[phone]
        assert (row["tapped_button_id"], row["tapped_title"], row["reply"]) == (
            BUTTONS[title],
            title,
            title,
        ), row
        assert row["tapped_row_id"] == ""

    # the summary: taps and tap rate per button, the message's buttons in order
    counts = Counter(BUTTONS[t] for t in tapped.values())
    summary = ws.run("report", cid, "--output", str(ws.path / "again.csv"), "--json").json()
    taps = summary["summary"]["taps"]
    assert [(t["kind"], t["id"], t["title"]) for t in taps] == [
        ("button", i, title) for title, i in BUTTONS.items()
    ]
    sent = summary["summary"]["sent"]
    assert sent == len(PEOPLE)
    for t in taps:
        assert t["taps"] == counts[t["id"]], (t, counts)
        assert t["rate"] == round(counts[t["id"]] / sent, 4)
    yes = counts["yes"]
    assert table_value(printed, "tapped button yes (Yes)") == f"{yes} ({yes / sent:.1%})"
    # the replies inbox says what each one tapped
    inbox = ws.run("replies", "--campaign", cid, "--json").json()["items"]
    assert {r["phone"]: r["button_id"] for r in inbox} == {
        phone: BUTTONS[title] for phone, title in tapped.items()
    }
    listed = ws.run("replies", "--campaign", cid).output
    assert listed.count("(tapped button ") == len(PEOPLE), listed


def test_a_quoted_reply_goes_to_the_campaign_it_quotes(tmp_path: Path) -> None:
    """Two campaigns to the same people, the second later; one person answers the
    first by quoting it, another taps a button of the second: each lands where it
    belongs, over the API (deliveries, summary, report download)."""
    gateway = start_sandbox(tmp_path / "gateway", *QUICK_STATUSES)  # nobody replies alone
    try:
        with workspace(tmp_path / "work", gateway.url) as w:
            _quoted_reply_journey(w, gateway)
    finally:
        gateway.stop()


def _done(api: httpx.Client, cid: int) -> bool:
    progress = _ok(api.get(f"/api/v1/campaigns/{cid}/progress"))
    counts = progress["counts"]
    return bool(progress["done"]) and counts.get("read") == sum(counts.values())


def _deliveries(api: httpx.Client, cid: int) -> dict[str, dict[str, Any]]:
    page = _ok(api.get(f"/api/v1/campaigns/{cid}/deliveries", params={"limit": 100}))
    return {d["target"]: d for d in page["items"]}


def _quoted_reply_journey(ws: Workspace, gateway: Process) -> None:
    server = ws.serve()
    api = server.api()
    iid = link_sender_over_api(api)
    people = PEOPLE[:2]
    done = import_over_api(api, _people_csv(ws.path / "pair.csv", people), "pair")
    assert done["imported"] == 2, done
    (_, ada), (_, bob) = people
    first = _ok(
        api.post(
            "/api/v1/campaigns",
            json={
                "name": "Order ready",
                "list": "pair",
                "message": {"type": "text", "text": "Your order is ready, {{ name }}."},
                "pace": {"per_minute": 600, "delay_seconds": [0, 0]},
            },
        ),
        201,
    )["id"]
    wait_for(lambda: _done(api, first), what="the first campaign to be read")
    second = _ok(
        api.post(
            "/api/v1/campaigns",
            json={
                "name": "Party invite",
                "list": "pair",
                "message": {
                    "type": "interactive",
                    "text": "Coming to the party?",
                    "buttons": [
                        {"kind": "quick_reply", "display_text": title, "id": bid}
                        for title, bid in BUTTONS.items()
                    ],
                },
                "pace": {"per_minute": 600, "delay_seconds": [0, 0]},
            },
        ),
        201,
    )["id"]
    wait_for(lambda: _done(api, second), what="the second campaign to be read")
    order = _deliveries(api, first)[ada]["message_id"]
    invite = _deliveries(api, second)[bob]["message_id"]
    assert order and invite

    # Ada answers the order message by quoting it (the invite came after it); Bob taps
    # "Later" on the invite, which quotes it as WhatsApp does
    for body in (
        {"from": ada.lstrip("+"), "text": "Can I pick it up tomorrow?", "quote": order},
        {"from": bob.lstrip("+"), "text": "Later", "button": "later", "quote": invite},
    ):
        httpx.post(
            f"{gateway.url}/sandbox/instances/{iid}/incoming", json=body, timeout=10
        ).raise_for_status()
    wait_for(
        lambda: (
            _deliveries(api, first)[ada]["reply_text"]
            and _deliveries(api, second)[bob]["tapped_button_id"]
        ),
        what="both answers to be recorded",
    )
    one, two = _deliveries(api, first), _deliveries(api, second)
    assert one[ada]["reply_text"] == "Can I pick it up tomorrow?"
    assert two[ada]["reply_text"] is None  # the later message did not take Ada's answer
    assert (two[bob]["tapped_button_id"], two[bob]["tapped_title"]) == ("later", "Later")
    assert two[bob]["tapped_row_id"] is None and one[bob]["reply_text"] is None

    # the replies inbox files each answer under the campaign it answers
    [answer] = _ok(api.get("/api/v1/replies", params={"campaign_id": first}))["items"]
    assert (answer["phone"], answer["quoted_id"], answer["button_id"]) == (ada, order, None)
    [tap] = _ok(api.get("/api/v1/replies", params={"campaign_id": second}))["items"]
    assert (tap["phone"], tap["button_id"], tap["quoted_id"]) == (bob, "later", invite)

    summary = _ok(api.get(f"/api/v1/campaigns/{second}/summary"))
    assert {t["id"]: (t["taps"], t["rate"]) for t in summary["taps"]} == {
        "yes": (0, 0.0),
        "no": (0, 0.0),
        "later": (1, 0.5),
    }
    assert _ok(api.get(f"/api/v1/campaigns/{first}/summary"))["taps"] == []
    report = _ok(api.get(f"/api/v1/campaigns/{second}/report.json"))
    rows = {r["target"]: r for r in report["deliveries"]}
    assert rows[bob]["tapped_button_id"] == "later" and rows[ada]["tapped_button_id"] == ""
    book = openpyxl.load_workbook(
        io.BytesIO(api.get(f"/api/v1/campaigns/{second}/report.xlsx").content), read_only=True
    )
    sheet = [list(r) for r in book["Summary"].iter_rows(values_only=True)]
    at = sheet.index(["Tapped", "Id", "Title", "Taps", "Tap rate (of sent)"])
    assert sheet[at + 3][:5] == ["button", "later", "Later", 1, 0.5], sheet[at:]
    text = api.get(f"/api/v1/campaigns/{first}/report.csv").content.decode("utf-8-sig")
    by_target = {r["target"]: r for r in csv.DictReader(io.StringIO(text))}
    assert by_target[ada]["reply"] == "Can I pick it up tomorrow?"
