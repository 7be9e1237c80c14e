"""Uploaded media files (``campaigns.media``): their rows, and their bytes a part at a time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, LargeBinary, RowMapping, Text, cast, delete, func, insert, select

from storage import tables

_m = tables.media
#: every column but the bytes and the signing key
_DESCRIBED = (
    _m.c.id,
    _m.c.name,
    _m.c.kind,
    _m.c.content_type,
    _m.c.size,
    _m.c.sha256,
    _m.c.created_by,
    _m.c.created_at,
)


def insert_media(conn: Connection, row: dict[str, Any]) -> int:
    """Store one file; its id."""
    return int(conn.execute(insert(_m).values(**row).returning(_m.c.id)).scalar_one())


def describe(conn: Connection, media_id: int, *, with_key: bool = False) -> RowMapping | None:
    """One file's row without its bytes (with its signing key if asked), or None."""
    columns = (*_DESCRIBED, _m.c.url_key) if with_key else _DESCRIBED
    return conn.execute(select(*columns).where(_m.c.id == media_id)).mappings().first()


def url_key(conn: Connection, media_id: int) -> str | None:
    """The key a file's URLs are signed with, or None when it does not exist."""
    found = conn.execute(select(_m.c.url_key).where(_m.c.id == media_id)).scalar_one_or_none()
    return None if found is None else str(found)


def listing(conn: Connection, *, limit: int, offset: int) -> tuple[Sequence[RowMapping], int]:
    """Files newest first (a page) and how many there are."""
    rows = (
        conn.execute(select(*_DESCRIBED).order_by(_m.c.id.desc()).limit(limit).offset(offset))
        .mappings()
        .all()
    )
    total = int(conn.execute(select(func.count()).select_from(_m)).scalar_one())
    return rows, total


def campaigns_naming(conn: Connection, fragment: str) -> Sequence[RowMapping]:
    """The campaigns (``id``, ``name``, ``state``; not deleted ones) whose campaign
    file holds the text ``fragment`` (a file's link path), by id."""
    c = tables.campaigns
    pattern = "%" + fragment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    stmt = (
        select(c.c.id, c.c.name, c.c.state)
        .where(cast(c.c.spec, Text).like(pattern, escape="\\"), c.c.deleted_at.is_(None))
        .order_by(c.c.id)
    )
    return conn.execute(stmt).mappings().all()


def delete_media(conn: Connection, media_id: int) -> bool:
    """Delete one file (its bytes too); False when there is none."""
    return bool(conn.execute(delete(_m).where(_m.c.id == media_id)).rowcount)


def read_part(conn: Connection, media_id: int, offset: int, length: int) -> bytes:
    """``length`` bytes of a file's content from ``offset`` (0-based); fewer at its end.

    The cost is the part's, not the file's: SQLite reads the blob incrementally (its
    blob I/O; ``substr`` would read the whole blob for each part), PostgreSQL slices a
    value stored uncompressed (``STORAGE EXTERNAL``, migration 0028) by its TOAST chunks."""
    if conn.dialect.name == "sqlite":
        return _sqlite_part(conn, media_id, offset, length)
    part_of = func.substr(_m.c.data, offset + 1, length, type_=LargeBinary)
    part = conn.execute(select(part_of).where(_m.c.id == media_id)).scalar_one_or_none()
    return bytes(part) if part is not None else b""


def _sqlite_part(conn: Connection, media_id: int, offset: int, length: int) -> bytes:
    import sqlite3

    raw = conn.connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)
    try:
        with raw.blobopen("media", "data", media_id, readonly=True) as blob:
            blob.seek(min(offset, len(blob)))
            return blob.read(length)
    except sqlite3.OperationalError:  # no such row (deleted meanwhile)
        return b""
