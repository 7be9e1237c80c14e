"""A phone's contacts export (vCard) imported, and a file of numbers opted out (issue 19):
through the CLI (``contacts import x.vcf --list``, ``contacts import FILE --opt-out``) and
the HTTP API (``POST /imports`` with a ``.vcf``, with ``opt_out``); a campaign to the
imported list sent through a ``gatecast sandbox`` process; the report shows the cards'
names, and the opted-out number skipped as opted out.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import httpx

from tests.journeys.harness import (
    SAMPLES,
    Workspace,
    assert_problem,
    link_sender_over_api,
    table_value,
    wait_for,
)

#: samples/contacts.vcf: each card's name and the number chosen for it (card 6 has none)
CARDS = {
    "Jürgen Müller": "+447911123456",
    "Ngozi Okafor": "+12025550147",
    "Björn Åström, Sales Director Northern Europe": "+46701234567",
    "Ana Silva": "+5511912345678",
    "Priya Raman": "+919876543210",
    "Chen Wei": "+8613800138000",
    "Fatima Zahra": "+212661234567",
}
#: the opt-out file: Ana's number in another format, an unknown number, a bad cell
OPT_OUT_FILE = "Number\n+55 (11) 91234-5678\n+14155550177\ncall me\n"

CAMPAIGN = """name = "Hello phone"
list = "phone"

[message]
type = "text"
text = "Hello {{ name }}"

[pace]
per_minute = 600
delay_seconds = [0, 0]
"""


def _report(text: str) -> dict[str, dict[str, str]]:
    return {r["target"]: r for r in csv.DictReader(io.StringIO(text.lstrip("\ufeff")))}


def _check_report(rows: dict[str, dict[str, str]]) -> None:
    assert set(rows) == set(CARDS.values()), rows
    assert {r["name"] for r in rows.values()} == set(CARDS), rows
    ana = rows[CARDS["Ana Silva"]]
    assert (ana["state"], ana["error"], ana["opted_out"]) == ("skipped", "opted out", "yes"), ana
    others = [r["state"] for t, r in rows.items() if t != CARDS["Ana Silva"]]
    assert set(others) <= {"sent", "delivered", "read"}, rows


def test_cli_vcard_import_opt_out_file_and_campaign(ws: Workspace) -> None:
    ws.link_sender()
    out = ws.run("contacts", "import", str(SAMPLES / "contacts.vcf"), "--list", "phone").output
    assert table_value(out, "cards read") == "8"
    assert table_value(out, "imported (new)") == "7"
    assert table_value(out, "invalid (rejected)") == "1"
    assert "card 6 (No Number Person) phone: empty" in out, out
    assert "organisation -> {{ organisation }}" in out
    ana = ws.run("contacts", "show", CARDS["Ana Silva"], "--json").json()
    assert (ana["name"], ana["attributes"]) == (
        "Ana Silva",
        {"organisation": "Padaria Silva, Vendas"},
    )

    stop = ws.path / "stop.csv"
    stop.write_text(OPT_OUT_FILE, encoding="utf-8")
    refused = ws.run("contacts", "import", str(stop), ok=False)
    assert refused.code != 0 and "--opt-out" in refused.output
    opted = ws.run("contacts", "import", str(stop), "--opt-out", "--json").json()
    assert (opted["imported"], opted["updated"], opted["invalid"]) == (1, 1, 1), opted
    assert opted["list_id"] is None
    assert ws.run("contacts", "show", "+14155550177", "--json").json()["opted_out"] is True
    assert ws.run("contacts", "show", CARDS["Ana Silva"], "--json").json()["opted_out"] is True

    (ws.path / "hello.toml").write_text(CAMPAIGN, encoding="utf-8")
    cid = str(ws.run("campaign", "create", "hello.toml", "--json").json()["id"])
    ws.run("campaign", "run", cid, "--webhook", "--settle", "1", timeout=300)
    ws.run("report", cid, "--output", "report.csv")
    _check_report(_report((ws.path / "report.csv").read_text(encoding="utf-8")))


def _upload(api: httpx.Client, path: Path, **data: Any) -> dict[str, Any]:
    with path.open("rb") as fh:
        started = api.post("/api/v1/imports", files={"file": (path.name, fh)}, data=data)
    assert started.status_code == 202, started.text
    job_id = started.json()["id"]
    job: dict[str, Any] = wait_for(
        lambda: (j := api.get(f"/api/v1/imports/{job_id}").json())["status"] != "running" and j,
        what=f"import {job_id}",
    )
    assert job["status"] == "completed", job
    return job


def test_api_vcard_upload_opt_out_upload_and_campaign(ws: Workspace) -> None:
    server = ws.serve()
    api = server.api()
    link_sender_over_api(api)
    preview = api.post(
        "/api/v1/imports/preview",
        files={"file": ("contacts.vcf", (SAMPLES / "contacts.vcf").read_bytes())},
    ).json()
    assert (preview["phone_column"], preview["name_column"]) == ("phone", "name"), preview
    job = _upload(api, SAMPLES / "contacts.vcf", list_name="phone")
    assert (job["rows_read"], job["imported"], job["invalid"]) == (8, 7, 1), job
    assert [(r["row_number"], r["raw"]["name"]) for r in job["rejects"]] == [
        (6, "No Number Person")
    ]
    broken = assert_problem(
        api.post("/api/v1/imports", files={"file": ("x.vcf", b"hello")}, data={"list_name": "x"}),
        422,
        "invalid_request",
    )
    assert "x.vcf: no contact cards" in broken["errors"][0]["msg"], broken
    both = assert_problem(
        api.post(
            "/api/v1/imports",
            files={"file": ("stop.csv", OPT_OUT_FILE.encode())},
            data={"list_name": "phone", "opt_out": "true"},
        ),
        422,
        "invalid_request",
    )
    assert both["errors"][0]["loc"] == ["body", "list_name"], both

    stop = ws.path / "stop.csv"
    stop.write_text(OPT_OUT_FILE, encoding="utf-8")
    opted = _upload(api, stop, opt_out="true")
    assert (opted["imported"], opted["updated"], opted["invalid"], opted["list_id"]) == (
        1,
        1,
        1,
        None,
    ), opted

    campaign = api.post(
        "/api/v1/campaigns",
        json={
            "name": "Hello phone",
            "list": "phone",
            "message": {"type": "text", "text": "Hello {{ name }}"},
            "pace": {"per_minute": 600, "delay_seconds": [0, 0]},
        },
    )
    assert campaign.status_code == 201, campaign.text
    cid = campaign.json()["id"]
    wait_for(
        lambda: api.get(f"/api/v1/campaigns/{cid}/progress").json()["done"],
        timeout=120,
        what="the campaign to finish",
    )
    _check_report(_report(api.get(f"/api/v1/campaigns/{cid}/report.csv").text))
