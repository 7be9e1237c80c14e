"""Workbooks are read in a child process within memory, time and output limits
(:mod:`campaigns.untrusted_files`): hostile files are refused with their reason, a
child over a limit is a refusal naming it, and what comes back is the table as read."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import openpyxl
import pytest

from campaigns.importer import ImportFailed, ImportOptions, preview_file
from campaigns.spreadsheets import (
    Extent,
    SpreadsheetError,
    TableLimits,
    read_workbook,
    sheet_extent,
)
from campaigns.untrusted_files import ParseLimits, parsed_apart, read_apart, size_text
from tests.hostile_files import far_cell_ods, hostile_files, xlsx, zip_bomb

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
MIB = 1024 * 1024


def test_every_hostile_file_is_refused_with_its_reason(tmp_path: Path) -> None:
    opts = ImportOptions("x", parse_limits=ParseLimits(memory_bytes=256 * MIB))
    for path, hostile in hostile_files(tmp_path).items():
        with pytest.raises(ImportFailed) as caught:
            preview_file(path, opts)
        assert hostile.reason in str(caught.value), (path.name, str(caught.value))
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("gatecast-parse-*/*.csv"))


def test_a_workbook_read_apart_is_the_table_read_here(tmp_path: Path) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "People"
    sheet.append(["Customer export"])  # a title above the header
    sheet.append(["name", "phone", "note"])
    sheet.append(["Ann, Jr.", "+4915112345678", 'she said "hi"\nthen left'])
    sheet.append([None, None, None])  # dropped, the numbering kept
    sheet.append(["Bo", 4915112345679, ""])
    sheet.append(["", "0049 151 1234 5680", "  padded  "])
    path = tmp_path / "people.xlsx"
    book.save(path)

    here = read_workbook(path, is_header=_has_phone)
    apart = read_apart(path, is_header=_has_phone)
    assert apart.sheet == here.sheet == "People"
    assert apart.header_row == here.header_row == 2
    assert apart.columns == here.columns == ["name", "phone", "note"]
    assert list(apart.frame.index) == list(here.frame.index) == [3, 5, 6]
    assert apart.frame.to_dict("records") == here.frame.to_dict("records")
    assert apart.frame.loc[3, "note"] == 'she said "hi"\nthen left'
    assert apart.frame.loc[5, "phone"] == "4915112345679"

    only_header = xlsx(
        tmp_path / "header.xlsx",
        '<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/'
        'spreadsheetml/2006/main"><sheetData><row r="1"><c r="A1" t="inlineStr"><is>'
        "<t>phone</t></is></c></row></sheetData></worksheet>",
    )
    empty = read_apart(only_header)
    assert empty.columns == ["phone"] and len(empty.frame) == 0


def _has_phone(cells: Sequence[str]) -> bool:
    return "phone" in cells


def test_what_is_read_apart(tmp_path: Path) -> None:
    for name in ("a.xlsx", "a.XLS", "a.ods", "a.xlsb", "a.xlsm"):
        assert parsed_apart(Path(name)), name
    for name in ("a.csv", "a.vcf", "a.txt", "a"):
        assert not parsed_apart(Path(name)), name
    preview = preview_file(SAMPLES / "contacts.xlsx", ImportOptions("x"))
    assert preview.phone_column == "Phone" and preview.sheet == "Contacts"
    assert size_text(1024 * MIB) == "1 GiB" and size_text(256 * MIB) == "256 MiB"


def test_a_child_over_its_memory_time_or_output_limit_is_a_refusal_naming_it(
    tmp_path: Path,
) -> None:
    ods = far_cell_ods(tmp_path / "far.ods")
    with pytest.raises(SpreadsheetError) as caught:
        read_apart(ods, parse=ParseLimits(memory_bytes=128 * MIB))
    assert str(caught.value) == (
        f"{ods}: reading it needs more memory than the limit of 128 MiB for one file"
    )
    with pytest.raises(SpreadsheetError) as caught:
        read_apart(ods, parse=ParseLimits(seconds=0.2))
    assert str(caught.value) == f"{ods}: reading it took longer than the limit of 0.2 seconds"

    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["phone", "note"])
    for i in range(60):
        sheet.append([f"+49151123456{i:02d}", os.urandom(15_000).hex()])
    big = tmp_path / "notes.xlsx"
    book.save(big)
    with pytest.raises(SpreadsheetError) as caught:
        read_apart(big, parse=ParseLimits(output_bytes=1 * MIB))
    assert str(caught.value) == (
        f"{big}, sheet 'Sheet': its cells hold more than the limit of 1 MiB of text for one file"
    )
    assert len(read_apart(big, limits=TableLimits(cell_chars=30_000)).frame) == 60


def test_a_zip_bomb_whose_directory_lies_is_refused_by_the_reader(tmp_path: Path) -> None:
    # the directory says 10 KB (its checks pass), the sheet expands to a gigabyte
    bomb = zip_bomb(tmp_path / "lying.xlsx", gigabytes=1, declared=10_000)
    with pytest.raises(SpreadsheetError) as caught:
        read_apart(bomb, parse=ParseLimits(memory_bytes=128 * MIB))
    assert str(caught.value).startswith(f"{bomb}: cannot read workbook"), caught.value
    assert "larger than its declared uncompressed size" in str(caught.value)


def test_the_scan_refuses_only_sheets_far_past_their_data(tmp_path: Path) -> None:
    head = "".join(
        f'<c r="{_letters(i)}1" t="inlineStr"><is><t>h{i}</t></is></c>' for i in range(30)
    )
    rows = "".join(f'<row r="{r}"><c r="B{r}"><v>{r}</v></c></row>' for r in range(2, 40_002))
    sheet = f'<worksheet><dimension ref="A1:XFD1048576"/><sheetData><row r="1">{head}</row>'
    sparse = xlsx(tmp_path / "sparse.xlsx", sheet + rows + "</sheetData></worksheet>")
    extent = sheet_extent(sparse)
    # one cell in 30 holds something: allowed (the dimension element is not believed)
    assert extent == Extent("Sheet1", columns=30, rows=40_001, cells=40_030)
    extent.check(sparse, TableLimits())
    with pytest.raises(SpreadsheetError, match="only 2 of those 1,200,030 cells hold anything"):
        Extent("Sheet1", columns=30, rows=40_001, cells=2).check(sparse, TableLimits())
    with pytest.raises(SpreadsheetError, match="its cells reach column AD, row 40001: over"):
        extent.check(sparse, TableLimits(rows=39_990))
    assert sheet_extent(SAMPLES / "contacts.csv") is None


def _letters(index: int) -> str:
    return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[index] if index < 26 else "A" + "ABCD"[index - 26]
