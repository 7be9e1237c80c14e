"""Contacts: search (paginated), opt-out and opt-in, erase; the management routes (create,
edit, tags, lists, one contact's history, export) are in ``gatecast.web.api.contact_manage``."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from campaigns import audiences, contacts, erasure
from campaigns.audiences import ContactRecord
from campaigns.paging import BadCursor
from gatecast.web.api.common import (
    BAD_CURSOR,
    Cursor,
    CursorPage,
    Id,
    Limit,
    Offset,
    RequestBody,
    bad_cursor,
    cursor_or_offset,
    field_error,
    not_found,
)
from gatecast.web.context import AppContext, get_ctx

router = APIRouter(tags=["contacts"])


@pydantic_dataclass(frozen=True)
class ContactPublic(ContactRecord):
    """A contact as the API shows it."""


class ContactsPage(CursorPage[ContactPublic]):
    """A page of a contact search; ``total_exact`` false: more than ``total`` match (a
    search counts up to 1,000; by ``offset``, 1,000 past the page)."""


class OptOutRequest(RequestBody):
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
    list_name: str | None = None,
    tag: str | None = None,
    cursor: str | None = None,
) -> ContactsPage:
    """Contacts whose name, phone or any attribute value contains ``q`` (no case, no
    accents), optionally in one list, with one tag, of one opt-out state."""
    wanted = contacts.Search(
        query=q or "", list_id=list_id, list_name=list_name, tag=tag, opted_out=opted_out
    )
    cursor_or_offset(cursor, offset)
    try:
        page = contacts.search(ctx.engine, wanted, limit=limit, offset=offset, cursor=cursor)
    except contacts.ContactError as exc:
        raise field_error(("query", exc.field), str(exc)) from None
    except BadCursor as exc:
        raise bad_cursor(str(exc)) from None
    items = [_public(c) for c in page.items]
    answer: ContactsPage = ContactsPage.of(page, items, limit=limit, offset=offset)
    return answer


def get_contact_row(ctx: AppContext, contact_id: int) -> ContactPublic:
    """One contact, or a 404."""
    found = audiences.contact(ctx.engine, contact_id)
    if found is None:
        raise not_found("contact", contact_id)
    return _public(found)


@router.get("/contacts", response_model=ContactsPage, responses=BAD_CURSOR)
def get_contacts(
    ctx: Annotated[AppContext, Depends(get_ctx)],
    q: Annotated[
        str | None, Query(description="Part of the name, the phone or any attribute value")
    ] = None,
    list_id: Id | None = None,
    list_name: Annotated[
        str | None, Query(alias="list", description="Only members of the list of this name")
    ] = None,
    tag: Annotated[str | None, Query(description="Only contacts with this tag")] = None,
    opted_out: bool | None = None,
    limit: Limit = 50,
    offset: Offset = 0,
    cursor: Cursor = None,
) -> ContactsPage:
    """Search contacts by name, phone or any attribute value (no case, no accents), paginated."""
    return search_contacts(
        ctx,
        q=q,
        list_id=list_id,
        list_name=list_name,
        tag=tag,
        opted_out=opted_out,
        limit=limit,
        offset=offset,
        cursor=cursor,
    )


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
