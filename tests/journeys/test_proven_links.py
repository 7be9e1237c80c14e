"""A sender linked at the gateway behind gatecast's back loses none of its statuses.

The instance is made with ``gatecast instance create`` (gatecast records it ``created``)
and linked in the gateway's own panel (the sandbox's ``connect`` route), never through
``gatecast instance qr``; a campaign names it. No start pass registers its webhook (they
register linked senders only): its first accepted send proves it linked (decision 37), and
the process that sent holds it and registers its webhook at once, then lets it send on
(docs/architecture.md, decision 40). Every recipient ends delivered or read.

Sent by ``gatecast serve`` (whose leader's check would register it only at its next tick,
after the statuses of the sends made meanwhile were due), and by ``gatecast campaign
run`` beside ``gatecast receive`` (a receiver that registers nothing: without the hold the
statuses would never come).
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from tests.journeys.harness import API_KEY, Workspace, import_over_api, ok, wait_for

#: statuses due 0.2-0.42 s after a send; sends 0.1 s apart; nothing links on its own
SANDBOX_ARGS = ("--status-delays", "0.25,0.3,0.35")
RECIPIENTS = 8
CAMPAIGN = """\
name = "Behind our back"
list = "customers"
instances = ["{sender}"]

[message]
type = "text"
text = "Hello {{{{ name }}}}"

[pace]
per_minute = 600
delay_seconds = [0, 0]
"""


def _sender_linked_behind_our_back(ws: Workspace, api: httpx.Client) -> str:
    # created with the CLI (no GATECAST_PUBLIC_URL: no webhook registered), linked in the
    # gateway's panel, never shown a QR code by gatecast
    created = ws.run("instance", "create").output
    found = re.search(r"\b([0-9A-F]{10,})\b", created)
    assert found, created
    sender = found.group(1)
    linked = httpx.post(f"{ws.gateway_url}/sandbox/instances/{sender}/connect", timeout=10)
    assert linked.json()["state"] == "connected", linked.text
    assert ok(api.get(f"/api/v1/instances/{sender}"))["state"] == "created"  # gatecast's view
    return sender


def _campaign(ws: Workspace, api: httpx.Client, sender: str, *, start: str = "") -> int:
    people = "\n".join(f"Person {i},+1 202 555 01{i:02d}" for i in range(RECIPIENTS))
    (ws.path / "people.csv").write_text(f"Name,Phone\n{people}\n", encoding="utf-8")
    import_over_api(api, ws.path / "people.csv", "customers")
    spec = CAMPAIGN.format(sender=sender) + start
    made = ok(api.post("/api/v1/campaigns/toml", files={"file": ("c.toml", spec)}), 201)
    return int(made["id"])


def _all_delivered(api: httpx.Client, campaign_id: int) -> dict[str, Any]:
    shown: dict[str, Any] = api.get(f"/api/v1/campaigns/{campaign_id}").json()
    counts = shown["counts"]
    done = counts.get("delivered", 0) + counts.get("read", 0)
    return shown if done == RECIPIENTS and shown["state"] == "completed" else {}


def _webhook_of(ws: Workspace, sender: str) -> dict[str, Any]:
    held = httpx.get(f"{ws.gateway_url}/sandbox/instances", timeout=10).json()
    found: dict[str, Any] = next(i for i in held if i["instance_id"] == sender)
    return found


def test_serve_holds_a_sender_its_first_send_proves_linked_until_its_webhook_is_registered(
    ws: Workspace,
) -> None:
    server = ws.serve()
    with server.api() as api:
        sender = _sender_linked_behind_our_back(ws, api)
        campaign_id = _campaign(ws, api, sender)  # starts now: serve sends it
        shown = wait_for(
            lambda: _all_delivered(api, campaign_id),
            timeout=30,
            what="every recipient delivered or read",
        )
    assert shown["counts"].get("sent", 0) == 0, shown["counts"]
    webhook = _webhook_of(ws, sender)
    assert webhook["webhook_enabled"] and webhook["webhook_url"] == f"{server.url}/***", webhook


def test_campaign_run_registers_the_receivers_webhook_for_a_sender_its_send_proves_linked(
    ws: Workspace,
) -> None:
    receiver = ws.spawn("receive", "--port", "0")
    marker = "gatecast receiving on "
    url = wait_for(
        lambda: marker in receiver.output() and receiver.output().split(marker, 1)[1].split()[0],
        what="gatecast receive serving",
    )
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as api:
        sender = _sender_linked_behind_our_back(ws, api)
        # a start tomorrow: nothing sends it before `campaign run` does
        schedule = '\n[schedule]\ntimezone = "UTC"\nstart = "tomorrow 09:00"\n'
        campaign_id = _campaign(ws, api, sender, start=schedule)
        run = ws.run("campaign", "run", str(campaign_id), "--no-progress")
        registered = f"webhook {url}/webhooks/gateway/*** registered for {sender}"
        assert registered in run.output, run.output
        shown = wait_for(
            lambda: _all_delivered(api, campaign_id),
            timeout=30,
            what="every recipient delivered or read",
        )
    assert shown["counts"].get("sent", 0) == 0, shown["counts"]
