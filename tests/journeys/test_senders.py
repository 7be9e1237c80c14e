"""Sender instances through the user's faces: dead senders, forgetting, linking without
connection events, a reset without a new id, and the webhook a foreground run borrows.

Each journey drives the ``gatecast`` CLI (subprocesses), ``gatecast serve``'s HTTP API and
``gatecast sandbox`` processes of its own where it needs sandbox options.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.journeys.harness import (
    SAMPLES,
    Process,
    Workspace,
    start_sandbox,
    wait_for,
    workspace,
)

FAST = {
    "per_minute = 20": "per_minute = 600",
    "delay_seconds = [5, 15]": "delay_seconds = [0, 0]",
}


@pytest.fixture
def sandbox_dir(tmp_path: Path) -> Path:
    return tmp_path / "sandbox"


@contextlib.contextmanager
def _own_sandbox(sandbox_dir: Path, *args: str) -> Iterator[Process]:
    proc = start_sandbox(sandbox_dir, "--status-delays", "0.05,0.1,0.2", *args)
    try:
        yield proc
    finally:
        proc.stop()


def _created_id(output: str) -> str:
    found = re.search(r"\b([0-9A-F]{10,})\b", output)
    assert found, output
    return found.group(1)


def _link(ws: Workspace) -> str:
    """Create an instance (the auto-link sandbox links it) and let gatecast see it linked."""
    instance_id = ws.link_sender()
    assert instance_id in ws.run("instance", "status").output
    return instance_id


def _import(ws: Workspace) -> None:
    ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")


def _campaign(ws: Workspace, extra: str = "", **replace: str) -> int:
    text = (SAMPLES / "campaign.toml").read_text(encoding="utf-8")
    for old, new in {**FAST, **replace}.items():
        assert old in text, old
        text = text.replace(old, new)
    path = ws.path / f"campaign-{len(list(ws.path.glob('campaign-*.toml')))}.toml"
    path.write_text(extra + text, encoding="utf-8")
    return int(ws.run("campaign", "create", str(path), "--json").json()["id"])


def _show(ws: Workspace, campaign_id: int) -> dict[str, object]:
    shown = ws.run("campaign", "show", str(campaign_id), "--json").json()
    assert isinstance(shown, dict)
    return shown


def _sandbox_instances(url: str) -> dict[str, dict[str, object]]:
    rows = httpx.get(f"{url}/sandbox/instances", timeout=10).json()
    return {str(r["instance_id"]): r for r in rows}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status_row(ws: Workspace, instance_id: str) -> str:
    for line in ws.run("instance", "status").output.splitlines():
        if instance_id in line:
            return line
    return ""


# -- (a) the README walk-through right after the demo ------------------------------------


def test_next_campaign_after_the_demo_completes(ws: Workspace) -> None:
    """The demo's instance died with its embedded sandbox; the README's next campaign
    (no ``instances``) still sends all 44 through the newly linked sender."""
    demo = ws.run("demo", "--reports-dir", str(ws.path / "reports"), timeout=180)
    assert "44/44" in demo.output, demo.output
    new_sender = _link(ws)
    _import(ws)
    campaign_id = _campaign(ws)
    run = ws.run("campaign", "run", str(campaign_id), "--webhook", "--settle", "2", timeout=90)
    assert "44/44" in run.output, run.output
    shown = _show(ws, campaign_id)
    assert shown["state"] == "completed", shown
    report = ws.path / "report.csv"
    ws.run("report", str(campaign_id), "--output", str(report))
    rows = list(csv.DictReader(report.open(encoding="utf-8")))
    assert len(rows) == 44
    assert {r["sender"] for r in rows if r["state"] != "skipped"} == {new_sender}


# -- (b) a sender dies mid-campaign -------------------------------------------------------


def test_sender_dying_mid_campaign_hands_over_to_the_other(
    tmp_path: Path, sandbox_dir: Path
) -> None:
    with _own_sandbox(sandbox_dir) as sb, workspace(tmp_path / "work", sb.url) as ws:
        first, second = _link(ws), _link(ws)
        _import(ws)
        campaign_id = _campaign(ws, **{"delay_seconds = [0, 0]": "delay_seconds = [0.3, 0.3]"})
        run = ws.spawn(
            "campaign",
            "run",
            str(campaign_id),
            "--webhook",
            "--settle",
            "1",
            "--sender-grace",
            "1",
            "--no-progress",
        )

        def some_sent() -> bool:
            counts = _show(ws, campaign_id)["counts"]
            assert isinstance(counts, dict)
            done = sum(int(v) for k, v in counts.items() if k not in ("queued", "sending"))
            return done >= 6

        wait_for(some_sent, timeout=60, what="the first sends")
        ws.run("instance", "logout", first)
        assert run.popen.wait(90) == 0, run.output()
        shown = _show(ws, campaign_id)
        assert shown["state"] == "completed", (shown, run.output())
        per_sender = {m["instance_id"] for m in httpx.get(f"{sb.url}/sandbox/messages").json()}
        assert per_sender == {first, second}
        stats = httpx.get(f"{sb.url}/sandbox/stats").json()
        assert stats["accepted"] == 44 and stats["recipients_with_several"] == []


# -- (c) no sender can send ---------------------------------------------------------------


def test_campaign_run_ends_when_no_sender_can_send(tmp_path: Path, sandbox_dir: Path) -> None:
    with _own_sandbox(sandbox_dir) as sb, workspace(tmp_path / "work", sb.url) as ws:
        sender = _link(ws)
        _import(ws)
        campaign_id = _campaign(ws)
        # the phone logs out while gatecast hears nothing (no webhook yet)
        httpx.post(f"{sb.url}/sandbox/instances/{sender}/logout").raise_for_status()
        run = ws.run("campaign", "run", str(campaign_id), "--no-progress", ok=False, timeout=60)
        assert run.code != 0, run.output
        assert "no sender can send" in run.output, run.output
        assert sender in run.output and "relogin" in run.output, run.output
        assert "44 recipient" in run.output, run.output
        # the refused send showed the session logged out: the status says so
        assert "logged_out" in _status_row(ws, sender)


# -- (c2) a sender logged out through gatecast is not used until linked again -------------


def test_logged_out_sender_waits_until_linked_again(ws: Workspace) -> None:
    sender = _link(ws)
    ws.run("instance", "logout", sender)
    _import(ws)
    campaign_id = _campaign(ws, extra=f'instances = ["{sender}"]\n')

    def refused() -> int:  # sends the sandbox refused as logged out (the module shares it)
        stats = httpx.get(f"{ws.gateway_url}/sandbox/stats", timeout=10).json()
        return int(stats["errors"].get("This WhatsApp account relogin required", 0))

    before = refused()
    run = ws.run("campaign", "run", str(campaign_id), "--no-progress", ok=False, timeout=60)
    assert run.code == 3, run.output
    assert f"{sender} (logged_out: link it again" in run.output, run.output
    assert refused() == before  # nothing was even tried through it
    sent = httpx.get(f"{ws.gateway_url}/sandbox/messages?instance_id={sender}").json()
    assert sent == []
    # linked again: a new QR code, the scan; the next run sends and proves the link
    ws.run("instance", "qr", sender)
    httpx.post(f"{ws.gateway_url}/sandbox/instances/{sender}/scan").raise_for_status()
    again = ws.run("campaign", "run", str(campaign_id), "--no-progress", "--settle", "0")
    assert _show(ws, campaign_id)["state"] == "completed", again.output
    assert " connected " in f" {_status_row(ws, sender)} "


# -- (c3) a refused access token: the setting, for every sender, not a sender's link -----


def test_refused_access_token_names_the_setting(ws: Workspace) -> None:
    sender = _link(ws)
    _import(ws)
    campaign_id = _campaign(ws)
    wrong = "a-token-the-gateway-never-gave"
    run = ws.run("campaign", "run", str(campaign_id), ok=False, GATECAST_ACCESS_TOKEN=wrong)
    assert run.code == 3, run.output
    assert "refused the access token" in run.output, run.output
    assert "GATECAST_ACCESS_TOKEN" in run.output and "instance qr" not in run.output
    status = ws.run("instance", "status").output
    assert "GATECAST_ACCESS_TOKEN" in status, status
    row = _status_row(ws, sender)
    assert "bad_token" in row and " connected " in f" {row} ", row  # its link is fine


# -- (d) forget an instance ---------------------------------------------------------------


def test_forget_an_instance_by_cli_and_api(ws: Workspace) -> None:
    kept, gone_cli, gone_api = _link(ws), _link(ws), _link(ws)
    _import(ws)
    campaign_id = _campaign(ws)
    ws.run("campaign", "run", str(campaign_id), "--settle", "0", timeout=120)

    out = ws.run("instance", "forget", gone_cli).output
    assert f"instance {gone_cli} forgotten" in out, out
    assert gone_cli not in ws.run("instance", "status").output
    again = ws.run("instance", "forget", gone_cli, ok=False)
    assert again.code == 1 and "knows no instance" in again.output, again.output

    api = ws.serve().api()
    assert api.delete(f"/api/v1/instances/{gone_api}").status_code == 200
    assert api.get(f"/api/v1/instances/{gone_api}").status_code == 404
    assert api.delete(f"/api/v1/instances/{gone_api}").status_code == 404
    listed = {i["instance_id"] for i in api.get("/api/v1/instances").json()["items"]}
    assert kept in listed and gone_api not in listed and gone_cli not in listed

    report = ws.path / "report.csv"
    ws.run("report", str(campaign_id), "--output", str(report))
    senders = {r["sender"] for r in csv.DictReader(report.open(encoding="utf-8"))}
    assert senders == {kept, gone_cli, gone_api}  # history stays in reports


# -- (e) a gateway that posts no connection events ---------------------------------------


def test_no_connection_events_link_by_qr_and_serve(tmp_path: Path, sandbox_dir: Path) -> None:
    with (
        _own_sandbox(sandbox_dir, "--no-auto-link", "--no-connection-events") as sb,
        workspace(tmp_path / "work", sb.url) as ws,
    ):
        sender = _created_id(ws.run("instance", "create").output)
        ws.run("instance", "qr", sender)
        httpx.post(f"{sb.url}/sandbox/instances/{sender}/scan").raise_for_status()
        _import(ws)
        server = ws.serve()
        api = server.api()
        created = api.post(
            "/api/v1/campaigns/toml",
            files={"file": ("campaign.toml", _toml_with(**FAST).encode(), "text/plain")},
        )
        assert created.status_code == 201, created.text
        campaign_id = created.json()["id"]

        def finished() -> dict[str, object] | None:
            got = api.get(f"/api/v1/campaigns/{campaign_id}").json()
            return got if got["state"] in ("completed", "failed") else None

        done = wait_for(finished, timeout=90, what="the campaign to end")
        assert done["state"] == "completed", (done, server.process.output())
        seen = _sandbox_instances(sb.url)[sender]
        assert seen["webhook_enabled"] is True, seen
        assert str(seen["webhook_url"]).startswith(server.url), seen
        events = httpx.get(f"{sb.url}/sandbox/events").json()["events"]
        assert not [e for e in events if e["event"] == "connection"]
        assert api.get(f"/api/v1/instances/{sender}").json()["state"] == "connected"


def test_strict_gateway_link_by_qr_then_a_campaign_without_instances(
    tmp_path: Path, sandbox_dir: Path
) -> None:
    """A gateway that follows the spec to the letter: no connection event, and a QR
    request of a linked instance answers a QR code. The README's steps on the CLI alone:
    create, show the QR, scan, a campaign without ``instances``, run: all delivered, and
    the first accepted send confirmed the link."""
    with (
        _own_sandbox(sandbox_dir, "--no-auto-link", "--strict") as sb,
        workspace(tmp_path / "work", sb.url) as ws,
    ):
        sender = _created_id(ws.run("instance", "create").output)
        shown = ws.run("instance", "qr", sender).output
        assert "first send" in shown, shown
        httpx.post(f"{sb.url}/sandbox/instances/{sender}/scan").raise_for_status()
        again = ws.run("instance", "qr", sender).output  # still a QR code: no confirmation
        assert "already linked" not in again, again
        assert "unconfirmed" in _status_row(ws, sender)
        _import(ws)
        campaign_id = _campaign(ws)
        run = ws.run("campaign", "run", str(campaign_id), "--webhook", "--settle", "2")
        assert "44/44" in run.output, run.output
        counts = _show(ws, campaign_id)["counts"]
        assert (
            isinstance(counts, dict) and counts.get("delivered", 0) + counts.get("read", 0) == 44
        ), counts
        assert " connected " in f" {_status_row(ws, sender)} "
        events = httpx.get(f"{sb.url}/sandbox/events").json()["events"]
        assert not [e for e in events if e["event"] == "connection"]


def _toml_with(**replace: str) -> str:
    text = (SAMPLES / "campaign.toml").read_text(encoding="utf-8")
    for old, new in replace.items():
        text = text.replace(old, new)
    return text


# -- (f) a reset answered without a new id ------------------------------------------------


def test_reset_without_new_id_marks_the_old_id_gone(tmp_path: Path, sandbox_dir: Path) -> None:
    with (
        _own_sandbox(sandbox_dir, "--reset-without-id") as sb,
        workspace(tmp_path / "work", sb.url) as ws,
    ):
        sender = _link(ws)
        out = ws.run("instance", "reset", sender).output
        assert "did not return the new id" in out, out
        assert "gatecast instance create" in out, out
        assert "gone" in _status_row(ws, sender)
        reboot = ws.run("instance", "reboot", sender, ok=False)
        assert reboot.code == 1, reboot.output
        assert "no longer exists at the gateway" in reboot.output, reboot.output
        assert "Invalidated" not in reboot.output
        _import(ws)
        campaign_id = _campaign(ws)
        run = ws.run("campaign", "run", str(campaign_id), ok=False, timeout=60)
        assert run.code == 1 and "no sender instance" in run.output, run.output
        # a campaign naming it, or an id gatecast never knew: only usable senders are offered
        usable = _link(ws)
        named = ws.path / "named.toml"
        text = (SAMPLES / "campaign.toml").read_text(encoding="utf-8")
        named.write_text(f'instances = ["{sender}", "NOSUCHSENDER1"]\n' + text, encoding="utf-8")
        refused = ws.run("campaign", "create", str(named), ok=False)
        assert refused.code != 0, refused.output
        flat = " ".join(refused.output.split())
        assert "gatecast has no sender instance NOSUCHSENDER1" in flat, flat
        assert f"{sender} no longer exists at the gateway (gone)" in flat, flat
        assert f"the usable ones: {usable}." in flat, flat


# -- (g) webhook: the generated secret, disable without a URL, no serve to restore to ----


def test_webhook_secret_file_disable_and_no_restore_without_serve(ws: Workspace) -> None:
    served, fresh = _link(ws), _link(ws)
    port = _free_port()
    serve = ws.spawn("serve", "--port", str(port), GATECAST_PORT=str(port))
    wait_for(lambda: "gatecast serving on" in serve.output(), timeout=60, what="serve")
    # it registers the webhook for both beside its dispatcher, then says so in one line
    wait_for(lambda: "registered for" in serve.output(), timeout=30, what="the registration")
    serve.stop()  # serve registered its webhook for both, and generated the secret file
    serve_url = f"http://127.0.0.1:{port}/***"
    assert _sandbox_instances(ws.gateway_url)[served]["webhook_url"] == serve_url
    secret_file = ws.path / ".gatecast-webhook-secret"
    secret = secret_file.read_text(encoding="utf-8")

    # `instance webhook` takes the secret serve generated: it asks for none
    hook = ws.run("instance", "webhook", served, GATECAST_PUBLIC_URL="https://hooks.example")
    assert "set to https://hooks.example/webhooks/gateway/***" in hook.output, hook.output
    assert secret.strip() not in hook.output
    assert secret_file.read_text(encoding="utf-8") == secret
    assert _sandbox_instances(ws.gateway_url)[served]["webhook_url"] == "https://hooks.example/***"

    off = ws.run("instance", "webhook", fresh, "--disable")
    assert "disabled" in off.output, off.output
    assert _sandbox_instances(ws.gateway_url)[fresh]["webhook_enabled"] is False

    # no serve runs: after the run, nothing is "restored" to an address nobody serves
    _import(ws)
    campaign_id = _campaign(ws)
    run = ws.run("campaign", "run", str(campaign_id), "--webhook", "--settle", "1")
    assert _show(ws, campaign_id)["state"] == "completed"
    after = _sandbox_instances(ws.gateway_url)
    assert not after[served]["webhook_enabled"] and not after[fresh]["webhook_enabled"], after
    assert "restored" not in run.output, run.output
    flat = " ".join(run.output.split())
    assert f"the webhook of {served}, {fresh} is turned off" in flat, flat
    assert "not received until `gatecast serve` runs" in flat, flat


# -- (h) slow senders keep their pace under `serve` ----------------------------------------


def test_serve_sends_each_slow_senders_rows_on_pace(tmp_path: Path, sandbox_dir: Path) -> None:
    # a gateway that answers each send after 0.6 s (web-session gateways answer after they
    # have sent), senders paced every 0.5 s: each sender's sends wait on the gateway in the
    # background while the others go on; GATECAST_SEND_CONCURRENCY bounds how many wait
    with (
        _own_sandbox(sandbox_dir, "--latency-ms", "600-600") as sb,
        workspace(tmp_path / "work", sb.url) as ws,
    ):
        senders = {_link(ws) for _ in range(4)}
        _import(ws)
        server = ws.serve(GATECAST_SEND_CONCURRENCY="8")
        campaign_id = _campaign(ws, **{"per_minute = 600": "per_minute = 120"})

        def finished() -> bool:
            got = server.api().get(f"/api/v1/campaigns/{campaign_id}").json()
            return bool(got["state"] == "completed")

        wait_for(finished, timeout=90, what="the campaign to complete")
        messages = httpx.get(f"{sb.url}/sandbox/messages", timeout=10).json()
        stats = httpx.get(f"{sb.url}/sandbox/stats", timeout=10).json()
    assert stats["accepted"] == 44 and stats["recipients_with_several"] == []
    times: dict[str, list[float]] = {}
    for m in messages:
        times.setdefault(m["instance_id"], []).append(float(m["at"]))
    assert set(times) == senders  # every sender sent, none waited for another's answers
    for at in times.values():
        at.sort()
        gaps = [b - a for a, b in itertools.pairwise(at)]
        assert min(gaps) >= 0.45, gaps  # 0.5 s apart, less the gateway's jitter
