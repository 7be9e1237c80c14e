"""The campaign file: parsing, defaults, every rule with its field path, round trip."""

from __future__ import annotations

import json
import math
import tomllib
from datetime import UTC, datetime, time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from campaigns.campaign_file import (
    CampaignFileError,
    CampaignSpec,
    FieldError,
    load_campaign_file,
    parse_campaign,
    parse_toml,
    stored_spec,
)

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _errors(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(CampaignFileError) as info:
        parse_campaign(data, "test.toml")
    return {e.path: e.message for e in info.value.errors}


def _base(**message: Any) -> dict[str, Any]:
    return {"name": "n", "list": "customers", "message": {"type": "text", "text": "hi", **message}}


def test_issue_example_parses_with_defaults() -> None:
    data = tomllib.loads(
        """
name = "November promo"
list = "customers"
instances = ["6501A9176BD17"]
[message]
type = "text"
text = "{Hi|Hello} {{ name }}, our November offer is here."
[schedule]
start = "2026-11-28T09:00"
timezone = "Europe/Berlin"
window = ["09:00", "20:00"]
[pace]
per_minute = 20
delay_seconds = [5, 15]
daily_cap = 500
[retry]
max_attempts = 4
"""
    )
    spec = parse_campaign(data)
    assert spec.list == "customers"
    assert spec.schedule.window == (time(9), time(20))
    # 09:00 in Berlin in November (CET, UTC+1) is 08:00 UTC
    assert spec.start_at_utc() == datetime(2026, 11, 28, 8, 0, tzinfo=UTC)
    assert spec.retry.backoff_seconds == 30
    assert spec.safety.max_failure_rate == 0.5
    assert spec.schedule.missed_grace_minutes == 60


def test_round_trip_through_json() -> None:
    spec = parse_campaign(_base())
    again = CampaignSpec.model_validate(spec.model_dump(mode="json"))
    assert again == spec


def test_start_omitted_means_none() -> None:
    assert parse_campaign(_base()).start_at_utc() is None


def test_every_error_reported_at_once_with_paths() -> None:
    data = {
        "name": "",
        "list": "x",
        "groups": ["abc"],
        "instnces": ["a"],
        "message": {
            "type": "interactive",
            "text": "{{ name ",
            "buttons": [
                {"kind": "cta_url", "display_text": "Go", "url": "ftp:/x"},
                {"kind": "cta_call", "display_text": "Call", "phone_number": "123", "id": "x"},
                {"kind": "quick_reply", "display_text": "ok"},
                {"kind": "cta_copy", "display_text": "code"},
            ],
        },
        "schedule": {"timezone": "Mars/Base", "window": ["10:00", "10:00"]},
        "pace": {"per_minute": -1, "delay_seconds": [20, 10]},
    }
    errs = _errors(data)
    assert errs["message.buttons[0].url"].startswith("not a URL")
    assert "not used" in errs["message.buttons[1].id"]
    assert "'+'" in errs["message.buttons[1].phone_number"]
    assert "required" in errs["message.buttons[2].id"]
    assert "required" in errs["message.buttons[3].copy_code"]
    assert "template syntax error" in errs["message.text"]
    assert "unknown timezone" in errs["schedule.timezone"]
    assert "differ" in errs["schedule.window"]
    assert "negative" in errs["pace.per_minute"]
    assert "above maximum" in errs["pace.delay_seconds"]
    assert "unknown field" in errs["instnces"]
    assert errs["name"] == "must not be empty"
    assert "not both" in errs["groups"]
    assert "@g.us" in errs["groups[0]"]
    assert "text or media" in errs["message.type"]


def test_str_lists_each_error_with_its_path() -> None:
    with pytest.raises(CampaignFileError) as info:
        parse_campaign(_base(type="media"), "promo.toml")
    text = str(info.value)
    assert text.startswith("promo.toml: ")
    assert "message.media_url: required for a media message" in text


@pytest.mark.parametrize(
    ("message", "path", "fragment"),
    [
        ({"type": "text", "text": "  "}, "message.text", "required"),
        ({"type": "media", "media_url": "not a url"}, "message.media_url", "not a URL"),
        ({"type": "interactive", "text": "t"}, "message.buttons", "at least one button"),
        (
            {
                "type": "template",
                "text": "t",
                "buttons": [{"kind": "cta_url", "display_text": "a", "url": "https://e.x"}],
            },
            "message.buttons[0].kind",
            "quick_reply",
        ),
        ({"type": "list", "text": "t", "button_text": "b"}, "message.sections", "at least one"),
        (
            {"type": "list", "text": "t", "button_text": "b", "sections": [{"title": "s"}]},
            "message.sections[0].rows",
            "at least one row",
        ),
        (
            {
                "type": "list",
                "text": "t",
                "button_text": "b",
                "sections": [
                    {"rows": [{"title": "a", "row_id": "r"}, {"title": "b", "row_id": "r"}]}
                ],
            },
            "message.sections[0].rows[1].row_id",
            "duplicate",
        ),
        (
            {
                "type": "list",
                "text": "t",
                "button_text": "b",
                "sections": [{"rows": [{"title": "a"}]}],
            },
            "message.sections[0].rows[0].row_id",
            "required",
        ),
        (
            {"type": "text", "text": "t", "media_url": "https://x.y/a"},
            "message.media_url",
            "not used",
        ),
        ({"type": "fax", "text": "t"}, "message.type", "'text'"),
    ],
)
def test_message_rules(message: dict[str, Any], path: str, fragment: str) -> None:
    errs = _errors({"name": "n", "list": "l", "message": message})
    assert path in errs, errs
    assert fragment in errs[path]


def test_list_or_groups_required() -> None:
    errs = _errors({"name": "n", "message": {"type": "text", "text": "t"}})
    assert "required" in errs["list"]


def test_groups_with_media_is_fine() -> None:
    spec = parse_campaign(
        {
            "name": "g",
            "groups": ["120363041234567890@g.us"],
            "message": {"type": "media", "media_url": "https://e.x/menu.pdf", "caption": "Menu"},
        }
    )
    assert spec.is_group_campaign
    assert spec.message.media_caption == "Menu"


def test_cron_validated() -> None:
    errs = _errors({**_base(), "schedule": {"cron": "61 * * * *"}})
    assert "crontab" in errs["schedule.cron"]
    spec = parse_campaign(
        {**_base(), "schedule": {"cron": "0 9 * * MON", "timezone": "Asia/Tokyo"}}
    )
    assert spec.schedule.cron == "0 9 * * MON"


def test_overnight_window() -> None:
    spec = parse_campaign(
        {**_base(), "schedule": {"window": ["22:00", "06:00"], "timezone": "Europe/Berlin"}}
    )
    # 22:30 Berlin (21:30 UTC in winter) is inside, 12:00 Berlin is outside
    assert spec.schedule.in_window(datetime(2026, 11, 28, 21, 30, tzinfo=UTC))
    assert spec.schedule.in_window(datetime(2026, 11, 28, 4, 0, tzinfo=UTC))
    assert not spec.schedule.in_window(datetime(2026, 11, 28, 11, 0, tzinfo=UTC))


def test_day_window() -> None:
    spec = parse_campaign({**_base(), "schedule": {"window": ["09:00", "20:00"]}})
    assert spec.schedule.in_window(datetime(2026, 1, 1, 9, 0, tzinfo=UTC))
    assert not spec.schedule.in_window(datetime(2026, 1, 1, 20, 0, tzinfo=UTC))


def test_numbers_validated() -> None:
    errs = _errors(
        {
            **_base(),
            "pace": {"delay_seconds": [-1, 5], "daily_cap": 0},
            "retry": {"max_attempts": 0, "backoff_seconds": 0},
            "safety": {"max_failure_rate": 1.5, "min_sample": 0},
        }
    )
    assert "negative" in errs["pace.delay_seconds[0]"]
    assert "greater than 0" in errs["pace.daily_cap"]
    for path in (
        "retry.max_attempts",
        "retry.backoff_seconds",
        "safety.max_failure_rate",
        "safety.min_sample",
    ):
        assert path in errs


def _each_says(errs: dict[str, str], expected: dict[str, str]) -> None:
    """Each field in ``expected`` has an error mentioning the given words."""
    assert {p: w for p, w in expected.items() if w in errs.get(p, "")} == expected, errs


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_numbers_are_refused_naming_the_field(value: float) -> None:
    errs = _errors(
        {
            **_base(),
            "pace": {"per_minute": value, "delay_seconds": [value, value]},
            "retry": {"backoff_seconds": value},
            "safety": {"max_failure_rate": value},
        }
    )
    paths = ("per_minute", "delay_seconds[0]", "delay_seconds[1]")
    expected = {f"pace.{p}": "finite" for p in paths}
    _each_says(
        errs, {**expected, "retry.backoff_seconds": "finite", "safety.max_failure_rate": "finite"}
    )


def test_absurd_numbers_are_refused_naming_the_field() -> None:
    errs = _errors(
        {
            **_base(),
            "schedule": {"missed_grace_minutes": 10**30},
            "pace": {"per_minute": 1e308, "delay_seconds": [1e308, 1e308], "daily_cap": 10**30},
            "retry": {"max_attempts": 10**20, "backoff_seconds": 1e308},
            "safety": {"min_sample": 10**20},
        }
    )
    capped = ("schedule.missed_grace_minutes", "retry.max_attempts", "retry.backoff_seconds")
    _each_says(
        errs,
        {
            "pace.per_minute": "at most 100,000",
            "pace.delay_seconds[0]": "at most 86,400",
            "pace.delay_seconds[1]": "at most 86,400",
            "pace.daily_cap": "at most 10,000,000",
            "safety.min_sample": "less than or equal",
            **dict.fromkeys(capped, "less than or equal"),
        },
    )


def test_inf_in_a_toml_file_is_refused() -> None:
    text = 'name = "x"\nlist = "l"\n[message]\ntype = "text"\ntext = "hi"\n'
    with pytest.raises(CampaignFileError) as caught:
        parse_toml((text + "[pace]\ndelay_seconds = [inf, inf]\n").encode(), "spring.toml")
    assert str(caught.value).startswith("spring.toml: 2 problems")
    assert "pace.delay_seconds[0]: must be a finite number (not inf or nan)" in str(caught.value)


def test_load_file_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(CampaignFileError) as info:
        load_campaign_file(missing)
    assert "cannot read file" in str(info.value)
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "x\n')
    with pytest.raises(CampaignFileError) as info:
        load_campaign_file(broken)
    assert "not valid TOML" in str(info.value)
    assert info.value.errors == [info.value.errors[0]]
    assert isinstance(info.value.errors[0], FieldError)


@pytest.mark.parametrize(
    "name",
    ["campaign.toml", "campaign-interactive.toml", "campaign-list.toml", "campaign-group.toml"],
)
def test_samples_are_valid(name: str) -> None:
    spec = load_campaign_file(SAMPLES / name)
    assert spec.name


def test_lengths_fit_the_columns() -> None:
    errs = _errors(
        {
            "name": "n" * 301,
            "groups": ["1" * 70 + "@g.us"],
            "instances": ["I" * 65],
            "message": {"type": "text", "text": "t"},
        }
    )
    assert "300" in errs["name"]
    assert "@g.us" in errs["groups[0]"]
    assert "64" in errs["instances[0]"]


def test_per_minute_zero_means_no_rate_limit() -> None:
    spec = parse_campaign({**_base(), "pace": {"per_minute": 0, "delay_seconds": [0, 0]}})
    assert spec.pace.per_minute == 0


def test_window_hours_are_lenient_but_checked() -> None:
    spec = parse_campaign({**_base(), "schedule": {"window": ["9:00", "24:00"]}})
    assert spec.schedule.window == (time(9), time(0))
    assert spec.schedule.in_window(datetime(2026, 1, 1, 23, 59, tzinfo=UTC))
    assert not spec.schedule.in_window(datetime(2026, 1, 1, 8, 59, tzinfo=UTC))
    errs = _errors({**_base(), "schedule": {"window": ["nine", "10:00"]}})
    assert "HH:MM" in errs["schedule.window"]
    errs = _errors({**_base(), "schedule": {"window": ["09:00"]}})
    assert errs["schedule.window[1]"] == "required"


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("campaign*.toml")))
def test_every_sample_round_trips_through_stored_json(sample: str) -> None:
    """File -> stored JSON (as text, as a database keeps it) -> the same CampaignSpec."""
    spec = load_campaign_file(SAMPLES / sample)
    stored = json.loads(json.dumps(spec.model_dump(mode="json")))
    assert stored_spec(stored) == spec
    assert stored_spec(stored).model_dump(mode="json") == stored
    window = stored["schedule"]["window"]
    assert window is None or all(len(w) == 5 for w in window)  # HH:MM, as written


