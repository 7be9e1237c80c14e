"""normalise_batch gives exactly normalise_phone's answer for every value."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from campaigns.phones import normalise_batch, normalise_phone
from tests.campaigns.test_phones import _variants

EDGE_CASES = [
    "",
    "   ",
    "+",
    "++447911123456",
    "+44 7911 123456",
    "(+44) 7911 123456",
    "-+447911123456",
    "44+7911123456",
    "447911123456",
    "447911123456.0",
    "+447911123456.00",
    "4479111234.00",
    "202.555.0100",
    "(202) 555-0100",
    "202-555-0100 ext. 12",
    "4.47E+11",
    "call me",
    "n/a",
    "123",
    "0044 7911 123456",
    "011 44 7911 123456",
    "1 202 555 0100",
    "+1 (202) 555-0100",
    "+44\u00a07911\u00a0123456",
    "+٤٤ ٧٩١١ ١٢٣٤٥٦",
    "０７９１１ １２３４５６",
    "2025550100\r",
    "\t2025550100\n",
    "+44 7911\u2009123456",
    "1234567890123456789",
    "+1234567890123456789",
    "+999 123456",
    "07911 123456",
    "a\x1fb",
]


def _check(values: list[str], region: str) -> None:
    e164, reasons = normalise_batch(values, region)
    expected = [normalise_phone(v, region) for v in values]
    assert list(zip(e164, reasons, strict=True)) == [tuple(r) for r in expected]


def test_edge_cases_in_several_regions() -> None:
    for region in ("US", "GB", "DE", "BR", "IN", "FR", "RU", "AR"):
        _check(EDGE_CASES, region)
        _check([v for v in EDGE_CASES if "\x1f" not in v], region)


def test_example_numbers_of_every_region() -> None:
    by_region: dict[str, list[str]] = {}
    for raw, region in _variants(seed=11):
        by_region.setdefault(region, []).append(raw)
    for region, values in by_region.items():
        _check(values, region)


def test_empty_batch() -> None:
    assert normalise_batch([], "US") == ([], [])


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.text(alphabet="0123456789 +-.()/\u00a0\tExa", min_size=0, max_size=18), max_size=30
    ),
    region=st.sampled_from(["US", "GB", "DE", "BR", "IN", "MX", "IT", "NG", "CN"]),
)
def test_any_mix_of_digits_and_separators(values: list[str], region: str) -> None:
    _check(values, region)


def test_random_formatted_numbers() -> None:
    rng = random.Random(5)
    values = []
    for _ in range(3000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(6, 14)))
        fmt = rng.choice(["{}", "+{}", "({}", "{}.0", "+{} ", " {}", "0{}"])
        values.append(fmt.format(digits))
    for region in ("US", "GB", "IN"):
        _check(values, region)
