"""Outbound webhook endpoints: register (the secret shown once), list, show, change,
rotate the secret (the new one shown once; the old one signs too for an overlap), send a
test event, remove, the delivery attempts, replay."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response, status
from pydantic import AwareDatetime, BaseModel, Field

from campaigns.webhook_endpoints import (
    DEFAULT_OVERLAP,
    MAX_OVERLAP,
    TEST_EVENT,
    Attempt,
    Endpoint,
    EndpointDisabled,
    EndpointError,
    attempts_page,
    create_endpoint,
    delete_endpoint,
    endpoints_page,
    get_endpoint,
    replay,
    rotate_secret,
    send_test_event,
    update_endpoint,
)
from gatecast.web.api.common import (
    Id,
    Limit,
    Offset,
    Page,
    ProblemPublic,
    RequestBody,
    field_error,
    not_found,
)
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once
from gatecast.web.problems import Problem

router = APIRouter(tags=["webhook endpoints"])
Ctx = Annotated[AppContext, Depends(get_ctx)]


class MessageCounts(BaseModel):
    """An endpoint's messages by state."""

    pending: int
    delivered: int
    failed: int


class EndpointPublic(BaseModel):
    """An endpoint (its secret is shown only when it is created)."""

    id: int
    url: str
    events: list[str]
    description: str
    enabled: bool
    disabled_reason: str | None = Field(description="Why it was disabled (a failure run)")
    failing_since: datetime | None = Field(description="First failed attempt of a failure run")
    consecutive_failures: int
    created_at: datetime
    messages: MessageCounts | None = Field(None, description="On one endpoint and its changes")
    old_secret_valid_until: datetime | None = Field(
        None,
        description="Until when the secret before the last rotation also signs (past: it "
        "no longer does; null: never rotated)",
    )


class EndpointCreated(EndpointPublic):
    """A new endpoint with its signing secret: keep it, it is not shown again."""

    secret: str = Field(description="whsec_<base64>: the key of the webhook-signature")


class EndpointRotated(EndpointPublic):
    """The endpoint with its new signing secret: keep it, it is not shown again. Until
    ``old_secret_valid_until`` every event is signed with both secrets."""

    secret: str = Field(description="The new whsec_<base64>")


class EndpointChange(RequestBody):
    """What to change (a field left out is unchanged)."""

    url: str | None = Field(None, max_length=2000, description="http:// or https://")
    events: list[Annotated[str, Field(max_length=40)]] | None = Field(
        None, description='Event names or ["*"]; applies to what happens from now on', max_length=20
    )
    description: str | None = Field(None, max_length=500)
    enabled: bool | None = Field(
        None,
        description="false: no events are written for it (its waiting messages wait); "
        "true: take it back, its waiting messages are sent",
    )


class RotateRequest(RequestBody):
    """How long the current secret still signs beside the new one."""

    overlap_seconds: int = Field(
        int(DEFAULT_OVERLAP.total_seconds()),
        ge=0,
        le=int(MAX_OVERLAP.total_seconds()),
        description="0 to 604800 (7 days); default 86400 (24 h)",
    )


class TestEventQueued(BaseModel):
    """A test event is on its way (see the endpoint's attempts)."""

    event: str = Field(description=TEST_EVENT)
    message_id: str = Field(description="Its webhook-id header")


class EndpointCreate(RequestBody):
    """A new endpoint: the URL that receives the events and which events."""

    url: str = Field(max_length=2000, description="http:// or https://")
    events: list[Annotated[str, Field(max_length=40)]] = Field(
        description='Event names (delivery.sent, reply.received, ...) or ["*"] for all',
        max_length=20,
    )
    description: str = Field("", max_length=500)


class AttemptPublic(BaseModel):
    """One attempt to deliver a message (the endpoint's delivery log)."""

    id: int
    message_id: str = Field(description="The webhook-id header (msg_<ULID>)")
    event: str
    attempt: int
    at: datetime
    status_code: int | None = Field(description="The receiver's HTTP status; none if no answer")
    outcome: str = Field(description="delivered | retrying | failed (given up)")
    error: str | None
    duration_ms: int


