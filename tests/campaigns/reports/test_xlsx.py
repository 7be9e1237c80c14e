"""The streamed XLSX "Deliveries" sheet reads back, in openpyxl (normal and read-only)
and python-calamine, exactly as the sheet openpyxl itself wrote (the reference
``reference.write_xlsx_openpyxl``), on SQLite and PostgreSQL, for data built to trip it up; the
one difference: characters XML forbids are dropped where openpyxl refused the report."""

from __future__ import annotations

import io
import zipfile
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from openpyxl import load_workbook
from openpyxl.utils.exceptions import IllegalCharacterError
from sqlalchemy import Engine, update

from campaigns import reports, service
from campaigns.delivery_rows import materialise
from campaigns.reports import columns, summary, xlsx_sheet
from storage import reports as report_store
from storage import tables
from storage.reports import sqlite as sqlite_reports
from tests.campaigns.campaign_fixtures import NOW, make_list, people, spec
from tests.campaigns.reports import reference
from tests.campaigns.reports.test_csv import _campaign as tricky_campaign
from tests.campaigns.reports.test_csv import _other_rows

deliveries = tables.deliveries

#: more text around XML's rules: markup, white-space edges, forbidden characters
XML_TRICKY = [
    "&<>\"'",
    "<b>bold</b> &amp; co",
    "  both sides  ",
    " leading",
    "trailing ",
    "\nnewline first",
    "newline last\n",
    "crlf\r\ninside",
    "ends with CR\r",
    "漢字とかな 🎉👍🏽",
    "bell\a, esc\x1b",
    "\x01",
    "\x0b starts with a forbidden one",
    "]]> <![CDATA[",
    "_x000D_ literal",
    "\ufffe\uffff nonchars",
]


def _rows_openpyxl(path: Path, *, read_only: bool) -> list[tuple[Any, ...]]:
    wb = load_workbook(path, read_only=read_only)
    rows = [tuple(r) for r in wb["Deliveries"].iter_rows(values_only=True)]
    wb.close()
    width = len(reports.COLUMNS)
    return [r + (None,) * (width - len(r)) for r in rows]  # read-only trims empty tails


def _rows_calamine(path: Path) -> list[list[Any]]:
    import python_calamine

    book = python_calamine.CalamineWorkbook.from_path(str(path))
    rows: list[list[Any]] = book.get_sheet_by_name("Deliveries").to_python()
    return rows


def _readings(path: Path) -> dict[str, list[Any]]:
    return {
        "openpyxl": _rows_openpyxl(path, read_only=False),
        "openpyxl read-only": _rows_openpyxl(path, read_only=True),
        "calamine": _rows_calamine(path),
    }


