"""An operator scrapes ``/metrics`` of ``gatecast serve`` (a receiver process beside the
worker that sends) while a campaign runs against the sandbox: the in-process series of
both processes show in the one scrape and move as the campaign does."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.journeys.harness import (
    SAMPLES,
    Workspace,
    import_over_api,
    link_sender_over_api,
    wait_for,
)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(api: httpx.Client) -> tuple[Samples, dict[str, str]]:
    res = api.get("/metrics")
    assert res.status_code == 200, res.text
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(res.text):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, types


def _get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _sum(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name`` over every label set holding ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


@pytest.mark.slow
def test_metrics_follow_a_campaign_across_processes(ws: Workspace) -> None:
    server = ws.serve()
    api = server.api()
    sender = link_sender_over_api(api)
    import_over_api(api, SAMPLES / "contacts.csv", "customers")
    before, _ = _scrape(api)

    body = {
        "name": "Metrics",
        "list": "customers",
        "instances": [sender],
        "message": {"type": "text", "text": "Hi {{ name }}"},
        "pace": {"per_minute": 0, "delay_seconds": [0, 0]},
    }
    created = api.post("/api/v1/campaigns", json=body)
    assert created.status_code == 201, created.text
    cid = created.json()["id"]
    assert api.get("/api/v1/campaigns/999999").status_code == 404

    def read_all() -> bool:
        counts = api.get(f"/api/v1/campaigns/{cid}/progress").json()["counts"]
        return bool(counts.get("read", 0) >= 30 and counts.get("sent", 0) == 0)

    wait_for(read_all, what="the campaign's messages to be read")
    after = wait_for(
        lambda: (
            (s := _scrape(api)[0])
            and _sum(s, "gatecast_time_to_status_seconds_count", status="read") >= 30
            and s
        ),
        what="the read events in the metrics",
    )
    _, types = _scrape(api)

    # every *_total is a counter (never a gauge that could go down); latencies histograms
    totals = [n for n, t in types.items() if t != "counter" and n.endswith("_total")]
    assert not totals, totals
    for name in ("gatecast_sends", "gatecast_webhook_events", "gatecast_http_requests"):
        assert types[name] == "counter", name
    for name in (
        "gatecast_gateway_send_seconds",
        "gatecast_scheduler_claim_lateness_seconds",
        "gatecast_webhook_lag_seconds",
        "gatecast_time_to_status_seconds",
        "gatecast_http_request_seconds",
    ):
        assert types[name] == "histogram", name

    accepted = _get(after, "gatecast_send_attempts_total", outcome="accepted")
    assert accepted >= 40  # sent by the worker process, scraped from the receiver
    assert _get(after, "gatecast_gateway_send_seconds_count", outcome="accepted") == accepted
    assert _get(after, "gatecast_gateway_send_seconds_sum", outcome="accepted") > 0
    by_type = _get(after, "gatecast_send_outcomes_total", outcome="accepted", message_type="text")
    assert by_type == accepted
    assert _get(after, "gatecast_scheduler_claim_lateness_seconds_count") == _sum(
        after, "gatecast_send_attempts_total"
    )
    for kind in ("status_sent", "status_delivered", "status_read"):
        assert _get(after, "gatecast_webhook_lag_seconds_count", kind=kind) >= 30, kind
        assert _get(before, "gatecast_webhook_lag_seconds_count", kind=kind) == 0, kind
    for status in ("delivered", "read"):
        assert _get(after, "gatecast_time_to_status_seconds_count", status=status) >= 30
        le_day = _get(after, "gatecast_time_to_status_seconds_bucket", status=status, le="86400.0")
        assert le_day == _get(after, "gatecast_time_to_status_seconds_count", status=status)
    # HTTP requests by route template, method and status (never an id or the secret)
    made = _get(
        after,
        "gatecast_http_requests_total",
        route="/api/v1/campaigns",
        method="POST",
        status="201",
    )
    assert made == 1
    missing = _get(
        after,
        "gatecast_http_requests_total",
        route="/api/v1/campaigns/{campaign_id}",
        method="GET",
        status="404",
    )
    assert missing == 1
    hooks = _sum(
        after, "gatecast_http_requests_total", route="/webhooks/gateway/{secret}", status="200"
    )
    assert hooks >= 30
    routes = {dict(ls).get("route", "") for (n, ls) in after if n.startswith("gatecast_http")}
    assert not [
        r for r in routes if "999999" in r or (r.startswith("/webhooks/gateway/") and "{" not in r)
    ]
    # the database's counters moved with it
    sends_before = _get(before, "gatecast_sends_total", outcome="accepted")
    assert _get(after, "gatecast_sends_total", outcome="accepted") == sends_before + accepted
