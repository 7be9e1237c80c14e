"""The identical-content guard's state per sender (``instances.body_digest``, ``body_run``,
``body_at``): read and written by primary key, a row per sender, never the history.

The rule (how many in a row, how long a hold) is ``scheduler.content_guard``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy import Connection, bindparam, select, text, update

from storage import tables

_i = tables.instances

#: one sender's state: the digest of its last body claimed, the identical run, when
BodyRun = tuple[str | None, int, datetime | None]


def body_runs(conn: Connection, instance_ids: Sequence[str]) -> dict[str, BodyRun]:
    """``instance_id -> (digest, run, at)`` of the given senders."""
    if not instance_ids:
        return {}
    rows = conn.execute(
        select(_i.c.instance_id, _i.c.body_digest, _i.c.body_run, _i.c.body_at).where(
            _i.c.instance_id.in_(list(instance_ids))
        )
    )
    return {str(r[0]): (r[1], int(r[2] or 0), r[3]) for r in rows}


def set_body_runs(conn: Connection, runs: Mapping[str, BodyRun]) -> None:
    """Store each sender's new ``(digest, run, at)``: one statement over arrays on
    PostgreSQL (an executemany there runs a statement per sender), an executemany on
    SQLite."""
    if not runs:
        return
    items = sorted(runs.items())
    if conn.dialect.name == "postgresql":
        conn.execute(
            text(
                f"UPDATE {_i.name} AS i SET body_digest = v.digest, body_run = v.run, "
                "body_at = v.at FROM unnest(CAST(:ids AS text[]), CAST(:digests AS text[]), "
                "CAST(:runs AS integer[]), CAST(:ats AS timestamptz[])) "
                "AS v(id, digest, run, at) WHERE i.instance_id = v.id"
            ),
            {
                "ids": [k for k, _ in items],
                "digests": [d for _, (d, _n, _at) in items],
                "runs": [n for _, (_d, n, _at) in items],
                "ats": [at for _, (_d, _n, at) in items],
            },
        )
        return
    stmt = (
        update(_i)
        .where(_i.c.instance_id == bindparam("b_id"))
        .values(
            body_digest=bindparam("b_digest"),
            body_run=bindparam("b_run"),
            body_at=bindparam("b_at", type_=_i.c.body_at.type),
        )
    )
    conn.execute(
        stmt,
        [{"b_id": k, "b_digest": d, "b_run": n, "b_at": at} for k, (d, n, at) in items],
    )


__all__ = ["BodyRun", "body_runs", "set_body_runs"]
