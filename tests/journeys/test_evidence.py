"""Only our gateway may speak, and evidence settles ambiguity, through the user's faces.

* A STOP forged for an instance gatecast does not hold, posted to the served webhook
  URL, opts nobody out (the same STOP from the linked sender does).
* Sends the sandbox accepted but whose answer was lost (``--drop-rate``) end ``unknown``;
  the gateway's status events for those recipients settle them, so ``campaign retry
  --unknown`` sends no second copy (the sandbox's own record says each recipient got one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.journeys.harness import SAMPLES, wait_for, workspace
from tests.journeys.test_senders import _campaign, _own_sandbox

SECRET = "journey-webhook-secret-0123456789"


def _contact(api: httpx.Client, phone: str) -> dict[str, Any]:
    page = api.get("/api/v1/contacts", params={"q": phone}).json()
    (found,) = [c for c in page["items"] if c["phone"] == phone]
    assert isinstance(found, dict)
    return found


def _stop(instance_id: str, phone: str, message_id: str) -> dict[str, Any]:
    return {
        "event": "message",
        "instance_id": instance_id,
        "data": {"id": message_id, "chat": f"{phone[1:]}@s.whatsapp.net", "text": "STOP"},
    }


def test_a_forged_stop_opts_nobody_out(tmp_path: Path) -> None:
    with (
        _own_sandbox(tmp_path / "sandbox") as sb,
        workspace(tmp_path / "work", sb.url, GATECAST_WEBHOOK_SECRET=SECRET) as ws,
    ):
        sender = ws.link_sender()
        ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
        server = ws.serve()
        hook = f"{server.url}/webhooks/gateway/{SECRET}"
        with server.api() as api:
            phone = api.get("/api/v1/contacts", params={"limit": 1}).json()["items"][0]["phone"]
            forged = httpx.post(hook, json=_stop("FORGED0000000", phone, "forged-1"), timeout=10)
            assert forged.status_code == 200, forged.text
            assert forged.json()["refused"] == 1, forged.text
            assert _contact(api, phone)["opted_out"] is False
            metrics = api.get("/metrics").text
            assert 'gatecast_webhook_events_refused_total{reason="unknown_instance"} 1.0' in metrics
            real = httpx.post(hook, json=_stop(sender, phone, "real-1"), timeout=10)
            assert real.status_code == 200 and "refused" not in real.json(), real.text
            assert _contact(api, phone)["opted_out"] is True
        assert "not an instance gatecast holds" in server.process.output()


def _sandbox_stats(url: str) -> dict[str, Any]:
    stats = httpx.get(f"{url}/sandbox/stats", timeout=10).json()
    assert isinstance(stats, dict)
    return stats


def test_retry_unknown_after_evidence_sends_no_second_copy(tmp_path: Path) -> None:
    with (
        _own_sandbox(tmp_path / "sandbox", "--drop-rate", "0.4", "--seed", "5") as sb,
        workspace(tmp_path / "work", sb.url, GATECAST_UNKNOWN_SETTLE_SECONDS="0") as ws,
    ):
        ws.link_sender()
        ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
        campaign_id = _campaign(ws)
        run = ws.run("campaign", "run", str(campaign_id), "--webhook", "--settle", "3", timeout=180)
        stats = _sandbox_stats(sb.url)
        assert stats["faults"].get("dropped", 0) > 0, stats  # some answers were lost
        assert stats["recipients_with_several"] == [], stats

        def settled() -> dict[str, Any] | None:
            shown = ws.run("campaign", "show", str(campaign_id), "--json").json()
            return shown if shown["counts"].get("unknown", 0) == 0 else None

        shown = wait_for(settled, timeout=30, what="unknown rows settled by status events")
        assert shown["counts"]["unknown"] == 0, (shown, run.output)

        retry = ws.run("campaign", "retry", str(campaign_id), "--unknown", "--json").json()
        failed = shown["counts"].get("failed", 0)
        assert retry["requeued"] == failed, retry
        if retry["requeued"]:
            ws.run("campaign", "run", str(campaign_id), "--webhook", "--settle", "1", timeout=180)
        again = _sandbox_stats(sb.url)  # the sandbox's own record: one copy each
        assert again["recipients_with_several"] == [], again
