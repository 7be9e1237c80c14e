"""Contact imports as users do them (issue 18): an Excel file whose phones became
numbers, with a title row above the header; the Google Contacts and Outlook exports
people actually have; an unchanged re-import; then a campaign to the imported list.

Through the CLI (``gatecast contacts import``, ``contacts show``) and through the HTTP
API of ``gatecast serve`` (``POST /imports``, ``GET /lists/{id}/contacts``), on SQLite and
PostgreSQL; the stored numbers are read back as the user can and compared as E.164.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import httpx
import openpyxl
import pytest

from tests.journeys.harness import SAMPLES, Workspace, table_value, wait_for

# the Excel rows (imported with --region DE) and the number each must be stored as
EXCEL_ROWS: list[tuple[str, Any, str]] = [
    ("Anna Schmidt", 4915112345678, "+4915112345678"),  # number cell, gateway digits
    ("Ben Weber", "0151 12345679", "+4915112345679"),  # national, trunk prefix 0
    ("Clara Jones", "tel:+447911123456", "+447911123456"),
    ("Dani Roux", "https://wa.me/33612345670", "+33612345670"),
    ("Eva Keller", "0041 79 123 45 67", "+41791234567"),
    ("Finn Meier", 41791234568, "+41791234568"),  # a Swiss mobile as a number cell
    ("Gino Rossi", 4917012345670.0, "+4917012345670"),  # a float number cell
]
EXCEL_E164 = {name: e164 for name, _, e164 in EXCEL_ROWS}

# samples/google-contacts.csv with --region GB: the mobile number of each contact
GOOGLE_E164 = {
    "Maria Fischer": "+4915123456789",  # Mobile before Work
    "James Carter": "+12025550178",  # Phone 2 is the Mobile one
    "Sophie Martin": "+33612345678",  # two numbers in one cell: the first
    "Oliver Bennett": "+447911123460",  # Mobile (national) over Home
    "Priya Sharma": "+919876543210",
    "Tom Hughes": "+442079460999",  # only a Home number
    "Lucas Silva": "+5511987654321",  # Mobile over Main
    "Grace Lee": "+61491570156",  # no Name: Given Name + Family Name; "* Mobile"
}
# samples/outlook-contacts.csv with the default region (US)
OUTLOOK_E164 = {
    "Emily Johnson": "+12025550147",  # Mobile Phone over Business Phone
    "Michael Brown": "+14155550132",  # only a Home Phone
    "Hannah Müller": "+491701234567",
    "Daniel Smith": "+13125550190",  # only a Business Phone
    "Chloe Davis": "+447911123461",  # Mobile Phone over Home Phone
}


def _excel(path: Path) -> Path:
    """A workbook as exported by a CRM: a title row, then the header, then the contacts."""
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Export"
    sheet.append(["Customer export 2026-11"])
    sheet.append(["Name", "Mobile", "City"])
    for name, phone, _ in EXCEL_ROWS:
        sheet.append([name, phone, "Berlin"])
    sheet.append(["Nobody", "call me", "Berlin"])  # rejected: letters
    book.save(path)
    return path


def _import(ws: Workspace, path: Path, list_name: str, *extra: str) -> dict[str, Any]:
    """``gatecast contacts import FILE --list L ... --rejects r.csv --json``."""
    data: dict[str, Any] = ws.run(
        "contacts", "import", str(path), "--list", list_name, "--rejects", "r.csv", "--json", *extra
    ).json()
    return data


def _rejects(ws: Workspace) -> list[dict[str, str]]:
    with (ws.path / "r.csv").open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _shown(ws: Workspace, e164: str) -> dict[str, Any]:
    shown: dict[str, Any] = ws.run("contacts", "show", e164, "--json").json()
    return shown


def _check_stored(ws: Workspace, expected: dict[str, str], list_name: str) -> None:
    for name, e164 in expected.items():
        shown = _shown(ws, e164)
        assert (shown["phone"], shown["name"]) == (e164, name), shown
        assert list_name in shown["lists"], shown


def _campaign_numbers(ws: Workspace, list_name: str, expected: int) -> set[str]:
    """A fast text campaign to ``list_name``, run with webhooks; the report's numbers."""
    toml = ws.path / "hello.toml"
    toml.write_text(
        f'name = "Hello {list_name}"\nlist = "{list_name}"\n\n'
        '[message]\ntype = "text"\ntext = "Hello {{ name }}"\n\n'
        '[schedule]\ntimezone = "UTC"\n\n'
        "[pace]\nper_minute = 600\ndelay_seconds = [0, 0]\n",
        encoding="utf-8",
    )
    campaign_id = int(ws.run("campaign", "create", str(toml), "--json").json()["id"])
    ws.run("campaign", "run", str(campaign_id), "--webhook", "--settle", "2", timeout=300)
    shown = ws.run("campaign", "show", str(campaign_id), "--json").json()
    assert shown["state"] == "completed", shown
    report = ws.path / "r-campaign.csv"
    ws.run("report", str(campaign_id), "--output", str(report))
    with report.open(encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == expected, rows
    assert {r["state"] for r in rows} <= {"sent", "delivered", "read"}, rows
    return {r["target"] for r in rows}


def test_excel_with_number_cells_and_a_title_row_imports_and_is_sent(ws: Workspace) -> None:
    """CLI: numeric phone cells read as international digits, trunk prefix, tel:, wa.me
    and 00 all stored as the right E.164 numbers; the campaign goes to those numbers."""
    book = _excel(ws.path / "customers.xlsx")
    first = _import(ws, book, "de-customers", "--region", "DE")
    assert first["phone_column"] == "Mobile", first
    assert (first["rows_read"], first["imported"], first["invalid"]) == (8, 7, 1), first
    rejects = _rejects(ws)
    assert [(r["row_number"], r["reason"]) for r in rejects] == [("10", "contains letters")]
    _check_stored(ws, EXCEL_E164, "de-customers")

    again = _import(ws, book, "de-customers", "--region", "DE")
    assert (again["imported"], again["updated"], again["unchanged"]) == (0, 0, 7), again

    ws.link_sender()
    assert _campaign_numbers(ws, "de-customers", 7) == set(EXCEL_E164.values())


def test_google_and_outlook_exports_import_their_mobile_numbers(ws: Workspace) -> None:
    """CLI: both samples import every contact with a number, the mobile one first; names
    joined; an unchanged re-import updates nothing (the table says so too)."""
    google = _import(ws, SAMPLES / "google-contacts.csv", "google", "--region", "GB")
    assert (google["rows_read"], google["imported"], google["invalid"]) == (9, 8, 1), google
    assert [r["reason"] for r in _rejects(ws)] == ["empty"]
    _check_stored(ws, GOOGLE_E164, "google")
    sophie = _shown(ws, GOOGLE_E164["Sophie Martin"])
    assert sophie["attributes"].get("notes") == "Met at the Lyon fair", sophie

    outlook = _import(ws, SAMPLES / "outlook-contacts.csv", "outlook")
    assert (outlook["rows_read"], outlook["imported"], outlook["invalid"]) == (6, 5, 1), outlook
    _check_stored(ws, OUTLOOK_E164, "outlook")
    emily = _shown(ws, OUTLOOK_E164["Emily Johnson"])
    assert emily["attributes"].get("company") == "Northwind Traders", emily

    table = ws.run(
        "contacts", "import", str(SAMPLES / "google-contacts.csv"), "--list", "google",
        "--region", "GB",
    ).output  # fmt: skip
    assert table_value(table, "updated") == "0", table
    assert table_value(table, "unchanged") == "8", table
    again = _import(ws, SAMPLES / "outlook-contacts.csv", "outlook")
    assert (again["imported"], again["updated"], again["unchanged"]) == (0, 0, 5), again


@pytest.mark.postgres
def test_unchanged_reimport_updates_nothing_on_postgresql(ws: Workspace, pg_url: str) -> None:
    """CLI on PostgreSQL: the same file twice reports 0 updated; a changed row 1."""
    ws.settings["GATECAST_DATABASE_URL"] = pg_url
    ws.run("db", "upgrade")
    first = _import(ws, SAMPLES / "contacts.csv", "customers")
    assert (first["imported"], first["updated"]) == (44, 0), first
    again = _import(ws, SAMPLES / "contacts.csv", "customers")
    assert (again["imported"], again["updated"]) == (0, 0), again
    assert again["unchanged"] == 44, again
    changed = ws.path / "changed.csv"
    text = (SAMPLES / "contacts.csv").read_text(encoding="utf-8")
    changed.write_text(text.replace("Olivia Johnson", "Olivia Johnson-Reed"), encoding="utf-8")
    third = _import(ws, changed, "customers")
    assert (third["updated"], third["unchanged"]) == (1, 43), third
    assert _shown(ws, "+12025550143")["name"] == "Olivia Johnson-Reed"
    google = _import(ws, SAMPLES / "google-contacts.csv", "google", "--region", "GB")
    # three of its numbers are people of contacts.csv already, under other names
    assert (google["imported"], google["updated"], google["invalid"]) == (5, 3, 1), google
    _check_stored(ws, GOOGLE_E164, "google")


def _upload(api: httpx.Client, path: Path, list_name: str, region: str) -> dict[str, Any]:
    """``POST /imports`` and poll the job to its end."""
    with path.open("rb") as fh:
        started = api.post(
            "/api/v1/imports",
            files={"file": (path.name, fh)},
            data={"list_name": list_name, "region": region},
        )
    assert started.status_code == 202, started.text
    job_id = started.json()["id"]

    def finished() -> dict[str, Any] | None:
        job: dict[str, Any] = api.get(f"/api/v1/imports/{job_id}").json()
        return job if job["status"] != "running" else None

    job: dict[str, Any] = wait_for(finished, timeout=60, what=f"import {job_id}")
    assert job["status"] == "completed", job
    return job


def _list_phones(api: httpx.Client, list_id: int) -> dict[str, str]:
    page = api.get(f"/api/v1/lists/{list_id}/contacts", params={"limit": 200}).json()
    return {c["name"]: c["phone"] for c in page["items"]}


def test_uploads_through_the_api_store_e164_numbers(ws: Workspace) -> None:
    """HTTP API: the Excel file and both samples uploaded, read back from the list; an
    unchanged upload reports 0 updated."""
    book = _excel(ws.path / "customers.xlsx")
    server = ws.serve()
    with server.api() as api:
        job = _upload(api, book, "de-customers", "DE")
        assert (job["rows_read"], job["imported"], job["invalid"]) == (8, 7, 1), job
        assert job["phone_column"] == "Mobile", job
        assert [r["row_number"] for r in job["rejects"]] == [10], job
        assert _list_phones(api, job["list_id"]) == EXCEL_E164

        again = _upload(api, book, "de-customers", "DE")
        assert (again["imported"], again["updated"], again["unchanged"]) == (0, 0, 7), again

        google = _upload(api, SAMPLES / "google-contacts.csv", "google", "GB")
        assert (google["imported"], google["invalid"]) == (8, 1), google
        assert _list_phones(api, google["list_id"]) == GOOGLE_E164
        outlook = _upload(api, SAMPLES / "outlook-contacts.csv", "outlook", "US")
        assert _list_phones(api, outlook["list_id"]) == OUTLOOK_E164
        again = _upload(api, SAMPLES / "outlook-contacts.csv", "outlook", "US")
        assert (again["updated"], again["unchanged"]) == (0, 5), again

        preview = api.post(
            "/api/v1/imports/preview",
            files={"file": (book.name, book.read_bytes())},
            data={"region": "DE"},
        ).json()
        assert preview["phone_column"] == "Mobile", preview
        assert [p["e164"] for p in preview["phones"]] == [e for _, _, e in EXCEL_ROWS][:5]


def test_cli_maps_columns_to_attributes_and_reads_na_as_empty(ws: Workspace) -> None:
    """``--attribute City=town --attribute Notes=``: the city stored as ``town``, the notes
    left out, an ``NA`` name stored empty; the rejected row in ``--rejects``."""
    path = ws.path / "uk.csv"
    path.write_text(
        "Name,Phone,City,Notes\nOlga Brown,07911 123456,Leeds,x\nNA,07911 123457,York,-\n"
        "Lee Park,call me,Hull,y\n",
        encoding="utf-8",
    )
    extra = ("--region", "GB", "--attribute", "City=town", "--attribute", "Notes=")
    report = _import(ws, path, "uk", *extra)
    assert (report["imported"], report["invalid"]) == (2, 1), report
    assert report["attribute_keys"] == {"City": "town"}, report
    olga, nameless = _shown(ws, "+447911123456"), _shown(ws, "+447911123457")
    assert (olga["name"], olga["attributes"]) == ("Olga Brown", {"town": "Leeds"}), olga
    assert (nameless["name"], nameless["attributes"]) == ("", {"town": "York"}), nameless
    rows = _rejects(ws)
    assert [(r["row_number"], r["Name"], r["reason"]) for r in rows] == [
        ("4", "Lee Park", "contains letters")
    ]
    bad = ws.run("contacts", "import", str(path), "--list", "uk", "--attribute", "City", ok=False)
    assert bad.code == 1 and "COLUMN=NAME" in bad.output, bad
