"""Working with an existing campaign: clone it, edit it while it is not sending, and
preview its message for one recipient as a phone shows it.

- **Clone**: a new campaign from a stored one's file (``name`` "<name> (copy)" unless
  given), with any top-level sections replaced by ``changes``; created by
  :func:`campaigns.service.create_campaign` with every rule of a create (a start
  already missed is refused naming ``schedule.start``: give a new one, or none to send
  now).
- **Edit**: a scheduled or paused campaign takes a new file (any other state: refused,
  :class:`campaigns.lifecycle.InvalidTransition`, a 409 on the API). Its rows not yet
  sent (``queued``) are rendered again from the new message; one that no longer
  renders is skipped with the reason. Once the campaign has started (it has rows), its
  recipients and their senders are fixed: a changed ``list``, ``[audience]``, ``groups``
  or ``instances`` is refused naming the field. The change is one conditional UPDATE on
  the state read, so a start firing at the same moment and the edit cannot both win.
- **Preview for one recipient**: the message rendered for a chosen contact (else the
  audience's first), the variables it reads that the contact lacks, its spintax
  variants, and the audience's first recipients to choose from. The rules are
  :mod:`campaigns.render`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, select, update

from campaigns import lifecycle
from campaigns.campaign_file import CampaignSpec, parse_campaign, stored_spec
from campaigns.delivery_lifecycle import SKIP_QUEUED
from campaigns.delivery_rows import (
    Recipient,
    audience_recipients,
    group_recipients,
    list_recipients,
)
from campaigns.reading import campaign_row
from campaigns.render import (
    ContactData,
    RenderError,
    missing_variables,
    recipient_rng,
    render_message,
    spintax_variants,
    template_variables,
)
from campaigns.segments import AudienceError, campaign_audience
from campaigns.service import (
    PREVIEW_SEED,
    PREVIEW_SIZE,
    CampaignNotFound,
    CampaignSetupError,
    CreatedCampaign,
    _check_kind,
    _check_senders,
    _check_start,
    _list_id,
    _preview_items,
    _scan,
    create_campaign,
)
from gateway.messages import message_to_dict
from storage import tables
from storage.queries import deliveries as dq
from storage.types import utcnow

_campaigns = tables.campaigns
_contacts = tables.contacts

#: the states in which a campaign's file may change
EDITABLE = lifecycle.ACTIONS["edited"]
#: queued rows rendered again per round trip
RERENDER_CHUNK = 1000
#: recipients the preview offers to choose from
CANDIDATES = 50
#: the fields fixed once a campaign has started: who receives it (its rows exist) and
#: who sends (each row has its sender)
_RECIPIENT_FIELDS = ("list", "audience", "groups", "instances")


def clone_spec(source: CampaignSpec, changes: dict[str, Any] | None = None) -> CampaignSpec:
    """``source``'s file with top-level ``changes`` (a section given replaces the
    section; ``name`` defaults to "<name> (copy)"), validated as a new file."""
    data = source.model_dump(mode="json", exclude_none=True)
    data["name"] = f"{source.name} (copy)"[:300]
    for key, value in (changes or {}).items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return parse_campaign(data, "the clone")


def clone_campaign(
    engine: Engine,
    campaign_id: int,
    changes: dict[str, Any] | None = None,
    *,
    now: datetime | None = None,
    default_cooldown_hours: float = 0.0,
    gateway_kind: str = "spec",
) -> CreatedCampaign:
    """Create a copy of campaign ``campaign_id`` (see the module's docstring); a message
    kind the gateway (``gateway_kind``) cannot send is refused as at create."""
    with engine.connect() as conn:
        row = campaign_row(conn, campaign_id)
    spec = clone_spec(stored_spec(row.spec, campaign_id), changes)
    return create_campaign(
        engine,
        spec,
        now=now,
        default_cooldown_hours=default_cooldown_hours,
        gateway_kind=gateway_kind,
    )


@dataclass(frozen=True)
class EditedCampaign:
    """What an edit did."""

    id: int
    state: str
    start_at: datetime | None
    #: recipients checked against the new file (rows are made at the start)
    recipients: int
    #: queued rows rendered again with the new message (a started campaign)
    rerendered: int
    #: queued rows skipped because the new message does not render for them
    skipped: int
    preview: list[Any]
    unrenderable: list[tuple[str, str]]
    unrenderable_count: int = 0
    opted_out: int = 0


def _recipients_changed(old: CampaignSpec, new: CampaignSpec) -> str | None:
    for name in _RECIPIENT_FIELDS:
        if getattr(old, name) != getattr(new, name):
            return name
    return None


def edit_campaign(
    engine: Engine,
    campaign_id: int,
    spec: CampaignSpec,
    *,
    now: datetime | None = None,
    default_cooldown_hours: float = 0.0,
    gateway_kind: str = "spec",
) -> EditedCampaign:
    """Give a scheduled or paused campaign a new file (see the module's docstring); a
    message kind the gateway (``gateway_kind``) cannot send is refused as at create."""
    now = now or utcnow()
    spec = spec.with_cooldown_default(default_cooldown_hours)
    _check_kind(spec, gateway_kind)
    with engine.connect() as conn:
        row = campaign_row(conn, campaign_id)
        state = str(row.state)
        if state not in EDITABLE:
            raise lifecycle.InvalidTransition(campaign_id, state, state, "edited")
        started = row.started_at is not None or _has_rows(conn, campaign_id)
        if started:
            changed = _recipients_changed(stored_spec(row.spec, campaign_id), spec)
            if changed:
                raise CampaignSetupError(
                    f"{changed}: campaign {campaign_id} has started, so its recipients and "
                    "their senders are fixed; clone it to send to others or through others",
                    changed,
                )
        else:
            _check_start(spec, now)
        _check_senders(conn, spec)
        scan = _scan(conn, spec, first=PREVIEW_SIZE, now=now)
    values: dict[str, Any] = {
        "name": spec.name,
        "spec": spec.model_dump(mode="json"),
        "message_type": spec.message.type,
        "timezone": spec.schedule.timezone,
        "cron": spec.schedule.cron,
        "updated_at": now,
    }
    if not started:
        values["list_id"] = scan.list_id
        values["audience"] = None if scan.audience is None else scan.audience.definition
        values["start_at"] = spec.start_at_utc() or now
    rerendered = skipped = 0
    with engine.begin() as conn:
        done = conn.execute(
            update(_campaigns)
            .where(_campaigns.c.id == campaign_id, _campaigns.c.state == state)
            .values(**values)
        )
        if done.rowcount != 1:  # it started, was paused or cancelled meanwhile
            latest = conn.execute(
                select(_campaigns.c.state).where(_campaigns.c.id == campaign_id)
            ).scalar_one_or_none()
            raise lifecycle.InvalidTransition(campaign_id, latest, state, "edited")
        if started:
            rerendered, skipped = _rerender(conn, campaign_id, spec)
        start_at = conn.execute(
            select(_campaigns.c.start_at).where(_campaigns.c.id == campaign_id)
        ).scalar_one()
    return EditedCampaign(
        id=campaign_id,
        state=state,
        start_at=start_at,
        recipients=scan.total,
        rerendered=rerendered,
        skipped=skipped,
        preview=_preview_items(spec, campaign_id, scan.first),
        unrenderable=scan.unrenderable,
        unrenderable_count=scan.bad,
        opted_out=scan.opted_out,
    )


def _has_rows(conn: Connection, campaign_id: int) -> bool:
    d = tables.deliveries
    found = conn.execute(select(d.c.id).where(d.c.campaign_id == campaign_id).limit(1))
    return found.first() is not None


def _rerender(conn: Connection, campaign_id: int, spec: CampaignSpec) -> tuple[int, int]:
    """Render the campaign's queued rows again from ``spec`` (same seed as at the start)."""
    rewritten = skipped = 0
    after = 0
    while rows := dq.queued_page(conn, campaign_id, after=after, limit=RERENDER_CHUNK):
        contents: list[tuple[int, dict[str, Any]]] = []
        skips: list[tuple[int, str]] = []
        for r in rows:
            if r["target_kind"] == "group":
                data = ContactData(attributes={"group": r["target"]})
            else:
                data = ContactData(
                    phone=r["phone"] or r["target"],
                    name=r["name"] or "",
                    attributes=r["attributes"] or {},
                )
            try:
                message = render_message(
                    spec.message, data, recipient_rng(campaign_id, r["target"])
                )
            except RenderError as exc:
                skips.append((int(r["id"]), exc.reason))
            else:
                contents.append((int(r["id"]), message_to_dict(message)))
        done, gone = dq.rewrite_queued(conn, contents, skips, skip=SKIP_QUEUED)
        rewritten += done
        skipped += gone
        after = int(rows[-1]["id"])
    return rewritten, skipped


# --- the preview for one recipient -------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A recipient the preview can be shown for."""

    contact_id: int | None
    name: str
    target: str


@dataclass(frozen=True)
class RecipientPreview:
    """The message as one recipient gets it.

    ``content`` is None when it does not render for them (``error`` says why);
    ``missing`` lists the variables the message reads that they have no value for;
    ``variants`` the different spintax renderings (``content`` is the one a preview
    seed picks; the stored one is seeded by the campaign id).
    """

    contact_id: int | None
    name: str
    target: str
    opted_out: bool
    content: dict[str, Any] | None
    error: str | None
    variables: list[str]
    missing: list[str]
    variants: list[dict[str, Any]]
    candidates: list[Candidate] = field(default_factory=list)


class ContactUnknown(LookupError):
    """The contact asked for does not exist."""

    def __init__(self, contact_id: int) -> None:
        self.contact_id = contact_id
        super().__init__(f"contact {contact_id} does not exist")


def _first_recipients(conn: Connection, spec: CampaignSpec, limit: int) -> list[Recipient]:
    if spec.groups:
        return group_recipients(spec.groups)[:limit]
    if spec.audience is not None:
        try:
            audience = campaign_audience(conn, spec.audience)
        except AudienceError as exc:
            raise CampaignSetupError(str(exc), exc.field) from None
        return next(iter(audience_recipients(conn, audience.filter, chunk=limit)), [])
    if spec.list is not None:
        list_id = _list_id(conn, spec.list)
        if list_id is None:
            raise CampaignSetupError(
                f"list {spec.list!r} does not exist (import contacts into it first)", "list"
            )
        return next(iter(list_recipients(conn, list_id, chunk=limit)), [])
    return []


def _contact(conn: Connection, contact_id: int) -> Recipient:
    c = _contacts
    row = conn.execute(
        select(c.c.id, c.c.phone, c.c.name, c.c.attributes, c.c.opted_out).where(
            c.c.id == contact_id
        )
    ).first()
    if row is None:
        raise ContactUnknown(contact_id)
    data = ContactData(phone=row.phone, name=row.name or "", attributes=row.attributes or {})
    return Recipient(row.phone, "phone", int(row.id), data, bool(row.opted_out))


def preview_recipient(
    engine: Engine,
    spec: CampaignSpec,
    contact_id: int | None = None,
    *,
    campaign_id: int | None = None,
) -> RecipientPreview:
    """``spec``'s message for contact ``contact_id`` (None: the audience's first
    recipient), seeded as campaign ``campaign_id`` would store it (None: the preview
    seed). :class:`ContactUnknown` for an unknown contact; a missing list, segment...
    :class:`CampaignSetupError` naming the field."""
    with engine.connect() as conn:
        first = _first_recipients(conn, spec, CANDIDATES)
        chosen = _contact(conn, contact_id) if contact_id is not None else None
    candidates = [Candidate(r.contact_id, r.contact.name, r.target) for r in first]
    rcp = chosen or (first[0] if first else None)
    if rcp is None:
        rcp = Recipient("", "phone", None, ContactData(), False)
    seed = PREVIEW_SEED if campaign_id is None else campaign_id
    content: dict[str, Any] | None = None
    error: str | None = None
    variants: list[dict[str, Any]] = []
    try:
        content = message_to_dict(
            render_message(spec.message, rcp.contact, recipient_rng(seed, rcp.target))
        )
        variants = spintax_variants(spec.message, rcp.contact)
    except RenderError as exc:
        error = exc.reason
    return RecipientPreview(
        contact_id=rcp.contact_id,
        name=rcp.contact.name,
        target=rcp.target,
        opted_out=rcp.opted_out,
        content=content,
        error=error,
        variables=template_variables(spec.message),
        missing=missing_variables(spec.message, rcp.contact),
        variants=variants,
        candidates=candidates,
    )


def campaign_file(engine: Engine, campaign_id: int) -> CampaignSpec:
    """The stored file of campaign ``campaign_id`` (:class:`CampaignNotFound` if none)."""
    with engine.connect() as conn:
        return stored_spec(campaign_row(conn, campaign_id).spec, campaign_id)


__all__ = [
    "EDITABLE",
    "CampaignNotFound",
    "Candidate",
    "ContactUnknown",
    "EditedCampaign",
    "RecipientPreview",
    "campaign_file",
    "clone_campaign",
    "clone_spec",
    "edit_campaign",
    "preview_recipient",
]
