"""Contact management in SQL: the search predicate, the search table's catching up, one
contact's writes (create, edit, tags, list membership) and reads (its deliveries and
replies), the export's rows.

A search arrives folded (the domain's rule, ``campaigns.segments.fold_value``): it matches
a contact whose folded name (``contacts.folded_name``) or any folded attribute value
contains it, or whose phone contains its digits. Both dialects answer from a search table
(migration 0014): SQLite's FTS5 trigram table, PostgreSQL's table with a trigram GIN index
per column. Writes do not fill it: triggers queue the contacts a write inserted or whose
searched text changed (``contact_search_pending``) and :func:`catch_up` fills the table
from the queue in bulk. While contacts wait there, a search checks them directly, so none
is missed. A page counts its total only up to :data:`COUNT_CAP` past its offset. Every
function takes a ``Connection`` and leaves the transaction to its caller.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    MetaData,
    RowMapping,
    Table,
    Text,
    delete,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    text,
    true,
    union,
    update,
)
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import Select

from storage import tables
from storage.dialect import dialect_insert
from storage.queries import paging

contacts: Table = tables.contacts
lists: Table = tables.lists
list_members: Table = tables.list_members
tags: Table = tables.tags
contact_tags: Table = tables.contact_tags
deliveries: Table = tables.deliveries
campaigns: Table = tables.campaigns
inbound_messages: Table = tables.inbound_messages

#: rows the export reads per statement
EXPORT_BATCH = 5000


@dataclass(frozen=True)
class ContactFilter:
    """A search resolved: ``text`` folded (empty: no text condition), ``digits`` of it
    (empty: the phone is not compared), a list, a tag, an opt-out state; or ``where``:
    the conditions of a resolved audience (a saved segment) instead."""

    text: str = ""
    digits: str = ""
    list_id: int | None = None
    tag_id: int | None = None
    opted_out: bool | None = None
    where: tuple[ColumnElement[bool], ...] = ()


#: SQLite: the FTS5 trigram search table (rowid = the contact's id)
contact_search = Table(
    "contact_search",
    MetaData(),
    Column("rowid", BigInteger),
    Column("name", Text),
    Column("phone", Text),
    Column("attrs", Text),
)
#: PostgreSQL: the search table, a trigram GIN index on each text column
pg_contact_search = Table(
    "contact_search",
    MetaData(),
    Column("contact_id", BigInteger),
    Column("name", Text),
    Column("phone", Text),
    Column("attrs", Text),
)
#: the contacts whose search row is missing or stale, queued by triggers on ``contacts``
pending: Table = tables.contact_search_pending
#: ranges of new contacts queued at once by a PostgreSQL import (migration 0019)
pending_ranges: Table = tables.contact_search_pending_ranges
#: PostgreSQL: the triggers on ``contacts`` that queue its writes (migration 0014); an
#: import that switches them off queues its new contacts by range instead
QUEUE_TRIGGERS = (
    "tr_contacts_search_insert",
    "tr_contacts_search_update",
    "tr_contacts_search_delete",
)
#: the trigram tokenizer indexes runs of this many characters; shorter searches scan
TRIGRAM = 3
#: what joins a contact's attribute values in the search table
SEPARATOR = "\x1f"
#: contacts :func:`catch_up` fills into the search table per call, by dialect: SQLite's
#: FTS5 writes a segment per transaction, so bigger batches cost less a contact (measured:
#: 200k contacts in 4.4 s by 5,000, 2.4 s by 50,000); PostgreSQL gains nothing from more
CATCH_UP_BATCH = {"sqlite": 50_000, "postgresql": 5_000}


def _values_contain(conn: Connection, folded: str) -> ColumnElement[bool]:
    """Whether one of the contact's folded attribute values contains ``folded``."""
    if conn.dialect.name == "postgresql":
        each = func.jsonb_each_text(contacts.c.folded).table_valued("key", "value")
    else:
        each = func.json_each(contacts.c.folded).table_valued("key", "value")
    return exists().select_from(each).where(each.c.value.contains(folded, autoescape=True))


