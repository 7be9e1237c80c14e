"""The campaign file (TOML): pydantic models, validation with field paths, loading.

Every problem is reported at once, each with the path of the field it concerns
(``message.buttons[2].url: not a URL``). The validated spec is stored in
``Campaign.spec`` as ``spec.model_dump(mode="json")`` (times of day as HH:MM) and read
back with :func:`stored_spec`; every field round-trips.
"""

from __future__ import annotations

import builtins
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jinja2 import TemplateSyntaxError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from campaigns.names import name_problem
from campaigns.relative_starts import looks_relative, resolve_start
from campaigns.templating import (
    MAX_SPINTAX_DEPTH,
    BoundedEnvironment,
    nesting_problem,
    spintax_depth,
)
from campaigns.variety import DEFAULT_MAX_IDENTICAL_IN_ROW
from gateway.text import unstorable_at
from storage.types import utcnow

MessageType = Literal["text", "media", "interactive", "template", "list"]
ButtonKind = Literal["quick_reply", "cta_url", "cta_call", "cta_copy"]

#: message types that can go to a group (the spec's send_group takes text and media)
GROUP_MESSAGE_TYPES = ("text", "media")

#: column sizes the stored campaign must fit
MAX_NAME = 300
MAX_TARGET = 64
MAX_INSTANCE = 64
#: items one message or campaign may list (a bounded request, a bounded write)
MAX_BUTTONS = 10
MAX_SECTIONS = 10
MAX_ROWS = 10
MAX_GROUPS = 1000
MAX_INSTANCES = 100

#: the largest pace, retry and safety values accepted (beyond them a value is a typo or an
#: attack: 1e308 seconds of delay, a cap no column holds); every number must be finite
MAX_PER_MINUTE = 100_000
MAX_DELAY_SECONDS = 86_400
MAX_DAILY_CAP = 10_000_000
MAX_ATTEMPTS = 100
MAX_BACKOFF_SECONDS = 86_400
MAX_MIN_SAMPLE = 10_000_000
MAX_GRACE_MINUTES = 366 * 24 * 60
MAX_COOLDOWN_HOURS = 366 * 24
#: retries over days (``[retry] until``, ``every``)
MAX_RETRY_HORIZON = timedelta(days=30)
MIN_RETRY_EVERY = timedelta(minutes=1)
DEFAULT_RETRY_EVERY = timedelta(hours=6)
MAX_IDENTICAL_IN_ROW = 1_000_000
_HOUR_MINUTE = re.compile(r"^([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?$")
#: a word in a start (not a date's T or Z): a start said in words ("monday 10:00")
_WORD = re.compile(r"[A-Za-z]{2,}")
_GROUP_ID = re.compile(r"^[0-9A-Za-z\-]+@g\.us$")
_PHONE_PLUS = re.compile(r"^\+[0-9]{6,15}$")
_syntax_env = BoundedEnvironment()


@dataclass(frozen=True)
class FieldError:
    """One problem in a campaign file: the field path and what is wrong."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class CampaignFileError(ValueError):
    """A campaign file that is not valid; ``errors`` lists every problem."""

    def __init__(self, errors: Sequence[FieldError], source: str) -> None:
        self.errors = list(errors)
        self.source = source
        lines = "\n".join(f"  {e}" for e in self.errors)
        n = len(self.errors)
        super().__init__(f"{source}: {n} problem{'s' if n != 1 else ''}\n{lines}")


class _RuleErrors(ValueError):
    """Several rule violations found by one model validator, with sub-paths."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.rule_errors = errors
        super().__init__("; ".join(f"{p}: {m}" if p else m for p, m in errors))


