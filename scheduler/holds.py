"""The one home of holds: why a campaign's queued recipients are not sending now, and
when that lifts, in plain words, from the rules the claim obeys.

Every face (``campaign show``, the ``campaign run`` progress line, the API's ``hold``,
the dashboard, the ``campaign.held`` webhook event) shows what :func:`campaign_holds`
computes, so they say it in the same words. The rules are not restated here: the
window is :mod:`scheduler.windows`, the warm-up and the daily cap
:func:`scheduler.warmup.allowance_left` over :mod:`scheduler.sender_usage`'s count,
health cool-downs :mod:`scheduler.health`, 463 timelocks :mod:`scheduler.timelock`,
identical-content waits :mod:`scheduler.content_guard`, retries the rows' own due times,
the A/B wait the campaign's pick time (``[ab] after`` its start), sender pauses and
states the ``instances`` rows.

A hold has a ``kind`` (:data:`KINDS`), ``words`` (one sentence), ``until`` (UTC, None:
until someone acts) and an ``action`` in neutral words any face may show, with the CLI
``command`` beside it for the terminal (the web shows ``action`` only).

A campaign's *primary* hold is what keeps everything from sending: the campaign's own
holds (not started, paused, outside its window, the A/B wait) and, when every sender with
queued recipients is held, the sender hold that lifts first (the campaign sends again
then). Of those, the one that lifts last (no ``until``: last of all). When some sender
can send, there is no primary hold and the held senders are listed (``senders``).

The contact cooldown never holds: a contact within it is skipped, with the reason in the
report (:mod:`campaigns.cooldown`), so a campaign never waits for it.

Cost: one read of the campaign rows, then per running campaign the distinct senders and
zones of its queue and two index probes per sender (:mod:`storage.queries.waiting`),
one read of the senders' rows and one count of today's sends per campaign zone under a
cap: never a read of every queued row. Called by the list pages too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, time, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from sqlalchemy import Connection, Engine

from campaigns import lifecycle
from scheduler.pacing import cap_remaining
from scheduler.policy import CampaignPolicy, policy_from_spec
from scheduler.windows import in_window, next_local_day_start, next_window_open
from storage.queries import instances as iq
from storage.queries import waiting

if TYPE_CHECKING:
    from storage.queries import sender_care as sc

log = logging.getLogger("gatecast.holds")

NOT_STARTED = "not_started"
WARMUP = "warmup_used"
DAILY_CAP = "daily_cap"
OUTSIDE_WINDOW = "outside_window"
SENDER_PAUSED = "sender_paused"
NO_SENDER = "no_usable_sender"
HEALTH_COOLDOWN = "health_cooldown"
TIMELOCK = "timelock"
IDENTICAL = "identical_content"
RETRY = "retry_backoff"
NOT_DUE = "not_due"
VARIANT_TEST = "variant_test"
CAMPAIGN_PAUSED = "campaign_paused"
SAFETY_PAUSE = "safety_pause"

#: every kind of hold, in the order the docs list them
KINDS = (
    NOT_STARTED,
    WARMUP,
    DAILY_CAP,
    OUTSIDE_WINDOW,
    SENDER_PAUSED,
    NO_SENDER,
    HEALTH_COOLDOWN,
    TIMELOCK,
    IDENTICAL,
    RETRY,
    NOT_DUE,
    VARIANT_TEST,
    CAMPAIGN_PAUSED,
    SAFETY_PAUSE,
)

#: how the failure-rate safety check words its pause (``scheduler.sweeping``)
_SAFETY_REASON = "failure rate "
_UTC = ZoneInfo("UTC")


@dataclass(frozen=True)
class Hold:
    """One reason recipients wait, and when it lifts."""

    kind: str
    words: str
    #: when it lifts (UTC); None: when someone acts
    until: datetime | None
    #: what the operator can do, in words any face may show
    action: str | None = None
    #: the same as a CLI command (terminal faces only)
    command: str | None = None
    #: the sender it holds (None: the whole campaign)
    sender: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (``until`` as ISO 8601 UTC)."""
        data = asdict(self)
        data["until"] = None if self.until is None else self.until.isoformat()
        return data