def _phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _fts_match(conn: Connection, f: ContactFilter) -> str | None:
    """SQLite: the FTS5 query of the search, or None when it is not served by the table
    (another dialect, or a part shorter than :data:`TRIGRAM`)."""
    if conn.dialect.name != "sqlite":
        return None
    parts = []
    if f.text:
        parts.append("{name attrs} : " + _phrase(f.text))
    if f.digits:
        parts.append("phone : " + _phrase(f.digits))
    if not parts or min(len(x) for x in (f.text, f.digits) if x) < TRIGRAM:
        return None
    return " OR ".join(parts)


def catching_up(conn: Connection) -> bool:
    """Whether contacts wait for their search row (:func:`catch_up` has work)."""
    queued = select(pending.c.contact_id).limit(1)
    ranged = select(pending_ranges.c.id).limit(1)
    return conn.execute(queued).first() is not None or conn.execute(ranged).first() is not None


def _queued_ids() -> list[Select[Any]]:
    """The ids of every contact waiting for its search row: the queued ones, and those in
    a queued range (selects to join in a ``UNION``: SQLite nests none)."""
    in_range = contacts.c.id.between(pending_ranges.c.first_id, pending_ranges.c.last_id)
    ranged = select(contacts.c.id).select_from(pending_ranges.join(contacts, in_range))
    return [select(pending.c.contact_id), ranged]


def _text_match(
    conn: Connection, f: ContactFilter
) -> tuple[list[ColumnElement[bool]], ColumnElement[Any]]:
    """The conditions of the text part of a search (name, attribute value, phone digits),
    and the order a page walks.

    Searches of at least :data:`TRIGRAM` characters go through the search table: SQLite's
    FTS5 ``MATCH`` (joined by rowid and walked in rowid order, so a page stops early),
    PostgreSQL's ``OR`` of three trigram-indexed ``LIKE`` (a bitmap OR, or a walk of its
    key in id order for a common match). Its text matches exactly as the contact's does,
    so with nothing queued that is the whole search. While contacts are queued, the
    queued ids join the table's and the exact test decides (the table may hold a queued
    contact's old text). Shorter searches (and PostgreSQL without ``pg_trgm``, which
    scans the search table) scan with the exact test.
    """
    exact: list[ColumnElement[bool]] = []
    if f.text:
        exact.append(contacts.c.folded_name.contains(f.text, autoescape=True))
        exact.append(_values_contain(conn, f.text))
    if f.digits:
        exact.append(contacts.c.phone.contains(f.digits, autoescape=True))
    match = _fts_match(conn, f)
    short = len(f.text) < TRIGRAM and len(f.digits) < TRIGRAM
    found: Select[Any]
    if match is not None:
        fts = literal_column("contact_search").op("MATCH")(literal(match, Text()))
        found = select(contact_search.c.rowid).where(fts)
    elif conn.dialect.name == "postgresql" and not short:
        search = pg_contact_search
        narrow: list[ColumnElement[bool]] = []
        if f.text:
            narrow.append(search.c.name.contains(f.text, autoescape=True))
            narrow.append(search.c.attrs.contains(f.text, autoescape=True))
        if f.digits:
            narrow.append(search.c.phone.contains(f.digits, autoescape=True))
        found = select(search.c.contact_id).where(or_(*narrow))
    else:
        return [or_(*exact)], contacts.c.id
    # the attribute values are joined by U+001F: a search holding it is tested exactly
    if SEPARATOR not in f.text and not catching_up(conn):
        if match is not None:
            return [contacts.c.id == contact_search.c.rowid, fts], contact_search.c.rowid
        return [contacts.c.id.in_(found)], contacts.c.id
    either = union(found, *_queued_ids())
    return [contacts.c.id.in_(either), or_(*exact)], contacts.c.id


class RangeFill(NamedTuple):
    """What :func:`fill_range` did: ids of the range it covered, search rows it filled."""

    covered: int
    filled: int