def _is_url(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _template_error(value: str) -> str | None:
    if "|" in value and spintax_depth(value) > MAX_SPINTAX_DEPTH:
        return f"spintax nested deeper than {MAX_SPINTAX_DEPTH} groups"
    try:
        _syntax_env.parse(value)
    except TemplateSyntaxError as exc:
        return f"template syntax error: {exc.message} (line {exc.lineno})"
    except Exception as exc:  # a parser recursing past its stack
        nested = nesting_problem(exc)
        if nested is None:
            raise
        return nested
    return None


class _Model(BaseModel):
    # inf and nan (TOML's ``inf``/``nan``, JSON's ``Infinity``/``NaN``) are refused everywhere
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ButtonSpec(_Model):
    """A button of an interactive (or legacy template) message."""

    kind: ButtonKind = "quick_reply"
    display_text: str
    id: str | None = None
    url: str | None = None
    phone_number: str | None = None
    copy_code: str | None = None

    def problems(self) -> list[tuple[str, str]]:
        """(field, problem) pairs: the keys this button's kind needs, and their form."""
        errors: list[tuple[str, str]] = []
        if not self.display_text.strip():
            errors.append(("display_text", "must not be empty"))
        needed = {
            "quick_reply": "id",
            "cta_url": "url",
            "cta_call": "phone_number",
            "cta_copy": "copy_code",
        }[self.kind]
        for key in ("id", "url", "phone_number", "copy_code"):
            value = getattr(self, key)
            if key == needed:
                if value is None or not str(value).strip():
                    errors.append((key, f"required for a {self.kind} button"))
            elif value is not None:
                errors.append((key, f"not used by a {self.kind} button (it uses {needed})"))
        if self.kind == "cta_url" and self.url and not _is_url(self.url):
            errors.append(("url", "not a URL (expected http:// or https://...)"))
        if (
            self.kind == "cta_call"
            and self.phone_number
            and not _PHONE_PLUS.match(self.phone_number.replace(" ", ""))
        ):
            errors.append(("phone_number", "must start with '+' followed by 6 to 15 digits"))
        return errors


class ListRowSpec(_Model):
    """A row of a list section."""

    title: str
    row_id: str
    description: str = ""


class SectionSpec(_Model):
    """A section of a list message."""

    title: str = ""
    rows: builtins.list[ListRowSpec] = Field(default_factory=builtins.list, max_length=MAX_ROWS)


#: fields each message type uses (besides ``type``)
FIELDS_OF: dict[str, frozenset[str]] = {
    "text": frozenset({"text"}),
    "media": frozenset({"media_url", "caption", "text", "filename"}),
    "interactive": frozenset({"text", "title", "subtitle", "footer", "buttons"}),
    "template": frozenset({"text", "footer", "buttons"}),
    "list": frozenset({"text", "title", "footer", "button_text", "sections"}),
}
_TEMPLATED = ("text", "caption", "title", "subtitle", "footer", "button_text")


#: the most variants a message may have, and the longest variant name
MAX_VARIANTS = 26
MAX_VARIANT_NAME = 40
#: the fields of a message that are not its content
_NOT_CONTENT = frozenset({"type", "variants", "name", "weight"})


class MessageSpec(_Model):
    """The message of a campaign; which fields apply depends on ``type``.

    Text fields are Jinja2 templates over the contact's variables, with spintax.
    For media, ``caption`` (or ``text``) is the caption. With ``variants`` (A/B), each
    variant is a full message: the fields given in ``[message]`` are its defaults, and
    each recipient gets one variant (``campaigns.variants``).
    """

    type: MessageType
    text: str = ""
    caption: str = ""
    media_url: str | None = None
    filename: str | None = None
    title: str = ""
    subtitle: str = ""
    footer: str = ""
    button_text: str = ""
    buttons: builtins.list[ButtonSpec] = Field(
        default_factory=builtins.list, max_length=MAX_BUTTONS
    )
    sections: builtins.list[SectionSpec] = Field(
        default_factory=builtins.list, max_length=MAX_SECTIONS
    )
    variants: builtins.list[VariantSpec] = Field(default_factory=builtins.list)

    @model_validator(mode="before")
    @classmethod
    def _inherit(cls, data: Any) -> Any:
        """Each variant starts from the fields given in ``[message]`` (its defaults)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("variants"), builtins.list):
            return data
        base = {k: v for k, v in data.items() if k != "variants"}
        variants = [{**base, **v} if isinstance(v, Mapping) else v for v in data["variants"]]
        return {**data, "variants": variants}

    @property
    def media_caption(self) -> str:
        """The caption of a media message (``caption``, else ``text``)."""
        return self.caption or self.text

    @model_validator(mode="after")
    def _rules_for_type(self) -> MessageSpec:
        if self.variants:
            return self._variant_rules()
        errors: list[tuple[str, str]] = []
        used = FIELDS_OF[self.type]
        for name in sorted(set(type(self).model_fields) - used - _NOT_CONTENT):
            if getattr(self, name) not in (None, "", []):
                errors.append((name, f"not used by a {self.type} message"))
        if self.type == "media":
            if not self.media_url:
                errors.append(("media_url", "required for a media message"))
            elif not _is_url(self.media_url):
                errors.append(("media_url", "not a URL (expected http:// or https://...)"))
            if self.caption and self.text:
                errors.append(("caption", "give either caption or text, not both"))
        elif not self.text.strip():
            errors.append(("text", f"required for a {self.type} message"))
        for i, b in enumerate(self.buttons):
            errors.extend((f"buttons[{i}].{k}", m) for k, m in b.problems())
        if self.type in ("interactive", "template") and not self.buttons:
            errors.append(("buttons", f"a {self.type} message needs at least one button"))
        if self.type == "template":
            for i, b in enumerate(self.buttons):
                if b.kind != "quick_reply":
                    errors.append(
                        (f"buttons[{i}].kind", "template messages only have quick_reply buttons")
                    )
        if self.type == "list":
            if not self.button_text.strip():
                errors.append(("button_text", "required for a list message"))
            if not self.sections:
                errors.append(("sections", "a list message needs at least one section"))
            seen: set[str] = set()
            for i, section in enumerate(self.sections):
                if not section.rows:
                    errors.append((f"sections[{i}].rows", "a section needs at least one row"))
                for j, row in enumerate(section.rows):
                    where = f"sections[{i}].rows[{j}]"
                    if not row.title.strip():
                        errors.append((f"{where}.title", "must not be empty"))
                    if not row.row_id.strip():
                        errors.append((f"{where}.row_id", "must not be empty"))
                    elif row.row_id in seen:
                        errors.append((f"{where}.row_id", f"duplicate row_id {row.row_id!r}"))
                    seen.add(row.row_id)
        for name, value in self._templates():
            problem = _template_error(value)
            if problem:
                errors.append((name, problem))
        if errors:
            raise _RuleErrors(errors)
        return self

    def _variant_rules(self) -> MessageSpec:
        """Two or more variants, with names unique; each checked as a message itself."""
        errors: list[tuple[str, str]] = []
        if len(self.variants) < 2:
            errors.append(("variants", "give at least two variants (or none)"))
        elif len(self.variants) > MAX_VARIANTS:
            errors.append(("variants", f"at most {MAX_VARIANTS} variants"))
        seen: set[str] = set()
        for i, name in enumerate(self.variant_names()):
            if name in seen:
                errors.append((f"variants[{i}].name", f"duplicate variant name {name!r}"))
            seen.add(name)
        if errors:
            raise _RuleErrors(errors)
        return self

    def variant_names(self) -> builtins.list[str]:
        """Each variant's name: its ``name``, else A, B, C ... by position."""
        return [v.name.strip() or chr(ord("A") + i) for i, v in enumerate(self.variants)]

    def _templates(self) -> builtins.list[tuple[str, str]]:
        out = [(n, getattr(self, n)) for n in _TEMPLATED if getattr(self, n)]
        out += [(f"buttons[{i}].display_text", b.display_text) for i, b in enumerate(self.buttons)]
        for i, s in enumerate(self.sections):
            out.append((f"sections[{i}].title", s.title))
            for j, r in enumerate(s.rows):
                out.append((f"sections[{i}].rows[{j}].title", r.title))
                out.append((f"sections[{i}].rows[{j}].description", r.description))
        return out


class VariantSpec(MessageSpec):
    """One variant of an A/B message: a full message, with a ``weight`` (its share of the
    recipients, relative to the others') and a ``name`` (default A, B, C ...)."""

    name: str = Field("", max_length=MAX_VARIANT_NAME)
    weight: float = Field(1, gt=0, le=1_000_000)

    @model_validator(mode="after")
    def _no_nesting(self) -> VariantSpec:
        if self.variants:
            raise _RuleErrors([("variants", "a variant cannot have variants")])
        return self


MessageSpec.model_rebuild()


def timezone_problem(name: str) -> str | None:
    """Why ``name`` is not an IANA time zone (``Europe/Berlin``), or None when it is."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown timezone {name!r} (use an IANA name like Europe/Berlin)"
    return None


def _time_text(value: time) -> str:
    """A time of day as HH:MM, or HH:MM:SS when it has seconds."""
    return f"{value:%H:%M:%S}" if value.second or value.microsecond else f"{value:%H:%M}"


def window_texts(window: tuple[time, time]) -> tuple[str, str]:
    """A window as written: HH:MM each, the whole day (00:00 to midnight) as 00:00-24:00."""
    begin, end = (_time_text(t) for t in window)
    return (begin, "24:00") if window[0] == window[1] == time(0) else (begin, end)


class ScheduleSpec(_Model):
    """When to send: a start in a timezone, an optional daily window and recurrence.

    ``window`` may wrap midnight (``["22:00", "06:00"]`` means from 22:00 to 06:00 the
    next morning); start and end must differ, but for the whole day (``["00:00", "24:00"]``).
    """

    start: datetime | None = None
    timezone: str = "UTC"
    window: tuple[time, time] | None = None
    cron: str | None = None
    missed_grace_minutes: int = Field(60, ge=0, le=MAX_GRACE_MINUTES)
    #: the window and the start in each recipient's own zone (``scheduler.recipient_zones``)
    recipient_timezone: bool = False

    @model_validator(mode="before")
    @classmethod
    def _dated(cls, data: Any) -> Any:
        """A start without a date ("10:00", "monday 10:00", a TOML time of day) becomes
        the next such local time in ``timezone`` (:mod:`campaigns.relative_starts`)."""
        if not isinstance(data, Mapping):
            return data
        start = data.get("start")
        if isinstance(start, time):
            start = f"{start:%H:%M}"
        if not isinstance(start, str) or not (looks_relative(start) or _WORD.search(start)):
            return data
        name = data.get("timezone", "UTC")
        ok = isinstance(name, str) and not timezone_problem(name)
        zone = ZoneInfo(name if ok else "UTC")
        try:
            resolved = resolve_start(start, zone, utcnow())
        except ValueError as exc:
            raise _RuleErrors([("start", str(exc))]) from None
        return {**data, "start": resolved}

    @field_validator("window", mode="before")
    @classmethod
    def _hours(cls, value: Any) -> Any:
        """Accept "9:00" for "09:00", "24:00" as the end of the day, and HH:MM:SS.

        The end of the day is midnight (``time(0)``), so ``["00:00", "24:00"]`` (the whole
        day) is held as ``(00:00, 00:00)``, the one window whose start and end are equal."""
        if not isinstance(value, list | tuple):
            return value
        out: builtins.list[Any] = []
        for item in value:
            if isinstance(item, str):
                m = _HOUR_MINUTE.match(item.strip())
                if m is None:
                    raise ValueError(f"{item!r} is not a time of day: expected HH:MM (24-hour)")
                hour, minute, second = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
                if (hour, minute, second) == (24, 0, 0):
                    hour = 0
                item = f"{hour:02d}:{minute:02d}:{second:02d}"
            out.append(item)
        return out

    @field_serializer("window", when_used="json")
    def _window_json(self, window: tuple[time, time] | None) -> builtins.list[str] | None:
        """Stored and shown as written: HH:MM (HH:MM:SS only when seconds are given)."""
        return None if window is None else list(window_texts(window))

    @model_validator(mode="after")
    def _rules(self) -> ScheduleSpec:
        errors: list[tuple[str, str]] = []
        zone = ZoneInfo("UTC")
        problem = timezone_problem(self.timezone)
        if problem:
            errors.append(("timezone", problem))
        else:
            zone = ZoneInfo(self.timezone)
        if self.cron is not None:
            from apscheduler.triggers.cron import CronTrigger

            try:
                CronTrigger.from_crontab(self.cron, timezone=zone)
            except ValueError as exc:
                errors.append(("cron", f"not a valid crontab expression: {exc}"))
        if self.window is not None and self.window[0] == self.window[1] != time(0):
            errors.append(("window", 'start and end must differ (all day: ["00:00", "24:00"])'))
        if errors:
            raise _RuleErrors(errors)
        return self

    @property
    def zone(self) -> ZoneInfo:
        """The schedule's timezone."""
        return ZoneInfo(self.timezone)

    def start_at_utc(self) -> datetime | None:
        """``start`` as a UTC-aware datetime (naive values are local to ``timezone``)."""
        if self.start is None:
            return None
        start = self.start if self.start.tzinfo else self.start.replace(tzinfo=self.zone)
        return start.astimezone(UTC)

    def in_window(self, moment: datetime) -> bool:
        """True when the aware ``moment`` falls inside the sending window (always if none)."""
        if self.window is None:
            return True
        local = moment.astimezone(self.zone).time().replace(tzinfo=None)
        begin, end = self.window
        if begin < end:
            return begin <= local < end
        return local >= begin or local < end


def start_missed(start_at: datetime, now: datetime, grace_minutes: float) -> bool:
    """True when a start at ``start_at`` is later than its grace at ``now`` (missed)."""
    return now - start_at > timedelta(minutes=grace_minutes)


class PaceSpec(_Model):
    """Pace per sender instance; ``per_minute = 0`` leaves only the delay and the cap."""

    per_minute: float = 20
    delay_seconds: tuple[float, float] = (5, 15)
    daily_cap: int | None = 500
    #: show the recipient "typing..." before each one-to-one send, inside the gap, where
    #: the gateway can (scheduler/pacing.py ``typing_seconds``; decision 68)
    typing: bool = False

    @field_validator("per_minute")
    @classmethod
    def _per_minute(cls, value: float) -> float:
        if value < 0:
            raise ValueError("must not be negative (0: no per-minute limit)")
        if value > MAX_PER_MINUTE:
            raise ValueError(f"must be at most {MAX_PER_MINUTE:,}")
        return value

    @field_validator("daily_cap")
    @classmethod
    def _daily_cap(cls, value: int | None) -> int | None:
        if value is not None and value <= 0:
            raise ValueError("must be greater than 0 (omit it for the default)")
        if value is not None and value > MAX_DAILY_CAP:
            raise ValueError(f"must be at most {MAX_DAILY_CAP:,}")
        return value

    @field_validator("delay_seconds")
    @classmethod
    def _delays(cls, value: tuple[float, float]) -> tuple[float, float]:
        errors: list[tuple[str, str]] = []
        for i, seconds in enumerate(value):
            if seconds < 0:
                errors.append((f"[{i}]", "must not be negative"))
            elif seconds > MAX_DELAY_SECONDS:
                errors.append((f"[{i}]", f"must be at most {MAX_DELAY_SECONDS:,} (a day)"))
        if not errors and value[0] > value[1]:
            errors.append(("", f"minimum {value[0]:g} is above maximum {value[1]:g}"))
        if errors:
            raise _RuleErrors(errors)
        return value


_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def parse_duration(text: str) -> timedelta:
    """``"3d"``, ``"6h"``, ``"30m"``, ``"90s"`` as a timedelta; ValueError when not one."""
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a duration: a number and a unit, like 6h or 3d")
    return timedelta(seconds=float(m.group(1)) * _UNIT_SECONDS[m.group(2)])


def positive_span(value: str) -> str:
    """``value`` if it is a duration above 0 and at most :data:`MAX_RETRY_HORIZON`
    (``[ab] after``, a step's ``after``); ValueError naming the rule otherwise."""
    span = parse_duration(value)
    if span <= timedelta(0):
        raise ValueError("must be greater than 0")
    if span > MAX_RETRY_HORIZON:
        raise ValueError(f"must be at most {MAX_RETRY_HORIZON.days} days")
    return value


class RetrySpec(_Model):
    """Durable retries of sends refused before sending; with ``until``, retries over days
    (``scheduler.retry_horizon``)."""

    max_attempts: int = Field(4, ge=1, le=MAX_ATTEMPTS)
    backoff_seconds: float = Field(30, gt=0, le=MAX_BACKOFF_SECONDS)
    #: keep re-queueing retryable failures until this long after the row was made
    until: str | None = None
    #: the spacing of those re-tries (default 6h)
    every: str | None = None

    @model_validator(mode="after")
    def _horizon(self) -> RetrySpec:
        errors: list[tuple[str, str]] = []
        spans: dict[str, timedelta] = {}
        for name in ("until", "every"):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                spans[name] = parse_duration(value)
            except ValueError as exc:
                errors.append((name, str(exc)))
                continue
            if spans[name] <= timedelta(0):
                errors.append((name, "must be greater than 0"))
            elif spans[name] > MAX_RETRY_HORIZON:
                errors.append((name, f"must be at most {MAX_RETRY_HORIZON.days} days"))
        if self.every is not None and self.until is None:
            errors.append(("every", 'needs until (how long to keep retrying), like until = "3d"'))
        until, every = spans.get("until"), spans.get("every")
        if not errors and until is not None and every is not None:
            if every < MIN_RETRY_EVERY:
                errors.append(("every", "must be at least 1m"))
            elif every > until:
                errors.append(("every", f"{self.every} is longer than until ({self.until})"))
        if errors:
            raise _RuleErrors(errors)
        return self

    @property
    def horizon(self) -> timedelta | None:
        """How long after a row was made its retryable failures are re-queued (None: no
        horizon, the row fails after ``max_attempts``)."""
        return None if self.until is None else parse_duration(self.until)

    @property
    def spacing(self) -> timedelta:
        """The time between two re-tries within the horizon."""
        return parse_duration(self.every) if self.every else DEFAULT_RETRY_EVERY


class SafetySpec(_Model):
    """Pause the campaign when too many sends fail."""

    max_failure_rate: float = Field(0.5, gt=0, le=1)
    min_sample: int = Field(20, ge=1, le=MAX_MIN_SAMPLE)
    #: at most this many identical bodies in a row per sender (0: no limit; omitted:
    #: ``GATECAST_MAX_IDENTICAL_IN_ROW`` of the worker, ``scheduler.content_guard``)
    max_identical_in_row: int | None = Field(None, ge=0, le=MAX_IDENTICAL_IN_ROW)
    #: skip a contact messaged by any campaign in the last N hours (0: off; omitted:
    #: ``GATECAST_CONTACT_COOLDOWN_HOURS``, filled in when the campaign is created)
    contact_cooldown_hours: float | None = None

    @field_validator("contact_cooldown_hours")
    @classmethod
    def _cooldown(cls, value: float | None) -> float | None:
        if value is not None and value < 0:
            raise ValueError("must not be negative (0: no cooldown)")
        if value is not None and value > MAX_COOLDOWN_HOURS:
            raise ValueError(f"must be at most {MAX_COOLDOWN_HOURS:,} (a year)")
        return value


#: what an A/B test may pick its winner by (``campaigns.variants.RATES``)
PickBy = Literal["delivered_rate", "read_rate", "reply_rate", "opt_out_rate"]


class ABSpec(_Model):
    """An A/B test (``[ab]``): ``test_share`` of the recipients get the variants first;
    ``after`` the start, the variant with the best ``pick_by`` rate is sent to the rest."""

    test_share: float = Field(0.2, gt=0, lt=1)
    pick_by: PickBy = "read_rate"
    after: str = "4h"

    @field_validator("after")
    @classmethod
    def _after(cls, value: str) -> str:
        return positive_span(value)

    @property
    def wait(self) -> timedelta:
        """How long after the start the winner is picked."""
        return parse_duration(self.after)


#: a follow-up step's condition (docs/campaign-file.md, "Follow-up steps"; decision 70)
StepWhen = Literal["no_reply", "read_no_reply", "tapped", "replied"]
#: the most follow-up steps a campaign may have
MAX_STEPS = 10
MAX_KEYWORD = 100


class StepSpec(_Model):
    """A follow-up step (``[[steps]]``): ``message`` sent to each contact of the first
    message for whom ``when`` holds: ``no_reply`` (sent ``after`` ago, no reply since),
    ``read_no_reply`` (read ``after`` ago, no reply since), ``tapped`` (the first message's
    ``button`` or list ``row`` tapped), ``replied`` (a reply holding ``keyword`` as a word,
    case and accents aside). Never to an opted-out contact; the no-reply kinds stop on
    any reply; ``stop_on_reply = false`` lets them fire regardless (decision 70)."""

    when: StepWhen
    after: str | None = None
    button: str | None = Field(None, max_length=256)
    row: str | None = Field(None, max_length=256)
    keyword: str | None = Field(None, max_length=MAX_KEYWORD)
    stop_on_reply: bool = True
    message: MessageSpec

    @field_validator("after")
    @classmethod
    def _after(cls, value: str | None) -> str | None:
        return None if value is None else positive_span(value)

    @model_validator(mode="after")
    def _needs(self) -> StepSpec:
        errors: list[tuple[str, str]] = []
        timed = self.when in ("no_reply", "read_no_reply")
        if timed and self.after is None:
            errors.append(("after", f"required for a {self.when} step (like 2d)"))
        if not timed and self.after is not None:
            errors.append(("after", f"not used by a {self.when} step"))
        if self.when == "tapped" and (self.button is None) == (self.row is None):
            errors.append(("button", "give the id of the button or of the list row (row)"))
        if self.when != "tapped":
            for name in ("button", "row"):
                if getattr(self, name) is not None:
                    errors.append((name, f"not used by a {self.when} step"))
        if self.when == "replied" and not (self.keyword or "").strip():
            errors.append(("keyword", "required for a replied step"))
        if self.when != "replied" and self.keyword is not None:
            errors.append(("keyword", f"not used by a {self.when} step"))
        if self.message.variants:
            errors.append(("message.variants", "a step's message has no variants"))
        if errors:
            raise _RuleErrors(errors)
        return self

    @property
    def wait(self) -> timedelta | None:
        """How long after the first message was sent (or read) a no-reply step waits."""
        return None if self.after is None else parse_duration(self.after)

    def label(self) -> str:
        """The condition in words (the CLI, the dashboard)."""
        if self.when == "no_reply":
            return f"no reply within {self.after}"
        if self.when == "read_no_reply":
            return f"read but no reply within {self.after}"
        if self.when == "tapped":
            return f"tapped button {self.button}" if self.button else f"tapped row {self.row}"
        return f"replied {self.keyword}"


#: the longest list, tag, segment or attribute name and ``where`` value an audience takes
MAX_AUDIENCE_NAME = 200
#: the most values one ``where`` attribute, or one audience field, may list
MAX_AUDIENCE_ITEMS = 1000
#: the most attributes one ``where`` compares
MAX_WHERE_ATTRIBUTES = 50

_AUDIENCE_NAMES = ("lists", "tags", "exclude_lists", "exclude_tags")
#: an attribute key as the import makes them (``campaigns.importer.attribute_key``)
_ATTRIBUTE_NAME = re.compile(r"\w+")


def _name_problems(field_name: str, value: Any) -> builtins.list[tuple[str, str]]:
    """Problems of one audience field that lists names (``lists``, ``tags``, ...)."""
    if not isinstance(value, builtins.list):
        return [(field_name, 'a list of names, like ["customers"]')]
    if len(value) > MAX_AUDIENCE_ITEMS:
        return [(field_name, f"at most {MAX_AUDIENCE_ITEMS} names")]
    out: builtins.list[tuple[str, str]] = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            out.append((f"{field_name}[{i}]", "a name (a non-empty string)"))
        elif len(item) > MAX_AUDIENCE_NAME:
            out.append((f"{field_name}[{i}]", f"longer than {MAX_AUDIENCE_NAME} characters"))
    return out


def _where_problems(value: Any) -> builtins.list[tuple[str, str]]:
    """Problems of an audience's ``where``: attribute = value, or = a list of values."""
    shape = 'a table of attribute = value or [values], like { city = "Berlin" }'
    if not isinstance(value, Mapping):
        return [("where", shape)]
    if len(value) > MAX_WHERE_ATTRIBUTES:
        return [("where", f"at most {MAX_WHERE_ATTRIBUTES} attributes")]
    out: builtins.list[tuple[str, str]] = []
    for key, given in value.items():
        path = f"where.{key}"
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_AUDIENCE_NAME:
            out.append(("where", f"attribute name {key!r} is empty or too long"))
            continue
        if not _ATTRIBUTE_NAME.fullmatch(key.strip()):
            out.append(
                (
                    path,
                    "an attribute name is letters, digits and _ as the import names a "
                    "column ('Plan Type' -> plan_type)",
                )
            )
            continue
        items = given if isinstance(given, builtins.list) else [given]
        if not items:
            out.append((path, "an empty list matches nobody: give at least one value"))
        elif len(items) > MAX_AUDIENCE_ITEMS:
            out.append((path, f"at most {MAX_AUDIENCE_ITEMS} values"))
        for i, item in enumerate(items):
            at = f"{path}[{i}]" if isinstance(given, builtins.list) else path
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                out.append((at, f"a text or number to compare with, not {_kind(item)}"))
            elif len(str(item)) > MAX_AUDIENCE_NAME:
                out.append((at, f"longer than {MAX_AUDIENCE_NAME} characters"))
    return out


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, builtins.list):
        return "a list"
    return type(value).__name__


