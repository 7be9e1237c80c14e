"""Phone normalisation: every rejection reason, the reading rule for digits without '+',
and the fast path agrees with that rule spelt out with phonenumbers alone."""

from __future__ import annotations

import random
import re

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


def test_international_reading_never_rewrites_digits() -> None:
    # valid neither in BR nor, unchanged, as +1...
    assert normalise_phone("116612345775", "BR").e164 is None
    # a French mobile whose '+' was lost, imported with a British default region
    assert normalise_phone("33612345678", "GB").e164 == "+33612345678"


@pytest.mark.parametrize(
    ("raw", "region", "e164"),
    [
        # an Excel number cell of a German mobile: valid read as +49 4915112345678 (a
        # fixed line) too, but that reading is no mobile: the international one wins
        ("4915112345678", "DE", "+4915112345678"),
        ("4915112345678.0", "DE", "+4915112345678"),
        ("41791234567", "DE", "+41791234567"),  # a Swiss mobile, not Germany's 0417...
        ("447911123456", "DE", "+447911123456"),
        ("015112345678", "DE", "+4915112345678"),  # trunk prefix: the region applies
        ("3012345678", "DE", "+493012345678"),  # valid only nationally
        # US: both readings valid (+45 85550123 is Danish), the national one is a mobile
        ("4585550123", "US", "+14585550123"),
        ("2025550143", "US", "+12025550143"),
        ("12025550143", "US", "+12025550143"),
        ("7911123456", "GB", "+447911123456"),
        # RU trunk prefix 8: a Moscow landline, though +84 951234567 is Vietnamese
        ("8 495 123-45-67", "RU", "+74951234567"),
        ("8613800138000", "RU", "+8613800138000"),  # not valid in Russia: China
        ("0049 151 12345678", "DE", "+4915112345678"),
        ("0049 151 12345678", "US", "+4915112345678"),  # 00 even where the IDD is 011
        ("011 49 151 12345678", "US", "+4915112345678"),
        ("tel:+4915112345678", "US", "+4915112345678"),
        ("TEL:+49-151-1234-5678;ext=1", "US", "+4915112345678"),
        ("tel:0151 12345678", "DE", "+4915112345678"),
        ("https://wa.me/4915112345678", "US", "+4915112345678"),
        ("wa.me/4915112345678?text=Hi", "US", "+4915112345678"),
        ("http://www.wa.me/+447911123456", "US", "+447911123456"),
        ("https://api.whatsapp.com/send?phone=4915112345678&text=x", "US", "+4915112345678"),
        ("https://api.whatsapp.com/send/?text=x&phone=%2B447911123456", "DE", "+447911123456"),
        ("whatsapp://send?phone=447911123456", "US", "+447911123456"),
    ],
)
def test_reading_rule_for_digits_links_and_prefixes(raw: str, region: str, e164: str) -> None:
    assert normalise_phone(raw, region) == PhoneResult(e164, None)
    if raw[:1].isdigit() and not raw.endswith(".0"):  # what the reference spells out
        assert _reference(raw, region) == e164


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("wa.me/message/ABCDEF", REASON_LETTERS),
        ("https://wa.me/", REASON_LETTERS),
        ("tel:", REASON_EMPTY),
        ("tel:call-me", REASON_LETTERS),
    ],
)
def test_links_without_a_number_are_rejected(raw: str, reason: str) -> None:
    assert normalise_phone(raw, "US") == PhoneResult(None, reason)


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