class ReplayRequest(RequestBody):
    """What to send again (besides the failed messages)."""

    since: AwareDatetime | None = Field(
        None, description="Also every message that happened since then, delivered or not"
    )


class Replayed(BaseModel):
    """How many messages are due again; the endpoint is enabled."""

    requeued: int


def _public(e: Endpoint) -> EndpointPublic:
    data = e.to_dict()
    return EndpointPublic.model_validate(
        {
            **data,
            "failing_since": e.failing_since,
            "created_at": e.created_at,
            "old_secret_valid_until": e.old_secret_valid_until,
        }
    )


def _refused(exc: EndpointError) -> Problem:
    return field_error(("body", exc.field), exc.message, "webhook_endpoint")


_DISABLED: dict[int | str, dict[str, Any]] = {
    409: {
        "model": ProblemPublic,
        "description": "The endpoint is disabled (code endpoint_disabled): enable it first; "
        "or the first request with this Idempotency-Key is still running "
        "(code idempotency_key_in_progress)",
    }
}


def _attempt(a: Attempt) -> AttemptPublic:
    return AttemptPublic.model_validate(a.__dict__)


@router.get("/webhook-endpoints", response_model=Page[EndpointPublic])
def get_endpoints(ctx: Ctx, limit: Limit = 50, offset: Offset = 0) -> Page[EndpointPublic]:
    """The outbound webhook endpoints, by id."""
    page = endpoints_page(ctx.engine, limit=limit, offset=offset)
    return Page[EndpointPublic](
        items=[_public(e) for e in page.items], total=page.total, limit=limit, offset=offset
    )


@router.post(
    "/webhook-endpoints", response_model=EndpointCreated, status_code=201, dependencies=[IDEMPOTENT]
)
def post_endpoint(body: EndpointCreate, ctx: Ctx, request: Request) -> Response:
    """Register an endpoint; the answer holds its signing secret, shown this once.

    422 naming the field for a URL that is not http(s) or unknown events; nothing is
    stored then. ``Idempotency-Key`` honoured."""

    def create() -> EndpointCreated:
        try:
            created = create_endpoint(
                ctx.engine, body.url, body.events, description=body.description, now=ctx.clock()
            )
        except EndpointError as exc:
            raise _refused(exc) from None
        public = _public(created.endpoint)
        return EndpointCreated(**public.model_dump(), secret=created.secret)

    return run_once(
        request, ctx, body, create, status.HTTP_201_CREATED, "/api/v1/webhook-endpoints/{id}"
    )


@router.get("/webhook-endpoints/{endpoint_id}", response_model=EndpointPublic)
def get_one(endpoint_id: Id, ctx: Ctx) -> EndpointPublic:
    """One endpoint with its messages by state."""
    found = get_endpoint(ctx.engine, endpoint_id)
    if found is None:
        raise not_found("webhook endpoint", endpoint_id)
    return _public(found)


@router.patch("/webhook-endpoints/{endpoint_id}", response_model=EndpointPublic)
def patch_endpoint(endpoint_id: Id, body: EndpointChange, ctx: Ctx) -> EndpointPublic:
    """Change an endpoint's URL, events, description, or turn it off and on. 422 naming
    the field for a bad value (nothing changed then)."""
    given = body.model_fields_set
    for name in given:
        if getattr(body, name) is None:
            raise field_error(("body", name), "give a value, or leave the field out")
    try:
        changed = update_endpoint(
            ctx.engine,
            endpoint_id,
            url=body.url,
            events=body.events,
            description=body.description,
            enabled=body.enabled,
        )
    except EndpointError as exc:
        raise _refused(exc) from None
    if changed is None:
        raise not_found("webhook endpoint", endpoint_id)
    return _public(changed)


