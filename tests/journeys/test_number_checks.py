"""The number check and typing presence on Evolution API (issue 33, item 2; decision
68): ``GATECAST_GATEWAY_KIND=evolution`` against ``gatecast sandbox
--dialect evolution --not-on-app ...``.

The user imports four people, one of them not on WhatsApp. A campaign asks the gateway
about the numbers before the first message (``/chat/whatsappNumbers``, in one batch):
the one not on the app is skipped with "not on WhatsApp" in the report, the CLI and the
API's recipient listing, and the sandbox records no send to it. A second campaign to the
same people reuses the stored answers: the sandbox counts no new check. A third campaign
with ``[pace] typing = true`` shows "typing..." (``/chat/sendPresence``) before each of
its sends. An edit that turns a scheduled campaign into a template (which Evolution
cannot send) is refused with the reason, over the CLI and the API, and so is such a
clone. CLI subprocesses and ``serve``'s API; SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.journeys.harness import (
    QUICK_STATUSES,
    SQLITE_AND_SLOW_POSTGRES,
    Process,
    Workspace,
    assert_problem,
    import_people,
    use_database,
    workspace,
)

ABSENT = "+12025550177"
PEOPLE = {
    "Ana Silva": "+12025550171",
    "Ben Okafor": "+12025550172",
    "Cy Young": "+12025550173",
    "Di Absent": ABSENT,
}
SANDBOX_ARGS = (*QUICK_STATUSES, "--dialect", "evolution", "--not-on-app", ABSENT.lstrip("+"))
CAMPAIGN = """name = "{name}"
list = "customers"
{schedule}
[message]
type = "{kind}"
text = "Hi {{{{ name }}}}, our spring menu is out."
{extra}
[pace]
{pace}
"""
UNPACED = "per_minute = 0\ndelay_seconds = [0, 0]"
TYPING = "per_minute = 60\ndelay_seconds = [0, 0]\ntyping = true"
TEMPLATE_BUTTONS = '[[message.buttons]]\ndisplay_text = "Yes"\nid = "yes"\n'


@pytest.fixture
def ws(tmp_path: Path, sandbox_process: Process) -> Iterator[Workspace]:
    """A working directory whose gateway is the module's Evolution-dialect sandbox."""
    with workspace(tmp_path / "work", sandbox_process.url, GATECAST_GATEWAY_KIND="evolution") as w:
        yield w


def _campaign(ws: Workspace, name: str, *, pace: str = UNPACED, **fields: str) -> Path:
    text = CAMPAIGN.format(
        name=name,
        schedule=fields.get("schedule", ""),
        kind=fields.get("kind", "text"),
        extra=fields.get("extra", ""),
        pace=pace,
    )
    path = ws.path / f"{name.replace(' ', '_')}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _create_and_run(ws: Workspace, path: Path) -> str:
    campaign_id = str(ws.run("campaign", "create", path.name, "--json").json()["id"])
    ws.run("campaign", "run", campaign_id, "--settle", "0", timeout=120)
    return campaign_id


def _report(ws: Workspace, campaign_id: str) -> dict[str, dict[str, Any]]:
    ws.run("report", campaign_id, "--output", f"r{campaign_id}.json")
    doc = json.loads((ws.path / f"r{campaign_id}.json").read_text(encoding="utf-8"))
    return {r["target"]: r for r in doc["deliveries"]}


