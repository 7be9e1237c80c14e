"""Messages: one message to one recipient through the paced path, and its state.

The rules are ``campaigns.direct_messages``'s: a direct message is a one-recipient
campaign the dispatcher sends like every other (opt-out, cooldown, routing, warm-up,
health, pace, daily cap), hidden from the campaign lists.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from pydantic import BaseModel, Field

from campaigns.direct_messages import DirectMessage, MessageError, get_message, send_message
from gatecast.web.api.campaigns import HoldPublic
from gatecast.web.api.common import Id, RequestBody, field_error
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once
from scheduler.holds import recipient_holds

router = APIRouter(tags=["messages"])
Ctx = Annotated[AppContext, Depends(get_ctx)]


class MessageCreate(RequestBody):
    """One message to one recipient."""

    to: str = Field(
        max_length=64,
        description="The recipient's phone (a contact is created when gatecast has none)",
        examples=["+14155550123"],
    )
    message: dict[str, Any] = Field(
        description="The message, as a campaign file's [message] table (any type)",
        examples=[{"type": "text", "text": "Your order {{ order }} has shipped"}],
    )
    instances: list[str] | None = Field(
        None, description="The senders it may go through (omitted: any usable sender)"
    )
    pace: dict[str, Any] | None = Field(
        None,
        description="As a campaign file's [pace] (per_minute, delay_seconds, daily_cap); "
        "the daily cap counts every send of the sender today",
    )
    metadata: dict[str, Any] | None = Field(
        None,
        description="Your own JSON object (at most 4096 bytes), echoed in every outbound "
        "webhook event about this message",
    )


class MessagePublic(BaseModel):
    """A message and where it is."""

    id: int
    to: str
    contact_id: int | None
    message_type: str
    state: str = Field(
        description="queued, sending, sent, delivered, read, failed, unknown or skipped"
    )
    reason: str | None = Field(description="Why it was skipped or failed (null: neither)")
    hold: HoldPublic | None = Field(
        None, description="While queued: why it waits and when that lifts (null: due now)"
    )
    sender: str | None
    message_id: str | None = Field(description="The gateway's id once sent")
    metadata: dict[str, Any] | None
    created_at: datetime
    sent_at: datetime | None
    delivered_at: datetime | None
    read_at: datetime | None


def message_public(ctx: AppContext, m: DirectMessage) -> MessagePublic:
    """A message as the API shows it: with its hold while it waits."""
    hold = None
    if m.state == "queued" and m.delivery_id is not None:
        for r in recipient_holds(ctx.engine, m.id, ctx.clock(), limit=1):
            if r.hold is not None:
                hold = HoldPublic.model_validate(r.hold.as_dict())
    data = {k: v for k, v in m.__dict__.items() if k != "delivery_id"}
    return MessagePublic.model_validate({**data, "hold": hold})


def send_defaults(ctx: AppContext) -> dict[str, Any]:
    """What a message is sent with besides its own fields: the deployment's region,
    contact cooldown and identical-message guard, and the clock."""
    return {
        "region": ctx.settings.default_region,
        "now": ctx.clock(),
        "default_cooldown_hours": ctx.settings.contact_cooldown_hours,
        "default_max_identical": ctx.settings.max_identical_in_row,
    }


def shown(ctx: AppContext, message_id: int) -> MessagePublic:
    """A message just stored, as ``GET /messages/{id}`` shows it."""
    found = get_message(ctx.engine, message_id)
    assert found is not None
    return message_public(ctx, found)


@router.post("/messages", response_model=MessagePublic, status_code=201, dependencies=[IDEMPOTENT])
def post_message(body: MessageCreate, ctx: Ctx, request: Request) -> Response:
    """Send one message to one recipient through the paced path.

    It waits for the sender's pace, daily cap and warm-up like a campaign's message; an
    opted-out recipient or one in the contact cooldown gets it ``skipped`` with the
    reason. 422 naming the field for an unusable phone, message, pace or metadata.
    ``Idempotency-Key`` honoured: a repeat makes no second message."""

    def create() -> MessagePublic:
        try:
            message_id = send_message(
                ctx.engine,
                to=body.to,
                message=body.message,
                instances=body.instances,
                pace=body.pace,
                metadata=body.metadata,
                **send_defaults(ctx),
            )
        except MessageError as exc:
            raise field_error(("body", exc.field), str(exc), "message") from None
        return shown(ctx, message_id)

    return run_once(request, ctx, body, create, status.HTTP_201_CREATED)


@router.get("/messages/{message_id}", response_model=MessagePublic)
def get_message_state(message_id: Id, ctx: Ctx) -> MessagePublic:
    """A message sent by ``POST /messages`` and its state (with the hold while queued)."""
    found = get_message(ctx.engine, message_id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no message {message_id}")
    return message_public(ctx, found)
