"""Phone numbers to E.164, with a reason for every value that cannot be used.

The reading rule (docs/contacts-import.md, "Which country a number belongs to"): a value
with ``+`` (also ``tel:+...``, ``wa.me/...``, ``api.whatsapp.com/send?phone=...``) is
international. A value of digits alone has two readings: national, ``phonenumbers.parse``
with the default region (which applies the region's trunk prefix, international dialling
prefix and calling code), and international, ``+<digits>`` (``00`` dropped first). The
valid one wins; when both are valid and differ, the national reading wins only if the
digits start with the region's trunk prefix (``0``, ``1``, ``8``...) or the national
reading is a mobile number there, else the international one does: the gateway and
spreadsheets write ``+4915112345678`` as ``4915112345678``.

:func:`normalise_phone` gives the same answer as that rule spelt out with
``phonenumbers`` (the tests compare them on many numbers), but most values take a fast
path: a plain string of digits (with the usual separators and an optional ``+``) is
validated against ``phonenumbers``' own metadata patterns, compiled once per country
into one regular expression per number length (and, when both readings are valid, the
national number's type checked against the same metadata as ``phonenumbers.number_type``
does). Anything unusual (trunk prefixes, international dialling prefixes, extensions,
letters, links) goes through ``phonenumbers.parse`` itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

import phonenumbers
from phonenumbers import NumberParseException, PhoneMetadata, PhoneNumberFormat, PhoneNumberType
from phonenumbers.phonenumberutil import ValidationResult

REASON_EMPTY = "empty"
REASON_LETTERS = "contains letters"
REASON_TOO_SHORT = "too short"
REASON_TOO_LONG = "too long"
REASON_INVALID = "invalid for its region"
REASON_SCIENTIFIC = "digits lost to scientific notation"
REASON_COUNTRY_CODE = "invalid country code"
REASON_NOT_A_NUMBER = "not a phone number"

_SCIENTIFIC = re.compile(r"^[+-]?\d+(?:[.,]\d+)?[eE][+-]?\d+$")
_INTEGRAL_FLOAT = re.compile(r"^(\+?\d+)\.0+$")
# digits with the separators people type; an optional leading '+'
_SIMPLE = re.compile(r"^\s*(\+?)\s*([0-9\s\-.()/]+?)\s*$")
_NON_DIGIT = re.compile(r"\D")
_SEPARATORS = str.maketrans("", "", " \t-.()/\u00a0")
_TYPES = (
    "premium_rate",
    "toll_free",
    "shared_cost",
    "voip",
    "personal_number",
    "pager",
    "uan",
    "voicemail",
    "fixed_line",
    "mobile",
)
_MOBILE_TYPES = (PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE_OR_MOBILE)
# links and URIs that carry a number: tel:, wa.me/, api.whatsapp.com/send?phone=
_TEL_URI = re.compile(r"tel:\s*([^;?]*)", re.IGNORECASE)
_WHATSAPP_LINK = re.compile(
    r"(?:(?:https?://)?(?:www\.)?wa\.me/"
    r"|(?:(?:https?://)?(?:api|web|www)\.whatsapp\.com|whatsapp:/)/send/?\?(?:[^#]*&)?phone=)"
    r"(?:\+|%2b)?(\d+)(?:[/?&#]|\Z)",
    re.IGNORECASE,
)


class PhoneResult(NamedTuple):
    """An E.164 number, or None and the reason the raw value was rejected."""

    e164: str | None
    reason: str | None


class _RegionRules:
    """One region's validity rules: a pattern per national number length, compiled at
    first use (a country has up to a dozen lengths; an import meets one or two)."""

    __slots__ = ("by_length", "descs", "leading_digits", "metadata", "sources")

    def __init__(self, metadata: Any) -> None:
        self.metadata = metadata
        self.descs: dict[str, tuple[re.Pattern[str], frozenset[int]] | None] = {}
        self.leading_digits: re.Pattern[str] | None = (
            re.compile(metadata.leading_digits) if metadata.leading_digits else None
        )
        general = metadata.general_desc
        self.sources: dict[int, str] = {}
        self.by_length: dict[int, re.Pattern[str]] = {}
        if general is None or not general.national_number_pattern:
            return
        lengths: set[int] = set()
        descs = [getattr(metadata, name) for name in _TYPES]
        descs = [d for d in descs if d is not None and d.national_number_pattern]
        for desc in (general, *descs):
            lengths.update(n for n in desc.possible_length if n > 0)
        for length in sorted(lengths):
            if general.possible_length and length not in general.possible_length:
                continue
            alts = [
                f"(?:{d.national_number_pattern})"
                for d in descs
                if not d.possible_length or length in d.possible_length
            ]
            if alts:
                pattern = f"(?=(?:{general.national_number_pattern})\\Z)(?:{'|'.join(alts)})"
                self.sources[length] = pattern

    def matches_type(self, nsn: str) -> bool:
        """Whether ``nsn`` is a number of some known type in this region."""
        pattern = self.by_length.get(len(nsn))
        if pattern is None:
            source = self.sources.get(len(nsn))
            if source is None:
                return False
            pattern = self.by_length[len(nsn)] = re.compile(source)
        return pattern.fullmatch(nsn) is not None

    def _matches(self, name: str, nsn: str) -> bool:
        """``phonenumbers``' ``_is_number_matching_desc`` for the type ``name``."""
        try:
            found = self.descs[name]
        except KeyError:
            desc = getattr(self.metadata, name)
            found = None
            if desc is not None and desc.national_number_pattern:
                found = (re.compile(desc.national_number_pattern), frozenset(desc.possible_length))
            self.descs[name] = found
        if found is None:
            return False
        pattern, lengths = found
        return (not lengths or len(nsn) in lengths) and pattern.fullmatch(nsn) is not None

    def is_mobile(self, nsn: str) -> bool:
        """Whether ``phonenumbers.number_type`` of this region's valid ``nsn`` is
        ``MOBILE`` or ``FIXED_LINE_OR_MOBILE`` (its ``_number_type_helper``, in order)."""
        if any(self._matches(name, nsn) for name in _TYPES[:-2]):
            return False  # premium rate, toll free, ... voicemail
        same = bool(self.metadata.same_mobile_and_fixed_line_pattern)
        if self._matches("fixed_line", nsn):
            return same or self._matches("mobile", nsn)
        return not same and self._matches("mobile", nsn)


