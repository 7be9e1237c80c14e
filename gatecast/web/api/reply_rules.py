"""Reply rules: auto-replies to keywords, button taps and messages outside business
hours (issue 32 item 3). The rules are ``campaigns.reply_rules``'s; operators change them,
everyone reads them (``gatecast.web.roles``: the one rule by method)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request, Response, status
from pydantic import BaseModel, Field

from campaigns.reply_rules import (
    DEFAULT_LIMIT_HOURS,
    DEFAULT_PAUSE_HOURS,
    Rule,
    RuleError,
    RuleNotFound,
    add_rule,
    delete_rule,
    edit_rule,
    get_rule,
    list_rules,
)
from gatecast.web.api.common import Id, Limit, Offset, Page, RequestBody, field_error, not_found
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once
from gatecast.web.problems import Problem

router = APIRouter(tags=["reply-rules"])
Ctx = Annotated[AppContext, Depends(get_ctx)]

_HOURS = (
    'The away trigger\'s business hours: {"timezone": "Europe/Lisbon", "days": '
    '{"mon": ["09:00-18:00"], ...}} (a day not named is closed all day)'
)


class ReplyRuleFields(RequestBody):
    """A rule's fields (a change may give only some)."""

    name: str | None = Field(None, max_length=200, description="What the rule is for")
    trigger: Literal["keyword", "button", "away"] | None = Field(
        None,
        description="keyword: the message holds a keyword; button: a button or list row "
        "with this id was tapped; away: any message outside business hours",
    )
    keywords: list[str] | None = Field(
        None, max_length=50, description="The keyword trigger's words (any of them)"
    )
    match: Literal["exact", "word", "prefix"] | None = Field(
        None,
        description="exact: the whole message; word: anywhere as a word; prefix: the "
        "message begins so. Case, accents and punctuation never matter",
    )
    button_id: str | None = Field(
        None, max_length=256, description="The button trigger's button or list-row id"
    )
    hours: dict[str, Any] | None = Field(None, description=_HOURS)
    message: dict[str, Any] | None = Field(
        None,
        description="The answer, as a campaign file's [message] table (any type)",
        examples=[{"type": "text", "text": "We open at 9:00, {{ name }}"}],
    )
    limit_hours: float | None = Field(
        None,
        description=f"At most one answer per person within this many hours "
        f"(default {DEFAULT_LIMIT_HOURS:g}): two bots never loop",
    )
    pause_hours: float | None = Field(
        None,
        description=f"Quiet for a person this long after someone answered them from the "
        f"inbox (default {DEFAULT_PAUSE_HOURS:g})",
    )
    enabled: bool | None = Field(None, description="A disabled rule answers nothing")


class ReplyRulePublic(BaseModel):
    """A reply rule."""

    id: int
    name: str
    trigger: str
    keywords: list[str]
    match: str
    button_id: str | None
    hours: dict[str, Any] | None
    message: dict[str, Any]
    limit_hours: float
    pause_hours: float
    enabled: bool
    answers: int = Field(description="How many messages it answered")
    created_at: datetime
    updated_at: datetime


def _public(rule: Rule) -> ReplyRulePublic:
    return ReplyRulePublic.model_validate(rule.__dict__)


def _refused(exc: RuleError) -> Problem:
    return field_error(("body", *exc.field.split(".")), str(exc), "reply_rule")


@router.get("/reply-rules", response_model=Page[ReplyRulePublic])
def get_reply_rules(ctx: Ctx, limit: Limit = 50, offset: Offset = 0) -> Page[ReplyRulePublic]:
    """The reply rules by id, with how many messages each answered."""
    rules = list_rules(ctx.engine)
    items = [_public(r) for r in rules[offset : offset + limit]]
    return Page(items=items, total=len(rules), limit=limit, offset=offset)


@router.post(
    "/reply-rules", response_model=ReplyRulePublic, status_code=201, dependencies=[IDEMPOTENT]
)
def post_reply_rule(body: ReplyRuleFields, ctx: Ctx, request: Request) -> Response:
    """Add a reply rule. It answers messages that come in from now on, through the paced,
    opt-out-aware path of ``POST /messages``; never an opt-out. 422 naming the field."""

    def create() -> ReplyRulePublic:
        try:
            rule = add_rule(ctx.engine, body.model_dump(exclude_none=True), now=ctx.clock())
        except RuleError as exc:
            raise _refused(exc) from None
        return _public(rule)

    return run_once(request, ctx, body, create, status.HTTP_201_CREATED, "/api/v1/reply-rules/{id}")


@router.get("/reply-rules/{rule_id}", response_model=ReplyRulePublic)
def get_reply_rule(rule_id: Id, ctx: Ctx) -> ReplyRulePublic:
    """One reply rule."""
    try:
        return _public(get_rule(ctx.engine, rule_id))
    except RuleNotFound:
        raise not_found("reply rule", rule_id) from None


@router.patch("/reply-rules/{rule_id}", response_model=ReplyRulePublic)
def patch_reply_rule(rule_id: Id, body: ReplyRuleFields, ctx: Ctx) -> ReplyRulePublic:
    """Change some of a rule's fields (the others kept); 422 naming the field."""
    try:
        rule = edit_rule(ctx.engine, rule_id, body.model_dump(exclude_unset=True), now=ctx.clock())
    except RuleNotFound:
        raise not_found("reply rule", rule_id) from None
    except RuleError as exc:
        raise _refused(exc) from None
    return _public(rule)


@router.delete("/reply-rules/{rule_id}", status_code=204)
def delete_reply_rule(rule_id: Id, ctx: Ctx) -> Response:
    """Delete a reply rule (the messages it sent stay)."""
    try:
        delete_rule(ctx.engine, rule_id)
    except RuleNotFound:
        raise not_found("reply rule", rule_id) from None
    return Response(status_code=204)