@dataclass(frozen=True)
class CampaignHold:
    """A campaign's hold: the primary one (None: it is sending, or has nothing waiting)
    and each held sender's."""

    primary: Hold | None
    senders: tuple[Hold, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any] | None:
        """The API's ``hold`` object (None when nothing is held)."""
        if self.primary is None and not self.senders:
            return None
        base = self.primary.as_dict() if self.primary is not None else _sending_dict()
        base["senders"] = [h.as_dict() for h in self.senders]
        return base

    def line(self) -> str | None:
        """One line for a person: the primary hold's words, or the held senders'."""
        if self.primary is not None:
            return self.primary.words
        if self.senders:
            return "some senders wait: " + "; ".join(f"{h.sender}: {h.words}" for h in self.senders)
        return None


def _sending_dict() -> dict[str, Any]:
    return {
        "kind": None,
        "words": "sending; some senders wait",
        "until": None,
        "action": None,
        "command": None,
        "sender": None,
    }


def local_text(at: datetime, tz: ZoneInfo) -> str:
    """A moment as the holds word it: ``00:00 Tue 8 Dec (Europe/Berlin)``."""
    local = at.astimezone(tz)
    return f"{local:%H:%M %a} {local.day} {local:%b} ({tz.key})"


def _window_text(window: tuple[time, time]) -> str:
    return f"{window[0]:%H:%M}-{window[1]:%H:%M}"


# -- the campaign's own holds ------------------------------------------------------------


def _state_hold(row: waiting.CampaignRow, tz: ZoneInfo) -> Hold | None:
    """A campaign not running: not started yet, or paused (by a person or the safety
    check)."""
    cid = row.id
    if row.state == lifecycle.SCHEDULED:
        at = row.start_at
        when = f"starts at {local_text(at, tz)}" if at is not None else "starts at its next run"
        return Hold(
            NOT_STARTED,
            f"not started yet; {when}",
            at,
            "wait for its start, or start it now",
            f"gatecast campaign run {cid}",
        )
    if row.state == lifecycle.DRAFT:
        return Hold(NOT_STARTED, "a draft: not scheduled yet", None, "schedule it", None)
    if row.state != lifecycle.PAUSED:
        return None
    reason = row.state_reason or "paused"
    if reason.startswith(_SAFETY_REASON):
        return Hold(
            SAFETY_PAUSE,
            f"paused by the safety check: {reason}",
            None,
            "look at the failures in its report, then resume it",
            f"gatecast campaign resume {cid}",
        )
    return Hold(
        CAMPAIGN_PAUSED,
        f"paused by an operator ({reason})",
        None,
        "resume the campaign",
        f"gatecast campaign resume {cid}",
    )


def _window_hold(policy: CampaignPolicy, zones: Sequence[str], now: datetime) -> Hold | None:
    """Outside the sending window: the campaign's zone, or (recipient time) every queued
    recipient's zone closed."""
    window = policy.window
    if window is None:
        return None
    if policy.recipient_timezone and zones:
        opens = [
            (next_window_open(now, ZoneInfo(z), window), z)
            for z in zones
            if not in_window(now, ZoneInfo(z), window)
        ]
        if len(opens) < len(zones) or not opens:
            return None
        at, zone = min(opens)
        return Hold(
            OUTSIDE_WINDOW,
            f"outside the sending window ({_window_text(window)} in each recipient's zone); "
            f"the first opens at {local_text(at, ZoneInfo(zone))}",
            at,
            "wait for the window, or widen [schedule] window in the campaign file",
            None,
        )
    tz = policy.timezone
    if in_window(now, tz, window):
        return None
    at = next_window_open(now, tz, window)
    return Hold(
        OUTSIDE_WINDOW,
        f"outside the sending window ({_window_text(window)}); opens at {local_text(at, tz)}",
        at,
        "wait for the window, or widen [schedule] window in the campaign file",
        None,
    )


def _variant_wait(row: waiting.CampaignRow, policy: CampaignPolicy) -> datetime | None:
    """When the A/B winner is picked (``campaigns.variants.pick_due``'s rule), None when
    there is no pick to wait for."""
    if policy.ab_after_seconds <= 0 or row.ab_picked or row.started_at is None:
        return None
    return row.started_at + timedelta(seconds=policy.ab_after_seconds)


def _variant_hold(at: datetime, tz: ZoneInfo) -> Hold:
    return Hold(
        VARIANT_TEST,
        f"waiting for the variant test: the winner is picked at {local_text(at, tz)}",
        at,
        "wait for the pick",
        None,
    )


# -- a sender's holds --------------------------------------------------------------------