class _CountryRules:
    """Validity of national numbers for one country calling code (all its regions)."""

    __slots__ = ("lengths", "regions")

    def __init__(self, country_code: int) -> None:
        self.regions: list[_RegionRules] = []
        for region in phonenumbers.COUNTRY_CODE_TO_REGION_CODE.get(country_code, ()):
            metadata = PhoneMetadata.metadata_for_region(region, None)
            if metadata is not None:
                self.regions.append(_RegionRules(metadata))
        # a length no region has a pattern for is never valid: decided without a regex
        self.lengths = frozenset(n for rules in self.regions for n in rules.sources)

    def is_valid(self, nsn: str) -> bool:
        """Same answer as ``phonenumbers.is_valid_number`` for this country code."""
        return self.region_of(nsn) is not None

    def region_of(self, nsn: str) -> _RegionRules | None:
        """The region whose rules make ``nsn`` valid, as ``phonenumbers`` picks it."""
        if len(nsn) not in self.lengths:
            return None
        # phonenumbers picks the region first (leading digits, else any known type),
        # then validates against that region only.
        for rules in self.regions:
            if rules.leading_digits is not None:
                if rules.leading_digits.match(nsn):
                    return rules if rules.matches_type(nsn) else None
            elif rules.matches_type(nsn):
                return rules
        return None


@lru_cache(maxsize=512)
def _country_rules(country_code: int) -> _CountryRules | None:
    regions = phonenumbers.COUNTRY_CODE_TO_REGION_CODE.get(country_code)
    if not regions or regions == ("001",):
        return None  # non-geographic codes: leave them to phonenumbers
    return _CountryRules(country_code)


class _DefaultRegion(NamedTuple):
    country_code: int
    prefix_for_parsing: re.Pattern[str] | None
    international_prefix: re.Pattern[str] | None
    trunk_prefix: str | None


