"""One page of a table's rows and how many match: what the faces' listings read.

Two ways to a page. :func:`keyset_page` (what the listings use, decision 39 in
docs/architecture.md) walks an index from a row id: rows after ``after`` (or the page just
before ``before``), so any page costs the same whatever the table's size.
:func:`page` skips ``offset`` rows and counts every match: its cost grows with both, kept
for the routes that still take ``offset``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, RowMapping, Table, func, select

#: the largest row id (a signed 64-bit integer): ``before`` it is the last page
LAST = 2**63 - 1


def page(
    conn: Connection,
    table: Table,
    columns: Sequence[str],
    conds: Sequence[Any],
    *,
    limit: int,
    offset: int,
) -> tuple[int, list[RowMapping]]:
    """``(total, rows)``: how many rows of ``table`` match ``conds``, and ``columns`` of
    one page of them, by id."""
    total = conn.execute(select(func.count()).select_from(table).where(*conds)).scalar_one()
    rows = conn.execute(
        select(*(table.c[name] for name in columns))
        .where(*conds)
        .order_by(table.c.id)
        .limit(limit)
        .offset(offset)
    ).mappings()
    return int(total), list(rows)


@dataclass(frozen=True)
class Keyset:
    """Where a page starts: after the row id ``after`` (None: at the first row), or
    ending just before the row id ``before`` (:data:`LAST`: the last page)."""

    after: int | None = None
    before: int | None = None


@dataclass(frozen=True)
class KeysetRows:
    """One page of rows by id, and whether rows match before and after it."""

    rows: list[RowMapping]
    more_before: bool
    more_after: bool


def keyset_page(
    conn: Connection,
    table: Table,
    columns: Sequence[str],
    conds: Sequence[Any],
    *,
    limit: int,
    at: Keyset,
    key: ColumnElement[Any] | None = None,
) -> KeysetRows:
    """``columns`` of up to ``limit`` rows of ``table`` matching ``conds`` from ``at``,
    in the order of ``key`` (the table's id, or a column equal to it): one index range
    read to ``limit + 1`` rows, which tells whether more follow. Whether rows precede a
    page read forwards is not read: a page after a row has that row before it."""
    order: ColumnElement[Any] = table.c.id if key is None else key
    stmt = select(*(table.c[name] for name in columns)).where(*conds)
    if at.before is not None:
        found = list(
            conn.execute(
                stmt.where(order < at.before).order_by(order.desc()).limit(limit + 1)
            ).mappings()
        )
        rows = found[:limit][::-1]
        return KeysetRows(rows, len(found) > limit, at.before != LAST)
    if at.after is not None:
        stmt = stmt.where(order > at.after)
    found = list(conn.execute(stmt.order_by(order).limit(limit + 1)).mappings())
    return KeysetRows(found[:limit], at.after is not None, len(found) > limit)


def whole(at: Keyset, found: KeysetRows) -> bool:
    """Whether ``found`` holds every matching row (a first page with none after it): its
    length is then the exact total, no count needed (a rare search's one scan, not two)."""
    return at == Keyset() and not found.more_after


def capped_count(
    conn: Connection,
    table: Table,
    conds: Sequence[Any],
    cap: int,
    *,
    key: ColumnElement[Any] | None = None,
) -> tuple[int, bool]:
    """``(n, exact)``: how many rows match ``conds``, counted up to ``cap`` (``exact``
    False: more than ``cap`` match, ``n`` is ``cap``)."""
    order: ColumnElement[Any] = table.c.id if key is None else key
    counted = select(order).where(*conds).limit(cap + 1).subquery()
    n = int(conn.execute(select(func.count()).select_from(counted)).scalar_one())
    return min(n, cap), n <= cap


__all__ = ["LAST", "Keyset", "KeysetRows", "capped_count", "keyset_page", "page", "whole"]
