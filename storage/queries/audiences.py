"""Audiences in SQL: tags, the contacts an audience selects, saved segments.

An :class:`AudienceFilter` arrives resolved (ids, folded values: the domain's rules,
``campaigns.segments``); this module turns it into one predicate over ``contacts``, used
by the count preview, the create-time pages and the one ``INSERT ... SELECT`` that
evaluates a campaign's audience at its start. Every function takes a ``Connection`` and
leaves the transaction to its caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    MetaData,
    RowMapping,
    String,
    Table,
    and_,
    case,
    delete,
    exists,
    func,
    literal,
    not_,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.sql.elements import ColumnElement

from storage import tables
from storage.dialect import dialect_insert
from storage.queries import paging

contacts: Table = tables.contacts
list_members: Table = tables.list_members
tags: Table = tables.tags
contact_tags: Table = tables.contact_tags
segments: Table = tables.segments
audience_members: Table = tables.audience_members

#: attribute names an error lists at most
NAMES_LISTED = 200


@dataclass(frozen=True)
class AudienceFilter:
    """An audience resolved to ids and folded values.

    Selected: members of any of ``list_ids`` (no lists: every contact), carrying every
    tag of ``tag_ids``, whose folded attribute equals one of the values of each
    ``where`` entry; minus members of ``exclude_list_ids`` and carriers of any of
    ``exclude_tag_ids``.
    """

    list_ids: tuple[int, ...] = ()
    tag_ids: tuple[int, ...] = ()
    where: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude_list_ids: tuple[int, ...] = ()
    exclude_tag_ids: tuple[int, ...] = field(default=())


def folded_value(name: str) -> ColumnElement[Any]:
    """A contact's folded attribute ``name`` as text (NULL when it has none)."""
    value: ColumnElement[Any] = contacts.c.folded[name].as_string()
    return value


def _in_lists(list_ids: Sequence[int]) -> ColumnElement[bool]:
    return exists().where(
        list_members.c.contact_id == contacts.c.id, list_members.c.list_id.in_(list_ids)
    )


def _tagged(tag_ids: Sequence[int]) -> ColumnElement[bool]:
    return exists().where(
        contact_tags.c.contact_id == contacts.c.id, contact_tags.c.tag_id.in_(tag_ids)
    )


def included(f: AudienceFilter) -> list[ColumnElement[bool]]:
    """The conditions a contact meets to be selected (before exclusions)."""
    conds: list[ColumnElement[bool]] = []
    if f.list_ids:
        conds.append(_in_lists(f.list_ids))
    conds.extend(_tagged([t]) for t in f.tag_ids)
    conds.extend(folded_value(name).in_(values) for name, values in f.where)
    return conds


def excluded(f: AudienceFilter) -> ColumnElement[bool] | None:
    """The condition that excludes a selected contact, or None (no exclusions)."""
    conds: list[ColumnElement[bool]] = []
    if f.exclude_list_ids:
        conds.append(_in_lists(f.exclude_list_ids))
    if f.exclude_tag_ids:
        conds.append(_tagged(f.exclude_tag_ids))
    return or_(*conds) if conds else None


def selected(f: AudienceFilter) -> list[ColumnElement[bool]]:
    """The conditions of a contact in the audience (exclusions applied)."""
    conds = included(f)
    out = excluded(f)
    if out is not None:
        conds.append(not_(out))
    return conds


class AudienceCounts(NamedTuple):
    """Contacts the audience selects before exclusions, excluded, and opted out (of the
    ones not excluded)."""

    matched: int
    excluded: int
    opted_out: int


def audience_counts(conn: Connection, f: AudienceFilter) -> AudienceCounts:
    """One pass over the selected contacts: how many match, are excluded, opted out."""
    out = excluded(f)
    is_out: ColumnElement[bool] = out if out is not None else literal(False)
    stmt = select(
        func.count(),
        func.count(case((is_out, 1))),
        func.count(case((and_(not_(is_out), contacts.c.opted_out.is_(True)), 1))),
    ).where(*included(f), true())
    row = conn.execute(stmt).one()
    return AudienceCounts(int(row[0]), int(row[1]), int(row[2]))


def audience_page(
    conn: Connection, f: AudienceFilter, *, after: int, limit: int
) -> list[RowMapping]:
    """Up to ``limit`` contacts of the audience with id above ``after``, by id (``id``,
    ``phone``, ``name``, ``attributes``, ``opted_out``)."""
    stmt = (
        select(
            contacts.c.id,
            contacts.c.phone,
            contacts.c.name,
            contacts.c.attributes,
            contacts.c.opted_out,
        )
        .where(contacts.c.id > after, *selected(f))
        .order_by(contacts.c.id)
        .limit(limit)
    )
    return list(conn.execute(stmt).mappings())


