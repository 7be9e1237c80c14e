"""A/B variants: assignment, the z-test, the comparison's honest note; the retry
horizon's arithmetic; the campaign file's new fields."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from campaigns import variants
from campaigns.campaign_file import CampaignFileError, CampaignSpec, parse_campaign
from campaigns.variety import VarietyCount, body_digest
from scheduler.retry import RetryPolicy
from scheduler.retry_horizon import next_try

BASE = {"name": "x", "list": "l"}


def _spec(weights: tuple[float, ...] = (1, 3)) -> CampaignSpec:
    message = {
        "type": "text",
        "variants": [{"text": f"text {i}", "weight": w} for i, w in enumerate(weights)],
    }
    return parse_campaign({**BASE, "message": message})


def test_assignment_is_stable_and_follows_the_weights() -> None:
    spec = _spec((1, 3))
    message = spec.message
    targets = [f"+4915100{i:05d}" for i in range(4000)]
    first = [variants.assign(7, t, message)[0] for t in targets]
    assert first == [variants.assign(7, t, message)[0] for t in targets]
    share = Counter(first)["B"] / len(first)
    assert 0.72 < share < 0.78, share
    other = [variants.assign(8, t, message)[0] for t in targets]
    assert other != first  # another campaign draws afresh


def test_variants_inherit_the_message_fields_and_round_trip() -> None:
    spec = parse_campaign(
        {
            **BASE,
            "message": {
                "type": "media",
                "media_url": "https://example.com/a.png",
                "variants": [{"caption": "one"}, {"caption": "two", "name": "Two"}],
            },
        }
    )
    assert [v.media_url for v in spec.message.variants] == ["https://example.com/a.png"] * 2
    assert spec.message.variant_names() == ["A", "Two"]
    assert parse_campaign(spec.model_dump(mode="json")) == spec


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"message": {"type": "text", "variants": [{"text": "only"}]}}, "message.variants"),
        (
            {"message": {"type": "text", "variants": [{"text": "a"}, {"text": "b", "weight": 0}]}},
            "message.variants[1].weight",
        ),
        (
            {
                "message": {
                    "type": "text",
                    "variants": [{"text": "a", "name": "X"}, {"text": "b", "name": "X"}],
                }
            },
            "message.variants[1].name",
        ),
        ({"message": {"type": "text", "text": "hi"}, "ab": {}}, "ab"),
        ({"message": {"type": "text", "text": "hi"}, "retry": {"until": "2 days"}}, "retry.until"),
        (
            {"message": {"type": "text", "text": "hi"}, "retry": {"until": "1h", "every": "6h"}},
            "retry.every",
        ),
        ({"message": {"type": "text", "text": "hi"}, "retry": {"until": "90d"}}, "retry.until"),
    ],
)
def test_bad_fields_are_named(data: dict[str, object], path: str) -> None:
    with pytest.raises(CampaignFileError) as caught:
        parse_campaign({**BASE, **data})
    assert path in [e.path for e in caught.value.errors], caught.value.errors


def test_the_z_test_matches_a_worked_example() -> None:
    # 120 of 400 against 80 of 400: pooled 0.25, se 0.030619, z = 3.266, p = 0.0011
    z, p = variants.two_proportion_z(120, 400, 80, 400)  # type: ignore[misc]
    assert z == pytest.approx(3.266, abs=1e-3) and p == pytest.approx(0.00109, abs=1e-4)
    assert variants.two_proportion_z(0, 10, 0, 10) is None  # no variance
    assert variants.two_proportion_z(1, 0, 1, 10) is None


def test_the_note_says_not_significant_at_small_n_and_significant_when_it_is() -> None:
    message = _spec((1, 1)).message
    small = {"A": {"rows": 10, "sent": 10, "read": 9}, "B": {"rows": 10, "sent": 10, "read": 2}}
    compared = variants.compare(message, small, "read_rate")
    assert compared.best == "A" and compared.tests["B"] is None
    assert "not significant: fewer than 30 sent" in compared.note
    big = {"A": {"sent": 400, "read": 120}, "B": {"sent": 400, "read": 80}}
    compared = variants.compare(message, big, "read_rate")
    assert compared.best == "A" and "significant" in compared.note
    assert "not significant" not in compared.note
    close = {"A": {"sent": 400, "read": 101}, "B": {"sent": 400, "read": 100}}
    assert "not significant" in variants.compare(message, close, "read_rate").note
    # opt-outs: lower is better
    opted = {"A": {"sent": 50, "opted_out": 5}, "B": {"sent": 50, "opted_out": 1}}
    assert variants.compare(message, opted, "opt_out_rate").best == "B"


def test_the_retry_horizon_spaces_tries_until_it_ends() -> None:
    made = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    policy = RetryPolicy(horizon_seconds=3 * 86400, every_seconds=6 * 3600)
    assert next_try(policy, made, made) == made + timedelta(hours=6)
    late = made + timedelta(days=2, hours=20)
    assert next_try(policy, made, late) is None  # 6 h later is past the 3 days
    assert next_try(RetryPolicy(), made, made) is None  # no horizon


def test_variety_counts_distinct_bodies_and_warns_when_few() -> None:
    count = VarietyCount(limit=10)
    for i in range(12):
        count.add({"type": "text", "text": f"hi {i % 2}"})
    result = count.result(20)
    assert (result.sampled, result.distinct) == (10, 2)
    assert result.warning and "20 identical messages in a row" in result.warning
    varied = VarietyCount()
    for i in range(10):
        varied.add({"type": "text", "text": f"hi {i}"})
    assert varied.result(20).warning is None
    assert body_digest({"a": 1, "b": 2}) == body_digest({"b": 2, "a": 1})