def _reference(engine: Engine, cid: int, target: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The openpyxl sheet of the campaign, its forbidden characters dropped first."""
    plain = columns.cells

    def cells(row: dict[str, Any]) -> list[Any]:
        return [xlsx_sheet.ILLEGAL.sub("", v) if isinstance(v, str) else v for v in plain(row)]

    with monkeypatch.context() as patch:
        patch.setattr(reference, "cells", cells)
        with engine.connect() as conn:
            figures = summary.read_summary(conn, cid)
            reference.write_xlsx_openpyxl(conn, cid, figures, target)


def _assert_same_cells(got: Path, expected: Path) -> None:
    for reader, rows in _readings(got).items():
        want = _readings(expected)[reader]
        assert len(rows) == len(want), reader
        for n, (a, b) in enumerate(zip(rows, want, strict=True)):
            assert list(a) == list(b), f"{reader}, row {n + 1}"


def _add_xml_tricky(engine: Engine, cid: int) -> None:
    with engine.begin() as conn:
        for i, text in enumerate(XML_TRICKY):
            _other_rows(conn, cid, 1, f"x{i}-{text}")
            conn.execute(
                update(deliveries)
                .where(deliveries.c.campaign_id == cid, deliveries.c.target == f"x{i}-{text}0")
                .values(reply_text=text, error=text[::-1], sender=text[:3], message_id=text)
            )


def test_xlsx_cells_as_openpyxl_wrote_them(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cid = tricky_campaign(engine)
    if engine.dialect.name == "sqlite":  # PostgreSQL text cannot hold NUL
        XML_TRICKY.append("NUL\x00inside")
    try:
        _add_xml_tricky(engine, cid)
    finally:
        if engine.dialect.name == "sqlite":
            XML_TRICKY.pop()
    out = reports.write_report(engine, cid, tmp_path / "r.xlsx")
    _reference(engine, cid, tmp_path / "ref.xlsx", monkeypatch)
    _assert_same_cells(out, tmp_path / "ref.xlsx")

    rows = _rows_openpyxl(out, read_only=False)
    assert rows[0] == reports.XLSX_COLUMNS
    sent = reports.XLSX_COLUMNS.index("sent_at (UTC)")
    assert any(isinstance(r[sent], datetime) for r in rows[1:])  # times: Excel dates
    assert all(r[sent] is None or isinstance(r[sent], datetime) for r in rows[1:])
    flat = [v for r in rows for v in r if isinstance(v, str)]
    assert "&<>\"'" in flat and "  both sides  " in flat and "漢字とかな 🎉👍🏽" in flat
    assert "'=1+1" in flat and "+14155550100" in flat and "'-12345678" in flat
    assert "crlf\r\ninside" in flat and "ends with CR\r" in flat  # CR survives (&#13;)
    assert "bell, esc" in flat and " starts with a forbidden one" in flat
    assert not any(xlsx_sheet.ILLEGAL.search(v) for v in flat)
    assert all(isinstance(r[4], int) for r in rows[1:])  # attempts: numbers


def test_forbidden_characters_do_not_fail_the_report(engine: Engine, tmp_path: Path) -> None:
    """What the streamed sheet fixes: openpyxl refuses a cell with a control character
    (so one reply text failed the whole report); the streamed sheet drops it."""
    from openpyxl import Workbook

    with pytest.raises(IllegalCharacterError):
        Workbook(write_only=False).create_sheet("S").append(["bell\a"])
    cid = tricky_campaign(engine)
    out = reports.write_report(engine, cid, tmp_path / "r.xlsx")
    values = {v for row in _rows_calamine(out) for v in row}
    assert "formfeed, verticaltab, bell, backspace, esc, del\x7f" in values


def test_xlsx_summary_chart_and_package(engine: Engine, tmp_path: Path) -> None:
    cid = tricky_campaign(engine)
    out = reports.write_report(engine, cid, tmp_path / "r.xlsx")
    wb = load_workbook(out)
    assert wb.sheetnames == ["Summary", "Deliveries"]
    summary = {r[0]: r[1] for r in wb["Summary"].iter_rows(values_only=True) if r and r[0]}
    assert summary["Campaign"] == "'=tricky"
    assert len(wb["Summary"]._charts) == 1  # type: ignore[attr-defined]  # private, not in types-openpyxl
    assert wb["Deliveries"].freeze_panes == "A2"
    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None
        assert "xl/charts/chart1.xml" in z.namelist()
        part = xlsx_sheet.sheet_part(z, "Deliveries")
        assert part == "xl/worksheets/sheet2.xml"
        assert z.getinfo(part).compress_type == zipfile.ZIP_DEFLATED


def test_xlsx_empty_campaign(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_list(engine, "customers", [])
    cid = service.create_campaign(engine, spec(), now=NOW).id
    out = reports.write_report(engine, cid, tmp_path / "empty.xlsx")
    _reference(engine, cid, tmp_path / "ref.xlsx", monkeypatch)
    _assert_same_cells(out, tmp_path / "ref.xlsx")
    assert _rows_calamine(out) == [list(reports.XLSX_COLUMNS)]


def test_xlsx_in_small_chunks(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many chunks through the fetching thread and the writing thread: same cells."""
    cid = tricky_campaign(engine)
    monkeypatch.setattr(report_store, "XLSX_CHUNK", 3)
    monkeypatch.setattr(sqlite_reports, "XLSX_WINDOW_IDS", 3)
    out = reports.write_report(engine, cid, tmp_path / "r.xlsx")
    _reference(engine, cid, tmp_path / "ref.xlsx", monkeypatch)
    _assert_same_cells(out, tmp_path / "ref.xlsx")


def test_xlsx_plain_windows_among_careful_ones(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain rows go through the blob of their window (SQLite: no row rendered in
    Python), a window with a forbidden character through the rows; same cells either
    way, in every reader, rows with and without ``r`` side by side."""
    make_list(engine, "customers", people(30))
    cid = service.create_campaign(engine, spec(), now=NOW).id
    with engine.begin() as conn:
        materialise(conn, cid, now=NOW, instances=["A"])
    _add_xml_tricky(engine, cid)  # at the end: their own windows
    monkeypatch.setattr(sqlite_reports, "XLSX_WINDOW_IDS", 8)
    rendered: list[int] = []
    render = xlsx_sheet.render_rows

    def counting(layout: xlsx_sheet.Layout, rows: Any, first: int) -> str:
        rendered.append(len(rows))
        return render(layout, rows, first)

    monkeypatch.setattr(xlsx_sheet, "render_rows", counting)
    out = reports.write_report(engine, cid, tmp_path / "r.xlsx")
    if engine.dialect.name == "sqlite":
        assert sum(rendered) - 1 < len(XML_TRICKY) + 8  # the header, the careful windows
    monkeypatch.setattr(xlsx_sheet, "render_rows", render)
    _reference(engine, cid, tmp_path / "ref.xlsx", monkeypatch)
    _assert_same_cells(out, tmp_path / "ref.xlsx")
    assert len(_rows_calamine(out)) == 1 + 30 + len(XML_TRICKY)


def test_xlsx_sparse_campaign_sqlite(
    sqlite_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows sparse in their id range: read through the campaign's index, sorted."""
    make_list(sqlite_engine, "customers", [])
    cid = service.create_campaign(sqlite_engine, spec(), now=NOW).id
    other = service.create_campaign(sqlite_engine, spec(name="other"), now=NOW).id
    with sqlite_engine.begin() as conn:
        for i in range(5):
            _other_rows(conn, cid, 1, f"=mine{i}")
            _other_rows(conn, other, 50, f"theirs{i}-")
    out = reports.write_report(sqlite_engine, cid, tmp_path / "r.xlsx")
    rows = _rows_calamine(out)
    assert [r[0] for r in rows[1:]] == [f"'=mine{i}0" for i in range(5)]
    _reference(sqlite_engine, cid, tmp_path / "ref.xlsx", monkeypatch)
    _assert_same_cells(out, tmp_path / "ref.xlsx")


class _Boom(RuntimeError):
    pass


def test_failed_xlsx_leaves_no_file(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure mid-sheet (here: rendering) leaves neither the report nor its temporary
    file, and stops both threads."""
    import threading

    cid = tricky_campaign(engine)
    monkeypatch.setattr(report_store, "XLSX_CHUNK", 2)
    monkeypatch.setattr(sqlite_reports, "XLSX_WINDOW_IDS", 2)
    calls = 0
    render = xlsx_sheet.render_rows

    def failing(layout: xlsx_sheet.Layout, rows: Any, first: int) -> str:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise _Boom("disk on fire")
        return render(layout, rows, first)

    monkeypatch.setattr(xlsx_sheet, "render_rows", failing)
    before = threading.active_count()
    with pytest.raises(_Boom):
        reports.write_report(engine, cid, tmp_path / "out" / "r.xlsx")
    assert list((tmp_path / "out").iterdir()) == []
    assert threading.active_count() == before


def test_failed_write_stops_the_renderer() -> None:
    """A write that fails (a full disk) raises in the caller, and the thread ends."""

    def write(data: bytes) -> None:
        raise OSError("no space left on device")

    pieces = (b"x" * 10 for _ in range(1000))
    with pytest.raises(OSError, match="no space"):
        xlsx_sheet._write_behind(pieces, write)


def test_clean() -> None:
    assert xlsx_sheet.clean("a&b<c>d\r\x00\x1f\ud800\uffff\t\n") == "a&amp;b&lt;c&gt;d&#13;\t\n"


def test_sheet_part_relative_target() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(
            "xl/workbook.xml",
            '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
            ' xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
            '<sheets><sheet name="Deliveries" sheetId="1" r:id="rId7"/></sheets></workbook>',
        )
        z.writestr(
            "xl/_rels/workbook.xml.rels",
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId7" Type="x" Target="worksheets/data.xml"/></Relationships>',
        )
    with zipfile.ZipFile(buf) as z:
        assert xlsx_sheet.sheet_part(z, "Deliveries") == "xl/worksheets/data.xml"
        with pytest.raises(KeyError):
            xlsx_sheet.sheet_part(z, "Nope")
