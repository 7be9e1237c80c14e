"""Reply rules: auto-replies to what people write (issue 32 item 3; docs/architecture.md,
decision "reply rules").

A rule has one trigger: ``keyword`` (any of its words, matched ``exact``, as a ``word``
or as a ``prefix`` of the message, without case or accents: "Horário" is "horario"),
``button`` (the id of the button or list row tapped) or ``away`` (any message written
outside the rule's weekly business hours, in their timezone). It answers with a message
(a campaign file's ``[message]``) sent by :func:`campaigns.direct_messages.send_message`:
paced, capped and opt-out-aware like every message, through the sender that received
the message it answers.

Which rule answers: an opt-out never gets an answer (STOP keeps priority); of the enabled
rules, button rules first, then keyword rules, then away rules, each by id, the first
whose trigger matches decides. It answers unless it answered this number within its
``limit_hours`` (so two bots never loop) or a person answered this number from the inbox
within its ``pause_hours`` (:func:`pause_for`); then no rule answers that message.

When: after the message is durably stored, never in the webhook's request. It is stored
``rules_due``; the scheduler's leader (:func:`answer_due`) looks at the due messages, and
for each, in one transaction, stores the answer's message, notes the answer (unique per
incoming message) and clears ``rules_due``: a crash before the commit leaves the message
due (looked at again), after it leaves it answered, never twice.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Connection, Engine, RowMapping

from campaigns.campaign_file import CampaignFileError, parse_campaign, timezone_problem
from campaigns.direct_messages import MessageError, answering_senders, send_message
from campaigns.gateway_events import fold_keyword
from campaigns.names import name_problem
from campaigns.service import CampaignSetupError
from storage.engine import is_unavailable_error
from storage.queries import reply_rules as q
from storage.types import utcnow

log = logging.getLogger(__name__)

TRIGGERS = ("keyword", "button", "away")
MATCHES = ("exact", "word", "prefix")
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
#: one answer per rule and number within this many hours, unless the rule says
DEFAULT_LIMIT_HOURS = 24.0
#: the rules keep quiet for a number this long after a person answered it from the inbox
DEFAULT_PAUSE_HOURS = 24.0
#: the most a limit or a pause may be (a year)
MAX_HOURS = 24.0 * 366
MAX_KEYWORDS = 50
#: the order in which triggers are tried (the first rule that matches decides)
_ORDER = {"button": 0, "keyword": 1, "away": 2}
_INTERVAL = re.compile(r"^(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})$")
_WORDS = re.compile(r"\w+")


class RuleError(ValueError):
    """A rule refused before anything was stored; ``field`` names the input."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class RuleNotFound(LookupError):
    """No rule has this id."""

    def __init__(self, rule_id: int) -> None:
        super().__init__(f"no reply rule {rule_id}")
        self.rule_id = rule_id


@dataclass(frozen=True)
class Rule:
    """A reply rule as the faces show it."""

    id: int
    name: str
    trigger: str
    keywords: list[str]
    match: str
    button_id: str | None
    hours: dict[str, Any] | None
    message: dict[str, Any]
    limit_hours: float
    pause_hours: float
    enabled: bool
    created_at: datetime
    updated_at: datetime
    #: how many messages it answered
    answers: int = 0


# -- matching -----------------------------------------------------------------------


def _words(text: str) -> str:
    """``text`` folded (no case, no accents) with punctuation gone, single-spaced."""
    return " ".join(_WORDS.findall(fold_keyword(text)))


def keyword_matches(text: str, keyword: str, match: str) -> bool:
    """Whether a message matches one keyword: ``exact`` (the whole message),
    ``word`` (the keyword's words together anywhere in it), ``prefix`` (it begins so);
    case, accents and punctuation ignored."""
    said, wanted = _words(text), _words(keyword)
    if not wanted:
        return False
    if match == "exact":
        return said == wanted
    if match == "prefix":
        return said.startswith(wanted)
    return f" {wanted} " in f" {said} "


def _interval(text: str) -> tuple[time, time] | None:
    found = _INTERVAL.match(text.strip())
    if found is None:
        return None
    h1, m1, h2, m2 = (int(g) for g in found.groups())
    if h1 > 23 or m1 > 59 or m2 > 59 or h2 > 24 or (h2 == 24 and m2):
        return None
    end = time.max if h2 == 24 else time(h2, m2)
    start = time(h1, m1)
    return (start, end) if start < end else None


