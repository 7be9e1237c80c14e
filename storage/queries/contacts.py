"""Contacts, lists and list membership: bulk Core statements for SQLite and PostgreSQL.

Bulk upserts use ``INSERT ... ON CONFLICT`` (both dialects) through executemany in
batches; lookups by phone fetch whole batches with one ``IN`` query. Every function
takes a ``Connection`` and leaves the transaction to its caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
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
    cast,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import ColumnElement

from storage import tables
from storage.dialect import dialect_insert
from storage.queries import contact_search, paging
from storage.types import TextOrJsonb, UTCDateTime

contacts: Table = tables.contacts
lists: Table = tables.lists
list_members: Table = tables.list_members
import_rejects: Table = tables.import_rejects

#: rows per executemany / per IN (...) lookup
BATCH = 5000


class ContactState(NamedTuple):
    """What an import needs to know about a contact that already exists."""

    id: int
    opted_out: bool


def batched(items: Sequence[Any], size: int = BATCH) -> Iterator[Sequence[Any]]:
    """Consecutive slices of ``items`` of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _contact_update(conn: Connection, excluded: Any) -> dict[str, Any]:
    """An upsert's SET for an existing contact: ``raw_phone`` replaced, ``name`` only by a
    non-empty name, attributes merged (new keys win); ``opted_out`` never touched."""
    return {
        "raw_phone": excluded.raw_phone,
        "name": case((excluded.name != "", excluded.name), else_=contacts.c.name),
        "folded_name": case(
            (excluded.name != "", excluded.folded_name), else_=contacts.c.folded_name
        ),
        "attributes": _merge_json(conn, contacts.c.attributes, excluded.attributes),
        "folded": _merge_json(conn, contacts.c.folded, excluded.folded),
        "updated_at": excluded.updated_at,
    }


def _merge_json(conn: Connection, old: Any, new: Any) -> ColumnElement[Any]:
    """``old`` updated with the keys of ``new`` (JSON objects)."""
    if conn.dialect.name == "postgresql":
        merged: ColumnElement[Any] = old.op("||")(new)
        return merged
    return func.json_patch(old, new)


def existing_contacts(conn: Connection, phones: Sequence[str]) -> dict[str, ContactState]:
    """The contacts among ``phones`` (E.164) that already exist, by phone."""
    found: dict[str, ContactState] = {}
    for chunk in batched(phones):
        rows = conn.execute(
            select(contacts.c.phone, contacts.c.id, contacts.c.opted_out).where(
                contacts.c.phone.in_(chunk)
            )
        )
        for phone, cid, opted_out in rows:
            found[phone] = ContactState(int(cid), bool(opted_out))
    return found


def contact_ids(conn: Connection, phones: Sequence[str]) -> dict[str, int]:
    """Contact ids by phone for those of ``phones`` that exist."""
    out: dict[str, int] = {}
    for chunk in batched(phones):
        rows = conn.execute(
            select(contacts.c.phone, contacts.c.id).where(contacts.c.phone.in_(chunk))
        )
        out.update((phone, int(cid)) for phone, cid in rows)
    return out


def upsert_contacts(conn: Connection, rows: Sequence[Mapping[str, Any]], now: datetime) -> None:
    """Insert or update contacts by phone, in batches.

    Each row has ``phone`` (E.164), ``raw_phone``, ``name`` and ``attributes`` (a dict),
    optionally ``folded`` (the attributes as an audience compares them; default none).
    On conflict: ``raw_phone`` is replaced, ``name`` only by a non-empty name, and the
    attributes are merged (new keys win). ``opted_out`` is never touched here.
    """
    if not rows:
        return
    ins = dialect_insert(conn, contacts)
    stmt = ins.on_conflict_do_update(
        index_elements=[contacts.c.phone], set_=_contact_update(conn, ins.excluded)
    )
    for chunk in batched(rows):
        params = [
            {
                "phone": r["phone"],
                "raw_phone": r["raw_phone"],
                "name": r["name"],
                "attributes": r["attributes"],
                "folded": r.get("folded", {}),
                "folded_name": r.get("folded_name", ""),
                "opted_out": False,
                "created_at": now,
                "updated_at": now,
            }
            for r in chunk
        ]
        conn.execute(stmt, params)