def _parse(text: str, region: str | None) -> str | None:
    try:
        number = phonenumbers.parse(text, region)
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_valid_number(number):
        return None
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def _reference(raw: str, region: str) -> str | None:
    """The reading rule of docs/contacts-import.md with phonenumbers alone (plain text)."""
    text = raw.strip()
    if text.startswith("+"):
        return _parse(text, region)
    digits = re.sub(r"\D", "", text)
    national = _parse(text, region)
    written = "+" + (digits[2:] if digits.startswith("00") else digits)
    international = _parse(written, None)
    if international != written:  # valid only with a digit changed: not this reading
        international = None
    if national is None or international is None or national == international:
        return national or international
    metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
    trunk = metadata.national_prefix if metadata is not None else None
    kind = phonenumbers.number_type(phonenumbers.parse(national))
    mobile = kind in (
        phonenumbers.PhoneNumberType.MOBILE,
        phonenumbers.PhoneNumberType.FIXED_LINE_OR_MOBILE,
    )
    return national if (trunk and digits.startswith(trunk)) or mobile else international


def test_fast_path_agrees_with_the_rule_on_every_region() -> None:
    mismatches: list[tuple[str, str, PhoneResult, str | None]] = []
    for raw, region in _variants(seed=7):
        ours = normalise_phone(raw, region)
        reference = _reference(raw, region)
        if ours.e164 is not None and _parse(ours.e164, None) != ours.e164:
            mismatches.append((raw, region, ours, "not valid E.164"))
        if ours.e164 != reference:
            mismatches.append((raw, region, ours, reference))
    assert mismatches == []


@settings(max_examples=300, deadline=None)
@given(
    digits=st.text(alphabet="0123456789", min_size=4, max_size=15),
    plus=st.booleans(),
    region=st.sampled_from(["US", "GB", "DE", "BR", "IN", "MX", "AR", "IT", "FR", "NG", "CN"]),
)
def test_fast_path_gives_the_rule_on_any_digits(digits: str, plus: bool, region: str) -> None:
    raw = ("+" if plus else "") + digits
    ours = normalise_phone(raw, region)
    if ours.e164 is not None:
        assert _parse(ours.e164, None) == ours.e164  # always a valid E.164 number
    assert ours.e164 == _reference(raw, region)


def test_unicode_digits_and_spaces_give_ascii_e164() -> None:
    assert normalise_phone("+٤٤ ٧٩١١ ١٢٣٤٥٦", "US") == PhoneResult("+447911123456", None)
    assert normalise_phone("+44\u00a07911\u00a0123456", "US") == PhoneResult("+447911123456", None)
    assert normalise_phone("０７９１１ １２３４５６", "GB") == PhoneResult("+447911123456", None)


def test_mobile_test_agrees_with_phonenumbers_number_type() -> None:
    from campaigns.phones import _country_rules

    mobile = (
        phonenumbers.PhoneNumberType.MOBILE,
        phonenumbers.PhoneNumberType.FIXED_LINE_OR_MOBILE,
    )
    checked = 0
    for raw, _ in _variants(seed=3):
        if not raw.startswith("+"):
            continue
        number = phonenumbers.parse(raw)
        rules = _country_rules(number.country_code)
        if rules is None or not phonenumbers.is_valid_number(number):
            continue
        nsn = phonenumbers.national_significant_number(number)
        home = rules.region_of(nsn)
        assert home is not None, raw
        assert home.is_mobile(nsn) == (phonenumbers.number_type(number) in mobile), raw
        checked += 1
    assert checked > 500


def test_region_hint_names_the_country_of_local_numbers() -> None:
    from campaigns.phones import region_hint, region_name

    uk = ["07911 123456", "07911 123457", "07400 123458", "+14155550101", "call me"]
    hint = region_hint(uk, "US")
    assert hint is not None and (hint.region, hint.matched, hint.sampled) == ("GB", 3, 3)
    assert hint.message == "Most numbers look like United Kingdom (+44) local numbers: use GB?"
    assert region_hint(["07911123456", "07400123457"], "US").region == "GB"  # type: ignore[union-attr]
    assert region_hint(["0151 12345678", "0170 1234567"], "US").region == "DE"  # type: ignore[union-attr]
    assert region_hint(uk, "GB") is None  # they fit already
    assert region_hint(["2025550143", "+447911123456"], "US") is None
    assert region_name("gb") == "United Kingdom"
