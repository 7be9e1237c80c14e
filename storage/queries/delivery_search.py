"""The deliveries' target search (migration 0025): which rows hold a substring of
their target, without reading the campaign's rows.

PostgreSQL answers ``target LIKE '%...%'`` from its trigram GIN index by itself. SQLite
has ``deliveries_target``, an FTS5 trigram table over ``deliveries.target``: the
statements that insert deliveries index their new rows in bulk (:func:`index_new`; a
per-row trigger into FTS5 costs about 30 us a row), up to the id kept in
``deliveries_target_mark``. A search uses the table only while that mark is the highest
id (:func:`target_match`); rows inserted by another path are then read as before until
the next :func:`index_new` takes them in.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Column, Connection, MetaData, Table, Text, literal, text
from sqlalchemy.sql.elements import ColumnElement

from storage import tables

#: SQLite: the FTS5 trigram table over ``deliveries.target`` (rowid = the delivery's id)
deliveries_target = Table(
    "deliveries_target",
    MetaData(),
    Column("rowid", BigInteger),
    Column("target", Text),
)
#: the trigram tokenizer indexes runs of this many characters; shorter searches scan
TRIGRAM = 3
#: ``LIKE``'s wildcards: a search holding one is not handed to FTS5 (its ``LIKE`` has no
#: ``ESCAPE``), it reads the campaign's rows
_WILDCARDS = ("%", "_")

_INDEX_NEW = (
    "INSERT INTO deliveries_target (rowid, target) SELECT id, target FROM deliveries"
    " WHERE id > (SELECT last_id FROM deliveries_target_mark)"
)
_MOVE_MARK = (
    "UPDATE deliveries_target_mark SET last_id = (SELECT coalesce(max(id), 0) FROM deliveries)"
)


def index_new(conn: Connection) -> None:
    """SQLite: index the target of every delivery above the mark in one statement and
    move the mark to the highest id (in the caller's transaction, which holds SQLite's
    write lock, so no row slips in between). No-op on PostgreSQL."""
    if conn.dialect.name != "sqlite":
        return
    conn.exec_driver_sql(_INDEX_NEW)
    conn.exec_driver_sql(_MOVE_MARK)


def purge_rewritten(conn: Connection) -> None:
    """SQLite: merge ``deliveries_target`` into one segment, so the entries of rewritten
    targets (an erased number: the update trigger deleted them) are gone from the file,
    not only marked deleted in a newer segment (FTS5 keeps the old entries until a merge;
    with ``secure_delete`` on, the freed pages are zeroed). The whole index is rewritten:
    for rare writes such as an erasure. No-op on PostgreSQL (its index entries of the old
    row go with the row's version at vacuum)."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(
            "INSERT INTO deliveries_target (deliveries_target) VALUES ('optimize')"
        )


def _indexed(conn: Connection) -> bool:
    """SQLite: whether every delivery's target is in ``deliveries_target``."""
    row = conn.execute(
        text(
            "SELECT (SELECT last_id FROM deliveries_target_mark)"
            " >= (SELECT coalesce(max(id), 0) FROM deliveries)"
        )
    ).scalar()
    return bool(row)


def target_match(
    conn: Connection, target: str
) -> tuple[list[ColumnElement[bool]], ColumnElement[Any]] | None:
    """SQLite: the conditions that join ``deliveries`` to the FTS5 rows whose target
    contains ``target``, and the key a page walks (the FTS5 rowid: its order is the
    id's, so a page stops at its last row); None when the table cannot answer (another
    dialect, a search shorter than :data:`TRIGRAM` or holding a wildcard, rows not yet
    indexed): the caller's exact condition then reads the rows."""
    if conn.dialect.name != "sqlite" or len(target) < TRIGRAM:
        return None
    if any(w in target for w in _WILDCARDS) or not _indexed(conn):
        return None
    d = tables.deliveries
    pattern = literal("%" + target + "%", Text())
    return [d.c.id == deliveries_target.c.rowid, deliveries_target.c.target.like(pattern)], (
        deliveries_target.c.rowid
    )


__all__ = ["TRIGRAM", "deliveries_target", "index_new", "purge_rewritten", "target_match"]
