"""Contact management: create, edit, tag and untag (one contact or a search's), take out of
lists, one contact with its lists, tags, deliveries and replies, export a download. The
rules are ``campaigns.contacts``'; this module only maps requests and errors."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal, TypeVar

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass
from starlette.background import BackgroundTask

from campaigns import audiences, contacts
from campaigns.audiences import ContactRecord
from gatecast.web.api.common import (
    CSV,
    XLSX,
    Id,
    RequestBody,
    download,
    field_error,
    labelled,
    not_found,
)
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once
from gatecast.web.problems import Problem

router = APIRouter(tags=["contacts"])
Ctx = Annotated[AppContext, Depends(get_ctx)]
T = TypeVar("T")

Tag = Annotated[str, Field(min_length=1, max_length=100)]


@pydantic_dataclass(frozen=True)
class ContactDeliveryPublic(contacts.DeliveryLine):
    """A message the contact got: its campaign, state (and in plain words), times."""


@pydantic_dataclass(frozen=True)
class ReplyPublic(contacts.ReplyLine):
    """A message the contact sent (``is_opt_out``: it opted them out)."""


@pydantic_dataclass(frozen=True)
class ContactDetailPublic(ContactRecord):
    """One contact with its lists, tags, the messages it got and its replies (newest
    first, the last 200 of each)."""

    lists: list[str]
    tags: list[str]
    deliveries: list[ContactDeliveryPublic]
    replies: list[ReplyPublic]


class ContactCreate(RequestBody):
    """A new contact; ``list_name``: put it in that list (created if missing)."""

    phone: str = Field(min_length=1, max_length=200)
    name: str = Field(default="", max_length=300)
    attributes: dict[str, str] = Field(default_factory=dict, max_length=contacts.MAX_ATTRIBUTES)
    tags: list[Tag] = Field(default_factory=list, max_length=contacts.MAX_TAGS)
    list_name: str | None = Field(default=None, max_length=200)


class ContactEdit(RequestBody):
    """A change to a contact: a new name, attributes set and removed, tags added and removed."""

    name: str | None = Field(default=None, max_length=300)
    attributes: dict[str, str] = Field(
        default_factory=dict, max_length=contacts.MAX_ATTRIBUTES, description="set these"
    )
    unset_attributes: list[str] = Field(default_factory=list, max_length=contacts.MAX_ATTRIBUTES)
    add_tags: list[Tag] = Field(default_factory=list, max_length=contacts.MAX_TAGS)
    remove_tags: list[Tag] = Field(default_factory=list, max_length=contacts.MAX_TAGS)


class TagRequest(RequestBody):
    """A tag and the contacts it goes on (or off): those a search finds (``q``, and
    optionally ``list_name``/``has_tag`` filters), or ``phones``."""

    tag: Tag
    q: str | None = Field(default=None, max_length=200)
    list_name: str | None = Field(default=None, max_length=200)
    has_tag: str | None = Field(default=None, max_length=100)
    phones: list[str] | None = Field(default=None, max_length=contacts.MAX_PHONES)


class TagCount(BaseModel):
    """How many contacts gained (or lost) the tag."""

    tag: str
    changed: int


def _problem(exc: contacts.ContactError, where: str = "body") -> Problem:
    if isinstance(exc, contacts.ContactNotFound):
        return Problem(status.HTTP_404_NOT_FOUND, "not_found", str(exc))
    return field_error((where, exc.field), str(exc))


def _mapped(where: str, call: Callable[[], T]) -> T:
    """``call()``, its ContactError answered as a problem."""
    try:
        return call()
    except contacts.ContactError as exc:
        raise _problem(exc, where) from None


def contact_detail(ctx: AppContext, contact_id: int) -> ContactDetailPublic:
    """One contact with its history, or a 404."""
    found = contacts.detail(ctx.engine, contact_id)
    if found is None:
        raise not_found("contact", contact_id)
    data = found.to_dict()
    return ContactDetailPublic(**data.pop("contact"), **data)


def _phone_of(ctx: AppContext, contact_id: int) -> str:
    found = audiences.contact(ctx.engine, contact_id)
    if found is None:
        raise not_found("contact", contact_id)
    return found.phone


#: the media type of each export format
EXPORT_TYPES = {"csv": CSV, "xlsx": XLSX}


@router.get(
    "/contacts/export",
    response_class=FileResponse,
    responses=download("The contacts as CSV or XLSX (`format`)", XLSX, "text/csv"),
)
def export_contacts(
    ctx: Ctx,
    request: Request,
    list_name: Annotated[str | None, Query(alias="list", description="Export this list")] = None,
    segment: Annotated[str | None, Query(description="Export this saved segment")] = None,
    opted_out: Annotated[bool, Query(description="Export the opted-out contacts")] = False,
    format: Annotated[Literal["csv", "xlsx"], Query(description="csv or xlsx")] = "csv",
) -> FileResponse:
    """Download contacts (phone, name, attributes, tags, opt-out) as CSV or XLSX."""
    folder = Path(tempfile.mkdtemp(prefix="gatecast-export-"))
    path = folder / f"contacts.{format}"
    src = contacts.ExportSource(list_name=list_name, segment=segment, opted_out=opted_out)

    def cleanup() -> None:
        path.unlink(missing_ok=True)
        folder.rmdir()

    try:
        _mapped("query", lambda: contacts.export(ctx.engine, src, path, format))
    except BaseException:
        cleanup()
        raise
    return FileResponse(
        path,
        media_type=labelled(request, EXPORT_TYPES[format]),
        filename=path.name,
        background=BackgroundTask(cleanup),
    )


@router.get("/contacts/{contact_id}", response_model=ContactDetailPublic)
def get_contact(contact_id: Id, ctx: Ctx) -> ContactDetailPublic:
    """One contact with its lists, tags, the messages it got (state, times) and its replies."""
    return contact_detail(ctx, contact_id)


@router.post(
    "/contacts", response_model=ContactDetailPublic, status_code=201, dependencies=[IDEMPOTENT]
)
def post_contact(body: ContactCreate, ctx: Ctx, request: Request) -> Response:
    """Create a contact (``Idempotency-Key`` honoured: a repeat replays the first answer)."""

    def create() -> ContactDetailPublic:
        made = _mapped(
            "body",
            lambda: contacts.add_contact(
                ctx.engine,
                body.phone,
                region=ctx.settings.default_region,
                now=ctx.clock(),
                name=body.name,
                attributes=body.attributes,
                tags=body.tags,
                list_name=body.list_name,
            ),
        )
        return contact_detail(ctx, made.id)

    return run_once(request, ctx, body, create, status.HTTP_201_CREATED, "/api/v1/contacts/{id}")


@router.patch("/contacts/{contact_id}", response_model=ContactDetailPublic)
def patch_contact(contact_id: Id, body: ContactEdit, ctx: Ctx) -> ContactDetailPublic:
    """Change a contact's name, attributes or tags (one transaction)."""
    edit = contacts.Edit(
        name=body.name,
        set_attributes=body.attributes,
        unset_attributes=body.unset_attributes,
        add_tags=body.add_tags,
        remove_tags=body.remove_tags,
    )
    phone = _phone_of(ctx, contact_id)
    _mapped(
        "body",
        lambda: contacts.edit_contact(
            ctx.engine, phone, edit, region=ctx.settings.default_region, now=ctx.clock()
        ),
    )
    return contact_detail(ctx, contact_id)


