"""Materialisation: one row per recipient, bulk, idempotent, sticky senders (SQLite + PG)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select, update

from campaigns import delivery_rows as mat
from campaigns.render import ContactData, recipient_rng, render_message
from campaigns.service import create_campaign
from gateway.messages import message_to_dict
from storage import tables
from tests.campaigns.campaign_fixtures import NOW, make_list, people, phone, spec

deliveries = tables.deliveries


def _rows(engine: Engine, campaign_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        rows = conn.execute(select(deliveries).where(deliveries.c.campaign_id == campaign_id)).all()
    return {r.target: r for r in rows}


def test_one_row_per_member_rendered_and_skips(engine: Engine) -> None:
    crowd = people(6)
    crowd[1]["opted_out"] = True
    crowd[2]["attributes"] = {}  # no city: cannot render
    make_list(engine, "customers", crowd)
    created = create_campaign(engine, spec(), now=NOW)
    with engine.begin() as conn:
        result = mat.materialise(conn, created.id, now=NOW, instances=["A", "B"])
    assert result == mat.MaterialiseResult(queued=4, skipped=2)
    rows = _rows(engine, created.id)
    assert len(rows) == 6
    assert rows[phone(1)].state == "skipped" and rows[phone(1)].error == "opted out"
    assert rows[phone(2)].state == "skipped" and "city" in rows[phone(2)].error
    ok = rows[phone(0)]
    assert ok.state == "queued" and ok.due_at == NOW and ok.attempts == 0
    assert ok.sender in ("A", "B") and ok.target_kind == "phone" and ok.contact_id is not None
    expected = render_message(
        spec().message,
        ContactData(phone=phone(0), name="P0", attributes={"city": "C0"}),
        recipient_rng(created.id, phone(0)),
    )
    assert ok.content == message_to_dict(expected)
    # the preview showed exactly what was stored
    assert created.preview[0].target == phone(0)
    assert created.preview[0].content == ok.content


def test_idempotent_rerun_and_resume_after_partial(engine: Engine) -> None:
    make_list(engine, "customers", people(25))
    created = create_campaign(engine, spec(), now=NOW)
    # a "crash" halfway: only the first chunk got committed
    with engine.begin() as conn:
        first = next(mat.list_recipients(conn, 1, chunk=10))
        rows = mat.build_rows(spec(), created.id, first, now=NOW, senders={})
        from storage.queries.campaigns import insert_deliveries

        insert_deliveries(conn, rows)
    with engine.begin() as conn:
        again = mat.materialise(conn, created.id, now=NOW, instances=["A"])
    assert again.queued == 15
    with engine.begin() as conn:
        third = mat.materialise(conn, created.id, now=NOW, instances=["A"])
    assert third == mat.MaterialiseResult(0, 0)
    assert len(_rows(engine, created.id)) == 25


def test_chunks_cover_every_member(engine: Engine, monkeypatch: Any) -> None:
    monkeypatch.setattr(mat, "CHUNK", 7)
    make_list(engine, "customers", people(30))
    created = create_campaign(engine, spec(), now=NOW)
    with engine.begin() as conn:
        chunks = list(mat.list_recipients(conn, 1, chunk=7))
        result = mat.materialise(conn, created.id, now=NOW, instances=["A"])
    assert [len(c) for c in chunks] == [7, 7, 7, 7, 2]
    assert result.queued == 30


def test_sticky_sender_follows_history(engine: Engine) -> None:
    make_list(engine, "customers", people(40))
    first = create_campaign(engine, spec(name="first"), now=NOW)
    with engine.begin() as conn:
        mat.materialise(conn, first.id, now=NOW, instances=["A", "B"])
        # pretend everything was sent, and through "C" for every contact
        conn.execute(
            update(deliveries)
            .where(deliveries.c.campaign_id == first.id)
            .values(sender="C", sent_at=NOW, state="sent")
        )
    second = create_campaign(engine, spec(name="second"), now=NOW)
    with engine.begin() as conn:
        mat.materialise(conn, second.id, now=NOW, instances=["B", "C"])
    assert {r.sender for r in _rows(engine, second.id).values()} == {"C"}
    # without history in the pool, the hash spreads contacts over all instances
    third = create_campaign(engine, spec(name="third"), now=NOW)
    with engine.begin() as conn:
        mat.materialise(conn, third.id, now=NOW, instances=["A", "B"])
    senders = [r.sender for r in _rows(engine, third.id).values()]
    assert set(senders) == {"A", "B"}
    for target, row in _rows(engine, third.id).items():
        assert row.sender == mat.pick_sender(target, ["B", "A"])


def test_groups(engine: Engine) -> None:
    group_spec = spec(
        list=None,
        groups=["111@g.us", "222@g.us"],
        message={"type": "media", "media_url": "https://e.x/m.pdf", "caption": "{a|b} menu"},
    )
    created = create_campaign(engine, group_spec, now=NOW)
    with engine.begin() as conn:
        result = mat.materialise(conn, created.id, now=NOW, instances=["A"])
    assert result.queued == 2
    rows = _rows(engine, created.id)
    assert rows["111@g.us"].target_kind == "group"
    assert rows["111@g.us"].contact_id is None
    assert rows["111@g.us"].content["type"] == "media"
    assert rows["111@g.us"].content["caption"] in ("a menu", "b menu")


def test_committed_variant_matches_and_resumes(engine: Engine) -> None:
    crowd = people(23)
    crowd[4]["opted_out"] = True
    make_list(engine, "customers", crowd)
    a = create_campaign(engine, spec(name="a"), now=NOW).id
    b = create_campaign(engine, spec(name="b"), now=NOW).id
    with engine.begin() as conn:
        in_one = mat.materialise(conn, a, now=NOW, instances=["A", "B"])
    committed = mat.materialise_committed(engine, b, now=NOW, instances=["A", "B"], chunk=5)
    assert committed == in_one == mat.MaterialiseResult(queued=22, skipped=1)
    rows_a, rows_b = _rows(engine, a), _rows(engine, b)
    assert set(rows_a) == set(rows_b)
    for target in rows_a:
        assert (rows_a[target].state, rows_a[target].sender) == (
            rows_b[target].state,
            rows_b[target].sender,
        )
    # nothing left for the start transaction, and a rerun adds nothing
    with engine.begin() as conn:
        assert mat.materialise(conn, b, now=NOW, instances=["A", "B"]) == mat.MaterialiseResult(
            0, 0
        )
    assert mat.materialise_committed(engine, b, now=NOW, instances=["A"]) == (
        mat.MaterialiseResult(0, 0)
    )


def test_committed_variant_groups(engine: Engine) -> None:
    group_spec = spec(
        list=None, groups=["111@g.us", "222@g.us"], message={"type": "text", "text": "hi"}
    )
    created = create_campaign(engine, group_spec, now=NOW)
    result = mat.materialise_committed(engine, created.id, now=NOW, instances=["A"])
    assert result == mat.MaterialiseResult(queued=2, skipped=0)
    assert set(_rows(engine, created.id)) == {"111@g.us", "222@g.us"}