def audience_problems(
    data: Mapping[str, Any], *, allow_segment: bool = True
) -> builtins.list[tuple[str, str]]:
    """Every problem of an audience's fields (paths relative to the audience)."""
    out: builtins.list[tuple[str, str]] = []
    for name in _AUDIENCE_NAMES:
        if name in data:
            out.extend(_name_problems(name, data[name]))
    if "where" in data:
        out.extend(_where_problems(data["where"]))
    single = data.get("list")
    if single is not None and (not isinstance(single, str) or not single.strip()):
        out.append(("list", "a list name (a non-empty string)"))
    segment = data.get("segment")
    if segment is not None:
        if not allow_segment:
            out.append(("segment", "a segment cannot name another segment"))
        elif not isinstance(segment, str) or not segment.strip():
            out.append(("segment", "a segment name (a non-empty string)"))
        others = [k for k in ("list", *_AUDIENCE_NAMES, "where") if data.get(k)]
        if others:
            out.append(("segment", f"give segment alone, or {', '.join(others)} without it"))
    elif not any(data.get(k) for k in ("list", "lists", "tags", "where")):
        out.append(
            ("", "empty audience: give lists, tags or where (exclusions alone select nobody)")
        )
    return out


class AudienceSpec(_Model):
    """Who a campaign (or a saved segment) reaches: ``[audience]`` (issue 19's contract).

    Members of any of ``lists`` (``list``: one more), carrying every one of ``tags``,
    whose attributes match ``where`` (equals / is one of; no case, no accents), minus
    ``exclude_lists`` and ``exclude_tags``; or ``segment``, a saved one by name.
    """

    list: str | None = None
    lists: builtins.list[str] = Field(default_factory=builtins.list)
    tags: builtins.list[str] = Field(default_factory=builtins.list)
    where: dict[str, str | int | float | builtins.list[str | int | float]] = Field(
        default_factory=dict
    )
    exclude_lists: builtins.list[str] = Field(default_factory=builtins.list)
    exclude_tags: builtins.list[str] = Field(default_factory=builtins.list)
    segment: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            problems = audience_problems(data)
            if problems:
                raise _RuleErrors(problems)
        return data

    def definition(self) -> dict[str, Any]:
        """The audience by names, as stored (``list`` merged into ``lists``; ``where``
        values as text lists); the segment's name is not part of it."""
        lists = builtins.list(dict.fromkeys([*([self.list] if self.list else []), *self.lists]))
        where = {
            k.strip(): [str(v) for v in (vals if isinstance(vals, builtins.list) else [vals])]
            for k, vals in self.where.items()
        }
        return {
            "lists": [n.strip() for n in lists],
            "tags": [n.strip() for n in self.tags],
            "where": where,
            "exclude_lists": [n.strip() for n in self.exclude_lists],
            "exclude_tags": [n.strip() for n in self.exclude_tags],
        }