@dataclass(frozen=True)
class _SenderFacts:
    """What one read of the senders gives."""

    state: iq.SenderHealth | None
    care: sc.CareRow | None
    sent_today: int | None


def _sender_hold(
    sender: str | None,
    facts: _SenderFacts,
    first: waiting.FirstQueued,
    policy: CampaignPolicy,
    pick_at: datetime | None,
    now: datetime,
) -> Hold | None:
    """Why ``sender``'s queued recipients are not sending now (None: they are)."""
    from scheduler import health, warmup  # a running campaign's rules: not for a show

    tz = policy.timezone
    state = facts.state
    if sender is None or state is None or state.state in iq.UNABLE_STATES:
        what = "no sender" if sender is None else f"sender {sender} is {_state_words(state)}"
        return Hold(
            NO_SENDER,
            f"no usable sender: {what}",
            None,
            "link a sender (scan its QR code) or resume a paused one",
            "gatecast instance qr ID" if sender is None else f"gatecast instance qr {sender}",
            sender,
        )
    if state.paused_reason is not None:
        reason = state.paused_reason
        care = facts.care
        if (
            reason.startswith(health.PAUSE_PREFIX)
            and care is not None
            and care.health_level == health.HIGH
            and care.health_resume_at is not None
        ):
            return Hold(
                HEALTH_COOLDOWN,
                f"sender {sender} cools down after health signals; resumes by itself "
                f"at {local_text(care.health_resume_at, tz)}",
                care.health_resume_at,
                "wait for the cool-down, or resume the sender when the account is safe",
                f"gatecast instance resume {sender}",
                sender,
            )
        since = f" since {local_text(state.paused_at, tz)}" if state.paused_at else ""
        action, command = unpause_advice(sender, reason)
        return Hold(
            SENDER_PAUSED,
            f"sender {sender} is paused{since}: {reason}",
            None,
            action,
            command,
            sender,
        )
    if first.due_at is None:  # only undated rows: the rest of an A/B test
        if pick_at is not None:
            return replace(_variant_hold(pick_at, tz), sender=sender)
        return None
    if first.due_at > now:
        return _later_hold(sender, first, tz)
    pace = policy.pace
    warm = None if pace.unpaced else facts.care
    left = warmup.allowance_left(pace, facts.sent_today, warm, now, tz)
    if left != 0:
        return None
    lifts = next_local_day_start(now, tz)
    if facts.sent_today is not None and cap_remaining(pace, facts.sent_today) == 0:
        return Hold(
            DAILY_CAP,
            f"daily cap reached ({facts.sent_today} of {pace.daily_cap} today); "
            f"resets at {local_text(lifts, tz)}",
            lifts,
            "wait for the next day, or raise [pace] daily_cap in the campaign file",
            None,
            sender,
        )
    assert warm is not None
    seen = warmup.view(warm, now, tz)
    tomorrow = warmup.allowance(warm, lifts, tz)
    nxt = "no warm-up limit" if tomorrow is None else f"{tomorrow:g} new-contact messages"
    return Hold(
        WARMUP,
        f"warm-up allowance used today ({seen.used:g} of {seen.allowance or 0:g}); next "
        f"sends from {local_text(lifts, tz)}, tomorrow's allowance {nxt}",
        lifts,
        "wait for tomorrow's allowance, or turn the sender's warm-up off for a try",
        f"gatecast instance warmup {sender} --off",
        sender,
    )


def unpause_advice(sender: str, reason: str) -> tuple[str, str | None]:
    """What lifts a sender's pause, by its reason: a refused access token is the
    gateway-wide setting, a lost link a new QR scan, anything else a resume."""
    from campaigns.delivery_lifecycle import BAD_TOKEN_PAUSE, CONNECTION_PAUSE_REASONS

    if reason == BAD_TOKEN_PAUSE:
        return (
            "correct the gateway access token setting, then resume the sender",
            "set GATECAST_ACCESS_TOKEN, then gatecast instance resume " + sender,
        )
    if reason.split(":", 1)[0] in CONNECTION_PAUSE_REASONS:
        return (
            "link the sender again: show its QR code and scan it",
            f"gatecast instance qr {sender}",
        )
    return (
        "fix what the reason says, then resume the sender",
        f"gatecast instance resume {sender}",
    )


def _state_words(state: iq.SenderHealth | None) -> str:
    if state is None:
        return "unknown to gatecast"
    return state.state.replace("_", " ")