def add_members(conn: Connection, list_id: int, ids: Iterable[int], now: datetime) -> None:
    """Add contacts to a list (already-present members are left as they are)."""
    stmt = dialect_insert(conn, list_members).on_conflict_do_nothing(
        index_elements=[list_members.c.list_id, list_members.c.contact_id]
    )
    rows = [{"list_id": list_id, "contact_id": cid, "added_at": now} for cid in ids]
    for chunk in batched(rows):
        conn.execute(stmt, chunk)


def ensure_list(conn: Connection, name: str, now: datetime) -> tuple[int, bool]:
    """The id of the list called ``name``, created if missing; and whether it was created."""
    found = get_list_id(conn, name)
    if found is not None:
        return found, False
    stmt = (
        dialect_insert(conn, lists)
        .values(name=name, description="", created_at=now)
        .on_conflict_do_nothing(index_elements=[lists.c.name])
        .returning(lists.c.id)
    )
    inserted = conn.execute(stmt).scalar_one_or_none()
    if inserted is not None:
        return int(inserted), True
    list_id = get_list_id(conn, name)  # created meanwhile by someone else
    assert list_id is not None
    return list_id, False


def get_list_id(conn: Connection, name: str) -> int | None:
    """The id of the list called ``name``, or None."""
    value = conn.execute(select(lists.c.id).where(lists.c.name == name)).scalar_one_or_none()
    return None if value is None else int(value)


def list_summaries(conn: Connection) -> list[Any]:
    """Every list with its member and opted-out member counts, by name."""
    members = (
        select(
            list_members.c.list_id,
            func.count().label("members"),
            func.count(case((contacts.c.opted_out.is_(True), 1))).label("opted_out"),
        )
        .join(contacts, contacts.c.id == list_members.c.contact_id)
        .group_by(list_members.c.list_id)
        .subquery()
    )
    stmt = (
        select(
            lists.c.id,
            lists.c.name,
            lists.c.description,
            lists.c.created_at,
            func.coalesce(members.c.members, 0).label("members"),
            func.coalesce(members.c.opted_out, 0).label("opted_out"),
        )
        .outerjoin(members, members.c.list_id == lists.c.id)
        .order_by(lists.c.name)
    )
    return list(conn.execute(stmt))


def list_member_phones(
    conn: Connection, list_id: int, *, include_opted_out: bool = False
) -> list[str]:
    """The E.164 phones of a list's members (opted-out members left out by default)."""
    stmt = (
        select(contacts.c.phone)
        .join(list_members, list_members.c.contact_id == contacts.c.id)
        .where(list_members.c.list_id == list_id)
        .order_by(contacts.c.id)
    )
    if not include_opted_out:
        stmt = stmt.where(contacts.c.opted_out.is_(False))
    return [str(p) for p in conn.execute(stmt).scalars()]


def get_contact(conn: Connection, phone_e164: str) -> Any | None:
    """The contact row for ``phone_e164`` (all columns), or None."""
    return conn.execute(select(contacts).where(contacts.c.phone == phone_e164)).first()


def contact_list_names(conn: Connection, contact_id: int) -> list[str]:
    """The names of the lists a contact belongs to."""
    stmt = (
        select(lists.c.name)
        .join(list_members, list_members.c.list_id == lists.c.id)
        .where(list_members.c.contact_id == contact_id)
        .order_by(lists.c.name)
    )
    return [str(n) for n in conn.execute(stmt).scalars()]


def set_opt_out(
    conn: Connection, phone_e164: str, opted_out: bool, reason: str | None, now: datetime
) -> bool:
    """Opt a contact out (or back in) with one UPDATE; False if no such contact."""
    stmt = (
        update(contacts)
        .where(contacts.c.phone == phone_e164)
        .values(
            opted_out=opted_out,
            opted_out_at=now if opted_out else None,
            opt_out_reason=reason if opted_out else None,
            updated_at=now,
        )
    )
    return conn.execute(stmt).rowcount > 0


def insert_rejects(conn: Connection, import_id: int, rejects: Sequence[Mapping[str, Any]]) -> None:
    """Store rejected rows (``row_number``, ``column``, ``reason``, ``raw``) in bulk."""
    if not rejects:
        return
    rows = [
        {
            "import_id": import_id,
            "row_number": r["row_number"],
            "column": r["column"],
            "reason": r["reason"][:500],
            "raw": r["raw"],
        }
        for r in rejects
    ]
    for chunk in batched(rows):
        conn.execute(import_rejects.insert(), chunk)


