"""Reading spreadsheets as text: encodings, delimiters, Excel number cells, limits."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import openpyxl
import pandas as pd
import pytest

from campaigns.spreadsheets import (
    SpreadsheetError,
    TableLimits,
    cell_text,
    check_zip_budget,
    detect_encoding,
    header_index,
    read_table,
    sniff_delimiter,
)

ROWS = "name,phone,plan\nJosé,+44 7911 123456,NA\nZoë,007911123456,None\nNA,null,\n"


def _row(frame: pd.DataFrame, number: int) -> list[Any]:
    """The cells of one row (the index is unique, so ``loc`` gives a Series)."""
    row = frame.loc[number]
    assert isinstance(row, pd.Series)
    return row.tolist()


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [
        ("utf-8", "utf-8"),
        ("utf-8-sig", "utf-8-sig"),
        ("utf-16", "utf-16"),
        ("cp1252", "cp1252"),
    ],
)
def test_encodings_are_detected_and_cells_stay_text(
    tmp_path: Path, encoding: str, expected: str
) -> None:
    path = tmp_path / "c.csv"
    path.write_bytes(ROWS.encode(encoding))
    assert detect_encoding(path) == expected
    table = read_table(path)
    assert table.columns == ["name", "phone", "plan"]
    assert _row(table.frame, 2) == ["José", "+44 7911 123456", "NA"]
    assert _row(table.frame, 3) == ["Zoë", "007911123456", "None"]  # leading zeros kept
    assert _row(table.frame, 4) == ["NA", "null", ""]


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_delimiter_is_sniffed(tmp_path: Path, delimiter: str) -> None:
    path = tmp_path / "c.csv"
    lines = [
        "Name{d}Phone{d}City",
        "Ann{d}+1 202 555 0143{d}Paris, TX",
        "Bo{d}(415) 555-0178{d}Rome",
    ]
    text = "\n".join(line.format(d=delimiter) for line in lines) + "\n"
    if delimiter == ",":
        text = text.replace("Paris, TX", '"Paris, TX"')
    path.write_text(text, encoding="utf-8")
    table = read_table(path)
    assert table.delimiter == delimiter
    assert table.frame.loc[2, "City"] == "Paris, TX"
    assert table.frame.loc[3, "Phone"] == "(415) 555-0178"


def test_sniff_falls_back_to_the_header_counts() -> None:
    assert sniff_delimiter("a;b;c\n") == ";"
    assert sniff_delimiter("") == ","


def test_row_numbers_follow_the_spreadsheet_and_blank_rows_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("phone, Name \n1\n\n,\n2\n", encoding="utf-8")
    table = read_table(path)
    assert table.columns == ["phone", "Name"]  # headers stripped
    assert list(table.frame.index) == [2, 5]
    assert table.frame["phone"].tolist() == ["1", "2"]


def test_xlsx_number_cells_become_integer_text(tmp_path: Path) -> None:
    path = tmp_path / "c.xlsx"
    wb = openpyxl.Workbook()
    ws = wb.active
    assert ws is not None
    ws.title = "First"
    ws.append(["Name", "Phone", "Score"])
    ws.append(["Ann", 447911123456.0, 1.5])
    ws.append(["Bo", "+1 202 555 0143", None])
    ws.append([None, None, None])
    ws.append(["Cy", 2025550143, True])
    wb.create_sheet("Second").append(["phone"])
    wb.save(path)
    for engine in ("calamine", "openpyxl"):
        table = read_table(path, engine=engine)
        assert table.sheet == "First"
        assert _row(table.frame, 2) == ["Ann", "447911123456", "1.5"]
        assert _row(table.frame, 3) == ["Bo", "+1 202 555 0143", ""]
        assert list(table.frame.index) == [2, 3, 5]
        assert table.frame.loc[5, "Phone"] == "2025550143"
    assert read_table(path, sheet="Second").columns == ["phone"]
    assert read_table(path, sheet=1).sheet == "Second"
    with pytest.raises(SpreadsheetError, match=r"no sheet named 'Third'; sheets: First, Second"):
        read_table(path, sheet="Third")


def test_cell_text() -> None:
    assert cell_text(447911123456.0) == "447911123456"
    assert cell_text(4.47e11) == "447000000000"
    assert cell_text(0.5) == "0.5"
    assert cell_text(None) == ""
    assert cell_text(False) == "FALSE"


def test_size_limit_names_file_size_and_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_text("phone\n" + "1\n" * 100, encoding="utf-8")
    with pytest.raises(
        SpreadsheetError, match=r"big\.csv: file is 206 bytes, over the import limit of 100 bytes"
    ):
        read_table(path, max_bytes=100)


def test_zip_bomb_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "bomb.xlsx"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/worksheets/sheet1.xml", b"\0" * (20 * 1024 * 1024))
    with pytest.raises(SpreadsheetError, match=r"expands 1[0-9]{3} times.*zip bomb"):
        read_table(path)


def test_uncompressed_budget(tmp_path: Path) -> None:
    path = tmp_path / "c.xlsx"
    wb = openpyxl.Workbook()
    ws = wb.active
    assert ws is not None
    ws.append(["phone"])
    wb.save(path)
    with pytest.raises(
        SpreadsheetError, match=r"c\.xlsx: expands to [\d,]+ bytes, over the limit of 1,000 bytes"
    ):
        read_table(path, max_uncompressed=1000)
    assert check_zip_budget(path) > 1000


def test_broken_and_unsupported_files(tmp_path: Path) -> None:
    fake = tmp_path / "fake.xlsx"
    fake.write_text("not a zip")
    with pytest.raises(SpreadsheetError, match=r"fake.xlsx: not a valid .xlsx file"):
        read_table(fake)
    other = tmp_path / "c.pdf"
    other.write_text("x")
    with pytest.raises(SpreadsheetError, match=r"unsupported file type '.pdf'"):
        read_table(other)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(SpreadsheetError, match=r"empty.csv: the file is empty"):
        read_table(empty)
    with pytest.raises(SpreadsheetError, match=r"missing.csv: cannot read file"):
        read_table(tmp_path / "missing.csv")


def test_ragged_csv_row_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ragged.csv"
    path.write_text("a,b\n1,2\n3,4,5\n", encoding="utf-8")
    with pytest.raises(
        SpreadsheetError, match=r"ragged.csv: line 3 has 3 cells but the header row has 2"
    ):
        read_table(path)


def _write_ods(path: Path, rows: list[list[str]]) -> None:
    """A minimal OpenDocument spreadsheet (what LibreOffice writes, trimmed)."""
    cells = "".join(
        "<table:table-row>"
        + "".join(
            f'<table:table-cell office:value-type="string"><text:p>{v}</text:p></table:table-cell>'
            for v in row
        )
        + "</table:table-row>"
        for row in rows
    )
    content = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        ' xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"'
        ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">'
        '<office:body><office:spreadsheet><table:table table:name="People">'
        f"{cells}</table:table></office:spreadsheet></office:body></office:document-content>"
    )
    manifest = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"'
        ' manifest:version="1.2">'
        '<manifest:file-entry manifest:full-path="/"'
        ' manifest:media-type="application/vnd.oasis.opendocument.spreadsheet"/>'
        '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
        "</manifest:manifest>"
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
        archive.writestr("META-INF/manifest.xml", manifest)
        archive.writestr("content.xml", content)


def test_ods_is_read_as_text(tmp_path: Path) -> None:
    path = tmp_path / "people.ods"
    _write_ods(path, [["Nome", "Celular"], ["Ana", "+55 11 91234-5678"], ["NA", "007"]])
    table = read_table(path)
    assert table.sheet == "People"
    assert table.columns == ["Nome", "Celular"]
    assert _row(table.frame, 3) == ["NA", "007"]


LEGACY_XLS = Path(__file__).parent / "data" / "legacy.xls"


def test_legacy_xls_is_read_as_text() -> None:
    """A BIFF8 ``.xls`` (written by xlwt, as old Excel versions save): numbers become
    integer text, a blank row is dropped and row numbers follow the sheet."""
    table = read_table(LEGACY_XLS)
    assert table.sheet == "Clients"
    assert table.columns == ["Name", "Mobile", "Notes"]
    assert list(table.frame.index) == [2, 3, 5]
    assert _row(table.frame, 2) == ["Zoë", "447911123456", "NA"]
    assert _row(table.frame, 3) == ["Bo", "+1 202 555 0143", "1.5"]
    assert _row(table.frame, 5) == ["Cy", "2025550143", "vip"]
    assert read_table(LEGACY_XLS, sheet="Other").columns == ["phone"]


def _has_phone(cells: Any) -> bool:
    return "Phone" in cells


@pytest.mark.parametrize(
    "text",
    [
        "Customer export 2026-11\nName;Phone;Plan\nAnn;+44 7911 123456;pro\n",
        "Customer export 2026-11;;\n;;\nName;Phone;Plan\n\nAnn;+44 7911 123456;pro\n",
        '"Export, November"\nName;Phone;Plan\nAnn;+44 7911 123456;pro\n',
    ],
)
def test_csv_header_below_title_rows(tmp_path: Path, text: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(text, encoding="utf-8")
    table = read_table(path, is_header=_has_phone)
    assert (table.columns, table.delimiter) == (["Name", "Phone", "Plan"], ";")
    first = table.frame.index[0]
    assert first == text.splitlines().index("Ann;+44 7911 123456;pro") + 1  # its row number
    assert table.header_row == first - 1 - (1 if "\n\nAnn" in text else 0)
    assert _row(table.frame, first) == ["Ann", "+44 7911 123456", "pro"]


def test_workbook_header_below_a_title_row(tmp_path: Path) -> None:
    path = tmp_path / "t.xlsx"
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["Customer export 2026-11"])
    sheet.append(["Name", "Phone"])
    sheet.append(["Ann", 447911123456])
    book.save(path)
    for engine in ("calamine", "openpyxl"):
        table = read_table(path, is_header=_has_phone, engine=engine)
        assert (table.columns, table.header_row) == (["Name", "Phone"], 2)
        assert _row(table.frame, 3) == ["Ann", "447911123456"]
    assert read_table(path).columns[0] == "Customer export 2026-11"  # no test: row 1


def test_header_index_needs_more_cells_than_the_rows_above() -> None:
    assert header_index([["Export"], ["Name", "Phone"]], _has_phone) == 1
    # a data row that passes the test is not the header: the first row has as many cells
    assert header_index([["Who", "Contact"], ["Phone", "x"]], _has_phone) == 0
    assert header_index([["Export"], ["Name", "Mobile"]], _has_phone) == 0  # none found
    assert header_index([["Export"], ["Name", "Phone"]], None) == 0


def test_a_million_column_header_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    with path.open("w") as fh:
        fh.write(",".join(f"c{i}" for i in range(1_000_000)) + "\n1,2\n")
    with pytest.raises(SpreadsheetError) as caught:
        read_table(path)
    assert str(caught.value) == (
        f"{path}: the header row has more than 1,000 columns, "
        "over the import limit of 1,000 columns"
    )
    # a quoted delimiter is not a column; a title row above the header is skipped
    ok = tmp_path / "ok.csv"
    ok.write_text('name,"phone, mobile",c\nAnn,+4915112345678,x\n')
    assert read_table(ok, limits=TableLimits(columns=3)).columns == ["name", "phone, mobile", "c"]
    with pytest.raises(SpreadsheetError, match="more than 2 columns"):
        read_table(ok, limits=TableLimits(columns=2))


def test_rows_and_cells_past_the_limits_are_refused_naming_them(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("name,phone\n" + "".join(f"n{i},+1202555{i:04d}\n" for i in range(5)))
    assert len(read_table(path, limits=TableLimits(rows=5)).frame) == 5
    with pytest.raises(SpreadsheetError) as caught:
        read_table(path, limits=TableLimits(rows=4))
    assert str(caught.value) == f"{path}: more than 4 rows, over the import limit of 4 rows"
    path.write_text("name,phone\nAnn,+12025550100\n" + "x" * 101 + ",+12025550101\n")
    with pytest.raises(SpreadsheetError) as caught:
        read_table(path, limits=TableLimits(cell_chars=100))
    assert str(caught.value) == (
        f"{path}: row 3, column 'name': a cell of 101 characters, over the import limit of 100"
    )
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["name", "phone", "city"])
    sheet.append(["Ann", "+12025550100", "x" * 50])
    xlsx = tmp_path / "c.xlsx"
    book.save(xlsx)
    with pytest.raises(SpreadsheetError) as caught:  # found from the cell references
        read_table(xlsx, limits=TableLimits(columns=2))
    assert str(caught.value) == (
        f"{xlsx}, sheet 'Sheet': its cells reach column C, row 2: "
        "over the limit of 2 columns and 2,000,000 rows"
    )
    with pytest.raises(SpreadsheetError, match="row 2, column 'city': a cell of 50"):
        read_table(xlsx, limits=TableLimits(cell_chars=49))


def test_nul_characters_are_removed_from_cells_and_headers(tmp_path: Path) -> None:
    path = tmp_path / "nul.csv"
    path.write_bytes(b"Na\x00me,Phone\nAn\x00n,+4915112345678\nBob,+4915112345679\x00\n")
    table = read_table(path)
    assert table.columns == ["Name", "Phone"]
    assert table.frame.to_dict("records") == [
        {"Name": "Ann", "Phone": "+4915112345678"},
        {"Name": "Bob", "Phone": "+4915112345679"},
    ]
