"""Faults and field-notes traps of the sandbox, seen by a plain httpx client over real HTTP."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from gateway.event_parsing import parse_webhook
from gateway.events import DeliveryStatus, MessageStatus
from gateway.sandbox import Sandbox, SandboxConfig, WebhookSink, run_sandbox_in_thread
from gateway.sandbox.refusals import QUOTA

TOKEN = "sandbox-token"


def _send(client: httpx.Client, sb: Sandbox, iid: str, number: str) -> httpx.Response:
    params = {"number": number, "type": "text", "message": "hi", "instance_id": iid}
    return client.get(f"{sb.url}/api/send", params={**params, "access_token": TOKEN})


def test_5xx_and_429_refuse_before_anything_is_recorded() -> None:
    with run_sandbox_in_thread(SandboxConfig(fault_rate_5xx=0.5, fault_rate_429=0.5)) as sb:
        iid = sb.create_linked_instance()
        with httpx.Client() as client:
            codes = [_send(client, sb, iid, f"1555000{i:04d}") for i in range(40)]
        statuses = {r.status_code for r in codes}
        assert 429 in statuses and statuses - {429} <= {500, 502, 503} and len(statuses) > 1
        for r in codes:
            if r.status_code == 429:
                assert 1 <= int(r.headers["Retry-After"]) <= 5
        assert sb.stats()["accepted"] == 0
        stats = sb.stats()["faults"]
        assert stats["429"] + stats["5xx"] == 40


def test_dropped_connection_after_the_message_was_accepted() -> None:
    with run_sandbox_in_thread(SandboxConfig(drop_rate=1.0)) as sb:
        iid = sb.create_linked_instance()
        with httpx.Client() as client, pytest.raises(httpx.RemoteProtocolError):
            _send(client, sb, iid, "15551230000")
        msgs = sb.messages()
        assert [(m["to"], m["answered"]) for m in msgs] == [("15551230000", "dropped")]


def test_slow_answer_after_the_client_gave_up_but_the_message_left() -> None:
    cfg = SandboxConfig(slow_rate=1.0, slow_seconds=1.0, status_delays=(0.0, 0.0, 0.0))
    with run_sandbox_in_thread(cfg) as sb:
        iid = sb.create_linked_instance()
        with httpx.Client(timeout=0.2) as client, pytest.raises(httpx.ReadTimeout):
            _send(client, sb, iid, "15551230001")
        assert [m["answered"] for m in sb.messages()] == ["slow"]
        assert sb.wait_idle(15)
        assert sb.messages()[0]["status"] == "read"


def test_success_without_key_and_backend_down_shapes() -> None:
    with run_sandbox_in_thread(SandboxConfig(no_key_rate=0.5, backend_down_rate=0.5)) as sb:
        iid = sb.create_linked_instance()
        with httpx.Client() as client:
            answers = [_send(client, sb, iid, f"1555000{i:04d}") for i in range(60)]
    assert {r.status_code for r in answers} == {200, 504}  # 504: a proxy gave up waiting
    texts = {r.text for r in answers}
    assert '{"status":"success"}' in texts
    assert "[]" in texts and "" in texts
    assert any(t.startswith("<html>") for t in texts)
    faults = sb.stats()["faults"]
    assert faults["no_key"] + faults["backend_down"] == 60
    # a backend_down answer may hide an accepted message: sometimes it left, sometimes not
    accepted = sb.stats()["accepted"]
    assert 0 < accepted < faults["backend_down"]
    assert all(m["answered"] == "backend_down" for m in sb.messages())


def test_monthly_quota_string_after_n_sends() -> None:
    with run_sandbox_in_thread(SandboxConfig(monthly_quota=3)) as sb:
        iid = sb.create_linked_instance()
        with httpx.Client() as client:
            bodies = [_send(client, sb, iid, f"1555000{i:04d}").json() for i in range(5)]
    assert [b["status"] for b in bodies] == ["success"] * 5
    assert all("key" in b["message"] for b in bodies[:3])
    assert [b["message"] for b in bodies[3:]] == [QUOTA, QUOTA]
    assert sb.stats()["accepted"] == 3


def test_key_under_data_and_error_463(webhook_sink: WebhookSink) -> None:
    cfg = SandboxConfig(id_under_data=True, error_463_rate=1.0, status_delays=(0.0, 0.0, 0.0))
    with run_sandbox_in_thread(cfg) as sb:
        iid = sb.create_linked_instance()
        sb.state.instances[iid].webhook_url = webhook_sink.url
        sb.state.instances[iid].webhook_enabled = True
        with httpx.Client() as client:
            body = _send(client, sb, iid, "15551230003").json()
        assert body["status"] == "success" and "key" not in body["message"]
        mid = body["data"]["key"]["id"]
        assert sb.wait_idle(15)
        events = [e for b in webhook_sink.bodies for e in parse_webhook(b)]
        [event] = [e for e in events if isinstance(e, MessageStatus)]
        assert (event.message_id, event.status, event.error_code) == (
            mid,
            DeliveryStatus.FAILED,
            "463",
        )


def test_cold_lock_mode_refuses_cold_contacts_with_463_while_it_holds(
    webhook_sink: WebhookSink,
) -> None:
    """``cold_lock_after=1``: one cold contact goes through, the next starts the lock; under
    it cold contacts fail with 463 while a known chat, a number that wrote in and a group
    pass; after the lock cold contacts pass again."""
    clock = [1000.0]
    cfg = SandboxConfig(cold_lock_after=1, cold_lock_seconds=30, status_delays=(0.0, 0.0, 0.0))
    with run_sandbox_in_thread(cfg) as sb:
        sb.state.clock = lambda: clock[0]
        iid = sb.create_linked_instance()
        sb.state.instances[iid].webhook_url = webhook_sink.url
        sb.state.instances[iid].webhook_enabled = True
        sb.state.inject_incoming(iid, "15551230009", "hi")  # wrote in: a known chat
        with httpx.Client() as client:
            sent = {
                to: _send(client, sb, iid, to).json()["message"]["key"]["id"]
                for to in ("15551230001", "15551230002", "15551230003", "15551230009")
            }
            sent["again"] = _send(client, sb, iid, "15551230001").json()["message"]["key"]["id"]
            clock[0] += 31  # the lock is over
            sent["after"] = _send(client, sb, iid, "15551230004").json()["message"]["key"]["id"]
        assert sb.wait_idle(15)
        events = [e for b in webhook_sink.bodies for e in parse_webhook(b)]
        failed = {
            e.message_id
            for e in events
            if isinstance(e, MessageStatus) and e.status is DeliveryStatus.FAILED
        }
        assert all(
            e.error_code == "463"
            for e in events
            if isinstance(e, MessageStatus) and e.message_id in failed
        )
        assert failed == {sent["15551230002"], sent["15551230003"]}


def test_cli_runs_a_sandbox_and_writes_the_ready_file(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from gatecast.cli import main; main()",
            "sandbox",
            "--port",
            "0",
            "--dialect",
            "reference",
            "--seed",
            "5",
            "--token",
            "cli-token",
            "--auto-link",
            "--ready-file",
            str(ready),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "sandbox did not become ready"
            time.sleep(0.05)
        url = ready.read_text().strip()
        with httpx.Client() as client:
            created = client.get(f"{url}/api/create_instance", params={"access_token": "cli-token"})
            iid = created.json()["instance_id"]
            params = {"number": "15551234567", "type": "text", "message": "hi"}
            auth = {"instance_id": iid, "access_token": "cli-token"}
            sent = client.get(f"{url}/messenger_api/send", params={**params, **auth}).json()
            assert sent["status"] == "success"  # --auto-link: connected at once
            assert client.get(f"{url}/sandbox/stats").json()["accepted"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert b"cli-token" not in out + err


def test_reference_build_that_ignores_number_in_json() -> None:
    cfg = SandboxConfig(dialect="reference", number_from_json=False)
    with run_sandbox_in_thread(cfg) as sb, httpx.Client() as client:
        iid = sb.create_linked_instance()
        fields = {"number": "15551234567", "type": "text", "message": "j", "instance_id": iid}
        by_json = client.post(f"{sb.url}/api/send", json={**fields, "access_token": TOKEN})
        assert by_json.json() == {"status": "error", "message": "Phone number is required"}
        by_form = client.post(f"{sb.url}/api/send", data={**fields, "access_token": TOKEN})
        assert by_form.json()["status"] == "success"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fault_rate_5xx": 1.5}, "fault_rate_5xx must be between 0 and 1"),
        ({"fault_rate_5xx": 0.7, "drop_rate": 0.7}, "add up to"),
        ({"latency_ms": (10, 5)}, "latency_ms"),
        ({"not_on_app": frozenset({"+1555"})}, "not_on_app holds non-digit numbers: +1555"),
        ({"dialect": "soap"}, "dialect must be 'spec' or 'reference'"),
        ({"slow_seconds": -1.0}, "slow_seconds"),
    ],
)
def test_bad_config_is_named(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        SandboxConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--latency-ms", "fast"], "expected A-B in milliseconds"),
        (["--fault-rate", "2"], "fault_rate_5xx must be between 0 and 1"),
        (["--not-on-app", "1555,abc"], "not digits: abc"),
        (["--dialect", "soap"], "must be spec or reference"),
    ],
)
def test_cli_rejects_bad_options(args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from gatecast.cli import app

    result = CliRunner().invoke(app, ["sandbox", "--port", "0", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
