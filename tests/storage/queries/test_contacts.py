"""Contact, list and membership statements on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy import Engine

from storage import tables
from storage.queries import contacts as q

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _row(phone: str, name: str = "", **attrs: str) -> dict[str, object]:
    return {"phone": phone, "raw_phone": phone, "name": name, "attributes": attrs}


def test_upsert_inserts_then_merges(engine: Engine) -> None:
    with engine.begin() as conn:
        q.upsert_contacts(conn, [_row("+441", "Ann", city="Leeds", plan="a"), _row("+442")], NOW)
    later = NOW + timedelta(hours=1)
    with engine.begin() as conn:
        q.upsert_contacts(conn, [_row("+441", "", plan="b", team="x"), _row("+442", "Bo")], later)
        rows = {r.phone: r for r in conn.execute(sa.select(q.contacts))}
    assert rows["+441"].name == "Ann"  # an empty name keeps the stored one
    assert rows["+441"].attributes == {"city": "Leeds", "plan": "b", "team": "x"}
    assert rows["+441"].created_at == NOW
    assert rows["+441"].updated_at == later
    assert rows["+442"].name == "Bo"


def test_upsert_in_several_batches_and_lookups(engine: Engine) -> None:
    phones = [f"+1202555{i:04d}" for i in range(q.BATCH + 7)]
    with engine.begin() as conn:
        q.upsert_contacts(conn, [_row(p) for p in phones], NOW)
        ids = q.contact_ids(conn, phones)
        existing = q.existing_contacts(conn, [*phones[:3], "+99"])
    assert len(ids) == len(phones)
    assert set(existing) == set(phones[:3])
    assert all(not s.opted_out for s in existing.values())


def test_upsert_never_touches_opt_out(engine: Engine) -> None:
    with engine.begin() as conn:
        q.upsert_contacts(conn, [_row("+441", "Ann")], NOW)
        assert q.set_opt_out(conn, "+441", True, "STOP", NOW)
        q.upsert_contacts(conn, [_row("+441", "Ann B")], NOW)
        contact = q.get_contact(conn, "+441")
    assert contact is not None
    assert (contact.opted_out, contact.opt_out_reason, contact.name) == (True, "STOP", "Ann B")
    assert contact.opted_out_at == NOW


def test_set_opt_out_and_back_in(engine: Engine) -> None:
    with engine.begin() as conn:
        assert q.set_opt_out(conn, "+440", True, "STOP", NOW) is False  # no such contact
        q.upsert_contacts(conn, [_row("+441")], NOW)
        assert q.set_opt_out(conn, "+441", True, "STOP", NOW) is True
        assert q.existing_contacts(conn, ["+441"])["+441"].opted_out is True
        assert q.set_opt_out(conn, "+441", False, None, NOW) is True
        contact = q.get_contact(conn, "+441")
    assert contact is not None
    assert (contact.opted_out, contact.opted_out_at, contact.opt_out_reason) == (False, None, None)


def test_lists_and_members(engine: Engine) -> None:
    with engine.begin() as conn:
        a, created = q.ensure_list(conn, "a", NOW)
        assert created
        assert q.ensure_list(conn, "a", NOW) == (a, False)
        b, _ = q.ensure_list(conn, "b", NOW)
        q.upsert_contacts(conn, [_row("+441"), _row("+442"), _row("+443")], NOW)
        ids = q.contact_ids(conn, ["+441", "+442", "+443"])
        q.add_members(conn, a, [ids["+441"], ids["+442"]], NOW)
        q.add_members(conn, a, [ids["+442"], ids["+443"]], NOW)  # +442 again: no error
        q.add_members(conn, b, [ids["+441"]], NOW)
        q.set_opt_out(conn, "+443", True, None, NOW)
        q.ensure_list(conn, "empty", NOW)
    with engine.connect() as conn:
        assert q.get_list_id(conn, "a") == a
        assert q.get_list_id(conn, "nope") is None
        assert q.list_member_phones(conn, a) == ["+441", "+442"]
        assert q.list_member_phones(conn, a, include_opted_out=True) == ["+441", "+442", "+443"]
        assert q.contact_list_names(conn, ids["+441"]) == ["a", "b"]
        summaries = {r.name: (r.members, r.opted_out) for r in q.list_summaries(conn)}
    assert summaries == {"a": (3, 1), "b": (1, 0), "empty": (0, 0)}


def test_insert_rejects(engine: Engine) -> None:

    imports = tables.imports
    with engine.begin() as conn:
        import_id = conn.execute(
            sa.insert(imports).values(filename="f.csv", started_at=NOW)
        ).inserted_primary_key
        assert import_id is not None
        q.insert_rejects(
            conn,
            int(import_id[0]),
            [{"row_number": 3, "column": "phone", "reason": "empty", "raw": {"phone": ""}}],
        )
        rows = conn.execute(sa.select(q.import_rejects)).all()
    assert [(r.row_number, r.column, r.reason, r.raw) for r in rows] == [
        (3, "phone", "empty", {"phone": ""})
    ]