def insert_audience_members(conn: Connection, campaign_id: int, f: AudienceFilter) -> int:
    """Evaluate the audience into ``audience_members`` for ``campaign_id``: ONE
    ``INSERT ... SELECT`` (present members left as they are); how many rows it added."""
    source = (
        select(literal(campaign_id, BigInteger()), contacts.c.id)
        .where(*selected(f), true())
        .order_by(contacts.c.id)
    )
    stmt = (
        dialect_insert(conn, audience_members)
        .from_select(["campaign_id", "contact_id"], source)
        .on_conflict_do_nothing(
            index_elements=[audience_members.c.campaign_id, audience_members.c.contact_id]
        )
    )
    added = int(conn.execute(stmt).rowcount or 0)
    if conn.dialect.name == "postgresql":  # plan the pages that read them on their statistics
        conn.exec_driver_sql("ANALYZE audience_members")
    return added


def has_audience_members(conn: Connection, campaign_id: int) -> bool:
    """Whether the campaign's audience has been evaluated into any member yet."""
    stmt = select(audience_members.c.contact_id).where(
        audience_members.c.campaign_id == campaign_id
    )
    return conn.execute(stmt.limit(1)).first() is not None


# --- attributes ----------------------------------------------------------------------------


def attribute_exists(conn: Connection, name: str) -> bool:
    """Whether any contact has the attribute ``name``."""
    stmt = select(contacts.c.id).where(folded_value(name).is_not(None)).limit(1)
    return conn.execute(stmt).first() is not None


def attribute_names(conn: Connection) -> list[str]:
    """The attribute names contacts have, sorted (at most :data:`NAMES_LISTED`)."""
    if conn.dialect.name == "postgresql":
        sql = "SELECT DISTINCT jsonb_object_keys(folded) AS k FROM contacts ORDER BY k LIMIT :n"
    else:
        sql = (
            "SELECT DISTINCT j.key FROM contacts, json_each(contacts.folded) AS j "
            "ORDER BY j.key LIMIT :n"
        )
    return [str(k) for k in conn.execute(text(sql), {"n": NAMES_LISTED}).scalars()]


def audience_attribute_counts(conn: Connection, f: AudienceFilter) -> list[tuple[str, int]]:
    """The attribute names the contacts ``f`` selects have, sorted, each with how many
    of them have it (at most :data:`NAMES_LISTED` names)."""
    fn = func.jsonb_each if conn.dialect.name == "postgresql" else func.json_each
    each = fn(contacts.c.folded).table_valued("key", "value")  # a function: lateral
    stmt = (
        select(each.c.key, func.count())
        .select_from(contacts.join(each, true()))
        .where(*selected(f), true())
        .group_by(each.c.key)
        .order_by(each.c.key)
        .limit(NAMES_LISTED)
    )
    return [(str(k), int(n)) for k, n in conn.execute(stmt)]


# --- tags ------------------------------------------------------------------------------------


def tag_ids(conn: Connection, names: Sequence[str]) -> dict[str, int]:
    """The ids of the tags among ``names`` that exist, by name."""
    if not names:
        return {}
    rows = conn.execute(select(tags.c.name, tags.c.id).where(tags.c.name.in_(list(names))))
    return {str(n): int(i) for n, i in rows}


def ensure_tags(conn: Connection, names: Iterable[str], now: datetime) -> dict[str, int]:
    """The ids of the tags ``names``, created where missing, by name."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    stmt = dialect_insert(conn, tags).on_conflict_do_nothing(index_elements=[tags.c.name])
    conn.execute(stmt, [{"name": n, "created_at": now} for n in wanted])
    return tag_ids(conn, wanted)


def tag_names(conn: Connection) -> list[str]:
    """Every tag's name, sorted."""
    return [str(n) for n in conn.execute(select(tags.c.name).order_by(tags.c.name)).scalars()]


def contact_tag_names(conn: Connection, contact_id: int) -> list[str]:
    """The tags of one contact, sorted."""
    stmt = (
        select(tags.c.name)
        .join(contact_tags, contact_tags.c.tag_id == tags.c.id)
        .where(contact_tags.c.contact_id == contact_id)
        .order_by(tags.c.name)
    )
    return [str(n) for n in conn.execute(stmt).scalars()]


TAG_STAGE = "gatecast_tag_stage"
_stage_meta = MetaData()
tag_stage = Table(
    TAG_STAGE,
    _stage_meta,
    Column("phone", String, nullable=False),
    Column("tag_id", BigInteger, nullable=False),
    prefixes=["TEMPORARY"],
)