def _sandbox(ws: Workspace, path: str, **params: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{ws.gateway_url}{path}", params=params, timeout=10)
    answer.raise_for_status()
    found: list[dict[str, Any]] = answer.json()
    return found


def _sent_to(ws: Workspace, iid: str) -> list[dict[str, Any]]:
    return [m for m in _sandbox(ws, "/sandbox/messages") if m["instance_id"] == iid]


@pytest.mark.parametrize("database", SQLITE_AND_SLOW_POSTGRES)
def test_numbers_checked_once_skipped_and_typing_shown(
    ws: Workspace, database: str, request: pytest.FixtureRequest
) -> None:
    use_database(ws, database, request)
    iid = ws.link_sender()
    import_people(ws, PEOPLE)
    checks_before = [
        c for c in _sandbox(ws, "/sandbox/chat", kind="check") if c["instance_id"] == iid
    ]
    assert checks_before == []

    # the first campaign: the numbers are checked in one batch, the absent one skipped
    first = _create_and_run(ws, _campaign(ws, "First"))
    rows = _report(ws, first)
    assert rows[ABSENT]["state"] == "skipped", rows[ABSENT]
    assert "not on WhatsApp" in rows[ABSENT]["error"], rows[ABSENT]
    others = {t: r["state"] for t, r in rows.items() if t != ABSENT}
    assert set(others) == {p for p in PEOPLE.values() if p != ABSENT}
    assert set(others.values()) <= {"sent", "delivered", "read"}, others
    assert all(r["sent_at"] for t, r in rows.items() if t != ABSENT), rows
    sent = _sent_to(ws, iid)
    assert ABSENT.lstrip("+") not in {m["to"] for m in sent}
    assert {m["to"] for m in sent} == {p.lstrip("+") for p in PEOPLE.values() if p != ABSENT}
    checks = [c for c in _sandbox(ws, "/sandbox/chat", kind="check") if c["instance_id"] == iid]
    asked = [n for c in checks for n in c["numbers"]]
    assert sorted(asked) == sorted(p.lstrip("+") for p in PEOPLE.values()), checks
    assert len(checks) == 1, checks  # one batch
    assert all(c["at"] <= min(m["at"] for m in sent) for c in checks)  # before any send

    # a second campaign to the same people: the stored answers are reused
    second = _create_and_run(ws, _campaign(ws, "Second"))
    rows = _report(ws, second)
    assert rows[ABSENT]["state"] == "skipped" and "not on WhatsApp" in rows[ABSENT]["error"]
    again = [c for c in _sandbox(ws, "/sandbox/chat", kind="check") if c["instance_id"] == iid]
    assert again == checks, "the second campaign asked the gateway again"
    assert ABSENT.lstrip("+") not in {m["to"] for m in _sent_to(ws, iid)}

    # typing on: a presence before each send, none to the absent number
    before = len(_sent_to(ws, iid))
    third = _create_and_run(ws, _campaign(ws, "Typing", pace=TYPING))
    assert _report(ws, third)[ABSENT]["state"] == "skipped"
    sends = _sent_to(ws, iid)[before:]
    presences = [
        p for p in _sandbox(ws, "/sandbox/chat", kind="presence") if p["instance_id"] == iid
    ]
    assert (
        {p["to"] for p in presences}
        == {m["to"] for m in sends}
        == {p.lstrip("+") for p in PEOPLE.values() if p != ABSENT}
    )
    for message in sends:
        shown = [p for p in presences if p["to"] == message["to"]]
        assert len(shown) == 1 and shown[0]["presence"] == "composing", shown
        assert 0 < shown[0]["delay"] <= 500, shown  # within half the 1 s gap
        assert shown[0]["at"] <= message["at"], (shown, message)
    earlier = [
        p for p in _sandbox(ws, "/sandbox/chat", kind="presence") if p["at"] < sends[0]["at"] - 60
    ]
    assert not [p for p in earlier if p["instance_id"] == iid]  # no typing without typing = true

    # an edit that makes a scheduled campaign a template is refused with the reason
    later = 'start = "2031-03-01T09:00"\ntimezone = "UTC"'
    scheduled = str(
        ws.run(
            "campaign",
            "create",
            _campaign(ws, "Later", schedule=f"[schedule]\n{later}").name,
            "--json",
        ).json()["id"]
    )
    template = _campaign(
        ws,
        "Later as template",
        schedule=f"[schedule]\n{later}",
        kind="template",
        extra=TEMPLATE_BUTTONS,
    )
    refused = ws.run("campaign", "edit", scheduled, template.name, ok=False)
    assert refused.code == 1, refused.output
    assert "Evolution API cannot send template messages" in " ".join(refused.output.split())

    server = ws.serve()
    with server.api() as api:
        listed = api.get(f"/api/v1/campaigns/{first}/deliveries", params={"target": ABSENT})
        assert listed.status_code == 200, listed.text
        (item,) = listed.json()["items"]
        assert (item["state"], item["reason"]) == ("skipped", "not on WhatsApp"), item
        body = {
            "name": "Templated",
            "list": "customers",
            "schedule": {"start": "2031-03-01T09:00", "timezone": "UTC"},
            "message": {
                "type": "template",
                "text": "Hi",
                "buttons": [{"display_text": "Y", "id": "y"}],
            },
        }
        edited = api.put(f"/api/v1/campaigns/{scheduled}", json=body)
        assert_problem(edited, 422, "campaign_setup")
        assert edited.json()["errors"][0]["path"] == "message.type", edited.text
        assert "Evolution API cannot send template messages" in edited.text
        cloned = api.post(f"/api/v1/campaigns/{scheduled}/clone", json={"message": body["message"]})
        assert_problem(cloned, 422, "campaign_setup")
        assert "Evolution API cannot send template messages" in cloned.text
        still = api.get(f"/api/v1/campaigns/{scheduled}").json()
        assert still["message_type"] == "text", still
