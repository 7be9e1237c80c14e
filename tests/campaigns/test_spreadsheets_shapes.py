"""Workbook rows of uneven width, blank rows and header-only sheets, with both engines."""

from __future__ import annotations

from pathlib import Path

import openpyxl
import pytest

from campaigns.spreadsheets import read_table


def _workbook(path: Path, rows: list[list[object]]) -> Path:
    wb = openpyxl.Workbook()
    ws = wb.active
    assert ws is not None
    for row in rows:
        ws.append(row)
    wb.save(path)
    return path


@pytest.mark.parametrize("engine", ["calamine", "openpyxl"])
def test_uneven_rows_are_padded_and_blank_rows_dropped(tmp_path: Path, engine: str) -> None:
    path = _workbook(
        tmp_path / "uneven.xlsx",
        [
            ["name", "phone", "plan"],
            ["Ann", 447911123456, "pro"],
            ["Bob"],
            [],
            [None, "+1 202 555 0100", None, "extra"],
        ],
    )
    table = read_table(path, engine=engine)  # type: ignore[arg-type]
    assert table.columns == ["name", "phone", "plan", "column_4"]
    assert list(table.frame.index) == [2, 3, 5]  # row 4 is blank
    assert table.frame.to_dict("records") == [
        {"name": "Ann", "phone": "447911123456", "plan": "pro", "column_4": ""},
        {"name": "Bob", "phone": "", "plan": "", "column_4": ""},
        {"name": "", "phone": "+1 202 555 0100", "plan": "", "column_4": "extra"},
    ]


@pytest.mark.parametrize("engine", ["calamine", "openpyxl"])
def test_header_only_sheet_has_columns_and_no_rows(tmp_path: Path, engine: str) -> None:
    path = _workbook(tmp_path / "header.xlsx", [["name", "phone"]])
    table = read_table(path, engine=engine)  # type: ignore[arg-type]
    assert table.columns == ["name", "phone"]
    assert len(table.frame) == 0
