"""A page of records and how many match in all: what a listing returns; the listings'
cursors (decision 39 in docs/architecture.md)."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Generic, TypeVar

from storage.queries.paging import LAST, Keyset, KeysetRows

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of records and how many match in all."""

    items: list[T]
    total: int


@dataclass(frozen=True)
class CursorPage(Page[T]):
    """One page of a listing walked by cursor. ``total_exact`` False: ``total`` is a
    lower bound (the count stopped there). ``next_cursor`` / ``prev_cursor``: the pages
    after and before this one (None: none)."""

    total_exact: bool = True
    next_cursor: str | None = None
    prev_cursor: str | None = None


class BadCursor(ValueError):
    """A cursor this listing did not give out (mangled, edited, or another listing's)."""


#: version of the cursor's text; a cursor of another version is refused
_VERSION = "1"


def _sign(body: str) -> str:
    # an integrity check, not a secret: a cursor holds only a row id, and an edited one
    # is refused rather than silently starting somewhere else
    return hashlib.blake2s(body.encode(), digest_size=6, person=b"gc-cur").hexdigest()


def encode_cursor(listing: str, direction: str, row_id: int) -> str:
    """The opaque cursor of ``listing`` ("deliveries", "contacts"): the rows after
    (``direction`` "a") or before ("b") the row ``row_id``."""
    body = f"{_VERSION}.{listing}.{direction}.{row_id}"
    raw = f"{body}.{_sign(body)}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(listing: str, cursor: str | None) -> Keyset:
    """Where the page of ``cursor`` starts (the first page for None); :class:`BadCursor`
    for a cursor :func:`encode_cursor` did not make for ``listing``."""
    if cursor is None:
        return Keyset()
    if cursor == "last":
        return Keyset(before=LAST)
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        version, kind, direction, row_id, sign = text.split(".")
        body = f"{version}.{kind}.{direction}.{row_id}"
        ident = int(row_id)
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise BadCursor("not a cursor this API gave out") from None
    if version != _VERSION or sign != _sign(body) or direction not in ("a", "b"):
        raise BadCursor("not a cursor this API gave out (edited, or of another version)")
    if kind != listing:
        raise BadCursor(f"a cursor of the {kind} listing, not of {listing}")
    if not 0 <= ident <= LAST or str(ident) != row_id:
        raise BadCursor("not a cursor this API gave out")
    return Keyset(after=ident) if direction == "a" else Keyset(before=ident)


def cursors(listing: str, found: KeysetRows, ids: list[int]) -> tuple[str | None, str | None]:
    """``(next_cursor, prev_cursor)`` of a page whose rows have the ids ``ids``."""
    after = encode_cursor(listing, "a", ids[-1]) if found.more_after and ids else None
    before = encode_cursor(listing, "b", ids[0]) if found.more_before and ids else None
    return after, before


__all__ = ["BadCursor", "CursorPage", "Page", "cursors", "decode_cursor", "encode_cursor"]
