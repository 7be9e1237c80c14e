"""An integrator's story over the HTTP API of ``gatecast serve``: link a sender, import a
spreadsheet, create a campaign, steer it (pause, resume, retry), read the reports, and
see a STOP reply opt its sender out. The gateway is a ``gatecast sandbox`` process.
"""

from __future__ import annotations

import csv
import io
import json
import time

import httpx
import openpyxl
import pytest

from tests.journeys.harness import QUICK_STATUSES, SAMPLES, Process, Server, Workspace, wait_for
from tests.journeys.harness import ok as _ok

NOT_ON_APP = "12125550115"  # Noah Brown in samples/contacts.csv: "not on the app"
SANDBOX_ARGS = (*QUICK_STATUSES, "--not-on-app", NOT_ON_APP)


@pytest.fixture
def server(ws: Workspace) -> Server:
    return ws.serve()


def _accepted(gateway: Process) -> int:
    return int(httpx.get(f"{gateway.url}/sandbox/stats", timeout=10).json()["accepted"])


def test_integrator_links_imports_sends_steers_and_reports(
    server: Server, sandbox_process: Process
) -> None:
    api = server.api()
    # link a sender: create it, ask for its QR (the sandbox links it as the phone would)
    instance = _ok(api.post("/api/v1/instances", json={"label": "shop"}), 201)
    iid = instance["instance_id"]
    api.post(f"/api/v1/instances/{iid}/link")
    wait_for(
        lambda: _ok(api.get(f"/api/v1/instances/{iid}"))["state"] == "connected",
        what="the instance to be connected",
    )

    # import the sample spreadsheet in the background and poll the job
    with (SAMPLES / "contacts.csv").open("rb") as fh:
        job = _ok(
            api.post(
                "/api/v1/imports",
                files={"file": ("contacts.csv", fh, "text/csv")},
                data={"list_name": "customers"},
            ),
            202,
        )
    done = wait_for(
        lambda: (j := _ok(api.get(f"/api/v1/imports/{job['id']}")))["status"] != "running" and j,
        what="the import",
    )
    assert (done["status"], done["imported"], done["duplicates"], done["invalid"]) == (
        "completed",
        44,
        2,
        4,
    ), done

    # create a campaign paced so that it can be paused while it sends
    body = {
        "name": "Spring sale",
        "list": "customers",
        "message": {"type": "text", "text": "Hello {{ name }}, 20% off in {{ city }}."},
        "pace": {"per_minute": 600, "delay_seconds": [0.2, 0.3]},
    }
    campaign = _ok(api.post("/api/v1/campaigns", json=body), 201)
    cid = campaign["id"]
    wait_for(
        lambda: (
            _ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["counts"].get("sent", 0)
            + _ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["counts"].get("delivered", 0)
            + _ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["counts"].get("read", 0)
            >= 3
        ),
        what="the first sends",
    )
    assert _ok(api.post(f"/api/v1/campaigns/{cid}/pause"))["state"] == "paused"
    wait_for(  # the sends already on their way end (answered and recorded)
        lambda: _ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["counts"].get("sending", 0) == 0,
        timeout=60,
        what="in-flight sends to end",
    )
    before = _accepted(sandbox_process)
    time.sleep(1.5)
    assert _accepted(sandbox_process) == before, (
        "the gateway got sends while the campaign was paused"
    )
    assert _ok(api.post(f"/api/v1/campaigns/{cid}/resume"))["state"] == "running"
    final = wait_for(
        lambda: (p := _ok(api.get(f"/api/v1/campaigns/{cid}/progress")))["done"] and p,
        timeout=120,
        what="the campaign to finish",
    )
    assert final["counts"].get("failed") == 1, final  # the number not on the app

    # retry the failed recipient: it is re-queued, sent again, and fails again
    retried = _ok(api.post(f"/api/v1/campaigns/{cid}/retry", json={}))
    assert json.dumps(retried)
    wait_for(
        lambda: (
            (p := _ok(api.get(f"/api/v1/campaigns/{cid}/progress")))["done"]
            and p["counts"].get("failed") == 1
        ),
        timeout=60,
        what="the retried recipient to settle",
    )
    noah = _ok(api.get(f"/api/v1/campaigns/{cid}/deliveries", params={"state": "failed"}))
    assert [d["target"] for d in noah["items"]] == [f"+{NOT_ON_APP}"], noah

    # the reports, as a user downloads and opens them
    text = api.get(f"/api/v1/campaigns/{cid}/report.csv").text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 44
    assert sum(r["state"] == "failed" for r in rows) == 1
    book = openpyxl.load_workbook(
        io.BytesIO(api.get(f"/api/v1/campaigns/{cid}/report.xlsx").content), read_only=True
    )
    assert len(book.sheetnames) >= 2
    as_json = _ok(api.get(f"/api/v1/campaigns/{cid}/report.json"))
    assert as_json
    summary = _ok(api.get(f"/api/v1/campaigns/{cid}/summary"))
    assert summary

    # a recipient answers STOP: the contact is opted out
    olivia = "12025550143"
    httpx.post(
        f"{sandbox_process.url}/sandbox/instances/{iid}/incoming",
        json={"from": olivia, "text": "STOP"},
        timeout=10,
    ).raise_for_status()
    wait_for(
        lambda: any(
            c.get("opted_out")
            for c in _ok(api.get("/api/v1/contacts", params={"q": olivia}))["items"]
        ),
        what="the STOP reply to opt Olivia out",
    )
