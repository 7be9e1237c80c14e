"""Instance management: a gateway operation and the bookkeeping it means for our rows.

The CLI (``gatecast instance``) and the API (``/api/v1/instances``) are thin callers of
these functions. Each one calls the gateway first and records the result afterwards, in
one transaction; gateway errors (:class:`gateway.errors.GatewayError`,
:class:`gateway.errors.RequestValidationError`) propagate unchanged for the caller to
present. Every function takes ``now`` so time stays injectable.

Row bookkeeping per operation:

* create -> a row (state ``created``) with the label;
* QR code shown -> ``unconfirmed`` (from any state but connected and gone), and a pause
  a connection problem caused is lifted: the user is linking it; or ``connected`` when
  the gateway says the instance is already logged in;
* reboot -> ``waiting_scan``; logout -> ``logged_out``, paused until linked again
  (:data:`campaigns.delivery_lifecycle.LOGGED_OUT_PAUSE`);
* reconnect -> lifts a pause a connection problem caused (the state itself follows the
  webhook's ConnectionStatus events);
* reset -> the row takes the NEW id; deliveries still waiting (queued or sending) and
  the ``instances`` lists of non-final campaigns follow it, in the same transaction. A
  gateway that answers without the new id has still deleted the old one: the row becomes
  ``gone`` (paused; its queued rows go to other senders) and the new id must be found at
  the gateway or a new instance created;
* webhook -> ``webhook_url_registered`` and ``webhook_digest`` (of the URL registered);
* pause -> ``paused_reason`` ``paused by a person[: reason]`` until resumed;
* resume -> clears ``paused_reason`` whatever paused the sender;
* forget -> the row is deleted (the instance no longer exists at the gateway); its queued
  deliveries lose their sender and go to the campaign's other senders; sent rows keep
  it, so reports still name it.

An instance is *usable* (a campaign without ``instances`` sends through it, ``serve``
registers its webhook) when it is linked (``storage.queries.instances.LINKED_STATES``)
and not paused:

* ``connected``: a connection event said so, the gateway answered a QR request with
  "already logged in" (``serve`` asks about every instance waiting for a scan when it
  starts, see :func:`confirm_scans`), or the gateway accepted a send through it;
* ``unconfirmed``: its QR code was shown and nothing confirmed the scan yet. A gateway
  that follows the spec posts no connection event, so a scan is known only by what
  sends prove: the first accepted send makes it ``connected``; a send refused as "not
  activated" makes it ``waiting_scan`` and "relogin required" ``logged_out`` (both paused
  until its QR code is shown again). On a gateway that posts events, the event decides.

Status follows what sends prove, both ways: a sender shown logged out whose send is
accepted is ``connected`` again, a connected one whose send is refused as logged out is
``logged_out``. ``gone`` instances are never used again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sqlalchemy import Connection, Engine, select, update

from campaigns import delivery_lifecycle, lifecycle
from campaigns.names import name_problem
from gateway.errors import GatewayError
from gateway.fan_out import each_at_most
from storage import tables
from storage.queries import instances as iq
from storage.queries import sender_care

if TYPE_CHECKING:  # the caller hands the client in: reading senders never loads httpx
    from gateway.client import GatewayClient

_i = tables.instances
_c = tables.campaigns

#: what the gateway says when a QR code is asked for an instance that is already linked
ALREADY_LINKED = "already logged in"
#: campaign states whose spec may still start sending (their ``instances`` list matters)
NON_FINAL = (lifecycle.DRAFT, lifecycle.SCHEDULED, lifecycle.RUNNING, lifecycle.PAUSED)
#: what ``set_webhook`` sends as ``webhook_url`` to turn a webhook off when no address is
#: given: the spec requires the field even then, and ``.invalid`` never resolves
DISABLED_WEBHOOK_URL = "http://webhook-disabled.invalid/"
#: the route gatecast receives gateway events on (the webhook secret follows it)
WEBHOOK_PATH = "/webhooks/gateway/"
#: the pause of an instance reset by a gateway that did not say its new id
GONE_AFTER_RESET = "gone: reset at the gateway, which did not return the new id"
#: states a QR code shown does not change (linked for sure, or gone for good)
_KEPT_BY_QR = (iq.CONNECTED, iq.GONE)


class InstanceGone(RuntimeError):
    """The instance no longer exists at the gateway (reset without a new id, or its id
    was invalidated): gatecast does not use it again."""

    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id
        super().__init__(
            f"instance {instance_id} no longer exists at the gateway (it was reset or removed)"
        )


class UnknownInstance(LookupError):
    """gatecast has no row for this instance id."""

    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id
        super().__init__(f"gatecast knows no instance {instance_id!r}")


@dataclass(frozen=True)
class InstanceRecord:
    """The stored row of one instance."""

    instance_id: str
    label: str
    state: str
    paused_reason: str | None
    paused_at: datetime | None
    webhook_url_registered: bool
    phone: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: Mapping[Any, Any]) -> InstanceRecord:
        """From a row mapping of the ``instances`` table."""
        return cls(
            instance_id=str(row["instance_id"]),
            label=str(row["label"] or ""),
            state=str(row["state"]),
            paused_reason=row["paused_reason"],
            paused_at=row["paused_at"],
            webhook_url_registered=bool(row["webhook_url_registered"]),
            phone=row["phone"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


@dataclass(frozen=True)
class QrOutcome:
    """What a QR code request found."""

    instance_id: str
    state: str  # unconfirmed (a QR code shown), or connected when already linked
    data_uri: str | None  # None: already linked, or the gateway posts it to the webhook
    already_linked: bool = False
    newly_connected: bool = False  # already linked, and the row did not say so before
    detail: str = ""


@dataclass(frozen=True)
class OperationOutcome:
    """What reboot, reconnect or logout did to the row."""

    instance_id: str
    operation: str
    state: str
    resumed_reason: str | None = None  # the pause reconnect lifted


@dataclass(frozen=True)
class ResetOutcome:
    """What a reset did: the id the row now has and what followed it."""

    old_id: str
    new_id: str
    new_id_unknown: bool  # the gateway did not return a new id: the old row is now gone
    merged: bool  # the new id already had a row: it was reset and the old row logged out
    deliveries_moved: int = 0
    campaigns_updated: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class ResumeOutcome:
    """What resume found: the reason cleared (None when the sender was not paused)."""

    instance_id: str
    cleared_reason: str | None


def get(conn: Connection, instance_id: str) -> InstanceRecord | None:
    """The stored row of ``instance_id``, or None."""
    row = conn.execute(select(_i).where(_i.c.instance_id == instance_id)).mappings().first()
    return InstanceRecord.of(row) if row else None


def list_all(conn: Connection, instance_id: str | None = None) -> list[InstanceRecord]:
    """Every stored instance (or just ``instance_id``), oldest first."""
    query = select(_i).order_by(_i.c.id)
    if instance_id is not None:
        query = query.where(_i.c.instance_id == instance_id)
    return [InstanceRecord.of(r) for r in conn.execute(query).mappings()]


def _refuse_gone(engine: Engine, instance_id: str) -> None:
    with engine.connect() as conn:
        record = get(conn, instance_id)
    if record is not None and record.state == iq.GONE:
        raise InstanceGone(instance_id)


def _set(conn: Connection, which: str, now: datetime, **values: Any) -> None:
    values["updated_at"] = now
    if "state" in values:  # when the state was recorded (decision 48)
        values["state_at"] = now
    conn.execute(update(_i).where(_i.c.instance_id == which).values(**values))


def _remember(conn: Connection, instance_id: str, now: datetime) -> InstanceRecord:
    """The row of ``instance_id``, created when gatecast did not know it yet."""
    iq.ensure(conn, [instance_id], now=now)
    record = get(conn, instance_id)
    assert record is not None
    return record


#: the longest instance label
MAX_LABEL = 200


class LabelError(ValueError):
    """A label an instance cannot have (too long, or a character no name may hold)."""


def check_label(label: str) -> str:
    """``label`` trimmed, or :class:`LabelError` saying why it cannot be one."""
    cleaned = label.strip()
    if len(cleaned) > MAX_LABEL:
        raise LabelError(f"the label is longer than {MAX_LABEL} characters")
    problem = name_problem(cleaned)
    if problem is not None:
        raise LabelError(f"the label {problem}")
    return cleaned


def create(engine: Engine, client: GatewayClient, *, now: datetime, label: str = "") -> str:
    """Create an instance at the gateway and record it; its id (the same while unscanned).
    A label that cannot be one is refused before the gateway is asked (:class:`LabelError`)."""
    label = check_label(label)
    instance_id = client.create_instance()
    with engine.begin() as conn:
        _remember(conn, instance_id, now)
        if label:
            _set(conn, instance_id, now, label=label)
    return instance_id


def fetch_qr(
    engine: Engine, client: GatewayClient, instance_id: str, *, now: datetime
) -> QrOutcome:
    """Ask for the login QR code and record ``unconfirmed`` (a scan may follow: its first
    send proves it), lifting a pause a connection problem caused; ``connected`` when the
    gateway says the instance is already logged in. :class:`InstanceGone` for a gone one."""
    _refuse_gone(engine, instance_id)
    try:
        qr = client.get_qrcode(instance_id)
    except GatewayError as exc:
        if ALREADY_LINKED not in exc.message.lower():
            raise
        with engine.begin() as conn:
            before = _remember(conn, instance_id, now)
            if before.state != "connected":
                _set(conn, instance_id, now, state="connected")
        return QrOutcome(
            instance_id=instance_id,
            state="connected",
            data_uri=None,
            already_linked=True,
            newly_connected=before.state != "connected",
            detail=exc.message,
        )
    with engine.begin() as conn:
        before = _remember(conn, instance_id, now)
        state = before.state
        if state not in _KEPT_BY_QR:
            state = iq.UNCONFIRMED
            _set(conn, instance_id, now, state=state)
            iq.resume_connection_pause(
                conn, instance_id, now=now, reasons=delivery_lifecycle.CONNECTION_PAUSE_REASONS
            )
    detail = "" if qr.data_uri else "the gateway sends the QR code through the webhook"
    return QrOutcome(instance_id=instance_id, state=state, data_uri=qr.data_uri, detail=detail)


def webhook_address(public_url: str, own_address: str, secret: str) -> str | None:
    """The webhook URL this deployment registers with the gateway: ``public_url``
    (``GATECAST_PUBLIC_URL``) when set, else the registering process's ``own_address``,
    followed by the webhook route and the secret; None without an address or a secret.

    Every registering path (``serve``, the leader's check, ``campaign run --webhook``, the
    API and CLI without a URL) uses this rule, so all processes register one address."""
    base = (public_url.strip() or own_address.strip()).rstrip("/")
    if not base or not secret:
        return None
    return f"{base}{WEBHOOK_PATH}{quote(secret, safe='')}"


def webhook_digest(url: str) -> str:
    """What an instance's row keeps of the webhook URL registered for it (SHA-256, hex:
    the URL holds the secret)."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()