def fill_range(conn: Connection, *, limit: int) -> RangeFill:
    """Fill the search rows of up to ``limit`` ids of the oldest queued range straight
    from ``contacts`` (no trip through the queue: an import's new contacts cost one
    insert a row here, not a queue insert, a queue delete and a vacuum) and shrink the
    range, or drop it when done. Ids of contacts no longer there are skipped; queue
    entries of the covered ids go first, so a write committed meanwhile is in the rows
    filled or queued anew. ``covered`` 0: no range left (on PostgreSQL, none that a
    concurrent call does not hold)."""
    r = pending_ranges
    oldest = select(r.c.id, r.c.first_id, r.c.last_id).order_by(r.c.id).limit(1)
    if conn.dialect.name == "postgresql":
        oldest = oldest.with_for_update(skip_locked=True)
    row = conn.execute(oldest).first()
    if row is None:
        return RangeFill(0, 0)
    first, last = int(row.first_id), min(int(row.last_id), int(row.first_id) + limit - 1)
    conn.execute(delete(pending).where(pending.c.contact_id.between(first, last)))
    params = {"first": first, "last": last}
    if conn.dialect.name == "postgresql":
        filled = conn.execute(text(_PG_FILL.format(where=_IN_RANGE)), params).rowcount
    else:
        ids = conn.execute(text(f"SELECT id FROM contacts c WHERE {_IN_RANGE}"), params)
        _forget_sqlite(conn, list(ids.scalars()))
        filled = conn.execute(text(_SQLITE_FILL.format(where=_IN_RANGE)), params).rowcount
    if last >= row.last_id:
        conn.execute(delete(r).where(r.c.id == row.id))
    else:
        conn.execute(update(r).where(r.c.id == row.id).values(first_id=last + 1))
    return RangeFill(last - first + 1, int(filled or 0))


def catch_up_batch(conn: Connection) -> int:
    """How many contacts one :func:`catch_up` takes on this connection's database."""
    return CATCH_UP_BATCH.get(conn.dialect.name, 5_000)


def catch_up(conn: Connection, *, after: int = 0, limit: int | None = None) -> tuple[int, int]:
    """Fill the search rows of up to ``limit`` queued contacts with ids above ``after``
    and take them off the queue: ``(how many, the highest id taken)``; fewer than
    ``limit``: no more above ``after`` (on PostgreSQL, none that a concurrent call does
    not hold). One bulk statement a dialect; ``after`` spares PostgreSQL a walk over the
    queue entries earlier batches deleted and no vacuum has removed yet."""
    params = {"after": after, "n": limit or catch_up_batch(conn)}
    if conn.dialect.name == "postgresql":
        row = conn.execute(_PG_CATCH_UP, params).one()
        return int(row[0]), int(row[1] if row[1] is not None else after)
    batch = _SQLITE_QUEUED.replace("?", ":after", 1).replace("?", ":n", 1)
    # the driver's own cursor: plain ints, not a SQLAlchemy Row a contact (0.55 against
    # 1.4 us a contact, measured; the Rows also woke the garbage collector)
    raw = conn.connection.driver_connection
    assert raw is not None
    ids = [int(i) for (i,) in raw.execute(_SQLITE_QUEUED, (after, params["n"]))]
    if not ids:
        return 0, after
    _forget_sqlite(conn, ids)
    conn.execute(text(_SQLITE_FILL.format(where=f"c.id IN ({batch})")), params)
    done = conn.execute(
        text(f"DELETE FROM contact_search_pending WHERE contact_id IN ({batch})"), params
    )
    return int(done.rowcount or 0), int(ids[-1])


def _forget_sqlite(conn: Connection, ids: Sequence[int]) -> None:
    """SQLite: delete the search rows of ``ids``. FTS5 finds a row by ``rowid = ?`` only
    (``rowid IN (...)`` scans the whole table); the driver's own executemany, since
    SQLAlchemy's costs about 10 us a row in Python."""
    raw = conn.connection.driver_connection
    assert raw is not None
    raw.executemany("DELETE FROM contact_search WHERE rowid = ?", [(i,) for i in ids])


