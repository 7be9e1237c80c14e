"""Clone and edit on SQLite and PostgreSQL: an edit while scheduled changes everything,
while paused after the start re-renders the queued rows (one that no longer renders is
skipped with the reason) and keeps the recipients; any other state is refused."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, select, update

from campaigns import editing, lifecycle, service
from campaigns.delivery_rows import materialise
from campaigns.service import CampaignSetupError
from storage import tables
from tests.campaigns.campaign_fixtures import NOW, make_list, people, phone, spec

deliveries = tables.deliveries


def _rows(engine: Engine, cid: int) -> dict[str, tuple[str, dict[str, object], str | None]]:
    with engine.connect() as conn:
        found = conn.execute(
            select(
                deliveries.c.target, deliveries.c.state, deliveries.c.content, deliveries.c.error
            ).where(deliveries.c.campaign_id == cid)
        ).all()
    return {r.target: (r.state, r.content, r.error) for r in found}


def test_edit_before_the_start_changes_the_whole_file(engine: Engine) -> None:
    make_list(engine, "customers", people(3))
    make_list(engine, "others", people(2, start=10))
    cid = service.create_campaign(engine, spec(), now=NOW).id
    new = spec(list="others", name="renamed", message={"type": "text", "text": "Yo {{ name }}"})
    done = editing.edit_campaign(engine, cid, new, now=NOW)
    assert (done.state, done.recipients, done.rerendered) == ("scheduled", 2, 0)
    detail = service.get_campaign(engine, cid)
    assert (detail.name, detail.list_name, detail.spec.message.text) == (
        "renamed",
        "others",
        "Yo {{ name }}",
    )


def test_edit_after_the_start_rerenders_queued_rows_only(engine: Engine) -> None:
    crowd = people(4)
    make_list(engine, "customers", crowd)
    cid = service.create_campaign(engine, spec(), now=NOW).id
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        materialise(conn, cid, now=NOW, instances=["A"])
        conn.execute(
            update(deliveries)
            .where(deliveries.c.target == phone(0))
            .values(state="sent", message_id="m0", sent_at=NOW)
        )
        # a contact's city is gone since the start: the new message needs it twice
        conn.execute(
            update(tables.contacts).where(tables.contacts.c.phone == phone(3)).values(attributes={})
        )
    before = _rows(engine, cid)
    service.pause_campaign(engine, cid)
    new = spec(message={"type": "text", "text": "New for {{ name }} from {{ city }}"})
    with pytest.raises(CampaignSetupError) as refused:
        editing.edit_campaign(engine, cid, spec(list="others"), now=NOW)
    assert refused.value.field == "list"
    done = editing.edit_campaign(engine, cid, new, now=NOW)
    assert (done.state, done.rerendered, done.skipped) == ("paused", 2, 1)
    rows = _rows(engine, cid)
    assert rows[phone(0)] == before[phone(0)]  # sent: untouched
    assert rows[phone(1)][1] == {"type": "text", "text": "New for P1 from C1"}
    assert rows[phone(3)][0] == "skipped" and "city" in str(rows[phone(3)][2])
    # running: refused, nothing changed
    service.resume_campaign(engine, cid)
    with pytest.raises(lifecycle.InvalidTransition) as caught:
        editing.edit_campaign(engine, cid, spec(), now=NOW)
    assert "only a paused or scheduled campaign can be edited" in str(caught.value)
    assert service.get_campaign(engine, cid).spec.message.text.startswith("New for")


def test_clone_copies_the_file_with_changes(engine: Engine) -> None:
    make_list(engine, "customers", people(2))
    cid = service.create_campaign(engine, spec(), now=NOW).id
    service.cancel_campaign(engine, cid)
    copy = editing.clone_campaign(engine, cid, {"name": "again"}, now=NOW)
    detail = service.get_campaign(engine, copy.id)
    assert (detail.name, detail.state, detail.spec.message) == (
        "again",
        "scheduled",
        spec().message,
    )
    assert editing.clone_spec(spec()).name == "promo (copy)"
    with pytest.raises(service.CampaignNotFound):
        editing.clone_campaign(engine, 999, now=NOW)


def test_edit_and_clone_refuse_a_kind_the_gateway_cannot_send(engine: Engine) -> None:
    """As create does (decision 58): a template on Evolution API is refused with the
    reason naming message.type, and nothing changes."""
    make_list(engine, "customers", people(2))
    cid = service.create_campaign(engine, spec(), now=NOW, gateway_kind="evolution").id
    template = {"type": "template", "text": "Hi", "buttons": [{"display_text": "Y", "id": "y"}]}
    with pytest.raises(CampaignSetupError, match="cannot send template") as edit:
        editing.edit_campaign(
            engine, cid, spec(message=template), now=NOW, gateway_kind="evolution"
        )
    assert edit.value.field == "message.type"
    assert service.get_campaign(engine, cid).spec.message.type == "text"
    with pytest.raises(CampaignSetupError, match="cannot send template"):
        editing.clone_campaign(
            engine, cid, {"message": template}, now=NOW, gateway_kind="evolution"
        )
    # the spec's gateway sends templates: the same edit goes through
    done = editing.edit_campaign(engine, cid, spec(message=template), now=NOW)
    assert done.state == "scheduled"
