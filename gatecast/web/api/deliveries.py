"""Deliveries: one row per recipient of a campaign, paginated and filtered by state."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic.dataclasses import dataclass as pydantic_dataclass

from campaigns import service
from campaigns.paging import BadCursor
from gatecast.web.api.common import (
    BAD_CURSOR,
    Cursor,
    CursorPage,
    Id,
    Limit,
    Offset,
    bad_cursor,
    cursor_or_offset,
    not_found,
)
from gatecast.web.context import AppContext, get_ctx
from storage import states

router = APIRouter(tags=["deliveries"])


@pydantic_dataclass(frozen=True)
class DeliveryPublic(service.DeliveryRecord):
    """A delivery as the API shows it (no lease or rendered payload internals), with the
    contact's ``name`` and the error in plain words (``reason``: "not on WhatsApp")."""


TargetFilter = Annotated[str | None, Query(description="Substring of the phone/group")]
SearchFilter = Annotated[
    str | None,
    Query(
        max_length=200,
        description="A contact's name (any case, accents ignored) or digits of the number",
    ),
]
RepliedFilter = Annotated[
    bool | None, Query(description="true: only recipients who replied; false: only the others")
]
StateFilter = Annotated[
    list[str] | None,
    Query(description=f"Only these states (repeatable): {', '.join(states.ALL)}"),
]


def _check_states(state: list[str] | None) -> None:
    from fastapi.exceptions import RequestValidationError

    bad = [s for s in state or [] if s not in states.ALL]
    if bad:
        raise RequestValidationError(
            [
                {
                    "type": "enum",
                    "loc": ("query", "state"),
                    "msg": f"unknown delivery state {b!r}; one of: {', '.join(states.ALL)}",
                    "input": b,
                }
                for b in bad
            ]
        )


def list_deliveries(
    ctx: AppContext,
    *,
    campaign_id: int | None,
    state: list[str] | None,
    target: str | None,
    limit: int,
    offset: int,
    q: str | None = None,
    replied: bool | None = None,
    cursor: str | None = None,
) -> CursorPage[DeliveryPublic]:
    """Deliveries matching the filter, by id (one page, from ``cursor``)."""
    _check_states(state)
    cursor_or_offset(cursor, offset)
    try:
        page = service.deliveries_page(
            ctx.engine,
            campaign_id=campaign_id,
            in_states=state,
            target=target,
            search=q,
            replied=replied,
            limit=limit,
            offset=offset,
            cursor=cursor,
        )
    except service.CampaignNotFound:
        raise not_found("campaign", campaign_id) from None
    except BadCursor as exc:
        raise bad_cursor(str(exc)) from None
    items = [DeliveryPublic(**asdict(d)) for d in page.items]
    answer: CursorPage[DeliveryPublic] = CursorPage[DeliveryPublic].of(
        page, items, limit=limit, offset=offset
    )
    return answer


@router.get("/deliveries", response_model=CursorPage[DeliveryPublic], responses=BAD_CURSOR)
def get_deliveries(
    ctx: Annotated[AppContext, Depends(get_ctx)],
    state: StateFilter = None,
    campaign_id: Id | None = None,
    target: TargetFilter = None,
    limit: Limit = 100,
    offset: Offset = 0,
    cursor: Cursor = None,
) -> CursorPage[DeliveryPublic]:
    """Deliveries of every campaign, filtered by state, campaign and target."""
    return list_deliveries(
        ctx,
        campaign_id=campaign_id,
        state=state,
        target=target,
        limit=limit,
        offset=offset,
        cursor=cursor,
    )


@router.get(
    "/campaigns/{campaign_id}/deliveries",
    response_model=CursorPage[DeliveryPublic],
    responses=BAD_CURSOR,
)
def get_campaign_deliveries(
    campaign_id: Id,
    ctx: Annotated[AppContext, Depends(get_ctx)],
    state: StateFilter = None,
    target: TargetFilter = None,
    q: SearchFilter = None,
    replied: RepliedFilter = None,
    limit: Limit = 100,
    offset: Offset = 0,
    cursor: Cursor = None,
) -> CursorPage[DeliveryPublic]:
    """Deliveries of one campaign (404 for an unknown campaign), with each contact's
    name and each error in plain words (``reason``); searched by name or number."""
    return list_deliveries(
        ctx,
        campaign_id=campaign_id,
        state=state,
        target=target,
        q=q,
        replied=replied,
        limit=limit,
        offset=offset,
        cursor=cursor,
    )
