"""Instances: the gateway sessions gatecast sends through (rows + gateway operations)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, Query, Request, Response, status
from pydantic import BaseModel, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from campaigns import instances as domain
from gatecast.web.api.common import (
    GATEWAY_ANSWERS,
    Limit,
    Offset,
    Page,
    RequestBody,
    field_error,
    not_found,
)
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once
from gatecast.web.problems import Problem, web_terms
from gateway.errors import GatewayError
from gateway.errors import RequestValidationError as GatewayRequestError
from scheduler.care_view import SenderCare, describe, sender_care
from scheduler.sender_usage import SenderUsage, sender_usage

router = APIRouter(tags=["instances"])
T = TypeVar("T")


@pydantic_dataclass(frozen=True)
class InstancePublic(domain.InstanceRecord):
    """An instance as the API shows it."""

    sends_today: int = Field(
        0,
        description="Messages sent (or being sent) through it today, counted as its daily "
        "cap counts them: since local midnight of the campaign whose cap applies (00:00 UTC "
        "when no cap applies)",
    )
    daily_cap: int | None = Field(
        None, description="Smallest daily cap of the active campaigns sending through it"
    )
    # sender care (docs/scheduling-and-pacing.md, "Sender care")
    warmup_day: int = Field(1, description="Its warm-up day (1: its first day in gatecast)")
    warmup_allowance: float | None = Field(
        None, description="Today's warm-up allowance in new-contact messages (null: no limit)"
    )
    warmup_used: float = Field(
        0.0, description="How much of it is used (a known contact counts less)"
    )
    warmup_off: bool = Field(False, description="Its warm-up is turned off")
    warmup_ramp: str | None = Field(None, description="Its own ramp (null: the default)")
    allowance_left: int | None = Field(
        None,
        description="Messages it may still start today: the min of the daily cap and the "
        "warm-up (null: neither limits)",
    )
    health_score: float = Field(0.0, description="Its health score now (0-100, decaying)")
    health_level: str = Field(
        "low",
        description="low, medium (pace halved), high (paused, resumes by itself) or "
        "critical (paused until resumed)",
    )
    health_resume_at: datetime | None = Field(
        None, description="At high: when it resumes by itself"
    )
    timelock_until: datetime | None = Field(
        None, description="While a 463 timelock holds: its end (cold contacts wait)"
    )
    care_summary: str = Field("", description="The above in one line, as the dashboard shows it")


def _public(
    records: list[domain.InstanceRecord],
    usage: dict[str, SenderUsage],
    care: dict[str, SenderCare],
) -> list[InstancePublic]:
    out = []
    for r in records:
        extra: dict[str, object] = {}
        if r.instance_id in care:
            extra = asdict(care[r.instance_id])
            extra["care_summary"] = describe(care[r.instance_id])
        out.append(
            InstancePublic(
                **asdict(r),
                sends_today=usage[r.instance_id].sends_today,
                daily_cap=usage[r.instance_id].daily_cap,
                **extra,  # type: ignore[arg-type]
            )
        )
    return out


def _instance_rows(
    ctx: AppContext, instance_id: str | None = None, limit: int | None = None, offset: int = 0
) -> tuple[list[InstancePublic], int]:
    """Instances (one, or ``limit`` from ``offset``, oldest first) with what they sent
    today and their care, read in one connection; and how many there are."""
    now = ctx.clock()
    with ctx.engine.connect() as conn:
        every = domain.list_all(conn, instance_id)
        records = every[offset:] if limit is None else every[offset : offset + limit]
        ids = [r.instance_id for r in records]
        usage = sender_usage(conn, ids, now)
        care = sender_care(conn, ids, now, usage)
    return _public(records, usage, care), len(every)


def list_instance_rows(
    ctx: AppContext, limit: int | None = None, offset: int = 0
) -> tuple[list[InstancePublic], int]:
    """Known instances, oldest first, with what they sent today (``limit`` of them from
    ``offset``), and how many are known."""
    return _instance_rows(ctx, limit=limit, offset=offset)


def get_instance_row(ctx: AppContext, instance_id: str) -> InstancePublic:
    """One instance, or a 404."""
    rows, _ = _instance_rows(ctx, instance_id)
    if not rows:
        raise not_found("instance", instance_id)
    return rows[0]


@router.get("/instances", response_model=Page[InstancePublic])
def get_instances(
    ctx: Annotated[AppContext, Depends(get_ctx)], limit: Limit = 100, offset: Offset = 0
) -> Page[InstancePublic]:
    """Instances, oldest first, with their connection state and sends today; paged."""
    items, total = list_instance_rows(ctx, limit, offset)
    return Page[InstancePublic](items=items, total=total, limit=limit, offset=offset)


@router.get("/instances/{instance_id}", response_model=InstancePublic)
def get_instance(instance_id: str, ctx: Annotated[AppContext, Depends(get_ctx)]) -> InstancePublic:
    """One instance with its connection state."""
    return get_instance_row(ctx, instance_id)


class InstanceCreate(RequestBody):
    """A new instance: the gateway names it; the label is ours."""

    label: str = Field("", max_length=200)


class QrCodePublic(BaseModel):
    """The login QR code (None when the gateway only delivers it through the webhook)."""

    instance_id: str
    state: str
    data_uri: str | None
    detail: str = ""


class WebhookRequest(RequestBody):
    """Where the gateway should post events (default: this server's webhook address)."""

    url: str | None = Field(None, description="Override the address derived from settings")


class OperationResult(BaseModel):
    """What an instance operation did."""

    instance_id: str
    detail: str
    new_instance_id: str | None = None
    resumed_reason: str | None = Field(
        None, description="The pause this operation lifted (resume, or reconnect)"
    )
    deliveries_moved: int = Field(0, description="reset: waiting deliveries now on the new id")
    campaigns_updated: list[int] = Field(
        default_factory=list, description="reset: unfinished campaigns whose instance list changed"
    )


Ctx = Annotated[AppContext, Depends(get_ctx)]


def _gateway_failure(exc: GatewayError) -> Problem:
    return Problem(
        status.HTTP_502_BAD_GATEWAY,
        "gateway_error",
        f"gateway: {web_terms(exc.message)}",
        title="The gateway refused or could not be reached",
    )


def _gateway_call(fn: Callable[[], T], field: tuple[str, ...] = ("path", "instance_id")) -> T:
    """Run a domain call; a gateway failure is a 502, a request it refuses a 422 on
    ``field``, a gone instance a 409."""
    try:
        return fn()
    except domain.InstanceGone as exc:
        raise _gone(exc) from None
    except GatewayRequestError as exc:
        raise field_error(field, exc.problem) from None
    except GatewayError as exc:
        raise _gateway_failure(exc) from None


def _gone(exc: domain.InstanceGone) -> Problem:
    return Problem(
        status.HTTP_409_CONFLICT,
        "instance_gone",
        f"{exc}: create a new instance, and forget this one (DELETE it)",
        title="The instance no longer exists at the gateway",
    )


def webhook_address(ctx: AppContext, fallback_base: str = "") -> str | None:
    """This deployment's webhook address (:func:`campaigns.instances.webhook_address`:
    ``public_url``, else the address the caller reached this server at); None without a
    webhook secret."""
    secret = ctx.settings.webhook_secret.get_secret_value()
    return domain.webhook_address(ctx.settings.public_url, fallback_base, secret)


def create_instance(ctx: AppContext, label: str, base: str = "") -> InstancePublic:
    """Create an instance at the gateway and remember it (same id while one is unscanned)."""
    try:
        label = domain.check_label(label)
    except domain.LabelError as exc:
        raise field_error(("body", "label"), str(exc)) from None
    with ctx.gateway() as client:
        instance_id = _gateway_call(
            lambda: domain.create(ctx.engine, client, now=ctx.clock(), label=label)
        )
    address = webhook_address(ctx, base)
    if address:  # the spec dialect accepts it now; the reference one only after the scan
        register_webhook(ctx, instance_id, address, quiet=True)
    return get_instance_row(ctx, instance_id)


def fetch_qr(
    ctx: AppContext, instance_id: str, base: str = "", *, relink: bool = False
) -> QrCodePublic:
    """Ask the gateway for the current QR code; an already-linked instance becomes connected.

    A QR request ends the session of a linked phone whose connection merely dropped
    (``disconnected``: gatecast's reconnector brings it back), so it is refused with 409
    for such an instance unless ``relink`` says the user wants to scan again.
    """
    row = get_instance_row(ctx, instance_id)
    if row.state == "disconnected" and not relink:
        raise Problem(
            status.HTTP_409_CONFLICT,
            "instance_reconnecting",
            f"instance {instance_id} lost its connection and gatecast is reconnecting it; "
            "a new QR code would end the phone's session (to link it again anyway, "
            "ask with relink=true)",
            title="The instance is reconnecting",
            state=row.state,
        )
    with ctx.gateway() as client:
        qr = _gateway_call(
            lambda: domain.fetch_qr(ctx.engine, client, instance_id, now=ctx.clock())
        )
    if qr.newly_connected:
        address = webhook_address(ctx, base)
        if address and not row.webhook_url_registered:
            register_webhook(ctx, instance_id, address, quiet=True)
    return QrCodePublic(
        instance_id=instance_id, state=qr.state, data_uri=qr.data_uri, detail=qr.detail
    )


def register_webhook(
    ctx: AppContext, instance_id: str, url: str, *, quiet: bool = False
) -> OperationResult:
    """Point the instance's events at ``url``; ``quiet`` swallows a refusal (not linked yet)."""
    with ctx.gateway() as client:
        try:
            domain.set_webhook(ctx.engine, client, instance_id, url, now=ctx.clock())
        except domain.InstanceGone as exc:
            if quiet:
                return OperationResult(instance_id=instance_id, detail=str(exc))
            raise _gone(exc) from None
        except GatewayRequestError as exc:
            raise field_error(("body", "url"), exc.problem) from None
        except GatewayError as exc:
            if quiet:
                return OperationResult(instance_id=instance_id, detail=exc.message)
            raise _gateway_failure(exc) from None
    return OperationResult(instance_id=instance_id, detail="webhook registered")


def run_operation(ctx: AppContext, instance_id: str, operation: str) -> OperationResult:
    """reboot, reconnect, logout or reset, then record what it means for the row."""
    get_instance_row(ctx, instance_id)
    with ctx.gateway() as client:
        if operation == "reset":
            reset = _gateway_call(
                lambda: domain.reset(ctx.engine, client, instance_id, now=ctx.clock())
            )
        else:
            done = _gateway_call(
                lambda: domain.operate(ctx.engine, client, instance_id, operation, now=ctx.clock())
            )
            return OperationResult(
                instance_id=instance_id,
                detail=f"{operation}: done"
                + (f"; pause lifted ({done.resumed_reason})" if done.resumed_reason else ""),
                resumed_reason=done.resumed_reason,
            )
    detail = (
        "reset, but the gateway did not return the new id: the old id no longer exists "
        "there, so it is marked gone; create a new instance (a gateway hands back the reset "
        "one's id while it is unscanned) or find the new id at the gateway"
        if reset.new_id_unknown
        else f"reset: new id {reset.new_id}"
    )
    return OperationResult(
        instance_id=instance_id,
        detail=detail,
        new_instance_id=None if reset.new_id_unknown else reset.new_id,
        deliveries_moved=reset.deliveries_moved,
        campaigns_updated=reset.campaigns_updated,
    )


def resume_sender(ctx: AppContext, instance_id: str) -> OperationResult:
    """Clear the instance's pause (whatever caused it) so the dispatcher sends through it."""
    try:
        result = domain.resume(ctx.engine, instance_id, now=ctx.clock())
    except domain.UnknownInstance:
        raise not_found("instance", instance_id) from None
    if result.cleared_reason is None:
        return OperationResult(instance_id=instance_id, detail="resume: it was not paused")
    return OperationResult(
        instance_id=instance_id,
        detail=f"resumed (it was paused: {result.cleared_reason})",
        resumed_reason=result.cleared_reason,
    )


@router.post(
    "/instances",
    response_model=InstancePublic,
    status_code=201,
    dependencies=[IDEMPOTENT],
    responses=GATEWAY_ANSWERS,
)
def post_instance(body: InstanceCreate, ctx: Ctx, request: Request) -> Response:
    """Create an instance at the gateway (then fetch its QR code and scan it).

    Its webhook is registered at once when the gateway allows it (else after the scan).
    ``Idempotency-Key`` honoured (a repeat replays the first answer).
    """
    return run_once(
        request,
        ctx,
        body,
        lambda: create_instance(ctx, body.label, str(request.base_url)),
        status.HTTP_201_CREATED,
        "/api/v1/instances/{instance_id}",
    )


@router.post(
    "/instances/{instance_id}/link", response_model=QrCodePublic, responses=GATEWAY_ANSWERS
)
def post_link(
    instance_id: str,
    ctx: Ctx,
    request: Request,
    relink: Annotated[
        bool, Query(description="Also for a dropped (disconnected) instance: a new scan")
    ] = False,
) -> QrCodePublic:
    """Link the instance: ask the gateway for the current login QR code (a data URI) to
    scan, while the instance waits for a scan (it rotates: ask again every few seconds
    while showing it). An instance the gateway reports linked becomes ``connected``.

    A POST, for the operator role: asking for a QR code changes the instance at the
    gateway. Never repeat it for a linked instance: for one whose connection dropped
    (409 unless ``relink=true``) a QR request would end the phone's session.
    """
    return fetch_qr(ctx, instance_id, str(request.base_url), relink=relink)


@router.post(
    "/instances/{instance_id}/webhook", response_model=OperationResult, responses=GATEWAY_ANSWERS
)
def post_webhook(
    instance_id: str, ctx: Ctx, request: Request, body: WebhookRequest | None = None
) -> OperationResult:
    """Register this server's webhook (or ``url``) for the instance's events."""
    get_instance_row(ctx, instance_id)
    url = (body.url if body else None) or webhook_address(ctx, str(request.base_url))
    if not url:
        raise field_error(
            ("body", "url"),
            "no webhook address: give url, or have the server's public address "
            "(GATECAST_PUBLIC_URL) set",
        )
    return register_webhook(ctx, instance_id, url)


def _operation_route(operation: str, doc: str) -> None:
    def handler(instance_id: str, ctx: Ctx) -> OperationResult:
        return run_operation(ctx, instance_id, operation)

    handler.__doc__ = doc
    handler.__name__ = f"post_{operation}"
    router.add_api_route(
        f"/instances/{{instance_id}}/{operation}",
        handler,
        methods=["POST"],
        response_model=OperationResult,
        responses=GATEWAY_ANSWERS,
        name=f"instance_{operation}",
    )


_operation_route("reboot", "Log the instance out of the web client and start a new scan.")
_operation_route(
    "reconnect", "Restart the connection after a connection loss (lifts a connection pause)."
)
_operation_route("logout", "Log the instance out of the web client.")
_operation_route("reset", "Log out and get a NEW instance id (old data is deleted).")


class ForgetResult(BaseModel):
    """What forgetting an instance did."""

    instance_id: str
    detail: str
    released: int = Field(
        0, description="Queued deliveries that go to their campaigns' other senders"
    )


@router.delete("/instances/{instance_id}", response_model=ForgetResult)
def delete_instance(instance_id: str, ctx: Ctx) -> ForgetResult:
    """Forget an instance that no longer exists at the gateway (the gateway is not asked):
    it leaves gatecast's senders, its queued deliveries go to their campaigns' other
    senders, and the messages it sent stay in the reports."""
    try:
        result = domain.forget(ctx.engine, instance_id)
    except domain.UnknownInstance:
        raise not_found("instance", instance_id) from None
    return ForgetResult(instance_id=instance_id, detail="forgotten", released=result.released)


class PauseBody(RequestBody):
    """Why a person pauses a sender (optional)."""

    reason: str = Field("", description="Said with the pause (at most 400 characters)")


@router.post("/instances/{instance_id}/pause", response_model=OperationResult)
def post_pause(instance_id: str, ctx: Ctx, body: PauseBody | None = None) -> OperationResult:
    """Stop sending through a sender until someone resumes it (``POST .../resume``); its
    queued messages wait or go to their campaigns' other senders. A sender already paused
    keeps the pause it has."""
    reason = (body or PauseBody()).reason
    try:
        paused = domain.pause(ctx.engine, instance_id, reason, now=ctx.clock())
    except domain.UnknownInstance:
        raise not_found("instance", instance_id) from None
    except ValueError as exc:
        raise field_error(("body", "reason"), str(exc)) from None
    return OperationResult(
        instance_id=instance_id, detail="paused" if paused else "pause: it was already paused"
    )


@router.post("/instances/{instance_id}/resume", response_model=OperationResult)
def post_resume(instance_id: str, ctx: Ctx) -> OperationResult:
    """Let a paused sender send again (paused for quota, a failure burst, its health
    score or relogin; its health score starts again from 0); ``resumed_reason`` is the
    pause it lifted (null: it was not paused)."""
    return resume_sender(ctx, instance_id)


class WarmupBody(RequestBody):
    """A sender's warm-up override (nothing set: the default ramp from its first day)."""

    off: bool = Field(False, description="No warm-up for this sender (only the daily cap)")
    day: int | None = Field(None, description="Today is this warm-up day (1-366)")
    ramp: str | None = Field(
        None,
        description='Its own allowances of day 1, 2, ... e.g. "15,30,60" (after the last '
        "day: no warm-up limit)",
    )


@router.put("/instances/{instance_id}/warmup", response_model=InstancePublic)
def put_warmup(instance_id: str, body: WarmupBody, ctx: Ctx) -> InstancePublic:
    """Set a sender's warm-up (``off``, ``day``, ``ramp``); answers the instance as it is
    now, with today's allowance."""
    if body.off and (body.day is not None or body.ramp is not None):
        raise field_error(("body", "off"), "off turns the warm-up off: give it without day or ramp")
    change = domain.WarmupChange(off=body.off, day=body.day, ramp=body.ramp)
    try:
        domain.set_warmup(ctx.engine, instance_id, change, now=ctx.clock())
    except domain.UnknownInstance:
        raise not_found("instance", instance_id) from None
    except domain.WarmupRefused as exc:
        raise field_error(("body", exc.field), str(exc)) from None
    return get_instance_row(ctx, instance_id)
