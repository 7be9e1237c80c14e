"""The dialect's own INSERT, the one with ``ON CONFLICT`` (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table


def dialect_insert(conn: Connection, table: Table) -> Any:
    """``INSERT`` for ``conn``'s dialect (it has ``on_conflict_do_update`` / ``_do_nothing``)."""
    return insert_for(conn.dialect.name, table)


def insert_for(dialect: str, table: Table) -> Any:
    """``INSERT`` for the dialect named ``dialect`` (``"sqlite"`` or ``"postgresql"``)."""
    if dialect == "postgresql":  # each dialect imported when used (decision 44)
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    if dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported database: {dialect}")