@lru_cache(maxsize=64)
def _default_region(region: str) -> _DefaultRegion | None:
    metadata = PhoneMetadata.metadata_for_region(region.upper(), None)
    if metadata is None or metadata.country_code is None:
        return None
    npfp = metadata.national_prefix_for_parsing or metadata.national_prefix
    idd = metadata.international_prefix
    return _DefaultRegion(
        metadata.country_code,
        re.compile(npfp) if npfp else None,
        re.compile(idd) if idd else None,
        metadata.national_prefix or None,
    )


_INTERNATIONAL: dict[int, tuple[_CountryRules, re.Pattern[str] | None] | None] = {}


def _international_rules(cc: int) -> tuple[_CountryRules, re.Pattern[str] | None] | None:
    """The rules for calling code ``cc`` and its main region's national prefix pattern."""
    try:
        return _INTERNATIONAL[cc]
    except KeyError:
        pass
    rules = _country_rules(cc)
    region = _default_region(phonenumbers.region_code_for_country_code(cc))
    found = None if rules is None or region is None else (rules, region.prefix_for_parsing)
    _INTERNATIONAL[cc] = found
    return found


_CALLING_CODES = {str(cc): cc for cc in phonenumbers.COUNTRY_CODE_TO_REGION_CODE}


_MISSING: Any = object()
# the first three digits decide the calling code: its length and rules, by those digits
_BY_PREFIX: dict[str, tuple[int, tuple[_CountryRules, re.Pattern[str] | None] | None] | None] = {}


def _calling_code_of(
    prefix: str,
) -> tuple[int, tuple[_CountryRules, re.Pattern[str] | None] | None] | None:
    """For ``digits[:3]``: the calling code's length and :func:`_international_rules`."""
    for cc_len in (1, 2, 3):
        cc = _CALLING_CODES.get(prefix[:cc_len])
        if cc is not None:
            return cc_len, _international_rules(cc)
    return None


def _international_state(digits: str) -> str | None:
    """``+<digits>``: its E.164 form when plainly valid, ``""`` when plainly invalid, None
    when only ``phonenumbers.parse`` can tell (the calling code found by the first digits).
    """
    prefix = digits[:3]
    entry = _BY_PREFIX.get(prefix, _MISSING)
    if entry is _MISSING:
        entry = _BY_PREFIX[prefix] = _calling_code_of(prefix)
    if entry is None:
        return ""  # no calling code starts with these digits
    cc_len, found = entry
    nsn = digits[cc_len:]
    if not nsn:
        return ""
    if found is None or nsn[0] == "0":
        return None
    rules, national_prefix = found
    if national_prefix is not None and national_prefix.match(nsn):
        return None
    return "+" + digits if rules.is_valid(nsn) else ""


def _plain_national(digits: str, region: str) -> int | None:
    """The region's calling code when ``digits`` has no prefix phonenumbers would strip.

    For such digits ``phonenumbers.parse`` keeps them as they are (or, when they start
    with the calling code, reads them as ``+<digits>``): the fast paths may decide.
    """
    default = _default_region(region)
    if default is None or digits[0] == "0":
        return None
    if default.prefix_for_parsing is not None and default.prefix_for_parsing.match(digits):
        return None
    if default.international_prefix is not None and default.international_prefix.match(digits):
        return None
    return default.country_code


def _fast_plain(digits: str, region: str) -> str | None:
    """E.164 for ``digits`` (no ``+``) when the reading rule is plainly decided, else None.

    Only digits without a trunk or international prefix: their national reading is
    ``+<calling code><digits>``, their international one ``+<digits>``; when exactly one
    is valid it wins, when both are the national one wins if it is a mobile number.
    Either unclear: None.
    """
    country_code = _plain_national(digits, region)
    if country_code is None:
        return None
    rules = _country_rules(country_code)
    if rules is None:
        return None
    international = _international_state(digits)
    if international is None:
        return None
    home = rules.region_of(digits)
    if home is not None:
        if international == "" or home.is_mobile(digits):
            return f"+{country_code}{digits}"
        return international
    return international or None