def set_webhook(
    engine: Engine,
    client: GatewayClient,
    instance_id: str,
    url: str,
    *,
    now: datetime,
    enable: bool = True,
) -> None:
    """Register (or with ``enable=False`` turn off) the instance's webhook and record it.

    Turning it off needs no address (``url`` may be empty: :data:`DISABLED_WEBHOOK_URL`
    goes in the field the gateway requires). :class:`InstanceGone` when registering one
    for a gone instance."""
    if enable:
        _refuse_gone(engine, instance_id)
    client.set_webhook(instance_id, url or DISABLED_WEBHOOK_URL, enable)
    with engine.begin() as conn:
        _remember(conn, instance_id, now)
        digest = webhook_digest(url) if enable else None
        _set(conn, instance_id, now, webhook_url_registered=enable, webhook_digest=digest)


#: the state an accepted operation leaves (a reconnect the gateway accepts is connected:
#: it refuses one a logged-out session asks for, decision 48)
_STATE_AFTER = {"reboot": "waiting_scan", "logout": "logged_out", "reconnect": "connected"}


def operate(
    engine: Engine, client: GatewayClient, instance_id: str, operation: str, *, now: datetime
) -> OperationOutcome:
    """Run ``reboot``, ``reconnect`` or ``logout`` at the gateway and record what it means.

    A successful reconnect lifts a pause that a connection problem caused
    (``relogin_required``, ``not_activated``, ``disconnected``); other pauses stay.
    """
    if operation not in ("reboot", "reconnect", "logout"):
        raise ValueError(f"unknown instance operation {operation!r}")
    _refuse_gone(engine, instance_id)
    getattr(client, operation)(instance_id)
    resumed: str | None = None
    with engine.begin() as conn:
        record = _remember(conn, instance_id, now)
        state = _STATE_AFTER.get(operation, record.state)
        if operation in _STATE_AFTER:
            _set(conn, instance_id, now, state=state)
        if operation == "logout":  # nothing goes through it until it is linked again
            iq.pause(conn, instance_id, delivery_lifecycle.LOGGED_OUT_PAUSE, now=now)
        if operation == "reconnect":
            resumed = iq.resume_connection_pause(
                conn, instance_id, now=now, reasons=delivery_lifecycle.CONNECTION_PAUSE_REASONS
            )
    return OperationOutcome(
        instance_id=instance_id, operation=operation, state=state, resumed_reason=resumed
    )