#: SQLite: the next queued contacts (:func:`catch_up`), in the driver's parameter style
_SQLITE_QUEUED = (
    "SELECT contact_id FROM contact_search_pending WHERE contact_id > ? ORDER BY contact_id LIMIT ?"
)
#: the contacts of a range (:func:`fill_range`), ``c`` in the fill statements
_IN_RANGE = "c.id BETWEEN :first AND :last"
#: the search rows of the contacts ``c`` that ``{where}`` picks, filled (SQLite: FTS5)
_SQLITE_FILL = (
    "INSERT INTO contact_search (rowid, name, phone, attrs) SELECT c.id, c.folded_name,"
    " c.phone, coalesce((SELECT group_concat(value, char(31)) FROM json_each(c.folded)), '')"
    " FROM contacts c WHERE {where}"
)
_PG_FILL = (
    "INSERT INTO contact_search (contact_id, name, phone, attrs)"
    " SELECT c.id, c.folded_name, c.phone,"
    " coalesce((SELECT string_agg(value, chr(31)) FROM jsonb_each_text(c.folded)), '')"
    " FROM contacts c WHERE {where}"
    " ON CONFLICT (contact_id) DO UPDATE SET name = excluded.name, phone = excluded.phone,"
    " attrs = excluded.attrs"
)


def tidy_after_catch_up(engine: Engine) -> None:
    """After a large catch-up (PostgreSQL): vacuum the queue, whose deleted entries a
    search would otherwise step over until autovacuum comes, and refresh the search
    table's statistics. Outside any transaction (``VACUUM`` must be); SQLite has nothing
    to tidy."""
    if engine.dialect.name != "postgresql":
        return
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM (ANALYZE) contact_search_pending"))
        conn.execute(text("ANALYZE contact_search"))


_PG_CATCH_UP = text(  # ids as arrays: index probes whatever the (stale) statistics say
    "WITH batch AS (DELETE FROM contact_search_pending WHERE contact_id = ANY(ARRAY("
    "SELECT contact_id FROM contact_search_pending WHERE contact_id > :after"
    " ORDER BY contact_id LIMIT :n FOR UPDATE SKIP LOCKED)) RETURNING contact_id),"
    " filled AS ("
    + _PG_FILL.format(where="c.id = ANY(ARRAY(SELECT contact_id FROM batch))")
    + " RETURNING 1)"
    " SELECT count(*), max(contact_id) FROM batch"
)


def conditions(conn: Connection, f: ContactFilter) -> list[ColumnElement[bool]]:
    """The conditions of a contact the filter selects."""
    return _plan(conn, f)[0]


def _plan(
    conn: Connection, f: ContactFilter
) -> tuple[list[ColumnElement[bool]], ColumnElement[Any]]:
    """The conditions of a contact the filter selects, and the order a page walks."""
    conds: list[ColumnElement[bool]] = list(f.where)
    order: ColumnElement[Any] = contacts.c.id
    if f.text or f.digits:
        text_conds, order = _text_match(conn, f)
        conds.extend(text_conds)
    if f.opted_out is not None:
        conds.append(contacts.c.opted_out == f.opted_out)
    if f.list_id is not None:
        conds.append(
            exists().where(
                list_members.c.contact_id == contacts.c.id, list_members.c.list_id == f.list_id
            )
        )
    if f.tag_id is not None:
        conds.append(
            exists().where(
                contact_tags.c.contact_id == contacts.c.id, contact_tags.c.tag_id == f.tag_id
            )
        )
    return conds, order


#: a search counts its matches up to this many; above, its total says "more than"
COUNT_CAP = 1_000


def search_page(
    conn: Connection, columns: Sequence[str], f: ContactFilter, *, limit: int, offset: int
) -> tuple[int, bool, list[RowMapping]]:
    """``(total, exact, rows)``: how many contacts the filter selects (counted up to
    :data:`COUNT_CAP` past the page: ``exact`` False when there are more) and one page of
    them, by id."""
    conds, order = _plan(conn, f)
    rows = conn.execute(
        select(*(contacts.c[name] for name in columns))
        .where(*conds)
        .order_by(order)
        .limit(limit)
        .offset(offset)
    ).mappings()
    cap = min(offset + COUNT_CAP, 2**62)  # a LIMIT stays within 64 bits
    counted = select(contacts.c.id).where(*conds).order_by(order).limit(cap + 1).subquery()
    total = int(conn.execute(select(func.count()).select_from(counted)).scalar_one())
    return min(total, cap), total <= cap, list(rows)


