"""Outbound webhook endpoints: register (the secret shown once), list, show, remove, the
delivery log, replay."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response, status
from pydantic import AwareDatetime, BaseModel, Field

from campaigns.webhook_endpoints import (
    Attempt,
    Endpoint,
    EndpointError,
    attempts_page,
    create_endpoint,
    delete_endpoint,
    endpoints_page,
    get_endpoint,
    replay,
)
from gatecast.web.api.common import Id, Limit, Offset, Page, RequestBody, field_error, not_found
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once

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
    messages: MessageCounts | None = Field(None, description="On one endpoint only")


class EndpointCreated(EndpointPublic):
    """A new endpoint with its signing secret: keep it, it is not shown again."""

    secret: str = Field(description="whsec_<base64>: the key of the webhook-signature")


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
    message_id: str = Field(description="The webhook-id header (msg_<n>)")
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
        }
    )


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
            raise field_error(("body", exc.field), exc.message, "webhook_endpoint") from None
        public = _public(created.endpoint)
        return EndpointCreated(**public.model_dump(), secret=created.secret)

    return run_once(request, ctx, body, create, status.HTTP_201_CREATED)


@router.get("/webhook-endpoints/{endpoint_id}", response_model=EndpointPublic)
def get_one(endpoint_id: Id, ctx: Ctx) -> EndpointPublic:
    """One endpoint with its messages by state."""
    found = get_endpoint(ctx.engine, endpoint_id)
    if found is None:
        raise not_found("webhook endpoint", endpoint_id)
    return _public(found)


@router.delete("/webhook-endpoints/{endpoint_id}", status_code=204)
def delete_one(endpoint_id: Id, ctx: Ctx) -> Response:
    """Remove an endpoint with its undelivered messages and its log."""
    if not delete_endpoint(ctx.engine, endpoint_id):
        raise not_found("webhook endpoint", endpoint_id)
    return Response(status_code=204)


@router.get("/webhook-endpoints/{endpoint_id}/deliveries", response_model=Page[AttemptPublic])
def get_deliveries(
    endpoint_id: Id, ctx: Ctx, limit: Limit = 50, offset: Offset = 0
) -> Page[AttemptPublic]:
    """The endpoint's delivery log, newest attempt first."""
    page = attempts_page(ctx.engine, endpoint_id, limit=limit, offset=offset)
    if page is None:
        raise not_found("webhook endpoint", endpoint_id)
    return Page[AttemptPublic](
        items=[_attempt(a) for a in page.items], total=page.total, limit=limit, offset=offset
    )


@router.post("/webhook-endpoints/{endpoint_id}/replay", response_model=Replayed)
def post_replay(endpoint_id: Id, ctx: Ctx, body: ReplayRequest | None = None) -> Replayed:
    """Send again: enable the endpoint, make its failed messages (and with ``since``
    every message since then) due now, in their order."""
    since = body.since if body is not None else None
    requeued = replay(ctx.engine, endpoint_id, since=since)
    if requeued is None:
        raise not_found("webhook endpoint", endpoint_id)
    return Replayed(requeued=requeued)
