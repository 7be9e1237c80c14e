"""Bulk actions on contacts: tag, add to a list, opt out (chosen ids or every contact a
search selects), and erase (ids, admin only, a typed confirmation). The rules are
``campaigns.contact_bulk``'s; this module only maps requests and errors. Each route takes
an ``Idempotency-Key`` (a repeat replays the first answer), and each action is idempotent
anyway: done twice, the second changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Request, Response, status
from pydantic import BaseModel, Field
from sqlalchemy import Engine

from campaigns import contact_bulk as bulk
from campaigns import contacts
from campaigns.erasure import Erased
from gatecast.web.api.common import RequestBody, field_error
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once

router = APIRouter(tags=["contacts"])
Ctx = Annotated[AppContext, Depends(get_ctx)]
ContactId = Annotated[int, Field(ge=1, le=2**63 - 1)]

#: the bulk actions that answer a count
Action = Literal["tag", "add-to-list", "opt-out"]
#: the word a bulk erase must be confirmed with
ERASE_WORD = "erase"


class SearchSelection(RequestBody):
    """Every contact a search selects, as the contacts list filters: text (name, phone,
    any attribute value), a list (by id), a tag, opted out or not."""

    q: str = Field(default="", max_length=200)
    list_id: ContactId | None = None
    tag: str | None = Field(default=None, max_length=100)
    opted_out: bool | None = None


class BulkBody(RequestBody):
    """The contacts an action reaches: ``ids`` (at most 1,000) or a ``search``."""

    ids: list[ContactId] | None = Field(default=None, max_length=bulk.MAX_IDS)
    search: SearchSelection | None = None


class BulkTag(BulkBody):
    """Tag the contacts (the tag is created if new)."""

    tag: str = Field(min_length=1, max_length=100)


class BulkList(BulkBody):
    """Add the contacts to a list (created if new)."""

    list_name: str = Field(min_length=1, max_length=200)


class BulkOptOut(BulkBody):
    """Opt the contacts out, with a reason kept with each."""

    reason: str = Field(default="", max_length=500)


class BulkErase(RequestBody):
    """Erase the contacts ``ids`` (at most 100); ``confirm`` must be the word ``erase``."""

    ids: list[ContactId] = Field(min_length=1, max_length=bulk.MAX_ERASE)
    confirm: str = Field(max_length=20, description='the word "erase", typed by the user')


class BulkResult(BaseModel):
    """What a bulk action changed: contacts that gained the tag, joined the list or were
    opted out now (those that already had it are not counted)."""

    action: Action
    changed: int


class BulkEraseResult(BaseModel):
    """How many contacts were erased, each one's counts, and ids that were no contact
    (already erased: nothing to do)."""

    erased: int
    missing: list[int]
    contacts: list[dict[str, int]]


def _selection(body: BulkBody) -> bulk.Selection:
    if (body.ids is None) == (body.search is None):
        raise field_error(("body",), "choose contacts: give either ids or a search")
    if body.search is None:
        return bulk.Selection(ids=body.ids)
    s = body.search
    found = contacts.Search(query=s.q, list_id=s.list_id, tag=s.tag or None, opted_out=s.opted_out)
    return bulk.Selection(search=found)


def _bulk(
    request: Request,
    ctx: AppContext,
    body: BulkBody,
    action: Action,
    change: Callable[[Engine, bulk.Selection, str, datetime], int],
    value: str,
) -> Response:
    """``change(engine, selection, value, now)`` over the body's selection, once per
    ``Idempotency-Key``; a ``ContactError`` (an unknown list or tag, too many ids) is a
    422 naming its field."""
    sel = _selection(body)

    def run() -> BulkResult:
        try:
            return BulkResult(action=action, changed=change(ctx.engine, sel, value, ctx.clock()))
        except contacts.ContactError as exc:
            raise field_error(("body", exc.field), str(exc)) from None

    return run_once(request, ctx, body, run, status.HTTP_200_OK)


@router.post("/contacts/bulk/tag", response_model=BulkResult, dependencies=[IDEMPOTENT])
def bulk_tag(body: BulkTag, ctx: Ctx, request: Request) -> Response:
    """Tag the chosen contacts, or every contact a search selects."""
    return _bulk(request, ctx, body, "tag", bulk.tag, body.tag)


@router.post("/contacts/bulk/add-to-list", response_model=BulkResult, dependencies=[IDEMPOTENT])
def bulk_add_to_list(body: BulkList, ctx: Ctx, request: Request) -> Response:
    """Add the chosen contacts, or every contact a search selects, to a list."""
    return _bulk(request, ctx, body, "add-to-list", bulk.add_to_list, body.list_name)


@router.post("/contacts/bulk/opt-out", response_model=BulkResult, dependencies=[IDEMPOTENT])
def bulk_opt_out(body: BulkOptOut, ctx: Ctx, request: Request) -> Response:
    """Opt out the chosen contacts, or every contact a search selects."""
    return _bulk(request, ctx, body, "opt-out", bulk.opt_out, body.reason)


def _erased(found: Erased) -> dict[str, int]:
    return asdict(found)


@router.post("/contacts/bulk/erase", response_model=BulkEraseResult, dependencies=[IDEMPOTENT])
def bulk_erase(body: BulkErase, ctx: Ctx, request: Request) -> Response:
    """Erase the chosen contacts everywhere (admin; ``confirm`` must be ``erase``)."""
    if body.confirm.strip().lower() != ERASE_WORD:
        raise field_error(("body", "confirm"), f'type the word "{ERASE_WORD}" to confirm')

    def run() -> BulkEraseResult:
        done = bulk.erase(ctx.engine, body.ids)
        return BulkEraseResult(
            erased=len(done.erased),
            missing=done.missing,
            contacts=[_erased(e) for e in done.erased],
        )

    return run_once(request, ctx, body, run, status.HTTP_200_OK)
