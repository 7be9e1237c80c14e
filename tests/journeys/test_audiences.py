"""Audiences as a user builds them (issue 19, part): contacts imported with tags and time
zones, a saved segment with where/tags/exclusions and its count preview, a campaign to it
sent through a ``gatecast sandbox`` process, and the report holding exactly the expected
recipients; bad input refused with a clear error and nothing stored. CLI and HTTP API.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import httpx

from tests.journeys.harness import (
    Server,
    Workspace,
    assert_problem,
    link_sender_over_api,
    table_value,
    wait_for,
)
from tests.journeys.harness import ok as _ok

PEOPLE = """phone,name,city,plan,tags,timezone
+14155550101,Ana,Berlin,gold,"vip, newsletter",Europe/Berlin
+14155550102,Ben,BERLÍN,silver,VIP,
+14155550103,Cé,berlin,bronze,vip,America/New_York
+14155550104,Dee,Zürich,gold,vip,Europe/Zurich
+14155550105,Eve,Berlin,gold,,Europe/Berlin
+14155550106,Fay,Berlin,Gold,"vip,complained",
+14155550107,Gus,Berlin,gold,vip,Mars/Base
+14155550108,Hal,berlín,GOLD,vip,Asia/Tokyo
+14155550109,Ida,Berlin,silver,vip,
"""
BLOCKED = "phone\n+14155550109\n"
#: Berlin (any case or accent), gold or silver, tagged vip, not complained, not blocked
EXPECTED = {"+14155550101", "+14155550102", "+14155550108"}

CAMPAIGN = """name = "Berlin VIP"

[audience]
{audience}

[message]
type = "text"
text = "Hallo {{{{ name }}}}"

