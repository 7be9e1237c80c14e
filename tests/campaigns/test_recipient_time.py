"""Which zone a recipient is sent in, and when its row is first due (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from campaigns.campaign_file import CampaignFileError, parse_campaign
from campaigns.recipient_time import FirstDue, phone_zone, recipient_zone


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