class CampaignSpec(_Model):
    """A validated campaign file."""

    name: str
    list: str | None = None
    audience: AudienceSpec | None = None
    groups: builtins.list[str] = Field(default_factory=builtins.list, max_length=MAX_GROUPS)
    instances: builtins.list[str] = Field(default_factory=builtins.list, max_length=MAX_INSTANCES)
    message: MessageSpec
    schedule: ScheduleSpec = Field(default_factory=ScheduleSpec)
    pace: PaceSpec = Field(default_factory=PaceSpec)
    retry: RetrySpec = Field(default_factory=RetrySpec)
    safety: SafetySpec = Field(default_factory=SafetySpec)
    ab: ABSpec | None = None
    steps: builtins.list[StepSpec] = Field(default_factory=builtins.list, max_length=MAX_STEPS)

    @model_validator(mode="after")
    def _rules(self) -> CampaignSpec:
        errors = _cross_errors(self.model_dump())
        if errors:
            raise _RuleErrors([(e.path, e.message) for e in errors])
        return self

    def start_at_utc(self) -> datetime | None:
        """The first start as a UTC-aware datetime, or None for "as soon as created"."""
        return self.schedule.start_at_utc()

    @property
    def cooldown_hours(self) -> float:
        """The contact cooldown in force (0: none; an omitted one counts as none here:
        :meth:`with_cooldown_default` fills it in at create)."""
        return float(self.safety.contact_cooldown_hours or 0)

    def with_cooldown_default(self, hours: float) -> CampaignSpec:
        """This spec with ``safety.contact_cooldown_hours`` set to ``hours`` if omitted
        (left omitted, meaning none, when ``hours`` is 0)."""
        if self.safety.contact_cooldown_hours is not None or hours <= 0:
            return self
        safety = self.safety.model_copy(update={"contact_cooldown_hours": float(hours)})
        return self.model_copy(update={"safety": safety})

    @property
    def max_identical_in_row(self) -> int:
        """The identical-content guard's limit in force (0: off); an omitted one (a
        campaign stored before the field existed) is :data:`DEFAULT_MAX_IDENTICAL_IN_ROW`."""
        n = self.safety.max_identical_in_row
        return DEFAULT_MAX_IDENTICAL_IN_ROW if n is None else n

    def with_identical_default(self, n: int) -> CampaignSpec:
        """This spec with ``safety.max_identical_in_row`` set to ``n`` if omitted (the
        setting's value when the campaign is created); left omitted when ``n`` is the
        default, which an omitted one means."""
        if self.safety.max_identical_in_row is not None or n == DEFAULT_MAX_IDENTICAL_IN_ROW:
            return self
        safety = self.safety.model_copy(update={"max_identical_in_row": int(n)})
        return self.model_copy(update={"safety": safety})

    @property
    def is_group_campaign(self) -> bool:
        """True when the recipients are groups rather than a contact list."""
        return bool(self.groups)