def is_open(hours: Mapping[str, Any], at: datetime) -> bool:
    """Whether ``at`` falls within the business hours ``hours`` (``{"timezone": ...,
    "days": {"mon": ["09:00-18:00"], ...}}``; a day not named is closed)."""
    local = at.astimezone(ZoneInfo(str(hours["timezone"])))
    day = DAYS[local.weekday()]
    now = local.time().replace(tzinfo=None)
    for text in (hours.get("days") or {}).get(day, []):
        span = _interval(str(text))
        if span is not None and span[0] <= now < span[1]:
            return True
    return False


def triggered(rule: Mapping[Any, Any], message: Mapping[Any, Any], at: datetime) -> bool:
    """Whether ``rule``'s trigger matches an incoming message written at ``at``."""
    trigger = rule["trigger"]
    if trigger == "button":
        wanted = rule["button_id"]
        return bool(wanted) and wanted in (message.get("button_id"), message.get("row_id"))
    if trigger == "keyword":
        text = str(message.get("text") or "")
        return any(keyword_matches(text, k, rule["match"]) for k in rule["keywords"] or [])
    if trigger == "away":
        return rule["hours"] is not None and not is_open(rule["hours"], at)
    return False


# -- the rules' fields --------------------------------------------------------------


def _hours_value(value: Any) -> float:
    try:
        hours = float(value)
    except (TypeError, ValueError):
        raise ValueError("must be a number of hours") from None
    if not 0 <= hours <= MAX_HOURS:
        raise ValueError(f"must be between 0 and {MAX_HOURS:g} hours")
    return hours


def _check_hours(hours: Any) -> dict[str, Any]:
    if not isinstance(hours, Mapping):
        raise RuleError("business hours must be given for an away rule", "hours")
    zone = hours.get("timezone")
    if not isinstance(zone, str) or not zone:
        raise RuleError("the business hours need a timezone", "hours.timezone")
    problem = timezone_problem(zone)
    if problem:
        raise RuleError(problem, "hours.timezone")
    days = hours.get("days") or {}
    if not isinstance(days, Mapping):
        raise RuleError("days must map a day (mon..sun) to its opening hours", "hours.days")
    clean: dict[str, list[str]] = {}
    for day, spans in days.items():
        if day not in DAYS:
            raise RuleError(f"unknown day {day!r} (use {', '.join(DAYS)})", "hours.days")
        spans = [spans] if isinstance(spans, str) else spans
        if not isinstance(spans, list):
            raise RuleError("a day's hours are a list like ['09:00-18:00']", f"hours.days.{day}")
        for span in spans:
            if not isinstance(span, str) or _interval(span) is None:
                raise RuleError(
                    f"{span!r} is not opening hours like 09:00-18:00 (start before end)",
                    f"hours.days.{day}",
                )
        clean[day] = [s.strip() for s in spans]
    return {"timezone": zone, "days": clean}


def _check_message(message: Any) -> dict[str, Any]:
    if not isinstance(message, Mapping) or not message:
        raise RuleError("the answer needs a message (for example a text)", "message")
    data = {"name": "reply rule", "audience": {"where": {"phone": "+10000000000"}}}
    parse_campaign({**data, "message": dict(message)}, "reply rule")  # CampaignFileError
    return dict(message)


