"""Column types shared by every table: UTC-aware datetimes, JSON, 64-bit keys."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Integer
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

#: 64-bit primary keys on PostgreSQL; SQLite needs INTEGER for its rowid alias.
BigId = BigInteger().with_variant(Integer(), "sqlite")

#: JSON documents: JSONB on PostgreSQL, text-backed JSON elsewhere.
JsonDoc = JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(TypeDecorator[datetime]):
    """Stores aware datetimes as UTC; always returns aware UTC datetimes.

    Naive datetimes are refused on the way in: every time in gatecast is UTC-aware.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        if value.tzinfo is None:
            raise ValueError("naive datetime refused: pass a timezone-aware (UTC) datetime")
        as_utc: datetime = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return as_utc.replace(tzinfo=None)
        return as_utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        stored: datetime = value
        if stored.tzinfo is None:
            return stored.replace(tzinfo=UTC)
        return stored.astimezone(UTC)


def utcnow() -> datetime:
    """The current time, UTC-aware (the default clock; tests inject their own)."""
    return datetime.now(UTC)
