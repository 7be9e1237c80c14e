"""One page of a table's rows and how many match: what the faces' listings read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, RowMapping, Table, func, select


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


__all__ = ["page"]