[pace]
per_minute = 600
delay_seconds = [0, 0]
"""


def _write(ws: Workspace, name: str, text: str) -> Path:
    path = ws.path / name
    path.write_text(text, encoding="utf-8")
    return path


def _report_targets(text: str) -> dict[str, str]:
    rows = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))  # a BOM for Excel
    return {r["target"]: r["state"] for r in rows}


def test_cli_tags_segment_campaign_and_report(ws: Workspace) -> None:
    ws.link_sender()
    out = ws.run(
        "contacts", "import", str(_write(ws, "people.csv", PEOPLE)), "--list", "customers",
        "--tag", "Spring",
    ).output  # fmt: skip
    assert table_value(out, "imported (new)") == "8"
    assert table_value(out, "invalid (rejected)") == "1"
    assert "row 8" in out and "unknown timezone 'Mars/Base'" in out
    assert "tags: complained, newsletter, spring, vip" in out
    ws.run("contacts", "import", str(_write(ws, "blocked.csv", BLOCKED)), "--list", "blocked")
    ana = ws.run("contacts", "show", "+14155550101", "--json").json()
    assert ana["tags"] == ["newsletter", "spring", "vip"]
    assert ana["attributes"]["timezone"] == "Europe/Berlin"

    created = ws.run(
        "segment", "create", "berlin-vip", "--list", "customers", "--tag", "vip",
        "--tag", "spring", "--where", "city=berlin", "--where", "plan=Gold,SILVER",
        "--exclude-list", "blocked", "--exclude-tag", "complained",
    ).output  # fmt: skip
    assert "3 recipients; 0 opted out; 2 excluded" in created, created
    shown = ws.run("segment", "show", "berlin-vip", "--json").json()
    assert shown["count"]["recipients"] == 3
    assert [s["name"] for s in ws.run("segment", "list", "--json").json()] == ["berlin-vip"]

    file = _write(ws, "berlin.toml", CAMPAIGN.format(audience='segment = "berlin-vip"'))
    campaign = ws.run("campaign", "create", str(file), "--json").json()
    assert campaign["recipients"] == 3 and campaign["audience"]["excluded"] == 2
    cid = str(campaign["id"])
    ws.run("campaign", "run", cid, "--webhook", "--settle", "1", timeout=300)
    report = ws.path / "report.csv"
    ws.run("report", cid, "--output", str(report))
    targets = _report_targets(report.read_text(encoding="utf-8"))
    assert set(targets) == EXPECTED, targets
    assert all(state in ("sent", "delivered", "read") for state in targets.values()), targets
    # the segment can go; the campaign made from it keeps its audience
    ws.run("segment", "delete", "berlin-vip")
    assert ws.run("segment", "show", "berlin-vip", ok=False).code == 1


def test_cli_bad_audiences_are_refused_and_store_nothing(ws: Workspace) -> None:
    ws.run("contacts", "import", str(_write(ws, "people.csv", PEOPLE)), "--list", "customers")
    refused = ws.run("segment", "create", "x", "--where", "citty=Berlin", ok=False)
    assert refused.code == 1
    assert "no contact has an attribute 'citty'" in refused.output
    assert "city, plan, timezone" in refused.output  # the attribute names that exist
    assert (
        "no tag called 'gold-star'"
        in ws.run("segment", "create", "x", "--tag", "gold-star", ok=False).output
    )
    assert (
        "no list called 'nope'"
        in ws.run("segment", "create", "x", "--list", "nope", ok=False).output
    )
    assert (
        "empty audience"
        in ws.run("segment", "create", "x", "--exclude-tag", "vip", ok=False).output
    )
    nobody = ws.run("segment", "create", "x", "--where", "city=Paris", ok=False)
    assert "selects no contact" in nobody.output
    assert ws.run("segment", "list", "--json").json() == []

    bad_files = {
        "where = { city = { name = 'Berlin' } }": "audience.where.city",
        "lists = ['customers']\nwhere = { city = [] }": "audience.where.city",
        "where = { citty = 'Berlin' }": "no contact has an attribute 'citty'",
        "segment = 'missing'": "no saved segment 'missing'",
        "exclude_lists = ['customers']": "empty audience",
    }
    for audience, words in bad_files.items():
        file = _write(ws, "bad.toml", CAMPAIGN.format(audience=audience))
        res = ws.run("campaign", "create", str(file), ok=False)
        assert res.code == 1 and words in res.output, (audience, res.output)
    assert ws.run("campaign", "list", "--json").json() == []


def _import(api: httpx.Client, name: str, text: str, list_name: str, **data: str) -> Any:
    job = _ok(
        api.post(
            "/api/v1/imports",
            files={"file": (name, text.encode(), "text/csv")},
            data={"list_name": list_name, **data},
        ),
        202,
    )
    return wait_for(
        lambda: (j := _ok(api.get(f"/api/v1/imports/{job['id']}")))["status"] != "running" and j,
        what="the import",
    )


def test_api_tags_segment_campaign_and_report(ws: Workspace) -> None:
    server: Server = ws.serve()
    api = server.api()
    link_sender_over_api(api)
    done = _import(api, "people.csv", PEOPLE, "customers", tags="spring")
    assert (done["status"], done["imported"], done["invalid"]) == ("completed", 8, 1), done
    assert "Mars/Base" in done["rejects"][0]["reason"]
    _import(api, "blocked.csv", BLOCKED, "blocked")
    refused = assert_problem(
        api.post("/api/v1/imports", files={"file": ("p.csv", b"phone\n+14155550101\n")},
                 data={"list_name": "x", "tags": "a" * 101}),
        422, "invalid_request",
    )  # fmt: skip
    assert refused["errors"][0]["loc"] == ["body", "tags"]

    body = {
        "name": "berlin-vip",
        "lists": ["customers"],
        "tags": ["VIP", "spring"],
        "where": {"city": "BERLIN", "plan": ["gold", "silver"]},
        "exclude_lists": ["blocked"],
        "exclude_tags": ["complained"],
    }
    segment = _ok(api.post("/api/v1/segments", json=body), 201)
    assert segment["count"]["summary"] == "3 recipients; 0 opted out; 2 excluded"
    assert_problem(api.post("/api/v1/segments", json=body), 409, "segment_exists")
    unknown = assert_problem(
        api.post("/api/v1/segments", json={"name": "y", "where": {"citty": "x"}}),
        422, "invalid_request",
    )  # fmt: skip
    assert unknown["errors"][0]["loc"] == ["body", "where", "citty"]
    assert "city, plan, timezone" in unknown["errors"][0]["msg"]
    page = _ok(api.get("/api/v1/segments", params={"limit": 1}))
    assert (page["total"], [s["name"] for s in page["items"]]) == (1, ["berlin-vip"])
    assert _ok(api.get("/api/v1/segments/berlin-vip"))["count"]["recipients"] == 3

    bad = assert_problem(
        api.post("/api/v1/campaigns", json={
            "name": "x", "audience": {"tags": ["nope"]},
            "message": {"type": "text", "text": "Hi"},
        }),
        422, "campaign_setup",
    )  # fmt: skip
    assert "no tag called 'nope'" in bad["detail"]
    preview = _ok(
        api.post(
            "/api/v1/campaigns/preview",
            json={
                "name": "Berlin VIP",
                "audience": {"segment": "berlin-vip"},
                "message": {"type": "text", "text": "Hallo {{ name }}"},
            },
        )
    )
    assert preview["audience"]["recipients"] == 3 and preview["recipients_checked"] == 3
    campaign = _ok(
        api.post(
            "/api/v1/campaigns",
            json={
                "name": "Berlin VIP",
                "audience": {"segment": "berlin-vip"},
                "message": {"type": "text", "text": "Hallo {{ name }}"},
                "pace": {"per_minute": 600, "delay_seconds": [0, 0]},
            },
        ),
        201,
    )
    cid = campaign["id"]
    wait_for(
        lambda: _ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["done"],
        timeout=120,
        what="the campaign to finish",
    )
    targets = _report_targets(api.get(f"/api/v1/campaigns/{cid}/report.csv").text)
    assert set(targets) == EXPECTED, targets
    # a change of its definition: counted as saved; a bad one changes nothing; its
    # name must exist
    change = {k: v for k, v in body.items() if k != "name"} | {"where": {"city": "BERLIN"}}
    changed = _ok(api.put("/api/v1/segments/berlin-vip", json=change))
    assert (changed["name"], changed["where"]) == ("berlin-vip", {"city": ["BERLIN"]}), changed
    assert changed["count"]["recipients"] >= 3
    refused = assert_problem(
        api.put("/api/v1/segments/berlin-vip", json={"where": {"citty": "x"}}),
        422, "invalid_request",
    )  # fmt: skip
    assert refused["errors"][0]["loc"] == ["body", "where", "citty"]
    kept = _ok(api.get("/api/v1/segments/berlin-vip"))
    assert (kept["where"], kept["count"]) == (changed["where"], changed["count"])
    assert_problem(api.put("/api/v1/segments/nope", json=change), 404, "not_found")
    assert api.delete("/api/v1/segments/berlin-vip").status_code == 204
    assert_problem(api.get("/api/v1/segments/berlin-vip"), 404, "not_found")
