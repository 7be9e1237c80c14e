"""The core journey every gateway family runs (issue 33; docs/gateways.md): a sender
linked, a CSV imported, a kind the family cannot send refused at campaign create (CLI and
API) with the reason, a text campaign run with its statuses read back from the family's
own events, a STOP reply that opts the recipient out through ``serve``, and the report.
``tests/journeys/test_evolution_gateway.py`` and ``test_waha_gateway.py`` run it against
the sandbox in their dialect, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.journeys.harness import (
    SQLITE_AND_SLOW_POSTGRES,
    Workspace,
    assert_problem,
    import_people,
    use_database,
    wait_for,
)

PEOPLE = {"Ana Silva": "+12025550123", "Ben Okafor": "+12025550124", "Cy Young": "+12025550125"}
CAMPAIGN = """name = "{name} hello"
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
#: the journey's parametrisation: PostgreSQL in the slow suite (about a minute each)
DATABASES = SQLITE_AND_SLOW_POSTGRES


def webhook_of(ws: Workspace, iid: str) -> str | None:
    """The webhook address the sandbox holds for ``iid`` (its secret masked)."""
    for sender in httpx.get(f"{ws.gateway_url}/sandbox/instances", timeout=10).json():
        if sender["instance_id"] == iid and sender["webhook_enabled"]:
            return str(sender["webhook_url"])
    return None


def report(ws: Workspace, campaign_id: str) -> dict[str, dict[str, Any]]:
    """The campaign's report rows by target (``gatecast report --output``)."""
    ws.run("report", campaign_id, "--output", "r.json")
    rows = json.loads((ws.path / "r.json").read_text(encoding="utf-8"))["deliveries"]
    return {r["target"]: r for r in rows}


def run_core_journey(
    ws: Workspace,
    database: str,
    request: pytest.FixtureRequest,
    *,
    name: str,
    refusal: str,
    endpoint: str,
    linked: Callable[[str], None] = lambda iid: None,
    served: Callable[[str], None] = lambda iid: None,
) -> None:
    """The journey in the workspace's gateway kind: ``refusal`` is the words a template
    campaign is refused with, ``endpoint`` the route a text goes to; ``linked`` and
    ``served`` check the family's own state after the link and once ``serve`` has
    registered its webhook."""
    use_database(ws, database, request)
    iid = ws.link_sender()
    senders = httpx.get(f"{ws.gateway_url}/sandbox/instances", timeout=10).json()
    assert iid in [s["instance_id"] for s in senders]  # the family's name is gatecast's id
    linked(iid)
    import_people(ws, PEOPLE)

    # a kind the family cannot send is refused when the campaign is made, with the reason
    template = CAMPAIGN.format(name=name, kind="template", extra=TEMPLATE_BUTTONS)
    (ws.path / "template.toml").write_text(template, encoding="utf-8")
    refused = ws.run("campaign", "create", "template.toml", ok=False)
    assert refused.code == 1, refused.output
    assert refusal in " ".join(refused.output.split())

    text = CAMPAIGN.format(name=name, kind="text", extra="")
    (ws.path / "hello.toml").write_text(text, encoding="utf-8")
    campaign_id = str(ws.run("campaign", "create", "hello.toml", "--json").json()["id"])
    ws.run("campaign", "run", campaign_id, "--webhook", "--settle", "3", timeout=120)
    rows = report(ws, campaign_id)
    assert {t: r["state"] for t, r in rows.items()} == dict.fromkeys(PEOPLE.values(), "read")
    sent = httpx.get(f"{ws.gateway_url}/sandbox/messages", timeout=10).json()
    texts = {m["to"]: m for m in sent if m["instance_id"] == iid}
    assert set(texts) == {p.lstrip("+") for p in PEOPLE.values()}
    assert {m["endpoint"] for m in texts.values()} == {endpoint}

    # Ana answers STOP; serve receives the family's incoming event and opts her out
    ana = PEOPLE["Ana Silva"]
    run_hook = webhook_of(ws, iid)  # the run's own receiver, gone with it
    server = ws.serve()
    wait_for(
        lambda: webhook_of(ws, iid) not in (None, run_hook),
        what="serve to register its webhook with the gateway",
    )
    served(iid)
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
        rows = report(ws, campaign_id)
        shown = rows[ana]
        assert (shown["state"], shown["reply"], shown["opted_out"]) == ("read", "STOP", True)
        assert [r["opted_out"] for t, r in rows.items() if t != ana] == [False, False], rows

        # the HTTP API refuses the template campaign too, naming the field and the reason
        message = {"type": "template", "text": "Hi", "buttons": [{"display_text": "Y", "id": "y"}]}
        answer = api.post(
            "/api/v1/campaigns",
            json={"name": "Templated", "list": "customers", "message": message},
        )
    assert_problem(answer, 422, "campaign_setup")
    assert answer.json()["errors"][0]["path"] == "message.type", answer.text
    assert refusal in answer.text, answer.text