_clock = st.tuples(st.integers(0, 23), st.integers(0, 59))


@given(
    begin=_clock,
    end=_clock,
    seconds=st.booleans(),
    zone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"]),
    start=st.none() | st.datetimes(datetime(2000, 1, 1), datetime(2100, 1, 1)),
    cron=st.none() | st.sampled_from(["*/2 * * * *", "0 9 * * MON", "30 22 1 * *"]),
    grace=st.integers(0, 10_000),
    per_minute=st.floats(0, 1000),
    delays=st.tuples(st.floats(0, 100), st.floats(0, 100)).map(sorted),
    cap=st.none() | st.integers(1, 10_000),
)
def test_any_schedule_and_pace_round_trip(
    begin: tuple[int, int],
    end: tuple[int, int],
    seconds: bool,
    zone: str,
    start: datetime | None,
    cron: str | None,
    grace: int,
    per_minute: float,
    delays: list[float],
    cap: int | None,
) -> None:
    assume(begin != end)
    fmt = "{:02d}:{:02d}:00" if seconds else "{:02d}:{:02d}"
    schedule: dict[str, Any] = {
        "timezone": zone,
        "window": [fmt.format(*begin), fmt.format(*end)],
        "missed_grace_minutes": grace,
    }
    if start is not None:
        schedule["start"] = start.replace(microsecond=0).isoformat()
    if cron is not None:
        schedule["cron"] = cron
    pace = {"per_minute": per_minute, "delay_seconds": delays, "daily_cap": cap}
    spec = parse_campaign({**_base(), "schedule": schedule, "pace": pace})
    stored = json.loads(json.dumps(spec.model_dump(mode="json")))
    assert stored["schedule"]["window"] == ["{:02d}:{:02d}".format(*t) for t in (begin, end)]
    assert stored_spec(stored) == spec


