"""Bulk actions on contacts: tag, add to a list, opt out, erase, for chosen contacts (by id)
or every contact a search selects (the contacts page's "all matching").

Each action is one bulk statement over the selection (``storage.queries.contact_search``:
``INSERT ... SELECT`` or ``UPDATE ... WHERE id IN (...)``), never a loop of single
updates; a search's selection goes :data:`campaigns.contacts.TAG_WINDOW` ids at a time,
each window its own transaction, as tagging a search does. Every action is idempotent:
done twice, the second changes nothing (a contact already tagged, a member, opted out, or
erased counts as unchanged).

Erasure is the exception: each contact is erased by :func:`campaigns.erasure.erase_contact`
(its own transaction, which scrubs every table), so a bulk erase takes ids only, at most
:data:`MAX_ERASE` at once, never a search.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine

from campaigns import contacts as cx
from campaigns.audiences import clean_list_name
from campaigns.erasure import Erased, NoSuchContact, erase_contact
from storage.engine import let_writers_in
from storage.queries import audiences as aq
from storage.queries import contact_search as cs
from storage.queries import contacts as q

#: the most ids one bulk action takes (more: select "all matching" a search instead)
MAX_IDS = 1000
#: the most contacts one bulk erase takes
MAX_ERASE = 100
#: the opt-out reason a bulk opt-out records when none is given
DEFAULT_REASON = "opted out by an operator"


@dataclass(frozen=True)
class Selection:
    """Which contacts: ``ids``, or every contact ``search`` selects (exactly one)."""

    ids: Sequence[int] | None = None
    search: cx.Search | None = None


def _check(sel: Selection) -> None:
    if (sel.ids is None) == (sel.search is None):
        raise cx.ContactError("choose contacts: give either ids or a search", "selection")
    if sel.ids is not None:
        if not sel.ids:
            raise cx.ContactError("no contact chosen", "ids")
        if len(sel.ids) > MAX_IDS:
            raise cx.ContactError(
                f"{len(sel.ids)} contacts chosen: at most {MAX_IDS} by id "
                "(choose all matching a search instead)",
                "ids",
            )


def _apply(
    engine: Engine, sel: Selection, change: Callable[[Connection, cs.ContactFilter], int]
) -> int:
    """Run ``change`` over the selection; how many contacts it changed."""
    _check(sel)
    if sel.ids is not None:
        chosen = cs.ContactFilter(where=(cs.contacts.c.id.in_(sorted(set(sel.ids))),))
        with engine.begin() as conn:
            return change(conn, chosen)
    assert sel.search is not None
    with engine.connect() as conn:
        wanted = cx.resolve_search(conn, sel.search)
        windows = cs.id_windows(conn, cx.TAG_WINDOW)
    changed = 0
    for n, (first, last) in enumerate(windows):
        if n:
            let_writers_in(engine)
        with engine.begin() as conn:
            changed += change(conn, cs.within(wanted, first, last))
    return changed


def tag(engine: Engine, sel: Selection, name: str, now: datetime) -> int:
    """Give the selected contacts the tag ``name`` (created if new); how many gained it."""
    tag_name = cx.clean_tags([name])[0]
    with engine.begin() as conn:
        tag_id = aq.ensure_tags(conn, [tag_name], now)[tag_name]
    return _apply(engine, sel, lambda conn, f: cs.tag_contacts(conn, tag_id, f))


def add_to_list(engine: Engine, sel: Selection, list_name: str, now: datetime) -> int:
    """Put the selected contacts in the list ``list_name`` (created if new); how many
    joined it."""
    try:
        name = clean_list_name(list_name)
    except ValueError as exc:
        raise cx.ContactError(str(exc), "list_name") from None
    with engine.begin() as conn:
        list_id, _ = q.ensure_list(conn, name, now)
    return _apply(engine, sel, lambda conn, f: cs.add_members_where(conn, list_id, f, now))


def opt_out(engine: Engine, sel: Selection, reason: str, now: datetime) -> int:
    """Opt the selected contacts out; how many were not opted out before."""
    why = reason.strip()[:500] or DEFAULT_REASON
    return _apply(engine, sel, lambda conn, f: cs.opt_out_where(conn, f, why, now))


@dataclass(frozen=True)
class BulkErased:
    """What a bulk erase did: each erased contact's counts, and the ids already gone."""

    erased: list[Erased]
    missing: list[int]


def erase(engine: Engine, ids: Sequence[int]) -> BulkErased:
    """Erase each contact of ``ids`` (at most :data:`MAX_ERASE`); an id that is no
    contact (already erased) is listed as missing, not an error."""
    chosen = sorted(set(ids))
    if not chosen:
        raise cx.ContactError("no contact chosen", "ids")
    if len(chosen) > MAX_ERASE:
        raise cx.ContactError(
            f"{len(chosen)} contacts chosen: at most {MAX_ERASE} can be erased at once", "ids"
        )
    done: list[Erased] = []
    missing: list[int] = []
    for contact_id in chosen:
        try:
            done.append(erase_contact(engine, contact_id=contact_id))
        except NoSuchContact:
            missing.append(contact_id)
    return BulkErased(done, missing)


__all__ = [
    "DEFAULT_REASON",
    "MAX_ERASE",
    "MAX_IDS",
    "BulkErased",
    "Selection",
    "add_to_list",
    "erase",
    "opt_out",
    "tag",
]
