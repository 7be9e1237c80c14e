"""Campaign service: create with preview and strict mode, list/show, pause/resume/cancel/retry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, update

from campaigns import lifecycle, service
from campaigns.campaign_file import load_campaign_file, stored_spec
from campaigns.delivery_rows import materialise
from storage import tables
from storage.queries import instances as iq
from tests.campaigns.campaign_fixtures import NOW, make_list, people, phone, spec

deliveries = tables.deliveries
campaigns = tables.campaigns
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_create_scheduled_with_preview_and_unrenderable(engine: Engine) -> None:
    crowd = people(8)
    crowd[3]["attributes"] = {}
    crowd[4]["opted_out"] = True
    make_list(engine, "customers", crowd)
    created = service.create_campaign(engine, spec(), now=NOW)
    assert created.state == "scheduled"
    assert created.start_at == NOW
    assert created.recipients == 8 and created.opted_out == 1
    assert created.unrenderable == [(phone(3), "missing variable 'city'")]
    assert len(created.preview) == service.PREVIEW_SIZE
    assert created.preview[0].name == "P0"
    assert created.preview[0].content["text"] in ("Hi P0 in C0", "Hello P0 in C0")
    detail = service.get_campaign(engine, created.id)
    assert detail.state == "scheduled" and detail.list_name == "customers"
    assert detail.spec == spec()
    assert detail.total == 0  # rows are materialised at start


def test_preview_checks_like_create_and_stores_nothing(engine: Engine) -> None:
    crowd = people(8)
    crowd[3]["attributes"] = {}
    crowd[4]["opted_out"] = True
    make_list(engine, "customers", crowd)
    preview = service.preview_campaign(engine, spec(), limit=3)
    assert service.list_campaigns(engine).items == []  # nothing stored
    assert (preview.recipients_checked, preview.opted_out) == (8, 1)
    assert preview.unrenderable == [(phone(3), "missing variable 'city'")]
    assert preview.unrenderable_count == 1
    assert [p.target for p in preview.preview] == [phone(0), phone(1), phone(2)]
    assert preview.spintax_varies  # "{Hi|Hello}": the stored variant is picked at creation
    created = service.create_campaign(engine, spec(), now=NOW)
    assert (created.recipients, created.opted_out) == (8, 1)
    assert created.unrenderable == preview.unrenderable
    assert [p.target for p in created.preview[:3]] == [p.target for p in preview.preview]


def test_preview_without_spintax_is_exactly_what_is_stored(engine: Engine) -> None:
    make_list(engine, "customers", people(4))
    plain = spec(message={"type": "text", "text": "Hi {{ name }} in {{ city }} {not spintax}"})
    preview = service.preview_campaign(engine, plain)
    assert not preview.spintax_varies
    created = service.create_campaign(engine, plain, now=NOW)
    assert [p.content for p in preview.preview] == [p.content for p in created.preview]
    assert preview.preview[0].content["text"] == "Hi P0 in C0 {not spintax}"
    with pytest.raises(service.CampaignSetupError, match="'other' does not exist"):
        service.preview_campaign(engine, spec(list="other"))


def test_start_from_file_in_timezone(engine: Engine) -> None:
    make_list(engine, "customers", people(1))
    s = spec(schedule={"start": "2026-11-28T09:00", "timezone": "Asia/Tokyo"})
    created = service.create_campaign(engine, s, now=NOW)
    assert created.start_at == datetime(2026, 11, 28, 0, 0, tzinfo=UTC)


def test_strict_refuses_and_stores_nothing(engine: Engine) -> None:
    crowd = people(3)
    crowd[1]["attributes"] = {}
    make_list(engine, "customers", crowd)
    with pytest.raises(service.UnrenderableRecipients) as info:
        service.create_campaign(engine, spec(), strict=True, now=NOW)
    assert "city is missing for 1 of 3 contacts: P1" in str(info.value)
    assert info.value.unrenderable == [(phone(1), "missing variable 'city'")]
    assert service.list_campaigns(engine).items == []


def test_nothing_renders_is_refused_naming_who_lacks_what(engine: Engine) -> None:
    crowd = people(9)
    for person in crowd:
        person["attributes"] = {}
    crowd[0]["opted_out"] = True  # not counted: it would not be sent anyway
    crowd[2]["name"] = ""  # no name: its number stands for it
    make_list(engine, "customers", crowd)
    with pytest.raises(service.UnrenderableRecipients) as info:
        service.create_campaign(engine, spec(), now=NOW)
    assert info.value.nothing and info.value.field == "message"
    assert str(info.value).startswith(
        f"nothing would be sent: city is missing for 8 of 8 contacts: P1, {phone(2)}, P3, P4, "
        "P5 and 3 more."
    ), str(info.value)
    assert service.list_campaigns(engine).items == []
    # said explicitly: created, every recipient to be skipped with the reason
    made = service.create_campaign(engine, spec(), allow_unrenderable=True, now=NOW)
    assert made.unrenderable_count == 8
    assert made.unrenderable_words.startswith("city is missing for 8 of 8 contacts: P1")


def test_unknown_list_named(engine: Engine) -> None:
    with pytest.raises(service.CampaignSetupError, match="'customers' does not exist"):
        service.create_campaign(engine, spec(), now=NOW)


def test_not_found(engine: Engine) -> None:
    with pytest.raises(service.CampaignNotFound, match="campaign 42 does not exist"):
        service.get_campaign(engine, 42)
    with pytest.raises(service.CampaignNotFound):
        service.pause_campaign(engine, 42)


def test_pause_resume_cancel(engine: Engine) -> None:
    make_list(engine, "customers", people(5))
    cid = service.create_campaign(engine, spec(), now=NOW).id
    assert service.pause_campaign(engine, cid) == "paused"
    assert service.get_campaign(engine, cid).state_reason == "paused by user"
    # never started: back to scheduled
    assert service.resume_campaign(engine, cid) == "scheduled"
    with pytest.raises(lifecycle.InvalidTransition):
        service.resume_campaign(engine, cid)
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        materialise(conn, cid, now=NOW, instances=["A"])
        conn.execute(
            update(deliveries)
            .where(deliveries.c.target == phone(0))
            .values(state="sent", message_id="m0", sent_at=NOW)
        )
    service.pause_campaign(engine, cid, "too many failures")
    assert service.resume_campaign(engine, cid) == "running"
    assert service.cancel_campaign(engine, cid) == 4
    detail = service.get_campaign(engine, cid)
    assert detail.state == "cancelled"
    assert detail.counts["skipped"] == 4 and detail.counts["sent"] == 1
    with engine.connect() as conn:
        errors = set(
            conn.execute(
                select(deliveries.c.error).where(deliveries.c.state == "skipped")
            ).scalars()
        )
    assert errors == {"campaign cancelled"}
    with pytest.raises(lifecycle.InvalidTransition):
        service.pause_campaign(engine, cid)
    with pytest.raises(lifecycle.InvalidTransition):
        service.retry_campaign(engine, cid)


def test_retry_failed_and_unknown(engine: Engine) -> None:
    make_list(engine, "customers", people(4))
    cid = service.create_campaign(engine, spec(), now=NOW).id
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        materialise(conn, cid, now=NOW, instances=["A"])
        for i, state in enumerate(["failed", "unknown", "read", "failed"]):
            conn.execute(
                update(deliveries)
                .where(deliveries.c.target == phone(i))
                .values(state=state, attempts=4, error="boom", message_id=f"m{i}")
            )
        lifecycle.transition(conn, cid, lifecycle.COMPLETED, now=NOW)
    later = NOW + timedelta(hours=1)
    assert service.retry_campaign(engine, cid, now=later).requeued == 2
    detail = service.get_campaign(engine, cid)
    assert detail.state == "running"
    assert detail.counts["queued"] == 2 and detail.counts["unknown"] == 1
    assert detail.counts["read"] == 1
    with engine.connect() as conn:
        row = conn.execute(select(deliveries).where(deliveries.c.target == phone(0))).one()
    assert (row.attempts, row.error, row.message_id, row.due_at) == (0, None, None, later)
    assert service.retry_campaign(engine, cid, include_unknown=True, now=later).requeued == 1
    assert service.campaign_counts(engine, cid)["queued"] == 3


def test_list_campaigns_with_counts(engine: Engine) -> None:
    make_list(engine, "customers", people(3))
    a = service.create_campaign(engine, spec(name="a"), now=NOW).id
    b = service.create_campaign(engine, spec(name="b"), now=NOW).id
    with engine.begin() as conn:
        materialise(conn, a, now=NOW, instances=["A"])
    listed = service.list_campaigns(engine).items
    assert [c.id for c in listed] == [b, a]
    assert listed[1].total == 3 and listed[1].counts["queued"] == 3
    assert listed[0].total == 0


def test_list_campaigns_filters_by_state_and_name_and_pages(engine: Engine) -> None:
    make_list(engine, "customers", people(1))
    ids = [
        service.create_campaign(engine, spec(name=n), now=NOW).id
        for n in ("Spring 50%", "spring_b", "Autumn")
    ]
    service.pause_campaign(engine, ids[2])
    page = service.list_campaigns(engine, name="SPRING", limit=1)
    assert page.total == 2 and [c.id for c in page.items] == [ids[1]]
    assert [
        c.id for c in service.list_campaigns(engine, name="spring", limit=1, offset=1).items
    ] == [ids[0]]
    assert service.list_campaigns(engine, name="50%").total == 1  # a literal %, not a wildcard
    assert service.list_campaigns(engine, name="g_b").total == 1
    paused = service.list_campaigns(engine, state="paused")
    assert [c.id for c in paused.items] == [ids[2]] and paused.total == 1


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("campaign*.toml")))
def test_every_sample_stored_reads_back_equal(engine: Engine, sample: str) -> None:
    """Sample -> create -> the stored JSON column -> the same CampaignSpec, on every face."""
    make_list(engine, "customers", people(2))
    original = load_campaign_file(SAMPLES / sample)
    cid = service.create_campaign(engine, original, now=NOW).id
    with engine.connect() as conn:
        stored = conn.execute(select(campaigns.c.spec).where(campaigns.c.id == cid)).scalar_one()
    assert stored_spec(stored) == original
    assert service.get_campaign(engine, cid).spec == original
    assert service.pause_campaign(engine, cid) == "paused"
    assert service.resume_campaign(engine, cid) == "scheduled"
    service.cancel_campaign(engine, cid)


def test_an_unknown_sender_is_refused_naming_the_usable_ones(engine: Engine) -> None:
    make_list(engine, "customers", people(2))
    with pytest.raises(service.CampaignSetupError) as info:
        service.create_campaign(engine, spec(instances=["6501A9176BD17"]), now=NOW)
    assert info.value.field == "instances"
    assert "6501A9176BD17" in str(info.value) and "no sender is usable" in str(info.value)
    with engine.begin() as conn:
        iq.ensure(conn, ["KNOWN1", "KNOWN2", "GONE1"], now=NOW)
        iq.mark_state(conn, "KNOWN1", "connected", now=NOW)
        iq.mark_state(conn, "KNOWN2", "unconfirmed", now=NOW)
        iq.mark_gone(conn, "GONE1", "gone: test", now=NOW)
    with pytest.raises(service.CampaignSetupError, match="usable ones: KNOWN1, KNOWN2\\."):
        service.create_campaign(engine, spec(instances=["KNOWN1", "NOPE"]), now=NOW)
    with pytest.raises(service.CampaignSetupError, match="GONE1 no longer exists"):
        service.create_campaign(engine, spec(instances=["GONE1"]), now=NOW)
    assert service.list_campaigns(engine).items == []
    assert service.create_campaign(engine, spec(instances=["KNOWN2"]), now=NOW).id


def test_a_start_already_missed_is_refused_in_the_campaigns_timezone(engine: Engine) -> None:
    make_list(engine, "customers", people(2))
    # NOW is 2026-11-21 12:00 UTC, 07:00 in New York
    past = spec(schedule={"start": "2026-11-21T05:30", "timezone": "America/New_York"})
    with pytest.raises(service.CampaignSetupError) as info:
        service.create_campaign(engine, past, now=NOW)
    assert info.value.field == "schedule.start"
    assert str(info.value) == (
        "schedule.start: 2026-11-21 05:30 America/New_York is in the past (it is now "
        "2026-11-21 07:00 America/New_York); omit start to send now, or give a later time"
    )
    # within the missed-start grace (60 minutes) it is accepted and runs late
    late = spec(schedule={"start": "2026-11-21T06:30", "timezone": "America/New_York"})
    assert service.create_campaign(engine, late, now=NOW).start_at < NOW


def test_resume_of_a_finished_campaign_says_only_paused_can_be_resumed(engine: Engine) -> None:
    make_list(engine, "customers", people(1))
    cid = service.create_campaign(engine, spec(), now=NOW).id
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        lifecycle.transition(conn, cid, lifecycle.COMPLETED, now=NOW)
    with pytest.raises(lifecycle.InvalidTransition) as info:
        service.resume_campaign(engine, cid)
    assert str(info.value) == f"campaign {cid} is completed; only a paused campaign can be resumed"
    with pytest.raises(lifecycle.InvalidTransition) as info:
        service.pause_campaign(engine, cid)
    assert str(info.value).endswith("only a running or scheduled campaign can be paused")