def _later_hold(sender: str | None, first: waiting.FirstQueued, tz: ZoneInfo) -> Hold:
    """The sender's first queued recipient is due later: a retry, a timelock, an
    identical-content wait, or simply a later due time."""
    from scheduler import timelock
    from scheduler.content_guard import HELD_PREFIX

    at = first.due_at
    assert at is not None
    when = local_text(at, tz)
    error = first.error or ""
    if error == timelock.PARKED_ERROR:
        return Hold(
            TIMELOCK,
            f"sender {sender} may not reach new contacts for now (error 463); "
            f"they wait until {when}",
            at,
            "wait: known chats and groups go on meanwhile",
            None,
            sender,
        )
    if error.startswith(HELD_PREFIX):
        return Hold(
            IDENTICAL,
            f"too many identical messages in a row from sender {sender}; "
            f"the next waits until {when}",
            at,
            "vary the text with spintax or variables",
            None,
            sender,
        )
    if first.attempts > 0:
        why = f" ({error})" if error else ""
        return Hold(
            RETRY,
            f"retry backoff after a failed attempt{why}; next try at {when}",
            at,
            "wait for the retry",
            None,
            sender,
        )
    return Hold(NOT_DUE, f"the next recipients are due at {when}", at, None, None, sender)


# -- the campaign's hold -----------------------------------------------------------------


def _lifts_last(holds: Iterable[Hold]) -> Hold | None:
    """The hold that lifts last (no ``until``: last of all)."""
    far = datetime.max.replace(tzinfo=_UTC)
    return max(holds, key=lambda h: h.until or far, default=None)


def _lifts_first(holds: Iterable[Hold]) -> Hold | None:
    far = datetime.max.replace(tzinfo=_UTC)
    return min(holds, key=lambda h: h.until or far, default=None)


def combine(campaign: Sequence[Hold], senders: dict[str | None, Hold | None]) -> CampaignHold:
    """The primary hold and the held senders (see the module doc): ``campaign`` holds
    block everything; ``senders`` maps each sender with queued recipients to its hold
    (None: it can send)."""
    held = tuple(h for h in senders.values() if h is not None)
    blockers = list(campaign)
    if senders and len(held) == len(senders):
        first = _lifts_first(held)
        assert first is not None
        if len({h.kind for h in held}) > 1:
            first = replace(first, words=first.words + "; other senders wait too")
        blockers.append(first)
    primary = _lifts_last(blockers)
    return CampaignHold(primary, held if len(senders) > 1 or primary is None else ())


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError):
        return _UTC


def _policy(row: waiting.CampaignRow) -> CampaignPolicy | None:
    try:
        return policy_from_spec(row.spec, timezone=row.timezone)
    except (ValueError, KeyError) as exc:
        log.error("campaign %s has an unreadable spec: %s", row.id, exc)
        return None


def campaign_holds(
    conn_or_engine: Connection | Engine, campaign_ids: Sequence[int], now: datetime
) -> dict[int, CampaignHold]:
    """The hold of each campaign of ``campaign_ids`` (see the module doc for the cost)."""
    if isinstance(conn_or_engine, Engine):
        with conn_or_engine.connect() as conn:
            return campaign_holds(conn, campaign_ids, now)
    conn = conn_or_engine
    out: dict[int, CampaignHold] = {}
    for row in waiting.campaign_rows(conn, campaign_ids):
        if row.state != lifecycle.RUNNING:  # its zone: the row's copy of the spec's
            out[row.id] = CampaignHold(_state_hold(row, _zone(row.timezone)))
            continue
        policy = _policy(row)
        out[row.id] = (
            CampaignHold(None) if policy is None else _running_hold(conn, row, policy, now)
        )
    return out


