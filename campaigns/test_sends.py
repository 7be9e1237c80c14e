"""Test sends: a campaign's message, rendered for one contact, sent now to one number or
group through one sender, outside the campaign.

The rules (docs/architecture.md, "Decision NEW: test sends"):

* A test send is a row of its own (``test_sends``), never a delivery: the campaign's
  counts, progress, reports, pace, daily caps and outbound webhooks never see it. It does
  not count toward the sender's daily cap (the cap protects a sender from a campaign's
  volume; a test is one message an operator sends by hand); instead a campaign allows at
  most :data:`PER_HOUR` test sends an hour.
* Its state moves like a delivery's (sent -> delivered -> read, or failed), from the
  gateway's status events for its message id
  (:func:`campaigns.gateway_events.apply_test_send_events`).
* The rendered message is the campaign's for ``contact_id``; without one, for the
  contact whose phone is the test's number, else the campaign's first recipient, else
  no contact (variables the message needs then make the test fail to render, said so).
* Opt-outs are respected: a number whose contact opted out is refused unless the caller
  says ``allow_opted_out`` (recorded on the row). The sender must be connected and not
  paused; by default the campaign's first usable sender, else any usable one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, select

from campaigns import delivery_lifecycle as dl
from campaigns.campaign_file import CampaignSpec
from campaigns.delivery_rows import audience_recipients, list_recipients
from campaigns.failure_reasons import plain_reason
from campaigns.gateway_events import apply_test_send_events
from campaigns.paging import Page
from campaigns.phones import normalise_phone
from campaigns.render import ContactData, RenderError, recipient_rng, render_message
from campaigns.segments import AudienceError, campaign_audience
from campaigns.service import PREVIEW_SEED, CampaignNotFound, get_campaign
from gateway.messages import Message, message_to_dict
from gateway.outcomes import OutcomeKind, SendOutcome
from storage import tables
from storage.queries import instances as iq
from storage.queries import test_sends as tq
from storage.types import utcnow

#: test sends a campaign allows per hour
PER_HOUR = 20
#: the states of a test send (a delivery's, less queued and skipped)
STATES = (dl.SENDING, dl.SENT, dl.DELIVERED, dl.READ, dl.FAILED, dl.UNKNOWN)

_GROUP_ID = re.compile(r"^[0-9A-Za-z\-]{1,60}@g\.us$")


class TestSendRefused(ValueError):
    """A test send that was not made: ``field`` names the input, ``kind`` the refusal
    (``invalid``, ``conflict``, ``too_many``, ``not_found``)."""

    __test__ = False

    def __init__(self, message: str, field: str, kind: str = "invalid") -> None:
        super().__init__(message)
        self.field = field
        self.kind = kind


@dataclass(frozen=True)
class _Sent:
    """What every test send says: to whom, for which contact, through which sender, its
    state and rendered content; ``reason`` is a failure in plain words."""

    target: str
    contact_id: int | None
    sender: str
    state: str
    message_id: str | None
    content: dict[str, Any]
    error: str | None
    reason: str | None
    opt_out_overridden: bool


@dataclass(frozen=True)
class TestSend(_Sent):
    """A test send of a created campaign as the faces show it (stored: its state moves)."""

    __test__ = False

    id: int
    campaign_id: int
    created_at: datetime
    sent_at: datetime | None
    delivered_at: datetime | None
    read_at: datetime | None
    failed_at: datetime | None


def _record(row: Any) -> TestSend:
    values = {f.name: row[f.name] for f in fields(TestSend) if f.name != "reason"}
    return TestSend(**values, reason=plain_reason(row["error"], row["error_code"]))


def _target(to: str, region: str) -> str:
    raw = to.strip()
    if raw.endswith("@g.us"):
        if not _GROUP_ID.match(raw):
            raise TestSendRefused(f"not a group id ending in @g.us: {raw!r}", "to")
        return raw
    found = normalise_phone(raw, region)
    if found.e164 is None:
        raise TestSendRefused(f"not a phone number: {raw!r} ({found.reason})", "to")
    return found.e164


def _first_recipient(conn: Connection, spec: CampaignSpec) -> tuple[ContactData, int | None] | None:
    """The campaign's first recipient (its list's or audience's first contact) and its id."""
    if spec.list is not None:
        lists = tables.lists
        list_id = conn.execute(select(lists.c.id).where(lists.c.name == spec.list)).scalar()
        chunks = list_recipients(conn, int(list_id), chunk=1) if list_id is not None else iter(())
    elif spec.audience is not None:
        try:
            chunks = audience_recipients(
                conn, campaign_audience(conn, spec.audience).filter, chunk=1
            )
        except AudienceError:
            return None
    else:
        return None
    for chunk in chunks:
        return (chunk[0].contact, chunk[0].contact_id) if chunk else None
    return None