def _replace_in_specs(conn: Connection, old_id: str, new_id: str, now: datetime) -> list[int]:
    """Swap ``old_id`` for ``new_id`` in the ``instances`` list of non-final campaigns."""
    rows = conn.execute(select(_c.c.id, _c.c.spec).where(_c.c.state.in_(NON_FINAL))).all()
    changed: list[int] = []
    for campaign_id, spec in rows:
        listed = (spec or {}).get("instances") if isinstance(spec, dict) else None
        if not isinstance(listed, list) or old_id not in listed:
            continue
        swapped = list(dict.fromkeys(new_id if i == old_id else i for i in listed))
        conn.execute(
            update(_c)
            .where(_c.c.id == campaign_id)
            .values(spec={**spec, "instances": swapped}, updated_at=now)
        )
        changed.append(int(campaign_id))
    return changed


_FRESH: dict[str, Any] = {
    "state": "created",
    "phone": None,
    "webhook_url_registered": False,
    "webhook_digest": None,
    "paused_reason": None,
    "paused_at": None,
}


def reset(
    engine: Engine, client: GatewayClient, instance_id: str, *, now: datetime
) -> ResetOutcome:
    """Reset the instance at the gateway (logout + a NEW id, old data deleted) and make
    everything that named the old id follow the new one, in one transaction: the row,
    the queued or sending deliveries, and the ``instances`` lists of non-final campaigns.

    The spec says a reset changes the id. A gateway that answers without the new id (or
    with the old one) has deleted the old id all the same: its row becomes ``gone``
    (paused, never used again; queued rows go to the campaign's other senders).
    """
    _refuse_gone(engine, instance_id)
    new_id = client.reset_instance(instance_id)
    with engine.begin() as conn:
        _remember(conn, instance_id, now)
        if new_id == instance_id:
            iq.mark_gone(conn, instance_id, GONE_AFTER_RESET, now=now)
            return ResetOutcome(
                old_id=instance_id, new_id=new_id, new_id_unknown=True, merged=False
            )
        merged = get(conn, new_id) is not None
        if merged:  # the gateway reused an id we know: reset that row, retire the old one
            _set(conn, new_id, now, **_FRESH)
            _set(conn, instance_id, now, state="logged_out")
        else:
            _set(conn, instance_id, now, instance_id=new_id, **_FRESH)
        moved = iq.move_waiting_deliveries(
            conn, instance_id, new_id, waiting=delivery_lifecycle.OPEN
        )
        campaigns = _replace_in_specs(conn, instance_id, new_id, now)
    return ResetOutcome(
        old_id=instance_id,
        new_id=new_id,
        new_id_unknown=False,
        merged=merged,
        deliveries_moved=moved,
        campaigns_updated=campaigns,
    )


