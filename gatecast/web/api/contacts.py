"""Contacts: search by phone or name (paginated), one contact, opt-out and opt-in."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field
from sqlalchemy import func, or_, select

from gatecast.web.api.common import Limit, Offset, Page, not_found
from gatecast.web.context import AppContext, get_ctx
from storage import tables

router = APIRouter(tags=["contacts"])

_ct = tables.contacts
_lm = tables.list_members


class ContactPublic(BaseModel):
    """A contact as the API shows it."""

    id: int
    phone: str
    name: str
    attributes: dict[str, Any]
    opted_out: bool
    opted_out_at: datetime | None
    opt_out_reason: str | None
    created_at: datetime
    updated_at: datetime


class OptOutRequest(BaseModel):
    """Why the contact opted out (kept with the contact)."""

    reason: str = Field(default="api", max_length=500)


_COLUMNS = [_ct.c[name] for name in ContactPublic.model_fields]


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
    conds: list[Any] = []
    if q:
        conds.append(
            or_(
                _ct.c.phone.contains(q.strip(), autoescape=True),
                func.lower(_ct.c.name).contains(q.strip().lower(), autoescape=True),
            )
        )
    if opted_out is not None:
        conds.append(_ct.c.opted_out == opted_out)
    if list_id is not None:
        conds.append(_ct.c.id.in_(select(_lm.c.contact_id).where(_lm.c.list_id == list_id)))
    with ctx.engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(_ct).where(*conds)).scalar_one()
        rows = conn.execute(
            select(*_COLUMNS).where(*conds).order_by(_ct.c.id).limit(limit).offset(offset)
        ).mappings()
        items = [ContactPublic.model_validate(dict(r)) for r in rows]
    return Page[ContactPublic](items=items, total=total, limit=limit, offset=offset)


def get_contact_row(ctx: AppContext, contact_id: int) -> ContactPublic:
    """One contact, or a 404."""
    with ctx.engine.connect() as conn:
        row = conn.execute(select(*_COLUMNS).where(_ct.c.id == contact_id)).mappings().first()
    if row is None:
        raise not_found("contact", contact_id)
    return ContactPublic.model_validate(dict(row))


@router.get("/contacts", response_model=Page[ContactPublic])
def get_contacts(
    ctx: Annotated[AppContext, Depends(get_ctx)],
    q: Annotated[str | None, Query(description="Part of the phone or the name")] = None,
    list_id: int | None = None,
    opted_out: bool | None = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[ContactPublic]:
    """Search contacts by phone or name, paginated."""
    return search_contacts(
        ctx, q=q, list_id=list_id, opted_out=opted_out, limit=limit, offset=offset
    )


@router.get("/contacts/{contact_id}", response_model=ContactPublic)
def get_contact(contact_id: int, ctx: Annotated[AppContext, Depends(get_ctx)]) -> ContactPublic:
    """One contact."""
    return get_contact_row(ctx, contact_id)


def change_opt_out(ctx: AppContext, contact_id: int, opted_out: bool, reason: str) -> ContactPublic:
    """Opt a contact out (or back in) through the contacts module's one rule."""
    from storage.queries.contacts import set_opt_out

    contact = get_contact_row(ctx, contact_id)
    with ctx.engine.begin() as conn:
        set_opt_out(conn, contact.phone, opted_out, reason, ctx.clock())
    return get_contact_row(ctx, contact_id)


@router.post("/contacts/{contact_id}/opt-out", response_model=ContactPublic)
def opt_out(
    contact_id: int,
    ctx: Annotated[AppContext, Depends(get_ctx)],
    body: OptOutRequest | None = None,
) -> ContactPublic:
    """Mark the contact opted out: no campaign sends to it again."""
    return change_opt_out(ctx, contact_id, True, (body or OptOutRequest()).reason)


@router.post("/contacts/{contact_id}/opt-in", response_model=ContactPublic)
def opt_in(contact_id: int, ctx: Annotated[AppContext, Depends(get_ctx)]) -> ContactPublic:
    """Clear the contact's opt-out (only when the person asked for it)."""
    return change_opt_out(ctx, contact_id, False, "")
