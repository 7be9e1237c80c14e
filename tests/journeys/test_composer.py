"""The composer's faces without a browser: the campaign file as TOML and back, the
message for one recipient (a missing variable named), the final check with its estimate,
a recurrence's next starts, clone and edit over the HTTP API of ``gatecast serve`` and
the CLI (``campaign create --dry-run``, ``clone``, ``edit``, ``export``). The gateway is
a ``gatecast sandbox`` process.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.journeys.harness import (
    Process,
    Workspace,
    assert_problem,
    link_sender_over_api,
    wait_for,
)
from tests.journeys.harness import ok as _ok

PEOPLE = [
    ("Ada Lovelace", "+12025550101", "Berlin"),
    ("Alan Turing", "+12025550102", "London"),
    ("Grace Hopper", "+12025550103", ""),  # no city: a message using it does not render
]
INTERACTIVE: dict[str, Any] = {
    "name": "Buttons",
    "list": "people",
    "message": {
        "type": "interactive",
        "title": "Black Friday",
        "text": 'Hi {{ name }},\n30% off in "{{ city }}" {today|this weekend}.',
        "footer": "Reply STOP to opt out",
        "buttons": [
            {"kind": "quick_reply", "display_text": "Tell me more", "id": "more"},
            {"kind": "cta_url", "display_text": "Shop", "url": "https://shop.example.com"},
            {"kind": "cta_call", "display_text": "Call", "phone_number": "+14155550100"},
            {"kind": "cta_copy", "display_text": "Code", "copy_code": "BF30"},
        ],
    },
    "schedule": {"start": "2099-01-04T09:00:00", "timezone": "Europe/Berlin"},
    "pace": {"per_minute": 6, "delay_seconds": [0, 0], "daily_cap": 2},
}


def _people(ws: Workspace) -> None:
    path = ws.path / "people.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["Name", "Phone", "City"])
        writer.writerows(PEOPLE)
    ws.run("contacts", "import", str(path), "--list", "people")


def _contact_ids(api: httpx.Client) -> dict[str, int]:
    found = _ok(api.get("/api/v1/contacts", params={"limit": 100}))["items"]
    return {c["name"]: int(c["id"]) for c in found}


def test_toml_preview_check_and_occurrences_over_the_api(ws: Workspace) -> None:
    _people(ws)
    server = ws.serve()
    api = server.api()
    iid = link_sender_over_api(api)

    # the form's JSON as the TOML file and back: the same campaign
    toml = _ok(api.post("/api/v1/campaigns/to-toml", json=INTERACTIVE))["toml"]
    assert '[[message.buttons]]\nkind = "cta_url"' in toml and "daily_cap = 2" in toml
    back = _ok(api.post("/api/v1/campaigns/from-toml", json={"toml": toml}))["spec"]
    assert back["message"]["text"] == INTERACTIVE["message"]["text"]
    assert back["message"]["buttons"][3]["copy_code"] == "BF30"
    assert _ok(api.post("/api/v1/campaigns/to-toml", json=back))["toml"] == toml
    # edited TOML with a mistake: refused naming the field in the file's terms
    broken = toml.replace('url = "https://shop.example.com"', 'url = "shop"')
    body = assert_problem(
        api.post("/api/v1/campaigns/from-toml", json={"toml": broken}), 422, "invalid_campaign"
    )
    assert body["errors"][0]["path"] == "message.buttons[1].url", body
    assert "not a URL" in body["errors"][0]["msg"]
    # a form that is not valid cannot be written as TOML either
    body = assert_problem(
        api.post("/api/v1/campaigns/to-toml", json={**INTERACTIVE, "name": " "}),
        422,
        "invalid_campaign",
    )
    assert body["errors"][0]["path"] == "name"

    # the message as one recipient gets it, and who cannot get it
    ids = _contact_ids(api)
    seen = _ok(
        api.post(
            "/api/v1/campaigns/preview/recipient",
            json={"spec": INTERACTIVE, "contact_id": ids["Ada Lovelace"]},
        )
    )
    assert seen["target"] == "+12025550101" and seen["missing"] == []
    assert seen["content"]["title"] == "Black Friday"
    assert seen["content"]["text"].startswith('Hi Ada Lovelace,\n30% off in "Berlin"')
    assert [b["kind"] for b in seen["content"]["buttons"]] == [
        "quick_reply",
        "cta_url",
        "cta_call",
        "cta_copy",
    ]
    assert len(seen["variants"]) == 2  # {today|this weekend}
    assert {c["name"] for c in seen["candidates"]} == {p[0] for p in PEOPLE}
    grace = _ok(
        api.post(
            "/api/v1/campaigns/preview/recipient",
            json={"spec": INTERACTIVE, "contact_id": ids["Grace Hopper"]},
        )
    )
    assert grace["missing"] == ["city"] and grace["content"] is None
    assert "missing variable 'city'" in grace["error"]
    unknown = api.post(
        "/api/v1/campaigns/preview/recipient", json={"spec": INTERACTIVE, "contact_id": 999}
    )
    assert assert_problem(unknown, 422, "invalid_request")["errors"][0]["loc"][-1] == ("contact_id")

    # the final check: 2 messages (Grace cannot render), 1 sender, 2 a day: one per day
    check = _ok(api.post("/api/v1/campaigns/check", json=INTERACTIVE))
    assert (check["messages"], check["recipients"], check["unrenderable"]) == (2, 3, 1)
    assert check["senders"] == [iid] and check["timezone"] == "Europe/Berlin"
    assert check["sentence"].startswith(
        f"2 message(s) to list people through {iid}, starting 2099-01-04 09:00 Europe/Berlin, "
        "finishing around 2099-01-04 09:00 at this pace"
    ), check["sentence"]
    assert "1 cannot be rendered" in check["sentence"]
    capped = {**INTERACTIVE, "pace": {"per_minute": 6, "delay_seconds": [0, 0], "daily_cap": 1}}
    check = _ok(api.post("/api/v1/campaigns/check", json=capped))
    assert "finishing around 2099-01-05 00:00" in check["sentence"], check["sentence"]

    # a recurrence's next starts, in its zone; a wrong one named
    nxt = _ok(
        api.get(
            "/api/v1/campaigns/occurrences",
            params={"cron": "0 9 * * MON", "timezone": "Europe/Berlin"},
        )
    )["occurrences"]
    assert len(nxt) == 5 and all(t.endswith(("07:00:00Z", "08:00:00Z")) for t in nxt), nxt
    bad = api.get("/api/v1/campaigns/occurrences", params={"cron": "0 9 * *"})
    assert assert_problem(bad, 422, "invalid_campaign")["errors"][0]["path"] == "schedule.cron"


def _received_texts(sandbox: Process, phone: str) -> list[str]:
    got = httpx.get(f"{sandbox.url}/sandbox/messages", params={"to": phone.lstrip("+")})
    return [str(m["payload"]) for m in got.json()]


@pytest.mark.slow  # waits for a paced send
def test_clone_and_edit_over_the_api(ws: Workspace, sandbox_process: Process) -> None:
    _people(ws)
    server = ws.serve()
    api = server.api()
    link_sender_over_api(api)
    later = {**INTERACTIVE, "list": "people", "message": {"type": "text", "text": "Hi {{ name }}"}}
    first = _ok(api.post("/api/v1/campaigns", json=later), 201)

    # clone: a scheduled copy named "(copy)"; a start given replaces the original's
    copy = _ok(api.post(f"/api/v1/campaigns/{first['id']}/clone"), 201)
    shown = _ok(api.get(f"/api/v1/campaigns/{copy['id']}"))
    assert shown["name"] == "Buttons (copy)" and shown["state"] == "scheduled"
    assert shown["spec"]["message"]["text"] == "Hi {{ name }}"
    past = api.post(
        f"/api/v1/campaigns/{first['id']}/clone",
        json={"schedule": {"start": "2001-01-01T09:00:00", "timezone": "Europe/Berlin"}},
    )
    assert assert_problem(past, 422, "campaign_setup")["errors"][0]["path"] == "schedule.start"
    assert assert_problem(api.post("/api/v1/campaigns/999/clone"), 404, "not_found")

    # edit a scheduled campaign: new text, new start
    edited = {**later, "message": {"type": "text", "text": "Hello again {{ name }}"}}
    edited["schedule"] = {"start": "2099-02-01T10:00:00", "timezone": "Europe/Berlin"}
    done = _ok(api.put(f"/api/v1/campaigns/{first['id']}", json=edited))
    assert done["state"] == "scheduled" and done["start_at"].startswith("2099-02-01T09:00")
    shown = _ok(api.get(f"/api/v1/campaigns/{first['id']}"))
    assert shown["spec"]["message"]["text"] == "Hello again {{ name }}"
    bad = api.put(f"/api/v1/campaigns/{first['id']}", json={**edited, "list": ""})
    assert assert_problem(bad, 422, "invalid_campaign")["errors"][0]["path"] == "list"

    # a started campaign, paused: its queued rows are rendered again from the new file
    now = {
        "name": "Now",
        "list": "people",
        "message": {"type": "text", "text": "Old text for {{ name }}"},
        "pace": {"per_minute": 6, "delay_seconds": [0, 0]},
    }
    running = _ok(api.post("/api/v1/campaigns", json=now), 201)
    cid = running["id"]
    wait_for(
        lambda: _ok(api.get(f"/api/v1/campaigns/{cid}"))["counts"]["queued"] == 2,
        what="the first send, the others waiting for the pace",
    )
    _ok(api.post(f"/api/v1/campaigns/{cid}/pause"))
    fast = {**now, "message": {"type": "text", "text": "New text for {{ name }} in {{ city }}"}}
    fast["pace"] = {"per_minute": 600, "delay_seconds": [0, 0]}
    moved = _ok(api.put(f"/api/v1/campaigns/{cid}", json={**fast, "list": "customers"}), 422)
    assert moved["errors"][0]["path"] == "list" and "started" in moved["detail"]
    done = _ok(api.put(f"/api/v1/campaigns/{cid}", json=fast))
    assert (done["state"], done["rerendered"] + done["skipped"]) == ("paused", 2), done
    _ok(api.post(f"/api/v1/campaigns/{cid}/resume"))
    wait_for(
        lambda: _ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["done"],
        timeout=90,
        what="the edited campaign to finish",
    )
    texts = {name: _received_texts(sandbox_process, phone) for name, phone, _ in PEOPLE}
    sent_first = [n for n, t in texts.items() if any("Old text" in x for x in t)]
    assert len(sent_first) == 1, texts
    for name, city in (("Ada Lovelace", "Berlin"), ("Alan Turing", "London")):
        if name not in sent_first:
            assert any(f"New text for {name} in {city}" in x for x in texts[name]), texts
    # finished: an edit is refused with 409, naming the states that allow one
    refused = api.put(f"/api/v1/campaigns/{cid}", json=fast)
    body = assert_problem(refused, 409, "invalid_transition")
    assert "only a paused or scheduled campaign can be edited" in body["detail"], body


def test_cli_dry_run_clone_edit_and_export(ws: Workspace, tmp_path: Path) -> None:
    _people(ws)
    iid = ws.link_sender()
    path = ws.path / "promo.toml"
    path.write_text(
        'name = "Promo"\nlist = "people"\n[message]\ntype = "text"\n'
        'text = "Hi {{ name }} from {{ city }}"\n[schedule]\nstart = "2099-01-04T09:00:00"\n'
        'timezone = "Europe/Berlin"\ncron = "0 9 * * MON"\n'
        "[pace]\nper_minute = 6\ndelay_seconds = [0, 0]\n",
        encoding="utf-8",
    )
    out = ws.run("campaign", "create", str(path), "--dry-run").output
    assert f"2 message(s) to list people through {iid}, starting 2099-01-05 09:00" in out, out
    assert "1 cannot be rendered" in out and "nothing was stored" in out
    assert out.count("next start") == 5
    assert "no campaigns yet" in ws.run("campaign", "list").output

    cid = ws.run("campaign", "create", str(path), "--json").json()["id"]
    exported = ws.run("campaign", "export", str(cid)).output
    assert exported.startswith('name = "Promo"\nlist = "people"\n'), exported
    assert 'cron = "0 9 * * MON"' in exported
    changed = ws.path / "changed.toml"
    changed.write_text(exported.replace("Hi {{ name }}", "Hello {{ name }}"), encoding="utf-8")
    out = ws.run("campaign", "edit", str(cid), str(changed)).output
    assert f"campaign {cid} Promo edited; it is scheduled" in out, out
    shown = ws.run("campaign", "show", str(cid), "--json").json()
    assert shown["spec"]["message"]["text"] == "Hello {{ name }} from {{ city }}"

    copy = ws.run(
        "campaign", "clone", str(cid), "--name", "Promo 2", "--start", "2099-03-01T08:00", "--json"
    ).json()
    shown = ws.run("campaign", "show", str(copy["id"]), "--json").json()
    assert shown["name"] == "Promo 2" and shown["spec"]["schedule"]["cron"] == "0 9 * * MON"
    assert shown["spec"]["schedule"]["start"] == "2099-03-01T08:00:00"

    ws.run("campaign", "cancel", str(cid))
    refused = ws.run("campaign", "edit", str(cid), str(changed), ok=False)
    assert refused.code == 1
    assert "only a paused or scheduled campaign can be edited" in refused.output
    bad = ws.path / "bad.toml"
    bad.write_text(exported.replace('type = "text"', 'type = "txt"'), encoding="utf-8")
    refused = ws.run("campaign", "edit", str(copy["id"]), str(bad), ok=False)
    assert refused.code == 1 and "message.type" in refused.output
