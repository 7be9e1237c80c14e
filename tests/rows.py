"""Bare rows for tests that need one to hang others on (no service rule applies)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert

from storage import tables


def campaign_row(
    conn: Connection,
    at: datetime,
    *,
    name: str = "c",
    state: str = "running",
    spec: dict[str, Any] | None = None,
    **columns: Any,
) -> int:
    """A text campaign's row, created and updated ``at``, with ``spec`` (default empty)
    and any other ``columns``; its id."""
    made = insert(tables.campaigns).values(
        name=name,
        state=state,
        spec=spec or {},
        message_type="text",
        created_at=at,
        updated_at=at,
        **columns,
    )
    return int(conn.execute(made.returning(tables.campaigns.c.id)).scalar_one())