def _slow(text: str, region: str) -> PhoneResult:
    """``phonenumbers.parse`` with a reason for every failure."""
    try:
        number = phonenumbers.parse(text, region)
    except NumberParseException as exc:
        if exc.error_type == NumberParseException.INVALID_COUNTRY_CODE:
            return PhoneResult(None, REASON_COUNTRY_CODE)
        if exc.error_type in (
            NumberParseException.TOO_SHORT_NSN,
            NumberParseException.TOO_SHORT_AFTER_IDD,
        ):
            return PhoneResult(None, REASON_TOO_SHORT)
        if exc.error_type == NumberParseException.TOO_LONG:
            return PhoneResult(None, REASON_TOO_LONG)
        return PhoneResult(None, REASON_NOT_A_NUMBER)
    if phonenumbers.is_valid_number(number):
        return PhoneResult(phonenumbers.format_number(number, PhoneNumberFormat.E164), None)
    possible = phonenumbers.is_possible_number_with_reason(number)
    if possible == ValidationResult.TOO_SHORT:
        return PhoneResult(None, REASON_TOO_SHORT)
    if possible == ValidationResult.TOO_LONG:
        return PhoneResult(None, REASON_TOO_LONG)
    return PhoneResult(None, REASON_INVALID)


def _has_letters(text: str) -> bool:
    return any(ch.isalpha() for ch in text)


def _unwrapped(text: str) -> str:
    """The number in a ``tel:`` URI or a WhatsApp link (``+<digits>``), else ``text``."""
    tel = _TEL_URI.match(text)
    if tel is not None:
        return tel.group(1).strip()
    link = _WHATSAPP_LINK.match(text)
    if link is not None:
        return "+" + link.group(1)
    return text


def _is_mobile(e164: str) -> bool:
    """Whether ``phonenumbers`` types the (valid) number as mobile (or fixed line or mobile)."""
    return phonenumbers.number_type(phonenumbers.parse(e164, None)) in _MOBILE_TYPES


def _two_readings(text: str, digits: str, region: str) -> PhoneResult:
    """The reading rule for ``text``, digits (``digits``) without ``+`` (module notes)."""
    national = _slow(text, region)
    intl_digits = digits[2:] if digits.startswith("00") else digits
    international = PhoneResult(None, REASON_NOT_A_NUMBER)
    if intl_digits:
        state = _international_state(intl_digits)
        international = PhoneResult(state, None) if state else _slow("+" + intl_digits, region)
        if international.e164 not in (None, "+" + intl_digits):  # phonenumbers changed digits
            international = PhoneResult(None, REASON_INVALID)
    if national.e164 is None:
        if international.e164 is not None or digits.startswith("00"):
            return international
        return national
    if international.e164 is None or international.e164 == national.e164:
        return national
    default = _default_region(region)
    trunk = None if default is None else default.trunk_prefix
    if (trunk is not None and digits.startswith(trunk)) or _is_mobile(national.e164):
        return national
    return international


def normalise_phone(raw: str, region: str) -> PhoneResult:
    """Normalise ``raw`` to E.164 using ``region`` (ISO 3166 code) for national numbers.

    Digits without ``+`` follow the reading rule of the module notes. Rejections carry
    one of the ``REASON_*`` strings: empty, contains letters, too short, too long,
    invalid for its region, digits lost to scientific notation, invalid country code,
    not a phone number.
    """
    text = raw.strip()
    if not text:
        return PhoneResult(None, REASON_EMPTY)
    if text[0].isalpha():
        text = _unwrapped(text)
        if not text:
            return PhoneResult(None, REASON_EMPTY)
    if ("e" in text or "E" in text) and _SCIENTIFIC.match(text):
        return PhoneResult(None, REASON_SCIENTIFIC)
    if text[-1] == "0" and "." in text:
        integral = _INTEGRAL_FLOAT.match(text)
        if integral:  # 447911123456.0: a number cell written out by a spreadsheet tool
            text = integral.group(1)
    simple = _SIMPLE.match(text)
    if simple is None and _has_letters(text):
        return PhoneResult(None, REASON_LETTERS)
    if simple is None:
        return _slow(text, region)
    plus, body = simple.groups()
    digits = body.translate(_SEPARATORS)
    if not digits.isdigit():
        digits = _NON_DIGIT.sub("", body)
    if not digits:
        return PhoneResult(None, REASON_NOT_A_NUMBER)
    if len(digits) > 17:
        return PhoneResult(None, REASON_TOO_LONG)
    if plus:
        fast = _international_state(digits) or None
        return PhoneResult(fast, None) if fast is not None else _slow(text, region)
    fast = _fast_plain(digits, region)
    if fast is not None:
        return PhoneResult(fast, None)
    return _two_readings(text, digits, region)