# --- staged bulk import: rows go to a temporary table, then set-based statements ------

STAGE = "gatecast_contact_stage"
_stage_meta = MetaData()
_STAGED_JSON = TextOrJsonb()
contact_stage = Table(
    STAGE,
    _stage_meta,
    Column("phone", String, nullable=False),  # distinct; no index, appends stay cheap
    Column("raw_phone", String, nullable=False),
    Column("name", String, nullable=False),
    # JSON objects: the attributes and their folded values (text on SQLite; on PostgreSQL
    # JSONB, parsed by the COPY while the client still sends rows, not by the insert)
    Column("attributes", _STAGED_JSON, nullable=False),
    Column("folded", _STAGED_JSON, nullable=False),
    Column("folded_name", String, nullable=False),  # the name folded (contact search)
    prefixes=["TEMPORARY"],
)
#: SQLite page cache for a bulk import (KiB); the default 2 MB makes big upserts spill
BULK_CACHE_KIB = 64 * 1024
_DEFAULT_CACHE = -2000


#: PostgreSQL: the transaction-scoped advisory lock that makes imports take turns
IMPORT_LOCK = 0x6761_7465_6361_7374  # "gatecast"
#: PostgreSQL: memory for the import's joins and sorts (the default 4 MB spills to disk)
BULK_WORK_MEM = "64MB"


def wait_for_imports(conn: Connection) -> None:
    """PostgreSQL: before one contact is inserted, wait for a running import to end (the
    import lock, shared: such inserts do not wait for each other). An import counts a
    phone new from its snapshot; a contact inserted meanwhile would make its insert fail
    on the unique phone. SQLite: nothing (one writer at a time already)."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock_shared(IMPORT_LOCK)))


def create_stage(conn: Connection) -> None:
    """Create the (empty) temporary staging table for this connection's transaction.

    On SQLite this also enlarges the connection's page cache until :func:`drop_stage`.
    On PostgreSQL it first waits for the import lock (:data:`IMPORT_LOCK`, held to the
    end of the transaction), so the contacts counted new stay new until inserted.
    """
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
    else:
        conn.execute(select(func.pg_advisory_xact_lock(IMPORT_LOCK)))
        conn.exec_driver_sql(f"SET LOCAL work_mem = '{BULK_WORK_MEM}'")
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {STAGE}")
    contact_stage.create(conn)


def drop_stage(conn: Connection) -> None:
    """Drop the staging table (and give SQLite its default page cache back)."""
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {STAGE}")
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(f"PRAGMA cache_size = {_DEFAULT_CACHE}")


def stage_rows(conn: Connection, rows: Iterable[tuple[str, str, str, str, str, str]]) -> None:
    """Append ``(phone, raw_phone, name, attributes_json, folded_json, folded_name)`` rows
    to the staging table.

    PostgreSQL: ``COPY`` through the driver; SQLite: the driver's executemany. The phones
    must be distinct; the attributes are JSON object text.
    """
    raw = conn.connection.driver_connection
    assert raw is not None
    if conn.dialect.name == "postgresql":
        with (
            raw.cursor() as cur,
            cur.copy(
                f"COPY {STAGE} (phone, raw_phone, name, attributes, folded, folded_name) FROM STDIN"
            ) as copy,
        ):
            for row in rows:
                copy.write_row(row)
        return
    raw.executemany(f"INSERT INTO {STAGE} VALUES (?, ?, ?, ?, ?, ?)", rows)


class StagedExisting(NamedTuple):
    """Staged phones that are already contacts: all, opted out, and (of the others) those
    whose stored raw phone, name or attributes the upsert would change."""

    existing: int
    opted_out: int
    changed: int


def _would_change(
    conn: Connection, name: Any, attributes: ColumnElement[Any]
) -> ColumnElement[bool]:
    """Whether upserting ``name`` and ``attributes`` (JSON) changes a stored contact (the
    rules of :func:`upsert_staged`: an empty name changes nothing, the attributes are
    merged). The number as written (``raw_phone``) is only its formatting: the same
    number written ``(202) 555-0143`` in one file and ``2025550143`` in another leaves the
    contact unchanged: not counted as updated, not written (it keeps the number as written
    when it last changed)."""
    stored = contacts.c.attributes
    if conn.dialect.name == "postgresql":
        attributes_change: ColumnElement[bool] = stored.op("||")(attributes) != stored
    else:  # SQLite: both sides as minified JSON text
        attributes_change = func.json_patch(stored, attributes) != func.json(stored)
    return or_(and_(name != "", contacts.c.name != name), attributes_change)


def staged_existing(conn: Connection) -> StagedExisting:
    """How many staged phones are already contacts, opted out, or would be changed."""
    changed = _would_change(conn, contact_stage.c.name, _staged_attributes(conn))
    not_opted_out = contacts.c.opted_out.is_(False)
    stmt = select(
        func.count(),
        func.count(case((contacts.c.opted_out.is_(True), 1))),
        func.count(case((and_(not_opted_out, changed), 1))),
    ).select_from(contact_stage.join(contacts, contacts.c.phone == contact_stage.c.phone))
    row = conn.execute(stmt).one()
    return StagedExisting(int(row[0]), int(row[1]), int(row[2]))


def _staged_attributes(conn: Connection, column: str = "attributes") -> ColumnElement[Any]:
    """The staged attributes (or their folded form) as a JSON value."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import JSONB

        return cast(contact_stage.c[column], JSONB)
    return contact_stage.c[column]


