"""Several ``gatecast serve`` processes register one webhook: ``GATECAST_PUBLIC_URL``.

Two processes serve one SQLite database, each with its own state folder (as on two
machines: each has its own receiver and port); the gateway (a sandbox process) must hold the
public URL, never the second process's own port, and when its webhook is changed behind
gatecast's back the leader puts it back within ``GATECAST_WEBHOOK_CHECK_SECONDS``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import httpx

from gateway.client import GatewayClient
from tests.journeys.harness import SANDBOX_TOKEN, Workspace, wait_for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _webhook(gateway_url: str, instance_id: str) -> object:
    """The sandbox's record of the instance's webhook (origin + ``/***``), or None if off."""
    rows = httpx.get(f"{gateway_url}/sandbox/instances", timeout=10).json()
    row = next(r for r in rows if r["instance_id"] == instance_id)
    return row["webhook_url"] if row["webhook_enabled"] else None


def _said(output: Callable[[], str], line: str) -> None:
    wait_for(lambda: line in output(), timeout=30, what=f"{line!r} in the output")


def test_two_serve_processes_register_the_public_url_and_the_leader_keeps_it(
    ws: Workspace,
) -> None:
    sender = ws.link_sender()
    port = _free_port()
    public = f"http://127.0.0.1:{port}"
    shown = f"{public}/***"
    ws.settings.update(GATECAST_PUBLIC_URL=public, GATECAST_WEBHOOK_CHECK_SECONDS="2")
    first = ws.serve("--port", str(port))
    # another machine's serve: its own state folder, so its own receiver on its own port
    # (in one folder it would take the first receiver's socket over)
    second = ws.serve(GATECAST_JOURNAL_DIR=str(ws.path / "second-machine"))
    assert second.url != public  # its own port: never registered
    # each registers as it starts, beside its dispatcher: one summary line when done
    summary = f"webhook {public}/webhooks/gateway/*** registered for {sender}"
    for served in (first, second):
        _said(served.process.output, summary)
    assert _webhook(ws.gateway_url, sender) == shown
    assert "GATECAST_PUBLIC_URL is not set" not in first.process.output()

    # someone points the gateway elsewhere (the gateway cannot tell gatecast)
    with GatewayClient(ws.gateway_url, SANDBOX_TOKEN, timeout=10) as gw:
        gw.set_webhook(sender, f"{second.url}/webhooks/gateway/stolen")
    # (not read back here: the leader checks every 2 s and may have put it back already)
    wait_for(
        lambda: _webhook(ws.gateway_url, sender) == shown,
        timeout=20,
        what="the leader to register the public URL again",
    )

    # turned off behind gatecast's back: turned on again at the same address
    with GatewayClient(ws.gateway_url, SANDBOX_TOKEN, timeout=10) as gw:
        gw.set_webhook(sender, "http://webhook-disabled.invalid/", enable=False)
    wait_for(
        lambda: _webhook(ws.gateway_url, sender) == shown,
        timeout=20,
        what="the leader to turn the webhook on again",
    )

    # registered elsewhere by hand through gatecast: put back, and the leader says so
    given = ws.run("instance", "webhook", sender, "--url", "http://127.0.0.1:9/hook").output
    assert "127.0.0.1:9" in given, given
    wait_for(
        lambda: _webhook(ws.gateway_url, sender) == shown,
        timeout=20,
        what="the leader to replace a webhook given by hand",
    )
    warning = f"webhook of instance {sender} was not the deployment's"

    def warned() -> str | None:
        out = first.process.output() + second.process.output()
        return out if warning in out else None

    both = wait_for(warned, timeout=60, what="the leader's warning")
    assert "Traceback" not in both, both
    secret = (ws.path / ".gatecast-webhook-secret").read_text(encoding="utf-8").strip()
    assert secret and secret not in both


def test_serve_without_a_public_url_warns_that_several_processes_need_one(
    ws: Workspace,
) -> None:
    sender = ws.link_sender()
    server = ws.serve()
    out = server.process.output()
    assert "GATECAST_PUBLIC_URL is not set" in out, out
    _said(server.process.output, f"webhook {server.url}/webhooks/gateway/*** registered for")
    assert _webhook(ws.gateway_url, sender) == f"{server.url}/***"