_BATCH_SEP = "\x1f"  # joins a batch for one C-level translate; refused if a value holds it


def normalise_batch(
    values: Sequence[str], region: str
) -> tuple[list[str | None], list[str | None]]:
    """E.164 numbers and rejection reasons of ``values``, as :func:`normalise_phone` gives.

    Built for many distinct values: the separators of the whole batch are removed by one
    ``str.translate``, and values that are then plain digits (with a leading ``+`` only
    where the value itself starts with one) take the fast paths with the region's rules
    looked up once. Every other value goes through :func:`normalise_phone` itself.
    """
    n = len(values)
    e164: list[str | None] = [None] * n
    reasons: list[str | None] = [None] * n
    if not n:
        return e164, reasons
    joined = _BATCH_SEP.join(values)
    if joined.count(_BATCH_SEP) != n - 1:
        for i, value in enumerate(values):
            e164[i], reasons[i] = normalise_phone(value, region)
        return e164, reasons
    cleaned = joined.translate(_SEPARATORS).split(_BATCH_SEP)
    del joined
    default = _default_region(region)
    national = None if default is None else _country_rules(default.country_code)
    national_prefix = None if default is None else default.prefix_for_parsing
    idd = None if default is None else default.international_prefix
    prefix = "" if default is None else f"+{default.country_code}"
    international_state = _international_state
    for i, s in enumerate(cleaned):
        fast: str | None = None
        if s.isascii() and len(s) <= 18:
            value = values[i]
            if "." in value and _INTEGRAL_FLOAT.match(value.strip()):
                pass  # "447911123456.0": normalise_phone drops the ".0" first
            elif s[:1] == "+":
                digits = s[1:]
                if digits.isdigit() and value.lstrip()[:1] == "+":
                    fast = international_state(digits) or None
            elif s.isdigit() and len(s) <= 17 and national is not None and s[0] != "0":
                plain = not (
                    (national_prefix is not None and national_prefix.match(s))
                    or (idd is not None and idd.match(s))
                )
                if plain:  # the reading rule: exactly one valid reading wins
                    international = international_state(s)
                    if international is not None:
                        home = national.region_of(s)
                        if home is None:
                            fast = international or None
                        elif international == "" or home.is_mobile(s):
                            fast = prefix + s
                        else:
                            fast = international
        if fast is None:
            e164[i], reasons[i] = normalise_phone(values[i], region)
        else:
            e164[i] = fast
    return e164, reasons


def normalise_many(values: Iterable[str], region: str) -> dict[str, PhoneResult]:
    """Normalise each distinct value once; the result maps raw value to its result."""
    out: dict[str, PhoneResult] = {}
    for value in values:
        if value not in out:
            out[value] = normalise_phone(value, region)
    return out


# --- regions: names and a hint from a file's numbers ---------------------------------

#: the most distinct values :func:`region_hint` tries in every region
HINT_SAMPLE = 40


class Region(NamedTuple):
    """A region numbers can be read in: ISO 3166 code, English name, calling code."""

    code: str
    name: str
    calling_code: int


#: regions phonenumbers' English names leave out
_MORE_NAMES = {"AC": "Ascension Island", "TA": "Tristan da Cunha", "XK": "Kosovo"}


@lru_cache(maxsize=1)
def region_names() -> tuple[Region, ...]:
    """Every region ``phonenumbers`` supports, by English name."""
    from phonenumbers.geocoder import _region_display_name

    named = [
        Region(
            code,
            _region_display_name(code, "en", None, None) or _MORE_NAMES.get(code, code),
            phonenumbers.country_code_for_region(code),
        )
        for code in phonenumbers.SUPPORTED_REGIONS
    ]
    return tuple(sorted(named, key=lambda r: r.name.casefold()))


