"""Contact management (campaigns/contacts.py) on SQLite and PostgreSQL: the search's
folding and filters, imported names searchable, edits and tags in one transaction."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from campaigns import contacts as c
from campaigns.erasure import erase_contact
from campaigns.importer import ImportOptions, import_file
from campaigns.search_index import catch_up_search
from storage.queries import contact_search as cs
from tests.campaigns.campaign_fixtures import NOW


def _phones(engine: Engine, **search: object) -> list[str]:
    page = c.search(engine, c.Search(**search), limit=50)  # type: ignore[arg-type]
    return [r.phone for r in page.items]


def test_search_folds_case_and_accents_on_imported_and_added_contacts(
    engine: Engine, tmp_path: Path
) -> None:
    file = tmp_path / "people.csv"
    file.write_text("phone,name,city\n+14155550001,Zoë Ñandú,Köln\n+14155550002,Ann,Bonn\n")
    import_file(engine, file, ImportOptions(list_name="customers", region="US"))
    c.add_contact(engine, "+14155550003", region="US", now=NOW, name="Émile", tags=["VIP"])
    assert _phones(engine, query="NANDU") == ["+14155550001"]
    assert _phones(engine, query="koln") == ["+14155550001"]
    assert _phones(engine, query="city") == []  # attribute names are not values
    assert _phones(engine, query="emile") == ["+14155550003"]
    assert _phones(engine, query="(415) 555-0002") == ["+14155550002"]
    assert _phones(engine, query="", tag="vip") == ["+14155550003"]
    assert _phones(engine, query="", list_name="customers") == ["+14155550001", "+14155550002"]
    assert _phones(engine, query="100%") == []  # LIKE characters are literal
    with pytest.raises(c.ContactError, match="no list called 'nope'"):
        _phones(engine, list_name="nope")


def test_a_refused_edit_stores_nothing(engine: Engine) -> None:
    c.add_contact(engine, "+14155550001", region="US", now=NOW, name="Ann", attributes={"a": "1"})
    with pytest.raises(c.ContactError, match="has no attribute 'b'"):
        c.edit_contact(
            engine,
            "+14155550001",
            c.Edit(name="New", set_attributes={"c": "3"}, unset_attributes=["b"], add_tags=["x"]),
            region="US",
            now=NOW,
        )
    page = c.search(engine, c.Search(), limit=5)
    assert (page.items[0].name, page.items[0].attributes) == ("Ann", {"a": "1"})
    detail = c.detail(engine, page.items[0].id)
    assert detail is not None and detail.tags == [] and detail.deliveries == []


def test_bulk_tag_by_search_and_by_phones(engine: Engine) -> None:
    for i, city in enumerate(("Berlin", "berlín", "Paris"), start=1):
        c.add_contact(engine, f"+1415555000{i}", region="US", now=NOW, attributes={"city": city})
    berlin = c.Targets(search=c.Search(query="BERLIN"))
    assert c.change_tag(engine, "de", berlin, add=True, region="US", now=NOW) == 2
    assert c.change_tag(engine, "de", berlin, add=True, region="US", now=NOW) == 0
    some = c.Targets(phones=["+14155550001", "+14155550003"])
    assert c.change_tag(engine, "de", some, add=False, region="US", now=NOW) == 1
    assert _phones(engine, tag="de") == ["+14155550002"]
    with pytest.raises(c.ContactNotFound, match="no contact with phone"):
        c.change_tag(
            engine, "de", c.Targets(phones=["+14155550009"]), add=True, region="US", now=NOW
        )


def test_search_is_right_before_and_after_the_search_table_catches_up(engine: Engine) -> None:
    """Writes only queue contacts for the search table (migration 0014); a search checks
    the queued ones directly, so what it finds never depends on the catching up."""
    c.add_contact(
        engine, "+14155550001", region="US", now=NOW, name="Annika", attributes={"city": "Bonn"}
    )
    c.add_contact(engine, "+14155550002", region="US", now=NOW, name="Bert")
    assert catch_up_search(engine) == 2
    with engine.connect() as conn:
        assert not cs.catching_up(conn)
    assert _phones(engine, query="annik") == ["+14155550001"]
    # an edit leaves a stale search row ("Annika") until the next catch-up
    c.edit_contact(engine, "+14155550001", c.Edit(name="Carla"), region="US", now=NOW)
    with engine.connect() as conn:
        assert cs.catching_up(conn)
    for caught_up in (False, True):
        assert _phones(engine, query="annik") == [], caught_up
        assert _phones(engine, query="carl") == ["+14155550001"], caught_up
        assert _phones(engine, query="bonn") == ["+14155550001"], caught_up
        assert _phones(engine, query="5550002") == ["+14155550002"], caught_up
        catch_up_search(engine)
    with engine.connect() as conn:
        assert not cs.catching_up(conn)
    # a deleted contact leaves the search table and the queue in its transaction
    c.add_contact(engine, "+14155550003", region="US", now=NOW, name="Dora")
    erase_contact(engine, phone_e164="+14155550003")
    erase_contact(engine, phone_e164="+14155550002")
    with engine.connect() as conn:
        assert not cs.catching_up(conn)
    assert _phones(engine, query="dora") == [] and _phones(engine, query="bert") == []
    assert catch_up_search(engine) == 0


def test_an_import_queues_its_new_contacts_and_the_search_finds_them_meanwhile(
    engine: Engine, tmp_path: Path
) -> None:
    """A PostgreSQL import with the per-row triggers off queues its new contacts as one
    range (migration 0019), SQLite's a row each; either way a search finds them before
    the catching up, an edit among them is not lost, and the catching up empties both."""
    file = tmp_path / "people.csv"
    file.write_text(
        "phone,name,city\n" + "".join(f"+1415555{i:04d},Name{i},Town{i}\n" for i in range(300))
    )
    import_file(engine, file, ImportOptions(list_name="all", region="US"), catch_up=False)
    with engine.connect() as conn:
        ranges = conn.execute(sa.select(cs.pending_ranges.c.first_id, cs.pending_ranges.c.last_id))
        queued = conn.execute(sa.select(sa.func.count()).select_from(cs.pending)).scalar_one()
        assert cs.catching_up(conn)
    if engine.dialect.name == "postgresql":
        (first, last), *more = ranges.all()
        assert (last - first + 1, more, queued) == (300, [], 0)
    else:
        assert (ranges.all(), queued) == ([], 300)
    c.edit_contact(engine, "+14155550007", c.Edit(name="Renamed"), region="US", now=NOW)
    for caught_up in (False, True):
        assert _phones(engine, query="name299") == ["+14155550299"], caught_up
        assert _phones(engine, query="town12") == ["+14155550012"] + [
            f"+141555501{i}" for i in range(20, 30)
        ], caught_up
        assert _phones(engine, query="renamed") == ["+14155550007"], caught_up
        assert _phones(engine, query="name7") == [f"+141555500{i}" for i in range(70, 80)]
        if not caught_up:
            assert catch_up_search(engine) == 300
    with engine.connect() as conn:
        assert not cs.catching_up(conn)


def test_a_queued_range_is_filled_a_batch_at_a_time(engine: Engine) -> None:
    """``fill_range`` fills the search rows of a range's contacts ``limit`` ids at a time
    straight from ``contacts``, shrinking the range and dropping it when done; ids of
    contacts no longer there are skipped, the queue entries of the ids it covers are
    taken off (the dialect that does not write ranges reads them the same way)."""
    for i in range(1, 8):
        c.add_contact(engine, f"+1415555000{i}", region="US", now=NOW, name=f"N{i}")
    catch_up_search(engine)
    with engine.begin() as conn:
        ids = conn.execute(sa.select(cs.contacts.c.id).order_by(cs.contacts.c.id)).scalars().all()
        conn.execute(sa.insert(cs.pending_ranges).values(first_id=ids[1], last_id=ids[5] + 10))
        conn.execute(sa.update(cs.contacts).where(cs.contacts.c.id == ids[2]).values(name="X"))
        conn.execute(
            sa.update(cs.contacts)
            .where(cs.contacts.c.id == ids[3])
            .values(folded_name="renamed", name="Renamed")
        )
    with engine.connect() as conn:
        assert conn.execute(sa.select(cs.pending.c.contact_id)).scalars().all() == [ids[3]]
    steps = []
    while True:
        with engine.begin() as conn:
            fill = cs.fill_range(conn, limit=4)
            left = conn.execute(sa.select(cs.pending_ranges.c.first_id)).scalars().all()
            queued = conn.execute(sa.select(cs.pending.c.contact_id)).scalars().all()
        steps.append((fill, left, queued))
        if not fill.covered:
            break
    assert steps == [
        ((4, 4), [ids[5]], []),
        ((4, 2), [ids[5] + 4], []),
        ((4, 0), [ids[5] + 8], []),
        ((3, 0), [], []),
        ((0, 0), [], []),
    ]
    assert catch_up_search(engine) == 0
    assert _phones(engine, query="renamed") == ["+14155550004"]


def test_a_search_is_tagged_a_window_of_ids_at_a_time(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tagging a search's contacts commits a window of ids at a time (other writers get
    the lock between them); every contact the search finds is changed, once."""
    monkeypatch.setattr(c, "TAG_WINDOW", 2)
    for i in range(5):
        c.add_contact(engine, f"+1415555010{i}", region="US", now=NOW, name=f"Ann {i}")
    c.add_contact(engine, "+14155550199", region="US", now=NOW, name="Bob")
    catch_up_search(engine)
    every = c.Targets(search=c.Search(query="ann"))
    assert c.change_tag(engine, "w", every, add=True, region="US", now=NOW) == 5
    assert _phones(engine, tag="w") == [f"+1415555010{i}" for i in range(5)]
    assert c.change_tag(engine, "w", every, add=True, region="US", now=NOW) == 0
    assert c.change_tag(engine, "w", every, add=False, region="US", now=NOW) == 5
    assert _phones(engine, tag="w") == []
    with pytest.raises(c.ContactError, match="at most 100"):
        c.add_contact(
            engine, "+14155550200", region="US", now=NOW, tags=[f"t{i}" for i in range(101)]
        )
