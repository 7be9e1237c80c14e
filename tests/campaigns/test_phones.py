"""Phone normalisation: every rejection reason, and the fast path agrees with phonenumbers."""

from __future__ import annotations

import random

import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaigns.phones import (
    REASON_COUNTRY_CODE,
    REASON_EMPTY,
    REASON_INVALID,
    REASON_LETTERS,
    REASON_SCIENTIFIC,
    REASON_TOO_LONG,
    REASON_TOO_SHORT,
    PhoneResult,
    _slow,
    normalise_many,
    normalise_phone,
)


@pytest.mark.parametrize(
    ("raw", "region", "e164"),
    [
        ("(202) 555-0143", "US", "+12025550143"),
        ("  +44 7911 123456 ", "US", "+447911123456"),
        ("07911 123456", "GB", "+447911123456"),
        ("+44 (0)20 7946 0958", "US", "+442079460958"),
        ("0044 161 496 0123", "GB", "+441614960123"),
        ("+49-151-2345-6780", "US", "+4915123456780"),
        ("+39 06 6982 0000", "US", "+390669820000"),  # Italian leading zero kept
        ("11 91234-5678", "BR", "+5511912345678"),
        ("447911123456.0", "US", "+447911123456"),  # a number cell written as a float
        ("447911123456", "US", "+447911123456"),  # '+' lost by a spreadsheet
        ("2025550143", "US", "+12025550143"),
    ],
)
def test_valid_numbers_become_e164(raw: str, region: str, e164: str) -> None:
    assert normalise_phone(raw, region) == PhoneResult(e164, None)


@pytest.mark.parametrize(
    ("raw", "region", "reason"),
    [
        ("", "US", REASON_EMPTY),
        ("   ", "US", REASON_EMPTY),
        ("call me", "US", REASON_LETTERS),
        ("N/A", "US", REASON_LETTERS),
        ("NA", "US", REASON_LETTERS),
        ("1-800-FLOWERS", "US", REASON_LETTERS),
        ("555-01", "US", REASON_TOO_SHORT),
        ("12", "US", REASON_TOO_SHORT),
        ("+44 7911 123456 789 0123", "US", REASON_TOO_LONG),
        ("202555014312345", "US", REASON_TOO_LONG),
        ("+1 123 456 7890", "US", REASON_INVALID),
        ("087 123 4569", "GB", REASON_INVALID),
        ("4.47E+11", "US", REASON_SCIENTIFIC),
        ("4,47E+11", "US", REASON_SCIENTIFIC),
        ("4.47e11", "US", REASON_SCIENTIFIC),
        ("+999 123 456 789", "US", REASON_COUNTRY_CODE),
    ],
)
def test_rejections_carry_their_reason(raw: str, region: str, reason: str) -> None:
    assert normalise_phone(raw, region) == PhoneResult(None, reason)


def test_plus_fallback_only_when_no_digit_changes() -> None:
    # valid neither in BR nor, unchanged, as +1...: the '+' fallback must not rewrite digits
    assert normalise_phone("116612345775", "BR").e164 is None
    # a French mobile whose '+' was lost, imported with a British default region
    assert normalise_phone("33612345678", "GB").e164 == "+33612345678"


def test_normalise_many_parses_each_distinct_value_once() -> None:
    values = ["+44 7911 123456", "+44 7911 123456", "bad", "+44 7911 123456"]
    out = normalise_many(values, "US")
    assert set(out) == {"+44 7911 123456", "bad"}
    assert out["+44 7911 123456"].e164 == "+447911123456"
    assert out["bad"].reason == REASON_LETTERS


def _variants(seed: int) -> list[tuple[str, str]]:
    """Example numbers of every region, mutated, in international and national forms."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    types = (phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE)
    for region in sorted(phonenumbers.SUPPORTED_REGIONS):
        for kind in types:
            example = phonenumbers.example_number_for_type(region, kind)
            if example is None:
                continue
            nsn = phonenumbers.national_significant_number(example)
            for _ in range(4):
                digits = list(nsn)
                for _ in range(rng.randint(0, 3)):
                    digits[rng.randrange(len(digits))] = str(rng.randint(0, 9))
                s = "".join(digits)
                out.append((f"+{example.country_code}{s}", rng.choice(["US", "GB", "IN"])))
                out.append((f"+{example.country_code} {s[:3]} {s[3:]}", "DE"))
                out.append((s, region))
                out.append(("0" + s, region))
                # the '+' lost by a spreadsheet, read in another region and in its own
                out.append((f"{example.country_code}{s}", rng.choice(["US", "GB", "BR", "RU"])))
                out.append((f"{example.country_code}{s}", region))
    return out


def test_fast_path_agrees_with_phonenumbers_on_every_region() -> None:
    mismatches: list[tuple[str, str, PhoneResult, PhoneResult | str]] = []
    for raw, region in _variants(seed=7):
        ours = normalise_phone(raw, region)
        reference = _slow(raw, region)
        if ours.e164 is not None and _slow(ours.e164, "ZZ").e164 != ours.e164:
            mismatches.append((raw, region, ours, "not valid E.164"))
        if ours.e164 != reference.e164 and not (
            reference.e164 is None and ours.e164 == "+" + raw  # the documented '+' rule
        ):
            mismatches.append((raw, region, ours, reference))
    assert mismatches == []


@settings(max_examples=300, deadline=None)
@given(
    digits=st.text(alphabet="0123456789", min_size=4, max_size=15),
    plus=st.booleans(),
    region=st.sampled_from(["US", "GB", "DE", "BR", "IN", "MX", "AR", "IT", "FR", "NG", "CN"]),
)
def test_fast_path_never_accepts_what_phonenumbers_rejects(
    digits: str, plus: bool, region: str
) -> None:
    raw = ("+" if plus else "") + digits
    ours = normalise_phone(raw, region)
    reference = _slow(raw, region)
    if ours.e164 is not None:
        assert _slow(ours.e164, "ZZ").e164 == ours.e164  # always a valid E.164 number
    if ours.e164 is not None and reference.e164 is None:
        assert not plus and ours.e164 == "+" + digits  # only the '+' fallback may add
    else:
        assert ours.e164 == reference.e164


def test_unicode_digits_and_spaces_give_ascii_e164() -> None:
    assert normalise_phone("+٤٤ ٧٩١١ ١٢٣٤٥٦", "US") == PhoneResult("+447911123456", None)
    assert normalise_phone("+44\u00a07911\u00a0123456", "US") == PhoneResult("+447911123456", None)
    assert normalise_phone("０７９１１ １２３４５６", "GB") == PhoneResult("+447911123456", None)
