"""SQL for the audit log: append an entry, one filtered page (newest first), every
matching entry in order for an export, and the entries erasure scrubs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, RowMapping, func, insert, select, update

from storage import tables

_a = tables.audit_log

COLUMNS = (
    "id",
    "at",
    "actor",
    "role",
    "action",
    "target_type",
    "target_id",
    "source",
    "outcome",
    "status",
    "detail",
    "key_id",
    "changes",
)


@dataclass(frozen=True)
class AuditFilter:
    """Which entries: by actor, action (a substring), target, outcome, a time range."""

    actor: str | None = None
    action: str | None = None
    target_type: str | None = None
    target_id: str | None = None
    outcome: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def conditions(self) -> list[Any]:
        """The WHERE terms of this filter."""
        conds: list[Any] = []
        if self.actor is not None:
            conds.append(_a.c.actor == self.actor)
        if self.action is not None:
            conds.append(_a.c.action.contains(self.action, autoescape=True))
        if self.target_type is not None:
            conds.append(_a.c.target_type == self.target_type)
        if self.target_id is not None:
            conds.append(_a.c.target_id == self.target_id)
        if self.outcome is not None:
            conds.append(_a.c.outcome == self.outcome)
        if self.since is not None:
            conds.append(_a.c.at >= self.since)
        if self.until is not None:
            conds.append(_a.c.at < self.until)
        return conds


def append(engine: Engine, **values: Any) -> int:
    """Store one entry; returns its id."""
    with engine.begin() as conn:
        return int(conn.execute(insert(_a).values(**values).returning(_a.c.id)).scalar_one())


def entries_page(
    engine: Engine, where: AuditFilter, *, limit: int, offset: int
) -> tuple[int, list[RowMapping]]:
    """``(total, rows)``: how many entries match, and one page of them, newest first."""
    conds = where.conditions()
    with engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(_a).where(*conds)).scalar_one())
        rows = (
            conn.execute(
                select(*(_a.c[c] for c in COLUMNS))
                .where(*conds)
                .order_by(_a.c.id.desc())
                .limit(limit)
                .offset(offset)
            )
            .mappings()
            .all()
        )
    return total, list(rows)


def all_entries(engine: Engine, where: AuditFilter, batch: int = 1000) -> Iterator[RowMapping]:
    """Every matching entry, oldest first, read ``batch`` at a time (an export)."""
    conds = where.conditions()
    after = 0
    while True:
        with engine.connect() as conn:
            rows = (
                conn.execute(
                    select(*(_a.c[c] for c in COLUMNS))
                    .where(*conds, _a.c.id > after)
                    .order_by(_a.c.id)
                    .limit(batch)
                )
                .mappings()
                .all()
            )
        if not rows:
            return
        yield from rows
        after = int(rows[-1]["id"])


def detail_pages(conn: Connection, page: int = 1000) -> Iterator[list[tuple[int, tuple[Any, ...]]]]:
    """Every entry as ``(id, (target id, detail))``, ``page`` at a time, by id."""
    after = 0
    while True:
        rows = conn.execute(
            select(_a.c.id, _a.c.target_id, _a.c.detail)
            .where(_a.c.id > after)
            .order_by(_a.c.id)
            .limit(page)
        ).all()
        if not rows:
            return
        yield [(int(r[0]), (r[1], r[2])) for r in rows]
        after = int(rows[-1][0])


def scrub(conn: Connection, ids: Sequence[int], **values: Any) -> int:
    """Set ``values`` (a replacement detail, target id) on the entries ``ids``; how many."""
    done = 0
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        done += int(conn.execute(update(_a).where(_a.c.id.in_(chunk)).values(**values)).rowcount)
    return done


__all__ = [
    "COLUMNS",
    "AuditFilter",
    "all_entries",
    "append",
    "detail_pages",
    "entries_page",
    "scrub",
]


def names_of(engine: Engine, table_name: str, ids: Sequence[int]) -> dict[int, str]:
    """The ``name`` of each row of ``table_name`` (campaigns, segments, lists, users,
    webhook endpoints by ``url``) among ``ids``: how the audit page names its targets."""
    table = tables.metadata.tables[table_name]
    column = table.c.name if "name" in table.c else table.c.url
    if not ids:
        return {}
    with engine.connect() as conn:
        rows = conn.execute(select(table.c.id, column).where(table.c.id.in_(list(ids))))
        return {int(i): str(n) for i, n in rows}