def check_rule(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A rule's stored fields from what a face gives (``name``, ``trigger``, ``keywords``,
    ``match``, ``button_id``, ``hours``, ``message``, ``limit_hours``, ``pause_hours``,
    ``enabled``); :class:`RuleError` naming the field, or the message's
    :class:`~campaigns.campaign_file.CampaignFileError`."""
    name = str(fields.get("name") or "").strip()
    problem = name_problem(name) if name else "a rule needs a name"
    if problem or len(name) > 200:
        raise RuleError(problem or "at most 200 characters", "name")
    trigger = fields.get("trigger")
    if trigger not in TRIGGERS:
        raise RuleError(f"trigger must be one of {', '.join(TRIGGERS)}", "trigger")
    match = fields.get("match") or "word"
    if match not in MATCHES:
        raise RuleError(f"match must be one of {', '.join(MATCHES)}", "match")
    keywords = [str(k).strip() for k in fields.get("keywords") or [] if str(k).strip()]
    if len(keywords) > MAX_KEYWORDS or any(len(k) > 200 for k in keywords):
        raise RuleError(f"at most {MAX_KEYWORDS} keywords of 200 characters", "keywords")
    button_id = str(fields.get("button_id") or "").strip() or None
    hours = fields.get("hours")
    if trigger == "keyword" and not any(_words(k) for k in keywords):
        raise RuleError("a keyword rule needs at least one keyword", "keywords")
    if trigger == "button" and not button_id:
        raise RuleError("a button rule needs the id of the button or list row", "button_id")
    if button_id and len(button_id) > 256:
        raise RuleError("at most 256 characters", "button_id")
    values: dict[str, Any] = {
        "name": name,
        "trigger": trigger,
        "keywords": keywords if trigger == "keyword" else [],
        "match": match,
        "button_id": button_id if trigger == "button" else None,
        "hours": _check_hours(hours) if trigger == "away" else None,
        "message": _check_message(fields.get("message")),
        "enabled": bool(fields.get("enabled", True)),
    }
    for key, default in (
        ("limit_hours", DEFAULT_LIMIT_HOURS),
        ("pause_hours", DEFAULT_PAUSE_HOURS),
    ):
        given = fields.get(key)
        try:
            values[key] = default if given is None else _hours_value(given)
        except ValueError as exc:
            raise RuleError(str(exc), key) from None
    return values


def parse_week(lines: Sequence[str]) -> dict[str, list[str]]:
    """Opening hours written as people write them, ``"mon-fri 09:00-18:00"`` or
    ``"sat 10:00-14:00"`` (one line each; a day range or one day, then its hours), as
    the ``days`` of an away rule's ``hours``; :class:`RuleError` on ``hours.days``."""
    days: dict[str, list[str]] = {}
    for line in lines:
        parts = line.lower().split()
        if len(parts) != 2:
            raise RuleError(
                f"{line!r}: write a day or days and hours, like mon-fri 09:00-18:00", "hours.days"
            )
        first, _, last = parts[0].partition("-")
        if first not in DAYS or (last and last not in DAYS):
            raise RuleError(f"{line!r}: days are {', '.join(DAYS)}", "hours.days")
        start, end = DAYS.index(first), DAYS.index(last or first)
        if end < start:
            raise RuleError(f"{line!r}: the first day comes before the last", "hours.days")
        for day in DAYS[start : end + 1]:
            days.setdefault(day, []).append(parts[1])
    return days


# -- the rules ----------------------------------------------------------------------


