"""``campaign show`` reads a stored spec as stored: the same values as the validated spec."""

from __future__ import annotations

import json

import pytest

from campaigns.campaign_file import parse_toml, stored_spec
from campaigns.reading import SpecView, plain_view

BASE = 'name = "x"\nlist = "customers"\n[message]\ntype = "text"\ntext = "Hi {{ name }}"\n'

FILES = {
    "defaults": BASE,
    "window, zone, pace, retry": BASE
    + '[schedule]\nstart = "2026-12-08 10:00"\ntimezone = "Europe/Berlin"\n'
    'window = ["22:00", "06:30"]\nrecipient_timezone = true\n'
    "[pace]\nper_minute = 7.5\ndelay_seconds = [1, 2.5]\ndaily_cap = 40\n"
    '[retry]\nmax_attempts = 2\nuntil = "3d"\nevery = "2h"\n',
    "whole day, unpaced, instances": 'name = "w"\nlist = "customers"\ninstances = ["a", "b"]\n'
    '[message]\ntype = "text"\ntext = "Hi"\n[schedule]\nwindow = ["00:00", "24:00"]\n'
    "[pace]\nper_minute = 0\ndelay_seconds = [0, 0]\n",
    "groups, retry until only": 'name = "g"\ngroups = ["123-456@g.us", "789@g.us"]\n'
    '[message]\ntype = "text"\ntext = "Hi"\n[retry]\nuntil = "1d"\n',
}


@pytest.mark.parametrize("text", FILES.values(), ids=FILES.keys())
def test_a_stored_spec_reads_as_the_validated_one(text: str) -> None:
    spec = parse_toml(text.encode())
    stored = json.loads(json.dumps(spec.model_dump(mode="json")))  # as the column holds it
    assert plain_view(stored) == SpecView.of(stored_spec(stored))
    stored["pace"]["daily_cap"] = None  # no cap (the API's null)
    assert plain_view(stored) == SpecView.of(stored_spec(stored))


def test_a_spec_not_in_the_current_shape_is_left_to_the_validator() -> None:
    spec = parse_toml(BASE.encode()).model_dump(mode="json")
    assert plain_view(spec) is not None
    missing = json.loads(json.dumps(spec))
    del missing["pace"]["daily_cap"]  # an older spec: the model's default fills it
    assert plain_view(missing) is None
    odd = json.loads(json.dumps(spec))
    odd["retry"]["max_attempts"] = "4"
    assert plain_view(odd) is None


def test_variants_and_ab_tests_are_read_through_the_validator() -> None:
    text = (
        BASE + '[[message.variants]]\ntext = "A {{ name }}"\n'
        '[[message.variants]]\ntext = "B {{ name }}"\n[ab]\nafter = "2h"\n'
    )
    assert plain_view(parse_toml(text.encode()).model_dump(mode="json")) is None