def stage_tags(conn: Connection, rows: Sequence[tuple[str, int]]) -> None:
    """Stage ``(phone, tag_id)`` pairs of an import (a fresh temporary table)."""
    conn.execute(text(f"DROP TABLE IF EXISTS {TAG_STAGE}"))
    tag_stage.create(conn)
    for start in range(0, len(rows), 5000):
        chunk = rows[start : start + 5000]
        conn.execute(tag_stage.insert(), [{"phone": p, "tag_id": t} for p, t in chunk])


_TAG_CONFLICT = ("tag_id", "contact_id")


def add_staged_tags(conn: Connection) -> None:
    """Tag contacts with the pairs of :func:`stage_tags`, then drop that stage."""
    pairs = (
        select(tag_stage.c.tag_id, contacts.c.id)
        .select_from(tag_stage.join(contacts, contacts.c.phone == tag_stage.c.phone))
        .where(true())
    )
    stmt = dialect_insert(conn, contact_tags).from_select(["tag_id", "contact_id"], pairs)
    conn.execute(stmt.on_conflict_do_nothing(index_elements=list(_TAG_CONFLICT)))
    conn.execute(text(f"DROP TABLE IF EXISTS {TAG_STAGE}"))


def tag_every_staged(conn: Connection, stage: Table, tag_ids: Sequence[int]) -> None:
    """Tag every contact of ``stage`` (an import's contact stage, by phone) with each of
    ``tag_ids``: one ``INSERT ... SELECT`` per tag."""
    for tag_id in tag_ids:
        every = (
            select(literal(tag_id, BigInteger()), contacts.c.id)
            .select_from(stage.join(contacts, contacts.c.phone == stage.c.phone))
            .where(true())
        )
        stmt = dialect_insert(conn, contact_tags).from_select(["tag_id", "contact_id"], every)
        conn.execute(stmt.on_conflict_do_nothing(index_elements=list(_TAG_CONFLICT)))


# --- saved segments -------------------------------------------------------------------------

_SEGMENT_COLUMNS = ("id", "name", "definition", "created_at")


def insert_segment(
    conn: Connection, name: str, definition: Mapping[str, Any], now: datetime
) -> int | None:
    """Store a segment; its id, or None when one of that name exists."""
    stmt = (
        dialect_insert(conn, segments)
        .values(name=name, definition=dict(definition), created_at=now)
        .on_conflict_do_nothing(index_elements=[segments.c.name])
        .returning(segments.c.id)
    )
    value = conn.execute(stmt).scalar_one_or_none()
    return None if value is None else int(value)


def update_segment(conn: Connection, name: str, definition: Mapping[str, Any]) -> RowMapping | None:
    """Give the segment called ``name`` a new definition; its row (id, name,
    definition, created_at), or None when there is none."""
    stmt = (
        update(segments)
        .where(segments.c.name == name)
        .values(definition=dict(definition))
        .returning(*(segments.c[c] for c in _SEGMENT_COLUMNS))
    )
    return conn.execute(stmt).mappings().first()


def segment_by_name(conn: Connection, name: str) -> RowMapping | None:
    """The segment called ``name`` (id, name, definition, created_at), or None."""
    stmt = select(*(segments.c[c] for c in _SEGMENT_COLUMNS)).where(segments.c.name == name)
    return conn.execute(stmt).mappings().first()


def segments_page(conn: Connection, *, limit: int, offset: int) -> tuple[int, list[RowMapping]]:
    """``(total, rows)``: one page of segments, by id."""
    return paging.page(conn, segments, _SEGMENT_COLUMNS, [], limit=limit, offset=offset)


def delete_segment(conn: Connection, name: str) -> bool:
    """Delete the segment called ``name``; False when there is none."""
    return conn.execute(delete(segments).where(segments.c.name == name)).rowcount > 0


__all__ = [
    "NAMES_LISTED",
    "TAG_STAGE",
    "AudienceCounts",
    "AudienceFilter",
    "add_staged_tags",
    "attribute_exists",
    "attribute_names",
    "audience_attribute_counts",
    "audience_counts",
    "audience_page",
    "contact_tag_names",
    "delete_segment",
    "ensure_tags",
    "excluded",
    "folded_value",
    "has_audience_members",
    "included",
    "insert_audience_members",
    "insert_segment",
    "segment_by_name",
    "segments_page",
    "selected",
    "stage_tags",
    "tag_every_staged",
    "tag_ids",
    "tag_names",
    "tag_stage",
    "update_segment",
]
