"""Which zone a recipient is sent in and when its row is first due (pure functions); the
contact cooldown's field and its count at create and preview."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import Engine, update

from campaigns import service
from campaigns.campaign_file import CampaignFileError, parse_campaign
from campaigns.delivery_rows import materialise
from campaigns.recipient_time import FirstDue, phone_zone, recipient_zone
from storage import tables
from tests.campaigns.campaign_fixtures import NOW, make_list, people, phone, spec


def test_the_timezone_attribute_wins_over_the_phone_number() -> None:
    assert recipient_zone("+447911123456", {"timezone": "Asia/Tokyo"}, "UTC") == "Asia/Tokyo"


def test_a_region_with_one_zone_gives_it() -> None:
    assert recipient_zone("+4915123456789", {}, "UTC") == "Europe/Berlin"
    assert phone_zone("+12125550143") == "America/New_York"  # a finer prefix: area code


def test_a_region_with_several_zones_takes_the_campaigns() -> None:
    assert phone_zone("+61412345678") is None  # Australia: several zones
    assert recipient_zone("+61412345678", {}, "Europe/Paris") == "Europe/Paris"
    assert recipient_zone("team@g.us", {}, "Europe/Paris") == "Europe/Paris"  # a group


def test_an_unknown_or_blank_attribute_falls_back_to_the_number() -> None:
    assert recipient_zone("+4915123456789", {"timezone": "Mars/Olympus"}, "UTC") == (
        "Europe/Berlin"
    )
    assert recipient_zone("+4915123456789", {"timezone": " "}, "UTC") == "Europe/Berlin"


def test_a_row_is_first_due_at_the_starts_wall_time_in_its_zone() -> None:
    # the campaign starts at 09:00 in Berlin (08:00 UTC), materialised then
    start = datetime(2026, 11, 20, 9, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    due = FirstDue(start, ZoneInfo("Europe/Berlin"), start.astimezone(UTC))
    assert due("Europe/Berlin") == datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    # New York is behind: 09:00 there is 14:00 UTC
    assert due("America/New_York") == datetime(2026, 11, 20, 14, 0, tzinfo=UTC)
    # Tokyo is ahead: its 09:00 has passed, so at once
    assert due("Asia/Tokyo") == datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


def test_a_negative_cooldown_is_refused_naming_the_field() -> None:
    body = {
        "name": "x",
        "list": "l",
        "message": {"type": "text", "text": "hi"},
        "safety": {"contact_cooldown_hours": -1},
    }
    with pytest.raises(CampaignFileError, match=r"safety\.contact_cooldown_hours"):
        parse_campaign(body, "request body")


def test_an_omitted_cooldown_takes_the_default_and_a_given_one_is_kept() -> None:
    body = {"name": "x", "list": "l", "message": {"type": "text", "text": "hi"}}
    spec = parse_campaign(body, "request body")
    assert spec.cooldown_hours == 0
    assert spec.with_cooldown_default(24).safety.contact_cooldown_hours == 24
    body["safety"] = {"contact_cooldown_hours": 0}
    assert parse_campaign(body, "b").with_cooldown_default(24).cooldown_hours == 0


def test_create_and_preview_count_the_contacts_in_their_cooldown(engine: Engine) -> None:
    """A contact another campaign messaged an hour ago: counted by create and preview
    under the setting's default cooldown, which is stored with the campaign."""
    make_list(engine, "customers", people(3))
    earlier = service.create_campaign(engine, spec(), now=NOW)
    with engine.begin() as conn:
        materialise(conn, earlier.id, now=NOW, instances=["A"])
        conn.execute(
            update(tables.deliveries)
            .where(tables.deliveries.c.target == phone(1))
            .values(state="sent", sent_at=NOW - timedelta(hours=1), message_id="M1")
        )
    preview = service.preview_campaign(engine, spec(), default_cooldown_hours=24, now=NOW)
    assert preview.cooldown_excluded == 1
    created = service.create_campaign(engine, spec(), now=NOW, default_cooldown_hours=24)
    assert created.cooldown_excluded == 1 and created.recipients == 3
    stored = service.get_campaign(engine, created.id).spec
    assert stored.safety.contact_cooldown_hours == 24
    off = service.create_campaign(engine, spec(), now=NOW)  # setting 0: none, none stored
    assert off.cooldown_excluded == 0
    assert service.get_campaign(engine, off.id).spec.safety.contact_cooldown_hours is None