def store_staged(conn: Connection, list_id: int, now: datetime, *, existing: int) -> None:
    """Upsert every staged contact (rules of ``upsert_contacts``) and add it to the list;
    ``existing``: how many of them are contacts already (:func:`staged_existing`).

    SQLite: :func:`upsert_staged` then :func:`add_staged_members`. PostgreSQL
    (:func:`_store_staged_postgresql`): the same outcome in statements that skip the
    per-row work no row needs.
    """
    if conn.dialect.name == "postgresql":
        _store_staged_postgresql(conn, list_id, now, all_new=existing == 0)
        return
    upsert_staged(conn, now)
    add_staged_members(conn, list_id, now)


def _new_staged(all_new: bool) -> ColumnElement[bool]:
    """Which staged rows are new contacts. With ``all_new`` (none is stored), all: no
    anti-join, whose plan over an empty, vacuumed ``contacts`` on PostgreSQL is a nested
    loop that rescans the pages the insert itself adds, a cost that grows with the square
    of the rows."""
    if all_new:
        return true()
    return ~exists().where(contacts.c.phone == contact_stage.c.phone)


def _store_staged_postgresql(
    conn: Connection, list_id: int, now: datetime, *, all_new: bool
) -> None:
    """PostgreSQL's :func:`store_staged`, under the import lock of :func:`create_stage`.

    1. the staged contacts that exist are upserted (which locks every one of them, changed
       or not) and joined to the list;
    2. the new ones are inserted without ``ON CONFLICT`` (none can exist: imports take
       turns, and a single contact's insert waits for a running import,
       :func:`wait_for_imports`) and joined to the list from the ids their insert
       returns, in the same statement (no lookup by phone).

    Both run without the per-row triggers where :func:`_may_skip_triggers` allows
    it: every contact and the list the membership rows reference are then created or
    locked by this transaction, which is what the foreign-key triggers check and lock
    row by row. The contact search's trigger is off as well, so the new contacts are
    queued for it as one range (``contact_search_pending_ranges``) instead of a row each.
    """
    upsert_staged(conn, now, existing_only=True)
    skip_triggers = _may_skip_triggers(conn, list_id)
    with _triggers_skipped(conn, skip_triggers):
        add_staged_members(conn, list_id, now)  # the existing contacts: the only ones so far
        new_contacts = (
            insert(contacts)
            .from_select(
                list(_STAGE_COLUMNS),
                _stage_source(conn, now).where(_new_staged(all_new)),
            )
            .returning(contacts.c.id)
            .cte("new_contacts")
        )
        members = insert(list_members).from_select(
            ["list_id", "contact_id", "added_at"],
            select(literal(list_id, BigInteger()), new_contacts.c.id, literal(now, UTCDateTime())),
        )
        if skip_triggers:  # the search trigger did not queue them: one range does
            ranges = contact_search.pending_ranges
            queued = (
                select(func.min(new_contacts.c.id), func.max(new_contacts.c.id))
                .select_from(new_contacts)
                .having(func.count() > 0)
            )
            members_cte = members.cte("new_members")
            stmt: Any = insert(ranges).from_select(["first_id", "last_id"], queued)
            stmt = stmt.add_cte(members_cte)
        else:
            stmt = members
        conn.execute(stmt)


