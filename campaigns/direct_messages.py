"""Direct messages: one message to one recipient through the paced path (``POST
/api/v1/messages``; docs/architecture.md, decision "messages").

A direct message is a campaign of one recipient, marked ``direct`` (left out of the
campaign lists and the overview) and started at once by the scheduler like any other:
its one delivery row is made by the same start (opt-out, cooldown and routing decide
there), claimed by the same dispatcher (warm-up, health, pace and daily cap decide
there), and its events are the campaign's and delivery's (the webhooks echo its
``metadata``, :func:`storage.queries.outbound.claim_due`). Its id is the campaign's.

The recipient is a contact found by phone, created when gatecast has none (with no
name and no attributes: the message's variables then render empty only if it uses
none, else it is refused like a campaign that renders for nobody).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, insert, select

from campaigns import lifecycle
from campaigns.campaign_file import CampaignSpec, parse_campaign
from campaigns.contacts import ContactError, add_contact, phone_e164
from campaigns.deployment_defaults import read_defaults
from campaigns.render import ContactData, RenderError, recipient_rng, render_message
from campaigns.service import CampaignSetupError, check_senders, insert_draft
from campaigns.variety import DEFAULT_MAX_IDENTICAL_IN_ROW
from storage import tables
from storage.queries import contacts as cq
from storage.queries import instances as iq
from storage.types import utcnow

_c = tables.campaigns
_d = tables.deliveries

#: the largest ``metadata`` object accepted, as compact JSON
MAX_METADATA_BYTES = 4096


class MessageError(ValueError):
    """A message refused before anything was stored; ``field`` names the input."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class DirectMessage:
    """A direct message and where it is: ``state`` is its delivery's (``queued`` before
    its row exists); ``reason`` why it was skipped or failed."""

    id: int
    to: str
    contact_id: int | None
    message_type: str
    state: str
    reason: str | None
    sender: str | None
    message_id: str | None
    metadata: dict[str, Any] | None
    created_at: datetime
    sent_at: datetime | None
    delivered_at: datetime | None
    read_at: datetime | None
    delivery_id: int | None


