"""Bulk actions on contacts (``campaigns.contact_bulk``) on SQLite and PostgreSQL: by ids
and by a search, each one statement over the selection and idempotent; erase by ids with
the ones already gone named; the replies counted for the overview."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, insert

from campaigns import contact_bulk as bulk
from campaigns import contacts as c
from storage import tables
from storage.queries import replies as rq

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def _people(engine: Engine) -> dict[str, int]:
    out = {}
    for n, (name, city) in enumerate([("Ann", "Köln"), ("Bob", "Köln"), ("Cy", "Bonn")]):
        made = c.add_contact(
            engine, f"+1415555010{n}", region="US", now=NOW, name=name, attributes={"city": city}
        )
        out[name] = made.id
    return out


def _search(engine: Engine, **filters: object) -> set[str]:
    found = c.search(engine, c.Search(**filters), limit=50)  # type: ignore[arg-type]
    return {r.name for r in found.items}


def test_tag_list_and_opt_out_by_ids_and_search(engine: Engine) -> None:
    ids = _people(engine)
    chosen = bulk.Selection(ids=[ids["Ann"], ids["Bob"]])
    assert bulk.tag(engine, chosen, "vip", NOW) == 2
    assert bulk.tag(engine, chosen, "vip", NOW) == 0  # done twice: nothing more
    assert _search(engine, tag="vip") == {"Ann", "Bob"}

    koeln = bulk.Selection(search=c.Search(query="köln"))
    assert bulk.add_to_list(engine, koeln, "Rhine", NOW) == 2
    assert bulk.add_to_list(engine, bulk.Selection(ids=list(ids.values())), "Rhine", NOW) == 1
    rhine = c.Search(list_name="Rhine")
    assert _search(engine, list_name="Rhine") == {"Ann", "Bob", "Cy"}

    assert bulk.opt_out(engine, bulk.Selection(search=rhine), "list closed", NOW) == 3
    assert bulk.opt_out(engine, bulk.Selection(search=rhine), "", NOW) == 0
    assert _search(engine, opted_out=True) == {"Ann", "Bob", "Cy"}


def test_selection_and_names_refused_in_the_users_terms(engine: Engine) -> None:
    with pytest.raises(c.ContactError, match="either ids or a search"):
        bulk.tag(engine, bulk.Selection(), "vip", NOW)
    with pytest.raises(c.ContactError, match="at most 1000 by id") as too_many:
        bulk.opt_out(engine, bulk.Selection(ids=list(range(1, 1002))), "", NOW)
    assert too_many.value.field == "ids"
    with pytest.raises(c.ContactError, match="no tag called 'nope'"):
        bulk.opt_out(engine, bulk.Selection(search=c.Search(tag="nope")), "", NOW)
    with pytest.raises(c.ContactError) as empty:
        bulk.add_to_list(engine, bulk.Selection(ids=[1]), "  ", NOW)
    assert empty.value.field == "list_name"


def test_erase_names_the_ids_already_gone(engine: Engine) -> None:
    ids = _people(engine)
    done = bulk.erase(engine, [ids["Ann"], ids["Bob"]])
    assert [e.contact_id for e in done.erased] == sorted([ids["Ann"], ids["Bob"]])
    again = bulk.erase(engine, [ids["Ann"], ids["Cy"]])
    assert again.missing == [ids["Ann"]] and len(again.erased) == 1
    assert _search(engine) == set()
    with pytest.raises(c.ContactError, match="at most 100"):
        bulk.erase(engine, list(range(1, 102)))


def test_replies_received_since(engine: Engine) -> None:
    rows = [
        {"message_id": f"m{n}", "chat": "1@s", "text": t, "is_opt_out": stop, "received_at": at}
        for n, (t, stop, at) in enumerate(
            [
                ("hi", False, NOW),
                ("STOP", True, NOW - timedelta(hours=2)),
                ("old", False, NOW - timedelta(days=3)),
            ]
        )
    ]
    with engine.begin() as conn:
        conn.execute(insert(tables.inbound_messages), rows)
        assert rq.received_since(conn, NOW - timedelta(hours=24)) == (1, 1)