@dataclass(frozen=True)
class ForgetOutcome:
    """What forget did: the row is gone; ``released`` queued rows wait for a new sender."""

    instance_id: str
    released: int


def forget(engine: Engine, instance_id: str) -> ForgetOutcome:
    """Remove an instance that no longer exists at the gateway from gatecast's senders
    (the gateway is not asked). Its queued deliveries go to their campaigns' other
    senders; sent ones keep it (reports). :class:`UnknownInstance` when there is no row."""
    with engine.begin() as conn:
        released = iq.forget(conn, instance_id)
    if released is None:
        raise UnknownInstance(instance_id)
    return ForgetOutcome(instance_id=instance_id, released=released)


def confirm_scans(
    engine: Engine, client: GatewayClient, *, now: datetime, concurrency: int = 1
) -> list[str]:
    """Ask the gateway about every instance waiting for a scan, at most ``concurrency``
    at once (``GATECAST_WEBHOOK_REGISTER_CONCURRENCY`` at a process's start): those it
    says are already logged in (their QR was scanned) become ``connected``. For gateways
    that post no connection event. Returns the ids that became connected, in id order."""
    with engine.connect() as conn:
        waiting = [r.instance_id for r in list_all(conn) if r.state == "waiting_scan"]

    def one(instance_id: str) -> bool:
        try:
            return fetch_qr(engine, client, instance_id, now=now).newly_connected
        except (GatewayError, InstanceGone):
            return False

    found = each_at_most(one, waiting, concurrency)
    return [i for i, linked in zip(waiting, found, strict=True) if linked]