def _running_hold(
    conn: Connection, row: waiting.CampaignRow, policy: CampaignPolicy, now: datetime
) -> CampaignHold:
    # what only a running campaign reads: loaded then (``campaign show`` of another
    # campaign does not pay for them)
    from scheduler.sender_usage import sends_today_by_sender
    from storage.queries import deliveries as dq
    from storage.queries import sender_care as sc

    senders: list[str | None] = list(dq.queued_senders(conn, row.id))
    if iq.has_unassigned(conn, row.id):
        senders.append(None)
    firsts = waiting.first_queued(conn, row.id, senders)
    if not firsts:
        return CampaignHold(None)
    zones = dq.queued_zones(conn, row.id) if policy.recipient_timezone else []
    campaign: list[Hold] = []
    window = _window_hold(policy, zones, now)
    if window is not None:
        campaign.append(window)
    pick_at = _variant_wait(row, policy)
    named = [s for s in firsts if s is not None]
    states = iq.health(conn, named)
    cares = sc.care_rows(conn, named)
    counts = (
        sends_today_by_sender(conn, named, now, policy.timezone)
        if policy.pace.daily_cap is not None
        else {}
    )
    per_sender = {
        s: _sender_hold(
            s,
            _SenderFacts(states.get(s or ""), cares.get(s or ""), counts.get(s or "")),
            first,
            policy,
            pick_at,
            now,
        )
        for s, first in firsts.items()
    }
    return combine(campaign, per_sender)


def campaign_hold(
    conn_or_engine: Connection | Engine, campaign_id: int, now: datetime
) -> CampaignHold:
    """:func:`campaign_holds` of one campaign (no hold when it does not exist)."""
    return campaign_holds(conn_or_engine, [campaign_id], now).get(campaign_id, CampaignHold(None))


def announce(conn: Connection, campaign_ids: Sequence[int], now: datetime) -> int:
    """Store the running campaigns' holds whose kind changed since the last call, which
    writes one ``campaign.held`` webhook event each (with kind, words and until; none
    when the hold clears); how many changed. The dispatcher calls it every few seconds."""
    found = campaign_holds(conn, campaign_ids, now)
    rows: list[tuple[int, str | None, str | None, datetime | None]] = []
    for cid, hold in found.items():
        primary = hold.primary
        if primary is None:
            rows.append((cid, None, None, None))
        else:
            rows.append((cid, primary.kind, primary.words[:1000], primary.until))
    return waiting.announce(conn, rows, now=now)


@dataclass(frozen=True)
class RecipientHold:
    """One queued recipient and its own hold (None: due now, sending at its pace)."""

    delivery_id: int
    target: str
    sender: str | None
    hold: Hold | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "delivery_id": self.delivery_id,
            "target": self.target,
            "sender": self.sender,
            "hold": None if self.hold is None else self.hold.as_dict(),
        }


def recipient_holds(
    conn_or_engine: Connection | Engine,
    campaign_id: int,
    now: datetime,
    *,
    after: int = 0,
    limit: int = 100,
) -> list[RecipientHold]:
    """Each queued recipient of a page (ids above ``after``, at most ``limit``) with its
    own hold: the campaign's, its sender's, its zone's window or its own due time."""
    if isinstance(conn_or_engine, Engine):
        with conn_or_engine.connect() as conn:
            return recipient_holds(conn, campaign_id, now, after=after, limit=limit)
    conn = conn_or_engine
    found = campaign_holds(conn, [campaign_id], now).get(campaign_id, CampaignHold(None))
    rows = waiting.campaign_rows(conn, [campaign_id])
    policy = _policy(rows[0]) if rows else None
    by_sender = {h.sender: h for h in found.senders}
    primary = found.primary
    if primary is not None and primary.sender is not None:
        by_sender.setdefault(primary.sender, primary)
    pick_at = _variant_wait(rows[0], policy) if rows and policy else None
    out: list[RecipientHold] = []
    for rid, target, sender, due_at, attempts, error, zone in waiting.queued_page(
        conn, campaign_id, after=after, limit=limit
    ):
        hold: Hold | None = None
        if primary is not None and primary.sender is None:
            hold = primary
        elif policy is not None and zone is not None and policy.recipient_timezone:
            hold = _window_hold(
                replace(policy, recipient_timezone=False, timezone=ZoneInfo(zone)), [], now
            )
        if hold is None and policy is not None:
            first = waiting.FirstQueued(due_at, attempts, error, due_at is None)
            if due_at is None and pick_at is not None:
                hold = _variant_hold(pick_at, policy.timezone)
            elif due_at is not None and due_at > now:
                hold = _later_hold(sender, first, policy.timezone)
        if hold is None:
            hold = by_sender.get(sender)
        out.append(RecipientHold(rid, target, sender, hold))
    return out


__all__ = [
    "KINDS",
    "CampaignHold",
    "Hold",
    "RecipientHold",
    "announce",
    "campaign_hold",
    "campaign_holds",
    "combine",
    "local_text",
    "recipient_holds",
    "unpause_advice",
]
