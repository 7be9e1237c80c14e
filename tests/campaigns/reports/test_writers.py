"""Reports: CSV/XLSX/JSON per recipient, summary, formula neutralisation, streaming."""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from pathlib import Path

import pytest
from openpyxl import load_workbook
from sqlalchemy import Engine, select, update

from campaigns import lifecycle, reports, service
from campaigns.delivery_rows import materialise
from campaigns.reports import columns, writers
from storage import reports as report_store
from storage import tables
from tests.campaigns.campaign_fixtures import NOW, make_list, people, phone, spec

deliveries = tables.deliveries


def _campaign(engine: Engine) -> int:
    crowd = people(6)
    crowd[0]["name"] = '=HYPERLINK("http://evil")'
    crowd[1]["name"] = "@cmd"
    crowd[5]["opted_out"] = True
    make_list(engine, "customers", crowd)
    cid = service.create_campaign(engine, spec(name="+promo"), now=NOW).id
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        materialise(conn, cid, now=NOW, instances=["A"])
        t = NOW + timedelta(seconds=10)

        def set_(i: int, **values: object) -> None:
            conn.execute(update(deliveries).where(deliveries.c.target == phone(i)).values(**values))

        set_(
            0,
            state="read",
            message_id="m0",
            sent_at=NOW,
            delivered_at=NOW + timedelta(seconds=4),
            read_at=t,
            attempts=1,
            reply_text="-1 thanks",
            replied_at=t,
        )
        set_(
            1,
            state="delivered",
            message_id="m1",
            sent_at=NOW,
            delivered_at=NOW + timedelta(seconds=6),
            attempts=1,
        )
        set_(
            2,
            state="delivered",
            message_id="m2",
            sent_at=NOW,
            delivered_at=NOW + timedelta(seconds=20),
            attempts=2,
        )
        set_(3, state="failed", attempts=4, error="\tbad", failed_at=t)
        set_(4, state="sent", message_id="m4", sent_at=NOW, attempts=1)
    return cid


def test_summary(engine: Engine) -> None:
    cid = _campaign(engine)
    s = reports.report_summary(engine, cid)
    assert s.total == 6 and s.name == "+promo"
    assert (s.sent, s.delivered, s.read, s.failed, s.replied, s.opted_out) == (4, 3, 1, 1, 1, 1)
    assert s.counts["skipped"] == 1 and s.counts["delivered"] == 2
    assert s.delivery_rate == 0.75 and s.read_rate == 0.25
    assert s.median_seconds_to_delivery == 6.0
    assert s.median_seconds_to_read == 10.0  # one read row, read 10 s after its send


def test_median_as_timedelta_gives_it(engine: Engine) -> None:
    """The database's microseconds give the median that Python's datetimes give: odd
    fractions, a delivery before its send (0), a send in 1900."""
    import statistics

    from tests.campaigns.reports.test_csv import _campaign as tricky_campaign

    cid = tricky_campaign(engine)
    d = tables.deliveries
    with engine.begin() as conn:
        ids = list(conn.execute(select(d.c.id).where(d.c.campaign_id == cid)).scalars())
        for i, row_id in enumerate(ids):
            sent = NOW + timedelta(microseconds=i * 98_765 % 1_000_000)
            if i == 1:
                sent = NOW.replace(year=1900, microsecond=999_999)  # .999999: not rounded up
            delivered = NOW + timedelta(seconds=i % 7 - 2, microseconds=i * 123_457 % 1_000_000)
            conn.execute(
                update(d).where(d.c.id == row_id).values(sent_at=sent, delivered_at=delivered)
            )
        pairs = conn.execute(
            select(d.c.sent_at, d.c.delivered_at).where(
                d.c.campaign_id == cid, d.c.sent_at.is_not(None), d.c.delivered_at.is_not(None)
            )
        ).all()
    seconds = [max(0.0, (b - a).total_seconds()) for a, b in pairs]
    assert min(seconds) == 0.0 and max(seconds) > 3e9 and len(seconds) > 10
    got = reports.report_summary(engine, cid).median_seconds_to_delivery
    assert got == round(statistics.median(seconds), 3)
    with engine.connect() as conn:
        micros = report_store.micros_since_sent(conn, cid, to="delivered")
    assert sorted(m / 1e6 for m in micros) == sorted(seconds)