def _cross_errors(data: Mapping[str, Any]) -> builtins.list[FieldError]:
    """Rules across sections, checked on raw data so they show next to other errors."""
    errors: builtins.list[FieldError] = []
    if data.get("steps") and data.get("groups"):
        errors.append(FieldError("steps", "a campaign to groups has no follow-up steps"))
    name = data.get("name")
    if isinstance(name, str) and not name.strip():
        errors.append(FieldError("name", "must not be empty"))
    elif isinstance(name, str) and len(name) > MAX_NAME:
        errors.append(FieldError("name", f"longer than {MAX_NAME} characters"))
    elif isinstance(name, str) and (problem := name_problem(name)) is not None:
        errors.append(FieldError("name", problem))
    list_name = data.get("list")
    groups = data.get("groups") or []
    if list_name is not None and isinstance(list_name, str) and not list_name.strip():
        errors.append(FieldError("list", "must not be empty"))
    audience = data.get("audience")
    chosen = [k for k, v in (("list", list_name), ("audience", audience), ("groups", groups)) if v]
    if len(chosen) > 1:
        given = "all three" if len(chosen) == 3 else f"both {chosen[0]} and {chosen[1]}"
        errors.append(
            FieldError(chosen[-1], f"give one of list, [audience] or groups, not {given}")
        )
    elif not chosen:
        errors.append(
            FieldError(
                "list", "required: the contact list to send to (or an [audience], or groups)"
            )
        )
    if isinstance(groups, builtins.list):
        seen: set[str] = set()
        for i, g in enumerate(groups):
            if isinstance(g, str) and (len(g) > MAX_TARGET or not _GROUP_ID.match(g)):
                errors.append(FieldError(f"groups[{i}]", f"not a group id ending in @g.us: {g!r}"))
            elif isinstance(g, str) and g in seen:
                errors.append(FieldError(f"groups[{i}]", f"duplicate group {g!r}"))
            if isinstance(g, str):
                seen.add(g)
        message = data.get("message")
        mtype = message.get("type") if isinstance(message, Mapping) else None
        if groups and isinstance(mtype, str) and mtype not in GROUP_MESSAGE_TYPES:
            errors.append(
                FieldError("message.type", f"groups receive only text or media, not {mtype}")
            )
    message = data.get("message")
    variants = message.get("variants") if isinstance(message, Mapping) else None
    if data.get("ab") is not None and not variants:
        errors.append(
            FieldError("ab", "an A/B test needs [[message.variants]] (two or more messages)")
        )
    instances = data.get("instances") or []
    if isinstance(instances, builtins.list):
        for i, inst in enumerate(instances):
            if isinstance(inst, str) and not inst.strip():
                errors.append(FieldError(f"instances[{i}]", "must not be empty"))
            elif isinstance(inst, str) and len(inst) > MAX_INSTANCE:
                errors.append(
                    FieldError(f"instances[{i}]", f"longer than {MAX_INSTANCE} characters")
                )
        dupes = {i for i in instances if isinstance(i, str) and instances.count(i) > 1}
        if dupes:
            errors.append(FieldError("instances", f"listed twice: {', '.join(sorted(dupes))}"))
    return errors


