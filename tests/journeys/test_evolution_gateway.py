"""gatecast against Evolution API v2 (issue 33): ``GATECAST_GATEWAY_KIND=evolution`` and
the sandbox in the evolution dialect (``gatecast sandbox --dialect evolution``: its
routes, ``apikey`` header, errors and webhook events; docs/gateways.md).

The user links a sender, imports a CSV, is refused a template campaign with the reason,
creates and runs a text campaign (statuses sent -> delivered -> read come as Evolution's
``messages.update`` events), a recipient replies STOP (Evolution's ``messages.upsert``)
and is opted out, and the report shows all of it; the HTTP API refuses the template
campaign too. CLI subprocesses, ``serve`` for the reply and the API; SQLite and
PostgreSQL.
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
    wait_for,
    workspace,
)

SANDBOX_ARGS = (*QUICK_STATUSES, "--dialect", "evolution")
PEOPLE = {"Ana Silva": "+12025550123", "Ben Okafor": "+12025550124", "Cy Young": "+12025550125"}
CAMPAIGN = """name = "Evolution hello"
list = "customers"
[message]
type = "{kind}"
text = "Hi {{{{ name }}}}, our spring menu is out. Reply STOP to opt out."
{extra}
[pace]
per_minute = 0
delay_seconds = [0, 0]
"""
TEMPLATE_BUTTONS = '[[message.buttons]]\ndisplay_text = "Yes"\nid = "yes"\n'


@pytest.fixture
def ws(tmp_path: Path, sandbox_process: Process) -> Iterator[Workspace]:
    """A working directory whose gateway is the module's Evolution-dialect sandbox."""
    with workspace(tmp_path / "work", sandbox_process.url, GATECAST_GATEWAY_KIND="evolution") as w:
        yield w


def _webhook_of(ws: Workspace, iid: str) -> str | None:
    """The webhook address the sandbox holds for ``iid`` (its secret masked)."""
    for sender in httpx.get(f"{ws.gateway_url}/sandbox/instances", timeout=10).json():
        if sender["instance_id"] == iid and sender["webhook_enabled"]:
            return str(sender["webhook_url"])
    return None


def _report(ws: Workspace, campaign_id: str) -> dict[str, dict[str, Any]]:
    ws.run("report", campaign_id, "--output", "r.json")
    rows = json.loads((ws.path / "r.json").read_text(encoding="utf-8"))["deliveries"]
    return {r["target"]: r for r in rows}


@pytest.mark.parametrize("database", SQLITE_AND_SLOW_POSTGRES)
def test_a_campaign_through_evolution_api(
    ws: Workspace, database: str, request: pytest.FixtureRequest
) -> None:
    use_database(ws, database, request)
    iid = ws.link_sender()
    senders = httpx.get(f"{ws.gateway_url}/sandbox/instances", timeout=10).json()
    assert iid in [s["instance_id"] for s in senders]  # the instanceName is gatecast's id
    import_people(ws, PEOPLE)

    # a kind Evolution cannot send is refused when the campaign is made, with the reason
    (ws.path / "template.toml").write_text(
        CAMPAIGN.format(kind="template", extra=TEMPLATE_BUTTONS), encoding="utf-8"
    )
    refused = ws.run("campaign", "create", "template.toml", ok=False)
    assert refused.code == 1, refused.output
    assert "Evolution API cannot send template messages" in " ".join(refused.output.split())

    (ws.path / "hello.toml").write_text(CAMPAIGN.format(kind="text", extra=""), encoding="utf-8")
    campaign_id = str(ws.run("campaign", "create", "hello.toml", "--json").json()["id"])
    ws.run("campaign", "run", campaign_id, "--webhook", "--settle", "3", timeout=120)
    rows = _report(ws, campaign_id)
    assert {t: r["state"] for t, r in rows.items()} == dict.fromkeys(PEOPLE.values(), "read")
    sent = httpx.get(f"{ws.gateway_url}/sandbox/messages", timeout=10).json()
    texts = {m["to"]: m for m in sent if m["instance_id"] == iid}
    assert set(texts) == {p.lstrip("+") for p in PEOPLE.values()}
    assert {m["endpoint"] for m in texts.values()} == {"sendText"}

    # Ana answers STOP; serve receives Evolution's messages.upsert and opts her out
    ana = PEOPLE["Ana Silva"]
    run_hook = _webhook_of(ws, iid)  # the run's own receiver, gone with it
    server = ws.serve()
    wait_for(
        lambda: _webhook_of(ws, iid) not in (None, run_hook),
        what="serve to register its webhook with the gateway",
    )
    httpx.post(
        f"{ws.gateway_url}/sandbox/instances/{iid}/incoming",
        json={"from": ana.lstrip("+"), "text": "STOP"},
        timeout=10,
    ).raise_for_status()
    with server.api() as api:
        wait_for(
            lambda: api.get("/api/v1/contacts", params={"q": ana}).json()["items"][0]["opted_out"],
            what="the STOP reply to opt Ana out",
        )
        rows = _report(ws, campaign_id)
        shown = rows[ana]
        assert (shown["state"], shown["reply"], shown["opted_out"]) == ("read", "STOP", True)
        assert [r["opted_out"] for t, r in rows.items() if t != ana] == [False, False], rows

        # the HTTP API refuses the template campaign too, naming the field and the reason
        template = {
            "type": "template",
            "text": "Hi",
            "buttons": [{"display_text": "Y", "id": "y"}],
        }
        answer = api.post(
            "/api/v1/campaigns",
            json={"name": "Templated", "list": "customers", "message": template},
        )
    assert_problem(answer, 422, "campaign_setup")
    assert answer.json()["errors"][0]["path"] == "message.type", answer.text
    assert "Evolution API cannot send template messages" in answer.text, answer.text
