"""Reads and updates of import runs (``imports``) and their rejected rows (``import_rejects``).

Every function takes a ``Connection`` and leaves the transaction to its caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, RowMapping, func, select, update

from storage import tables

_jobs = tables.imports
_rejects = tables.import_rejects
_lists = tables.lists


def import_runs(
    conn: Connection, columns: Sequence[str], *, import_id: int | None = None, limit: int = 50
) -> list[RowMapping]:
    """``columns`` of the import ``import_id`` (else of the latest ``limit`` imports, newest
    first), with ``list_name``, the name of the list each imports into."""
    stmt = select(*(_jobs.c[name] for name in columns), _lists.c.name.label("list_name"))
    stmt = stmt.select_from(_jobs.outerjoin(_lists, _lists.c.id == _jobs.c.list_id))
    if import_id is not None:
        stmt = stmt.where(_jobs.c.id == import_id)
    else:
        stmt = stmt.order_by(_jobs.c.id.desc()).limit(limit)
    return list(conn.execute(stmt).mappings())


def rejects_page(
    conn: Connection, import_id: int, *, limit: int, offset: int
) -> tuple[int, list[RowMapping]]:
    """``(total, rows)``: an import's rejected rows (row number, column, reason, raw
    cells), by row number; one page."""
    total = conn.execute(select(func.count()).where(_rejects.c.import_id == import_id)).scalar_one()
    rows = conn.execute(
        select(_rejects.c.row_number, _rejects.c.column, _rejects.c.reason, _rejects.c.raw)
        .where(_rejects.c.import_id == import_id)
        .order_by(_rejects.c.row_number, _rejects.c.id)
        .limit(limit)
        .offset(offset)
    ).mappings()
    return int(total), list(rows)


def rejects_totals(conn: Connection, import_ids: Sequence[int]) -> dict[int, int]:
    """How many rejected rows each of ``import_ids`` has (one grouped count; 0 left out)."""
    if not import_ids:
        return {}
    stmt = (
        select(_rejects.c.import_id, func.count())
        .where(_rejects.c.import_id.in_(list(import_ids)))
        .group_by(_rejects.c.import_id)
    )
    return {int(i): int(n) for i, n in conn.execute(stmt)}


def running_imports(conn: Connection) -> list[tuple[int, str | None, datetime]]:
    """``(id, runner, started_at)`` of every import still marked ``running``."""
    stmt = select(_jobs.c.id, _jobs.c.runner, _jobs.c.started_at).where(_jobs.c.status == "running")
    return [(int(i), runner, started) for i, runner, started in conn.execute(stmt)]


def fail_running(conn: Connection, import_ids: Sequence[int], error: str, *, now: datetime) -> None:
    """Mark those of ``import_ids`` still ``running`` as failed with ``error``."""
    conn.execute(
        update(_jobs)
        .where(_jobs.c.id.in_(list(import_ids)), _jobs.c.status == "running")
        .values(status="failed", error=error, finished_at=now)
    )


__all__ = ["fail_running", "import_runs", "rejects_page", "rejects_totals", "running_imports"]