def _loc_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _join(prefix: str, sub: str) -> str:
    if not sub:
        return prefix
    if not prefix:
        return sub
    return f"{prefix}{sub}" if sub.startswith("[") else f"{prefix}.{sub}"


def field_errors(exc: ValidationError) -> builtins.list[FieldError]:
    """Each problem of a failed validation as a :class:`FieldError` (its path, its words)."""
    out: builtins.list[FieldError] = []
    for err in exc.errors():
        # model validators of a submodel put the field name of the class into loc too
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        path = _loc_path(loc)
        original = (err.get("ctx") or {}).get("error")
        if isinstance(original, _RuleErrors):
            out.extend(FieldError(_join(path, p), m) for p, m in original.rule_errors)
            continue
        msg = err["msg"]
        if isinstance(original, ValueError):
            msg = str(original)
        elif err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling)"
        elif err["type"] == "missing":
            msg = "required"
        elif err["type"] == "finite_number":
            msg = "must be a finite number (not inf or nan)"
        elif err["type"] == "int_parsing_size":
            msg = "a number far too large"
        out.append(FieldError(path, msg))
    return out


def parse_campaign(data: Mapping[str, Any], source: str = "<campaign>") -> CampaignSpec:
    """Validate a parsed campaign file; raise :class:`CampaignFileError` listing every problem
    (a text holding a character no database stores: that one alone, :mod:`gateway.text`)."""
    unstorable = unstorable_at(data)
    if unstorable is not None:
        raise CampaignFileError([FieldError(*unstorable)], source)
    try:
        return CampaignSpec.model_validate(dict(data))
    except ValidationError as exc:
        errors = field_errors(exc)
    for cross in _cross_errors(data):
        if cross not in errors:
            errors.append(cross)
    raise CampaignFileError(errors, source)


