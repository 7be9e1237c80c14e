"""The campaign file written as TOML reads back as the same campaign (every sample, every
message kind, hostile text), and what TOML cannot hold is refused naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaigns.campaign_file import (
    CampaignFileError,
    load_campaign_file,
    parse_campaign,
    parse_toml,
)
from campaigns.campaign_toml import spec_to_toml

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _round_trip(data: dict[str, Any]) -> str:
    spec = parse_campaign(data)
    text = spec_to_toml(spec)
    assert parse_toml(text.encode("utf-8")) == spec, text
    return text


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.toml")))
def test_every_sample_reads_back_the_same(sample: str) -> None:
    spec = load_campaign_file(SAMPLES / sample)
    assert parse_toml(spec_to_toml(spec).encode()) == spec


def test_an_audience_with_where_and_every_section() -> None:
    text = _round_trip(
        {
            "name": "Everything",
            "audience": {
                "lists": ["customers", "vip list"],
                "tags": ["gold"],
                "where": {"city": ["Berlin", "Köln"], "stadtteil_größe": "pro", "age": 3},
                "exclude_tags": ["stop"],
            },
            "instances": ["A1", "B2"],
            "message": {
                "type": "media",
                "media_url": "https://x.example/a.pdf",
                "filename": "a.pdf",
            },
            "schedule": {
                "start": "2030-04-01T09:00:00+02:00",
                "timezone": "Europe/Berlin",
                "window": ["22:00", "06:00"],
                "cron": "0 9 * * MON",
                "recipient_timezone": True,
                "missed_grace_minutes": 5,
            },
            "pace": {"per_minute": 0.5, "delay_seconds": [1.25, 2], "daily_cap": 7},
            "retry": {"max_attempts": 2, "backoff_seconds": 1.5},
            "safety": {"max_failure_rate": 0.25, "min_sample": 3, "contact_cooldown_hours": 0},
        }
    )
    assert text.startswith('name = "Everything"\ninstances = ["A1", "B2"]\n\n[audience]\n')
    assert '"stadtteil_größe" = "pro"' in text


def test_a_null_daily_cap_has_no_toml_form() -> None:
    spec = parse_campaign(
        {
            "name": "n",
            "list": "l",
            "message": {"type": "text", "text": "t"},
            "pace": {"daily_cap": None},
        }
    )
    with pytest.raises(CampaignFileError) as caught:
        spec_to_toml(spec)
    assert caught.value.errors[0].path == "pace.daily_cap"


#: text a campaign file may hold: no characters a database refuses (NUL: gateway.text)
STORABLE = st.characters(codec="utf-8", exclude_characters="{}%#|\x00")
TEXT = st.text(
    alphabet=STORABLE,
    min_size=1,
    max_size=60,
).filter(lambda s: s.strip())


@settings(max_examples=150, deadline=None)
@given(
    name=TEXT,
    text=TEXT,
    title=TEXT,
    footer=st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30),
)
def test_any_text_reads_back_the_same(name: str, text: str, title: str, footer: str) -> None:
    _round_trip(
        {
            "name": name,
            "list": "customers",
            "message": {
                "type": "list",
                "text": text,
                "title": title,
                "footer": footer,
                "button_text": 'Open "it"\\now',
                "sections": [{"title": "a\tb", "rows": [{"title": text, "row_id": "r\n1"}]}],
            },
        }
    )


def test_follow_up_steps_read_back_the_same() -> None:
    text = _round_trip(
        {
            "name": "Invite",
            "list": "guests",
            "message": {
                "type": "interactive",
                "text": "Coming?",
                "buttons": [{"display_text": "Yes", "id": "yes"}],
            },
            "steps": [
                {"when": "tapped", "button": "yes", "message": {"type": "text", "text": "Info"}},
                {
                    "when": "no_reply",
                    "after": "2d",
                    "stop_on_reply": False,
                    "message": {"type": "media", "media_url": "https://x.test/a.jpg"},
                },
            ],
        }
    )
    assert text.count("[[steps]]") == 2 and "[steps.message]" in text, text