@router.post("/webhook-endpoints/{endpoint_id}/rotate-secret", response_model=EndpointRotated)
def post_rotate_secret(
    endpoint_id: Id, ctx: Ctx, body: RotateRequest | None = None
) -> EndpointRotated:
    """A new signing secret, shown this once; the current one still signs for
    ``overlap_seconds`` (both signatures are sent meanwhile: a receiver verifying with
    either passes), then only the new one does. Not replayed by ``Idempotency-Key``
    (the answer would keep the secret readable, as with API keys): a second rotation
    within the overlap ends the first one's old secret."""
    asked = body or RotateRequest()
    rotated = rotate_secret(
        ctx.engine,
        endpoint_id,
        overlap=timedelta(seconds=asked.overlap_seconds),
        now=ctx.clock(),
    )
    if rotated is None:
        raise not_found("webhook endpoint", endpoint_id)
    return EndpointRotated(**_public(rotated.endpoint).model_dump(), secret=rotated.secret)


@router.post(
    "/webhook-endpoints/{endpoint_id}/test",
    response_model=TestEventQueued,
    status_code=202,
    dependencies=[IDEMPOTENT],
    responses=_DISABLED,
)
def post_test_event(endpoint_id: Id, ctx: Ctx, request: Request) -> Response:
    """Send a ``webhook.test`` event to the endpoint, through the same signed, retried
    delivery as every event (its attempts show how it went). ``Idempotency-Key``
    honoured."""

    def queue() -> TestEventQueued:
        try:
            webhook_id = send_test_event(ctx.engine, endpoint_id, now=ctx.clock())
        except EndpointDisabled as exc:
            raise Problem(409, "endpoint_disabled", f"{exc}: enable it first") from None
        if webhook_id is None:
            raise not_found("webhook endpoint", endpoint_id)
        return TestEventQueued(event=TEST_EVENT, message_id=webhook_id)

    return run_once(request, ctx, None, queue, status.HTTP_202_ACCEPTED)


@router.delete("/webhook-endpoints/{endpoint_id}", status_code=204)
def delete_one(endpoint_id: Id, ctx: Ctx) -> Response:
    """Remove an endpoint with its undelivered messages and its log."""
    if not delete_endpoint(ctx.engine, endpoint_id):
        raise not_found("webhook endpoint", endpoint_id)
    return Response(status_code=204)


@router.get("/webhook-endpoints/{endpoint_id}/attempts", response_model=Page[AttemptPublic])
def get_attempts(
    endpoint_id: Id, ctx: Ctx, limit: Limit = 50, offset: Offset = 0
) -> Page[AttemptPublic]:
    """The endpoint's delivery attempts, newest first: time, HTTP status, duration and
    what went wrong in words (never a secret or a payload)."""
    page = attempts_page(ctx.engine, endpoint_id, limit=limit, offset=offset)
    if page is None:
        raise not_found("webhook endpoint", endpoint_id)
    return Page[AttemptPublic](
        items=[_attempt(a) for a in page.items], total=page.total, limit=limit, offset=offset
    )


@router.get(
    "/webhook-endpoints/{endpoint_id}/deliveries",
    response_model=Page[AttemptPublic],
    deprecated=True,
)
def get_deliveries(
    endpoint_id: Id, ctx: Ctx, limit: Limit = 50, offset: Offset = 0
) -> Page[AttemptPublic]:
    """The same as ``/attempts`` (its former name)."""
    return get_attempts(endpoint_id, ctx, limit, offset)


@router.post("/webhook-endpoints/{endpoint_id}/replay", response_model=Replayed)
def post_replay(endpoint_id: Id, ctx: Ctx, body: ReplayRequest | None = None) -> Replayed:
    """Send again: enable the endpoint, make its failed messages (and with ``since``
    every message since then) due now, in their order."""
    since = body.since if body is not None else None
    requeued = replay(ctx.engine, endpoint_id, since=since)
    if requeued is None:
        raise not_found("webhook endpoint", endpoint_id)
    return Replayed(requeued=requeued)