def _contact(
    conn: Connection, spec: CampaignSpec, target: str, contact_id: int | None
) -> tuple[ContactData, int | None, bool]:
    """``(data, contact id, opted out)`` the test renders for."""
    if target.endswith("@g.us"):
        return ContactData(attributes={"group": target}), None, False
    own = tq.contact_row(conn, phone=target)
    opted_out = bool(own is not None and own["opted_out"])
    chosen = own
    if contact_id is not None:
        chosen = tq.contact_row(conn, contact_id=contact_id)
        if chosen is None:
            raise TestSendRefused(f"contact {contact_id} does not exist", "contact_id", "not_found")
    if chosen is not None:
        data = ContactData(
            phone=chosen["phone"], name=chosen["name"] or "", attributes=chosen["attributes"] or {}
        )
        return data, int(chosen["id"]), opted_out
    first = _first_recipient(conn, spec)
    if first is not None:
        return first[0], first[1], opted_out
    return ContactData(phone=target), None, opted_out


def _sender(conn: Connection, spec: CampaignSpec, sender: str | None) -> str:
    usable = iq.usable_ids(conn)
    if sender is not None:
        if sender not in usable:
            raise TestSendRefused(
                f"sender {sender!r} cannot send now (not connected, paused or unknown); "
                f"usable: {', '.join(usable) or 'none'}",
                "sender",
                "conflict",
            )
        return sender
    for candidate in [*spec.instances, *usable]:
        if candidate in usable:
            return candidate
    raise TestSendRefused(
        "no sender can send now: link one on the Instances page", "sender", "conflict"
    )


def _outcome_values(outcome: SendOutcome, now: datetime) -> dict[str, Any]:
    if outcome.kind is OutcomeKind.ACCEPTED and outcome.message_id:
        return {"state": dl.SENT, "message_id": outcome.message_id[:128], "sent_at": now}
    if outcome.kind is OutcomeKind.AMBIGUOUS or outcome.kind is OutcomeKind.ACCEPTED:
        return {"state": dl.UNKNOWN, "error": (outcome.reason or "ambiguous send outcome")[:1000]}
    return {
        "state": dl.FAILED,
        "error": (outcome.reason or "refused")[:1000],
        "error_code": outcome.error_code,
        "failed_at": now,
    }


class SupportsSend(Protocol):
    """What a test send needs of a gateway client (``gateway.client.GatewayClient``)."""

    def send(self, instance_id: str, to: str, message: Message) -> SendOutcome:
        """Send ``message`` to ``to`` through ``instance_id``."""
        ...


@dataclass(frozen=True)
class TestAsk:
    """What a test send is asked for: the number or group ``to``, the contact to render
    for, the sender, and whether an opted-out number may get it."""

    __test__ = False

    to: str
    contact_id: int | None = None
    sender: str | None = None
    allow_opted_out: bool = False


@dataclass(frozen=True)
class _Prepared:
    """A test send checked and rendered, ready to go out."""

    target: str
    contact_id: int | None
    name: str
    sender: str
    message: Message
    opt_out_overridden: bool


def _prepare(
    conn: Connection, spec: CampaignSpec, target: str, seed: int, ask: TestAsk
) -> _Prepared:
    """The rules every test send follows before it is sent (the module's notes)."""
    data, chosen_id, opted_out = _contact(conn, spec, target, ask.contact_id)
    if opted_out and not ask.allow_opted_out:
        raise TestSendRefused(
            f"{target} has opted out; send anyway only with allow_opted_out", "to", "conflict"
        )
    instance = _sender(conn, spec, ask.sender)
    try:
        message = render_message(spec.message, data, recipient_rng(seed, target))
    except RenderError as exc:
        who = f" for {data.name or data.phone}" if data.name or data.phone else ""
        raise TestSendRefused(
            f"the message cannot be rendered{who}: {exc.reason}", "contact_id"
        ) from None
    return _Prepared(
        target, chosen_id, data.name, instance, message, bool(opted_out and ask.allow_opted_out)
    )


def _send(client: SupportsSend, ready: _Prepared) -> SendOutcome:
    try:
        return client.send(ready.sender, ready.target, ready.message)
    except ValueError as exc:  # the client refused the input before any I/O
        return SendOutcome(OutcomeKind.PERMANENT, reason=str(exc))


