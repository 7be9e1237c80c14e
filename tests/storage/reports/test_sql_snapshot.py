"""Safety net while the report SQL is generated from the column list (issue 12, step 8):
every statement equals, string for string, the one written by hand before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaigns.reports.columns import FORMAT
from storage.reports import sql

_BEFORE: dict[str, str] = json.loads(
    (Path(__file__).parent / "data" / "sql_before.json").read_text(encoding="utf-8")
)


@pytest.mark.parametrize("name", sorted(_BEFORE))
def test_statement_unchanged(name: str) -> None:
    built = getattr(sql, name, None)
    assert (built if built is not None else getattr(sql, name.lower())(FORMAT)) == _BEFORE[name]
