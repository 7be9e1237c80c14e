"""Erasure statements: every row holding one contact's number or personal data, removed
or anonymised inside the caller's one transaction.

What counts as "its" row and what replaces the data (the placeholder target, the state a
row not yet sent moves to) is ``campaigns.erasure``'s rule, passed in; these are the
statements. Every function leaves the transaction to its caller.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Connection,
    String,
    case,
    cast,
    delete,
    literal,
    null,
    or_,
    select,
    update,
)

from storage import tables
from storage.queries import delivery_search

_c = tables.contacts
_d = tables.deliveries
_s = tables.status_events
_i = tables.inbound_messages
_r = tables.import_rejects
_k = tables.idempotency_keys
_wm = tables.webhook_messages
_wa = tables.webhook_attempts

#: how many rows :func:`reject_pages` and :func:`stored_answer_pages` read at a time
PAGE = 5000


@dataclass(frozen=True)
class Anonymise:
    """How the deliveries of an erased contact are rewritten (``campaigns.erasure``'s rule).

    ``target_prefix`` + the row's id becomes its target; rows in ``stop_states`` (not yet
    handed to the gateway) move to ``stopped_state`` with ``stopped_error``.
    """

    target_prefix: str
    stop_states: tuple[str, ...]
    stopped_state: str
    stopped_error: str


def lock_contact(
    conn: Connection, *, phone_e164: str | None = None, contact_id: int | None = None
) -> tuple[int, str] | None:
    """The id and number of the contact with ``phone_e164`` (or id ``contact_id``), locked
    on PostgreSQL until the end of the transaction so no import changes it meanwhile; or
    None."""
    stmt = select(_c.c.id, _c.c.phone)
    if phone_e164 is not None:
        stmt = stmt.where(_c.c.phone == phone_e164)
    else:
        stmt = stmt.where(_c.c.id == contact_id)
    if conn.dialect.name == "postgresql":
        stmt = stmt.with_for_update()
    found = conn.execute(stmt).first()
    return None if found is None else (int(found.id), str(found.phone))


def secure_delete(conn: Connection, on: bool = True) -> bool:
    """SQLite: overwrite deleted and rewritten content with zeros for this connection (so
    an erased number does not stay readable in the file's free space; some builds do it by
    default); returns the setting it had, for :func:`secure_delete` to restore.
    PostgreSQL: nothing (dead rows are reclaimed by vacuum); returns ``on``."""
    if conn.dialect.name != "sqlite":
        return on
    before = bool(conn.exec_driver_sql("PRAGMA secure_delete").scalar())
    conn.exec_driver_sql(f"PRAGMA secure_delete = {'ON' if on else 'OFF'}")
    return before


def checkpoint(conn: Connection) -> None:
    """SQLite: copy the write-ahead log into the file and empty it (outside a transaction),
    so the old pages of the erased rows are overwritten now rather than at some later
    checkpoint. PostgreSQL: nothing."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


def anonymise_deliveries(
    conn: Connection, contact_id: int, phone_e164: str, rule: Anonymise
) -> tuple[int, list[str]]:
    """Rewrite the contact's delivery rows (by contact or by target): target replaced,
    content emptied, reply and error text removed, contact unlinked; rows not yet sent
    stopped. Returns how many rows, and the gateway message ids among them."""
    mine = or_(_d.c.contact_id == contact_id, _d.c.target == phone_e164)
    message_ids = [
        str(m)
        for m in conn.execute(
            select(_d.c.message_id).where(mine, _d.c.message_id.is_not(None))
        ).scalars()
    ]
    stopping = _d.c.state.in_(rule.stop_states)
    result = conn.execute(
        update(_d)
        .where(mine)
        .values(
            target=literal(rule.target_prefix) + cast(_d.c.id, String),
            contact_id=None,
            content={},
            reply_text=None,
            error=case((stopping, literal(rule.stopped_error)), else_=null()),
            state=case((stopping, literal(rule.stopped_state)), else_=_d.c.state),
        )
    )
    return int(result.rowcount), message_ids


def purge_rewritten_targets(conn: Connection) -> None:
    """Drop the anonymised rows' old targets from the target search's index for good
    (``delivery_search.purge_rewritten``)."""
    delivery_search.purge_rewritten(conn)


def scrub_status_events(
    conn: Connection, phone_e164: str, message_ids: Sequence[str], batch: int = 500
) -> int:
    """Remove the chat (the number) of the status events of ``message_ids`` and of every
    event whose chat is ``phone_e164``; how many were changed."""
    changed = int(
        conn.execute(update(_s).where(_s.c.chat == phone_e164).values(chat=None)).rowcount
    )
    for start in range(0, len(message_ids), batch):
        chunk = list(message_ids[start : start + batch])
        changed += int(
            conn.execute(
                update(_s)
                .where(_s.c.message_id.in_(chunk), _s.c.chat.is_not(None))
                .values(chat=None)
            ).rowcount
        )
    return changed


