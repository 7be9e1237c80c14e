"""Contacts: search by phone or name (paginated), one contact, opt-out and opt-in, erase."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from campaigns import audiences, erasure
from campaigns.audiences import ContactRecord
from gatecast.web.api.common import Id, Limit, Offset, Page, not_found
from gatecast.web.context import AppContext, get_ctx

router = APIRouter(tags=["contacts"])


@pydantic_dataclass(frozen=True)
class ContactPublic(ContactRecord):
    """A contact as the API shows it."""


class OptOutRequest(BaseModel):
    """Why the contact opted out (kept with the contact)."""

    reason: str = Field(default="api", max_length=500)


def _public(record: ContactRecord) -> ContactPublic:
    return ContactPublic(**asdict(record))


def search_contacts(
    ctx: AppContext,
    *,
    q: str | None,
    list_id: int | None,
    opted_out: bool | None,
    limit: int,
    offset: int,
) -> Page[ContactPublic]:
    """Contacts whose phone or name contains ``q``, optionally in one list."""
    page = audiences.contacts_page(
        ctx.engine, search=q, list_id=list_id, opted_out=opted_out, limit=limit, offset=offset
    )
    items = [_public(c) for c in page.items]
    return Page[ContactPublic](items=items, total=page.total, limit=limit, offset=offset)


def get_contact_row(ctx: AppContext, contact_id: int) -> ContactPublic:
    """One contact, or a 404."""
    found = audiences.contact(ctx.engine, contact_id)
    if found is None:
        raise not_found("contact", contact_id)
    return _public(found)


@router.get("/contacts", response_model=Page[ContactPublic])
def get_contacts(
    ctx: Annotated[AppContext, Depends(get_ctx)],
    q: Annotated[str | None, Query(description="Part of the phone or the name")] = None,
    list_id: Id | None = None,
    opted_out: bool | None = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[ContactPublic]:
    """Search contacts by phone or name, paginated."""
    return search_contacts(
        ctx, q=q, list_id=list_id, opted_out=opted_out, limit=limit, offset=offset
    )


@router.get("/contacts/{contact_id}", response_model=ContactPublic)
def get_contact(contact_id: Id, ctx: Annotated[AppContext, Depends(get_ctx)]) -> ContactPublic:
    """One contact."""
    return get_contact_row(ctx, contact_id)


def change_opt_out(ctx: AppContext, contact_id: int, opted_out: bool, reason: str) -> ContactPublic:
    """Opt a contact out (or back in) through the contacts module's one rule."""
    found = audiences.set_contact_opt_out(
        ctx.engine, contact_id, opted_out, reason, now=ctx.clock()
    )
    if found is None:
        raise not_found("contact", contact_id)
    return _public(found)


@router.post("/contacts/{contact_id}/opt-out", response_model=ContactPublic)
def opt_out(
    contact_id: Id,
    ctx: Annotated[AppContext, Depends(get_ctx)],
    body: OptOutRequest | None = None,
) -> ContactPublic:
    """Mark the contact opted out: no campaign sends to it again."""
    return change_opt_out(ctx, contact_id, True, (body or OptOutRequest()).reason)


@router.post("/contacts/{contact_id}/opt-in", response_model=ContactPublic)
def opt_in(contact_id: Id, ctx: Annotated[AppContext, Depends(get_ctx)]) -> ContactPublic:
    """Clear the contact's opt-out (only when the person asked for it)."""
    return change_opt_out(ctx, contact_id, False, "")


@pydantic_dataclass(frozen=True)
class ErasedPublic(erasure.Erased):
    """What an erase removed or anonymised (counts only, never the number)."""


def erase_contact_row(ctx: AppContext, contact_id: int) -> ErasedPublic:
    """Erase the contact ``contact_id`` everywhere (``campaigns.erasure``), or a 404."""
    try:
        erased = erasure.erase_contact(ctx.engine, contact_id=contact_id)
    except erasure.NoSuchContact:
        raise not_found("contact", contact_id) from None
    return ErasedPublic(**asdict(erased))


@router.post("/contacts/{contact_id}/erase", response_model=ErasedPublic)
def erase(contact_id: Id, ctx: Annotated[AppContext, Depends(get_ctx)]) -> ErasedPublic:
    """Erase the contact (right to be forgotten): the contact, its lists, tags and
    replies, and every stored trace of its number go; its deliveries stay, anonymised
    (target ``erased:<row id>``), so campaign counts stay true. Cannot be undone.

    The contact is named by its id, not its number, so the number never appears in a
    request line (access logs)."""
    return erase_contact_row(ctx, contact_id)
