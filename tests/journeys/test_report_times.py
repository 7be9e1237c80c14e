"""Report times a user can trust: an unpaced campaign, late, duplicated and out-of-order
statuses, then the CSV, XLSX and JSON reports read as the user reads them.

Through the CLI only: ``instance create`` (the sandbox links it), ``contacts import`` of a
CSV written here, a campaign without pacing run with ``--webhook``, then ``report``.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from datetime import datetime
from pathlib import Path

import openpyxl
import pytest

from tests.journeys.harness import Workspace, table_value

RECIPIENTS = 150
TIME_COLUMNS = ("queued_at", "sent_at", "delivered_at", "read_at", "failed_at", "replied_at")


#: a sandbox whose statuses come late, twice (a fifth of them) and out of order
SANDBOX_ARGS = ("--status-delays", "0.05,0.3,0.6", "--reorder", "--duplicate-rate", "0.2")


def _when(text: str) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _run_unpaced_campaign(ws: Workspace) -> int:
    created = ws.run("instance", "create")
    found = re.search(r"\b([0-9A-F]{10,})\b", created.output)
    assert found, created.output
    qr = ws.run("instance", "qr", found.group(1)).output  # linked: gatecast hears it
    assert "linked" in qr or (ws.path / f"{found.group(1)}.png").exists(), qr
    people = ws.path / "people.csv"
    with people.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["Name", "Phone"])
        for n in range(RECIPIENTS):
            writer.writerow([f"Person {n}", f"+1 202 555 {100 + n:04d}"])
    imported = ws.run("contacts", "import", str(people), "--list", "times").output
    assert table_value(imported, "imported (new)") == str(RECIPIENTS), imported
    campaign = ws.path / "times.toml"
    campaign.write_text(
        'name = "Times"\nlist = "times"\n\n[message]\ntype = "text"\n'
        'text = "Hello {{ name }}"\n\n[schedule]\ntimezone = "UTC"\n\n'
        "[pace]\nper_minute = 100000\ndelay_seconds = [0, 0]\n",
        encoding="utf-8",
    )
    campaign_id = int(ws.run("campaign", "create", str(campaign), "--json").json()["id"])
    ws.run("campaign", "run", str(campaign_id), "--webhook", "--settle", "3", timeout=300)
    shown = ws.run("campaign", "show", str(campaign_id), "--json").json()
    assert shown["state"] == "completed", shown
    return campaign_id


@pytest.mark.parametrize(
    "database", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_report_times_are_per_send_ordered_and_typed(
    ws: Workspace, database: str, request: pytest.FixtureRequest
) -> None:
    """On SQLite (the webhook applied on the event loop, the reports' SQLite fast paths)
    and on PostgreSQL (applied in a worker thread, the reports rendered by the server)."""
    if database == "postgresql":
        ws.settings["GATECAST_DATABASE_URL"] = str(request.getfixturevalue("pg_url"))
        ws.run("db", "upgrade")  # as the CLI asks on a new PostgreSQL database
    campaign_id = _run_unpaced_campaign(ws)

    # CSV: one sent_at per send, and every status at or after the one before it
    csv_path = ws.path / "r.csv"
    summary = ws.run("report", str(campaign_id), "--output", str(csv_path), "--json").json()
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8-sig")))
    assert len(rows) == RECIPIENTS
    sent = [r["sent_at"] for r in rows if r["sent_at"]]
    assert len(sent) >= RECIPIENTS * 0.95, rows[:3]
    assert len(set(sent)) >= len(sent) * 0.8, f"{len(set(sent))} distinct of {len(sent)}"
    delivered = 0
    for r in rows:
        for col in TIME_COLUMNS:  # ISO 8601 with an offset (Z)
            assert not r[col] or r[col].endswith("Z"), (col, r[col])
        s, d, rd = _when(r["sent_at"]), _when(r["delivered_at"]), _when(r["read_at"])
        if d is not None:
            delivered += 1
            assert s is not None and s <= d, (r["target"], r["sent_at"], r["delivered_at"])
        if rd is not None:
            assert d is not None and d <= rd, (r["target"], r["delivered_at"], r["read_at"])
    assert delivered >= RECIPIENTS * 0.9

    # the summary's medians come from those times
    figures = summary["summary"]
    assert figures["median_seconds_to_delivery"] > 0, figures
    assert figures["median_seconds_to_read"] > 0, figures
    to_delivery = [
        (_when(r["delivered_at"]) - _when(r["sent_at"])).total_seconds()  # type: ignore[operator]
        for r in rows
        if r["delivered_at"]
    ]
    assert figures["median_seconds_to_delivery"] == pytest.approx(
        statistics.median(to_delivery), abs=0.002
    )

    # JSON: the same times as the CSV, ISO 8601 with an offset
    json_path = ws.path / "r.json"
    ws.run("report", str(campaign_id), "--output", str(json_path))
    doc = json.loads(json_path.read_text(encoding="utf-8"))
    assert [d["sent_at"] for d in doc["deliveries"]] == [r["sent_at"] for r in rows]
    assert doc["summary"]["median_seconds_to_read"] == figures["median_seconds_to_read"]

    # XLSX: times are Excel dates (datetimes to openpyxl), rates are percentages
    xlsx_path = ws.path / "r.xlsx"
    ws.run("report", str(campaign_id), "--output", str(xlsx_path))
    book = openpyxl.load_workbook(xlsx_path)
    sheet = book["Deliveries"]
    header = [c.value for c in sheet[1]]
    sent_col = next(i for i, h in enumerate(header) if str(h).startswith("sent_at"))
    assert "UTC" in str(header[sent_col]), header
    typed = 0
    for xrow, crow in zip(sheet.iter_rows(min_row=2), rows, strict=True):
        cell = xrow[sent_col]
        if crow["sent_at"]:
            assert isinstance(cell.value, datetime), (cell.value, cell.data_type)
            assert "yy" in cell.number_format and "ss" in cell.number_format, cell.number_format
            want = _when(crow["sent_at"])
            assert want is not None
            gap = abs((cell.value - want.replace(tzinfo=None)).total_seconds())
            assert gap < 0.001, (cell.value, crow["sent_at"])
            typed += 1
    assert typed == len(sent)
    labels = {str(r[0].value): r[1] for r in book["Summary"].iter_rows(min_row=1) if len(r) > 1}
    for label in ("Delivery rate (of sent)", "Read rate (of sent)"):
        cell = labels[label]
        assert isinstance(cell.value, int | float) and 0 < cell.value <= 1, (label, cell.value)
        assert cell.number_format == "0.0%", (label, cell.number_format)
    assert Path(xlsx_path).stat().st_size > 0