def confirm_logout(engine: Engine, instance_id: str, *, now: datetime) -> None:
    """The gateway refused to reconnect ``instance_id`` as needing a new login: a logout,
    proven (a send's "relogin required" may be a dropped connection, decision 48 in
    docs/architecture.md). Its state becomes ``logged_out``, a connection pause becomes
    the logged-out pause (never tried again until linked anew), and the health score
    counts a logout."""
    with engine.begin() as conn:
        _set(conn, instance_id, now, state="logged_out")
        iq.resume_connection_pause(
            conn, instance_id, now=now, reasons=delivery_lifecycle.CONNECTION_PAUSE_REASONS
        )
        sender_care.count_signal(conn, instance_id, "logout")
        iq.pause(conn, instance_id, delivery_lifecycle.LOGGED_OUT_PAUSE, now=now)


def mark_gone(engine: Engine, instance_id: str, reason: str, *, now: datetime) -> None:
    """Record that ``instance_id`` no longer exists at the gateway (e.g. the demo's
    embedded sandbox stopped): state ``gone``, paused with ``reason``."""
    with engine.begin() as conn:
        iq.mark_gone(conn, instance_id, reason, now=now)


def mark_connected(engine: Engine, instance_id: str, *, now: datetime) -> None:
    """Record that ``instance_id`` is linked and usable (row created if missing)."""
    with engine.begin() as conn:
        iq.mark_state(conn, instance_id, "connected", now=now)


def linked_ids(engine: Engine) -> list[str]:
    """The ids of the linked instances (connected or unconfirmed), oldest first."""
    return list(linked_states(engine))


def linked_states(engine: Engine) -> dict[str, str]:
    """``instance_id -> state`` of the linked instances (connected or unconfirmed)."""
    with engine.connect() as conn:
        return iq.linked_states(conn)


def webhook_registered(engine: Engine, instance_ids: Sequence[str]) -> dict[str, bool]:
    """``instance_id -> whether its webhook points at gatecast`` (unknown ids absent)."""
    with engine.connect() as conn:
        return iq.webhook_registered(conn, instance_ids)


def registered_webhook_digests(
    engine: Engine, instance_ids: Sequence[str]
) -> dict[str, str | None]:
    """``instance_id -> digest of the webhook URL gatecast last registered`` (None: none
    registered; unknown ids absent): compare with :func:`webhook_digest`."""
    with engine.connect() as conn:
        return iq.webhook_digests(conn, instance_ids)


class WarmupRefused(ValueError):
    """A warm-up override value is refused; ``field`` names it (``day`` or ``ramp``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def parse_ramp(text: str) -> list[int]:
    """A warm-up ramp ``"15,30,60"`` as the allowances of day 1, 2, 3; ValueError naming
    what is wrong."""
    try:
        values = [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise ValueError(
            f"ramp must be whole numbers separated by commas, e.g. 15,30,60, not {text!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise ValueError(f"ramp needs at least one day and every day at least 1, not {text!r}")
    return values


@dataclass(frozen=True)
class WarmupChange:
    """A sender's warm-up override, as ``instance warmup`` and the API set it."""

    off: bool = False
    day: int | None = None  # today is this warm-up day
    ramp: str | None = None  # "15,30,60": allowances of day 1, 2, 3 (then no limit)