def _may_skip_triggers(conn: Connection, list_id: int) -> bool:
    """PostgreSQL: lock the list against deletion; whether this transaction may turn the
    per-row triggers off for its inserts into ``contacts`` and ``list_members``
    (``session_replication_role``).

    Only when neither table has a trigger but its foreign keys' and the search queue's
    (``contact_search.QUEUE_TRIGGERS``: the import then queues its new contacts by
    range), nor a rule, and the role may set it (superuser, or ``GRANT SET ON PARAMETER
    session_replication_role`` on PostgreSQL 15+); otherwise the triggers stay on and
    the import is only slower.
    """
    conn.execute(select(lists.c.id).where(lists.c.id == list_id).with_for_update(key_share=True))
    others = conn.execute(  # a rule would be switched off as well
        text(
            "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE NOT tgisinternal AND ("
            " tgrelid = 'list_members'::regclass OR (tgrelid = 'contacts'::regclass"
            " AND NOT tgname = ANY(:ours))))"
            " OR EXISTS (SELECT 1 FROM pg_rewrite"
            " WHERE ev_class IN ('list_members'::regclass, 'contacts'::regclass))"
        ),
        {"ours": list(contact_search.QUEUE_TRIGGERS)},
    ).scalar_one()
    if others:
        return False
    try:
        with conn.begin_nested():
            conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
            conn.exec_driver_sql("SET LOCAL session_replication_role = origin")
    except DBAPIError:
        return False
    return True


@contextmanager
def _triggers_skipped(conn: Connection, skip: bool) -> Iterator[None]:
    """With ``skip``, the statements inside run without per-row triggers (PostgreSQL)."""
    if not skip:
        yield
        return
    conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
    yield
    conn.exec_driver_sql("SET LOCAL session_replication_role = origin")


#: the contacts columns :func:`_stage_source` gives values for, in its order
_STAGE_COLUMNS = (
    "phone",
    "raw_phone",
    "name",
    "attributes",
    "folded",
    "folded_name",
    "opted_out",
    "created_at",
    "updated_at",
)


def _stage_source(conn: Connection, now: datetime, *, opted_out: bool = False) -> Any:
    """The staged rows as new contacts' column values (:data:`_STAGE_COLUMNS`)."""
    return select(
        contact_stage.c.phone,
        contact_stage.c.raw_phone,
        contact_stage.c.name,
        _staged_attributes(conn),
        _staged_attributes(conn, "folded"),
        contact_stage.c.folded_name,
        literal(opted_out),
        literal(now, UTCDateTime()),
        literal(now, UTCDateTime()),
    )


def upsert_staged(conn: Connection, now: datetime, *, existing_only: bool = False) -> None:
    """Insert or update every staged contact in one statement (rules of ``upsert_contacts``);
    with ``existing_only``, only those already stored.

    A contact the upsert would not change is left untouched (its ``updated_at`` too), but
    on PostgreSQL locked like the others until the transaction ends.
    """
    ins = dialect_insert(conn, contacts)
    source = _stage_source(conn, now)
    if existing_only:
        source = source.join_from(
            contact_stage, contacts, contacts.c.phone == contact_stage.c.phone
        )
    source = source.where(true())  # SQLite needs a WHERE to parse INSERT ... SELECT ... ON CONFLICT
    stmt = ins.from_select(list(_STAGE_COLUMNS), source)
    excluded = stmt.excluded
    stmt = stmt.on_conflict_do_update(
        index_elements=[contacts.c.phone],
        set_=_contact_update(conn, excluded),
        where=_would_change(conn, excluded.name, excluded.attributes),
    )
    conn.execute(stmt)