def region_name(region: str) -> str:
    """The English name of a region code (the code itself when unknown)."""
    return {r.code: r.name for r in region_names()}.get(region.upper(), region)


class RegionHint(NamedTuple):
    """The region most of a file's local numbers belong to, and how many of them."""

    region: str
    name: str
    calling_code: int
    matched: int
    sampled: int

    @property
    def message(self) -> str:
        """What the import form says (``Most numbers look like ...: use GB?``)."""
        return (
            f"Most numbers look like {self.name} (+{self.calling_code}) local numbers: "
            f"use {self.region}?"
        )


def _local(value: str) -> bool:
    """Whether a cell is written as a local number (digits, no ``+`` or ``00``)."""
    text = value.strip()
    return bool(text) and _SIMPLE.match(text) is not None and not text.startswith(("+", "00"))


_GROUPS = re.compile(r"\D+")


def _local_fit(value: str, region: str, calling_code: int) -> tuple[int, int, int]:
    """Whether ``value`` is a valid local number of ``region``, a mobile one there, and
    written in its national digit groups (``07911 123456`` in GB): three 0-or-1."""
    try:
        number = phonenumbers.parse(value, region)
    except NumberParseException:
        return (0, 0, 0)
    if number.country_code != calling_code or not phonenumbers.is_valid_number(number):
        return (0, 0, 0)
    mobile = phonenumbers.number_type(number) in _MOBILE_TYPES
    written = _GROUPS.sub(" ", value).strip()
    national = phonenumbers.format_number(number, PhoneNumberFormat.NATIONAL)
    grouped = " " in written and written == _GROUPS.sub(" ", national).strip()
    return (1, int(mobile), int(grouped))


def region_hint(values: Iterable[str], region: str) -> RegionHint | None:
    """The region to suggest when most local numbers (no ``+``) among ``values`` are
    invalid in ``region`` but valid local numbers of one other country; else None.

    Tries up to :data:`HINT_SAMPLE` distinct such values in the main region of every
    calling code; the suggestion must fit more than half of them. Countries are ranked
    by the values valid there plus those that are mobile numbers there (a messaging
    audience is mostly mobile: ``07911 123456`` is valid in Germany too, but a fixed
    line), then by the values written in its national digit groups (``07911 123456``
    is a mobile in GB and in India, grouped as GB groups it), then by calling code.
    """
    local = [v for v in dict.fromkeys(str(v) for v in values) if _local(v)][:HINT_SAMPLE]
    if not local:
        return None
    refused = sum(1 for v in local if normalise_phone(v, region).e164 is None)
    if refused * 2 <= len(local):
        return None
    home = phonenumbers.country_code_for_region(region.upper())
    best: tuple[int, tuple[int, int], int] | None = None
    for code in sorted(phonenumbers.COUNTRY_CODE_TO_REGION_CODE):
        main = phonenumbers.region_code_for_country_code(code)
        if code == home or main not in phonenumbers.SUPPORTED_REGIONS:
            continue
        fits: list[tuple[int, int, int]] = []
        misses = 0
        for value in local:  # stop once this country cannot fit more than half
            fit = _local_fit(value, main, code)
            fits.append(fit)
            misses += 1 - fit[0]
            if misses * 2 >= len(local):
                break
        valid = sum(f[0] for f in fits)
        score = (valid + sum(f[1] for f in fits), sum(f[2] for f in fits))
        if valid * 2 > len(local) and (best is None or score > best[1]):
            best = (code, score, valid)
    if best is None:
        return None
    main = phonenumbers.region_code_for_country_code(best[0])
    return RegionHint(main, region_name(main), best[0], best[2], len(local))


__all__ = [
    "HINT_SAMPLE",
    "REASON_COUNTRY_CODE",
    "REASON_EMPTY",
    "REASON_INVALID",
    "REASON_LETTERS",
    "REASON_NOT_A_NUMBER",
    "REASON_SCIENTIFIC",
    "REASON_TOO_LONG",
    "REASON_TOO_SHORT",
    "PhoneResult",
    "Region",
    "RegionHint",
    "normalise_batch",
    "normalise_many",
    "normalise_phone",
    "region_hint",
    "region_name",
    "region_names",
]