def send_test(
    engine: Engine,
    client: SupportsSend,
    campaign_id: int,
    *,
    to: str,
    contact_id: int | None = None,
    sender: str | None = None,
    allow_opted_out: bool = False,
    region: str = "US",
    now: datetime | None = None,
) -> TestSend:
    """Render the campaign's message and send it now to ``to`` (see the module's rules).

    Raises :class:`CampaignNotFound` and :class:`TestSendRefused` (nothing stored); a send
    the gateway refuses is stored as a failed test send.
    """
    now = now or utcnow()
    campaign = get_campaign(engine, campaign_id)
    if campaign.deleted_at is not None:
        raise TestSendRefused(f"campaign {campaign_id} is deleted", "campaign", "conflict")
    target = _target(to, region)
    with engine.begin() as conn:
        if tq.count_since(conn, campaign_id, now - timedelta(hours=1)) >= PER_HOUR:
            raise TestSendRefused(
                f"at most {PER_HOUR} test sends an hour per campaign", "campaign", "too_many"
            )
        ask = TestAsk(to, contact_id, sender, allow_opted_out)
        ready = _prepare(conn, campaign.spec, target, campaign_id, ask)
        test_id = tq.insert_test_send(
            conn,
            {
                "campaign_id": campaign_id,
                "target": target,
                "contact_id": ready.contact_id,
                "sender": ready.sender,
                "state": dl.SENDING,
                "content": message_to_dict(ready.message),
                "opt_out_overridden": ready.opt_out_overridden,
                "created_at": now,
            },
        )
    values = _outcome_values(_send(client, ready), now)
    with engine.begin() as conn:
        tq.update_test_send(conn, test_id, values)
        if values.get("message_id"):  # events that raced the answer
            apply_test_send_events(conn, [values["message_id"]])
        row = tq.get_test_send(conn, campaign_id, test_id)
    return _record(row)


@dataclass(frozen=True)
class DraftTestSend(_Sent):
    """A test send of a campaign file not created yet (the composer's): sent, not stored.

    ``state`` is ``sent`` (the gateway took it: ``message_id``), ``failed`` (``reason``
    in plain words) or ``unknown``; later states are not followed (no row to move).
    ``name`` is the contact's it was rendered for."""

    name: str
    sent_at: datetime


def send_draft_test(
    engine: Engine,
    client: SupportsSend,
    spec: CampaignSpec,
    ask: TestAsk,
    *,
    region: str = "US",
    now: datetime | None = None,
) -> DraftTestSend:
    """Send ``spec``'s message, rendered for ``ask.contact_id`` (default: the contact with
    the number ``ask.to``, else the audience's first recipient), now to ``ask.to``: the rules of
    :func:`send_test` but nothing stored (there is no campaign yet; spintax picked with
    the preview's seed, as the composer's phone shows it). The hourly limit is the
    caller's (``gatecast.web.api.test_sends``: per user). :class:`TestSendRefused` as
    :func:`send_test` raises it."""
    now = now or utcnow()
    target = _target(ask.to, region)
    with engine.connect() as conn:
        ready = _prepare(conn, spec, target, PREVIEW_SEED, ask)
    values = _outcome_values(_send(client, ready), now)
    return DraftTestSend(
        target=target,
        contact_id=ready.contact_id,
        name=ready.name,
        sender=ready.sender,
        state=values["state"],
        message_id=values.get("message_id"),
        content=message_to_dict(ready.message),
        error=values.get("error"),
        reason=plain_reason(values.get("error"), values.get("error_code")),
        opt_out_overridden=ready.opt_out_overridden,
        sent_at=now,
    )


def get_test_send(engine: Engine, campaign_id: int, test_id: int) -> TestSend | None:
    """One test send, its stored events applied first (an event that raced the send's
    record is applied here, so a read never shows a stale state); None when unknown."""
    with engine.begin() as conn:
        row = tq.get_test_send(conn, campaign_id, test_id)
        if (
            row is not None
            and row["message_id"]
            and apply_test_send_events(conn, [row["message_id"]])
        ):
            row = tq.get_test_send(conn, campaign_id, test_id)
    return None if row is None else _record(row)


def test_sends_page(
    engine: Engine, campaign_id: int, *, limit: int, offset: int = 0
) -> Page[TestSend]:
    """A campaign's test sends, newest first; :class:`CampaignNotFound` for none."""
    get_campaign(engine, campaign_id)
    with engine.connect() as conn:
        total, rows = tq.test_sends_page(conn, campaign_id, limit=limit, offset=offset)
    return Page([_record(r) for r in rows], total)


__all__ = [
    "PER_HOUR",
    "STATES",
    "CampaignNotFound",
    "DraftTestSend",
    "SupportsSend",
    "TestAsk",
    "TestSend",
    "TestSendRefused",
    "get_test_send",
    "send_draft_test",
    "send_test",
    "test_sends_page",
]