def scrub_inbound(
    conn: Connection,
    contact_id: int,
    phone_e164: str,
    chats: Sequence[str],
    target_prefix: str,
) -> int:
    """Anonymise the contact's inbound messages (by contact, sender phone or a chat
    address starting with one of ``chats``): chat replaced by ``target_prefix`` + id,
    sender phone, contact and text removed. How many."""
    mine = or_(
        _i.c.contact_id == contact_id,
        _i.c.sender_phone == phone_e164,
        *(_i.c.chat.like(prefix + "%") for prefix in chats),
    )
    return int(
        conn.execute(
            update(_i)
            .where(mine)
            .values(
                chat=literal(target_prefix) + cast(_i.c.id, String),
                sender_phone=None,
                contact_id=None,
                text="",
            )
        ).rowcount
    )


def delete_memberships(conn: Connection, contact_id: int) -> int:
    """Delete the contact's list memberships, tags and audience rows; how many."""
    removed = 0
    for table in (tables.list_members, tables.contact_tags, tables.audience_members):
        removed += int(conn.execute(delete(table).where(table.c.contact_id == contact_id)).rowcount)
    return removed


def delete_sender_chats(conn: Connection, phone: str, chats: Sequence[str]) -> int:
    """Delete the senders' memory of a chat with the number (the phone itself, or a chat
    id starting with one of ``chats``); how many rows."""
    c = tables.sender_chats
    where = or_(c.c.target == phone, *(c.c.target.startswith(p, autoescape=True) for p in chats))
    return int(conn.execute(delete(c).where(where)).rowcount)


def delete_test_sends(conn: Connection, contact_id: int, phone: str) -> int:
    """Delete the test sends to the number or rendered for the contact; how many."""
    t = tables.test_sends
    where = (t.c.contact_id == contact_id) | (t.c.target == phone)
    return int(conn.execute(delete(t).where(where)).rowcount)


def delete_contact(conn: Connection, contact_id: int) -> None:
    """Delete the contact row itself (after everything referring to it)."""
    conn.execute(delete(_c).where(_c.c.id == contact_id))


def _pages(
    conn: Connection, table: Any, columns: Sequence[Any], page: int
) -> Iterator[list[tuple[int, tuple[Any, ...]]]]:
    after = 0
    while True:
        rows = conn.execute(
            select(table.c.id, *columns).where(table.c.id > after).order_by(table.c.id).limit(page)
        ).all()
        if not rows:
            return
        yield [(int(r[0]), tuple(r[1:])) for r in rows]
        after = int(rows[-1][0])


def reject_pages(conn: Connection, page: int = PAGE) -> Iterator[list[tuple[int, tuple[Any, ...]]]]:
    """Every rejected import row as ``(id, (raw cells,))``, ``page`` at a time, by id."""
    return _pages(conn, _r, [_r.c.raw], page)


def stored_answer_pages(
    conn: Connection, page: int = PAGE
) -> Iterator[list[tuple[int, tuple[Any, ...]]]]:
    """Every idempotency record as ``(id, (path, stored answer))``, ``page`` at a time."""
    return _pages(conn, _k, [_k.c.path, _k.c.response_body], page)


def outbox_pages(conn: Connection, page: int = PAGE) -> Iterator[list[tuple[int, tuple[Any, ...]]]]:
    """Every outbound webhook message as ``(id, (order key, data))``, ``page`` at a time."""
    return _pages(conn, _wm, [_wm.c.recipient, _wm.c.data], page)


def delete_outbox_messages(conn: Connection, contact_key: str, ids: Sequence[int]) -> int:
    """Delete the outbound webhook messages ordered under ``contact_key`` and ``ids``, with
    their attempts; how many messages."""
    mine = [int(i) for i in conn.execute(select(_wm.c.id).where(_wm.c.recipient == contact_key))]
    every = sorted(set(mine) | set(ids))
    for start in range(0, len(every), 500):
        conn.execute(delete(_wa).where(_wa.c.message_id.in_(every[start : start + 500])))
    return _delete_ids(conn, _wm, every)


def _delete_ids(conn: Connection, table: Any, ids: Sequence[int], batch: int = 500) -> int:
    removed = 0
    for start in range(0, len(ids), batch):
        chunk = list(ids[start : start + batch])
        removed += int(conn.execute(delete(table).where(table.c.id.in_(chunk))).rowcount)
    return removed


def delete_rejects(conn: Connection, ids: Sequence[int]) -> int:
    """Delete the rejected import rows ``ids``; how many."""
    return _delete_ids(conn, _r, ids)


def delete_stored_answers(conn: Connection, ids: Sequence[int]) -> int:
    """Delete the idempotency records ``ids``; how many."""
    return _delete_ids(conn, _k, ids)


__all__ = [
    "PAGE",
    "Anonymise",
    "anonymise_deliveries",
    "checkpoint",
    "delete_contact",
    "delete_memberships",
    "delete_rejects",
    "delete_stored_answers",
    "lock_contact",
    "purge_rewritten_targets",
    "reject_pages",
    "scrub_inbound",
    "scrub_status_events",
    "secure_delete",
    "stored_answer_pages",
]