def test_a_window_stored_with_seconds_reads_back() -> None:
    """Specs stored before times were kept as HH:MM ("09:00:00") still read."""
    data = json.loads(json.dumps(parse_campaign(_base()).model_dump(mode="json")))
    data["schedule"]["window"] = ["09:00:00", "20:00:30"]
    spec = stored_spec(data)
    assert spec.schedule.window == (time(9), time(20, 0, 30))
    assert spec.model_dump(mode="json")["schedule"]["window"] == ["09:00", "20:00:30"]
    assert stored_spec(spec.model_dump(mode="json")) == spec


def test_a_stored_spec_that_no_longer_validates_names_the_field() -> None:
    data = parse_campaign(_base()).model_dump(mode="json")
    data["schedule"]["window"] = ["nine", "20:00"]
    with pytest.raises(CampaignFileError) as info:
        stored_spec(data, 7)
    assert info.value.source == "stored campaign 7"
    assert [e.path for e in info.value.errors] == ["schedule.window"]


@pytest.mark.parametrize(
    "raw", [b"a = " + b"[" * 5000 + b"]" * 5000, b"a = " + b"{b=" * 3000 + b"1" + b"}" * 3000]
)
def test_toml_nested_too_deeply_is_a_file_error(raw: bytes) -> None:
    with pytest.raises(CampaignFileError) as caught:
        parse_toml(raw, "deep.toml")
    assert str(caught.value) == "deep.toml: 1 problem\n  not valid TOML: nested too deeply"


def test_a_whole_day_window_is_kept_as_written() -> None:
    spec = parse_campaign({**_base(), "schedule": {"window": ["00:00", "24:00"]}})
    assert spec.schedule.in_window(datetime(2026, 1, 1, 23, 59, tzinfo=UTC))
    assert spec.schedule.in_window(datetime(2026, 1, 1, 0, 0, tzinfo=UTC))
    stored = spec.model_dump(mode="json")
    assert stored["schedule"]["window"] == ["00:00", "24:00"]
    assert stored_spec(stored) == spec
    errs = _errors({**_base(), "schedule": {"window": ["09:00", "09:00"]}})
    assert "must differ" in errs["schedule.window"]
