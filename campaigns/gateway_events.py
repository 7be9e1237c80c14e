"""Webhook event application: statuses, replies, opt-outs, instance connection states.

``record_events`` takes a batch of parsed events and applies it in one transaction
(``store_events_in`` stores the batch's status events without applying them, for the
webhook receiver's inbox, which applies them in larger batches with ``apply_pending``):

* status events are stored once per (message id, status) and applied to the delivery
  with that message id, forward only (queued < sending/unknown < sent < delivered <
  read; failed only from sending, sent or unknown; played counts as read). Events for a
  message id no delivery carries yet stay unapplied; the dispatcher calls
  :func:`apply_pending` right after it records message ids. Each status's time is the
  event's (:func:`event_time`), never before the state before it
  (:data:`campaigns.delivery_lifecycle.STATUS_TIMES`). Status events keep their chat
  (:func:`chat_target`): an ``unknown`` row is settled by the events of its sender for
  its recipient within its attempt's window (:func:`settle_unknown`, run with every
  application, by the dispatcher's sweep and at start).
* incoming messages are stored once per message id, with the button or list row they
  tapped and the message they quote; the delivery whose message a reply quotes gets it
  (:func:`quoted_delivery`, looked up once per batch), else the newest delivery to that
  phone sent before the reply (allowing for the gateway's clock, see
  :data:`campaigns.delivery_lifecycle.REPLY_CLOCK_SKEW`); a tap is kept on the delivery
  too (its first one); a message that is only
  an opt-out keyword (trimmed, case-insensitive, accents folded) opts the contact out.
* connection states update the instance; "connected" lifts a pause that a connection
  problem caused (relogin_required, not_activated, disconnected, logged_out);
  "logged_out" pauses it until it is linked again.

Only the instances gatecast holds may speak: :func:`split_foreign` sets apart the events
of any other instance id (no row, or ``gone``; or none given), which the webhook refuses
before anything is stored (:func:`held_instance_ids` is what it checks against).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine

from campaigns import delivery_lifecycle as dl
from campaigns.delivery_lifecycle import OPT_OUT_REASON, STATUS_TO_STATE
from campaigns.failure_reasons import GATEWAY_CODE_ERRORS, gateway_failure
from gateway.events import (
    ConnectionStatus,
    Event,
    IncomingMessage,
    MessageStatus,
)
from storage.queries import events as q
from storage.queries import instances as iq
from storage.queries import replies as rq
from storage.queries import sender_care as care
from storage.queries import test_sends as tq
from storage.queries.contacts import set_opt_out

#: delivery states that prove a message reached its chat (a known chat)
_REACHED = (dl.DELIVERED, dl.READ)
#: how status events move rows, a failure recorded in the words every face shows
#: ("not on WhatsApp (code 404)": ``campaigns.failure_reasons``)
STATUS_RULES = replace(dl.STATUS_RULES, code_errors=GATEWAY_CODE_ERRORS)
#: connection states counted as health signals (``scheduler/health.py``)
_CONNECTION_SIGNALS = {"disconnected": "disconnect", "logged_out": "logout"}

#: why an event is refused: it names an instance gatecast does not hold (or none)
REFUSED_UNKNOWN_INSTANCE = "unknown_instance"


#: (status, event time, the delivery's sent_at) of a status event applied
Timing = q.Timing


@dataclass
class ApplyStats:
    """What one batch did."""

    status_events: int = 0  # status events in the batch (after dropping "pending")
    applied: int = 0  # stored events applied to a delivery now (this batch or earlier)
    inbound: int = 0  # new incoming messages stored
    duplicates_inbound: int = 0
    replies: int = 0  # incoming messages attached to a delivery as its reply
    opt_outs: int = 0  # contacts opted out
    connection_updates: int = 0
    ignored: int = 0  # presence, QR codes, unknown events
    #: message ids whose status events were stored but left for :func:`apply_pending`
    #: (:func:`store_events_in`); empty when the batch was applied
    pending: list[str] = field(default_factory=list)
    #: (status, event time, the delivery's sent_at) of each status event applied, for
    #: the faces' metrics (time to delivered, to read)
    timings: list[Timing] = field(default_factory=list)

    def add(self, other: ApplyStats) -> None:
        """Accumulate ``other`` into this one (``pending`` lists are concatenated)."""
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def fold_keyword(text: str) -> str:
    """Trimmed, case-folded, accent-free, single-spaced form used for opt-out matching."""
    decomposed = unicodedata.normalize("NFKD", text.strip())
    bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(bare.casefold().split())


def is_opt_out(text: str, keywords: Iterable[str]) -> bool:
    """True when the whole message is one of ``keywords`` (see :func:`fold_keyword`)."""
    folded = fold_keyword(text)
    return bool(folded) and folded in {fold_keyword(k) for k in keywords}


def held_instance_ids(engine: Engine) -> frozenset[str]:
    """The instance ids whose webhook events gatecast accepts (a row, not ``gone``)."""
    with engine.connect() as conn:
        return frozenset(iq.held_ids(conn))


def split_foreign(events: Sequence[Event], held: Container[str]) -> tuple[list[Event], list[Event]]:
    """``(accepted, refused)``: the events of an instance in ``held``, and the others (an
    instance gatecast does not hold, or no instance id at all). Refused events are never
    applied: a forged STOP opts nobody out, a forged ``logged_out`` changes no state."""
    accepted: list[Event] = []
    refused: list[Event] = []
    for ev in events:
        (accepted if ev.instance_id is not None and ev.instance_id in held else refused).append(ev)
    return accepted, refused


def _aware(at: datetime | None, now: datetime) -> datetime:
    if at is None:
        return now
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def event_time(at: datetime | None, received: datetime) -> datetime:
    """When a status event happened, as far as gatecast can tell: the gateway's own time
    ``at``, or ``received`` (our clock) when it gave none. A gateway stamps whole seconds:
    such a stamp says "during that second", so when the event was received within that
    second, the receipt time (finer, and never before the event) is taken instead.

    The delivery's times then follow :data:`campaigns.delivery_lifecycle.STATUS_TIMES`
    (never before the state before them, whatever the order events arrive in).
    """
    if at is None:
        return received
    stamp = _aware(at, received)
    if stamp.microsecond == 0 and stamp <= received < stamp + timedelta(seconds=1):
        return received
    return stamp


#: chat address suffixes of a person (the rest of the address is the phone's digits)
_PERSON_SUFFIXES = ("@s.whatsapp.net", "@c.us")


def chat_target(chat: str | None) -> str | None:
    """A status event's chat as a delivery's target: ``+<digits>`` for a person's address,
    a group id as it is (``...@g.us``), anything else (hidden ``@lid`` numbers) as it is,
    so it matches no target; at most 128 characters."""
    if not chat:
        return None
    for suffix in _PERSON_SUFFIXES:
        if chat.endswith(suffix):
            return _e164(chat[: -len(suffix)].split(":")[0]) or chat[:128]
    return chat[:128]


def _e164(digits: str | None) -> str | None:
    if not digits:
        return None
    clean = "".join(ch for ch in digits if ch.isdigit())
    return f"+{clean}" if clean else None


def apply_pending(
    conn: Connection,
    message_ids: Sequence[str],
    *,
    now: datetime,
    timings: list[Timing] | None = None,
) -> int:
    """Apply stored, unapplied status events of ``message_ids`` to their deliveries.

    Runs in the caller's transaction (see :func:`storage.queries.events.apply_unapplied`:
    set-based, forward only); then settles ``unknown`` rows from the evidence stored
    (:func:`settle_unknown`). Returns how many events were applied; ``timings`` gets
    each applied event's times (:data:`storage.queries.events.Timing`).
    """
    applied = q.apply_unapplied(conn, message_ids, STATUS_RULES, timings)
    applied += apply_test_send_events(conn, message_ids)
    return applied + settle_unknown(conn, now=now).events


#: the time column each state sets on a test send
_TEST_SEND_TIMES = {
    dl.SENT: "sent_at",
    dl.DELIVERED: "delivered_at",
    dl.READ: "read_at",
    dl.FAILED: "failed_at",
}


def apply_test_send_events(conn: Connection, message_ids: Sequence[str]) -> int:
    """Apply stored status events to the test sends carrying ``message_ids`` (never to a
    delivery: a campaign's counts, reports and outbound webhooks do not see them).

    The delivery rules: forward only (:data:`~campaigns.delivery_lifecycle.FORWARD_FROM`),
    a failure only from :data:`~campaigns.delivery_lifecycle.FAILED_FROM`; each state's
    time is its event's (the first one). One indexed probe when no test send matches.
    Returns how many events were applied.
    """
    tests = {str(r["message_id"]): r for r in tq.with_message_ids(conn, message_ids)}
    if not tests:
        return 0
    events = tq.unapplied_events(conn, list(tests))
    changes: dict[int, dict[str, Any]] = {}
    for ev in events:
        test = tests[str(ev["message_id"])]
        change = changes.setdefault(int(test["id"]), {"state": test["state"]})
        state, status = change["state"], str(ev["status"])
        moves = (
            state in dl.FAILED_FROM
            if status == dl.FAILED
            else state in dl.FORWARD_FROM.get(status, ())
        )
        column = _TEST_SEND_TIMES.get(status)
        if column is not None and test[column] is None and column not in change:
            change[column] = ev["occurred_at"]
        if moves:
            change["state"] = status
            if status == dl.FAILED:
                change["error"] = gateway_failure(ev["error_code"] or None)
                change["error_code"] = ev["error_code"]
    for test_id, values in changes.items():
        tq.update_test_send(conn, test_id, values)
    tq.mark_applied(conn, [int(ev["id"]) for ev in events])
    return len(events)


class Settled(NamedTuple):
    """What :func:`settle_unknown` did: rows settled, their events applied."""

    rows: int
    events: int


def settle_unknown(conn: Connection, *, now: datetime, since: datetime | None = None) -> Settled:
    """Settle ``unknown`` rows from stored status events (the rule:
    :data:`campaigns.delivery_lifecycle.EVIDENCE_WINDOW`): each row attempted since
    ``since`` (default: :data:`~campaigns.delivery_lifecycle.EVIDENCE_LOOKBACK` ago) takes
    the message id of its earliest evidence (each message id settles one row), and that
    message's events are applied."""
    since = now - dl.EVIDENCE_LOOKBACK if since is None else since
    pairs: list[tuple[int, str]] = []
    rows_taken: set[int] = set()
    ids_taken: set[str] = set()
    for delivery_id, attempted_at, message_id, occurred_at, received_at in q.unknown_evidence(
        conn, since=since
    ):
        if delivery_id in rows_taken or message_id in ids_taken:
            continue
        if dl.is_evidence(attempted_at, occurred_at, received_at):
            pairs.append((delivery_id, message_id))
            rows_taken.add(delivery_id)
            ids_taken.add(message_id)
    if not pairs:
        return Settled(0, 0)
    taken = q.take_message_ids(conn, pairs)
    return Settled(len(taken), q.apply_unapplied(conn, taken, STATUS_RULES))


def apply_recent_pending(
    engine: Engine,
    *,
    now: datetime,
    within: timedelta = timedelta(minutes=10),
    limit: int = 5000,
) -> int:
    """Apply recently received events that were stored unmatched but match a delivery now.

    Closes a race on PostgreSQL: a webhook batch and the dispatcher's transaction that
    records the same message id can each commit without seeing the other's rows. The
    webhook batcher runs this when it falls idle. Returns how many events were applied.
    """
    with engine.begin() as conn:
        ids = q.unapplied_matching(conn, since=now - within, limit=limit)
        return apply_pending(conn, ids, now=now)


def apply_all_pending(engine: Engine, *, now: datetime, chunk: int = 5000) -> int:
    """Apply every stored, unapplied status event that matches a delivery, however old.

    For a start-up pass (events stored but not applied before a crash or a stop); looks
    through the unapplied events and settles every ``unknown`` row it has evidence for
    (:func:`settle_unknown`), so it is not for every batch. Returns how many applied.
    """
    applied = 0
    while True:
        with engine.begin() as conn:
            ids = q.unapplied_matching(conn, since=_EPOCH, limit=chunk)
            done = apply_pending(conn, ids, now=now) if ids else 0
        applied += done
        if len(ids) < chunk or not done:
            break
    with engine.begin() as conn:  # every unknown row, however old
        return applied + settle_unknown(conn, now=now, since=_EPOCH).events


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _record_statuses(
    conn: Connection,
    events: Sequence[MessageStatus],
    now: datetime,
    stats: ApplyStats,
    *,
    apply: bool = True,
) -> None:
    unique = status_event_rows(events, now, stats)
    q.insert_status_events(conn, unique)
    message_ids = list({r["message_id"]: None for r in unique})
    if apply:
        stats.applied += apply_pending(conn, message_ids, now=now, timings=stats.timings)
    else:
        stats.pending.extend(message_ids)


def status_event_rows(
    events: Sequence[MessageStatus], now: datetime, stats: ApplyStats
) -> list[dict[str, Any]]:
    """The ``status_events`` rows of ``events``: one per (message id, status), unapplied.

    Counts ``stats.status_events`` and ``stats.ignored`` (statuses that move nothing).
    """
    rows: list[dict[str, Any]] = []
    for ev in events:
        state = STATUS_TO_STATE.get(ev.status)
        if state is None:
            stats.ignored += 1
            continue
        rows.append(
            {
                "message_id": ev.message_id[:128],
                "instance_id": ev.instance_id,
                "chat": chat_target(ev.chat),
                "status": state,
                "error_code": (ev.error_code or None) and str(ev.error_code)[:32],
                "occurred_at": event_time(ev.at, now),
                "received_at": now,
                "applied": False,
            }
        )
    stats.status_events += len(rows)
    # one row per (message_id, status) within the batch too
    return list({(r["message_id"], r["status"]): r for r in rows}.values())


def _record_inbound(
    conn: Connection,
    events: Sequence[IncomingMessage],
    keywords: Sequence[str],
    now: datetime,
    stats: ApplyStats,
) -> None:
    unique = list({ev.message_id: ev for ev in events}.values())
    stats.duplicates_inbound += len(events) - len(unique)
    known = q.existing_inbound(conn, [ev.message_id for ev in unique])
    new = [ev for ev in unique if ev.message_id not in known]
    stats.duplicates_inbound += len(unique) - len(new)
    if not new:
        return
    phones = {ev.message_id: _e164(ev.sender_phone) for ev in new if not ev.is_group}
    ids = q.contact_ids_by_phone(conn, [p for p in phones.values() if p])
    # the deliveries the batch's replies quote: one lookup for the whole batch
    quoted = q.quoted_deliveries(
        conn, [ev.quoted_id for ev in new if ev.quoted_id and phones.get(ev.message_id)]
    )
    folded = {fold_keyword(k) for k in keywords}
    rows: list[dict[str, Any]] = []
    for ev in new:
        phone = phones.get(ev.message_id)
        opt_out = phone is not None and fold_keyword(ev.text) in folded
        answered = quoted_delivery(quoted, ev.quoted_id, phone)
        rows.append(
            {
                "message_id": ev.message_id[:128],
                "instance_id": ev.instance_id,
                "chat": ev.chat[:128],
                "sender_phone": phone,
                "contact_id": ids.get(phone) if phone else None,
                "text": ev.text[:4000],
                "is_opt_out": opt_out,
                "received_at": _aware(ev.at, now),
                "button_id": ev.button_id,
                "row_id": ev.row_id,
                "quoted_id": ev.quoted_id,
                # the delivery it answers when it quotes one (else the reply window's, below)
                "delivery_id": answered.id if answered else None,
                # a person's message for the reply rules to look at (never an opt-out)
                "rules_due": phone is not None and not opt_out,
            }
        )
    q.insert_inbound(conn, rows)
    stats.inbound += len(rows)
    # they wrote to the sender: a reply (a health score credit; the chat is known: _known_chats)
    heard = [(r["instance_id"], r["sender_phone"]) for r in rows if r["instance_id"]]
    for instance_id, phone in heard:
        if phone:
            care.count_signal(conn, instance_id, "reply")
    for row in sorted(rows, key=lambda r: r["received_at"]):
        sender: str | None = row["sender_phone"]
        if sender is None:
            continue
        if _record_reply(
            conn,
            sender,
            row,
            received_at=now,
            quoted=quoted.get(row["quoted_id"]) if row["delivery_id"] else None,
        ):
            stats.replies += 1
        if row["is_opt_out"] and set_opt_out(conn, sender, True, OPT_OUT_REASON, now):
            stats.opt_outs += 1


def quoted_delivery(
    quoted: dict[str, q.Quoted], quoted_id: str | None, phone: str | None
) -> q.Quoted | None:
    """The delivery a reply answers by quoting its message: the one carrying the quoted
    message id, sent to the replying person (a quote of anyone else's message, or of a
    message gatecast did not send, matches nothing: the reply window decides then)."""
    hit = quoted.get(quoted_id) if quoted_id and phone else None
    return hit if hit is not None and hit.target == phone else None


def _record_reply(
    conn: Connection,
    phone: str,
    row: dict[str, Any],
    *,
    received_at: datetime,
    quoted: q.Quoted | None,
) -> bool:
    """Attach a stored incoming message (``row``) from ``phone`` to the delivery it
    answers: ``quoted``, the one whose message it quotes (decision 50 in
    docs/architecture.md), else the newest delivery to ``phone`` that it can answer.

    The message's time ``at`` is the gateway's (whole seconds of the gateway's clock),
    ``received_at`` when gatecast received it (our clock). Without a quote the candidates
    are the deliveries sent no later than ``at + REPLY_CLOCK_SKEW`` (so a message sent
    after the reply is never credited with it, while a stamp truncated to the second or
    a gateway clock running behind ours still matches), and rows in flight, in the most
    recent campaigns (:data:`~campaigns.delivery_lifecycle.REPLY_CAMPAIGN_WINDOW`); the
    time is :func:`~campaigns.delivery_lifecycle.reply_time`. A button or list row
    tapped is recorded on the delivery too (the first tap). False when no delivery
    matches or it already has a reply. The incoming message is linked to the delivery
    either way (the replies inbox shows every message under its campaign).
    """
    at: datetime = row["received_at"]
    if quoted is not None:  # linked when stored
        delivery_id, sent_at = quoted.id, quoted.sent_at
    else:
        target = q.reply_target(
            conn, phone, latest=at + dl.REPLY_CLOCK_SKEW, campaigns=dl.REPLY_CAMPAIGN_WINDOW
        )
        if target is None:
            return False
        delivery_id, sent_at = target
        rq.link_inbound(conn, row["message_id"], delivery_id)
    if row["button_id"] or row["row_id"]:
        q.set_tap(
            conn,
            delivery_id,
            button_id=row["button_id"],
            row_id=row["row_id"],
            title=row["text"],
        )
    return q.set_reply(conn, delivery_id, row["text"], dl.reply_time(at, received_at, sent_at))


def record_events(
    engine: Engine,
    events: Sequence[Event],
    *,
    opt_out_keywords: Sequence[str],
    now: datetime,
) -> ApplyStats:
    """Apply a batch of webhook events in one transaction (idempotent; any order)."""
    with engine.begin() as conn:
        return record_events_in(conn, events, opt_out_keywords=opt_out_keywords, now=now)


def record_events_in(
    conn: Connection,
    events: Sequence[Event],
    *,
    opt_out_keywords: Sequence[str],
    now: datetime,
) -> ApplyStats:
    """:func:`record_events` in the caller's transaction."""
    return _record_in(conn, events, opt_out_keywords=opt_out_keywords, now=now, apply=True)


def store_events_in(
    conn: Connection,
    events: Sequence[Event],
    *,
    opt_out_keywords: Sequence[str],
    now: datetime,
) -> ApplyStats:
    """:func:`record_events_in`, except that status events are only stored (unapplied).

    Their message ids come back in ``stats.pending``: the caller applies them later with
    :func:`apply_pending` in batches of hundreds (the webhook receiver's inbox), which
    costs far less per event than applying every small batch. Stored events are durable:
    if that later pass never runs (a crash), the dispatcher's sweep and the receiver's
    start-up pass (:func:`apply_all_pending`) apply them. Replies, opt-outs and
    connection states are applied at once, as by :func:`record_events_in`.
    """
    return _record_in(conn, events, opt_out_keywords=opt_out_keywords, now=now, apply=False)


def _known_chats(
    statuses: Sequence[MessageStatus], incoming: Sequence[IncomingMessage]
) -> list[tuple[str, str]]:
    """The chats these events show a sender has (463-aware routing): a message of its
    reached the chat, or the chat's person wrote to it.

    A batch writes them in one statement, in key order, before anything else, as a
    send's record writes its chats (``scheduler.recording``): a transaction waiting on a
    chat then holds no other row, and none waits on chats in an opposite order (they
    deadlocked on PostgreSQL while a batch wrote the reached chats, then the replies'
    chats, between which a send's record had written both)."""
    reached = [
        (ev.instance_id, chat)
        for ev in statuses
        if ev.instance_id
        and STATUS_TO_STATE.get(ev.status) in _REACHED
        and (chat := chat_target(ev.chat))
    ]
    heard = [
        (ev.instance_id, phone)
        for ev in incoming
        if ev.instance_id and not ev.is_group and (phone := _e164(ev.sender_phone))
    ]
    return reached + heard


def _record_in(
    conn: Connection,
    events: Sequence[Event],
    *,
    opt_out_keywords: Sequence[str],
    now: datetime,
    apply: bool,
) -> ApplyStats:
    stats = ApplyStats()
    statuses = [e for e in events if isinstance(e, MessageStatus)]
    incoming = [e for e in events if isinstance(e, IncomingMessage)]
    connections = [e for e in events if isinstance(e, ConnectionStatus)]
    stats.ignored += len(events) - len(statuses) - len(incoming) - len(connections)
    care.mark_known(conn, _known_chats(statuses, incoming), now=now)  # first: see there
    if statuses:
        _record_statuses(conn, statuses, now, stats, apply=apply)
    if incoming:
        _record_inbound(conn, incoming, opt_out_keywords, now, stats)
    for ev in connections:
        signal = _CONNECTION_SIGNALS.get(ev.state)
        if ev.instance_id and signal:  # the health score's disconnect or logout
            care.count_signal(conn, ev.instance_id, signal)
        if ev.instance_id and ev.state == "logged_out":  # not used until linked again
            iq.pause(conn, ev.instance_id, dl.LOGGED_OUT_PAUSE, now=now)
        if ev.instance_id and q.set_instance_state(
            conn,
            ev.instance_id,
            ev.state,
            phone=ev.phone,
            now=now,
            clears=dl.CONNECTION_PAUSE_REASONS,
        ):
            stats.connection_updates += 1
    return stats


__all__ = [
    "REFUSED_UNKNOWN_INSTANCE",
    "ApplyStats",
    "Settled",
    "Timing",
    "apply_all_pending",
    "apply_pending",
    "apply_recent_pending",
    "apply_test_send_events",
    "chat_target",
    "event_time",
    "fold_keyword",
    "held_instance_ids",
    "is_opt_out",
    "quoted_delivery",
    "record_events",
    "record_events_in",
    "settle_unknown",
    "split_foreign",
    "status_event_rows",
    "store_events_in",
]
