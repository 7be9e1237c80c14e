"""Settings an operator sets for the service: history retention
(``GATECAST_EVENT_RETENTION_DAYS``) and the dispatch lease.

A campaign ran ten days ago (the process clock set back with ``GATECAST_CLOCK_START``):
its status events were received then and applied to its recipients' rows. ``serve`` with
the default retention (30 days) keeps them; ``serve`` with a retention of 3 days prunes
them (the metrics' age of the oldest applied event falls under the retention) while the
counter of webhook events received never goes down, and the campaign's counts and report
still say what happened to every recipient. A retention too short for
settling ``unknown`` rows is refused, naming the setting.
"""

from __future__ import annotations

import csv
import re
from datetime import UTC, datetime, timedelta

from tests.journeys.harness import SAMPLES, Server, Workspace, wait_for
from tests.journeys.test_senders import _campaign, _show


def _metrics(server: Server) -> dict[str, float] | None:
    """The metrics' status events received (a counter) and the age of the oldest applied
    event stored (None until the page answers)."""
    with server.api() as api:
        res = api.get("/metrics")
    if res.status_code != 200:
        return None
    found = re.findall(r'gatecast_webhook_events_total\{kind="status_\w+"\} (\S+)', res.text)
    age = re.search(r"^gatecast_oldest_applied_event_age_seconds (\S+)$", res.text, re.M)
    if not found or age is None:
        return None
    return {"received": sum(float(n) for n in found), "oldest": float(age.group(1))}


def test_serve_prunes_applied_events_after_the_retention(ws: Workspace) -> None:
    ws.clock_start = datetime.now(UTC) - timedelta(days=10)
    ws.link_sender()
    ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
    campaign_id = _campaign(ws)
    ws.run("campaign", "run", str(campaign_id), "--webhook", "--settle", "3", timeout=180)
    before = _show(ws, campaign_id)
    counts = before["counts"]
    assert isinstance(counts, dict)
    progressed = counts["delivered"] + counts["read"]
    assert progressed > 0, before
    ws.clock_start = None  # today

    kept = ws.serve()
    before_prune = wait_for(lambda: _metrics(kept), what="the metrics")
    assert before_prune["received"] >= progressed, before_prune
    assert before_prune["oldest"] > 9 * 86400, before_prune  # kept: ten days old
    kept.stop()

    pruning = ws.serve(GATECAST_EVENT_RETENTION_DAYS="3")

    def pruned() -> dict[str, float] | None:
        m = _metrics(pruning)
        return m if m is not None and m["oldest"] < 3 * 86400 else None

    after = wait_for(
        pruned,
        timeout=60,
        what="the applied status events to be pruned",
    )
    assert after["received"] == before_prune["received"], (before_prune, after)
    pruning.stop()
    assert _show(ws, campaign_id)["counts"] == counts
    report = ws.path / "after.csv"
    ws.run("report", str(campaign_id), "--output", str(report))
    rows = list(csv.DictReader(report.open(encoding="utf-8-sig")))
    assert sum(1 for r in rows if r["delivered_at"]) == progressed


def test_a_retention_shorter_than_evidence_settling_is_refused(ws: Workspace) -> None:
    res = ws.run("instance", "status", ok=False, GATECAST_EVENT_RETENTION_DAYS="1")
    assert res.code != 0
    assert "EVENT_RETENTION_DAYS" in res.output.upper(), res.output
    assert "at least 3" in res.output, res.output


def test_a_dispatch_lease_shorter_than_a_send_is_refused(ws: Workspace) -> None:
    """``GATECAST_DISPATCH_LEASE_SECONDS`` (how long a claimed row may stay ``sending``,
    read by ``serve`` and ``worker``) must outlast the gateway's HTTP timeout."""
    res = ws.run(
        "instance",
        "status",
        ok=False,
        GATECAST_DISPATCH_LEASE_SECONDS="20",
        GATECAST_HTTP_TIMEOUT_SECONDS="30",
    )
    assert res.code == 2, res.output
    assert "GATECAST_DISPATCH_LEASE_SECONDS (20)" in res.output, res.output
    assert "GATECAST_HTTP_TIMEOUT_SECONDS (30)" in res.output, res.output
    assert "Traceback" not in res.output, res.output