def set_warmup(engine: Engine, instance_id: str, change: WarmupChange, *, now: datetime) -> None:
    """Store a sender's warm-up override (:class:`UnknownInstance` when there is no such
    instance; :class:`WarmupRefused` naming the field when a value is refused). Without ``day`` the
    sender's day 1 stays its first day in gatecast; ``off`` turns its warm-up off, and
    nothing (no ``off``, ``day`` or ``ramp``) brings back the default ramp."""
    if change.day is not None and not 1 <= change.day <= 366:
        raise WarmupRefused("day", f"day must be between 1 and 366, not {change.day}")
    ramp = None
    if change.ramp is not None:
        try:
            ramp = ",".join(str(v) for v in parse_ramp(change.ramp))
        except ValueError as exc:
            raise WarmupRefused("ramp", str(exc)) from None
        if len(ramp) > 200:
            raise WarmupRefused("ramp", "ramp is too long: at most 200 characters")
    start = None if change.day is None else now - timedelta(days=change.day - 1)
    with engine.begin() as conn:
        if not sender_care.set_warmup(
            conn, instance_id, off=change.off, start_at=start, ramp=ramp, now=now
        ):
            raise UnknownInstance(instance_id)


#: how a pause a person asked for begins (what follows is their reason)
PAUSED_BY_HAND = "paused by a person"
MAX_PAUSE_REASON = 400


def pause(engine: Engine, instance_id: str, reason: str = "", *, now: datetime) -> bool:
    """Stop sending through a sender until someone resumes it (its queued rows wait, or
    go to its campaigns' other senders as any paused sender's do); the reason is
    ``paused by a person`` and the words given. False when it was already paused (that
    pause stays); :class:`UnknownInstance` when gatecast has no such instance;
    ``ValueError`` for a reason over 400 characters."""
    reason = reason.strip()
    if len(reason) > MAX_PAUSE_REASON:
        raise ValueError(f"at most {MAX_PAUSE_REASON} characters")
    with engine.begin() as conn:
        if get(conn, instance_id) is None:
            raise UnknownInstance(instance_id)
        words = f"{PAUSED_BY_HAND}: {reason}" if reason else PAUSED_BY_HAND
        return iq.pause(conn, instance_id, words, now=now)


def resume(engine: Engine, instance_id: str, *, now: datetime) -> ResumeOutcome:
    """Let a paused sender send again, whatever paused it (quota, a failure burst, its
    health score, relogin); its health score starts again from 0.
    :class:`UnknownInstance` when gatecast has no such instance."""
    with engine.begin() as conn:
        record = get(conn, instance_id)
        if record is None:
            raise UnknownInstance(instance_id)
        cleared = record.paused_reason if iq.resume(conn, instance_id, now=now) else None
        # a person judged the account safe: its health score starts again from 0
        sender_care.reset_health(conn, instance_id, now=now, reason="resumed by a person")
    return ResumeOutcome(instance_id=instance_id, cleared_reason=cleared)


__all__ = [
    "ALREADY_LINKED",
    "DISABLED_WEBHOOK_URL",
    "GONE_AFTER_RESET",
    "NON_FINAL",
    "WEBHOOK_PATH",
    "ForgetOutcome",
    "InstanceGone",
    "InstanceRecord",
    "OperationOutcome",
    "QrOutcome",
    "ResetOutcome",
    "ResumeOutcome",
    "UnknownInstance",
    "WarmupChange",
    "WarmupRefused",
    "confirm_logout",
    "confirm_scans",
    "create",
    "fetch_qr",
    "forget",
    "get",
    "linked_ids",
    "linked_states",
    "list_all",
    "mark_connected",
    "mark_gone",
    "operate",
    "parse_ramp",
    "pause",
    "registered_webhook_digests",
    "reset",
    "resume",
    "set_warmup",
    "set_webhook",
    "webhook_address",
    "webhook_digest",
    "webhook_registered",
]
