"""``gatecast serve`` sends before the webhook registrations of its start are done.

A gateway slow to register webhooks (the sandbox's ``--webhook-latency-ms``: 5 s per
registration, sends answered at once) and four linked senders, one of which the gateway
no longer knows. ``serve`` registers them beside its dispatcher, two at a time
(``GATECAST_WEBHOOK_REGISTER_CONCURRENCY``): the campaign's first message reaches the
gateway while registrations are still under way; in the end every sender the gateway
knows holds this serve's webhook (read through the sandbox's inspection routes) and the
one it refused is named in serve's output, in one line of its own beside one summary
line for the others (docs/architecture.md: "start-up registers the webhooks beside
dispatch").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from gateway.client import GatewayClient
from tests.journeys.harness import (
    QUICK_STATUSES,
    SANDBOX_TOKEN,
    Workspace,
    link_sender_over_api,
    wait_for,
)

SANDBOX_ARGS = (*QUICK_STATUSES, "--webhook-latency-ms", "5000")
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
FAST = {"per_minute = 20": "per_minute = 600", "delay_seconds = [5, 15]": "delay_seconds = [0, 0]"}


def _sandbox(ws: Workspace, route: str) -> Any:
    return httpx.get(f"{ws.gateway_url}/sandbox/{route}", timeout=10).json()


def _registrations(ws: Workspace) -> int:
    return int(_sandbox(ws, "stats")["requests"].get("set_webhook", 0))


def test_serve_sends_before_its_slow_registrations_end_and_names_the_refused_one(
    ws: Workspace,
) -> None:
    first = ws.serve(timeout=180)
    with first.api() as api:
        senders = [link_sender_over_api(api, f"shop {i}") for i in range(4)]
    first.stop()
    broken = senders.pop()
    with GatewayClient(ws.gateway_url, SANDBOX_TOKEN, timeout=10) as gw:
        gw.reset_instance(broken)  # the gateway forgets it; gatecast still holds it linked
    ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
    text = (SAMPLES / "campaign.toml").read_text(encoding="utf-8")
    for old, new in FAST.items():
        text = text.replace(old, new)
    campaign = ws.path / "campaign.toml"
    campaign.write_text(f"instances = {senders!r}\n".replace("'", '"') + text, encoding="utf-8")
    ws.run("campaign", "create", str(campaign))  # starts now: the serve below sends it

    registered_before = _registrations(ws)
    sent_before = len(_sandbox(ws, "messages"))
    served = ws.serve(timeout=180, GATECAST_WEBHOOK_REGISTER_CONCURRENCY="2")
    wait_for(lambda: len(_sandbox(ws, "messages")) > sent_before, timeout=60, what="the first send")
    assert _registrations(ws) - registered_before < len(senders) + 1, served.process.output()

    summary = f"webhook {served.url}/webhooks/gateway/*** registered for "
    wait_for(lambda: summary in served.process.output(), timeout=60, what="the summary line")
    assert _registrations(ws) - registered_before == len(senders) + 1
    held = {i["instance_id"]: i for i in _sandbox(ws, "instances")}
    for sender in senders:
        assert held[sender]["webhook_enabled"], held[sender]
        assert held[sender]["webhook_url"] == f"{served.url}/***", held[sender]
    output = served.process.output()
    assert f"webhook not registered for {broken}:" in output, output
    lines = [ln for ln in output.splitlines() if "registered for" in ln]
    assert len(lines) == 2, lines  # the refused one, and one line for the rest
    assert all(s in lines[1] for s in senders), lines