def search_keyset(
    conn: Connection, columns: Sequence[str], f: ContactFilter, *, limit: int, at: paging.Keyset
) -> tuple[int, bool, paging.KeysetRows]:
    """``(total, exact, page)``: how many contacts the filter selects (counted up to
    :data:`COUNT_CAP`: ``exact`` False when there are more) and one page of them from
    ``at``, by id: an index range whatever the page."""
    conds, order = _plan(conn, f)
    found = paging.keyset_page(conn, contacts, columns, conds, limit=limit, at=at, key=order)
    if paging.whole(at, found):
        return len(found.rows), True, found
    total, exact = paging.capped_count(conn, contacts, conds, COUNT_CAP, key=order)
    return total, exact, found


# --- one contact's writes -------------------------------------------------------------------


def insert_contact(conn: Connection, values: Mapping[str, Any]) -> int | None:
    """Insert one contact; its id, or None when a contact with that phone exists."""
    stmt = (
        dialect_insert(conn, contacts)
        .values(**values)
        .on_conflict_do_nothing(index_elements=[contacts.c.phone])
        .returning(contacts.c.id)
    )
    value = conn.execute(stmt).scalar_one_or_none()
    return None if value is None else int(value)


def contact_for_update(conn: Connection, phone: str) -> RowMapping | None:
    """``id``, ``name``, ``attributes`` of the contact ``phone``, locked on PostgreSQL."""
    stmt = select(contacts.c.id, contacts.c.name, contacts.c.attributes).where(
        contacts.c.phone == phone
    )
    if conn.dialect.name == "postgresql":
        stmt = stmt.with_for_update()
    return conn.execute(stmt).mappings().first()


def update_contact(conn: Connection, contact_id: int, values: Mapping[str, Any]) -> None:
    """Set ``values`` on the contact ``contact_id``."""
    conn.execute(update(contacts).where(contacts.c.id == contact_id).values(**values))


def add_member(conn: Connection, list_id: int, contact_id: int, now: datetime) -> None:
    """Put the contact in the list (already there: nothing happens)."""
    stmt = dialect_insert(conn, list_members).values(
        list_id=list_id, contact_id=contact_id, added_at=now
    )
    conn.execute(stmt.on_conflict_do_nothing(index_elements=["list_id", "contact_id"]))


def remove_member(conn: Connection, contact_id: int, list_ids: Sequence[int] | None) -> int:
    """Take the contact out of ``list_ids`` (None: every list); how many memberships went."""
    stmt = delete(list_members).where(list_members.c.contact_id == contact_id)
    if list_ids is not None:
        stmt = stmt.where(list_members.c.list_id.in_(list(list_ids)))
    return int(conn.execute(stmt).rowcount or 0)


def tag_contacts(conn: Connection, tag_id: int, f: ContactFilter) -> int:
    """Tag every contact the filter selects (one ``INSERT ... SELECT``); how many gained it."""
    source = select(literal(tag_id, BigInteger()), contacts.c.id).where(
        *conditions(conn, f),
        ~exists().where(
            contact_tags.c.tag_id == tag_id, contact_tags.c.contact_id == contacts.c.id
        ),
        true(),
    )
    stmt = dialect_insert(conn, contact_tags).from_select(["tag_id", "contact_id"], source)
    stmt = stmt.on_conflict_do_nothing(index_elements=["tag_id", "contact_id"])
    return len(conn.execute(stmt.returning(contact_tags.c.contact_id)).all())


def tag_contact(conn: Connection, contact_id: int, tag_ids: Sequence[int]) -> None:
    """Give one contact the tags ``tag_ids`` (one ``INSERT``; a tag it has stays)."""
    if not tag_ids:
        return
    stmt = dialect_insert(conn, contact_tags).on_conflict_do_nothing(
        index_elements=["tag_id", "contact_id"]
    )
    conn.execute(stmt, [{"tag_id": t, "contact_id": contact_id} for t in sorted(set(tag_ids))])


