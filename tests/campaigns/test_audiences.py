"""Audiences: lists, their members and counts (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from campaigns.audiences import create_list, get_list, get_list_id, list_lists, member_phones
from campaigns.importer import ImportOptions, import_file
from storage.queries import contacts as q
from storage.types import utcnow


def test_lists_members_and_counts(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("phone\n+44 7911 123456\n+1 202 555 0143\n")
    import_file(engine, path, ImportOptions("customers"))
    import_file(engine, path, ImportOptions("vip"))
    assert create_list(engine, " empty ") == create_list(engine, "empty")
    with engine.begin() as conn:
        q.set_opt_out(conn, "+12025550143", True, "STOP", utcnow())
        customers = get_list_id(conn, "customers")
    assert customers is not None
    summaries = list_lists(engine)
    assert [(s.name, s.members, s.opted_out, s.reachable) for s in summaries] == [
        ("customers", 2, 1, 1),
        ("empty", 0, 0, 0),
        ("vip", 2, 1, 1),
    ]
    assert member_phones(engine, customers) == ["+447911123456"]
    assert sorted(member_phones(engine, customers, include_opted_out=True)) == [
        "+12025550143",
        "+447911123456",
    ]
    vip = get_list(engine, "vip")
    assert vip is not None and vip.to_dict()["reachable"] == 1
    assert get_list(engine, "nope") is None


def test_list_names_are_checked(sqlite_engine: Engine) -> None:
    with pytest.raises(ValueError, match="cannot be empty"):
        create_list(sqlite_engine, "  ")
    with pytest.raises(ValueError, match="limit is 200"):
        create_list(sqlite_engine, "x" * 201)