def _rule(row: RowMapping, answers: Mapping[int, int]) -> Rule:
    return Rule(
        id=int(row["id"]),
        name=row["name"],
        trigger=row["trigger"],
        keywords=list(row["keywords"] or []),
        match=row["match"],
        button_id=row["button_id"],
        hours=row["hours"],
        message=dict(row["message"] or {}),
        limit_hours=float(row["limit_hours"]),
        pause_hours=float(row["pause_hours"]),
        enabled=bool(row["enabled"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        answers=answers.get(int(row["id"]), 0),
    )


def list_rules(engine: Engine) -> list[Rule]:
    """Every rule, by id, with how many messages each answered."""
    with engine.connect() as conn:
        answers = q.answer_counts(conn)
        return [_rule(r, answers) for r in q.list_rules(conn)]


def get_rule(engine: Engine, rule_id: int) -> Rule:
    """One rule; :class:`RuleNotFound` if none."""
    with engine.connect() as conn:
        row = q.get_rule(conn, rule_id)
        if row is None:
            raise RuleNotFound(rule_id)
        return _rule(row, q.answer_counts(conn))


def add_rule(engine: Engine, fields: Mapping[str, Any], now: datetime | None = None) -> Rule:
    """Store a new rule (see :func:`check_rule`); the rule."""
    now = now or utcnow()
    values = check_rule(fields)
    with engine.begin() as conn:
        rule_id = q.insert_rule(conn, {**values, "created_at": now, "updated_at": now})
    return get_rule(engine, rule_id)


def edit_rule(
    engine: Engine, rule_id: int, changes: Mapping[str, Any], now: datetime | None = None
) -> Rule:
    """Change some of a rule's fields (the others kept); the rule."""
    current = get_rule(engine, rule_id)
    merged = {**{k: getattr(current, k) for k in _FIELDS}, **changes}
    values = check_rule(merged)
    with engine.begin() as conn:
        if not q.update_rule(conn, rule_id, {**values, "updated_at": now or utcnow()}):
            raise RuleNotFound(rule_id)
    return get_rule(engine, rule_id)


def delete_rule(engine: Engine, rule_id: int) -> None:
    """Remove a rule (its past answers are kept); :class:`RuleNotFound` if none."""
    with engine.begin() as conn:
        if not q.delete_rule(conn, rule_id):
            raise RuleNotFound(rule_id)


#: the fields a face may give
_FIELDS = (
    "name",
    "trigger",
    "keywords",
    "match",
    "button_id",
    "hours",
    "message",
    "limit_hours",
    "pause_hours",
    "enabled",
)


def pause_for(conn: Connection, phone: str, now: datetime) -> None:
    """A person answered ``phone`` from the inbox: the rules keep quiet for it for their
    ``pause_hours`` (called by :func:`campaigns.replies.answer_reply`)."""
    q.pause(conn, phone, now)


# -- answering ----------------------------------------------------------------------


def choose(
    conn: Connection, rules: Sequence[RowMapping], message: Mapping[Any, Any], now: datetime
) -> RowMapping | None:
    """The rule that answers ``message`` now, or None (see the module)."""
    if message["is_opt_out"] or not message["sender_phone"]:
        return None
    phone = str(message["sender_phone"])
    for rule in sorted(rules, key=lambda r: (_ORDER.get(r["trigger"], 9), r["id"])):
        if not triggered(rule, message, now):
            continue
        paused = q.paused_at(conn, phone)
        if paused is not None and paused > now - timedelta(hours=rule["pause_hours"]):
            return None
        since = now - timedelta(hours=rule["limit_hours"])
        if q.answered_since(conn, int(rule["id"]), phone, since):
            return None
        return rule
    return None


def answer_due(
    engine: Engine,
    *,
    now: datetime | None = None,
    region: str = "US",
    batch: int = 200,
) -> int:
    """Look at the incoming messages the rules have yet to (oldest first, up to
    ``batch``) and answer those a rule answers; how many it looked at. Run by the
    scheduler's leader. A message whose answer cannot be sent (no usable sender, a
    message that does not render) is logged and not tried again; a database outage
    leaves it due."""
    now = now or utcnow()
    with engine.connect() as conn:
        due = q.due_messages(conn, batch)
        rules = q.list_rules(conn, enabled_only=True) if due else []
    quiet: list[int] = []
    for message in due:
        with engine.connect() as conn:
            rule = choose(conn, rules, message, now) if rules else None
            senders = answering_senders(conn, message["instance_id"]) if rule is not None else None
        if rule is None:
            quiet.append(int(message["id"]))
            continue
        if not _answer(engine, rule, message, senders, now, region):
            quiet.append(int(message["id"]))
    if quiet:
        with engine.begin() as conn:
            q.clear_due(conn, quiet)
    return len(due)


def _answer(
    engine: Engine,
    rule: RowMapping,
    message: RowMapping,
    senders: list[str] | None,
    now: datetime,
    region: str,
) -> bool:
    """Send ``rule``'s answer to ``message``; True when stored (with its note, in one
    transaction), False when refused (logged) or answered already (nothing stored): the
    caller then clears it."""
    inbound_id = int(message["id"])
    phone = str(message["sender_phone"])

    def note(conn: Connection, message_id: int) -> None:
        q.record_answer(
            conn,
            inbound_id=inbound_id,
            rule_id=int(rule["id"]),
            phone=phone,
            message_id=message_id,
            now=now,
        )
        q.clear_due(conn, [inbound_id])

    try:
        send_message(
            engine,
            to=phone,
            message=rule["message"],
            region=region,
            instances=senders,
            metadata={"reply_rule": int(rule["id"]), "reply_to": inbound_id},
            now=now,
            within=note,
        )
    except (MessageError, CampaignFileError, CampaignSetupError) as exc:
        log.warning("reply rule %s could not answer message %s: %s", rule["id"], inbound_id, exc)
        return False
    except Exception as exc:
        if is_unavailable_error(exc):
            raise  # left due: looked at again once the database is back
        with engine.connect() as conn:  # answered already (the unique key): nothing sent
            if any(a["inbound_id"] == inbound_id for a in q.answers_to(conn, phone)):
                return False
        log.exception("reply rule %s failed on message %s", rule["id"], inbound_id)
        return False
    return True


__all__ = [
    "DAYS",
    "DEFAULT_LIMIT_HOURS",
    "DEFAULT_PAUSE_HOURS",
    "MATCHES",
    "TRIGGERS",
    "Rule",
    "RuleError",
    "RuleNotFound",
    "add_rule",
    "answer_due",
    "check_rule",
    "choose",
    "delete_rule",
    "edit_rule",
    "get_rule",
    "is_open",
    "keyword_matches",
    "list_rules",
    "parse_week",
    "pause_for",
    "triggered",
]