def _change_tag(ctx: AppContext, body: TagRequest, add: bool) -> TagCount:
    region = ctx.settings.default_region
    if (body.phones is None) == (
        body.q is None and body.list_name is None and body.has_tag is None
    ):
        raise field_error(("body",), "give either phones or a search (q, list_name, has_tag)")
    if body.phones is not None:
        phones = _mapped(
            "body", lambda: [contacts.phone_e164(p, region) for p in body.phones or []]
        )
        targets = contacts.Targets(phones=phones)
    else:
        search = contacts.Search(query=body.q or "", list_name=body.list_name, tag=body.has_tag)
        targets = contacts.Targets(search=search)
    n = _mapped(
        "body",
        lambda: contacts.change_tag(
            ctx.engine, body.tag, targets, add=add, region=region, now=ctx.clock()
        ),
    )
    return TagCount(tag=contacts.clean_tags([body.tag])[0], changed=n)


@router.post("/contacts/tag", response_model=TagCount)
def tag_contacts(body: TagRequest, ctx: Ctx) -> TagCount:
    """Tag every contact a search finds, or the given phones (all must be contacts)."""
    return _change_tag(ctx, body, True)


@router.post("/contacts/untag", response_model=TagCount)
def untag_contacts(body: TagRequest, ctx: Ctx) -> TagCount:
    """Take a tag off every contact a search finds, or off the given phones."""
    return _change_tag(ctx, body, False)


@router.delete("/contacts/{contact_id}/lists/{list_id}", response_model=ContactDetailPublic)
def delete_from_list(contact_id: Id, list_id: Id, ctx: Ctx) -> ContactDetailPublic:
    """Take the contact out of one list (the contact stays)."""
    phone = _phone_of(ctx, contact_id)
    name = next((s.name for s in audiences.list_lists(ctx.engine) if s.id == list_id), None)
    if name is None:
        raise not_found("list", list_id)
    region = ctx.settings.default_region
    _mapped("path", lambda: contacts.remove_from_lists(ctx.engine, phone, name, region=region))
    return contact_detail(ctx, contact_id)


@router.delete("/contacts/{contact_id}/lists", response_model=ContactDetailPublic)
def delete_from_every_list(contact_id: Id, ctx: Ctx) -> ContactDetailPublic:
    """Take the contact out of every list (the contact stays)."""
    phone = _phone_of(ctx, contact_id)
    region = ctx.settings.default_region
    _mapped("path", lambda: contacts.remove_from_lists(ctx.engine, phone, None, region=region))
    return contact_detail(ctx, contact_id)