def add_staged_members(conn: Connection, list_id: int, now: datetime) -> None:
    """Add every staged contact to a list (present members left as they are)."""
    source = (
        select(literal(list_id, BigInteger()), contacts.c.id, literal(now, UTCDateTime()))
        .select_from(contact_stage.join(contacts, contacts.c.phone == contact_stage.c.phone))
        .where(true())
        .order_by(contacts.c.id)
    )
    stmt = (
        dialect_insert(conn, list_members)
        .from_select(["list_id", "contact_id", "added_at"], source)
        .on_conflict_do_nothing(index_elements=[list_members.c.list_id, list_members.c.contact_id])
    )
    conn.execute(stmt)


class StagedOptOut(NamedTuple):
    """What :func:`opt_out_staged` did: contacts created opted out, existing contacts
    opted out, and staged contacts that already were."""

    created: int
    opted_out: int
    already: int


def opt_out_staged(conn: Connection, reason: str, now: datetime) -> StagedOptOut:
    """Opt every staged phone out: existing contacts are opted out (nothing else of them
    changes), unknown ones inserted opted out with the staged name and attributes.

    Runs under the import lock of :func:`create_stage` on PostgreSQL, so no other import
    inserts the new phones meanwhile.
    """
    staged = contact_stage.outerjoin(contacts, contacts.c.phone == contact_stage.c.phone)
    row = conn.execute(
        select(
            func.count(),
            func.count(contacts.c.id),
            func.count(case((contacts.c.opted_out.is_(True), 1))),
        ).select_from(staged)
    ).one()
    total, existing, already = int(row[0]), int(row[1]), int(row[2])
    conn.execute(
        update(contacts)
        .where(
            contacts.c.opted_out.is_(False),
            contacts.c.phone.in_(select(contact_stage.c.phone)),
        )
        .values(opted_out=True, opted_out_at=now, opt_out_reason=reason, updated_at=now)
    )
    conn.execute(
        insert(contacts).from_select(
            [*_STAGE_COLUMNS, "opted_out_at", "opt_out_reason"],
            _stage_source(conn, now, opted_out=True)
            .add_columns(literal(now, UTCDateTime()), literal(reason))
            .where(_new_staged(existing == 0)),
        )
    )
    return StagedOptOut(total - existing, existing - already, already)


# --- reads for the faces -------------------------------------------------------------------


def contacts_page(
    conn: Connection,
    columns: Sequence[str],
    *,
    search: str | None,
    list_id: int | None,
    opted_out: bool | None,
    limit: int,
    offset: int,
) -> tuple[int, list[RowMapping]]:
    """``(total, rows)``: contacts whose phone or name contains ``search``, optionally in
    one list or of one opt-out state; one page of ``columns``, by id."""
    conds: list[Any] = []
    if search:
        conds.append(
            or_(
                contacts.c.phone.contains(search.strip(), autoescape=True),
                func.lower(contacts.c.name).contains(search.strip().lower(), autoescape=True),
            )
        )
    if opted_out is not None:
        conds.append(contacts.c.opted_out == opted_out)
    if list_id is not None:
        conds.append(
            contacts.c.id.in_(
                select(list_members.c.contact_id).where(list_members.c.list_id == list_id)
            )
        )
    return paging.page(conn, contacts, columns, conds, limit=limit, offset=offset)


def contact_by_id(conn: Connection, columns: Sequence[str], contact_id: int) -> RowMapping | None:
    """``columns`` of the contact ``contact_id``, or None."""
    stmt = select(*(contacts.c[name] for name in columns)).where(contacts.c.id == contact_id)
    return conn.execute(stmt).mappings().first()


__all__ = [
    "BATCH",
    "BULK_WORK_MEM",
    "IMPORT_LOCK",
    "STAGE",
    "ContactState",
    "StagedExisting",
    "StagedOptOut",
    "add_members",
    "add_staged_members",
    "batched",
    "contact_by_id",
    "contact_ids",
    "contact_list_names",
    "contact_stage",
    "contacts_page",
    "create_stage",
    "drop_stage",
    "ensure_list",
    "existing_contacts",
    "get_contact",
    "get_list_id",
    "insert_rejects",
    "list_member_phones",
    "list_summaries",
    "opt_out_staged",
    "set_opt_out",
    "stage_rows",
    "staged_existing",
    "store_staged",
    "upsert_contacts",
    "upsert_staged",
    "wait_for_imports",
]
