"""Audiences: named contact lists, their members and counts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine

from campaigns.names import name_problem
from campaigns.paging import Page
from storage.queries import audiences as aq
from storage.queries import contacts as q
from storage.types import utcnow


@dataclass(frozen=True)
class ListSummary:
    """A list with its member counts (``reachable`` = members not opted out)."""

    id: int
    name: str
    description: str
    members: int
    opted_out: int
    created_at: datetime

    @property
    def reachable(self) -> int:
        """Members a campaign can send to."""
        return self.members - self.opted_out

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        out = asdict(self)
        out["created_at"] = self.created_at.isoformat()
        out["reachable"] = self.reachable
        return out


def get_list_id(conn: Connection, name: str) -> int | None:
    """The id of the list called ``name``, or None."""
    return q.get_list_id(conn, name)


def create_list(engine: Engine, name: str, *, now: datetime | None = None) -> int:
    """The id of the list called ``name``, created if it does not exist yet."""
    name = _clean_name(name)
    with engine.begin() as conn:
        list_id, _ = q.ensure_list(conn, name, now or utcnow())
    return list_id


def list_lists(engine: Engine) -> list[ListSummary]:
    """Every list, by name, with member counts."""
    with engine.connect() as conn:
        rows = q.list_summaries(conn)
    return [
        ListSummary(
            id=int(r.id),
            name=str(r.name),
            description=str(r.description),
            members=int(r.members),
            opted_out=int(r.opted_out),
            created_at=r.created_at,
        )
        for r in rows
    ]


def get_list(engine: Engine, name: str) -> ListSummary | None:
    """One list's summary by name, or None."""
    return next((s for s in list_lists(engine) if s.name == name), None)


def member_phones(engine: Engine, list_id: int, *, include_opted_out: bool = False) -> list[str]:
    """The E.164 phones of a list's members, opted-out members left out by default."""
    with engine.connect() as conn:
        return q.list_member_phones(conn, list_id, include_opted_out=include_opted_out)


def get_contact(engine: Engine, phone_e164: str) -> Any | None:
    """The contact with ``phone_e164`` (every column), or None."""
    with engine.connect() as conn:
        return q.get_contact(conn, phone_e164)


def contact_lists(engine: Engine, contact_id: int) -> list[str]:
    """The names of the lists a contact belongs to, sorted."""
    with engine.connect() as conn:
        return q.contact_list_names(conn, contact_id)


def contact_tags(engine: Engine, contact_id: int) -> list[str]:
    """The tags of a contact, sorted."""
    with engine.connect() as conn:
        return aq.contact_tag_names(conn, contact_id)


def set_opt_out(
    engine: Engine, phone_e164: str, opted_out: bool, reason: str | None, *, now: datetime
) -> bool:
    """Opt a contact out with ``reason`` (or back in); False when there is no such contact."""
    with engine.begin() as conn:
        return q.set_opt_out(conn, phone_e164, opted_out, reason, now)


def _clean_name(name: str) -> str:
    cleaned = name.strip()
    if not cleaned:
        raise ValueError("a list name cannot be empty")
    if len(cleaned) > 200:
        raise ValueError(f"list name is {len(cleaned)} characters long; the limit is 200")
    problem = name_problem(cleaned)
    if problem is not None:
        raise ValueError(f"the list name {problem}")
    return cleaned


clean_list_name = _clean_name

# --- contacts as the faces read them ---------------------------------------------------------


@dataclass(frozen=True)
class ContactRecord:
    """One stored contact."""

    id: int
    phone: str
    name: str
    attributes: dict[str, Any]
    opted_out: bool
    opted_out_at: datetime | None
    opt_out_reason: str | None
    created_at: datetime
    updated_at: datetime


_CONTACT_COLUMNS = tuple(f.name for f in fields(ContactRecord))


#: one page of contacts and how many match in all
ContactPage = Page[ContactRecord]


def contacts_page(
    engine: Engine,
    *,
    search: str | None = None,
    list_id: int | None = None,
    opted_out: bool | None = None,
    limit: int,
    offset: int = 0,
) -> ContactPage:
    """Contacts whose phone or name contains ``search`` (optionally in one list, or of one
    opt-out state), by id."""
    with engine.connect() as conn:
        total, rows = q.contacts_page(
            conn,
            _CONTACT_COLUMNS,
            search=search,
            list_id=list_id,
            opted_out=opted_out,
            limit=limit,
            offset=offset,
        )
    return ContactPage([ContactRecord(**r) for r in rows], total)


def contact(engine: Engine, contact_id: int) -> ContactRecord | None:
    """The contact ``contact_id``, or None."""
    with engine.connect() as conn:
        row = q.contact_by_id(conn, _CONTACT_COLUMNS, contact_id)
    return None if row is None else ContactRecord(**row)


def set_contact_opt_out(
    engine: Engine, contact_id: int, opted_out: bool, reason: str, *, now: datetime
) -> ContactRecord | None:
    """Opt the contact ``contact_id`` out (or back in); the contact as it now is, or None
    when there is no such contact."""
    found = contact(engine, contact_id)
    if found is None:
        return None
    set_opt_out(engine, found.phone, opted_out, reason, now=now)
    return contact(engine, contact_id)


__all__ = [
    "ContactPage",
    "ContactRecord",
    "ListSummary",
    "clean_list_name",
    "contact",
    "contact_lists",
    "contact_tags",
    "contacts_page",
    "create_list",
    "get_contact",
    "get_list",
    "get_list_id",
    "list_lists",
    "member_phones",
    "set_contact_opt_out",
    "set_opt_out",
]