def id_windows(conn: Connection, size: int) -> list[tuple[int, int]]:
    """The contacts' ids in ranges of ``size`` (``(first, last)``, both included), lowest
    first; none when there is no contact."""
    low, high = conn.execute(select(func.min(contacts.c.id), func.max(contacts.c.id))).one()
    if low is None:
        return []
    return [
        (start, min(start + size - 1, int(high))) for start in range(int(low), int(high) + 1, size)
    ]


def within(f: ContactFilter, first: int, last: int) -> ContactFilter:
    """``f`` narrowed to the contacts with an id from ``first`` to ``last``."""
    return replace(f, where=(*f.where, contacts.c.id.between(first, last)))


def untag_contact(conn: Connection, contact_id: int, tag_ids: Sequence[int]) -> None:
    """Take the tags ``tag_ids`` off one contact (one ``DELETE``)."""
    if tag_ids:
        conn.execute(
            delete(contact_tags).where(
                contact_tags.c.contact_id == contact_id, contact_tags.c.tag_id.in_(list(tag_ids))
            )
        )


def untag_contacts(conn: Connection, tag_id: int, f: ContactFilter) -> int:
    """Take the tag off every contact the filter selects; how many lost it."""
    chosen = select(contacts.c.id).where(*conditions(conn, f), true())
    stmt = delete(contact_tags).where(
        contact_tags.c.tag_id == tag_id, contact_tags.c.contact_id.in_(chosen)
    )
    return len(conn.execute(stmt.returning(contact_tags.c.contact_id)).all())


def add_members_where(conn: Connection, list_id: int, f: ContactFilter, now: datetime) -> int:
    """Put every contact the filter selects in the list (one ``INSERT ... SELECT``; a
    member stays as it is); how many joined."""
    source = select(
        literal(list_id, BigInteger()), contacts.c.id, literal(now, list_members.c.added_at.type)
    ).where(
        *conditions(conn, f),
        ~exists().where(
            list_members.c.list_id == list_id, list_members.c.contact_id == contacts.c.id
        ),
        true(),
    )
    stmt = dialect_insert(conn, list_members).from_select(
        ["list_id", "contact_id", "added_at"], source
    )
    stmt = stmt.on_conflict_do_nothing(index_elements=["list_id", "contact_id"])
    return len(conn.execute(stmt.returning(list_members.c.contact_id)).all())


def opt_out_where(conn: Connection, f: ContactFilter, reason: str, now: datetime) -> int:
    """Opt out every contact the filter selects that is not opted out yet (one
    ``UPDATE``); how many changed."""
    chosen = select(contacts.c.id).where(*conditions(conn, f), true())
    stmt = (
        update(contacts)
        .where(contacts.c.id.in_(chosen), contacts.c.opted_out.is_(False))
        .values(opted_out=True, opted_out_at=now, opt_out_reason=reason, updated_at=now)
    )
    return len(conn.execute(stmt.returning(contacts.c.id)).all())


def phones_filter(conn: Connection, phones: Sequence[str]) -> tuple[list[str], ContactFilter]:
    """The phones of ``phones`` that are no contact, and a filter selecting the others."""
    found: set[str] = set()
    for start in range(0, len(phones), EXPORT_BATCH):
        chunk = list(phones[start : start + EXPORT_BATCH])
        found.update(
            str(p)
            for p in conn.execute(select(contacts.c.phone).where(contacts.c.phone.in_(chunk)))
            .scalars()
            .all()
        )
    missing = [p for p in phones if p not in found]
    return missing, ContactFilter(where=(contacts.c.phone.in_(sorted(found)),))


# --- one contact's reads --------------------------------------------------------------------

DELIVERY_COLUMNS = (
    "id",
    "campaign_id",
    "state",
    "error",
    "queued_at",
    "sent_at",
    "delivered_at",
    "read_at",
    "failed_at",
    "replied_at",
)