def parse_schedule(data: Mapping[str, Any], source: str = "<schedule>") -> ScheduleSpec:
    """Validate a ``[schedule]`` alone (paths ``schedule.<field>``), e.g. a recurrence
    whose next starts are asked for; :class:`CampaignFileError` listing every problem."""
    try:
        return ScheduleSpec.model_validate(dict(data))
    except ValidationError as exc:
        errors = [FieldError(_join("schedule", e.path), e.message) for e in field_errors(exc)]
    raise CampaignFileError(errors, source)


def stored_spec(
    data: Mapping[str, Any] | CampaignSpec, campaign_id: int | None = None
) -> CampaignSpec:
    """Read back a spec stored by ``spec.model_dump(mode="json")`` (the one reader of it).

    Raises :class:`CampaignFileError` naming each field that no longer validates.
    """
    source = "stored campaign" if campaign_id is None else f"stored campaign {campaign_id}"
    if isinstance(data, CampaignSpec):
        return data
    return parse_campaign(data, source)


def load_campaign_file(path: Path) -> CampaignSpec:
    """Read and validate the TOML campaign file at ``path``."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CampaignFileError(
            [FieldError("", f"cannot read file: {exc.strerror}")], source
        ) from None
    return parse_toml(raw, source)


def parse_toml(raw: bytes, source: str = "<campaign>") -> CampaignSpec:
    """Parse and validate a TOML campaign file's bytes (``source`` names it in errors)."""
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CampaignFileError([FieldError("", "not UTF-8 text")], source) from None
    except tomllib.TOMLDecodeError as exc:
        raise CampaignFileError([FieldError("", f"not valid TOML: {exc}")], source) from None
    except RecursionError:
        raise CampaignFileError(
            [FieldError("", "not valid TOML: nested too deeply")], source
        ) from None
    return parse_campaign(data, source)


__all__ = [
    "DEFAULT_MAX_IDENTICAL_IN_ROW",
    "FIELDS_OF",
    "GROUP_MESSAGE_TYPES",
    "MAX_AUDIENCE_NAME",
    "ABSpec",
    "AudienceSpec",
    "ButtonSpec",
    "CampaignFileError",
    "CampaignSpec",
    "FieldError",
    "ListRowSpec",
    "MessageSpec",
    "PaceSpec",
    "RetrySpec",
    "SafetySpec",
    "ScheduleSpec",
    "SectionSpec",
    "VariantSpec",
    "audience_problems",
    "load_campaign_file",
    "parse_campaign",
    "parse_duration",
    "parse_schedule",
    "parse_toml",
    "start_missed",
    "stored_spec",
    "timezone_problem",
    "window_texts",
]