def test_csv(engine: Engine, tmp_path: Path) -> None:
    cid = _campaign(engine)
    out = reports.write_report(engine, cid, tmp_path / "r.csv")
    with out.open(encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(reports.COLUMNS)
    assert len(rows) == 6
    first = rows[0]
    assert first["target"] == phone(0)  # an E.164 target stays as it is
    assert first["name"] == '\'=HYPERLINK("http://evil")'
    assert first["reply"] == "'-1 thanks"
    assert first["sent_at"] == "2026-11-21T12:00:00Z"
    assert first["delivered_at"] == "2026-11-21T12:00:04Z"
    assert (first["state"], first["sender"], first["message_id"]) == ("read", "A", "m0")
    assert rows[1]["name"] == "'@cmd"
    assert rows[3]["error"] == "'\tbad"
    assert rows[5]["opted_out"] == "yes" and rows[5]["state"] == "skipped"
    assert not list(tmp_path.glob(".*tmp"))


def test_json(engine: Engine, tmp_path: Path) -> None:
    cid = _campaign(engine)
    doc = json.loads(reports.write_report(engine, cid, tmp_path / "r.json").read_text())
    assert doc["campaign"]["id"] == cid
    assert doc["summary"]["delivery_rate"] == 0.75
    assert doc["summary"]["median_seconds_to_read"] == 10.0
    assert doc["deliveries"][0]["delivered_at"] == "2026-11-21T12:00:04Z"  # ISO 8601, UTC
    assert len(doc["deliveries"]) == 6
    assert doc["deliveries"][0]["opted_out"] is False
    assert doc["deliveries"][0]["attempts"] == 1


def test_xlsx(engine: Engine, tmp_path: Path) -> None:
    cid = _campaign(engine)
    out = reports.write_report(engine, cid, tmp_path / "sub" / "r.xlsx")
    wb = load_workbook(out)
    assert wb.sheetnames == ["Summary", "Deliveries"]
    summary = {r[0]: r[1] for r in wb["Summary"].iter_rows(values_only=True) if r and r[0]}
    assert summary["Campaign"] == "'+promo"
    assert summary["Sent"] == 4 and summary["Delivered"] == 3 and summary["Read"] == 1
    assert summary["Failed"] == 1
    assert summary["Delivery rate (of sent)"] == 0.75
    assert summary["Median seconds to read"] == 10.0 and summary["Times in"] == "UTC"
    cells = {r[0].value: r[1] for r in wb["Summary"].iter_rows() if len(r) > 1 and r[0].value}
    for label in ("Delivery rate (of sent)", "Read rate (of sent)"):
        assert cells[label].number_format == "0.0%"  # a percentage, not a plain number
    assert len(wb["Summary"]._charts) == 1  # type: ignore[attr-defined]  # private, not in types-openpyxl
    sheet = wb["Deliveries"]
    data = list(sheet.iter_rows(values_only=True))
    assert data[0] == reports.XLSX_COLUMNS
    assert "sent_at (UTC)" in data[0] and "target" in data[0]
    assert data[1][0] == phone(0) and isinstance(data[1][0], str)
    assert data[1][1] == '\'=HYPERLINK("http://evil")'
    # times are Excel dates in UTC (naive datetimes to openpyxl), no time an empty cell
    sent = sheet.cell(row=2, column=data[0].index("sent_at (UTC)") + 1)
    assert sent.value == NOW.replace(tzinfo=None) and sent.number_format == columns.XLSX_DATE_FORMAT
    delivered = sheet.cell(row=2, column=data[0].index("delivered_at (UTC)") + 1)
    assert delivered.value == (NOW + timedelta(seconds=4)).replace(tzinfo=None)
    assert sheet.cell(row=2, column=data[0].index("failed_at (UTC)") + 1).value is None


def test_errors(engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(reports.ReportError, match=r"unsupported report format '\.pdf'"):
        reports.write_report(engine, 1, out / "r.pdf")
    with pytest.raises(reports.ReportError, match="campaign 99 does not exist"):
        reports.write_report(engine, 99, out / "r.csv")
    assert list(out.iterdir()) == []


def test_neutralise() -> None:
    assert reports.neutralise("+14155550100", phone_column=True) == "+14155550100"
    assert reports.neutralise("+14155550100") == "'+14155550100"
    assert reports.neutralise("+1 (415) =x", phone_column=True) == "'+1 (415) =x"
    assert reports.neutralise("\rx") == "'\rx"
    assert reports.neutralise("ok = fine") == "ok = fine"


def test_streams_many_rows(
    sqlite_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report_store, "YIELD_PER", 7)
    make_list(sqlite_engine, "customers", people(50))
    cid = service.create_campaign(sqlite_engine, spec(), now=NOW).id
    with sqlite_engine.begin() as conn:
        materialise(conn, cid, now=NOW, instances=["A"])
    out = reports.write_report(sqlite_engine, cid, tmp_path / "r.csv")
    assert len(out.read_text(encoding="utf-8-sig").splitlines()) == 51


def test_xlsx_row_limit(
    sqlite_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writers, "XLSX_MAX_ROWS", 6)
    cid = _campaign(sqlite_engine)
    with pytest.raises(reports.ReportError, match="do not fit in one Excel sheet"):
        reports.write_report(sqlite_engine, cid, tmp_path / "r.xlsx")
    assert not (tmp_path / "r.xlsx").exists()