def check_metadata(metadata: Any) -> dict[str, Any] | None:
    """The integrator's ``metadata``: a JSON object of at most :data:`MAX_METADATA_BYTES`."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise MessageError("metadata must be a JSON object", "metadata")
    size = len(json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_METADATA_BYTES:
        raise MessageError(
            f"metadata is {size} bytes as JSON; at most {MAX_METADATA_BYTES}", "metadata"
        )
    return dict(metadata)


def _contact(engine: Engine, e164: str, region: str, now: datetime) -> tuple[int, ContactData]:
    """The contact of ``e164``, created when gatecast has none."""
    with engine.connect() as conn:
        row = cq.get_contact(conn, e164)
    if row is None:
        with contextlib.suppress(ContactError):  # else created meanwhile by another request
            add_contact(engine, e164, region=region, now=now)
        with engine.connect() as conn:
            row = cq.get_contact(conn, e164)
    assert row is not None
    data = ContactData(phone=row.phone, name=row.name or "", attributes=row.attributes or {})
    return int(row.id), data


def send_message(
    engine: Engine,
    *,
    to: str,
    message: Mapping[str, Any],
    region: str,
    instances: list[str] | None = None,
    pace: Mapping[str, Any] | None = None,
    metadata: Any = None,
    now: datetime | None = None,
    default_cooldown_hours: float = 0.0,
    default_max_identical: int = DEFAULT_MAX_IDENTICAL_IN_ROW,
    within: Callable[[Connection, int], None] | None = None,
) -> int:
    """Store a direct message to ``to`` and schedule it now; its id. Refused with
    :class:`MessageError` (unusable phone or metadata, a message that does not render for
    the contact) or :class:`campaigns.campaign_file.CampaignFileError` (the message, pace
    or instances as a campaign file would refuse them). ``within`` runs in the
    transaction that stores it, given its id (the reply rules note their answer there:
    the message and the note commit together or not at all)."""
    now = now or utcnow()
    meta = check_metadata(metadata)
    try:
        e164 = phone_e164(to, region)
    except ContactError as exc:
        raise MessageError(str(exc), "to") from None
    data: dict[str, Any] = {
        "name": f"Message to {e164}",
        "audience": {"where": {"phone": e164}},
        "message": dict(message),
    }
    if instances:
        data["instances"] = list(instances)
    if pace is not None:
        data["pace"] = dict(pace)
    spec = parse_campaign(data, "message").with_cooldown_default(default_cooldown_hours)
    if pace is None:  # the deployment's stored pace, as a campaign's (decision 65)
        stored = read_defaults(engine).pace
        spec = spec if stored is None else spec.model_copy(update={"pace": stored})
    spec = spec.with_identical_default(default_max_identical)
    contact_id, contact = _contact(engine, e164, region, now)
    _check_renders(spec, contact)
    assert spec.audience is not None
    with engine.begin() as conn:
        check_senders(conn, spec)
        campaign_id = insert_draft(
            conn,
            spec,
            now=now,
            start_at=now,
            audience=spec.audience.definition(),
            direct=True,
            message_metadata=meta,
        )
        # the audience evaluated already: its one member (the start leaves it as it is)
        conn.execute(
            insert(tables.audience_members).values(campaign_id=campaign_id, contact_id=contact_id)
        )
        lifecycle.transition(conn, campaign_id, lifecycle.SCHEDULED, now=now)
        if within is not None:
            within(conn, campaign_id)
    return campaign_id


def answering_senders(conn: Connection, instance_id: str | None) -> list[str] | None:
    """The senders an answer to a message received by ``instance_id`` goes through: that
    one (the person sees it in the chat they wrote to), unless gone or removed (None: any
    usable sender)."""
    found = iq.health(conn, [instance_id]) if instance_id else {}
    kept = [i for i, h in found.items() if h.state != iq.GONE]
    return kept or None


def _check_renders(spec: CampaignSpec, contact: ContactData) -> None:
    """Refuse a message that cannot render for its contact (nothing would be sent)."""
    try:
        render_message(spec.message, contact, recipient_rng(0, contact.phone))
    except RenderError as exc:
        raise MessageError(
            f"the message cannot be rendered for {contact.phone}: {exc}", "message"
        ) from None


def get_message(engine: Engine, message_id: int) -> DirectMessage | None:
    """A direct message and its state (None: no direct message has this id)."""
    with engine.connect() as conn:
        return _get(conn, message_id)


def _get(conn: Connection, message_id: int) -> DirectMessage | None:
    camp = conn.execute(
        select(
            _c.c.id,
            _c.c.spec,
            _c.c.state,
            _c.c.state_reason,
            _c.c.message_type,
            _c.c.message_metadata,
            _c.c.created_at,
        ).where(_c.c.id == message_id, _c.c.direct.is_(True))
    ).one_or_none()
    if camp is None:
        return None
    row = conn.execute(
        select(_d).where(_d.c.campaign_id == message_id).order_by(_d.c.id).limit(1)
    ).one_or_none()
    if row is None:  # not started yet, or its start failed (no sender) or was cancelled
        ended = camp.state in (lifecycle.FAILED, lifecycle.CANCELLED)
        state, reason = ("failed", camp.state_reason or camp.state) if ended else ("queued", None)
    else:
        state = str(row.state)
        reason = None if row.state in ("queued", "sending") else row.error
    where = (camp.spec or {}).get("audience", {}).get("where", {})
    to = str(where.get("phone", "")) if row is None else str(row.target)
    return DirectMessage(
        id=int(camp.id),
        to=to,
        contact_id=None if row is None else row.contact_id,
        message_type=str(camp.message_type),
        state=state,
        reason=reason,
        sender=None if row is None else row.sender,
        message_id=None if row is None else row.message_id,
        metadata=camp.message_metadata,
        created_at=camp.created_at,
        sent_at=None if row is None else row.sent_at,
        delivered_at=None if row is None else row.delivered_at,
        read_at=None if row is None else row.read_at,
        delivery_id=None if row is None else int(row.id),
    )


__all__ = [
    "MAX_METADATA_BYTES",
    "CampaignSetupError",
    "DirectMessage",
    "MessageError",
    "answering_senders",
    "check_metadata",
    "get_message",
    "send_message",
]
