"""The report statements generated from a ``ReportFormat`` (``storage.reports.sql``): built
once per format, and formats they cannot render are refused."""

from __future__ import annotations

import pytest

from campaigns.reports.columns import FORMAT
from storage.reports import sql


def test_statements_are_built_once_per_format() -> None:
    for build in (
        sql.csv_lines_sqlite,
        sql.csv_window_sqlite,
        sql.csv_lines_postgresql,
        sql.xlsx_cells_sqlite,
        sql.xlsx_cells_sqlite_range,
        sql.xlsx_window_sqlite,
        sql.xlsx_cells_postgresql,
    ):
        assert build(FORMAT) is build(FORMAT._replace(columns=tuple(FORMAT.columns)))


def test_times_apart_are_refused() -> None:
    first, *rest = FORMAT.columns
    split = FORMAT._replace(columns=(*rest[:7], first, *rest[7:]))  # a text amid the times
    with pytest.raises(ValueError, match="adjacent"):
        sql.csv_lines_postgresql(split)


@pytest.mark.parametrize(
    ("refused", "message"),
    [
        (FORMAT._replace(formula_start=("=", "]")), "GLOB class"),
        (FORMAT._replace(e164_digits=(6, 19)), "INTEGER"),
    ],
)
def test_formats_sqlite_cannot_render_are_refused(refused: sql.ReportFormat, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sql.csv_window_sqlite(refused)
