"""The replies inbox: every incoming message, newest first, answered and marked handled
(``campaigns.replies``; an answer is sent as ``POST /messages`` sends)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status
from pydantic import Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from campaigns import replies as domain
from campaigns.direct_messages import MessageError
from gatecast.web.api.common import Id, Limit, Offset, Page, RequestBody, field_error
from gatecast.web.api.messages import MessagePublic, send_defaults, shown
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once

router = APIRouter(tags=["replies"])
Ctx = Annotated[AppContext, Depends(get_ctx)]


@pydantic_dataclass(frozen=True)
class InboxReplyPublic(domain.Reply):
    """An incoming message, with the campaign whose message it answers (null: none)."""


def list_replies(
    ctx: AppContext,
    *,
    campaign_id: int | None,
    sender: str | None,
    opt_out: bool | None,
    limit: int,
    offset: int,
    handled: bool | None = None,
) -> Page[InboxReplyPublic]:
    """One page of the inbox (the dashboard's page reads it too)."""
    page = domain.replies_page(
        ctx.engine,
        campaign_id=campaign_id,
        sender=sender,
        opt_out=opt_out,
        handled=handled,
        limit=limit,
        offset=offset,
    )
    items = [InboxReplyPublic(**asdict(r)) for r in page.items]
    return Page[InboxReplyPublic](items=items, total=page.total, limit=limit, offset=offset)


@router.get("/replies", response_model=Page[InboxReplyPublic])
def get_replies(
    ctx: Annotated[AppContext, Depends(get_ctx)],
    campaign_id: Annotated[
        Id | None, Query(description="Only replies to this campaign's messages")
    ] = None,
    sender: Annotated[
        str | None, Query(max_length=64, description="Only messages this sender received")
    ] = None,
    opt_out: Annotated[
        bool | None, Query(description="true: only opt-outs (STOP); false: none of them")
    ] = None,
    handled: Annotated[
        bool | None,
        Query(description="false: only those still to handle; true: only those handled"),
    ] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[InboxReplyPublic]:
    """Incoming messages across campaigns, newest first; filtered and paged."""
    return list_replies(
        ctx,
        campaign_id=campaign_id,
        sender=sender,
        opt_out=opt_out,
        handled=handled,
        limit=limit,
        offset=offset,
    )


def _reply(ctx: AppContext, reply_id: int) -> domain.Reply:
    try:
        return domain.get_reply(ctx.engine, reply_id)
    except domain.ReplyNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(exc)) from None


class AnswerCreate(RequestBody):
    """An answer to a reply."""

    text: str = Field(
        min_length=1,
        max_length=4096,
        description="The answer, a text message as POST /messages sends it ({{ name }} "
        "and the contact's other variables work)",
        examples=["Thanks, {{ name }}: your order ships tomorrow"],
    )
    metadata: dict[str, Any] | None = Field(
        None, description="Your own JSON object, echoed in the answer's webhook events"
    )


@router.post(
    "/replies/{reply_id}/answer",
    response_model=MessagePublic,
    status_code=201,
    dependencies=[IDEMPOTENT],
)
def post_answer(reply_id: Id, body: AnswerCreate, ctx: Ctx, request: Request) -> Response:
    """Answer a reply: a text to the person who wrote, through the sender that received
    it, paced, capped and opt-out-aware as ``POST /messages``; the reply is marked
    handled. 201 with the message (follow it with ``GET /messages/{id}``); 404 for no
    such reply; 422 for a group's message or a text that cannot be sent.
    ``Idempotency-Key`` honoured."""
    _reply(ctx, reply_id)

    def create() -> MessagePublic:
        text = {"type": "text", "text": body.text}
        try:
            message_id = domain.answer_reply(
                ctx.engine, reply_id, message=text, metadata=body.metadata, **send_defaults(ctx)
            )
        except MessageError as exc:
            field = "text" if exc.field == "message" else exc.field
            loc = ("path", "reply_id") if field == "reply" else ("body", field)
            raise field_error(loc, str(exc), "message") from None
        return shown(ctx, message_id)

    return run_once(request, ctx, body, create, status.HTTP_201_CREATED)


@router.post("/replies/{reply_id}/handled", response_model=InboxReplyPublic)
def post_handled(reply_id: Id, ctx: Ctx) -> InboxReplyPublic:
    """Mark a reply handled (it leaves ``?handled=false``); again changes nothing."""
    _reply(ctx, reply_id)
    return InboxReplyPublic(**asdict(domain.mark_handled(ctx.engine, reply_id, ctx.clock())))