def contact_deliveries(conn: Connection, contact_id: int, *, limit: int) -> list[RowMapping]:
    """The contact's last ``limit`` deliveries, newest first, with their campaign's name
    (``campaign_name``) and :data:`DELIVERY_COLUMNS`."""
    stmt = (
        select(
            *(deliveries.c[c] for c in DELIVERY_COLUMNS), campaigns.c.name.label("campaign_name")
        )
        .join(campaigns, campaigns.c.id == deliveries.c.campaign_id)
        .where(deliveries.c.contact_id == contact_id)
        .order_by(deliveries.c.id.desc())
        .limit(limit)
    )
    return list(conn.execute(stmt).mappings())


def contact_replies(conn: Connection, contact_id: int, *, limit: int) -> list[RowMapping]:
    """The contact's last ``limit`` incoming messages (``text``, ``received_at``,
    ``is_opt_out``), newest first."""
    stmt = (
        select(
            inbound_messages.c.text, inbound_messages.c.received_at, inbound_messages.c.is_opt_out
        )
        .where(inbound_messages.c.contact_id == contact_id)
        .order_by(inbound_messages.c.id.desc())
        .limit(limit)
    )
    return list(conn.execute(stmt).mappings())


def contact_list_ids(conn: Connection, contact_id: int) -> list[tuple[int, str]]:
    """``(id, name)`` of the lists the contact is in, by name."""
    stmt = (
        select(lists.c.id, lists.c.name)
        .join(list_members, list_members.c.list_id == lists.c.id)
        .where(list_members.c.contact_id == contact_id)
        .order_by(lists.c.name)
    )
    return [(int(i), str(n)) for i, n in conn.execute(stmt)]


# --- export ---------------------------------------------------------------------------------

EXPORT_COLUMNS = ("id", "phone", "name", "attributes", "opted_out", "opted_out_at")


def export_rows(conn: Connection, f: ContactFilter) -> Iterator[list[tuple[RowMapping, list[str]]]]:
    """The contacts the filter selects, by id, in batches of ``(row, tag names)``
    (:data:`EXPORT_COLUMNS`); keyset pages, so memory stays bounded."""
    conds = conditions(conn, f)
    after = 0
    while True:
        rows = list(
            conn.execute(
                select(*(contacts.c[c] for c in EXPORT_COLUMNS))
                .where(contacts.c.id > after, *conds)
                .order_by(contacts.c.id)
                .limit(EXPORT_BATCH)
            ).mappings()
        )
        if not rows:
            return
        ids = [int(r["id"]) for r in rows]
        by_contact: dict[int, list[str]] = {}
        pairs = conn.execute(
            select(contact_tags.c.contact_id, tags.c.name)
            .join(tags, tags.c.id == contact_tags.c.tag_id)
            .where(contact_tags.c.contact_id.in_(ids))
            .order_by(tags.c.name)
        )
        for cid, name in pairs:
            by_contact.setdefault(int(cid), []).append(str(name))
        yield [(r, by_contact.get(int(r["id"]), [])) for r in rows]
        after = ids[-1]


def has_trigram_indexes(conn: Connection) -> bool:
    """PostgreSQL: whether migration 0014 could make the trigram indexes (else: scans)."""
    if conn.dialect.name != "postgresql":
        return False
    sql = "SELECT count(*) FROM pg_indexes WHERE indexname = 'ix_contact_search_name_trgm'"
    return bool(conn.execute(text(sql)).scalar_one())


__all__ = [
    "CATCH_UP_BATCH",
    "COUNT_CAP",
    "DELIVERY_COLUMNS",
    "EXPORT_BATCH",
    "EXPORT_COLUMNS",
    "QUEUE_TRIGGERS",
    "TRIGRAM",
    "ContactFilter",
    "RangeFill",
    "add_member",
    "add_members_where",
    "catch_up",
    "catch_up_batch",
    "catching_up",
    "conditions",
    "contact_deliveries",
    "contact_for_update",
    "contact_list_ids",
    "contact_replies",
    "contact_search",
    "export_rows",
    "fill_range",
    "has_trigram_indexes",
    "insert_contact",
    "opt_out_where",
    "pending",
    "pending_ranges",
    "pg_contact_search",
    "phones_filter",
    "remove_member",
    "search_keyset",
    "search_page",
    "tag_contacts",
    "tidy_after_catch_up",
    "untag_contacts",
]
